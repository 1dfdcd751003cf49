"""Subsample-and-aggregate of the coefficient of interest (Nissim, Raskhodnikova, Smith 2007).

The rows are split at random into ``k`` disjoint blocks; OLS is run in each
block (through Frisch-Waugh, see :mod:`dpstats.algorithms.sce._utils`) and the
block coefficients of interest are aggregated privately. Replacing one row
changes one block coefficient, so any aggregate with sensitivity bounded per
block value is private at the block level.

Two aggregates, both bound-free (the range of the block coefficients is found
privately on a public symmetric geometric grid):

``sa_coef_median``
    Smith's (2011) private median on the private range.
``sa_coef_winsorized``
    A noisy winsorised mean (Laplace) on the private range.

A block where the coefficient is not identified (the regressor of interest
lies in the span of the controls within the block) is *dropped* by the median
(the median's score tolerates a data-dependent count) and contributes the
centre of the private range to the winsorised mean, so it cannot drag either
aggregate.
"""

from __future__ import annotations

import math
from typing import Any, cast

import numpy as np

from dpstats.algorithms.base import Algorithm, Outcome, Param, PublicFacts, TaskData
from dpstats.algorithms.registry import register
from dpstats.algorithms.sce._utils import (
    BlockStats,
    block_fwl,
    choose_blocks,
    private_interval,
    private_median_interval,
    random_blocks,
    symmetric_grid,
)
from dpstats.privacy.accounting import PureAccountant

__all__ = ["SAMedian", "SAWinsorized"]

_CITATION = (
    "Nissim, K., Raskhodnikova, S. and Smith, A. (2007). Smooth sensitivity and sampling in private data "
    "analysis. STOC. Smith, A. (2011). Privacy-preserving statistical estimation with optimal convergence "
    "rates. STOC."
)


#: details shared by both aggregates (the count of valid blocks is a data statistic: never reported)
_PUBLIC_DETAILS = {
    "k": "public fact: number of blocks, a function of n, d and the hyperparameters (choose_blocks)",
    "range": "paid statistic: `grid quantile (range low)`, `grid quantile (range high)`",
}


def _blocks(
    data: TaskData, facts: Any, rng: np.random.Generator, rows_per_param: float, min_extra: int,
) -> BlockStats:
    n, d = data.n, data.d
    k = choose_blocks(n, d, rows_per_param, min_extra)
    blocks = random_blocks(n, k, rng)
    return block_fwl(data.X, cast(np.ndarray, data.y), facts.coef_index, blocks)


@register
class SAMedian(Algorithm):
    """Subsample-and-aggregate with a bound-free private median of block coefficients.

    Privacy (replace-one, pure DP, basic composition): two tie-robust grid
    quantiles of the block coefficients (each ``range_share * epsilon / 2``-DP,
    sensitivity 1 because one row changes one block value) give a range; Smith's
    median on that range spends the rest. ``delta`` is not used.
    """

    name = "sa_coef_median"
    task = "sce"
    citation = _CITATION
    interpretation = "standard"
    summary = "median of block OLS coefficients, private range then Smith's private median"
    defaults = {
        "rows_per_param": Param(3.0, "block size >= rows_per_param * d + min_extra rows (our choice, see docs)"),
        "min_extra": Param(10, "extra rows per block beyond rows_per_param * d (our choice)"),
        "range_share": Param(0.3, "share of epsilon for the private range (our choice)"),
        "range_quantiles": Param((0.25, 0.75), "quantiles the range is built on, widened by `widen` (our choice)"),
        "widen": Param(1.0, "the range is widened by this many widths on each side (our choice)"),
    }
    public_details = dict(_PUBLIC_DETAILS)

    def _run(
        self, data: TaskData, facts: PublicFacts, epsilon: float, delta: float, rng: np.random.Generator,
    ) -> Outcome:
        p = self.params
        acc = PureAccountant(epsilon, delta)
        bs = _blocks(data, facts, rng, p["rows_per_param"], p["min_extra"])
        theta = bs.theta
        e_range = epsilon * p["range_share"]
        q_lo, q_hi = p["range_quantiles"]
        lo, hi = private_interval(
            theta, q_lo, q_hi, e_range / 2, rng, symmetric_grid(), widen=p["widen"], acc=acc,
            mechanisms=("grid quantile (range low)", "grid quantile (range high)"),
        )
        e_med = epsilon - e_range
        est = private_median_interval(
            theta, lo, hi, e_med, rng, acc=acc, mechanism="Smith median", note="sensitivity 1 (one block changes)"
        )
        return self.release(
            est, acc, k=bs.k, range=(lo, hi),
        )


@register
class SAWinsorized(Algorithm):
    """Subsample-and-aggregate with a private winsorised mean of block coefficients.

    Privacy (replace-one, pure DP, basic composition): a private range
    ``[L, U]`` from two tie-robust grid quantiles, then
    ``c + (sum_b clip(theta_b, L, U) - c + Laplace((U - L) / eps_mean)) / k`` with
    ``c = (L + U) / 2`` and invalid blocks contributing ``c`` (0 to the sum).
    One row changes one block: its term moves by at most ``U - L``.
    """

    name = "sa_coef_winsorized"
    task = "sce"
    citation = _CITATION
    interpretation = "standard"
    summary = "winsorised mean of block OLS coefficients on a private range (Laplace)"
    defaults = {
        "rows_per_param": Param(3.0, "block size >= rows_per_param * d + min_extra rows (our choice, see docs)"),
        "min_extra": Param(10, "extra rows per block beyond rows_per_param * d (our choice)"),
        "range_share": Param(0.3, "share of epsilon for the private range (our choice)"),
        "range_quantiles": Param((0.25, 0.75), "quantiles the winsorisation range is built on, widened (our choice; "
                                  "0.1/0.9 cannot be located with few blocks)"),
        "widen": Param(1.0, "the range is widened by this many widths on each side (our choice)"),
    }
    public_details = {
        **_PUBLIC_DETAILS,
        "laplace_scale": "paid statistic: (U - L) / eps_mean from the private range `grid quantile (range low)`, "
                         "`grid quantile (range high)`",
    }

    def _run(
        self, data: TaskData, facts: PublicFacts, epsilon: float, delta: float, rng: np.random.Generator,
    ) -> Outcome:
        p = self.params
        acc = PureAccountant(epsilon, delta)
        bs = _blocks(data, facts, rng, p["rows_per_param"], p["min_extra"])
        theta = bs.theta
        e_range = epsilon * p["range_share"]
        q_lo, q_hi = p["range_quantiles"]
        lo, hi = private_interval(
            theta, q_lo, q_hi, e_range / 2, rng, symmetric_grid(), widen=p["widen"], acc=acc,
            mechanisms=("grid quantile (range low)", "grid quantile (range high)"),
        )
        e_mean = epsilon - e_range
        c = 0.5 * (lo + hi)
        s = float(np.sum(np.clip(theta, lo, hi) - c))
        scale = (hi - lo) / e_mean
        s_noisy = acc.laplace(
            "Laplace winsorised sum", s, sensitivity=hi - lo, epsilon=e_mean, rng=rng,
            note=f"sensitivity U-L={hi - lo:.6g}",
        )
        est = c + s_noisy / bs.k
        return self.release(
            est, acc, k=bs.k, range=(lo, hi), laplace_scale=scale,
        )


def winsorized_sensitivity(lo: float, hi: float) -> float:
    """Sensitivity of ``sum_b (clip(theta_b, lo, hi) - c)`` when one block changes or (in)validates."""
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise ValueError("need finite lo < hi")
    return float(hi - lo)
