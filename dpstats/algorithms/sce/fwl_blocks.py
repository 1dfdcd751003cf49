"""Block Frisch-Waugh sums: noisy clipped sums of per-block numerators and denominators.

Our design (see ``docs/algorithms/sce/fwl_blocks.md``). The rows are split at
random into ``k`` disjoint blocks; within each block the regressor of interest
is partialled on the controls (Frisch-Waugh), giving ``N_b = x~'y`` and
``D_b = x~'x~``. The pooled ratio ``sum N_b / sum D_b`` is the OLS coefficient
of the regression with block-specific control coefficients: a
precision-weighted average of block coefficients that, unlike the median of
block coefficients, is unbiased for skewed block estimates and efficient.

Privately:

1. a pilot ``theta0``: subsample-and-aggregate median (private range on a
   public grid, then Smith's median);
2. clipping scales ``C_R`` for ``R_b = N_b - theta0 D_b`` and ``C_D`` for
   ``D_b`` from private quantiles on a public geometric grid;
3. Laplace releases of ``sum clip(R_b, +-C_R)`` and ``sum clip(D_b, 0, C_D)``
   (sensitivities ``2 C_R`` and ``C_D``: one row changes one block);
4. ``theta0 + S_R / S_D``, kept inside the pilot's private range.

Accounting is pure DP by basic composition (five exponential mechanisms and
two Laplace mechanisms); ``delta`` is not used.
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np

from dpstats.algorithms.base import Algorithm, Outcome, Param, PublicFacts, TaskData
from dpstats.algorithms.registry import register
from dpstats.algorithms.sce._utils import (
    BlockStats,
    block_fwl,
    choose_blocks,
    positive_grid,
    private_interval,
    private_median_interval,
    random_blocks,
    symmetric_grid,
)
from dpstats.privacy.accounting import PureAccountant
from dpstats.privacy.quantiles import private_grid_cell

__all__ = ["FWLBlocks", "FWL_BLOCK_DETAILS", "fwl_block_release"]


def fwl_block_release(
    bs: BlockStats,
    acc: PureAccountant,
    rng: np.random.Generator,
    *,
    pilot_share: float,
    scale_share: float,
    d_share: float,
    q_R: float,
    q_D: float,
    clip_R: float,
    clip_D: float,
) -> tuple[float, dict[str, Any]]:
    """Run steps 1-4 on block statistics, spending the accountant's whole budget (pure DP).

    Parameters
    ----------
    bs : BlockStats
        Per-block Frisch-Waugh statistics (one row changes one block).
    acc : PureAccountant
        Fresh accountant; exhausted on return.
    pilot_share, scale_share : float
        Shares of epsilon for the pilot (3 exponential mechanisms) and the
        two scale quantiles; the rest goes to the two Laplace sums.
    d_share : float
        Share of the sums' epsilon spent on the denominator sum.
    q_R, q_D : float
        Quantiles for the clipping scales.
    clip_R, clip_D : float
        Multipliers of the upper cell edges of those quantiles.

    Returns
    -------
    estimate : float
    details : dict
    """
    eps = acc.epsilon
    theta = bs.theta
    # 1. pilot: private range + Smith median
    e_pilot = pilot_share * eps / 3.0
    lo, hi = private_interval(
        theta, 0.25, 0.75, e_pilot, rng, symmetric_grid(), widen=1.0, acc=acc,
        mechanisms=("grid quantile (pilot range low)", "grid quantile (pilot range high)"),
    )
    theta0 = private_median_interval(theta, lo, hi, e_pilot, rng, acc=acc, mechanism="Smith median (pilot)",
                                     note="sensitivity 1")
    # 2. scales
    e_scale = scale_share * eps / 2.0
    R = bs.N - theta0 * bs.D
    grid = positive_grid(1e-20, 1e20, 4)
    _, cr = private_grid_cell(np.abs(R), grid, e_scale, rng, acc=acc, mechanism="grid quantile (scale of R_b)",
                              q=q_R)
    _, cd = private_grid_cell(bs.D, grid, e_scale, rng, acc=acc, mechanism="grid quantile (scale of D_b)", q=q_D)
    C_R = clip_R * cr
    C_D = clip_D * cd
    # 3. Laplace release of the two clipped sums
    e_sum = acc.remaining
    e_D = d_share * e_sum
    e_R = e_sum - e_D
    b_R = 2.0 * C_R / e_R
    b_D = C_D / e_D
    S_R = acc.laplace("Laplace sum of clipped R_b", float(np.sum(np.clip(R, -C_R, C_R))), sensitivity=2.0 * C_R,
                      epsilon=e_R, rng=rng, note=f"sensitivity 2 C_R = {2 * C_R:.6g}")
    S_D = acc.laplace("Laplace sum of clipped D_b", float(np.sum(np.clip(bs.D, 0.0, C_D))), sensitivity=C_D,
                      epsilon=e_D, rng=rng, note=f"sensitivity C_D = {C_D:.6g}")
    # 4. ratio, kept in the pilot range (post-processing)
    est = theta0 + S_R / S_D if S_D > 0 else theta0
    est = float(np.clip(est, lo, hi))
    # the count of valid blocks is a data statistic no mechanism paid for: never reported
    return est, {
        "k": bs.k, "theta0": theta0, "pilot_range": (lo, hi),
        "C_R": C_R, "C_D": C_D, "laplace_R": b_R, "laplace_D": b_D,
    }


#: the keys of :func:`fwl_block_release`'s details and why each is public
FWL_BLOCK_DETAILS = {
    "k": "public fact: number of blocks, a function of n, d and the hyperparameters (choose_blocks)",
    "theta0": "paid statistic: `Smith median (pilot)`",
    "pilot_range": "paid statistic: `grid quantile (pilot range low)`, `grid quantile (pilot range high)`",
    "C_R": "paid statistic: `grid quantile (scale of R_b)` times the public clip_R",
    "C_D": "paid statistic: `grid quantile (scale of D_b)` times the public clip_D",
    "laplace_R": "paid statistic: 2 C_R / eps_R, from `grid quantile (scale of R_b)`",
    "laplace_D": "paid statistic: C_D / eps_D, from `grid quantile (scale of D_b)`",
}


@register
class FWLBlocks(Algorithm):
    """Noisy clipped sums of per-block Frisch-Waugh numerators and denominators (our design).

    Privacy: pure DP; every mechanism sees the block statistics, and replacing
    one row changes the statistics of exactly one block. See the module
    docstring and the docs page for the argument.
    """

    name = "fwl_blocks"
    task = "sce"
    citation = "dpstats (this package): block Frisch-Waugh sums; blocks as in Nissim, Raskhodnikova, Smith (2007)"
    interpretation = "standard"
    summary = "Frisch-Waugh within random blocks; noisy clipped sums of block numerators and denominators"
    defaults = {
        "rows_per_param": Param(2.0, "block size >= rows_per_param * d + min_extra (tuned on the public corpus)"),
        "min_extra": Param(5, "extra rows per block (tuned on the public corpus)"),
        "pilot_share": Param(0.3, "share of epsilon for the pilot median (our choice)"),
        "scale_share": Param(0.2, "share of epsilon for the two clipping-scale quantiles (our choice)"),
        "d_share": Param(0.25, "share of the sums' epsilon for the denominator sum (our choice)"),
        "q_R": Param(0.5, "quantile of |R_b| for its clipping scale: the median, locatable with few blocks (our choice)"),
        "q_D": Param(0.5, "quantile of D_b for its clipping scale (our choice)"),
        "clip_R": Param(3.0, "multiplier of the |R_b| quantile (our choice)"),
        "clip_D": Param(2.0, "multiplier of the D_b quantile (our choice)"),
    }
    public_details = dict(FWL_BLOCK_DETAILS)

    def _run(
        self, data: TaskData, facts: PublicFacts, epsilon: float, delta: float, rng: np.random.Generator,
    ) -> Outcome:
        p = self.params
        acc = PureAccountant(epsilon, delta)
        k = choose_blocks(data.n, data.d, p["rows_per_param"], p["min_extra"])
        bs = block_fwl(data.X, cast(np.ndarray, data.y), cast(int, facts.coef_index), random_blocks(data.n, k, rng))
        est, det = fwl_block_release(
            bs, acc, rng, pilot_share=p["pilot_share"], scale_share=p["scale_share"], d_share=p["d_share"],
            q_R=p["q_R"], q_D=p["q_D"], clip_R=p["clip_R"], clip_D=p["clip_D"],
        )
        return self.release(est, acc, **det)
