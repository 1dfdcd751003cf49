"""CoinPress mean estimation (Biswas, Dong, Kamath, Ullman 2020).

``coinpress``
    The paper's iterative estimator for a distribution with (roughly)
    identity covariance, started from a public prior ball.
``coinpress_scaled``
    The same after dividing every column by a private scale (a private
    quantile of pairwise differences), so that the identity-covariance
    assumption holds roughly coordinate by coordinate.

Both are standard: they read only ``n``, ``d`` and the public bounds, and
spend exactly their zCDP budget ``rho = zcdp_rho(epsilon, delta)``.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

from dpstats.algorithms.base import Algorithm, Param, PublicFacts, Release, TaskData
from dpstats.algorithms.mean._utils import (
    DEFAULT_RANGE,
    ball_mean,
    gaussian_tailbound,
    pair_differences,
    prior_ball,
    prior_box,
    scale_grid,
)
from dpstats.algorithms.registry import register
from dpstats.privacy.accounting import ZCDPAccountant
from dpstats.privacy.quantiles import private_grid_index

__all__ = ["CoinPress", "CoinPressScaled", "coinpress_iterate", "coinpress_schedule"]


def coinpress_schedule(t: int, first_share: float = 0.25) -> np.ndarray:
    """Shares of rho per iteration: the first ``t-1`` split ``first_share`` equally, the last gets the rest.

    This is the reference code's schedule (``Ps2 = [1/4, 3/4]``, ``Ps4 = [1/12,
    1/12, 1/12, 3/4]``, ``Ps10 = [1/36] * 9 + [3/4]``); ``t = 1`` spends all on
    the single step.
    """
    if t < 1:
        raise ValueError("t must be >= 1")
    if t == 1:
        return np.array([1.0])
    return np.array([first_share / (t - 1)] * (t - 1) + [1.0 - first_share])


def coinpress_iterate(
    Z: np.ndarray,
    center: np.ndarray,
    radius: float,
    rhos: np.ndarray,
    acc: ZCDPAccountant,
    rng: np.random.Generator,
    beta: float = 0.01,
) -> tuple[np.ndarray, list[dict[str, float]]]:
    """Run the CoinPress mean iterations on ``Z`` from the public ball ``B(center, radius)``.

    Step ``t`` (reference code ``multivariate_mean_step``): with
    ``gamma = gaussian_tailbound(d, beta)``, project every row onto the ball
    ``B(c, C)`` with ``C = min(sqrt(r^2 + 6 r + gamma^2), r + gamma)``; the
    mean of the projected rows has replace-one L2 sensitivity ``2 C / n``;
    release it with Gaussian noise ``sigma = 2 C / (n sqrt(2 rho_t))``, which
    is ``rho_t``-zCDP. The new ball has centre the noisy mean and radius
    ``gamma sqrt(1/n + sigma^2)``. Every step is charged to ``acc``.

    Returns
    -------
    center : ndarray
        The last noisy mean (the estimate).
    trace : list of dict
        Radius, clip threshold and sigma per step (public given earlier
        releases; the number of rows clipped is not reported: it is a count
        of the private data that no mechanism has paid for).
    """
    n, d = Z.shape
    gamma = gaussian_tailbound(d, beta)
    c = np.asarray(center, dtype=float).copy()
    r = float(radius)
    trace = []
    for i, rho_t in enumerate(rhos):
        C = min(math.sqrt(r * r + 6.0 * r + gamma * gamma), r + gamma)
        mean = ball_mean(Z, c, C)
        sens = 2.0 * C / n
        sigma = sens / math.sqrt(2.0 * rho_t)
        c = acc.gaussian(f"coinpress step {i + 1}", mean, sensitivity=sens, sigma=sigma, rng=rng,
                         note=f"ball radius {C:.4g}, replace-one sensitivity 2C/n")
        trace.append({"radius": r, "clip": C, "sigma": sigma})
        r = gamma * math.sqrt(1.0 / n + sigma * sigma)
    return c, trace


@register
class CoinPress(Algorithm):
    """CoinPress (Biswas, Dong, Kamath, Ullman 2020), identity-covariance version.

    Starts from the public prior ball (:func:`~dpstats.algorithms.mean._utils.prior_ball`:
    bounds where given, else half-width ``1e6`` per column, so ``1e6 sqrt(d)``
    for an unbounded instance) and runs ``t`` iterations of
    :func:`coinpress_iterate` with the reference code's budget schedule.
    The paper assumes covariance at most the identity; on raw economic data
    (scores in the hundreds, incomes in the thousands) the final clipping ball
    of radius about ``gamma`` truncates almost every row, and the estimate is
    badly biased. That is the faithful behaviour; ``coinpress_scaled`` fixes
    the scale first.
    """

    name = "coinpress"
    task = "mean"
    citation = "Biswas, Dong, Kamath, Ullman (2020), CoinPress: Practical Private Mean and Covariance Estimation, NeurIPS"
    interpretation = "standard"
    summary = "iterative private confidence-ball shrinking (zCDP), identity covariance assumed"
    iterative = True
    defaults = {
        "t": Param(10, "reference code: the prior-radius experiment runs t = 10 (Ps10) for large priors"),
        "first_share": Param(0.25, "reference code: the first t-1 steps share rho/4, the last gets 3 rho/4"),
        "beta": Param(0.01, "reference code: gaussian_tailbound(d, 0.01)"),
        "default_radius": Param(DEFAULT_RANGE, "ours: loose public half-range per unbounded column (corpus max 4.6e5)"),
    }
    public_details = {
        "prior_radius": "public fact: radius of the public prior ball",
        "trace": "public fact: radius, clip and sigma of every step, from the public prior ball, n, d and the budget "
                 "(the count of clipped rows is not reported)",
    }

    def _run(self, data: TaskData, facts: PublicFacts, epsilon: float, delta: float,
             rng: np.random.Generator) -> Release:
        acc = ZCDPAccountant(epsilon, delta)
        center, radius = prior_ball(facts, float(self.params["default_radius"]))
        rhos = coinpress_schedule(int(self.params["t"]), float(self.params["first_share"])) * acc.rho
        est, trace = coinpress_iterate(data.X, center, radius, rhos, acc, rng, float(self.params["beta"]))
        return self.release(est, acc, prior_radius=radius, trace=trace)


@register
class CoinPressScaled(Algorithm):
    """CoinPress after a private per-column scale.

    Algorithm
    ---------
    1. For each column ``j``: pair the rows by a random permutation (from
       ``rng``), take the differences ``|x_a - x_b|`` of the ``floor(n/2)``
       pairs (location-free), and release their
       ``q``-quantile with the tie-robust exponential mechanism on a public
       geometric grid (:func:`~dpstats.algorithms.mean._utils.grid_quantile`).
       For Gaussian data ``(x_a - x_b)/sqrt(2) ~ N(0, s^2)``, so
       ``s_j = Q_q / (sqrt(2) Phi^{-1}((1+q)/2))``; a column with public
       bounds has ``s_j <= (hi - lo)/2``.
    2. Divide the columns by ``s`` and run CoinPress from the scaled public
       prior ball; multiply the estimate back.

    Privacy: step 1 is ``d`` exponential mechanisms of sensitivity 1 (one
    replaced row changes one pair difference), each ``epsilon_j``-DP and
    ``epsilon_j^2/8``-zCDP (bounded range); step 2 is CoinPress on data
    rescaled by released values. zCDP composes additively; the accountant
    converts the total to ``(epsilon, delta)``.
    """

    name = "coinpress_scaled"
    task = "mean"
    citation = CoinPress.citation + "; per-column scale from private pair-difference quantiles (ours)"
    interpretation = "standard"
    summary = "CoinPress on columns divided by a private scale (pair-difference quantile)"
    iterative = True
    defaults = {
        **CoinPress.defaults,
        "scale_share": Param(0.25, "ours: a quarter of rho for the d scale quantiles"),
        "scale_q": Param(0.9, "ours: quantile of |x_a - x_b|; above 0.5 so that dummies with p > 5% get a non-zero scale"),
        "per_octave": Param(8, "ours: scale grid resolution 2^(1/8) (9%)"),
    }
    public_details = {
        "scales": "paid statistic: `scale quantile col` (capped by the public range of bounded columns)",
        "trace": "paid statistic: radius, clip and sigma of every step, from the prior ball rescaled by the "
                 "`scale quantile col` releases, n, d and the budget",
    }

    def _run(self, data: TaskData, facts: PublicFacts, epsilon: float, delta: float,
             rng: np.random.Generator) -> Release:
        X = data.X
        n, d = X.shape
        acc = ZCDPAccountant(epsilon, delta)
        R = float(self.params["default_radius"])
        lo, hi = prior_box(facts, R)
        q = float(self.params["scale_q"])
        share = float(self.params["scale_share"])
        eps_j = acc.em_epsilon(share * acc.rho / d, bound="bounded_range")
        zq = math.sqrt(2.0) * stats.norm.ppf((1.0 + q) / 2.0)
        scales = np.empty(d)
        for j in range(d):
            width = max(hi[j] - lo[j], 1e-12)
            grid = scale_grid(width * 1e-8, width, int(self.params["per_octave"]))
            diffs = pair_differences(X[:, j], rng)
            rank = int(math.ceil(q * diffs.size)) if diffs.size else 1
            Q = float(grid[private_grid_index(diffs, grid, eps_j, rng, acc=acc, mechanism=f"scale quantile col {j}",
                                              rank=rank)])
            s_j = min(Q / zq, width / 2.0) if facts.columns[j] in facts.bounds else Q / zq
            scales[j] = max(s_j, width * 1e-12)  # a public constant column keeps a positive scale
        Z = X / scales[None, :]
        center = (lo + hi) / 2.0 / scales
        radius = float(np.linalg.norm((hi - lo) / 2.0 / scales))
        rhos = coinpress_schedule(int(self.params["t"]), float(self.params["first_share"])) * acc.remaining
        est, trace = coinpress_iterate(Z, center, radius, rhos, acc, rng, float(self.params["beta"]))
        return self.release(est * scales, acc, scales=scales, trace=trace)
