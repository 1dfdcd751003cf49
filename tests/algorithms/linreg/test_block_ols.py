"""``block_ols`` against per-block ``numpy.linalg.lstsq`` on each kind of block it branches on."""

from __future__ import annotations

import numpy as np

from dpstats.algorithms.linreg._ssp import block_ols


def _blocks_design(rng):
    n, m = 240, 6
    g = rng.integers(0, 4, n)
    X = np.column_stack([np.ones(n), rng.normal(size=n), rng.lognormal(size=n),
                         *((g == k).astype(float) for k in (1, 2, 3))])
    y = X @ np.arange(1.0, 7.0) + rng.normal(size=n)
    blocks = rng.permutation(n).reshape(m, n // m)
    X[blocks[1], 4] = 0.0                 # a dummy whose level block 1 lacks: a zero column
    X[blocks[2], 3:6] = 0.0               # three zero columns
    X[blocks[3], 3] = X[blocks[3], 1]     # a duplicated column: rank deficient with no zero column
    X[blocks[4], 5] = 0.0
    X[blocks[4], 3] = X[blocks[4], 1]     # both
    return X, y, blocks


def test_block_ols_is_the_minimum_norm_solution_of_every_block():
    X, y, blocks = _blocks_design(np.random.default_rng(11))
    coef, unident = block_ols(X, y, blocks)
    for b, idx in enumerate(blocks):
        want = np.linalg.lstsq(X[idx], y[idx], rcond=None)[0]
        np.testing.assert_allclose(coef[b], want, rtol=1e-9, atol=1e-9)
    assert not unident[0].any() and not unident[5].any()   # full rank
    assert unident[1].tolist() == [False, False, False, False, True, False]
    assert unident[2].tolist() == [False, False, False, True, True, True]
    assert unident[3, [1, 3]].all() and not unident[3, [0, 2, 4, 5]].any()
    assert unident[4, [1, 3, 5]].all() and not unident[4, [0, 2, 4]].any()
    assert coef[1, 4] == 0.0 and np.all(coef[2, 3:] == 0.0)


def test_block_ols_of_an_all_zero_block():
    X = np.zeros((8, 3))
    coef, unident = block_ols(X, np.ones(8), np.arange(8).reshape(2, 4))
    assert np.all(coef == 0.0) and unident.all()
