"""Subsample-and-aggregate interval: the private mean and spread of block coefficients.

``sa_coef_interval`` (standard, pure DP) splits the rows at random into ``k``
disjoint blocks (``k`` from the public ``n`` and ``d``), runs OLS in each
block (Frisch-Waugh) and releases, on a private range ``[L, U]`` of the block
coefficients (as ``sa_coef_winsorized``), the winsorised sum, the winsorised
sum of squares and the number of blocks that are invalid or outside the
range. The estimate is the winsorised mean of the blocks; its standard error
is the private spread of the blocks over ``sqrt(k)`` plus the Laplace noise,
with a Student-t on ``k - 1`` degrees of freedom: the interval of the
subsample-and-aggregate framework (Nissim, Raskhodnikova and Smith 2007;
Smith 2011), as used for private confidence intervals by e.g. Evans, King,
Schwenzfeier and Thakurta (2023). The blocks are independent, so the
sampling error it covers is that of independent rows, robust to
heteroskedasticity (not to clustering: a cluster can span blocks).

Privacy (replace-one neighbours, pure DP, basic composition): replacing a
row changes one block's coefficient (or its validity). Given the range, that
block's winsorised term ``clip(theta_b) - c`` moves by at most ``U - L``,
its square (in ``[0, h^2]``, ``h = (U - L)/2``) by at most ``h^2``, and the
count by at most 1: three Laplace mechanisms. The range is two tie-robust
grid quantiles of sensitivity 1. Shares of epsilon: ``range_share`` (0.3)
for the range, ``var_share`` (0.15) for the squares, ``count_share`` (0.05)
for the count, the rest for the sum.

Honest when poor: the standard error is infinite when more than
``max_outside`` (10 %) of the blocks are invalid or winsorised (plus three
noise standard deviations of the count), since winsorisation then biases
both the mean and the spread; when the count's noise is too large for that
test (three noise sds above ``max_outside k``: few blocks or a small
budget); or when ``k < 2``. Not covered: the small-sample bias of OLS in
blocks of ``3 d + 10`` rows under misspecification, which matters when
``k`` is large (fertil2_botswana, k = 198: coverage 0.75 at epsilon 10).
"""

from __future__ import annotations

import math
from typing import Any, ClassVar, cast

import numpy as np

from dpstats.algorithms.base import Algorithm, Outcome, Param, PublicFacts, TaskData
from dpstats.algorithms.registry import register
from dpstats.algorithms.sce._utils import block_fwl, choose_blocks, private_interval, random_blocks, symmetric_grid
from dpstats.privacy.accounting import PureAccountant

__all__ = ["SAInterval"]


@register
class SAInterval(Algorithm):
    """Winsorised mean of block coefficients with a private block spread and count (standard, pure DP)."""

    name = "sa_coef_interval"
    task = "sce"
    citation = ("Nissim, K., Raskhodnikova, S. and Smith, A. (2007). Smooth sensitivity and sampling in private "
                "data analysis. STOC; Smith, A. (2011). STOC; interval: the subsample-and-aggregate t interval "
                "on the private mean and spread of block estimates")
    interpretation = "standard"
    summary = "subsample and aggregate: winsorised mean and spread of block OLS coefficients, t interval on k - 1 df"
    intervals = True
    interval_params: ClassVar[dict[str, Any]] = {}
    defaults = {
        "rows_per_param": Param(3.0, "as sa_coef_winsorized"),
        "min_extra": Param(10, "as sa_coef_winsorized"),
        "range_share": Param(0.3, "as sa_coef_winsorized"),
        "range_quantiles": Param((0.25, 0.75), "as sa_coef_winsorized"),
        "widen": Param(1.0, "as sa_coef_winsorized"),
        "var_share": Param(0.15, "ours: the spread needs less precision than the mean"),
        "count_share": Param(0.05, "ours: one count"),
        "max_outside": Param(0.1, "ours: infinite interval when more of the blocks are invalid or winsorised"),
    }
    public_details = {
        "k": "public fact: number of blocks, a function of n, d and the hyperparameters (choose_blocks)",
        "range": "paid statistic: `grid quantile (range low)`, `grid quantile (range high)`",
        "block_sd": "paid statistic: from `Laplace winsorised sum` and `Laplace winsorised sum of squares`",
        "outside": "paid statistic: `Laplace count of invalid or winsorised blocks`",
    }

    def _run(
        self, data: TaskData, facts: PublicFacts, epsilon: float, delta: float, rng: np.random.Generator,
    ) -> Outcome:
        p = self.params
        acc = PureAccountant(epsilon, delta)
        n, d = data.n, data.d
        k = choose_blocks(n, d, p["rows_per_param"], p["min_extra"])
        bs = block_fwl(data.X, cast(np.ndarray, data.y), cast(int, facts.coef_index), random_blocks(n, k, rng))
        theta = bs.theta
        e_range = epsilon * float(p["range_share"])
        q_lo, q_hi = p["range_quantiles"]
        lo, hi = private_interval(
            theta, q_lo, q_hi, e_range / 2, rng, symmetric_grid(), widen=p["widen"], acc=acc,
            mechanisms=("grid quantile (range low)", "grid quantile (range high)"),
        )
        c, h = 0.5 * (lo + hi), 0.5 * (hi - lo)
        t = np.clip(theta, lo, hi) - c
        e_var = epsilon * float(p["var_share"])
        e_cnt = epsilon * float(p["count_share"])
        e_mean = epsilon - e_range - e_var - e_cnt
        outside = int(k - theta.size) + int(np.sum((theta < lo) | (theta > hi)))
        cnt = acc.laplace("Laplace count of invalid or winsorised blocks", float(outside), sensitivity=1.0,
                          epsilon=e_cnt, rng=rng, note="one row changes one block")
        q2 = acc.laplace("Laplace winsorised sum of squares", float(np.sum(t * t)), sensitivity=h * h,
                         epsilon=e_var, rng=rng, note=f"terms in [0, h^2], h={h:.6g}")
        s1 = acc.laplace("Laplace winsorised sum", float(np.sum(t)), sensitivity=hi - lo, epsilon=e_mean, rng=rng,
                         note=f"sensitivity U-L={hi - lo:.6g}")
        est = c + s1 / k
        if k < 2:
            return self.release(est, acc, std_error=math.inf, df=1.0, bias_bound=0.0, k=k, range=(lo, hi),
                                block_sd=math.nan, outside=float(cnt))
        b1, b2, b0 = (hi - lo) / e_mean, h * h / e_var, 1.0 / e_cnt
        m1 = s1 / k
        # one noise sd of the squares added: the noisy spread errs wide
        var_b = max((q2 + math.sqrt(2.0) * b2) / k - m1 * m1, 0.0) * k / (k - 1)
        se = math.sqrt(var_b / k + 2.0 * b1 * b1 / (k * k))
        slack = 3.0 * math.sqrt(2.0) * b0
        if cnt > float(p["max_outside"]) * k + slack or slack > float(p["max_outside"]) * k:
            # too many blocks invalid or winsorised, or too few blocks for the count to tell
            se = math.inf
        return self.release(est, acc, std_error=se, df=float(k - 1), bias_bound=0.0, k=k, range=(lo, hi),
                            block_sd=math.sqrt(var_b), outside=float(cnt))

    # what the interval covers, in the API's words
    interval_covers = ("sampling error of independent rows (the spread of independent block estimates, robust to "
                       "heteroskedasticity) and the privacy noise; not clustered sampling error")
    interval_robust = True
