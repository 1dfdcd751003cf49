"""Faster formulations that must give the same numbers, bit for bit, as the plain numpy/scipy calls."""

from __future__ import annotations

import numpy as np
import pytest

from dpstats.algorithms.linreg.dpgd import ClippedGradientSum, row_norms


@pytest.mark.parametrize("order", ["C", "F", "strided"])
@pytest.mark.parametrize("n", [0, 1, 7, 4095, 4096, 4097, 3 * 4096 + 5])
@pytest.mark.parametrize("d", [1, 3, 8, 9, 57, 130])
def test_row_norms_equal_numpy_norm(order, n, d):
    rng = np.random.default_rng(n * 1000 + d)
    A = rng.standard_normal((n, 2 * d)) * rng.lognormal(0, 3, size=(n, 1))
    G = A[:, ::2] if order == "strided" else np.asarray(A[:, :d], order=order)
    want = np.linalg.norm(G, axis=1)
    assert np.array_equal(row_norms(G), want)
    for block in (2, 3, 5):
        out = np.full(n, np.nan)
        assert row_norms(G, out=out, block=block) is out and np.array_equal(out, want)


@pytest.mark.parametrize("order", ["C", "F"])
def test_clipped_gradient_sum_equals_the_written_out_step(order):
    rng = np.random.default_rng(1)
    Z = np.asarray(rng.standard_normal((9001, 13)) / 4.0, order=order)
    u = rng.standard_normal(9001)
    clipped_sum = ClippedGradientSum(Z, 0.7)
    for _ in range(3):
        r = Z @ rng.standard_normal(13) - u
        G = Z * r[:, None]
        f = np.minimum(1.0, 0.7 / np.maximum(np.linalg.norm(G, axis=1), 1e-300))
        assert np.array_equal(clipped_sum(r), G.T @ f)
