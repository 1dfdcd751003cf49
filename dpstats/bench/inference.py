"""The coverage benchmark (``dpstats bench --inference``): do private intervals cover the population value?

Design
------
Each instance's rows are the *population*; its non-private estimate on all
rows is the *truth* (the OLS coefficient of interest for ``sce``, the OLS
vector for ``linreg``, the mean vector for ``mean``). A trial with seed ``s``

1. draws a sample of the population with replacement: ``n`` rows, or, for an
   instance whose study clusters its standard errors (``se =
   cluster:<column>``), as many whole clusters as the instance has (each
   drawn copy of a cluster is a cluster of its own, so the draw's ``n``
   varies). Fixed effects nested in the clusters (``nested_columns``, ``sce``)
   are given per drawn copy, as in the cluster bootstrap with fixed effects:
   a cluster drawn twice has two sets of fixed-effect levels, an undrawn one
   none, and the terms' dummy columns are rebuilt for the draw (one
   reference level dropped where the population's term has one), so the
   design stays full rank and the coefficient of interest keeps its
   meaning. The draw uses its own stream, ``default_rng([RESAMPLE_KEY, s])``,
   so every algorithm and every ε sees the same draws at seed ``s``. A draw
   whose design lost full column rank (e.g. a fixed-effect dummy, not nested
   in the clusters, none of whose rows was drawn) is replaced by the
   stream's next draw, up to :data:`MAX_REDRAWS` times;
2. runs the algorithm on the draw, seeded as a point trial
   (``default_rng(s)``) and with its interval hyperparameters (the class's
   ``interval_params``, the budget split between estimate and uncertainty that
   ``inference=True`` uses in the API), and takes its interval at level 0.95
   (:meth:`~dpstats.algorithms.base.Release.conf_int`);
3. computes on the same draw the *non-private* interval of the study's
   standard-error type with the ``ols`` baseline code
   (:func:`nonprivate_interval`): the coefficient ± t quantile × SE of the
   study's type (classical and HC: ``t(n - d)``; cluster: ``t(G - 1)``;
   bootstrap: normal) for ``sce`` and ``linreg``, the t interval
   ``mean ± t(n-1) sd / sqrt(n)`` for ``mean``;
4. records both intervals, whether each covers the truth (for ``linreg`` and
   ``mean``: the share of coordinates covered) and the *width ratio*, the
   private interval's width over the non-private one's on the same draw (the
   median over coordinates for ``linreg`` and ``mean``).

The non-private interval runs through the same design, so its coverage is the
reference a private interval is judged against: under resampling even the
non-private interval need not reach 0.95 (small samples, few clusters,
heteroskedasticity the SE type ignores).

Outcomes that are not intervals
-------------------------------
A decline is an honest "I cannot localise this": it counts as an infinite
interval (it covers, with an infinite width ratio), as an infinite interval
released by the method does. A release without a standard error (a method
that gives no intervals), an error, a timeout or a memory failure counts as
*not* covering, with an infinite width ratio; a release without an interval
is stored with status ``error`` and the message ``no interval: ...``. A
trial whose draw could not be made (no full-rank resample in
:data:`MAX_REDRAWS` draws, e.g. a dummy of a rare level found in one cluster;
fixed effects nested in the clusters of a ``linreg`` instance, whose target
includes them) is stored with status ``error`` and the message ``resample
failed: ...`` and left out of the summaries: it says something about the
design, not about the method.

The summaries (:func:`coverage_table`) weight studies equally, as the
point benchmark does (:mod:`dpstats.bench.evaluation`): a trial of instance
``i`` of study ``s`` weighs ``1 / (K m_s T_i)``. Coverage comes with its
binomial standard error ``sqrt(c (1 - c) sum w^2)``; the width ratio is the
study-weighted median. Methods are ranked by median width ratio among those
whose coverage is at least the non-private interval's on the same trials minus
:data:`COVERAGE_TOLERANCE` (over-coverage is valid, and paid for in width).

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
``q`` that :func:`nonprivate_interval` used (:func:`nonprivate_quantile`;
exact for every SE type when the study's SE is known, :func:`attach_study_se`).
:func:`coverage_table` adds per group the worst instance, the share of
instances below :data:`INSTANCE_FLOOR` and the total of confident misses.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

import numpy as np
import pandas as pd

from dpstats.bench.model import MAX_MESSAGE, Problem, TrialKind, describe_exception, open_corpus
from dpstats.bench.scoring import score

__all__ = [
    "LEVEL",
    "RESAMPLE_KEY",
    "MAX_REDRAWS",
    "COVERAGE_TOLERANCE",
    "INTERVAL_COLUMNS",
    "COVERAGE_COLUMNS",
    "ResampleError",
    "InferenceProblem",
    "population_truth",
    "resample",
    "nonprivate_interval",
    "interval_outcome",
    "load_inference_problem",
    "run_inference_trial",
    "COVERAGE_TRIAL",
    "coverage_table",
    "forest_summary",
    "CONFIDENT_MISS_SE",
    "INSTANCE_FLOOR",
    "INSTANCE_COLUMNS",
    "nonprivate_quantile",
    "attach_study_se",
    "trial_validity",
    "instance_coverage",
]

#: the level of the benchmark's intervals
LEVEL = 0.95
#: first entropy word of the resampling stream (the second is the trial's seed)
RESAMPLE_KEY = 0x1F5E
#: how many times a rank-deficient draw is replaced before the trial fails
MAX_REDRAWS = 20
#: the message prefix of a trial whose draw failed (left out of the summaries)
RESAMPLE_FAILED = "resample failed:"
#: a method is ranked when its coverage is at least the reference's minus this
COVERAGE_TOLERANCE = 0.02
#: a *confident miss*: a finite private interval that misses the truth by more than this many non-private SEs
CONFIDENT_MISS_SE = 10.0
#: per-instance validity line: the share of a group's instances whose coverage is below it (``below_85``)
INSTANCE_FLOOR = 0.85

#: the columns of ``intervals.csv``, in order
INTERVAL_COLUMNS = (
    "algorithm", "interpretation", "instance", "study", "task", "epsilon", "delta", "seed", "status", "error",
    "level", "se_type", "n", "d", "n_draw", "truth", "study_low", "study_high", "estimate", "low", "high", "np_estimate", "np_low",
    "np_high", "covered", "np_covered", "width_ratio", "seconds", "peak_mb",
)

#: the columns of ``coverage.csv``
COVERAGE_COLUMNS = (
    "task", "epsilon", "slice", "algorithm", "interpretation", "coverage", "coverage_se", "reference",
    "reference_se", "difference", "median_width_ratio", "infinite", "failed", "trials", "instances", "studies",
    "eligible", "rank", "worst_coverage", "worst_instance", "worst_reference", "below_85", "confident_misses",
    "coordinates_below_85",
)

#: the columns of ``coverage_instances.csv`` (:func:`instance_coverage`), in order
INSTANCE_COLUMNS = (
    "corpus", "task", "epsilon", "algorithm", "interpretation", "instance", "study", "n", "d", "se_type", "trials",
    "coverage", "coverage_se", "coverage_all", "reference", "reference_all", "difference", "median_width_ratio",
    "infinite", "failed", "confident_misses", "max_miss_se", "se_exact", "worst_coordinate", "coordinate_coverage",
)


class ResampleError(RuntimeError):
    """No draw with a full-rank design within :data:`MAX_REDRAWS` tries."""


# --------------------------------------------------------------------------
# The design: truth, resamples, non-private intervals
# --------------------------------------------------------------------------


def population_truth(instance: Any, baseline: Any = None) -> np.ndarray:
    """The population value: the instance's non-private estimate on all its rows."""
    from dpstats.ols.baseline import compute_baseline

    b = baseline if baseline is not None else compute_baseline(instance)
    return np.asarray(b.estimate, dtype=float).reshape(-1).copy()


def _full_rank(X: np.ndarray, weights: np.ndarray | None) -> bool:
    """Full column rank of the (weighted) design: no all-zero column, and a well-conditioned scaled Gram matrix."""
    n, d = X.shape
    if n <= d or not np.all(np.any(X != 0, axis=0)):
        return False  # e.g. a fixed-effect dummy none of whose rows was drawn: found without a factorisation
    Xw = X if weights is None else X * np.sqrt(weights)[:, None]
    G = Xw.T @ Xw
    s = np.sqrt(np.clip(np.diag(G), 1e-300, None))
    ev = np.linalg.eigvalsh(G / np.outer(s, s))
    return bool(ev[0] > max(ev[-1], 1.0) * d * 1e-12)


_CLUSTERS: dict[str, tuple[Any, list[np.ndarray], np.ndarray]] = {}


def _cluster_index(instance: Any) -> tuple[list[np.ndarray], np.ndarray]:
    """Row indices of each cluster and which design columns are non-zero in each (cached per instance object)."""
    hit = _CLUSTERS.get(instance.id)
    if hit is not None and hit[0] is instance:
        return hit[1], hit[2]
    labels, codes = np.unique(np.asarray(instance.clusters), return_inverse=True)
    order = np.argsort(codes, kind="stable")
    members = np.split(order, np.cumsum(np.bincount(codes, minlength=len(labels)))[:-1])
    nz = np.zeros((len(labels), instance.X.shape[1]), dtype=bool)
    np.logical_or.at(nz, codes, np.asarray(instance.X) != 0)
    _CLUSTERS[instance.id] = (instance, members, nz)
    return members, nz


def _draw_rows(instance: Any, rng: np.random.Generator) -> tuple[np.ndarray | None, np.ndarray | None]:
    """Row indices of one draw and the draw's cluster labels (None when not clustered).

    For a cluster draw whose design would have an all-zero column (a
    fixed-effect dummy of clusters none of which was drawn) the indices are
    None: the draw is rejected before any row is copied. The columns of
    fixed effects nested in the clusters are not checked: :func:`resample`
    rebuilds them for every drawn copy (:func:`_nested_design`).
    """
    n = int(instance.X.shape[0])
    if instance.clusters is None or not str(instance.spec.se).startswith("cluster:"):
        return rng.integers(0, n, size=n), None
    members, nz = _cluster_index(instance)
    picks = rng.integers(0, len(members), size=len(members))
    if instance.nested_columns:  # the nested dummies are rebuilt per drawn copy: only the other columns can vanish
        nz = nz[:, np.setdiff1d(np.arange(nz.shape[1]), instance.nested_columns)]
    if instance.task != "mean" and not nz[picks].any(axis=0).all():
        return None, None
    idx = np.concatenate([members[g] for g in picks])
    new = np.repeat(np.arange(len(picks)), [len(members[g]) for g in picks])
    return idx, new


@dataclass(frozen=True, eq=False)
class _NestedTerm:
    """A categorical term whose levels are nested in the clusters, as the population's design codes it."""

    name: str  #: the term, e.g. ``"C(state)"`` (the column names are ``<name>[T.<level>]`` or ``<name>[<level>]``)
    columns: tuple[int, ...]  #: its design columns in the population
    codes: np.ndarray  #: per population row: 0 = no dummy column (the reference level), k = ``columns[k - 1]``
    reduced: bool  #: one level has no column (an intercept or an earlier term absorbs it)
    variable: str | None  #: the frame column the term is of (None when it is not a single frame column)


def _term_name(column: str) -> str:
    """``"C(state)[T.AL]"`` -> ``"C(state)"``: the name up to the first ``[`` outside parentheses."""
    depth = 0
    for i, ch in enumerate(column):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "[" and depth == 0 and i > 0 and column.endswith("]"):
            return column[:i]
    return column


_NESTED: dict[str, tuple[Any, list[_NestedTerm]]] = {}


def _nested_terms(instance: Any) -> list[_NestedTerm]:
    """The terms of ``instance.nested_columns``, grouped by term name (cached per instance object)."""
    hit = _NESTED.get(instance.id)
    if hit is not None and hit[0] is instance:
        return hit[1]
    from dpstats.data.instance import factor_variables

    names = instance.facts.columns
    groups: dict[str, list[int]] = {}
    for j in instance.nested_columns:
        groups.setdefault(_term_name(names[j]), []).append(int(j))
    X = np.asarray(instance.X)
    terms = []
    for name, cols in groups.items():
        sub = X[:, cols]
        if not np.all((sub == 0) | (sub == 1)) or np.any(sub.sum(axis=1) > 1):
            raise ResampleError(f"instance {instance.id!r}: the columns of {name!r} are not a dummy coding")
        codes = np.where(sub.any(axis=1), 1 + np.argmax(sub, axis=1), 0)
        var = factor_variables(name, instance.frame.columns) if instance.frame is not None else set()
        terms.append(_NestedTerm(name, tuple(cols), codes, bool(np.any(codes == 0)),
                                 next(iter(var)) if len(var) == 1 else None))
    _NESTED[instance.id] = (instance, terms)
    return terms


@dataclass(frozen=True, eq=False)
class _NestedDraw:
    """A draw's design with the nested fixed effects rebuilt per drawn copy of a cluster."""

    X: np.ndarray
    columns: tuple[str, ...]
    nested: tuple[int, ...]
    new_columns: frozenset[str]
    levels: dict[str, np.ndarray]  #: frame variable -> the draw's level of each row


def _nested_design(instance: Any, idx: np.ndarray, copies: np.ndarray) -> _NestedDraw:
    """The design of a cluster draw whose nested fixed-effect terms get their own levels in each drawn copy.

    A level of a nested term lies in one cluster; in the draw, each drawn
    copy of that cluster gets its own level (``(copy, level)``), so a
    cluster drawn twice has two fixed effects and an undrawn one none, as in
    the cluster bootstrap with fixed effects. The term is coded as the
    instance builder (patsy) codes it: levels in order (copy, then the
    population's level), the first without a column when the population's
    term has a reference level (an intercept or an earlier term absorbs
    it), every level with a column otherwise. The term's columns take the
    place of its population columns; the level of row ``i`` is the integer
    ``v`` of its column ``<term>[T.v]`` (``<term>[v]`` without a reference;
    ``v = 0`` is the reference), so that the frame can carry the same
    levels.
    """
    terms = _nested_terms(instance)
    X0 = np.asarray(instance.X)
    names = instance.facts.columns
    first = {t.columns[0]: t for t in terms}
    skip = {j for t in terms for j in t.columns}
    blocks: list[np.ndarray] = []
    out_names: list[str] = []
    nested: list[int] = []
    levels: dict[str, np.ndarray] = {}
    keep: list[int] = []  # a run of kept population columns, copied in one go

    def flush() -> None:
        if keep:
            blocks.append(X0[np.ix_(idx, keep)] if len(keep) > 1 else X0[idx, keep[0]][:, None])
            out_names.extend(names[j] for j in keep)
            keep.clear()

    m = len(idx)
    for j in range(X0.shape[1]):
        if j in first:
            flush()
            t = first[j]
            key = copies.astype(np.int64) * (len(t.columns) + 1) + t.codes[idx]
            uniq, inv = np.unique(key, return_inverse=True)
            inv = inv.reshape(-1)
            off = 1 if t.reduced else 0
            D = np.zeros((m, len(uniq) - off))
            rows = np.flatnonzero(inv >= off)
            D[rows, inv[rows] - off] = 1.0
            nested.extend(range(len(out_names), len(out_names) + D.shape[1]))
            fmt = "{}[T.{}]" if t.reduced else "{}[{}]"
            out_names.extend(fmt.format(t.name, v) for v in range(off, len(uniq)))
            blocks.append(D)
            if t.variable is not None:
                levels[t.variable] = inv
        elif j not in skip:
            keep.append(j)
    flush()
    new = frozenset(out_names[k] for k in nested)
    return _NestedDraw(np.hstack(blocks), tuple(out_names), tuple(nested), new, levels)


def _check_nested(instance: Any) -> None:
    """Refuse nested fixed effects whose per-copy rebuild would change the target."""
    if instance.task != "sce":
        raise ResampleError(f"instance {instance.id!r}: fixed effects nested in the clusters of a {instance.task!r} "
                            "instance; its target includes them, and a cluster draw gives each drawn copy its own")
    if instance.facts.coef_index in set(instance.nested_columns):
        raise ResampleError(f"instance {instance.id!r}: the coefficient of interest is a fixed effect nested in the "
                            "clusters")
    _nested_terms(instance)



def _nested_instance(instance: Any, draw: _NestedDraw, idx: np.ndarray, copies: np.ndarray, **fields: Any) -> Any:
    """The draw as an :class:`~dpstats.data.instance.Instance`: the rebuilt design with its facts and frame."""
    f = instance.facts
    old = set(f.columns)
    bound = not f.weighted  # a weighted instance has no public bounds (the builder's rule)
    bounds = {c: (0.0, 1.0) if c in draw.new_columns else f.bounds[c] for c in draw.columns
              if (c in draw.new_columns and bound) or (c not in draw.new_columns and c in f.bounds)}
    bounds.update({k: v for k, v in f.bounds.items() if k not in old})  # the outcome's
    dummies = set(f.dummies) | draw.new_columns
    coef_index = None
    if f.coefficient is not None and f.coef_index is not None:
        coef_index = draw.columns.index(f.coefficient)
    facts = replace(f, n=int(len(idx)), d=len(draw.columns), columns=draw.columns, coef_index=coef_index,
                    bounds=bounds, dummies=tuple(c for c in draw.columns if c in dummies))
    frame = instance.frame
    if frame is not None:
        frame = frame.iloc[idx].reset_index(drop=True)
        for var, lv in draw.levels.items():
            frame[var] = lv
        col = str(instance.spec.se).split(":", 1)[1]
        if col in frame.columns:  # each drawn copy is a cluster of its own in the frame too
            frame[col] = copies
    return replace(instance, facts=facts, X=draw.X, frame=frame, nested_columns=draw.nested, **fields)



def resample(instance: Any, seed: int) -> Any:
    """One draw of the design: an :class:`~dpstats.data.instance.Instance` of resampled rows.

    Rows (or whole clusters, relabelled so that each drawn copy is its own
    cluster) are drawn with replacement from ``default_rng([RESAMPLE_KEY,
    seed])``; a draw whose (weighted) design is rank-deficient is replaced by
    the stream's next draw.

    When fixed effects are nested in the clusters (``nested_columns`` of an
    ``sce`` instance with ``cluster:`` standard errors), each drawn copy of a
    cluster also gets fixed-effect levels of its own: the nested terms'
    dummy columns are rebuilt per copy, so the
    design stays full rank and the coefficient of interest keeps its
    meaning. The draw's facts follow (``d``, ``columns``, ``coef_index``,
    ``dummies``, bounds ``[0, 1]`` for the new dummies unless weighted), as
    do ``nested_columns`` and the frame (the terms' variables and the cluster
    column hold the draw's levels and copies). Other instances are drawn as
    before, bit for bit.

    Raises
    ------
    ResampleError
        No full-rank draw in :data:`MAX_REDRAWS` tries; or nested fixed
        effects that cannot be rebuilt per copy (a ``linreg`` instance, whose
        target includes the fixed effects; a coefficient of interest among
        them).
    """
    nested = bool(instance.nested_columns) and instance.task != "mean" and str(instance.spec.se).startswith("cluster:")
    if nested:
        _check_nested(instance)
    rng = np.random.default_rng([RESAMPLE_KEY, int(seed)])
    for _ in range(MAX_REDRAWS):
        idx, clusters = _draw_rows(instance, rng)
        if idx is None:
            continue
        w = None if instance.weights is None else np.asarray(instance.weights)[idx]
        if nested:
            nd = _nested_design(instance, idx, clusters)
            X = nd.X
        else:
            X = np.asarray(instance.X)[idx]
        if instance.task == "mean" or _full_rank(X, w):
            break
    else:
        raise ResampleError(f"instance {instance.id!r}: no resample with a full-rank design in {MAX_REDRAWS} "
                            f"draws (seed {seed})")
    y = None if instance.y is None else np.asarray(instance.y)[idx]
    if nested:
        return _nested_instance(instance, nd, idx, clusters, y=y, weights=w, clusters=clusters)
    if clusters is None and instance.clusters is not None:
        clusters = np.asarray(instance.clusters)[idx]
    frame = instance.frame.iloc[idx].reset_index(drop=True) if instance.frame is not None else instance.frame
    facts = replace(instance.facts, n=int(len(idx)))
    return replace(instance, facts=facts, X=X, y=y, weights=w, clusters=clusters, frame=frame)


def _quantile(se_type: str | None, n: int, d: int, clusters: np.ndarray | None, level: float) -> float:
    from scipy import stats

    p = 0.5 + level / 2.0
    se_type = se_type or "classical"
    if se_type.startswith("bootstrap"):
        return float(stats.norm.ppf(p))
    if se_type.startswith("cluster:") and clusters is not None:
        g = len(np.unique(clusters))
        return float(stats.t.ppf(p, max(g - 1, 1)))
    return float(stats.t.ppf(p, max(n - d, 1)))


def nonprivate_interval(instance: Any, level: float = LEVEL) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The non-private interval of the study's SE type on ``instance``'s rows: ``(estimate, low, high)``.

    ``sce``: the coefficient of interest ± quantile × its SE of the study's
    type (:func:`dpstats.ols.baseline.compute_baseline`); ``linreg``: every
    coefficient, with the covariance of the study's type
    (:func:`dpstats.ols.covariance.covariance_from_spec`); ``mean``: the t
    interval of each column. Quantiles: ``t(n - d)`` (classical, HC),
    ``t(G - 1)`` (cluster), normal (bootstrap), ``t(n - 1)`` (mean).
    """
    from scipy import stats

    from dpstats.ols.baseline import compute_baseline
    from dpstats.ols.covariance import covariance_from_spec, fit_ols

    task = instance.task
    if task == "mean":
        X = np.asarray(instance.X, dtype=float)
        n = X.shape[0]
        est = X.mean(axis=0)
        se = X.std(axis=0, ddof=1) / math.sqrt(n)
        q = float(stats.t.ppf(0.5 + level / 2.0, max(n - 1, 1)))
        return est, est - q * se, est + q * se
    se_type = instance.spec.se
    if task == "sce":
        b = compute_baseline(instance)
        est = np.asarray(b.estimate, dtype=float).reshape(-1)
        se = np.array([b.se])
        d = b.d
    else:
        fit = fit_ols(instance.X, instance.y, instance.weights, instance.clusters, instance.nested_columns)
        vcov = covariance_from_spec(se_type).vcov(fit)
        est = fit.beta.copy()
        se = np.sqrt(np.clip(np.diag(vcov), 0.0, None))
        d = fit.d
    q = _quantile(se_type, int(instance.X.shape[0]), int(d), instance.clusters, level)
    return est, est - q * se, est + q * se


def interval_outcome(low: np.ndarray, high: np.ndarray, truth: np.ndarray, np_low: np.ndarray,
                     np_high: np.ndarray) -> tuple[float, float, float]:
    """``(covered, np_covered, width_ratio)``: shares of coordinates covered and the median width ratio."""
    low, high = np.asarray(low, dtype=float), np.asarray(high, dtype=float)
    np_low, np_high = np.asarray(np_low, dtype=float), np.asarray(np_high, dtype=float)
    truth = np.asarray(truth, dtype=float)
    with np.errstate(invalid="ignore"):
        cov = (low <= truth) & (truth <= high)
        np_cov = (np_low <= truth) & (truth <= np_high)
        width, np_width = high - low, np_high - np_low
        ratio = np.where(np_width > 0, width / np.where(np_width > 0, np_width, 1.0), np.inf)
    ratio = np.where(np.isnan(ratio), np.inf, ratio)
    return float(np.mean(cov)), float(np.mean(np_cov)), float(np.median(ratio))


# --------------------------------------------------------------------------
# Trials (run in the benchmark's worker processes)
# --------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class InferenceProblem:
    """An instance ready for coverage trials: the population, its truth, and the full-data problem."""

    instance: Any  # Instance
    truth: np.ndarray
    problem: Any  # dpstats.bench.model.Problem of all rows (its info() describes the instance)
    study_low: np.ndarray
    study_high: np.ndarray

    def info(self) -> dict[str, Any]:
        return self.problem.info()


_INFERENCE: dict[tuple[str, str], InferenceProblem] = {}


def load_inference_problem(corpus: str, instance: str) -> InferenceProblem:
    """Load an instance for coverage trials once per process."""
    from pathlib import Path

    root = str(Path(corpus).resolve())
    key = (root, instance)
    if key not in _INFERENCE:
        inst = open_corpus(root).instance(instance)  # the corpus cache of point trials, shared
        problem = Problem.from_instance(inst)
        _INFERENCE[key] = inference_problem(inst, problem)
    return _INFERENCE[key]


def inference_problem(instance: Any, problem: Any = None) -> InferenceProblem:
    """An :class:`InferenceProblem` of an instance (``problem``: its full-data trial problem, if built)."""
    problem = problem if problem is not None else Problem.from_instance(instance)
    _, lo, hi = nonprivate_interval(instance)
    return InferenceProblem(instance, population_truth(instance, problem.baseline), problem, lo, hi)


def _cache_inference(corpus: str, ip: InferenceProblem) -> None:
    from pathlib import Path

    _INFERENCE[(str(Path(corpus).resolve()), ip.problem.instance)] = ip


def interval_params(algo_cls: type) -> dict[str, Any]:
    """The hyperparameters a method runs with when asked for an interval (``interval_params``; the API's too)."""
    return dict(algo_cls.interval_params)


def _jl(a: Any) -> list[float] | None:
    return None if a is None else [float(v) for v in np.asarray(a, dtype=float).reshape(-1)]


def run_inference_trial(algo_cls: type, ip: InferenceProblem, algorithm: Any, epsilon: float, delta: float,
                        seed: int, secure: bool = False) -> Any:
    """One coverage trial, in this process: draw, release, both intervals, scored.

    Returns a :class:`~dpstats.bench.model.TrialResult` whose ``interval``
    holds the trial's interval record (the fields of
    :data:`INTERVAL_COLUMNS` that a point trial lacks); ``n`` and ``d`` are
    the instance's (for the slices), the draw's size is ``interval["n_draw"]``.
    """
    from dpstats.algorithms.base import Decline, Release

    base = ip.problem
    rec: dict[str, Any] = {"level": LEVEL, "se_type": base.baseline.se_type if base.task == "sce" else
                           ip.instance.spec.se if base.task == "linreg" else None, "truth": _jl(ip.truth),
                           "study_low": _jl(ip.study_low), "study_high": _jl(ip.study_high)}
    try:
        draw = resample(ip.instance, seed)
        np_est, np_lo, np_hi = nonprivate_interval(draw)
        problem = Problem.from_instance(draw)
    except Exception as exc:  # noqa: BLE001 - a failed draw is a failed trial, kept with its cause
        res = score(base, algorithm, epsilon, delta, seed, "error", f"{RESAMPLE_FAILED} {describe_exception(exc)}",
                    None, 0.0, 0.0)
        return replace(res, interval={**rec, "n_draw": None, "covered": 0.0, "np_covered": math.nan,
                                      "width_ratio": math.inf})
    rec.update(n_draw=int(draw.X.shape[0]), np_estimate=_jl(np_est), np_low=_jl(np_lo), np_high=_jl(np_hi))
    if secure:
        from dpstats.privacy.randomness import SecureGenerator

        rng: np.random.Generator = SecureGenerator()
    else:
        rng = np.random.default_rng(seed)
    t0 = time.perf_counter()
    kind, message, est = "released", None, None
    lo = hi = None
    try:
        out = algo_cls(**interval_params(algo_cls)).run(problem.data, problem.facts, epsilon, delta, rng)
    except MemoryError as exc:
        kind, message, out = "memory", describe_exception(exc), None
    except BaseException as exc:  # noqa: BLE001 - any failure of the algorithm is a result
        kind, message, out = "error", describe_exception(exc), None
    seconds = time.perf_counter() - t0
    if out is not None:
        if isinstance(out, Decline):
            kind, message = "declined", str(out.reason)[:MAX_MESSAGE]
        elif not isinstance(out, Release):
            kind, message = "error", f"algorithm returned {type(out).__name__}, not Release or Decline"
        else:
            try:
                est = np.asarray(out.estimate, dtype=float).reshape(-1)
            except (TypeError, ValueError) as exc:
                kind, message = "error", f"estimate is not numeric: {describe_exception(exc)}"
            if kind == "released" and est is not None and est.size != problem.expected_size:
                kind, message = "error", f"estimate has shape {est.shape}, expected ({problem.expected_size},)"
            elif kind == "released" and est is not None and not np.all(np.isfinite(est)):
                kind, message = "error", f"non-finite estimate {np.array2string(est, threshold=8)}"
            elif kind == "released" and getattr(out, "std_error", None) is None:
                kind, message = "error", (f"no interval: the release of {algorithm.name!r} carries no std_error "
                                          "(a method without intervals)")
            elif kind == "released":
                try:
                    lo_, hi_ = out.conf_int(LEVEL)
                    lo, hi = np.asarray(lo_, dtype=float).reshape(-1), np.asarray(hi_, dtype=float).reshape(-1)
                    if lo.size != est.size or hi.size != est.size or np.any(np.isnan(lo)) or np.any(np.isnan(hi)):
                        raise ValueError(f"interval of shape {lo.shape} with NaN ends or the wrong size")
                except Exception as exc:  # noqa: BLE001
                    kind, message = "error", f"no interval: conf_int failed: {describe_exception(exc)}"
                    lo = hi = None
    res = score(problem, algorithm, epsilon, delta, seed, kind, message, est, seconds, 0.0)
    if kind == "declined":
        lo = np.full(len(ip.truth), -np.inf)
        hi = np.full(len(ip.truth), np.inf)
    if lo is not None and hi is not None:
        covered, np_covered, ratio = interval_outcome(lo, hi, ip.truth, np_lo, np_hi)
    else:
        covered, np_covered, _ = interval_outcome(np.full(len(ip.truth), np.nan), np.full(len(ip.truth), np.nan),
                                                  ip.truth, np_lo, np_hi)
        ratio = math.inf
    rec.update(low=_jl(lo), high=_jl(hi), covered=covered, np_covered=np_covered, width_ratio=ratio)
    # slices by the instance's n and d, not the draw's
    return replace(res, n=int(base.n), d=int(base.d), interval=rec)


#: the coverage trial as a kind of trial of the benchmark's workers: a job with ``kind=COVERAGE_TRIAL``
#: (:func:`dpstats.bench.runner.make_plan` with ``inference=True``) has its worker load the instance with
#: :func:`load_inference_problem` and run each trial with :func:`run_inference_trial`
COVERAGE_TRIAL = TrialKind("coverage", load_inference_problem, run_inference_trial)


# --------------------------------------------------------------------------
# Summaries
# --------------------------------------------------------------------------


def _weights(df: pd.DataFrame) -> np.ndarray:
    """``1 / (K m_s T_i)`` per row: studies weigh equally, then instances within a study, then trials."""
    if df.empty:
        return np.zeros(0)
    t_i = df.groupby("instance")["instance"].transform("size").to_numpy(dtype=float)
    inst = df[["instance", "study"]].drop_duplicates()
    m_s = df["study"].map(inst.groupby("study").size()).to_numpy(dtype=float)
    k = float(inst["study"].nunique())
    return 1.0 / (k * m_s * t_i)


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
    """The quantile :func:`nonprivate_interval` used on a draw, from what a trial stores: ``(q, exact)``.

    The non-private SE of a draw is then ``(np_high - np_low) / (2 q)``.
    ``mean``: ``t(n_draw - 1)``. Classical and HC: ``t(n_draw - d)``;
    bootstrap: normal (as :func:`_quantile` computes them; ``d`` is the
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
    return _quantile(se_type, n_draw, d, None, level)


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


#: the columns :func:`trial_validity` computes (a table that has them is not recomputed)
_VALIDITY = ("covered_all", "np_covered_all", "np_quantile", "se_exact", "miss_se", "np_miss_se")


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

    A table that already has these columns (a result of this function) is
    returned with only the confident-miss flags recomputed for
    ``threshold``.
    """
    df = prepare_intervals(intervals)
    if set(_VALIDITY) <= set(df.columns):  # already a validity table: only the threshold is applied again
        df["confident_miss"] = np.nan_to_num(df["miss_se"].to_numpy(dtype=float), nan=-math.inf) > threshold
        df["np_confident_miss"] = np.nan_to_num(df["np_miss_se"].to_numpy(dtype=float), nan=-math.inf) > threshold
        return df
    n = len(df)
    q = np.full(n, math.nan)
    exact = np.zeros(n, dtype=bool)
    miss = np.full(n, math.nan)
    np_miss = np.full(n, math.nan)
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
    for lo_, hi_, tr_ in zip(g["low"].tolist(), g["high"].tolist(), g["truth"].tolist()):
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
        miss far more often than the average shows).
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
    trials with a confident miss, :func:`trial_validity`). On the
    ``non-private`` row they describe the non-private interval.

    Returns
    -------
    DataFrame
        The columns of :data:`COVERAGE_COLUMNS` (and ``corpus``).
    """
    from dpstats.bench.evaluation import competition_ranks, slice_mask, slices_for

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
                          "confident_misses": int(draws["np_confident_miss"].sum())})
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
                })
            ranked = [b for b in block[1:] if b["eligible"]]
            ranked.sort(key=lambda b: (b["median_width_ratio"], b["algorithm"]))
            ranks = competition_ranks([(b["median_width_ratio"],) for b in ranked])
            for b, rk in zip(ranked, ranks):
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
    return out


def forest_summary(intervals: pd.DataFrame, instance: str) -> pd.DataFrame:
    """Per algorithm and ε on one ``sce`` instance: how often the interval agrees with the study.

    The *study's* interval is the non-private interval of its SE type on all
    its rows, and its conclusion is its sign and whether it excludes zero.
    For each trial, the private interval *agrees on the sign* when its
    midpoint has the study's sign, and *agrees on excluding zero* when it
    excludes zero exactly when the study's does (with the same sign). The
    same shares for the non-private interval on the same draws are the
    reference (sampling variation alone).

    Returns
    -------
    DataFrame
        ``algorithm, epsilon, trials, sign, excludes_zero, np_sign, np_excludes_zero, median_low,
        median_high`` (the medians of the interval ends over the trials).
    """
    df = intervals[(intervals["instance"] == instance) & (intervals["task"] == "sce")]
    rows = []
    if df.empty:
        return pd.DataFrame(rows)
    truth = float(_first(df["truth"].iloc[0]))
    ref_lo, ref_hi = _study_interval(df)
    sign = np.sign(truth)
    excl = ref_lo > 0 or ref_hi < 0
    for (name, eps), g in df.groupby(["algorithm", "epsilon"], sort=True):
        lo = np.array([_first(v, -math.inf) for v in g["low"]], dtype=float)
        hi = np.array([_first(v, math.inf) for v in g["high"]], dtype=float)
        nlo = np.array([_first(v, math.nan) for v in g["np_low"]], dtype=float)
        nhi = np.array([_first(v, math.nan) for v in g["np_high"]], dtype=float)
        rows.append({"algorithm": name, "epsilon": float(eps), "trials": len(g),
                     "sign": float(np.mean(_agree_sign(lo, hi, sign))),
                     "excludes_zero": float(np.mean(_agree_excl(lo, hi, sign, excl))),
                     "np_sign": float(np.mean(_agree_sign(nlo, nhi, sign))),
                     "np_excludes_zero": float(np.mean(_agree_excl(nlo, nhi, sign, excl))),
                     "median_low": float(np.median(lo)), "median_high": float(np.median(hi))})
    return pd.DataFrame(rows)


def _first(v: Any, default: float = math.nan) -> float:
    import json

    if v is None or (isinstance(v, float) and math.isnan(v)):
        return default
    if isinstance(v, str):
        if v in ("", "None", "nan"):
            return default
        v = json.loads(v)
    if isinstance(v, (list, tuple, np.ndarray)):
        return float(v[0]) if len(v) else default
    return float(v)


def _study_interval(df: pd.DataFrame) -> tuple[float, float]:
    """The study's interval (the non-private one of its SE type on all rows), stored with every trial."""
    if "study_low" in df.columns:
        return _first(df["study_low"].iloc[0]), _first(df["study_high"].iloc[0])
    return math.nan, math.nan


def _agree_sign(lo: np.ndarray, hi: np.ndarray, sign: float) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        mid = np.where(np.isfinite(lo) & np.isfinite(hi), (lo + hi) / 2.0, np.nan)
        return np.sign(mid) == sign


def _agree_excl(lo: np.ndarray, hi: np.ndarray, sign: float, excl: bool) -> np.ndarray:
    pos, neg = lo > 0, hi < 0
    if not excl:
        return ~(pos | neg)
    return pos if sign > 0 else neg


