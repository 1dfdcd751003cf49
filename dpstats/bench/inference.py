"""The coverage benchmark (``dpstats bench --inference``): do private intervals cover the population value?

The coverage design
-------------------
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
A decline is an honest "I cannot localise this": it is recorded as an
infinite interval (it covers, with an infinite width ratio), as an infinite
interval released by the method is. A release without a standard error (a
method that gives no intervals), an error, a timeout or a memory failure is
recorded as *not* covering, with an infinite width ratio; a release without
an interval is stored with status ``error`` and the message ``no interval:
...``. A trial whose draw could not be made (no full-rank resample in
:data:`MAX_REDRAWS` draws, e.g. a dummy of a rare level found in one cluster;
fixed effects nested in the clusters of a ``linreg`` instance, whose target
includes them) is stored with status ``error`` and the message ``resample
failed: ...`` (:data:`~dpstats.bench.coverage_summary.RESAMPLE_FAILED`), which
the summaries leave out.

Where things live
-----------------
This module holds the design and the trial: the resamples, the truth, the
non-private interval, :class:`InferenceProblem` and
:func:`run_inference_trial`, and :data:`COVERAGE_TRIAL`, the trial kind the
runner hands to the workers (its functions are pickled by reference to this
module). The summaries of the stored interval rows
(:func:`~dpstats.bench.coverage_summary.coverage_table`,
:func:`~dpstats.bench.coverage_summary.instance_coverage`,
:func:`~dpstats.bench.coverage_summary.trial_validity`, their constants and
columns) live in :mod:`dpstats.bench.coverage_summary`, a layer lower (the
agreement with the study, :func:`~dpstats.bench.coverage_forest.forest_summary`,
in :mod:`dpstats.bench.coverage_forest` beside it), with
the facts the trial shares with them (the level
:data:`~dpstats.bench.coverage_summary.LEVEL`, ``RESAMPLE_FAILED``, the
quantile rule :func:`~dpstats.bench.coverage_summary.interval_quantile`);
their names are also importable from here, where they were first defined.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from typing import Any, cast

import numpy as np

# the agreement with the study (a layer lower), re-exported here, where it was first defined
from dpstats.bench.coverage_forest import _agree_excl, _agree_sign, _first, _study_interval, forest_summary  # noqa: F401

# the summaries and the facts the trial shares with them, a layer lower; re-exported here, where they were first
# defined (not in __all__: documented once, in dpstats.bench.coverage_summary)
from dpstats.bench.coverage_summary import (  # noqa: F401
    _FAILED,
    _VALIDITY,
    CONFIDENT_MISS_SE,
    COVERAGE_COLUMNS,
    COVERAGE_TOLERANCE,
    INSTANCE_COLUMNS,
    INSTANCE_FLOOR,
    LEVEL,
    RESAMPLE_FAILED,
    _instance_rows,
    _miss,
    _num,
    _stored_quantile,
    _summary,
    _usable,
    _vec,
    _weights,
    _wmedian,
    _worst,
    _worst_coordinate,
    attach_study_se,
    coverage_table,
    instance_coverage,
    interval_quantile,
    nonprivate_quantile,
    prepare_intervals,
    trial_validity,
)
from dpstats.bench.coverage_summary import interval_quantile as _quantile  # noqa: F401 - its former name
from dpstats.bench.model import MAX_MESSAGE, Problem, TrialKind, describe_exception, open_corpus, trial_generator
from dpstats.bench.scoring import score

__all__ = [
    "RESAMPLE_KEY",
    "MAX_REDRAWS",
    "INTERVAL_COLUMNS",
    "ResampleError",
    "InferenceProblem",
    "population_truth",
    "resample",
    "nonprivate_interval",
    "interval_outcome",
    "inference_problem",
    "load_inference_problem",
    "run_inference_trial",
    "COVERAGE_TRIAL",
]

#: first entropy word of the resampling stream (the second is the trial's seed)
RESAMPLE_KEY = 0x1F5E
#: how many times a rank-deficient draw is replaced before the trial fails
MAX_REDRAWS = 20

#: the columns of ``intervals.csv``, in order
INTERVAL_COLUMNS = (
    "algorithm", "interpretation", "instance", "study", "task", "epsilon", "delta", "seed", "status", "error",
    "level", "se_type", "n", "d", "n_draw", "truth", "study_low", "study_high", "estimate", "low", "high", "np_estimate", "np_low",
    "np_high", "covered", "np_covered", "width_ratio", "seconds", "peak_mb",
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
            blocks.append(X0[np.ix_(idx, np.asarray(keep))] if len(keep) > 1 else X0[idx, keep[0]][:, None])
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
            assert clusters is not None  # a nested design draws whole clusters
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
        assert clusters is not None
        return _nested_instance(instance, nd, idx, clusters, y=y, weights=w, clusters=clusters)
    if clusters is None and instance.clusters is not None:
        clusters = np.asarray(instance.clusters)[idx]
    frame = instance.frame.iloc[idx].reset_index(drop=True) if instance.frame is not None else instance.frame
    facts = replace(instance.facts, n=int(len(idx)))
    return replace(instance, facts=facts, X=X, y=y, weights=w, clusters=clusters, frame=frame)


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
    q = interval_quantile(se_type, int(instance.X.shape[0]), int(d), instance.clusters, level)
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
        return cast(dict[str, Any], self.problem.info())


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


def _jl(a: Any) -> list[float] | None:
    return None if a is None else [float(v) for v in np.asarray(a, dtype=float).reshape(-1)]


def run_inference_trial(spec: Any, ip: InferenceProblem, algorithm: Any, epsilon: float, delta: float,
                        seed: int, secure: bool = False) -> Any:
    """One coverage trial, in this process: draw, release, both intervals, scored.

    The release is :func:`dpstats.algorithms.release.release` of
    ``spec.with_intervals()`` (the method's ``interval_params``, as the API
    runs it with ``inference=True``), whose outcome check makes a
    non-release, a mis-shaped or a non-finite estimate an ``error``; a
    release without a standard error, or whose interval fails, is one too.

    Returns a :class:`~dpstats.bench.model.TrialResult` whose ``interval``
    holds the trial's interval record (the fields of
    :data:`INTERVAL_COLUMNS` that a point trial lacks); ``n`` and ``d`` are
    the instance's (for the slices), the draw's size is ``interval["n_draw"]``.
    """
    from dpstats.algorithms.base import Decline
    from dpstats.algorithms.release import Budget, InvalidOutcome, release

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
    rng = trial_generator(seed, secure)
    t0 = time.perf_counter()
    kind, message, est = "released", None, None
    lo = hi = None
    try:
        out = release(spec.with_intervals(), problem.data, problem.facts, Budget(epsilon, delta), rng)
    except InvalidOutcome as exc:
        kind, message, est, out = "error", str(exc), exc.estimate, None
    except MemoryError as exc:
        kind, message, out = "memory", describe_exception(exc), None
    except BaseException as exc:  # noqa: BLE001 - any failure of the algorithm is a result
        kind, message, out = "error", describe_exception(exc), None
    seconds = time.perf_counter() - t0
    if isinstance(out, Decline):
        kind, message = "declined", str(out.reason)[:MAX_MESSAGE]
    elif out is not None:
        est = out.estimate
        if out.std_error is None:
            kind, message = "error", (f"no interval: the release of {algorithm.name!r} carries no std_error "
                                      "(a method without intervals)")
        else:
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
