"""Non-private baselines: the estimate each task is scored against and its sampling error.

=========  =======================================  ======================================
task       non-private estimate                     baseline (sampling error)
=========  =======================================  ======================================
sce        OLS coefficient of interest              its standard error of the study's type
linreg     beta_OLS                                 ``sqrt(s^2 d / n)``, ``s^2 = RSS/(n-d)``
mean       sample mean                              ``sqrt(rank(S) / n)``, S with divisor n-1
=========  =======================================  ======================================

For weighted instances the regression quantities are those of weighted least
squares (the design and outcome scaled by sqrt(weight)).

Examples
--------
>>> from dpstats.data.corpus import Corpus
>>> from dpstats.ols.baseline import compute_baseline
>>> b = compute_baseline(Corpus.public().instance("mroz87_lwage"))
>>> round(b.coef, 4), round(b.baseline, 4)
(0.1075, 0.0141)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dpstats.data.instance import Instance
from dpstats.ols.covariance import covariance_from_spec, fit_ols

__all__ = ["Baseline", "compute_baseline", "sample_covariance_rank"]


@dataclass(frozen=True, eq=False)
class Baseline:
    """The non-private estimate and sampling-error baseline of an instance.

    Attributes
    ----------
    instance, task : str
    n, d : int
    estimate : ndarray
        ``[coef]`` (sce), beta_OLS (linreg) or the sample mean (mean).
    baseline : float
        Sampling-error scale: the SE (sce), ``sqrt(s^2 d / n)`` (linreg),
        ``sqrt(rank(S)/n)`` (mean).
    se_type : str or None
        The SE type (sce).
    beta : ndarray or None
        Full OLS vector (sce, linreg).
    vcov : ndarray or None
        Covariance of beta of the study's type (sce).
    s2 : float or None
        Residual variance (sce, linreg).
    gram : ndarray or None
        ``X'X / n`` of the (weighted) design (linreg): the error metric's geometry.
    cov : ndarray or None
        Sample covariance S (mean).
    rank : int or None
        rank(S) (mean).
    engine : str
        ``"python"`` or ``"r"``.
    details : mapping
        Extras (bootstrap resamples skipped, effective k for CR1, ...).
    """

    instance: str
    task: str
    n: int
    d: int
    estimate: np.ndarray
    baseline: float
    se_type: str | None = None
    beta: np.ndarray | None = None
    vcov: np.ndarray | None = None
    s2: float | None = None
    gram: np.ndarray | None = None
    cov: np.ndarray | None = None
    rank: int | None = None
    engine: str = "python"
    details: Mapping[str, Any] = field(default_factory=dict)

    @property
    def coef(self) -> float:
        """The coefficient of interest (sce)."""
        if self.task != "sce":
            raise AttributeError("coef is defined for sce baselines")
        return float(self.estimate[0])

    @property
    def se(self) -> float:
        """The standard error (sce)."""
        if self.task != "sce":
            raise AttributeError("se is defined for sce baselines")
        return float(self.baseline)

    def to_dict(self) -> dict[str, Any]:
        est: Any = self.coef if self.task == "sce" else [float(v) for v in self.estimate]
        return {
            "instance": self.instance, "task": self.task, "n": self.n, "d": self.d, "se_type": self.se_type,
            "estimate": est, "baseline": float(self.baseline), "engine": self.engine,
        }


def sample_covariance_rank(S: np.ndarray) -> int:
    """Numerical rank of a covariance matrix (numpy's default SVD tolerance)."""
    if S.size == 0 or not np.any(S):
        return 0
    return int(np.linalg.matrix_rank(S, hermitian=True))


def compute_baseline(instance: Instance, engine: str = "python") -> Baseline:
    """Compute an instance's non-private estimate and baseline.

    Parameters
    ----------
    instance : Instance
    engine : {"python", "r"}
        ``"r"`` computes the sce standard error with R's ``sandwich`` through
        rpy2 (needs ``dpstats[r]`` and R).

    Returns
    -------
    Baseline
    """
    if engine not in ("python", "r"):
        raise ValueError(f"engine must be 'python' or 'r', got {engine!r}")
    if instance.task == "mean":
        X = instance.X
        n = X.shape[0]
        mean = X.mean(axis=0)
        S = np.atleast_2d(np.cov(X, rowvar=False, ddof=1))
        r = sample_covariance_rank(S)
        return Baseline(instance.id, "mean", n, X.shape[1], mean, float(np.sqrt(r / n)), cov=S, rank=r, engine="python")
    fit = fit_ols(instance.X, instance.y, instance.weights, instance.clusters, instance.nested_columns)
    n, d = fit.n, fit.d
    resid_w = fit.residuals if instance.weights is None else fit.residuals * np.sqrt(instance.weights)
    s2 = float(resid_w @ resid_w / (n - d))
    if instance.task == "linreg":
        Xw = instance.task_data().X
        return Baseline(
            instance.id, "linreg", n, d, fit.beta.copy(), float(np.sqrt(s2 * d / n)), beta=fit.beta.copy(), s2=s2,
            gram=Xw.T @ Xw / n, engine="python",
        )
    j = instance.facts.coef_index
    details: dict[str, Any] = {}
    if engine == "r":
        from dpstats.ols.r_engine import r_covariance

        rc = r_covariance(instance)
        vcov = rc.vcov
        if rc.k_effective is not None:
            details["k_effective"] = rc.k_effective
        if rc.bootstrap_skipped is not None:
            details["bootstrap_skipped"] = rc.bootstrap_skipped
    else:
        est = covariance_from_spec(instance.spec.se)
        vcov = est.vcov(fit)
        if hasattr(est, "k_effective"):
            details["k_effective"] = est.k_effective(fit)
        if hasattr(est, "last_skipped"):
            details["bootstrap_skipped"] = est.last_skipped
    se = float(np.sqrt(vcov[j, j]))
    return Baseline(
        instance.id, "sce", n, d, np.array([fit.beta[j]]), se, se_type=instance.spec.se, beta=fit.beta.copy(),
        vcov=vcov, s2=s2, engine=engine, details=details,
    )
