"""Simple-regression algorithms after private partialling out of the controls.

NoisyStats and DP Theil-Sen (Alabi, McMillan, Sarathy, Smith, Vadhan 2020)
apply only to one regressor. By Frisch-Waugh, the coefficient of interest in
the full regression is the slope of the regression of ``y`` on ``x`` once
both are partialled on the controls. Here the partialling is done privately
(stage 1 of fwl_score, :mod:`dpstats.algorithms.sce._fwl_nuisance`: private
standardisation and a noisy Gram matrix give projection coefficients), after
which each row gives a pair ``(u_i, w_i)`` that depends on that row only, and
the simple-regression algorithm runs on those pairs.

``noisystats_fwl``
    NoisyStats (Laplace ``ncov``/``nvar``) on the partialled pairs.
``theilsen_fwl``
    DP Theil-Sen (one random matching, exponential-mechanism median) on them.

Both run on any design (``d >= 2``). Accounting is zCDP: exponential
mechanisms ``eps^2/8``, Laplace mechanisms ``eps^2/2``, Gaussian
``Delta^2/(2 sigma^2)``; replace-one neighbours.
"""

from __future__ import annotations

import math
from typing import Any, cast

import numpy as np

from dpstats.algorithms.base import Algorithm, Outcome, Param, PublicFacts, TaskData
from dpstats.algorithms.registry import register
from dpstats.algorithms.sce._fwl_nuisance import STAGE1_DETAILS, Partialled, partial_out
from dpstats.algorithms.sce._utils import (
    EM_BOUND,
    adaptive_quantile,
    positive_grid,
    private_median_interval,
)
from dpstats.algorithms.sce.simple_regression import matched_slopes, ncov_sensitivity
from dpstats.privacy.accounting import ZCDPAccountant, em_epsilon
from dpstats.privacy.quantiles import private_grid_cell

__all__ = ["NoisyStatsFWL", "TheilSenFWL"]

_CITATION = (
    "Alabi, D., McMillan, A., Sarathy, J., Smith, A. and Vadhan, S. (2020). Differentially private simple "
    "linear regression. PoPETs 2022(2); partialling out by Frisch-Waugh-Lovell with a private Gram matrix (this package)."
)

_STAGE1 = {
    "scale_share": Param(0.25, "share of rho for the private standardisation (as fwl_score)"),
    "gram_share": Param(0.4, "share of rho for the noisy Gram matrix (as fwl_score)"),
    "range_share": Param(0.05, "share of rho for the private ranges of the partialled pairs (our choice)"),
    "scale_factor": Param(1.0, "as fwl_score"),
    "col_clip": Param(10.0, "as fwl_score"),
    "kappa": Param(20.0, "as fwl_score: clipping quantile 1 - kappa/(eps n)"),
    "q_row_max": Param(0.9, "as fwl_score"),
    "ridge": Param(1.0, "as fwl_score"),
}


#: details of the partialled pairs (shared by both algorithms)
_PAIRS_DETAILS = {
    **STAGE1_DETAILS,
    "C_u": "paid statistic: `grid quantile |u| (range)`",
    "C_w": "paid statistic: `grid quantile |w| (range)`",
    "laplace_scale": "public fact: (1 - 1/n) / eps_L, eps_L from the budget",
}


class _Preprocessed(Algorithm):
    def _pairs(
        self, data: TaskData, facts: PublicFacts, acc: ZCDPAccountant, rng: np.random.Generator,
    ) -> tuple[Partialled, np.ndarray, np.ndarray, float, dict[str, Any]]:
        p = self.params
        P = partial_out(
            data.X, cast(np.ndarray, data.y), facts, acc, rng, scale_share=p["scale_share"], gram_share=p["gram_share"],
            scale_factor=p["scale_factor"], col_clip=p["col_clip"], kappa=p["kappa"], q_row_max=p["q_row_max"],
            ridge=p["ridge"],
        )
        n = data.n
        e_q = em_epsilon(p["range_share"] * acc.rho / 2.0, bound=EM_BOUND)
        q = adaptive_quantile(n, e_q, p["kappa"])
        _, Cu = private_grid_cell(np.abs(P.u), positive_grid(), e_q, rng, acc=acc,
                                  mechanism="grid quantile |u| (range)", q=q)
        _, Cw = private_grid_cell(np.abs(P.w), positive_grid(), e_q, rng, acc=acc,
                                  mechanism="grid quantile |w| (range)", q=q)
        # rescale to [0, 1] as the simple-regression algorithms expect
        us = (np.clip(P.u, -Cu, Cu) + Cu) / (2 * Cu)
        ws = (np.clip(P.w, -Cw, Cw) + Cw) / (2 * Cw)
        unit = P.unit * Cw / Cu
        return P, us, ws, unit, {"row_bound": P.row_bound, "sigma_gram": P.sigma_gram, "C_u": Cu, "C_w": Cw}


@register
class NoisyStatsFWL(_Preprocessed):
    """NoisyStats on privately partialled pairs (any design).

    Privacy: stage 1 (see :func:`dpstats.algorithms.sce._fwl_nuisance.partial_out`),
    two grid quantiles for the ranges of the pairs, then Laplace noise of
    scale ``(1 - 1/n)/eps_L`` on ``ncov`` and ``nvar`` of the ``[0,1]``-rescaled
    pairs (each pair depends on its own row only), ``eps_L^2/2`` zCDP each.
    """

    name = "noisystats_fwl"
    task = "sce"
    citation = _CITATION
    interpretation = "standard"
    summary = "NoisyStats on pairs partialled on the controls with a private Gram matrix (any d)"
    defaults = dict(_STAGE1)
    public_details = dict(_PAIRS_DETAILS)

    def _run(
        self, data: TaskData, facts: PublicFacts, epsilon: float, delta: float, rng: np.random.Generator,
    ) -> Outcome:
        acc = ZCDPAccountant(epsilon, delta)
        P, us, ws, unit, det = self._pairs(data, facts, acc, rng)
        n = data.n
        e_L = math.sqrt(acc.remaining)  # two Laplace mechanisms at eps_L cost eps_L^2/2 each
        sens = ncov_sensitivity(n)
        uc = us - us.mean()
        ncov = acc.laplace("Laplace ncov(u, w)", float(uc @ (ws - ws.mean())), sensitivity=sens, epsilon=e_L,
                           rng=rng, note=f"sensitivity {sens:.6g}")
        nvar = acc.laplace("Laplace nvar(u)", float(uc @ uc), sensitivity=sens, epsilon=e_L, rng=rng,
                           note=f"sensitivity {sens:.6g}")
        det["laplace_scale"] = sens / e_L
        if nvar <= 0:
            return self.decline("noisy nvar(u) is not positive (NoisyStats returns bottom)", acc, **det)
        return self.release(ncov / nvar * unit, acc, **det)


@register
class TheilSenFWL(_Preprocessed):
    """DP Theil-Sen (one random matching, exponential-mechanism median) on privately partialled pairs.

    Privacy: stage 1, two grid quantiles, then Smith's median of the matched
    slopes on ``[-50, 50]`` (rescaled units); a row lies in one pair, so the
    score has sensitivity 1 and the median costs ``eps^2/8`` zCDP.
    """

    name = "theilsen_fwl"
    task = "sce"
    citation = _CITATION
    interpretation = "standard"
    summary = "DP Theil-Sen on pairs partialled on the controls with a private Gram matrix (any d)"
    defaults = {
        **_STAGE1,
        "slope_bound": Param((-50.0, 50.0), "slope range in rescaled units, as the authors' code"),
    }
    # the number of matched pairs with distinct u is a data statistic: never reported
    public_details = {k: v for k, v in _PAIRS_DETAILS.items() if k != "laplace_scale"}

    def _run(
        self, data: TaskData, facts: PublicFacts, epsilon: float, delta: float, rng: np.random.Generator,
    ) -> Outcome:
        acc = ZCDPAccountant(epsilon, delta)
        P, us, ws, unit, det = self._pairs(data, facts, acc, rng)
        slopes = matched_slopes(us, ws, 1, rng)
        lo, hi = self.params["slope_bound"]
        e_m = em_epsilon(acc.remaining, bound=EM_BOUND)
        s = private_median_interval(slopes, lo, hi, e_m, rng, acc=acc,
                                    mechanism="exponential-mechanism median of matched slopes", note="sensitivity 1")
        return self.release(s * unit, acc, **det)
