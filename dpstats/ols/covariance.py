"""Covariance estimators for OLS coefficients, as classes in a registry.

The estimators follow R's ``sandwich`` (and statsmodels, which agrees with
it): they are computed from one QR of the design, the leverages and the
residuals, and the tests compare every type with statsmodels and with R
(through rpy2) at a relative tolerance of 1e-8 on every public instance. The
conventions dpstats adds are Stata's small-sample factor for clustered errors
with nested fixed effects and a seeded pairs bootstrap.

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
>>> from dpstats.ols.covariance import covariance_from_spec
>>> covariance_from_spec("cluster:state")
ClusterCR1(column='state')
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pandas as pd
from scipy import linalg

__all__ = [
    "OLSFit",
    "fit_ols",
    "CovarianceEstimator",
    "Classical",
    "HC",
    "ClusterCR1",
    "PairsBootstrap",
    "covariance_from_spec",
    "bootstrap_indices",
    "BOOTSTRAP_SEED",
]

#: seed of the pairs bootstrap for ``bootstrap:<reps>`` baselines
BOOTSTRAP_SEED = 20240601


@dataclass(frozen=True, eq=False)
class OLSFit:
    """An OLS (or WLS) fit with the pieces the covariance estimators need.

    The fit is a Householder QR of the (weighted) design, as R's ``lm``:
    ``Xw = Q R``, ``(X'X)^{-1} = R^{-1} R^{-T}``, ``beta`` from the corrected
    semi-normal equations and the leverages the squared row norms of
    ``Q = Xw R^{-1}``.

    Attributes
    ----------
    X, y : ndarray
        Unweighted design and outcome.
    weights : ndarray or None
    clusters : ndarray or None
    nested_columns : tuple of int
        Columns of fixed effects nested in the clusters.
    beta : ndarray
    bread : ndarray
        ``(Xw'Xw)^{-1}``.
    Xw, resid_w : ndarray
        Design and residuals scaled by ``sqrt(weights)``.
    leverage : ndarray
        Diagonal of the hat matrix.
    """

    X: np.ndarray
    y: np.ndarray
    weights: np.ndarray | None
    clusters: np.ndarray | None
    nested_columns: tuple[int, ...]
    beta: np.ndarray
    bread: np.ndarray
    Xw: np.ndarray
    resid_w: np.ndarray
    leverage: np.ndarray

    @property
    def n(self) -> int:
        return int(self.X.shape[0])

    @property
    def d(self) -> int:
        return int(self.X.shape[1])

    @property
    def residuals(self) -> np.ndarray:
        """Unweighted residuals ``y - X beta``."""
        return self.y - self.X @ self.beta

    @property
    def s2(self) -> float:
        """Residual variance ``RSS / (n - d)`` (weighted RSS for WLS)."""
        return float(self.resid_w @ self.resid_w / (self.n - self.d))

    def statsmodels_results(self):
        """The same regression fitted by statsmodels (for cross-checks)."""
        import statsmodels.api as sm

        model = sm.WLS(self.y, self.X, weights=self.weights) if self.weights is not None else sm.OLS(self.y, self.X)
        return model.fit()


def fit_ols(X: np.ndarray, y: np.ndarray, weights: np.ndarray | None = None, clusters: np.ndarray | None = None,
            nested_columns: tuple[int, ...] = ()) -> OLSFit:
    """Fit OLS (WLS with ``weights``) by a Householder QR of the design, as R's ``lm``.

    The design must have full column rank (instances guarantee it).
    """
    X = np.asarray(X, dtype=float)
    y = np.asarray(y, dtype=float).reshape(-1)
    if weights is not None:
        sw = np.sqrt(np.asarray(weights, dtype=float))
        Xw, yw = X * sw[:, None], y * sw
    else:
        Xw, yw = X, y
    d = Xw.shape[1]
    r = linalg.qr(Xw, mode="r", check_finite=False)[0][:d]
    r_inv = linalg.solve_triangular(r, np.eye(d), check_finite=False)
    bread = r_inv @ r_inv.T
    # semi-normal equations with one step of refinement (Bjorck's corrected
    # semi-normal equations): as accurate as a Q-based solve for full-rank
    # designs, without forming Q
    beta = bread @ (Xw.T @ yw)
    beta = beta + bread @ (Xw.T @ (yw - Xw @ beta))
    resid_w = yw - Xw @ beta
    z = Xw @ r_inv  # rows of Q
    leverage = np.einsum("ij,ij->i", z, z)
    return OLSFit(X, y, weights, clusters, tuple(nested_columns), beta, bread, Xw, resid_w, leverage)


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
        return fit.s2 * fit.bread


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
        u2 = fit.resid_w**2
        n, k = fit.n, fit.d
        if self.type == "HC1":
            u2 = u2 * n / (n - k)
        elif self.type == "HC2":
            u2 = u2 / (1.0 - fit.leverage)
        elif self.type == "HC3":
            u2 = u2 / (1.0 - fit.leverage) ** 2
        meat = (fit.Xw.T * u2) @ fit.Xw
        return fit.bread @ meat @ fit.bread

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
        codes, uniques = pd.factorize(pd.Series(fit.clusters))
        g = len(uniques)
        scores = fit.Xw * fit.resid_w[:, None]
        sums = np.zeros((g, fit.d))
        np.add.at(sums, codes, scores)
        meat = sums.T @ sums
        n, k = fit.n, self.k_effective(fit)
        return g / (g - 1) * (n - 1) / (n - k) * (fit.bread @ meat @ fit.bread)

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
