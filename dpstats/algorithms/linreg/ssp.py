"""Sufficient statistics perturbation (SSP): noisy ``X'X`` and ``X'y``, then least squares.

``ssp`` (standard)
    Raw columns, bounds as in ``adassp`` (public facts, private quantiles for
    the rest). One joint Gaussian release of the upper triangle of ``X'X``
    and of ``X'y``.
``ssp_std`` (standard)
    The same in a privately standardised basis (columns in ``[-1, 1]``,
    dummy groups one-hot, structurally zero entries not released).

Calibration (replace-one, rows with ``||x||^2 <= B2``, ``sum x_j^4 <= q4``,
``|y| <= B_y``): the pair ``(U(X'X)/sigma_xx, X'y/sigma_xy)`` has squared
L2 sensitivity at most
``(B2^2 + q4 - p^2)/sigma_xx^2 + B_y^2 (2 B2 + 2p)/sigma_xy^2`` with
``p = min(B_y^2 sigma_xx^2 / sigma_xy^2, B2)``
(:func:`~dpstats.algorithms.linreg._ssp.ssp_joint_sens2`), which is below
the sum ``2 B2^2 / sigma_xx^2 + 4 B2 B_y^2 / sigma_xy^2`` of the separate
sensitivities. The release is one Gaussian mechanism, accounted in zCDP.

The noisy ``X'X`` need not be positive definite; its eigenvalues are raised
to at least ``sigma_xx`` before solving (post-processing), the smallest fix
that keeps the system solvable. No ridge beyond that: this is the textbook
estimator (Vu and Slavkovic 2009; Foulds et al. 2016; Wang 2018 §3).
"""

from __future__ import annotations

import math
from typing import cast

import numpy as np

from dpstats.algorithms.base import Algorithm, Outcome, Param, PublicFacts, TaskData
from dpstats.algorithms.linreg._basis import BASIS_DETAILS, RAW_BOUNDS_DETAILS, raw_problem, standardised_problem
from dpstats.algorithms.linreg._ssp import gram_pattern, release_ssp, solve_floor, ssp_calibration
from dpstats.algorithms.registry import coefficient_of, register
from dpstats.privacy.accounting import ZCDPAccountant

__all__ = ["SSP", "SSPStd"]

_CITATION = (
    "Vu, D. and Slavkovic, A. (2009). Differential privacy for clinical trial data: preliminary evaluations. "
    "ICDM Workshops; Foulds, J., Geumlek, J., Welling, M. and Chaudhuri, K. (2016). On the theory and practice "
    "of privacy-preserving Bayesian data analysis. UAI; Wang, Y.-X. (2018), §3 (SSP)."
)


def _ssp_release(Z: np.ndarray, u: np.ndarray, B2: float, q4: float, By: float, acc: ZCDPAccountant,
                 rng: np.random.Generator, mask: np.ndarray | None = None,
                 ratio: float | None = None) -> tuple[np.ndarray, dict[str, float]]:
    """Spend the remaining budget on one joint release; return the solution and details."""
    d = Z.shape[1]
    if mask is None:
        mask = np.triu(np.ones((d, d), dtype=bool))
    if ratio is None:
        # balance the separate sensitivities: sigma_xy / sigma_xx = 2 B By / (sqrt(2) B^2)
        ratio = math.sqrt(2.0) * By / math.sqrt(B2)
    cal = ssp_calibration(B2, q4, By, ratio, acc.remaining)
    H, b = release_ssp(Z, u, mask, cal, acc, "X'X and X'y (joint Gaussian)", rng)
    assert b is not None  # release_ssp returns Z'u whenever u is given
    theta = solve_floor(H, b, cal.sigma_xx)
    return theta, {"sigma_xx": cal.sigma_xx, "sigma_xy": cal.sigma_xy}


@register
class SSP(Algorithm):
    """Sufficient statistics perturbation on raw columns (standard)."""

    name = "ssp"
    task = "linreg"
    citation = _CITATION
    interpretation = "standard"
    summary = "noisy X'X and X'y on raw columns, least squares; bounds from public facts or private quantiles"
    defaults = {
        "bound_quantile": Param(None, "ours: None = the highest level up to 0.95 that the grid mechanism finds reliably at this n and epsilon (a private maximum is unreliable)"),
        "bounds_fraction": Param(0.1, "ours: a tenth of the budget for the private bounds"),
    }
    public_details = {
        **RAW_BOUNDS_DETAILS,
        "sigma_xx": "paid statistic: noise scale from the bounds (`bound on ||x_free||`, `bound on |y|`) and the budget",
        "sigma_xy": "paid statistic: noise scale from the bounds (`bound on ||x_free||`, `bound on |y|`) and the budget",
    }

    def _run(self, data: TaskData, facts: PublicFacts, epsilon: float, delta: float,
             rng: np.random.Generator) -> Outcome:
        X, y = data.X, cast(np.ndarray, data.y)
        acc = ZCDPAccountant(epsilon, delta)
        Xc, yc, B2, By, det, _ = raw_problem(X, y, facts, acc, rng, self.params["bounds_fraction"],
                                             self.params["bound_quantile"])
        theta, det2 = _ssp_release(Xc, yc, B2, B2**2, By, acc, rng)
        return self.release(theta, acc, **det, **det2)


@register
class SSPStd(Algorithm):
    """Sufficient statistics perturbation in a privately standardised basis (standard)."""

    name = "ssp_std"
    task = "linreg"
    citation = _CITATION + " Preprocessing: private per-column standardisation (dpstats)."
    interpretation = "standard"
    summary = "noisy X'X and X'y in a privately standardised basis, least squares"
    defaults = {
        "range_fraction": Param(0.1, "ours: a tenth of the budget for the private column ranges"),
        "k_sd": Param(3.0, "ours: clip at about 3 standard deviations of normal data"),
    }
    public_details = {
        **BASIS_DETAILS,
        "sigma_xx": "public fact: noise scale from the public row bound of the standardised basis and the budget",
        "sigma_xy": "public fact: noise scale from the public row bound of the standardised basis and the budget",
    }

    def _run(self, data: TaskData, facts: PublicFacts, epsilon: float, delta: float,
             rng: np.random.Generator) -> Outcome:
        X, y = data.X, cast(np.ndarray, data.y)
        acc = ZCDPAccountant(epsilon, delta)
        S, basis, Z, u = standardised_problem(X, y, facts, acc, rng, self.params["range_fraction"], self.params["k_sd"])
        D = basis.norm2_bound()
        theta, det = _ssp_release(Z, u, D, D, 1.0, acc, rng, mask=gram_pattern(Z.shape[1], S.groups))
        return self.release(basis.coef_to_raw(theta), acc, **basis.details, **det)


coefficient_of(SSP)
coefficient_of(SSPStd)
