"""AdaSSP: adaptive sufficient statistics perturbation (Wang 2018, Algorithm 2).

Three roster entries share one core:

``adassp`` (standard)
    Raw columns. The row-norm bound ``B_x`` and ``|y| <= B_y`` come from the
    public facts where they exist (public ranges, one-hot dummy groups, the
    intercept) and otherwise from private quantiles (budget spent).
``adassp_databounds`` (data-bounds)
    The reference code's behaviour: ``B_x = max ||x_i||`` and
    ``B_y = max |y_i|`` read from the data without privacy. Not DP.
``adassp_std`` (standard)
    AdaSSP in a privately standardised basis: each column is centred and
    scaled (public ranges where known, private median / deviation quantile
    otherwise), clipped to ``[-1, 1]``, and the coefficients are mapped back.

Core (replace-one neighbours, rows with ``||x|| <= B_x``, ``|y| <= B_y``):

* ``lambda_min(X'X)`` + Gaussian noise; sensitivity ``B_x^2`` (Weyl: adding
  ``x x'`` raises every eigenvalue by at most ``B_x^2`` and removing
  ``x' x'^T`` lowers it by at most ``B_x^2``; the same bound as add/remove);
* ``X'X`` upper triangle + Gaussian noise; L2 sensitivity
  ``sqrt(B_x^4 + q4)`` with ``q4 >= sum_j x_j^4`` (``sqrt(2) B_x^2`` in
  general, versus ``B_x^2`` for add/remove);
* ``X'y`` + Gaussian noise; L2 sensitivity ``2 B_x B_y`` (versus
  ``B_x B_y`` for add/remove).

As in the paper the budget is split in three equal parts; we account in zCDP
(or GDP when everything is Gaussian), which is tighter than the paper's basic
composition of three ``(eps/3, delta/3)`` Gaussian mechanisms. The ridge is
the paper's ``lambda = max(0, sigma_XX sqrt(d log(2 d^2 / rho)) -
lambda_min~)`` with ``lambda_min~ = max(0, lambda_min + sigma_l Z -
sigma_l sqrt(log(6/delta)))``, written with our noise scales.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar, cast

import numpy as np

from dpstats.algorithms.base import Algorithm, Outcome, Param, PublicFacts, TaskData
from dpstats.algorithms.linreg._basis import BASIS_DETAILS, RAW_BOUNDS_DETAILS, raw_problem, standardised_problem
from dpstats.algorithms.linreg._ssp import gram_pattern, upper_to_sym
from dpstats.algorithms.registry import coefficient_of, register
from dpstats.privacy.accounting import Accountant, GDPAccountant, ZCDPAccountant

__all__ = ["AdaSSP", "AdaSSPDataBounds", "AdaSSPStd", "adassp_core"]

_CITATION = (
    "Wang, Y.-X. (2018). Revisiting differentially private linear regression: optimal and adaptive "
    "prediction & estimation in unbounded domain. UAI 2018, Algorithm 2 (AdaSSP)."
)


def adassp_core(
    Z: np.ndarray,
    u: np.ndarray,
    B2: float,
    q4: float,
    By: float,
    acc: Accountant,
    delta: float,
    rng: np.random.Generator,
    rho_fail: float = 0.05,
    mask: np.ndarray | None = None,
) -> tuple[np.ndarray, dict[str, Any]]:
    """AdaSSP on rows already clipped to ``||z||^2 <= B2``, ``sum z_j^4 <= q4``, ``|u| <= By``.

    Spends the accountant's whole remaining budget in three equal Gaussian
    releases (``lambda_min``, ``Z'Z``, ``Z'u``), each drawn and charged in one
    call (:meth:`~dpstats.privacy.accounting.Accountant.gaussian`). ``mask``
    selects the released upper-triangle entries of ``Z'Z`` (default: all).

    Returns
    -------
    theta : ndarray
    details : dict
    """
    n, d = Z.shape
    frac = acc.remaining / acc.capacity / 3.0
    if mask is None:
        mask = np.triu(np.ones((d, d), dtype=bool))
    G = Z.T @ Z
    # 1. lambda_min, sensitivity B2
    s_l = acc.gaussian_sigma(B2, frac)  # type: ignore[attr-defined]
    lam_min = float(np.linalg.eigvalsh(G)[0])
    lam_noisy = acc.gaussian("lambda_min(X'X)", lam_min, sensitivity=B2, sigma=s_l, rng=rng,
                             note="replace-one sensitivity B_x^2 (Weyl)")
    lam_t = max(0.0, lam_noisy - s_l * math.sqrt(math.log(6.0 / delta)))
    # 2. X'X, sensitivity sqrt(B2^2 + q4)
    sens_xx = math.sqrt(B2**2 + q4)
    s_xx = acc.gaussian_sigma(sens_xx, frac)  # type: ignore[attr-defined]
    H = upper_to_sym(acc.gaussian("X'X", G[mask], sensitivity=sens_xx, sigma=s_xx, rng=rng,
                                  note="replace-one sensitivity sqrt(B_x^4 + sum x_j^4)"), mask)
    # 3. X'y, sensitivity 2 B_x B_y; the last share takes exactly what is left
    sens_xy = 2.0 * math.sqrt(B2) * By
    s_xy = acc.gaussian_sigma(sens_xy, acc.remaining / acc.capacity)  # type: ignore[attr-defined]
    b = acc.gaussian("X'y", Z.T @ u, sensitivity=sens_xy, sigma=s_xy, rng=rng, note="replace-one sensitivity 2 B_x B_y")
    lam = max(0.0, s_xx * math.sqrt(d * math.log(2.0 * d * d / rho_fail)) - lam_t)
    A = H + lam * np.eye(d)
    try:
        theta = np.linalg.solve(A, b)
    except np.linalg.LinAlgError:
        theta = np.linalg.pinv(A) @ b
    return theta, {"lambda": lam, "sigma_xx": s_xx, "sigma_xy": s_xy, "sigma_lambda": s_l}


@register
class AdaSSP(Algorithm):
    """AdaSSP on the raw columns with public or privately found bounds (standard).

    Bounds on ``||x||`` and ``|y|`` come from the public facts where they
    exist; the rest is a private ``bound_quantile`` of the norm of the
    columns without a public range (and of ``|y|``), which costs
    ``bounds_fraction`` of the zCDP budget. The remaining budget is split in
    three equal Gaussian releases (Wang 2018, Algorithm 2).
    """

    name = "adassp"
    task = "linreg"
    citation = _CITATION
    interpretation = "standard"
    summary = "AdaSSP (Wang 2018) on raw columns; bounds from public facts or private quantiles"
    defaults = {
        "rho_fail": Param(0.05, "paper §4 (failure probability rho = 0.05), reference code default"),
        "bound_quantile": Param(None, "ours: None = the highest level up to 0.95 that the grid mechanism finds reliably at this n and epsilon (a private maximum is unreliable)"),
        "bounds_fraction": Param(0.1, "ours: a tenth of the budget for the private bounds"),
    }
    public_details = {
        **RAW_BOUNDS_DETAILS,
        "lambda": "paid statistic: ridge from the noisy `lambda_min(X'X)` and sigma_xx",
        "sigma_xx": "paid statistic: noise scale from the row bound (`bound on ||x_free||`) and the budget",
        "sigma_xy": "paid statistic: noise scale from the bounds (`bound on ||x_free||`, `bound on |y|`) and the budget",
        "sigma_lambda": "paid statistic: noise scale from the row bound (`bound on ||x_free||`) and the budget",
    }

    def _run(self, data: TaskData, facts: PublicFacts, epsilon: float, delta: float,
             rng: np.random.Generator) -> Outcome:
        X, y = data.X, cast(np.ndarray, data.y)
        acc = ZCDPAccountant(epsilon, delta)
        Xc, yc, B2, By, det, _ = raw_problem(X, y, facts, acc, rng, self.params["bounds_fraction"],
                                             self.params["bound_quantile"])
        theta, det2 = adassp_core(Xc, yc, B2, B2**2, By, acc, delta, rng, self.params["rho_fail"])
        return self.release(theta, acc, **det, **det2)


@register
class AdaSSPDataBounds(Algorithm):
    """AdaSSP with bounds read from the data, as in the reference code (data-bounds; not DP).

    ``B_x = max_i ||x_i||`` and ``B_y = max_i |y_i|`` are computed from the
    private data; the three Gaussian releases then spend the budget in GDP
    (a thirds split of ``mu^2``).
    """

    name = "adassp_databounds"
    task = "linreg"
    citation = _CITATION
    interpretation = "data-bounds"
    summary = "AdaSSP with ||x|| and |y| bounds read from the data (reference code); not DP"
    defaults = {"rho_fail": Param(0.05, "paper §4 and reference code default")}
    public_details: ClassVar[dict[str, str]] = {}  # every noise scale is a function of the data maxima: no details

    def _run(self, data: TaskData, facts: PublicFacts, epsilon: float, delta: float,
             rng: np.random.Generator) -> Outcome:
        X, y = data.X, cast(np.ndarray, data.y)
        acc = GDPAccountant(epsilon, delta)
        B2 = float(np.max(np.sum(X * X, axis=1)))
        By = float(np.max(np.abs(y)))
        B2 = B2 if B2 > 0 else 1.0
        By = By if By > 0 else 1.0
        theta, _ = adassp_core(X, y, B2, B2**2, By, acc, delta, rng, self.params["rho_fail"])
        # B_x, B_y are exact data maxima, and the noise scales (sigma_lambda = f(B_x^2), sigma_xy = f(B_x B_y),
        # lambda through sigma_xx) would give them back: no details
        return self.release(theta, acc)


@register
class AdaSSPStd(Algorithm):
    """AdaSSP in a privately standardised basis (standard).

    Columns are centred and scaled to ``[-1, 1]`` (public ranges where
    known, a private median and deviation quantile otherwise, costing
    ``range_fraction`` of the zCDP budget), dummy groups stay one-hot, and
    ``y`` is standardised the same way. Rows then satisfy
    ``||z||^2 <= D`` with ``D`` the number of box columns plus groups plus
    the intercept, and ``sum z_j^4 <= D``; structurally zero entries of
    ``Z'Z`` inside dummy groups are not released. AdaSSP runs on ``(Z, u)``
    with ``B_y = 1`` and the coefficients are mapped back to the raw columns.
    """

    name = "adassp_std"
    task = "linreg"
    citation = _CITATION + " Preprocessing: private per-column standardisation (dpstats)."
    interpretation = "standard"
    summary = "AdaSSP in a privately standardised basis (columns centred and scaled to [-1, 1])"
    defaults = {
        "rho_fail": Param(0.05, "paper §4 and reference code default"),
        "range_fraction": Param(0.1, "ours: a tenth of the budget for the private column ranges"),
        "k_sd": Param(3.0, "ours: clip at about 3 standard deviations of normal data"),
    }
    public_details = {
        **BASIS_DETAILS,
        "lambda": "paid statistic: ridge from the noisy `lambda_min(X'X)` and sigma_xx",
        "sigma_xx": "public fact: noise scale from the public row bound of the standardised basis and the budget",
        "sigma_xy": "public fact: noise scale from the public row bound of the standardised basis and the budget",
        "sigma_lambda": "public fact: noise scale from the public row bound of the standardised basis and the budget",
    }

    def _run(self, data: TaskData, facts: PublicFacts, epsilon: float, delta: float,
             rng: np.random.Generator) -> Outcome:
        X, y = data.X, cast(np.ndarray, data.y)
        acc = ZCDPAccountant(epsilon, delta)
        S, basis, Z, u = standardised_problem(X, y, facts, acc, rng, self.params["range_fraction"], self.params["k_sd"])
        D = basis.norm2_bound()
        mask = gram_pattern(Z.shape[1], S.groups)
        theta, det = adassp_core(Z, u, D, D, 1.0, acc, delta, rng, self.params["rho_fail"], mask=mask)
        return self.release(basis.coef_to_raw(theta), acc, **basis.details, **det)


coefficient_of(AdaSSP)
coefficient_of(AdaSSPDataBounds)
coefficient_of(AdaSSPStd)
