"""Covariance estimators for OLS coefficients, as classes in a registry.

The estimators delegate to statsmodels, which implements them as R's
``sandwich`` does; dpstats adds only the Stata small-sample convention for
clustered errors with nested fixed effects and a seeded pairs bootstrap.

======================  ==========================================================
``se`` in a manifest    estimator
======================  ==========================================================
``classical``           :class:`Classical`: ``s^2 (X'X)^{-1}``
``HC0`` ... ``HC3``     :class:`HC`: ``sandwich::vcovHC(type = ...)``
``cluster:<col>``       :class:`ClusterCR1`: ``G/(G-1) (n-1)/(n-k)`` times the
                        cluster sandwich; ``k`` leaves out fixed effects nested
                        in the clusters (and the intercept they absorb)
``bootstrap:<reps>``    :class:`PairsBootstrap`: pairs bootstrap, seeded
======================  ==========================================================

Examples
--------
>>> from dpstats.covariance import covariance_from_spec
>>> covariance_from_spec("cluster:state")
ClusterCR1(column='state')
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pandas as pd
import statsmodels.api as sm

__all__ = [
    "OLSFit",
    "fit_ols",
    "CovarianceEstimator",
    "Classical",
    "HC",
    "ClusterCR1",
    "PairsBootstrap",
    "COVARIANCE_ESTIMATORS",
    "covariance_from_spec",
    "bootstrap_indices",
    "BOOTSTRAP_SEED",
]

#: seed of the pairs bootstrap for ``bootstrap:<reps>`` baselines
BOOTSTRAP_SEED = 20240601


@dataclass(frozen=True, eq=False)
class OLSFit:
    """An OLS (or WLS) fit with the pieces the covariance estimators need.

    Attributes
    ----------
    X, y : ndarray
        Unweighted design and outcome.
    weights : ndarray or None
    clusters : ndarray or None
    nested_columns : tuple of int
        Columns of fixed effects nested in the clusters.
    beta : ndarray
    results : statsmodels RegressionResults
    """

    X: np.ndarray
    y: np.ndarray
    weights: np.ndarray | None
    clusters: np.ndarray | None
    nested_columns: tuple[int, ...]
    beta: np.ndarray
    results: object

    @property
    def n(self) -> int:
        return int(self.X.shape[0])

    @property
    def d(self) -> int:
        return int(self.X.shape[1])

    @property
    def residuals(self) -> np.ndarray:
        return self.y - self.X @ self.beta


def fit_ols(X: np.ndarray, y: np.ndarray, weights: np.ndarray | None = None, clusters: np.ndarray | None = None,
            nested_columns: tuple[int, ...] = ()) -> OLSFit:
    """Fit OLS (WLS with ``weights``) with statsmodels (SVD pseudo-inverse; the design is full rank)."""
    model = sm.WLS(y, X, weights=weights) if weights is not None else sm.OLS(y, X)
    res = model.fit(method="pinv")  # one SVD; "qr" in statsmodels computes the pinv as well
    return OLSFit(X, y, weights, clusters, tuple(nested_columns), np.asarray(res.params, dtype=float), res)


class CovarianceEstimator(ABC):
    """A covariance estimator for OLS coefficients."""

    kind: ClassVar[str] = ""

    @abstractmethod
    def vcov(self, fit: OLSFit) -> np.ndarray:
        """The estimated covariance matrix of ``fit.beta``."""

    def se(self, fit: OLSFit) -> np.ndarray:
        """Standard errors: square roots of the diagonal of :meth:`vcov`."""
        return np.sqrt(np.diag(self.vcov(fit)))

    @property
    def spec(self) -> str:
        """The manifest ``se`` string of this estimator."""
        return self.kind

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class Classical(CovarianceEstimator):
    """Homoskedastic ``s^2 (X'X)^{-1}`` with ``s^2 = RSS / (n - k)``."""

    kind = "classical"

    def vcov(self, fit: OLSFit) -> np.ndarray:
        return np.asarray(fit.results.cov_params(), dtype=float)


class HC(CovarianceEstimator):
    """Heteroskedasticity-robust HC0-HC3 (MacKinnon and White 1985), as ``sandwich::vcovHC``."""

    kind = "HC"

    def __init__(self, type: str = "HC1") -> None:
        if type not in ("HC0", "HC1", "HC2", "HC3"):
            raise ValueError(f"HC type must be HC0-HC3, got {type!r}")
        self.type = type

    @property
    def spec(self) -> str:
        return self.type

    def vcov(self, fit: OLSFit) -> np.ndarray:
        return np.asarray(getattr(fit.results, f"cov_{self.type}"), dtype=float)

    def __repr__(self) -> str:
        return f"HC(type={self.type!r})"


class ClusterCR1(CovarianceEstimator):
    """Cluster-robust CR1 with the Stata small-sample factor.

    ``V = G/(G-1) * (n-1)/(n-k) * (X'X)^{-1} (sum_g X_g' u_g u_g' X_g) (X'X)^{-1}``
    where ``k`` is the design rank less the columns of fixed effects nested in
    the clusters (and less the intercept when any are nested, since the nested
    dummies absorb it), as Stata's ``xtreg, fe`` and fixest count it.
    """

    kind = "cluster"

    def __init__(self, column: str) -> None:
        self.column = column

    @property
    def spec(self) -> str:
        return f"cluster:{self.column}"

    def k_effective(self, fit: OLSFit) -> int:
        """The k in ``(n-1)/(n-k)``."""
        k = fit.d - len(fit.nested_columns)
        if fit.nested_columns and np.any(np.all(fit.X == 1.0, axis=0)):
            k -= 1
        return k

    def vcov(self, fit: OLSFit) -> np.ndarray:
        if fit.clusters is None:
            raise ValueError("cluster standard errors need cluster labels")
        codes = pd.factorize(pd.Series(fit.clusters))[0]
        res = fit.results.get_robustcov_results(cov_type="cluster", groups=codes, use_correction=True, df_correction=True)
        v = np.asarray(res.cov_params(), dtype=float)
        # statsmodels uses k = rank; rescale to the effective k
        n, k_full, k_eff = fit.n, fit.d, self.k_effective(fit)
        return v * (n - k_full) / (n - k_eff)

    def __repr__(self) -> str:
        return f"ClusterCR1(column={self.column!r})"


def bootstrap_indices(n: int, reps: int, seed: int = BOOTSTRAP_SEED) -> np.ndarray:
    """Row indices of a pairs bootstrap: array ``(reps, n)`` from ``default_rng(seed)``.

    Shared with the R engine so that both use the same resamples.
    """
    rng = np.random.default_rng(seed)
    return rng.integers(0, n, size=(reps, n))


class PairsBootstrap(CovarianceEstimator):
    """Nonparametric pairs bootstrap: the covariance of OLS refits on resampled rows.

    Resamples whose design is rank-deficient are skipped and counted in
    :attr:`last_skipped`.
    """

    kind = "bootstrap"

    def __init__(self, reps: int = 999, seed: int = BOOTSTRAP_SEED) -> None:
        if reps < 2:
            raise ValueError("bootstrap needs at least 2 replications")
        self.reps = int(reps)
        self.seed = int(seed)
        self.last_skipped = 0

    @property
    def spec(self) -> str:
        return f"bootstrap:{self.reps}"

    def draws(self, fit: OLSFit) -> np.ndarray:
        """Bootstrap coefficient draws, shape ``(kept reps, d)``."""
        X, y = fit.X, fit.y
        if fit.weights is not None:
            sw = np.sqrt(fit.weights)
            X, y = X * sw[:, None], y * sw
        out = []
        skipped = 0
        for idx in bootstrap_indices(fit.n, self.reps, self.seed):
            Xb, yb = X[idx], y[idx]
            q, r = np.linalg.qr(Xb)
            dg = np.abs(np.diag(r))
            if dg.min() <= 1e-7 * dg.max():
                skipped += 1
                continue
            out.append(np.linalg.solve(r, q.T @ yb))
        self.last_skipped = skipped
        if len(out) < 2:
            raise ValueError("fewer than 2 bootstrap resamples had a full-rank design")
        return np.asarray(out)

    def vcov(self, fit: OLSFit) -> np.ndarray:
        return np.atleast_2d(np.cov(self.draws(fit), rowvar=False, ddof=1))

    def __repr__(self) -> str:
        return f"PairsBootstrap(reps={self.reps}, seed={self.seed})"


COVARIANCE_ESTIMATORS: dict[str, type[CovarianceEstimator]] = {
    "classical": Classical,
    "HC": HC,
    "cluster": ClusterCR1,
    "bootstrap": PairsBootstrap,
}


def covariance_from_spec(se: str) -> CovarianceEstimator:
    """Build the estimator named by a manifest ``se`` string."""
    if se == "classical":
        return Classical()
    if se in ("HC0", "HC1", "HC2", "HC3"):
        return HC(se)
    kind, sep, arg = se.partition(":")
    if sep and kind == "cluster" and arg:
        return ClusterCR1(arg)
    if sep and kind == "bootstrap":
        try:
            reps = int(arg)
        except ValueError:
            raise ValueError(f"bootstrap needs an integer number of reps, got {se!r}") from None
        return PairsBootstrap(reps)
    raise ValueError(f"unknown se {se!r}; use classical, HC0-HC3, cluster:<column> or bootstrap:<reps>")
