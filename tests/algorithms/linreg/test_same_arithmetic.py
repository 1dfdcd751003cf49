"""Faster formulations against the plain numpy calls they replace (bit for bit where the arithmetic is the same)."""

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
def test_clipped_gradient_sum_agrees_with_the_written_out_step(order):
    # not bit for bit: the factored norms take the products in another order; agreement to rounding
    rng = np.random.default_rng(1)
    Z = np.asarray(rng.standard_normal((9001, 13)) / 4.0, order=order)
    Z[5] = 0.0  # a zero row contributes nothing
    u = rng.standard_normal(9001)
    clipped_sum = ClippedGradientSum(Z, 0.7)
    for _ in range(3):
        r = Z @ rng.standard_normal(13) - u
        G = Z * r[:, None]
        norms = np.linalg.norm(G, axis=1)
        f = np.minimum(1.0, 0.7 / np.maximum(norms, 1e-300))
        assert 0.1 < np.mean(f < 1.0) < 0.9  # both sides of the clip are exercised
        np.testing.assert_allclose(clipped_sum(r), G.T @ f, rtol=1e-13, atol=1e-12)
        # every clipped term keeps its bound C (the sensitivity argument), to rounding
        fs = np.minimum(1.0, 0.7 / np.maximum(np.abs(r) * np.linalg.norm(Z, axis=1), 1e-300))
        assert np.max(np.linalg.norm(G * fs[:, None], axis=1)) <= 0.7 * (1 + 1e-12)
