"""A Karwa-Vadhan-style confidence interval for means: private range, private mean, private variance.

``kv_interval`` (standard) releases, per column, a private mean and a private
scale and builds the interval

    estimate +- (t_{n-1} * sqrt(s^2 / n + sigma_priv^2) + bias allowance)

for the population mean (Karwa and Vadhan 2018, in the structure of their
"range, then clipped mean and clipped variance" algorithm; the range step is
dpstats' tail-adaptive one, shared with ``adaptive_clip``).

Budget split (zCDP ``rho`` from ``(epsilon, delta)``):

* ``range_share`` (default 0.35) for the private ranges of the columns
  without public bounds (nothing when every column is bounded);
* ``var_share`` (default 0.15) for the clipped second moments;
* the rest for the clipped means.

Privacy argument (replace-one neighbours): the ranges are exponential
mechanisms on public grids (:func:`~dpstats.algorithms.mean.adaptive.private_column_ranges`);
given them each row is scaled to ``z in [-1, 1]^d'``, so the mean of ``z``
has L2 sensitivity ``2 sqrt(d') / n`` and the mean of ``z^2`` (in
``[0, 1]^d'``) ``sqrt(d') / n``: two Gaussian mechanisms. The standard error,
the degrees of freedom and the bias allowance are functions of those releases
and of ``n`` only (post-processing): the non-private standard deviation is
never used.
"""

from __future__ import annotations

import math

import numpy as np

from dpstats.algorithms.base import Algorithm, Decline, Param, PublicFacts, Release, TaskData
from dpstats.algorithms.mean._utils import DEFAULT_RANGE, prior_box
from dpstats.algorithms.mean.adaptive import private_column_ranges, range_failed
from dpstats.algorithms.registry import register
from dpstats.privacy.accounting import ZCDPAccountant, em_epsilon

__all__ = ["KVInterval"]


@register
class KVInterval(Algorithm):
    """Private mean and private variance per column, with a Student-t interval (standard).

    Algorithm
    ---------
    1. Ranges ``[a_j, b_j]``: public bounds where given; otherwise
       :func:`~dpstats.algorithms.mean.adaptive.private_column_ranges`
       (a private median and two tail scales, widened to leave about
       ``kstar = max(kappa / mu, 0.5)`` points beyond each end).
    2. ``z = clip((x - c) / h, -1, 1)`` with centre ``c`` and half-width ``h``.
    3. Release ``m1 = mean(z) + N(0, sigma_m^2)`` and ``m2 = mean(z^2) + N(0, sigma_v^2)``.
    4. Estimate ``c + h m1``; variance ``s_z^2 = n/(n-1) max(m2 - m1^2, 0) + sigma_v``
       (one noise standard deviation added, so the noisy variance errs wide);
       ``std_error = h sqrt(s_z^2 / n + sigma_m^2)``, ``df = n - 1``.
       Before step 2 each private range is widened ``stretch`` times about its
       centre (inside the public prior box): skewed columns such as earnings
       otherwise lose their upper tail to clipping, and the interval is
       centred too low (on wage1, coverage 0.85 without the stretch, 0.95
       with 1.5).
    5. Bias allowance ``2 kstar h / (n stretch^2)`` for columns with a private
       range (about ``kstar`` points beyond each end of the unstretched range,
       assumed to lie within the stretched one: a light-tail assumption, not a
       guarantee); 0 for publicly bounded columns, whose clipping the user
       declared.

    A column whose private range collapsed (``h = 0``), or whose released
    mean of ``z^2`` says most rows sit at the clip
    (:func:`~dpstats.algorithms.mean.adaptive.range_failed`), gets an
    infinite standard error: the method could not localise it.
    """

    name = "kv_interval"
    task = "mean"
    citation = ("Karwa, V. and Vadhan, S. (2018). Finite Sample Differentially Private Confidence Intervals. "
                "ITCS; range step: dpstats (ours), tail-adaptive private ranges")
    interpretation = "standard"
    summary = "private range, clipped Gaussian mean and variance per column; Student-t interval (sampling + noise)"
    intervals = True
    defaults = {
        "range_share": Param(0.35, "ours: as adaptive_whiten's range share"),
        "var_share": Param(0.15, "ours: the variance needs far less precision than the mean"),
        "kappa": Param(0.5, "ours: fewer points beyond the clip than adaptive_clip (kappa 1): less bias in the interval"),
        "stretch": Param(2.0, "ours: private ranges widened by this factor about their centre, so skewed tails "
                              "(earnings) are clipped less; tuned for coverage on wage1 over {1, 1.5, 2, 3}"),
        "beta": Param(0.002, "ours: as adaptive_clip"),
        "per_octave": Param(16, "ours: as adaptive_clip"),
        "scale_per_octave": Param(4, "ours: as adaptive_clip"),
        "default_range": Param(DEFAULT_RANGE, "ours: loose public half-range per unbounded column"),
    }
    public_details = {
        "center": "paid statistic: midpoints of the ranges from `median, column`, `lower scale, column`, "
                  "`upper scale, column` (the public bounds for bounded columns)",
        "half": "paid statistic: half-widths of the ranges from `median, column`, `lower scale, column`, "
                "`upper scale, column` (the public bounds for bounded columns)",
        "sd": "paid statistic: private standard deviations from `clipped second moment` and `clipped mean`",
        "sigma_mean": "paid statistic: noise scale of `clipped mean` (public fact n and budget, times the range)",
    }

    def _run(self, data: TaskData, facts: PublicFacts, epsilon: float, delta: float,
             rng: np.random.Generator) -> Release | Decline:
        X = data.X
        n, d = X.shape
        p = self.params
        acc = ZCDPAccountant(epsilon, delta)
        rho = acc.rho
        lo, hi = prior_box(facts, float(p["default_range"]))
        find = np.array([c not in facts.bounds for c in facts.columns])
        r_share = float(p["range_share"]) if find.any() else 0.0
        v_share = float(p["var_share"])
        mu_f = math.sqrt(2.0 * (1.0 - r_share - v_share) * rho)
        kstar = max(float(p["kappa"]) / mu_f, 0.5)
        a, b = lo.astype(float), hi.astype(float)
        if find.any():
            eps0 = em_epsilon(r_share * rho / (3 * int(find.sum())), bound="bounded_range")
            a, b = private_column_ranges(
                X, lo, hi, find, eps0, kstar, float(p["beta"]), acc, rng, int(p["per_octave"]), int(p["scale_per_octave"])
            )
        center, half = (a + b) / 2.0, (b - a) / 2.0
        stretch = float(p["stretch"])
        half = np.where(find, half * stretch, half)  # private ranges only; kept inside the public prior box
        a, b = np.maximum(center - half, lo), np.minimum(center + half, hi)
        center, half = (a + b) / 2.0, (b - a) / 2.0
        live = half > 0
        dl = max(int(live.sum()), 1)
        Z = np.zeros((n, d))
        Z[:, live] = np.clip((X[:, live] - center[live]) / half[live], -1.0, 1.0)
        Zl = Z[:, live]
        sens_v = math.sqrt(dl) / n
        sig_v = acc.gaussian_sigma(sens_v, fraction=v_share)
        m2 = acc.gaussian("clipped second moment", np.mean(Zl * Zl, axis=0), sensitivity=sens_v, sigma=sig_v, rng=rng,
                          note="z^2 in [0,1]^d: sensitivity sqrt(d)/n (replace-one)")
        sens_m = 2.0 * math.sqrt(dl) / n
        sig_m = acc.gaussian_sigma(sens_m, fraction=acc.remaining / acc.rho)
        m1 = acc.gaussian("clipped mean", np.mean(Zl, axis=0), sensitivity=sens_m, sigma=sig_m, rng=rng,
                          note="z in [-1,1]^d: sensitivity 2 sqrt(d)/n (replace-one)")
        est = center.copy()
        est[live] = center[live] + half[live] * m1
        var_z = n / max(n - 1, 1) * np.maximum(m2 - m1 * m1, 0.0) + sig_v
        se = np.full(d, np.inf)
        se[live] = half[live] * np.sqrt(var_z / n + sig_m**2)
        # a private range that most rows sit at the edge of missed the data: no interval (post-processing of m2)
        failed = np.zeros(d, bool)
        failed[live] = range_failed(m2, sig_v)
        se[find & failed] = np.inf
        sd = np.full(d, np.nan)
        sd[live] = half[live] * np.sqrt(var_z)
        bias = np.where(find, half * 2.0 * kstar / (n * stretch * stretch), 0.0)
        return self.release(est, acc, std_error=se, df=float(max(n - 1, 1)), bias_bound=bias, center=center,
                            half=half, sd=sd, sigma_mean=half * sig_m)

    # what the interval covers, in the API's words
    interval_covers = ("sampling error of the mean of independent rows and the privacy noise, plus an allowance for "
                       "clipping bias that assumes light (Gaussian-like) tails")
