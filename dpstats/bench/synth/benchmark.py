"""The synthetic-data benchmark behind ``dpstats synth bench`` (Tao et al. 2021).

For every (data set, mechanism, epsilon, trial) a supervised child process
synthesizes the data set under the protocol's limits (60 s wall clock, 4 GB
of memory growth: :data:`dpstats.bench.trial.DEFAULT_TIME_LIMIT`,
:data:`~dpstats.bench.trial.DEFAULT_MEMORY_MB`); a trial that exceeds them
is recorded as ``timeout`` or ``memory``, never given more. The parent then
scores the synthetic table with :func:`dpstats.bench.synth.metrics.evaluate`.

Summaries follow the paper's Fig. 1: a mechanism is *optimal* for a (data
set, epsilon, metric) when its mean over trials is the best; its *optimal
rate* is the share of those combinations where it is optimal, and its
*average rank* the mean of its ranks (1 = best, ties share the lower rank),
per metric group and overall ("GT").
"""

from __future__ import annotations

import math
import multiprocessing as mp
import os
import resource
import time
import traceback
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd

from dpstats.bench.trial import AS_FACTOR, DEFAULT_MEMORY_MB, DEFAULT_TIME_LIMIT
from dpstats.synth import get_synthesizer
from dpstats.bench.synth.metrics import METRICS, evaluate, metric_bins
from dpstats.synth.pipeline import make_discretizer, synthesize_frame
from dpstats.synth.schema import Schema

__all__ = ["SynthTrial", "TrialOutcome", "run_supervised", "run_benchmark", "summarize", "DEFAULT_EPSILONS",
           "DEFAULT_DELTA"]

DEFAULT_EPSILONS = (0.1, 1.0, 10.0)
#: delta of every trial (the paper's epsilons are paired with a small delta; n is at most 3e5 here).
DEFAULT_DELTA = 1e-9


@dataclass(frozen=True)
class SynthTrial:
    dataset: str
    mechanism: str
    epsilon: float
    delta: float
    seed: int


@dataclass
class TrialOutcome:
    trial: SynthTrial
    status: str                      # ok, timeout, memory, error
    seconds: float
    message: str = ""
    frame: pd.DataFrame | None = None


def _child(conn: Any, df: pd.DataFrame, schema: Schema, trial: SynthTrial, discretizer: str,
           memory_mb: float) -> None:
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        with open(f"/proc/{os.getpid()}/statm") as f:
            vms = int(f.read().split()[0]) * resource.getpagesize()
        limit = vms + int(AS_FACTOR * memory_mb * 2**20)
        resource.setrlimit(resource.RLIMIT_AS, (limit if hard == resource.RLIM_INFINITY else min(limit, hard), hard))
    except (OSError, ValueError):  # pragma: no cover - platforms without /proc or RLIMIT_AS
        pass
    t0 = time.monotonic()
    try:
        synth = get_synthesizer(trial.mechanism)()
        rng = np.random.default_rng(trial.seed)
        res = synthesize_frame(df, schema, synth, trial.epsilon, trial.delta, rng,
                               discretizer=make_discretizer(discretizer), file=trial.dataset)
        conn.send(("ok", time.monotonic() - t0, "", res.frame))
    except MemoryError:
        conn.send(("memory", time.monotonic() - t0, "MemoryError", None))
    except BaseException as exc:  # noqa: BLE001 - reported, not raised
        conn.send(("error", time.monotonic() - t0, f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=3)}",
                   None))
    finally:
        conn.close()


def run_supervised(df: pd.DataFrame, schema: Schema, trial: SynthTrial, *, discretizer: str = "privtree",
                   time_limit: float = DEFAULT_TIME_LIMIT, memory_mb: float = DEFAULT_MEMORY_MB) -> TrialOutcome:
    """Synthesize one trial in a forked child under the time and memory limits."""
    ctx = mp.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(child, df, schema, trial, discretizer, memory_mb), daemon=True)
    t0 = time.monotonic()
    proc.start()
    child.close()
    try:
        if parent.poll(time_limit):
            try:
                status, seconds, message, frame = parent.recv()
            except EOFError:
                proc.join(5)
                code = proc.exitcode
                status, seconds, message, frame = ("memory" if code and code < 0 else "error",
                                                   time.monotonic() - t0, f"worker died (exit {code})", None)
            return TrialOutcome(trial, status, seconds, message, frame)
        return TrialOutcome(trial, "timeout", time.monotonic() - t0, f"exceeded {time_limit:g} s")
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join(5)
        parent.close()


def run_benchmark(datasets: Sequence[tuple[str, pd.DataFrame, Schema]], mechanisms: Sequence[str],
                  epsilons: Sequence[float], trials: int, *, delta: float = DEFAULT_DELTA,
                  discretizer: str = "privtree", time_limit: float = DEFAULT_TIME_LIMIT,
                  memory_mb: float = DEFAULT_MEMORY_MB, progress: Callable[[TrialOutcome], None] | None = None,
                  keep_frames: bool = False) -> tuple[pd.DataFrame, dict[tuple[str, str, float], pd.DataFrame]]:
    """Run every trial; return the long table of metric values and (optionally) one synthetic frame per cell.

    Returns
    -------
    results : DataFrame
        Columns ``dataset, mechanism, epsilon, delta, trial, status, seconds, metric, value`` (one row per
        metric; a failed trial has one row with metric ``""`` and its message in ``status``).
    frames : dict
        ``(dataset, mechanism, epsilon) -> synthetic frame`` of the first successful trial, for the figures.
    """
    rows: list[dict[str, Any]] = []
    frames: dict[tuple[str, str, float], pd.DataFrame] = {}
    for name, df, schema in datasets:
        bins = metric_bins(df, schema)
        for mech in mechanisms:
            for eps in epsilons:
                for seed in range(trials):
                    t = SynthTrial(name, mech, float(eps), float(delta), seed)
                    out = run_supervised(df, schema, t, discretizer=discretizer, time_limit=time_limit,
                                         memory_mb=memory_mb)
                    base = {"dataset": name, "mechanism": mech, "epsilon": float(eps), "delta": float(delta),
                            "trial": seed, "status": out.status, "seconds": round(out.seconds, 3)}
                    if out.status == "ok" and out.frame is not None:
                        for metric, value in evaluate(df, out.frame, schema, bins=bins, seed=seed).items():
                            rows.append({**base, "metric": metric, "value": value})
                        if keep_frames:
                            frames.setdefault((name, mech, float(eps)), out.frame)
                    else:
                        rows.append({**base, "metric": "", "value": math.nan,
                                     "status": out.status, "message": out.message.splitlines()[0]
                                     if out.message else ""})
                    if progress is not None:
                        progress(out)
    cols = ["dataset", "mechanism", "epsilon", "delta", "trial", "status", "seconds", "metric", "value", "message"]
    res = pd.DataFrame(rows)
    for c in cols:
        if c not in res:
            res[c] = "" if c == "message" else math.nan
    return res[cols], frames


def summarize(results: pd.DataFrame) -> pd.DataFrame:
    """Optimal rate and average rank of each mechanism per metric group and overall (the paper's Fig. 1).

    Every metric is higher-is-better. A mechanism with no successful trial
    in a combination ranks last there.
    """
    ok = results[(results["status"] == "ok") & (results["metric"] != "")]
    mechs = sorted(results["mechanism"].unique())
    means = ok.groupby(["dataset", "epsilon", "metric", "mechanism"])["value"].mean().unstack("mechanism")
    means = means.reindex(columns=mechs)
    ranks = means.rank(axis=1, ascending=False, method="min").fillna(len(mechs))
    best = means.eq(means.max(axis=1), axis=0)
    rows = []
    groups = {m: g for m, g in METRICS.items()}
    for group in list(dict.fromkeys(groups.values())) + ["GT"]:
        sel = ranks.index.get_level_values("metric").isin([m for m, g in groups.items() if g == group or group == "GT"])
        if not sel.any():
            continue
        for mech in mechs:
            rows.append({"group": group, "mechanism": mech, "combinations": int(sel.sum()),
                         "optimal_rate": float(best.loc[sel, mech].mean()),
                         "average_rank": float(ranks.loc[sel, mech].mean())})
    return pd.DataFrame(rows, columns=["group", "mechanism", "combinations", "optimal_rate", "average_rank"])
