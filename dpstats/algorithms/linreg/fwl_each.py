"""fwl_each: the coefficient vector as one ``fwl_score`` release per slope, on equal shares of the budget (ours).

Every slope of the regression is released by ``fwl_score``
(:mod:`dpstats.algorithms.sce.fwl_score`) with the others as its controls,
each on ``1/k`` of the zCDP budget ``rho`` (``k`` slopes, a public count of
the design's columns). zCDP composes by adding ``rho``, so the ``k``
releases together are ``rho``-zCDP (:func:`~dpstats.privacy.composition.part` holds each to its share and
enters its charges in the release's ledger). Each slope's interval is
``fwl_score``'s, judged per instance on the single-coefficient task; what
this method adds is the split. The intercept is post-processing: the
outcome's mean minus the slopes times the regressors' means, the means read
from the released Grams of the ``fwl_score`` runs (their constant row) whose
private standardisation passed its checks (0, a fallback, when none did); its
interval is infinite (those means are clipped, and their error is not
bounded). Where no slope's interval can be finite (``n epsilon / k`` below
``points_below``, or more than ``max_parts`` slopes: public facts), the
release is dpnewton's point estimates of the whole vector on the whole
budget instead, every interval infinite with that reason.

See ``docs/algorithms/linreg/fwl_each.md`` for the privacy argument and what
the interval covers.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np

from dpstats.algorithms.base import NO_INTERVAL, Algorithm, Outcome, Param, PublicFacts, Release, TaskData
from dpstats.algorithms.linreg.dpnewton import DPNewton
from dpstats.algorithms.registry import register
from dpstats.algorithms.sce._fwl_nuisance import Partialled, intercept_column
from dpstats.algorithms.sce._fwl_standardise import gram_share_for, standardise
from dpstats.algorithms.sce.fwl_score import FWLScore, fwl_score_coefficient
from dpstats.privacy.accounting import ZCDPAccountant, zcdp_epsilon
from dpstats.privacy.composition import part

__all__ = ["FWLEach", "INTERCEPT_CHECK", "LOW_BUDGET_CHECK", "MANY_SLOPES_CHECK", "intercept_from_means"]

#: the interval check of the intercept, whose interval this method does not give
INTERCEPT_CHECK = NO_INTERVAL + " for the intercept (fwl_each reads its estimate from clipped means)"

#: the start of every term's interval check when n epsilon / k is below ``points_below`` (public facts)
LOW_BUDGET_CHECK = "too little budget per slope"

#: the start of every term's interval check when the design has more than ``max_parts`` slopes (public)
MANY_SLOPES_CHECK = "too many slopes"

#: the intercept's fallback when no run's released Gram gives the means (failed standardisations, or every slope
#: on the within path)
INTERCEPT_FALLBACK = ("intercept 0: no slope's release passed its standardisation checks, so no released Gram "
                      "gave the columns' means")


def intercept_from_means(estimate: np.ndarray, slopes: list[int], runs: list[Any]) -> float | None:
    """The outcome's mean minus ``sum_c estimate[c] * mean_c``, the means averaged over the runs that report them.

    ``runs`` holds each run's ``Partialled.means`` (design column to mean, ``-1`` the outcome; empty on the
    within path). Post-processing of released values; ``None`` when no run reports the outcome's mean.
    """
    have = [m for m in runs if -1 in m]
    if not have:
        return None

    def mean_of(c: int) -> float:
        vals = [m[c] for m in have if c in m]
        return float(np.mean(vals)) if vals else 0.0

    return mean_of(-1) - float(sum(estimate[c] * mean_of(c) for c in slopes))


@register
class FWLEach(Algorithm):
    """Each slope by ``fwl_score`` on ``1/k`` of the budget; the intercept from the released Grams (our design).

    See the module docstring and ``docs/algorithms/linreg/fwl_each.md``.
    """

    name = "fwl_each"
    task = "linreg"
    citation = "dpstats (this package): fwl_score for every slope, zCDP budget split equally (sequential composition)"
    interpretation = "standard"
    summary = "each slope by fwl_score on an equal share of rho; the intercept from the released Grams' means"
    defaults = {
        **FWLScore.defaults,
        "max_parts": Param(20, "ours: no release one slope at a time for designs with more slopes than this "
                               "(each slope's share of rho, 1/k, leaves every interval infinite long before, and "
                               "the run time grows with k): dpnewton's point estimates, or a decline when "
                               "points_below is 0"),
        "points_below": Param(300.0, "ours: below n epsilon / k = 300 (public facts) no slope's interval was finite "
                                     "on the public corpus (60 instances, 40 draws, epsilon 1, 3, 10): release "
                                     "dpnewton's point estimates of the whole vector on the whole budget instead, "
                                     "every interval infinite; 0 turns this off (and max_parts declines)"),
        "shared": Param(False, "ours: release stage 1 (the private standardisation and the noisy Gram of all the "
                                "columns) once on fwl_score's shares of rho, and split only stage 2 among the "
                                "slopes (no absorbed term); more finite intervals, but not judged fit to publish "
                                "(two confident misses on the public corpus; see the page). False: each slope "
                                "runs the whole of fwl_score on 1/k of rho"),
    }
    intervals = True
    # the API's cluster= is private_coef's (fwl_score's jackknife); a slope's release here takes the jackknife
    # whenever facts.cluster names the clusters and the data hold their labels (the coverage benchmark)
    cluster_intervals = False
    #: fwl_score's interval configuration, with the floor's bias bounded on the row path too: a slope
    #: collinear with floored controls (a squared term beside its linear one) is no target of the sce corpus
    interval_params = {**FWLScore.interval_params, "floor_bias_rows": True}
    interval_covers = ("sampling error of independent rows (heteroskedasticity-robust, HC0 sandwich) and the "
                       "privacy noise, slope by slope; not clustered sampling error, nor clipping bias; the "
                       "intercept has no interval")
    interval_covers_within = ("sampling error of independent rows (within the absorbed fixed-effect levels, "
                              "classical, for a slope whose release absorbs them) and the privacy noise, slope by "
                              "slope; not clustered sampling error, nor clipping bias; the intercept has no interval")
    interval_covers_cluster = ("cluster-robust sampling error (a delete-a-group jackknife over groups of the "
                               "clusters, t quantile) and the privacy noise, slope by slope; not clipping bias; the "
                               "intercept has no interval")
    interval_robust = True
    # judged per instance on the public corpus (docs/algorithms/linreg/fwl_each.md, On the public corpus)
    interval_validated = True
    public_details = {
        "interval_check": "paid statistic: the first slope's check that made its interval infinite ('ok' when "
                          "none did): fwl_score's interval_check of that slope, from its entries (`Gaussian Gram of "
                          "(1, controls, x, y)`, `grid quantile`, `Gaussian sums of clip(u) clip(v), clip(u)^2`, "
                          "...; each named '<mechanism> (<slope>)'); with points = 'dpnewton', the public reason of "
                          "that branch",
        "interval_checks": "paid statistic: each term's check, fwl_score's interval_check per slope from its entries "
                           "(`Gaussian Gram of (1, controls, x, y)`, `grid quantile`, `Gaussian sums of clip(u) "
                           "clip(v), clip(u)^2`, ...); the intercept's is the public INTERCEPT_CHECK; with points = "
                           "'dpnewton', the branch's public reason for every term",
        "fallback": "paid statistic: the first fallback among the terms: fwl_score's fallback of a slope (from its "
                    "`Gaussian Gram of (1, controls, x, y)`, `grid quantile` and `Gaussian sums of clip(u) clip(v), "
                    "clip(u)^2` entries), or the intercept's when no slope's Gram passed its checks; with points = "
                    "'dpnewton', dpnewton's: the point guard fired, from `Z'Z and Z'u (joint Gaussian)` and "
                    "`rows away from the centre of y`",
        "guard": "paid statistic: which terms are fallbacks, from the same entries as fallback (`Gaussian Gram of "
                 "(1, controls, x, y)`, `grid quantile`, `Gaussian sums of clip(u) clip(v), clip(u)^2`); with points = "
                 "'dpnewton', dpnewton's: from `Z'Z and Z'u (joint Gaussian)` and `rows away from the centre of y`",
        "noise_sd": "paid statistic: each slope's fwl_score noise_sd (from its `Gaussian sums of clip(u) clip(v), "
                    "clip(u)^2`); 0 for the intercept",
        "sampling_error": "public fact: the kind of sampling error each slope's interval accounts for (fwl_score's, "
                          "set by the design's column names, facts.cluster and the hyperparameters)",
        "parts": "public fact: the number of slopes, each released on 1/parts of rho",
        "points": "public fact: 'dpnewton' when the point estimates are dpnewton's (n epsilon / k below "
                  "points_below, or more than max_parts slopes: public facts), absent otherwise",
        **{key: why for key, why in DPNewton.public_details.items() if key not in ("fallback", "guard",
                                                                                  "interval_check")},
        "part_epsilon": "public fact: the epsilon of one part's rho at the release's delta",
    }

    def _run(
        self, data: TaskData, facts: PublicFacts, epsilon: float, delta: float, rng: np.random.Generator,
    ) -> Outcome:
        d = data.X.shape[1]
        icpt = intercept_column(facts)
        slopes = [c for c in range(d) if c != icpt]
        if not slopes:
            return self.decline("fwl_each needs a regressor besides the intercept (use private_mean for a mean)")
        params = dict(self.params)
        max_parts = int(params.pop("max_parts"))
        points_below = float(params.pop("points_below"))
        k = len(slopes)
        per_slope = data.X.shape[0] * epsilon / k  # public: n, the budget and the design's columns
        if points_below > 0 and (k > max_parts or per_slope < points_below):
            if k > max_parts:
                why = (f"{MANY_SLOPES_CHECK} for an interval one slope at a time: {k} slopes exceed max_parts = "
                       f"{max_parts}; the point estimates are dpnewton's, on the whole budget")
            else:
                why = (f"{LOW_BUDGET_CHECK} for an interval: n epsilon / k = {per_slope:.3g} is below "
                       f"points_below = {points_below:g} (no slope's interval was finite there on the public "
                       "corpus); the point estimates are dpnewton's, on the whole budget")
            return self._newton_points(data, facts, epsilon, delta, rng, why if params["se_share"] > 0 else None)
        if k > max_parts:
            # public: the design's columns
            return self.decline(f"fwl_each releases each slope on its own share of the budget, and {len(slopes)} "
                                f"slopes exceed max_parts = {max_parts}; use private_coef for the coefficients of "
                                "interest, or inference=False for the point estimate of them all")
        shared = bool(params.pop("shared"))
        acc = ZCDPAccountant(epsilon, delta)
        stage1 = None
        fraction, left = 1.0 / k, 1.0
        if shared:
            # stage 1 once, on fwl_score's shares of the whole budget: every slope's standardisation and Gram
            # are those of the same columns. Each slope's stage 2 then holds 1/k of what is left, with its
            # clip quantiles' share rescaled so that they get 1/k of what fwl_score gives them
            g_share = gram_share_for(params["gram_share"], params["gram_full_d"], d)
            W = np.column_stack([data.X[:, slopes], np.asarray(data.y, dtype=float)])
            stage1 = standardise(
                W, [facts.columns[c] for c in slopes] + [str(facts.outcome)], [*slopes, -1], facts, acc, rng,
                icpt is not None, scale_share=params["scale_share"], gram_share=g_share,
                scale_factor=params["scale_factor"], col_clip=params["col_clip"], kappa=params["kappa"],
                q_row_max=params["q_row_max"], use_bounds=params["use_bounds"], scale_weight=params["scale_weight"],
                nonzero_share=params["nonzero_share"])
            left = acc.remaining / acc.rho
            fraction = left / k
            params = {**params, "q_share": params["q_share"] / left, "absorb": 0, "absorb_sole": 0}
        # each part's budget as an epsilon (public: the budget and k); fwl_score's epsilon-dependent floor reads
        # it from the part
        eps_part = zcdp_epsilon(acc.rho * fraction, delta)
        est = np.zeros(d)
        se = np.full(d, math.inf)
        bias = np.zeros(d)
        noise = np.zeros(d)
        dfs: list[float] = []
        checks = [INTERCEPT_CHECK] * d
        kinds: list[str] = []
        fallen = np.zeros(d, dtype=bool)
        fallbacks: list[str] = []
        means: list[Any] = []
        point = True
        for c in slopes:
            name = facts.columns[c]
            share = part(acc, fraction, name)
            kept: list[Partialled] = []
            f_c = replace(facts, task="sce", coefficient=name, coef_index=c)
            # the growth of the |u| clip reads the whole release's budget (public), so that each slope's clip
            # reaches as far into the tail as private_coef's would on the same data: the clipping bias of a
            # regressor with a long tail is a property of the data, not of how many slopes share the budget.
            # With a shared stage 1 (not offered) the slope's release holds stage 1 and its part of stage 2
            whole = acc.rho if stage1 is None else acc.rho * (1.0 - left) + share.rho
            e, s, b, df, det = fwl_score_coefficient(data, f_c, share, rng, params, partialled=kept, stage1=stage1,
                                                     release_rho=whole)
            est[c] = e
            noise[c] = float(det.get("noise_sd", 0.0))
            if det.get("fallback"):
                fallen[c] = True
                fallbacks.append(str(det["fallback"]))
            # a run's means only where its private standardisation visibly worked (released values only)
            if kept and det.get("scales_ok", False) and not kept[0].standardisation_visible_failure(data.X.shape[0]):
                means.append(kept[0].means)
            if s is not None:
                point = False
                se[c] = s
                bias[c] = 0.0 if b is None else b
                dfs.append(1.0 if df is None else float(df))
                checks[c] = str(det.get("interval_check", "ok"))
                kinds.append(str(det.get("sampling_error", "")))
        if icpt is not None:
            mean_icpt = intercept_from_means(est, slopes, means)
            if mean_icpt is None:
                fallen[icpt] = True
                fallbacks.append(INTERCEPT_FALLBACK)
            else:
                est[icpt] = mean_icpt
        details: dict[str, Any] = {"noise_sd": noise, "parts": k, "part_epsilon": eps_part}
        if fallbacks:
            details["fallback"] = fallbacks[0]
            details["guard"] = fallen
        if point:
            return self.release(est, acc, **details)
        slope_checks = [checks[c] for c in slopes]
        details["interval_check"] = next((ch for ch in slope_checks if ch != "ok"), "ok")
        details["interval_checks"] = tuple(checks)
        # one kind of sampling error when every slope reports the same; otherwise each slope's
        details["sampling_error"] = (kinds[0] if len(set(kinds)) == 1 else
                                     "; ".join(f"{facts.columns[c]}: {kd}" for c, kd in zip(slopes, kinds, strict=True)))
        # one df for the vector: the smallest (the widest t quantile) of the slopes'
        return self.release(est, acc, std_error=se, df=min(dfs), bias_bound=bias, **details)

    @staticmethod
    def _newton_points(data: TaskData, facts: PublicFacts, epsilon: float, delta: float, rng: np.random.Generator,
                       why: str | None) -> Outcome:
        """dpnewton's point release of the whole vector on the whole budget; with ``why``, every interval infinite.

        The choice is made on public facts only (n, the budget, the design's columns); dpnewton runs with its
        registered defaults (private_ols's ``inference=False`` release) and spends the whole budget itself.
        ``why`` is None in the point configuration (``se_share = 0``), which gives no interval.
        """
        out = DPNewton().run(data, facts, epsilon, delta, rng)
        if not isinstance(out, Release):
            return out
        if why is None:
            return out.with_details(points="dpnewton")
        d = data.X.shape[1]
        details = {key: val for key, val in out.details.items() if key != "interval_check"}
        return replace(out, std_error=np.full(d, math.inf), df=None, bias_bound=None,
                       details={**details, "points": "dpnewton", "interval_check": why,
                                "interval_checks": (why,) * d})
