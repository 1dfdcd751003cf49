"""Bag of little bootstraps with CoinPress aggregation (Covington, He, Honaker, Kamath 2021).

"Unbiased statistical estimation and valid confidence intervals under
differential privacy" (arXiv:2110.14465). The data are split into ``k``
disjoint subsets. In each subset the bag of little bootstraps (Kleiner et al.
2014) draws ``r`` multinomial resamples of the *full* size ``n`` from the
subset's ``n/k`` rows and computes the estimator on each (weighted OLS of the
coefficient of interest); the subset reports the mean ``theta_i`` and the
variance ``v_i`` of its ``r`` estimates. Because every resample has size ``n``,
``theta_i`` carries the bias of the full-sample estimator rather than that of
a small-sample one. The variances are aggregated privately with CoinPress
(Biswas, Dong, Kamath, Ullman 2020), giving a private estimate of the
estimator's variance; the means are then aggregated with CoinPress using
``k`` times that variance as the covariance bound, and the iterates of
CoinPress are combined by inverse-variance weighting (as the authors' code
does).

The paper takes prior balls (centre and radius for the mean and for the
variance, and a bound on the variance of the variances) as user input. No
such public input exists here: ``blb_coinpress`` finds them privately (a
share of the budget, tie-robust grid quantiles of the subset values), and
``blb_coinpress_databounds`` takes them from the data as the authors' demo
does (with its over-estimation factor 100; class data-bounds, not DP).

Privacy (zCDP, replace-one): one row changes one subset's pair
``(theta_i, v_i)``. Every CoinPress step clips the ``k`` values to a ball of
radius ``R`` and adds Gaussian noise to their mean, whose sensitivity is
``2 R / k`` (a subset without a valid estimate contributes the current
centre, so the divisor ``k`` is public). The prior-ball quantiles are
exponential mechanisms (``eps^2/8`` each).
"""

from __future__ import annotations

import math
from typing import cast

import numpy as np
from scipy import stats

from dpstats.algorithms.base import Algorithm, Outcome, Param, PublicFacts, TaskData
from dpstats.algorithms.registry import register
from dpstats.algorithms.sce._utils import (
    EM_BOUND,
    block_batches,
    block_fwl,
    choose_blocks,
    positive_grid,
    private_interval,
    random_blocks,
    symmetric_grid,
)
from dpstats.privacy.accounting import ZCDPAccountant, em_epsilon
from dpstats.privacy.quantiles import private_grid_cell

__all__ = ["BLBCoinPress", "BLBCoinPressDataBounds", "blb_std_error", "blb_subset_estimates", "coinpress_1d", "gaussian_tailbound"]

_CITATION = (
    "Covington, C., He, X., Honaker, J. and Kamath, G. (2021). Unbiased statistical estimation and valid "
    "confidence intervals under differential privacy. arXiv:2110.14465."
)


def gaussian_tailbound(d: int, b: float) -> float:
    """Radius containing a d-dimensional standard Gaussian with probability ``1 - b`` (CoinPress)."""
    lb = math.log(1.0 / b)
    return math.sqrt(d + 2.0 * math.sqrt(d * lb) + 2.0 * lb)


def blb_subset_estimates(
    X: np.ndarray, y: np.ndarray, j: int, blocks: list[np.ndarray], r: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """BLB mean and variance of the coefficient in every subset (NaN when fewer than 2 valid resamples).

    Resample ``s`` of subset ``b`` gives each of its rows a multinomial count
    of ``n`` draws with equal probabilities (weighted OLS with those counts).
    """
    n = X.shape[0]
    k = len(blocks)
    est = np.full((r, k), np.nan)
    # the subsets' rows are gathered once for all resamples
    batches = block_batches(X, y, blocks)
    sizes = batches.sizes
    # runs of consecutive subsets of one size: one multinomial call with ``size`` = the run's length draws
    # the same numbers, in the same order, as one call per subset
    cuts = [0, *(np.flatnonzero(sizes[1:] != sizes[:-1]) + 1).tolist(), k]
    runs = [(a, b, int(sizes[a])) for a, b in zip(cuts[:-1], cuts[1:], strict=True)]
    # each group of ``batches`` holds the subsets of one size in increasing order: its weights are the
    # draws of that size's runs, concatenated in subset order
    group_of = {int(sizes[which[0]]): g for g, (which, _, _, _) in enumerate(batches.groups)}
    for s in range(r):
        draws: list[list[np.ndarray]] = [[] for _ in batches.groups]
        for a, b, m in runs:
            draws[group_of[m]].append(rng.multinomial(n, np.full(m, 1.0 / m), size=b - a))
        gw = [np.concatenate(dg).astype(float) for dg in draws]
        bs = block_fwl(X, y, j, blocks, batches=batches, group_weights=gw)
        est[s, bs.valid] = bs.N[bs.valid] / bs.D[bs.valid]
    ok = np.sum(np.isfinite(est), axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(ok >= 2, np.nanmean(np.where(np.isfinite(est), est, np.nan), axis=0), np.nan)
        var = np.where(ok >= 2, np.nanvar(np.where(np.isfinite(est), est, np.nan), axis=0, ddof=1), np.nan)
    return mean, var


def coinpress_1d(
    x: np.ndarray,
    c: float,
    r: float,
    sigma: float,
    rhos: list[float],
    betas: list[float],
    rng: np.random.Generator,
    acc: ZCDPAccountant,
    label: str,
) -> tuple[list[float], list[float]]:
    """One-dimensional CoinPress (Biswas et al. 2020) over ``k = len(x)`` values; NaN values are invalid.

    Works in units of ``sigma`` (a bound on the standard deviation of the
    values). Step ``i`` clips to ``[c - R, c + R]`` with ``R = r + gamma_1``,
    replaces invalid values by ``c``, releases the mean plus
    ``N(0, s_i^2)`` with ``s_i = (2 R / k) / sqrt(2 rho_i)`` and shrinks the
    radius to ``gamma_2 sqrt(1/k + 2 R^2 / (k^2 rho_i))``. Returns the
    iterates and their privacy-noise variances in the original units.
    """
    k = x.size
    z = np.asarray(x, dtype=float) / sigma
    cz, rz = c / sigma, r / sigma
    iterates, noise_vars = [], []
    for i, (rho_i, beta_i) in enumerate(zip(rhos, betas, strict=False)):
        b = beta_i / 2.0
        g1 = gaussian_tailbound(1, b / k)
        g2 = gaussian_tailbound(1, b)
        R = rz + g1
        zc = np.where(np.isfinite(z), np.clip(z, cz - R, cz + R), cz)
        sens = 2.0 * R / k
        sd = sens / math.sqrt(2.0 * rho_i)
        # drawn in units of sigma; the ledger records the step in the values' own units
        cz = acc.gaussian(f"CoinPress step {i + 1} ({label})", np.mean(zc), sensitivity=sens, sigma=sd, rng=rng,
                          unit=sigma)
        rz = g2 * math.sqrt(1.0 / k + 2.0 * R * R / (k * k * rho_i))
        iterates.append(cz * sigma)
        noise_vars.append((sd * sigma) ** 2)
    return iterates, noise_vars


def _schedule(total: float, t: int) -> list[float]:
    """The authors' split over ``t`` steps: ``1/(4(t-1))`` each for the first ``t-1``, ``3/4`` for the last."""
    if t == 1:
        return [total]
    return [total / (4.0 * (t - 1))] * (t - 1) + [0.75 * total]


def _inverse_variance(values: list[float], variances: list[float]) -> tuple[float, float]:
    w = 1.0 / np.maximum(np.asarray(variances, dtype=float), 1e-300)
    return float(np.sum(w * np.asarray(values)) / np.sum(w)), float(1.0 / np.sum(w))


def blb_std_error(v_up: float, noise_vars: list[float]) -> float:
    """Standard error of the released estimate: the private variance bound plus the CoinPress noise (post-processing).

    The interval of Covington et al. (2021): the sampling variance of the
    full-size estimator is bounded by ``v_up`` (the upper confidence bound
    of the CoinPress estimate of the subsets' BLB variances), and the
    privacy noise of the inverse-variance combination of the CoinPress
    iterates (weights ``1 / (nv_t + v_up)``) has variance
    ``sum w_t^2 nv_t / (sum w_t)^2``; the normal interval uses their sum.
    """
    nv = np.asarray(noise_vars, dtype=float)
    w = 1.0 / np.maximum(nv + v_up, 1e-300)
    noise = float(np.sum(w * w * nv) / np.sum(w) ** 2)
    return float(math.sqrt(max(v_up, 0.0) + noise))


class _BLBBase(Algorithm):
    data_bounds = False

    def _run(
        self, data: TaskData, facts: PublicFacts, epsilon: float, delta: float, rng: np.random.Generator,
    ) -> Outcome:
        p = self.params
        acc = ZCDPAccountant(epsilon, delta)
        rho = acc.rho
        n, d = data.n, data.d
        k = choose_blocks(n, d, p["rows_per_param"], p["min_extra"])
        if k < 2:
            return self.decline(f"n = {n} rows give fewer than 2 subsets of at least {p['rows_per_param']} d + {p['min_extra']} rows")
        blocks = random_blocks(n, k, rng)
        means, variances = blb_subset_estimates(
            data.X, cast(np.ndarray, data.y), cast(int, facts.coef_index), blocks, int(p["blb_sims"]), rng
        )
        ok = np.isfinite(means)
        r_sims = int(p["blb_sims"])
        over = float(p["overestimation"])
        # ---- prior balls
        if self.data_bounds:
            mv = means[ok] if ok.any() else np.array([0.0])
            vv = variances[ok] if ok.any() else np.array([1.0])
            mean_c, mean_r = float(np.mean(mv)), over * abs(float(np.mean(mv))) + 1e-12
            cov_c, cov_r = float(np.mean(vv)), over * float(np.mean(vv)) + 1e-300
            cov_cov_u = over * float(np.var(vv)) + 1e-300
        else:
            e_em = em_epsilon(p["range_share"] * rho / 3.0, bound=EM_BOUND)
            lo, hi = private_interval(
                means[ok], 0.25, 0.75, e_em, rng, symmetric_grid(), widen=1.0, acc=acc,
                mechanisms=("grid quantile (mean ball, low)", "grid quantile (mean ball, high)"),
            )
            mean_c, mean_r = 0.5 * (lo + hi), 0.5 * (hi - lo)
            _, v_med = private_grid_cell(variances[ok], positive_grid(1e-30, 1e30, 4), e_em, rng, acc=acc,
                                         mechanism="grid median (variance ball)", q=0.5)
            cov_c, cov_r = v_med, over * v_med
            # variance of a sample variance of r normal draws is 2 v^2 / (r - 1); over-estimated as in the paper's demo
            cov_cov_u = over * 2.0 * v_med**2 / max(r_sims - 1, 1)
        count_share = 0.0 if self.data_bounds else float(p.get("count_share", 0.0))
        invalid = None
        if count_share > 0:
            # the interval's guard: the number of subsets without a valid BLB estimate (they enter CoinPress as
            # the current centre, pulling the estimate and the variance towards it); one row changes one subset
            sig_c = acc.gaussian_sigma(1.0, fraction=count_share)
            invalid = acc.gaussian("count of invalid subsets", float(np.sum(~ok)), sensitivity=1.0, sigma=sig_c,
                                   rng=rng, note="one row changes one subset: sensitivity 1")
        rho_rest = acc.remaining
        rho_cov = p["rho_cov_share"] * rho_rest
        rho_mean = rho_rest - rho_cov
        beta = float(p["beta"])
        beta_cov = beta * p["beta_cov_share"]
        beta_mean = beta - beta_cov
        beta_cov_ub = beta_cov / 2.0
        beta_cov_est = beta_cov / 4.0
        t_cov, t_mean = int(p["t_cov"]), int(p["t_mean"])
        # ---- CoinPress on the subset variances
        cov_its, cov_nv = coinpress_1d(
            variances, cov_c, cov_r, math.sqrt(cov_cov_u), _schedule(rho_cov, t_cov), _schedule(beta_cov_est, t_cov),
            rng, acc, "variance",
        )
        v_hat, v_hat_var = _inverse_variance(cov_its, cov_nv)
        v_up = v_hat + stats.norm.ppf(1.0 - beta_cov_ub) * math.sqrt(v_hat_var)
        # a noisy variance can come out <= 0; the paper projects onto PSD matrices (0), which would make
        # the mean step degenerate: we floor at the prior centre divided by the over-estimation factor
        v_up = max(v_up, cov_c / over, 1e-300)
        # ---- CoinPress on the subset means, covariance bound k * v_up
        sig_mean = math.sqrt(k * v_up)
        mean_its, mean_nv = coinpress_1d(
            means, mean_c, mean_r, sig_mean, _schedule(rho_mean, t_mean), _schedule(beta_mean, t_mean), rng, acc,
            "mean",
        )
        est, _ = _inverse_variance(mean_its, [nv + v_up for nv in mean_nv])
        # the count of valid subsets is a data statistic no mechanism paid for; with data bounds the
        # prior balls (and so v_up) are read from the data: neither is reported
        if self.data_bounds:
            return self.release(est, acc, k=k)
        if invalid is None:
            return self.release(est, acc, k=k, variance_upper=v_up, mean_ball=(mean_c, mean_r))
        se = blb_std_error(v_up, mean_nv)
        if invalid > float(p["max_invalid"]) * k + 3.0 * sig_c:
            se = math.inf  # too many subsets carry no estimate: the CoinPress mean is pulled to its centre
        return self.release(est, acc, std_error=se, df=None, bias_bound=0.0, k=k, variance_upper=v_up,
                            mean_ball=(mean_c, mean_r))


_DEFAULTS = {
    "rows_per_param": Param(3.0, "subset size >= rows_per_param * d + min_extra rows (as sa_coef_median; see docs)"),
    "min_extra": Param(10, "extra rows per subset (as sa_coef_median)"),
    "blb_sims": Param(10, "resamples per subset: blb_sims = 10 in the authors' OLS demo"),
    "t_mean": Param(5, "CoinPress steps for the mean: t_mean = 5 in the authors' demo"),
    "t_cov": Param(5, "CoinPress steps for the variance: t_cov = 5 in the authors' demo"),
    "rho_cov_share": Param(0.5, "rho_cov_budget_prop = 0.5 in the authors' demo"),
    "beta": Param(0.1, "failure probability beta = 0.1 in the authors' demo"),
    "beta_cov_share": Param(0.5, "beta_cov_budget_prop = 0.5 in the authors' demo"),
    "overestimation": Param(100.0, "gvdp_overest_factor = 100 in the authors' demo"),
}


@register
class BLBCoinPress(_BLBBase):
    """BLB + CoinPress (Covington et al. 2021) with privately found prior balls.

    See the module docstring for the privacy argument.
    """

    name = "blb_coinpress"
    task = "sce"
    #: the interval of the paper (post-processing), with a released count of invalid subsets as its guard
    intervals = True
    interval_params = {"count_share": 0.02}
    citation = _CITATION
    interpretation = "standard"
    summary = "bag of little bootstraps per subset; CoinPress on subset variances then means (prior balls private)"
    defaults = {
        **_DEFAULTS,
        "range_share": Param(0.2, "share of rho for the private prior balls (our adaptation; the paper assumes them given)"),
        "count_share": Param(0.0, "ours: share of rho for the count of invalid subsets, the interval's guard (0: point "
                                  "release only; the interval configuration uses interval_params)"),
        "max_invalid": Param(0.1, "ours: infinite interval when more of the subsets have no valid estimate"),
    }
    public_details = {
        "k": "public fact: number of subsets, a function of n, d and the hyperparameters (choose_blocks)",
        "variance_upper": "paid statistic: upper confidence bound from `CoinPress step` (variance) and the "
                          "`grid median (variance ball)` floor",
        "mean_ball": "paid statistic: `grid quantile (mean ball, low)`, `grid quantile (mean ball, high)`",
    }
    # what the interval covers, in the API's words
    interval_covers = ("sampling error of independent rows (the bag-of-little-bootstraps variance) and the "
                       "privacy noise (Covington et al. 2021); not clustered sampling error")
    interval_robust = True


@register
class BLBCoinPressDataBounds(_BLBBase):
    """BLB + CoinPress with prior balls read from the data as in the authors' demo (class data-bounds)."""

    name = "blb_coinpress_databounds"
    task = "sce"
    citation = _CITATION
    interpretation = "data-bounds"
    summary = "BLB + CoinPress with prior balls from the data, as the authors' demo (not DP)"
    defaults = dict(_DEFAULTS)
    data_bounds = True
    # the prior balls come from the data without privacy: not in the details
    public_details = {"k": "public fact: number of subsets, a function of n, d and the hyperparameters (choose_blocks)"}
