"""The synthetic-data benchmark behind ``dpstats synth bench`` (Tao et al. 2021).

Every (data set, mechanism, epsilon, trial) synthesizes the data set in a
worker of the benchmark's own :class:`~dpstats.bench.sandbox.WorkerPool`, under
limits as the trials of ``dpstats bench`` run (4 GB of memory growth,
:data:`~dpstats.bench.sandbox.DEFAULT_MEMORY_MB`), but with a wall clock of
its own, :data:`SYNTH_TIME_LIMIT` (900 s): the paper ran each synthesizer to
completion, and the estimation benchmark's 60 s made the slower ones
time-outs that depended on the machine's load. A trial that exceeds a limit
is killed and recorded as ``timeout`` or ``memory``, never given more. The trials of one (data set,
mechanism) pair form one :class:`~dpstats.bench.sandbox.CallJob`, so a worker
receives the data once per pair. The parent then scores each synthetic table
with :func:`dpstats.bench.synth.metrics.evaluate` (outside the limits).

Every synthesizer is built by :func:`make_synthesizer`: one with a ``label``
hyperparameter (the workload mechanisms MWEM-PGM, AIM, FEM and RAP, and
Kamino and RON-Gauss) gets the schema's label, as in the paper (its
workload: all 2- and 3-way marginals that include the label), and the
run's hyperparameters override the defaults.

Summaries follow the paper's Fig. 1: a mechanism is *optimal* for a (data
set, epsilon, metric) when its mean over trials is the best; its *optimal
rate* is the share of those combinations where it is optimal, and its
*average rank* the mean of its ranks (1 = best, ties share the lower rank),
per metric group and overall ("GT"). The paper ran every mechanism to
completion, so a mechanism without a result in a combination (a time-out
here) is ranked apart, not last (:func:`summarize`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from dpstats.bench.sandbox import DEFAULT_MEMORY_MB, CallJob, CallResult, Limits, WorkerPool
from dpstats.bench.synth.metrics import METRICS, evaluate, metric_bins
from dpstats.synth import SYNTHESIZERS, get_synthesizer
from dpstats.synth.base import Synthesizer
from dpstats.synth.pipeline import make_discretizer, synthesize_frame
from dpstats.synth.schema import Schema

__all__ = ["SynthTrial", "TrialOutcome", "make_synthesizer", "check_params", "run_supervised", "run_trials", "run_benchmark", "summarize",
           "DEFAULT_EPSILONS", "DEFAULT_DELTA", "SYNTH_TIME_LIMIT"]

DEFAULT_EPSILONS = (0.1, 1.0, 10.0)
#: delta of every trial (the paper's epsilons are paired with a small delta; n is at most 3e5 here).
DEFAULT_DELTA = 1e-9

#: per-trial wall clock of the synthetic-data benchmark, in seconds (the paper ran each to completion)
SYNTH_TIME_LIMIT = 900.0


@dataclass(frozen=True)
class SynthTrial:
    """One synthesis: ``mechanism`` on ``dataset`` at ``(epsilon, delta)`` with ``default_rng(seed)``."""

    dataset: str
    mechanism: str
    epsilon: float
    delta: float
    seed: int


@dataclass
class TrialOutcome:
    """A trial's status (``ok``, ``timeout``, ``memory``, ``error``), wall seconds, message and synthetic frame.

    ``details`` are the synthesizer's diagnostics (:attr:`Synthetic.details
    <dpstats.synth.base.Synthetic.details>`, e.g. the ``workload`` a workload
    mechanism used) of a successful trial.
    """

    trial: SynthTrial
    status: str
    seconds: float
    message: str = ""
    frame: pd.DataFrame | None = None
    peak_mb: float = 0.0
    details: Mapping[str, Any] | None = None


#: Hyperparameters the benchmark sets itself (from the schema), never from ``params``.
_FROM_SCHEMA = ("label",)


def check_params(params: Mapping[str, Mapping[str, Any]]) -> None:
    """Check ``mechanism -> {hyperparameter: value}`` against the registry and each mechanism's defaults.

    Raises
    ------
    KeyError
        For an unknown mechanism (listing the known ones), an unknown
        hyperparameter (listing the mechanism's), or ``label`` (which comes
        from the schema: ``--label`` on the command line).
    """
    for mech, kw in params.items():
        if mech not in SYNTHESIZERS:
            raise KeyError(f"unknown mechanism {mech!r} in a hyperparameter; known: {', '.join(SYNTHESIZERS)}")
        defaults = get_synthesizer(mech).defaults
        settable = [k for k in defaults if k not in _FROM_SCHEMA]
        for k in kw:
            if k in _FROM_SCHEMA and k in defaults:
                raise KeyError(f"the {k} of {mech} is the schema's (give --label instead)")
            if k not in settable:
                raise KeyError(f"unknown hyperparameter {k!r} of {mech}; known: {', '.join(settable) or 'none'}")


def make_synthesizer(name: str, schema: Schema, params: Mapping[str, Any] | None = None) -> Synthesizer:
    """The synthesizer ``name`` as the benchmark runs it.

    Parameters
    ----------
    name : str
        A registered mechanism.
    schema : Schema
        When the mechanism has a ``label`` hyperparameter it gets
        ``schema.label`` (the paper's workload: 2- and 3-way marginals that
        include the label; no label, all 2-way marginals).
    params : mapping, optional
        Hyperparameters overriding the defaults (checked by :func:`check_params`).

    Returns
    -------
    Synthesizer
    """
    cls = get_synthesizer(name)
    params = dict(params or {})
    check_params({name: params})
    if "label" in cls.defaults:
        params["label"] = schema.label
    return cls(**params)


@dataclass(frozen=True)
class _Context:
    """What a worker needs for the trials of one (data set, mechanism) job (pickled once per job)."""

    df: pd.DataFrame
    schema: Schema
    discretizer: str
    params: Mapping[str, Mapping[str, Any]]


def _synthesize_call(ctx: _Context, trial: SynthTrial) -> tuple[pd.DataFrame, dict[str, Any]]:
    """One trial, in a worker: synthesize ``ctx.df`` (a module-level function, pickled by reference)."""
    synth = make_synthesizer(trial.mechanism, ctx.schema, ctx.params.get(trial.mechanism))
    rng = np.random.default_rng(trial.seed)
    res = synthesize_frame(ctx.df, ctx.schema, synth, trial.epsilon, trial.delta, rng,
                           discretizer=make_discretizer(ctx.discretizer), file=trial.dataset)
    return res.frame, dict(res.synthetic.details)


def run_trials(tasks: Sequence[tuple[pd.DataFrame, Schema, Sequence[SynthTrial]]], *, discretizer: str = "privtree",
               time_limit: float = SYNTH_TIME_LIMIT, memory_mb: float = DEFAULT_MEMORY_MB, workers: int = 1,
               params: Mapping[str, Mapping[str, Any]] | None = None,
               on_outcome: Callable[[TrialOutcome], None]) -> None:
    """Run synthesis trials in a :class:`~dpstats.bench.sandbox.WorkerPool` under the limits.

    Parameters
    ----------
    tasks : sequence of tuple
        ``(frame, schema, synth_trials)`` per data set, ``synth_trials`` a
        sequence of :class:`SynthTrial`; the trials of one mechanism on one
        data set form one job.
    discretizer : str
    time_limit, memory_mb : float
        Per-trial limits (a trial over them is ``timeout`` / ``memory``).
    workers : int
        Worker processes.
    params : mapping, optional
        ``mechanism -> {hyperparameter: value}`` overriding the defaults
        (see :func:`make_synthesizer`).
    on_outcome : callable
        Receives each :class:`TrialOutcome` as it arrives (in completion order).
    """
    params = {m: dict(kw) for m, kw in (params or {}).items()}
    check_params(params)
    jobs = []
    for df, schema, trials in tasks:
        ctx = _Context(df, schema, discretizer, params)
        by_mech: dict[tuple[str, str], list[SynthTrial]] = {}
        for t in trials:
            by_mech.setdefault((t.dataset, t.mechanism), []).append(t)
        for (ds, mech), ts in by_mech.items():
            jobs.append(CallJob(_synthesize_call, ctx, tuple(ts), name=f"synth {mech}", instance=ds,
                                corpus="<synth>"))

    def on_result(r: CallResult) -> None:
        ok = r.status == "ok" and isinstance(r.value, tuple) and isinstance(r.value[0], pd.DataFrame)
        message = r.message or ""
        if r.status == "timeout" and not message:
            message = f"exceeded {time_limit:g} s"
        frame, details = r.value if ok else (None, None)
        on_outcome(TrialOutcome(r.item, r.status if ok or r.status != "ok" else "error", float(r.seconds),
                                message, frame, float(r.peak_mb), details))

    with WorkerPool(workers, Limits(time=time_limit, memory_mb=memory_mb)) as pool:
        pool.run(jobs, on_result)


def run_supervised(df: pd.DataFrame, schema: Schema, trial: SynthTrial, *, discretizer: str = "privtree",
                   time_limit: float = SYNTH_TIME_LIMIT, memory_mb: float = DEFAULT_MEMORY_MB,
                   params: Mapping[str, Any] | None = None) -> TrialOutcome:
    """Synthesize one trial in a benchmark worker under the time and memory limits.

    ``params`` are the trial mechanism's hyperparameters (see :func:`make_synthesizer`).
    """
    out: list[TrialOutcome] = []
    run_trials([(df, schema, [trial])], discretizer=discretizer, time_limit=time_limit, memory_mb=memory_mb,
               params={trial.mechanism: dict(params)} if params else None, on_outcome=out.append)
    return out[0]


def run_benchmark(datasets: Sequence[tuple[str, pd.DataFrame, Schema]], mechanisms: Sequence[str],
                  epsilons: Sequence[float], trials: int, *, delta: float = DEFAULT_DELTA,
                  discretizer: str = "privtree", time_limit: float = SYNTH_TIME_LIMIT,
                  memory_mb: float = DEFAULT_MEMORY_MB, workers: int = 1,
                  progress: Callable[[TrialOutcome], None] | None = None,
                  keep_frames: bool = False, params: Mapping[str, Mapping[str, Any]] | None = None,
                  ) -> tuple[pd.DataFrame, dict[tuple[str, str, float], pd.DataFrame]]:
    """Run every trial; return the long table of metric values and (optionally) one synthetic frame per cell.

    ``params`` maps a mechanism to hyperparameters overriding its defaults
    (see :func:`make_synthesizer`); ``progress`` receives each
    :class:`TrialOutcome` (with the synthesizer's ``details``) as it arrives.

    Returns
    -------
    results : DataFrame
        Columns ``dataset, mechanism, epsilon, delta, trial, status, seconds, metric, value, message`` (one
        row per metric; a failed trial has one row with metric ``""`` and its message), in the order
        (data set, mechanism, epsilon, trial, metric) whatever the order the trials finished in.
    frames : dict
        ``(dataset, mechanism, epsilon) -> synthetic frame`` of the lowest-seed successful trial, for the
        figures.
    """
    data = {name: (df, schema) for name, df, schema in datasets}
    bins = {name: metric_bins(df, schema) for name, df, schema in datasets}
    plan = [(name, df, schema, [SynthTrial(name, m, float(e), float(delta), s)
                                for m in mechanisms for e in epsilons for s in range(trials)])
            for name, df, schema in datasets]
    outcomes: dict[SynthTrial, TrialOutcome] = {}
    scored: dict[SynthTrial, dict[str, float]] = {}
    frames: dict[tuple[str, str, float], pd.DataFrame] = {}
    frame_seed: dict[tuple[str, str, float], int] = {}

    def on_outcome(o: TrialOutcome) -> None:
        t = o.trial
        if o.status == "ok" and o.frame is not None:
            df, schema = data[t.dataset]
            scored[t] = evaluate(df, o.frame, schema, bins=bins[t.dataset], seed=t.seed)
            cell = (t.dataset, t.mechanism, t.epsilon)
            if keep_frames and t.seed < frame_seed.get(cell, trials):
                frames[cell], frame_seed[cell] = o.frame, t.seed
        if progress is not None:
            progress(o)
        o.frame = None  # scored: keep only the figures' frames in memory
        outcomes[t] = o

    run_trials([(df, schema, ts) for _, df, schema, ts in plan], discretizer=discretizer, time_limit=time_limit,
               memory_mb=memory_mb, workers=workers, params=params, on_outcome=on_outcome)
    rows: list[dict[str, Any]] = []
    for _, _, _, ts in plan:
        for t in ts:
            out = outcomes[t]
            base = {"dataset": t.dataset, "mechanism": t.mechanism, "epsilon": t.epsilon, "delta": t.delta,
                    "trial": t.seed, "status": out.status, "seconds": round(out.seconds, 3)}
            if t in scored:
                for metric, value in scored[t].items():
                    rows.append({**base, "metric": metric, "value": value, "message": ""})
            else:
                rows.append({**base, "metric": "", "value": math.nan,
                             "message": out.message.splitlines()[0] if out.message else ""})
    cols = ["dataset", "mechanism", "epsilon", "delta", "trial", "status", "seconds", "metric", "value", "message"]
    res = pd.DataFrame(rows)
    for c in cols:
        if c not in res:
            res[c] = "" if c == "message" else math.nan
    return res[cols], frames


def summarize(results: pd.DataFrame) -> pd.DataFrame:
    """Optimal rate and average rank of each mechanism per metric group and overall (the paper's Fig. 1).

    Every metric is higher-is-better. The paper ran every mechanism to
    completion; a mechanism without a successful trial in a combination (a
    time-out, a memory failure, an error) is therefore not ranked there
    rather than ranked last: its ``average_rank`` and ``optimal_rate`` are
    over the ``ranked`` combinations where it has a result, among the
    mechanisms that have one, and ``missing`` counts the others, so that a
    mechanism that timed out is read apart. ``timeouts`` and ``failures``
    count its trials with those statuses over the group's (data set,
    epsilon) cells, and ``median_seconds`` is the median wall time of its
    trials (all statuses).
    """
    ok = results[(results["status"] == "ok") & (results["metric"] != "")]
    mechs = sorted(results["mechanism"].unique())
    means = ok.groupby(["dataset", "epsilon", "metric", "mechanism"])["value"].mean().unstack("mechanism")
    means = means.reindex(columns=mechs)
    ranks = means.rank(axis=1, ascending=False, method="min")
    best = means.eq(means.max(axis=1), axis=0)
    trials = results.drop_duplicates(["dataset", "mechanism", "epsilon", "trial"])
    rows = []
    groups = {m: g for m, g in METRICS.items()}
    for group in list(dict.fromkeys(groups.values())) + ["GT"]:
        sel = ranks.index.get_level_values("metric").isin([m for m, g in groups.items() if g == group or group == "GT"])
        if not sel.any():
            continue
        cells = set(zip(ranks.index.get_level_values("dataset")[sel], ranks.index.get_level_values("epsilon")[sel],
                        strict=True))
        for mech in mechs:
            r = ranks.loc[sel, mech]
            has = r.notna()
            in_cells = np.array([(d, e) in cells for d, e in zip(trials["dataset"], trials["epsilon"], strict=True)],
                                dtype=bool)
            mine = trials[(trials["mechanism"] == mech).to_numpy() & in_cells]
            seconds = mine["seconds"] if "seconds" in mine else pd.Series(dtype=float)
            rows.append({"group": group, "mechanism": mech, "combinations": int(sel.sum()),
                         "ranked": int(has.sum()), "missing": int((~has).sum()),
                         "optimal_rate": float(best.loc[sel, mech][has].mean()) if has.any() else math.nan,
                         "average_rank": float(r[has].mean()) if has.any() else math.nan,
                         "timeouts": int((mine["status"] == "timeout").sum()),
                         "failures": int(mine["status"].isin(["memory", "error"]).sum()),
                         "median_seconds": float(seconds.median()) if len(seconds) else math.nan})
    return pd.DataFrame(rows, columns=["group", "mechanism", "combinations", "ranked", "missing", "optimal_rate",
                                       "average_rank", "timeouts", "failures", "median_seconds"])
