"""Task metrics: definitions, invariances and the infinite cases."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpstats.ols.baseline import Baseline
from dpstats.bench.metrics import error, mahalanobis_error, ratio


def mean_baseline(X: np.ndarray) -> Baseline:
    S = np.atleast_2d(np.cov(X, rowvar=False))
    r = int(np.linalg.matrix_rank(S, hermitian=True)) if np.any(S) else 0
    return Baseline("t", "mean", X.shape[0], X.shape[1], X.mean(0), math.sqrt(r / X.shape[0]), cov=S, rank=r)


def test_sce_and_linreg() -> None:
    b = Baseline("t", "sce", 10, 2, np.array([1.5]), 0.5)
    assert error(2.0, b) == 0.5 and ratio([2.0], b) == 1.0
    assert ratio([np.nan], b) == math.inf
    rng = np.random.default_rng(0)
    X = rng.normal(size=(50, 3))
    beta = np.array([1.0, -2.0, 0.5])
    lin = Baseline("t", "linreg", 50, 3, beta, 0.1, gram=X.T @ X / 50)
    est = beta + np.array([0.1, 0.0, -0.2])
    assert error(est, lin) == pytest.approx(np.linalg.norm(X @ (est - beta)) / np.sqrt(50))
    with pytest.raises(ValueError, match="length 3"):
        error(np.zeros(2), lin)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), d=st.integers(1, 4))
def test_mean_error_is_affine_invariant(seed: int, d: int) -> None:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(40, d)) @ rng.normal(size=(d, d))
    mu = X.mean(0) + rng.normal(size=d)
    A = rng.normal(size=(d, d)) + 3 * np.eye(d)
    c = rng.normal(size=d)
    e1 = error(mu, mean_baseline(X))
    e2 = error(A @ mu + c, mean_baseline(X @ A.T + c))
    assert e2 == pytest.approx(e1, rel=1e-6)


def test_mean_error_outside_range_is_infinite() -> None:
    rng = np.random.default_rng(1)
    X = np.column_stack([rng.normal(size=100), np.full(100, 7.0)])  # second column constant
    b = mean_baseline(X)
    assert b.rank == 1
    good = b.estimate + np.array([0.3, 0.0])
    assert error(good, b) == pytest.approx(0.3 / X[:, 0].std(ddof=1))
    assert error(b.estimate + np.array([0.3, 1e-6]), b) == math.inf
    # a difference at the rounding level of the data is not "outside"
    assert math.isfinite(error(b.estimate + np.array([0.3, 1e-14]), b))


def test_rank_zero() -> None:
    X = np.tile([2.0, 3.0], (5, 1))
    b = mean_baseline(X)
    assert b.rank == 0 and b.baseline == 0
    assert error(np.array([2.0, 3.0]), b) == 0.0 and ratio(np.array([2.0, 3.0]), b) == 0.0
    assert error(np.array([2.0, 3.0 + 1e-9]), b) == math.inf


def test_mahalanobis_equals_pinv_form() -> None:
    rng = np.random.default_rng(2)
    Z = rng.normal(size=(30, 2))
    X = np.column_stack([Z, Z[:, 0] + Z[:, 1]])  # rank 2 in 3 dimensions
    S = np.cov(X, rowvar=False)
    diff = np.array([0.1, -0.2, -0.1])  # in range: third = first + second
    assert mahalanobis_error(diff, S) == pytest.approx(float(np.sqrt(diff @ np.linalg.pinv(S) @ diff)), rel=1e-8)
