"""The coverage benchmark's summaries: pure functions of the stored interval rows.

A coverage trial (:mod:`dpstats.bench.inference`, ``dpstats bench
--inference``) stores one row per trial (the columns of
:data:`dpstats.bench.inference.INTERVAL_COLUMNS`: both intervals, the truth,
``covered``, ``np_covered``, ``width_ratio``); this module summarises those
rows with pandas, without the design or the corpus (``intervals.csv``, a
results file's ``intervals`` table, :func:`dpstats.bench.report.load_intervals`).
It also holds the facts the trial and the summaries share, here in the lower
of the two layers: the level :data:`LEVEL`, the message prefix
:data:`RESAMPLE_FAILED` of a trial whose draw failed, and the quantile rule of
the non-private interval (:func:`interval_quantile`). Its names are also
importable from :mod:`dpstats.bench.inference`, where they were first defined.

Coverage and width
------------------
A trial whose draw could not be made (error ``resample failed: ...``) is left
out of the summaries: it says something about the design, not about the
method. A decline counts as an infinite interval (it covers, with an infinite
width ratio); a failure (an error, a timeout, a memory failure, a release
without an interval) as not covering, with an infinite width ratio.

The summaries (:func:`coverage_table`) weight studies equally, as the
point benchmark does (:mod:`dpstats.bench.evaluation`): a trial of instance
``i`` of study ``s`` weighs ``1 / (K m_s T_i)``. Coverage comes with its
binomial standard error ``sqrt(c (1 - c) sum w^2)``; the width ratio is the
study-weighted median. Methods are ranked by median width ratio among those
whose coverage is at least the non-private interval's on the same trials minus
:data:`COVERAGE_TOLERANCE` (over-coverage is valid, and paid for in width).
:func:`dpstats.bench.coverage_forest.forest_summary` tells, on one ``sce``
instance, how often the intervals agree with the study's conclusion.

Per-instance validity
---------------------
An average hides instances where an interval covers half the time.
:func:`instance_coverage` gives one row per task, algorithm, ε and instance:
its coverage over the trials with the binomial SE, the share of trials
covering every coordinate, the non-private coverage on the same trials, the
median width ratio, the shares of infinite intervals and failures, and the
number of *confident misses*: trials whose private interval is finite and
misses the truth by more than :data:`CONFIDENT_MISS_SE` non-private standard
errors of the same draw (in some coordinate). That SE is recovered from the
stored non-private interval, ``(np_high - np_low) / (2 q)``, with the quantile
``q`` that :func:`dpstats.bench.inference.nonprivate_interval` used
(:func:`nonprivate_quantile`; exact for every SE type when the study's SE is
known, :func:`attach_study_se`). :func:`coverage_table` adds per group the
worst instance, the share of instances below :data:`INSTANCE_FLOOR` and the
total of confident misses. A finite interval narrower than the non-private
one that misses by more than :data:`NARROW_MISS_SE` SEs (a *narrow miss*)
claims more precision than the data hold without being a confident miss by
the 10-SE rule; both tables count those too.

A valid interval misses too, and a wide one can miss by many non-private
SEs by chance: the tables give, next to the confident misses, the number
*expected by chance* (``confident_expected``), the sum over the trials of
the probability that a finite interval of the same width, centred at a
normal estimate with the sd that makes it exact, would miss by more than
the same distance (:func:`trial_validity`'s ``confident_chance``). Far more
confident misses than that is a bias; about as many or fewer is what an
exact interval (or a conservative one) gives.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

import numpy as np
import pandas as pd

__all__ = [
    "LEVEL",
    "RESAMPLE_FAILED",
    "COVERAGE_TOLERANCE",
    "CONFIDENT_MISS_SE",
    "NARROW_MISS_SE",
    "INSTANCE_FLOOR",
    "COVERAGE_COLUMNS",
    "INSTANCE_COLUMNS",
    "interval_quantile",
    "prepare_intervals",
    "nonprivate_quantile",
    "attach_study_se",
    "trial_validity",
    "instance_coverage",
    "coverage_table",
]

#: the level of the benchmark's intervals
LEVEL = 0.95
#: the message prefix of a trial whose draw failed (left out of the summaries)
RESAMPLE_FAILED = "resample failed:"
#: a method is ranked when its coverage is at least the reference's minus this
COVERAGE_TOLERANCE = 0.02
#: a *confident miss*: a finite private interval that misses the truth by more than this many non-private SEs
CONFIDENT_MISS_SE = 10.0
#: a *narrow miss*: a finite private interval narrower than the non-private one on the same draw (in the same
#: coordinate) that misses the truth by more than this many non-private SEs: privacy cannot make an interval
#: more precise than the data, so it claims a precision the release does not have
NARROW_MISS_SE = 3.0
#: per-instance validity line: the share of a group's instances whose coverage is below it (``below_85``)
INSTANCE_FLOOR = 0.85

#: the columns of ``coverage.csv``
COVERAGE_COLUMNS = (
    "task", "epsilon", "slice", "algorithm", "interpretation", "coverage", "coverage_se", "reference",
    "reference_se", "difference", "median_width_ratio", "infinite", "failed", "trials", "instances", "studies",
    "eligible", "rank", "worst_coverage", "worst_instance", "worst_reference", "below_85", "confident_misses",
    "coordinates_below_85", "narrow_misses", "confident_expected",
)

#: the columns of ``coverage_instances.csv`` (:func:`instance_coverage`), in order
INSTANCE_COLUMNS = (
    "corpus", "task", "epsilon", "algorithm", "interpretation", "instance", "study", "n", "d", "se_type", "trials",
    "coverage", "coverage_se", "coverage_all", "reference", "reference_all", "difference", "median_width_ratio",
    "infinite", "failed", "confident_misses", "max_miss_se", "se_exact", "worst_coordinate", "coordinate_coverage",
    "narrow_misses", "confident_expected",
)


def interval_quantile(se_type: str | None, n: int, d: int, clusters: np.ndarray | None, level: float) -> float:
    """The quantile of a non-private interval of SE type ``se_type`` (the design's and the summaries' rule).

    Bootstrap: normal; cluster (with the draw's ``clusters``): ``t(G - 1)``;
    otherwise (classical, HC, or a cluster type without clusters):
    ``t(n - d)``. :func:`dpstats.bench.inference.nonprivate_interval` uses it
    on each draw, :func:`nonprivate_quantile` to recover the draw's SE.
    """
    from scipy import stats

    p = 0.5 + level / 2.0
    se_type = se_type or "classical"
    if se_type.startswith("bootstrap"):
        return float(stats.norm.ppf(p))
    if se_type.startswith("cluster:") and clusters is not None:
        g = len(np.unique(clusters))
        return float(stats.t.ppf(p, max(g - 1, 1)))
    return float(stats.t.ppf(p, max(n - d, 1)))

def _weights(df: pd.DataFrame) -> np.ndarray:
    """``1 / (K m_s T_i)`` per row: studies weigh equally, then instances within a study, then trials."""
    if df.empty:
        return np.zeros(0)
    t_i = df.groupby("instance")["instance"].transform("size").to_numpy(dtype=float)
    inst = df[["instance", "study"]].drop_duplicates()
    m_s = df["study"].map(inst.groupby("study").size()).to_numpy(dtype=float)
    k = float(inst["study"].nunique())
    return np.asarray(1.0 / (k * m_s * t_i), dtype=float)


def _wmedian(values: np.ndarray, w: np.ndarray) -> float:
    if values.size == 0:
        return math.nan
    order = np.argsort(values, kind="stable")
    v, cw = values[order], np.cumsum(w[order])
    i = int(np.searchsorted(cw, 0.5 * cw[-1] - 1e-12))
    return float(v[min(i, v.size - 1)])


def _summary(df: pd.DataFrame, col: str) -> tuple[float, float]:
    w = _weights(df)
    c = df[col].to_numpy(dtype=float)
    keep = np.isfinite(c)
    if not keep.any():
        return math.nan, math.nan
    w, c = w[keep] / w[keep].sum(), c[keep]
    p = float(np.sum(w * c))
    return p, float(math.sqrt(max(p * (1 - p), 0.0) * float(np.sum(w * w))))


def prepare_intervals(intervals: pd.DataFrame) -> pd.DataFrame:
    """Validate an intervals table (:func:`dpstats.bench.store.read_intervals` or ``intervals.csv``)."""
    need = ("algorithm", "interpretation", "instance", "study", "task", "epsilon", "status", "n", "d", "covered",
            "np_covered", "width_ratio")
    missing = [c for c in need if c not in intervals.columns]
    if missing:
        raise ValueError(f"intervals table lacks column(s) {', '.join(missing)}")
    df = intervals.copy()
    for c in ("epsilon", "covered", "np_covered", "width_ratio"):
        df[c] = pd.to_numeric(df[c], errors="coerce").astype(float)
    df["width_ratio"] = df["width_ratio"].fillna(math.inf)
    if "corpus" not in df.columns:
        df["corpus"] = "results"
    return df


def _usable(df: pd.DataFrame) -> pd.DataFrame:
    """The trials of the summaries: a draw that could not be made is a fact about the design, not the method."""
    if "error" not in df.columns:
        return df
    err = df["error"]
    return df[~(err.notna() & err.astype(str).str.startswith(RESAMPLE_FAILED))]


def _vec(v: Any) -> np.ndarray | None:
    """A stored per-coordinate value (a JSON list, a list or a number) as a float vector; None when missing."""
    import json

    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    if isinstance(v, str):
        if v in ("", "None", "nan", "null"):
            return None
        v = json.loads(v)
        if v is None:
            return None
    return np.asarray(v, dtype=float).reshape(-1)


def nonprivate_quantile(task: str, se_type: str | None, n_draw: int, d: int, level: float = LEVEL,
                        study_quantile: float | None = None) -> tuple[float, bool]:
    """The quantile of a draw's non-private interval, from what a trial stores: ``(q, exact)``.

    The non-private SE of a draw (the interval of
    :func:`dpstats.bench.inference.nonprivate_interval`) is then ``(np_high - np_low) / (2 q)``.
    ``mean``: ``t(n_draw - 1)``. Classical and HC: ``t(n_draw - d)``;
    bootstrap: normal (as :func:`interval_quantile` computes them; ``d`` is the
    instance's, which is the draw's for these types). Cluster: ``t(G - 1)``
    with ``G`` the instance's number of clusters, which a trial does not
    store; every cluster draw has the population's ``G`` (each drawn copy is
    a cluster of its own), so the quantile is the study interval's own,
    ``study_quantile`` (its half-width over the study's SE; see
    :func:`attach_study_se`). Without it the normal quantile is used and
    ``exact`` is False: it is below every ``t`` quantile, so the SE derived
    from it is at least the true one and a count of confident misses made
    with it is a lower bound.
    """
    if str(se_type or "").startswith("cluster:") and task != "mean":
        if study_quantile is not None and math.isfinite(study_quantile) and study_quantile > 0:
            return float(study_quantile), True
        return _stored_quantile("mean", "bootstrap", 0, 0, float(level)), False
    return _stored_quantile(str(task), se_type, int(n_draw), int(d), float(level)), True


@lru_cache(maxsize=4096)
def _stored_quantile(task: str, se_type: str | None, n_draw: int, d: int, level: float) -> float:
    if task == "mean" and se_type != "bootstrap":
        from scipy import stats

        return float(stats.t.ppf(0.5 + level / 2.0, max(n_draw - 1, 1)))
    return interval_quantile(se_type, n_draw, d, None, level)


def _num(v: Any) -> float:
    """A stored scalar as a float (NaN when missing or not a number)."""
    if v is None:
        return math.nan
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


def attach_study_se(intervals: pd.DataFrame, instances: pd.DataFrame | None) -> pd.DataFrame:
    """``intervals`` with the column ``study_se``: the study's SE on all rows (``sce`` rows; NaN on the others).

    ``instances`` is the results file's instance table
    (:func:`dpstats.bench.store.read_instances`), whose ``baseline`` is that
    SE for an ``sce`` instance. With it, :func:`trial_validity` recovers the
    quantile of a clustered instance's non-private intervals exactly (the
    study interval's half-width over ``study_se``);
    :func:`dpstats.bench.report.load_intervals` attaches it when it reads a
    results file, and ``intervals.csv`` keeps it.
    """
    out = intervals.copy()
    old = out["study_se"] if "study_se" in out.columns else pd.Series(math.nan, index=out.index)
    if instances is None or instances.empty or not {"instance", "task", "baseline"} <= set(instances.columns):
        out["study_se"] = pd.to_numeric(old, errors="coerce").astype(float)
        return out
    sce = instances[instances["task"] == "sce"].drop_duplicates("instance").set_index("instance")["baseline"]
    new = pd.to_numeric(out["instance"].map(sce), errors="coerce").where(out["task"] == "sce")
    out["study_se"] = new.astype(float).combine_first(pd.to_numeric(old, errors="coerce").astype(float))
    return out


def _miss(low: np.ndarray, high: np.ndarray, truth: np.ndarray, se: np.ndarray) -> float:
    """The largest miss of the truth in SEs over the coordinates whose interval is finite (0: all covered)."""
    fin = np.isfinite(low) & np.isfinite(high) & np.isfinite(se)
    if not fin.any():
        return math.nan
    gap = np.maximum(np.maximum(low - truth, truth - high), 0.0)[fin]
    s = se[fin]
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(gap > 0, np.where(s > 0, gap / np.where(s > 0, s, 1.0), math.inf), 0.0)
    return float(np.max(ratio))


def _narrow(low: np.ndarray, high: np.ndarray, np_low: np.ndarray, np_high: np.ndarray, truth: np.ndarray,
            se: np.ndarray) -> bool:
    """Whether some coordinate's finite interval is narrower than the non-private one and misses by > NARROW_MISS_SE."""
    fin = np.isfinite(low) & np.isfinite(high) & np.isfinite(se) & (se > 0)
    narrower = (high - low) < (np_high - np_low)
    gap = np.maximum(low - truth, truth - high)
    with np.errstate(invalid="ignore"):
        return bool(np.any(fin & narrower & (gap > NARROW_MISS_SE * np.where(fin, se, 1.0))))


def _chance(low: np.ndarray, high: np.ndarray, se: np.ndarray, level: float, threshold: float) -> float:
    """Probability that exact normal intervals of these widths miss by more than ``threshold`` SEs in some coordinate.

    A coordinate's interval of half-width ``h`` is exact when the estimate
    is normal around the truth with sd ``h / z`` (``z`` the normal quantile
    of ``level``); it then misses by more than ``t`` SEs with probability
    ``2 (1 - Phi(z + t se z / h))``. The coordinates are taken as independent;
    only those finite at both ends count (NaN when none is).
    """
    from scipy import stats

    fin = np.isfinite(low) & np.isfinite(high) & np.isfinite(se) & (se > 0)
    if not fin.any():
        return math.nan
    z = float(stats.norm.ppf(0.5 + level / 2.0))
    half = (high[fin] - low[fin]) / 2.0
    with np.errstate(divide="ignore"):
        dist = np.where(half > 0, z + threshold * se[fin] * z / np.where(half > 0, half, 1.0), math.inf)
    p = 2.0 * stats.norm.sf(dist)
    return float(-np.expm1(np.sum(np.log1p(-p))))


def _chance_column(df: pd.DataFrame, threshold: float) -> np.ndarray:
    """:func:`_chance` per trial of a validity table, for another threshold (NaN where the SE is unknown or nothing
    is finite); :func:`trial_validity` computes it in its own pass over the rows."""
    out = np.full(len(df), math.nan)
    if not {"low", "high", "np_low", "np_high", "np_quantile"} <= set(df.columns):
        return out
    levels = df["level"].tolist() if "level" in df.columns else [None] * len(df)
    for i, (lo_, hi_, nlo_, nhi_, q, lev) in enumerate(zip(
            df["low"].tolist(), df["high"].tolist(), df["np_low"].tolist(), df["np_high"].tolist(),
            df["np_quantile"].tolist(), levels, strict=True)):
        lo, hi, nlo, nhi, q = _vec(lo_), _vec(hi_), _vec(nlo_), _vec(nhi_), _num(q)
        if lo is None or hi is None or nlo is None or nhi is None or not (q > 0) or not (
                lo.size == hi.size == nlo.size == nhi.size):
            continue
        level = _num(lev)
        out[i] = _chance(lo, hi, (nhi - nlo) / (2.0 * q), LEVEL if math.isnan(level) else level, threshold)
    return out


#: the columns :func:`trial_validity` computes (a table that has them is not recomputed)
_VALIDITY = ("covered_all", "np_covered_all", "np_quantile", "se_exact", "miss_se", "np_miss_se", "narrow_miss",
             "confident_chance")


def trial_validity(intervals: pd.DataFrame, threshold: float = CONFIDENT_MISS_SE) -> pd.DataFrame:
    """Per coverage trial, the facts the per-instance summaries need (the table, validated, with columns added).

    Added columns:

    ``covered_all``, ``np_covered_all``
        1 when the interval covers every coordinate (for ``sce`` the same as
        ``covered``), else 0.
    ``np_quantile``, ``se_exact``
        The quantile of the non-private interval on the draw
        (:func:`nonprivate_quantile`) and whether it is exact.
    ``miss_se``
        How far the private interval misses the truth, in non-private SEs of
        the same draw (``(np_high - np_low) / (2 np_quantile)``, per
        coordinate): the largest ``max(low - truth, truth - high, 0) / se``
        over the coordinates whose private interval is finite at both ends;
        0 when they all cover, NaN when no coordinate's interval is finite
        (an infinite interval, a decline) or there is none (a failure).
    ``confident_miss``
        ``miss_se > threshold``: a finite interval that misses by more than
        ``threshold`` SEs in at least one coordinate. Never true for an
        infinite interval or a failure.
    ``np_miss_se``, ``np_confident_miss``
        The same for the non-private interval.
    ``narrow_miss``
        Some coordinate's private interval is finite, narrower than the
        non-private one and misses the truth by more than
        :data:`NARROW_MISS_SE` SEs.
    ``confident_chance``
        The probability of a confident miss by chance: that intervals of the
        same widths, exact for a normal estimate (sd the half-width over the
        normal quantile of the level), would miss by more than ``threshold``
        SEs in some finite coordinate (independent coordinates). NaN when no
        coordinate's interval is finite or the SE is unknown.

    A table that already has these columns (a result of this function) is
    returned with only the confident-miss flags and ``confident_chance``
    recomputed for ``threshold``.
    """
    df = prepare_intervals(intervals)
    if set(_VALIDITY) <= set(df.columns):  # already a validity table: only the threshold is applied again
        df["confident_miss"] = np.nan_to_num(df["miss_se"].to_numpy(dtype=float), nan=-math.inf) > threshold
        df["np_confident_miss"] = np.nan_to_num(df["np_miss_se"].to_numpy(dtype=float), nan=-math.inf) > threshold
        df["confident_chance"] = _chance_column(df, threshold)
        return df
    n = len(df)
    q = np.full(n, math.nan)
    exact = np.zeros(n, dtype=bool)
    miss = np.full(n, math.nan)
    np_miss = np.full(n, math.nan)
    narrow = np.zeros(n, dtype=bool)
    chance = np.full(n, math.nan)
    col = {c: (df[c].tolist() if c in df.columns else [None] * n) for c in
           ("truth", "low", "high", "np_low", "np_high", "study_low", "study_high", "study_se", "n_draw", "se_type",
            "level")}
    tasks, ds = df["task"].tolist(), df["d"].tolist()
    for i in range(n):
        truth, nlo, nhi = _vec(col["truth"][i]), _vec(col["np_low"][i]), _vec(col["np_high"][i])
        n_draw = _num(col["n_draw"][i])
        if truth is None or nlo is None or nhi is None or math.isnan(n_draw) or nlo.size != truth.size:
            continue
        level = _num(col["level"][i])
        level = LEVEL if math.isnan(level) else level
        study_q = None
        sse = _num(col["study_se"][i])
        if sse > 0:  # False for NaN
            slo, shi = _vec(col["study_low"][i]), _vec(col["study_high"][i])
            if slo is not None and shi is not None and slo.size == 1 == shi.size:
                study_q = float((shi[0] - slo[0]) / (2.0 * sse))
        se_type = col["se_type"][i]
        se_type = None if se_type is None or (isinstance(se_type, float) and math.isnan(se_type)) else str(se_type)
        q[i], exact[i] = nonprivate_quantile(str(tasks[i]), se_type, int(n_draw), int(ds[i]), level, study_q)
        se = (nhi - nlo) / (2.0 * q[i])
        np_miss[i] = _miss(nlo, nhi, truth, se)
        lo, hi = _vec(col["low"][i]), _vec(col["high"][i])
        if lo is not None and hi is not None and lo.size == truth.size == hi.size:
            miss[i] = _miss(lo, hi, truth, se)
            narrow[i] = _narrow(lo, hi, nlo, nhi, truth, se)
            chance[i] = _chance(lo, hi, se, level, threshold)
    out = df.copy()
    cov, np_cov = out["covered"].to_numpy(dtype=float), out["np_covered"].to_numpy(dtype=float)
    out["covered_all"] = np.where(np.isnan(cov), np.nan, (cov >= 1.0 - 1e-12).astype(float))
    out["np_covered_all"] = np.where(np.isnan(np_cov), np.nan, (np_cov >= 1.0 - 1e-12).astype(float))
    out["np_quantile"] = q
    out["se_exact"] = exact
    out["miss_se"] = miss
    out["confident_miss"] = np.nan_to_num(miss, nan=-math.inf) > threshold
    out["np_miss_se"] = np_miss
    out["np_confident_miss"] = np.nan_to_num(np_miss, nan=-math.inf) > threshold
    out["narrow_miss"] = narrow
    out["confident_chance"] = chance
    return out


#: the statuses that are failures (no interval); a decline is an infinite interval
_FAILED = ("error", "timeout", "memory")


def _instance_rows(v: pd.DataFrame) -> pd.DataFrame:
    """:func:`instance_coverage` of a :func:`trial_validity` table whose unusable draws are already left out."""
    rows = []
    keys = ["corpus", "task", "epsilon", "algorithm", "interpretation", "instance"]
    for (corpus, task, eps, name, interp, iid), g in v.groupby(keys, sort=True):
        t = len(g)
        cov = g["covered"].to_numpy(dtype=float)
        c = float(np.nanmean(cov)) if np.isfinite(cov).any() else math.nan
        ref_v = g["np_covered"].to_numpy(dtype=float)
        ref = float(np.nanmean(ref_v)) if np.isfinite(ref_v).any() else math.nan
        all_v, ref_all_v = g["covered_all"].to_numpy(dtype=float), g["np_covered_all"].to_numpy(dtype=float)
        wr = g["width_ratio"].to_numpy(dtype=float)
        failed = g["status"].isin(_FAILED).to_numpy()
        ms = g["miss_se"].to_numpy(dtype=float)
        judged = np.isfinite(g["np_quantile"].to_numpy(dtype=float))
        worst_k, worst_c = _worst_coordinate(g)
        rows.append({
            "corpus": corpus, "task": task, "epsilon": float(eps), "algorithm": name, "interpretation": interp,
            "instance": iid, "study": g["study"].iloc[0], "n": int(g["n"].iloc[0]), "d": int(g["d"].iloc[0]),
            "se_type": g["se_type"].iloc[0] if "se_type" in g.columns else None, "trials": t,
            "coverage": c, "coverage_se": math.sqrt(max(c * (1 - c), 0.0) / t) if math.isfinite(c) else math.nan,
            "coverage_all": float(np.nanmean(all_v)) if np.isfinite(all_v).any() else math.nan,
            "reference": ref,
            "reference_all": float(np.nanmean(ref_all_v)) if np.isfinite(ref_all_v).any() else math.nan,
            "difference": c - ref, "median_width_ratio": _wmedian(wr, np.ones(t)),
            "infinite": float(np.mean(~np.isfinite(wr) & ~failed)), "failed": float(np.mean(failed)),
            "confident_misses": int(g["confident_miss"].sum()),
            "max_miss_se": float(np.nanmax(ms)) if (~np.isnan(ms)).any() else math.nan,
            "se_exact": bool(g["se_exact"].to_numpy()[judged].all()) if judged.any() else False,
            "worst_coordinate": worst_k, "coordinate_coverage": worst_c,
            "narrow_misses": int(g["narrow_miss"].sum()),
            "confident_expected": float(np.nansum(g["confident_chance"].to_numpy(dtype=float))),
        })
    out = pd.DataFrame(rows, columns=list(INSTANCE_COLUMNS))
    if out.empty:
        return out
    return out.sort_values(["corpus", "task", "epsilon", "coverage", "difference", "algorithm", "instance"],
                           kind="stable", na_position="last").reset_index(drop=True)


def _worst_coordinate(g: pd.DataFrame) -> tuple[int, float]:
    """The coordinate an instance's trials cover least often, and that coverage.

    A trial without an interval (a failure) counts as covering no
    coordinate, as in ``covered``; a decline's interval is infinite. For a
    scalar target the coverage is the instance's.
    """
    hits: list[np.ndarray] = []
    for lo_, hi_, tr_ in zip(g["low"].tolist(), g["high"].tolist(), g["truth"].tolist(), strict=True):
        tr, lo, hi = _vec(tr_), _vec(lo_), _vec(hi_)
        if tr is None:
            continue
        if lo is None or hi is None or lo.size != tr.size or hi.size != tr.size:
            hits.append(np.zeros(tr.size))
        else:
            hits.append(((lo <= tr) & (tr <= hi)).astype(float))
    if not hits or len({h.size for h in hits}) != 1:
        return -1, math.nan
    per = np.mean(np.vstack(hits), axis=0)
    k = int(np.argmin(per))
    return k, float(per[k])


def instance_coverage(intervals: pd.DataFrame, threshold: float = CONFIDENT_MISS_SE) -> pd.DataFrame:
    """Per-instance validity: one row per corpus, task, ε, algorithm and instance.

    A study-weighted coverage can hide an instance where the interval covers
    half the time; this table shows each instance (``coverage_instances.csv``
    in the report). Trials whose draw could not be made are left out, as in
    :func:`coverage_table`.

    Parameters
    ----------
    intervals : DataFrame
        Coverage trials (:func:`dpstats.bench.store.read_intervals`,
        :func:`dpstats.bench.report.load_intervals` or ``intervals.csv``).
        With a ``study_se`` column (:func:`attach_study_se`) the non-private
        SE of clustered instances is exact.
    threshold : float
        The confident-miss rule's distance, in non-private SEs.

    Returns
    -------
    DataFrame
        The columns of :data:`INSTANCE_COLUMNS`, sorted by corpus, task, ε
        and then coverage (ascending): ``trials``; ``coverage`` (the mean of
        the per-trial coverage; for ``linreg`` and ``mean`` a trial's is the
        share of coordinates covered) and ``coverage_se``
        (``sqrt(c (1 - c) / trials)``); ``coverage_all`` (the share of trials
        covering every coordinate); ``reference`` and ``reference_all``, the
        same for the non-private interval on the same trials;
        ``difference = coverage - reference``; ``median_width_ratio`` (over
        the trials, the lower median as in :func:`coverage_table`);
        ``infinite`` (share of trials with an infinite interval, declines
        included, failures not) and ``failed`` (errors, timeouts, memory
        failures, releases without an interval); ``confident_misses`` (the
        number of trials with :func:`trial_validity`'s ``confident_miss``)
        and ``max_miss_se`` (the largest miss of a finite interval in
        non-private SEs; 0 when every finite interval covers, NaN when none
        is finite); ``se_exact`` (the non-private SEs were recovered exactly,
        :func:`nonprivate_quantile`); ``worst_coordinate`` (0-based index of
        the coordinate covered least often; -1 when the trials hold no
        interval record) and ``coordinate_coverage`` (its coverage: an
        instance's coverage averages its coordinates, and one coordinate can
        miss far more often than the average shows); ``narrow_misses`` (the
        number of trials with :func:`trial_validity`'s ``narrow_miss``);
        ``confident_expected`` (the confident misses expected by chance: the
        sum of ``confident_chance`` over the trials).
    """
    return _instance_rows(_usable(trial_validity(intervals, threshold)))


def _worst(per: pd.DataFrame) -> dict[str, Any]:
    """The worst instance of a group (lowest coverage, then lowest coverage minus reference) and the floor share."""
    p = per[np.isfinite(per["coverage"].to_numpy(dtype=float))]
    if p.empty:
        return {"worst_coverage": math.nan, "worst_instance": None, "worst_reference": math.nan,
                "below_85": math.nan, "coordinates_below_85": math.nan}
    o = p.assign(_diff=(p["coverage"] - p["reference"]).fillna(0.0)).sort_values(
        ["coverage", "_diff", "instance"], kind="stable").iloc[0]
    return {"worst_coverage": float(o["coverage"]), "worst_instance": str(o["instance"]),
            "worst_reference": float(o["reference"]),
            "below_85": float(np.mean(p["coverage"].to_numpy(dtype=float) < INSTANCE_FLOOR - 1e-12)),
            "coordinates_below_85": (float(np.mean(np.nan_to_num(p["coordinate_coverage"].to_numpy(dtype=float),
                                                                 nan=1.0) < INSTANCE_FLOOR - 1e-12))
                                     if "coordinate_coverage" in p.columns else math.nan)}


def coverage_table(intervals: pd.DataFrame, tolerance: float = COVERAGE_TOLERANCE) -> pd.DataFrame:
    """Coverage, width and ranking per corpus, task, ε, slice and algorithm.

    Each algorithm's reference is the non-private interval's coverage on the
    *same* trials (same instances and draws); a row ``algorithm =
    "non-private"`` gives the reference on every draw of the group. Ranked
    (``rank``, competition ranking by median width ratio) are the methods
    with ``coverage >= reference - tolerance`` (``eligible``).

    Next to the study-weighted figures, per-instance validity
    (:func:`instance_coverage` on the group's instances): ``worst_coverage``,
    ``worst_instance`` and ``worst_reference`` (the instance with the lowest
    coverage, ties to the lower coverage minus reference, and the
    non-private coverage on its trials), ``below_85`` (the share of the
    group's instances, unweighted, whose coverage is below
    :data:`INSTANCE_FLOOR`), ``coordinates_below_85`` (the same share by
    each instance's least-covered coordinate, ``coordinate_coverage``; NaN
    on the ``non-private`` row) and ``confident_misses`` (the number of
    trials with a confident miss, :func:`trial_validity`), ``narrow_misses``
    (trials with a narrow miss; NA on the ``non-private`` row, the
    yardstick of "narrower"), ``confident_expected`` (the confident misses
    expected by chance, :func:`instance_coverage`; NaN on the ``non-private``
    row). On the ``non-private`` row the others describe
    the non-private interval.

    Returns
    -------
    DataFrame
        The columns of :data:`COVERAGE_COLUMNS` (and ``corpus``).
    """
    from dpstats.bench.evaluation import slice_mask, slices_for
    from dpstats.bench.leaderboard import competition_ranks

    # a draw that could not be made is a fact about the design, not about the method: left out
    df = _usable(trial_validity(intervals))
    per_all = _instance_rows(df)
    rows: list[dict[str, Any]] = []
    for (corpus, task, eps), g in df.groupby(["corpus", "task", "epsilon"], sort=True):
        per_g = per_all[(per_all["corpus"] == corpus) & (per_all["task"] == task) & (per_all["epsilon"] == eps)]
        for sl in slices_for(str(task)):
            s = g[slice_mask(g["n"].to_numpy(), g["d"].to_numpy(), sl)]
            if s.empty:
                continue
            per = per_g[slice_mask(per_g["n"].to_numpy(), per_g["d"].to_numpy(), sl)]
            block = []
            # one row per draw, preferring one whose non-private interval was recorded (a timed-out trial has none)
            draws = (s.assign(_missing=s["np_covered"].isna()).sort_values("_missing", kind="stable")
                     .drop_duplicates(["instance", "seed"]).drop(columns="_missing")) if "seed" in s.columns else s
            ref, ref_se = _summary(draws, "np_covered")
            np_per = draws.groupby("instance", sort=True)["np_covered"].mean().rename("coverage").reset_index()
            block.append({"algorithm": "non-private", "interpretation": "non-private", "coverage": ref,
                          "coverage_se": ref_se, "reference": ref, "reference_se": ref_se, "difference": 0.0,
                          "median_width_ratio": 1.0, "infinite": 0.0, "failed": 0.0, "trials": len(draws),
                          "instances": draws["instance"].nunique(), "studies": draws["study"].nunique(),
                          "eligible": True, **_worst(np_per.assign(reference=np_per["coverage"])),
                          "confident_misses": int(draws["np_confident_miss"].sum()), "narrow_misses": pd.NA,
                          "confident_expected": math.nan})
            for (name, interp), a in s.groupby(["algorithm", "interpretation"], sort=True):
                cov, cov_se = _summary(a, "covered")
                r, r_se = _summary(a, "np_covered")
                w = _weights(a)
                wr = a["width_ratio"].to_numpy(dtype=float)
                block.append({
                    "algorithm": name, "interpretation": interp, "coverage": cov, "coverage_se": cov_se,
                    "reference": r, "reference_se": r_se, "difference": cov - r,
                    "median_width_ratio": _wmedian(wr, w), "infinite": float(np.sum(w * ~np.isfinite(wr))),
                    "failed": float(np.sum(w * (a["status"] != "ok").to_numpy())), "trials": len(a),
                    "instances": a["instance"].nunique(), "studies": a["study"].nunique(),
                    "eligible": bool(np.isfinite(cov) and np.isfinite(r) and cov >= r - tolerance - 1e-12),
                    **_worst(per[(per["algorithm"] == name) & (per["interpretation"] == interp)]),
                    "confident_misses": int(a["confident_miss"].sum()),
                    "narrow_misses": int(a["narrow_miss"].sum()),
                    "confident_expected": float(np.nansum(a["confident_chance"].to_numpy(dtype=float))),
                })
            ranked = [b for b in block[1:] if b["eligible"]]
            ranked.sort(key=lambda b: (b["median_width_ratio"], b["algorithm"]))
            ranks = competition_ranks([(b["median_width_ratio"],) for b in ranked])
            for b, rk in zip(ranked, ranks, strict=True):
                b["rank"] = rk
            for b in block:
                b.setdefault("rank", None)
                b.update(corpus=corpus, task=task, epsilon=float(eps), slice=sl)
            block[1:] = sorted(block[1:], key=lambda b: (b["rank"] is None, b["rank"] or 0,
                                                         b["median_width_ratio"], b["algorithm"]))
            rows += block
    cols = list(COVERAGE_COLUMNS) + ["corpus"]
    out = pd.DataFrame(rows, columns=cols)
    if not out.empty:
        out["rank"] = out["rank"].astype("Int64")
        out["confident_misses"] = out["confident_misses"].astype("Int64")
        out["narrow_misses"] = out["narrow_misses"].astype("Int64")
    return out
