"""Task metrics: how far a private estimate falls from the non-private one.

===========  ===================================================================
task         error
===========  ===================================================================
sce          ``|theta_hat - theta_OLS|``
linreg       ``(1/sqrt(n)) ||X (beta_hat - beta_OLS)||_2``
mean         ``sqrt((mu_hat - xbar)' S^+ (mu_hat - xbar))`` if the difference lies
             in range(S), else ``+inf``; rank(S) = 0: 0 for an exact match, else inf
===========  ===================================================================

The error ratio ``error / baseline`` is what the benchmark scores: a trial
succeeds at threshold ``tau`` when the ratio is at most ``tau``.

Examples
--------
>>> import numpy as np
>>> from dpstats.bench.metrics import mahalanobis_error
>>> S = np.array([[4.0, 0.0], [0.0, 0.0]])   # second coordinate constant
>>> mahalanobis_error(np.array([2.0, 0.0]), S)
1.0
>>> mahalanobis_error(np.array([2.0, 1e-3]), S)
inf
"""

from __future__ import annotations

import math

import numpy as np

from dpstats.ols.baseline import Baseline

__all__ = ["error", "ratio", "mahalanobis_error", "RANGE_RTOL"]

#: relative tolerance of the range(S) test, in units of the data's scale
RANGE_RTOL = 1e-9


def mahalanobis_error(diff: np.ndarray, S: np.ndarray, scale: float | None = None) -> float:
    """``sqrt(diff' S^+ diff)`` when ``diff`` lies in range(S), else ``inf``.

    Parameters
    ----------
    diff : ndarray, shape (d,)
    S : ndarray, shape (d, d)
        Symmetric positive semi-definite.
    scale : float, optional
        Magnitude of the quantities compared (e.g. ``||xbar||``); the range test
        allows a component outside range(S) of at most ``RANGE_RTOL`` times
        ``max(||diff||, scale, sqrt(lambda_max))``, i.e. rounding error.

    Notes
    -----
    The eigendecomposition ``S = V diag(lam) V'`` splits ``diff`` into its part
    in the range (eigenvalues above numpy's rank tolerance) and the rest. The
    test is scale-aware: a component orthogonal to the range that is at the
    rounding level of the data is ignored, anything larger gives ``inf``.
    """
    diff = np.asarray(diff, dtype=float).reshape(-1)
    if not np.all(np.isfinite(diff)):
        return math.inf
    S = np.atleast_2d(np.asarray(S, dtype=float))
    lam, V = np.linalg.eigh((S + S.T) / 2.0)
    lam_max = float(max(lam.max(initial=0.0), 0.0))
    tol = lam_max * S.shape[0] * np.finfo(float).eps
    keep = lam > tol
    ref = max(float(np.linalg.norm(diff)), float(scale or 0.0), math.sqrt(lam_max))
    if not keep.any():
        return 0.0 if float(np.linalg.norm(diff)) <= 4 * np.finfo(float).eps * max(float(scale or 0.0), 1e-300) else math.inf
    coords = V.T @ diff
    outside = float(np.linalg.norm(coords[~keep]))
    if outside > RANGE_RTOL * ref:
        return math.inf
    return float(math.sqrt(np.sum(coords[keep] ** 2 / lam[keep])))


def error(estimate: np.ndarray | float, baseline: Baseline) -> float:
    """Error of a private estimate against the instance's non-private estimate.

    Parameters
    ----------
    estimate : array-like
        ``[theta]`` or a scalar (sce), a vector of length d (linreg, mean).
    baseline : Baseline

    Returns
    -------
    float
        ``inf`` for non-finite estimates.
    """
    est = np.asarray(estimate, dtype=float).reshape(-1)
    if baseline.task == "sce":
        if est.size != 1:
            raise ValueError(f"sce estimate must be a single number, got {est.size} values")
        return float(abs(est[0] - baseline.coef)) if np.isfinite(est[0]) else math.inf
    if est.size != baseline.d:
        raise ValueError(f"{baseline.task} estimate must have length {baseline.d}, got {est.size}")
    if not np.all(np.isfinite(est)):
        return math.inf
    diff = est - baseline.estimate
    if baseline.task == "linreg":
        q = float(diff @ baseline.gram @ diff)
        return math.sqrt(max(q, 0.0))
    if baseline.task == "mean":
        if baseline.cov is None:
            raise ValueError("a mean baseline without its covariance")
        return mahalanobis_error(diff, baseline.cov, scale=float(np.linalg.norm(baseline.estimate)))
    raise ValueError(f"unknown task {baseline.task!r}")


def ratio(estimate: np.ndarray | float, baseline: Baseline) -> float:
    """``error / baseline``; ``inf`` when the error is infinite; 0/0 counts as 0."""
    e = error(estimate, baseline)
    if math.isinf(e):
        return math.inf
    if baseline.baseline == 0:
        return 0.0 if e == 0 else math.inf
    return e / baseline.baseline
