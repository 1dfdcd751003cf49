"""``dpstats bench``: run the benchmark (see :mod:`dpstats.bench.runner`)."""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

from dpstats.bench.runner import DEFAULT_DELTA, DEFAULT_RESULTS, PRESETS, BenchConfig, plan_bench, run_bench
from dpstats.bench.sandbox import FatalJobError
from dpstats.bench.store import Store
from dpstats.data.manifest import TASKS


def _build_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add ``dpstats bench`` to the CLI's sub-commands."""
    presets = "; ".join(f"{p.name}: {p.description}" for p in PRESETS.values())
    p = sub.add_parser(
        "bench", help="run the benchmark (resumable) and store the trials in SQLite",
        description=("Run every algorithm on every instance at every privacy level and seed, each trial in a "
                     "worker process under a time and memory limit, storing each result as it finishes. "
                     "Rerunning the same command resumes an interrupted run. Presets: " + presets + "."),
    )
    p.add_argument("--corpus", metavar="DIR", help="corpus folder (default: the public corpus)")
    p.add_argument("--task", nargs="+", action="extend", choices=TASKS, metavar="T",
                   help="tasks to run (default: sce linreg mean)")
    p.add_argument("--epsilon", nargs="+", action="extend", type=float, metavar="E",
                   help="privacy levels (default: 0.3 1 3 10)")
    p.add_argument("--delta", type=float, help=f"delta (default: {DEFAULT_DELTA:g})")
    p.add_argument("--algorithm", nargs="+", action="extend", metavar="NAME",
                   help="algorithms: registry names or module:object plugins (default: all registered)")
    p.add_argument("--instance", nargs="+", action="extend", metavar="ID", help="instance ids (default: all)")
    p.add_argument("--trials", type=int, metavar="N",
                   help="seeds 0..N-1 per instance and epsilon (default: the corpus's, 10 public / 30 otherwise)")
    p.add_argument("--results", default=DEFAULT_RESULTS, metavar="PATH",
                   help=f"results file, SQLite (default: {DEFAULT_RESULTS})")
    p.add_argument("--workers", type=int, metavar="K", help="local worker processes (default: the CPUs available)")
    p.add_argument("--dask", metavar="ADDRESS",
                   help="run on a Dask cluster: a scheduler address (tcp://host:8786) or local:N")
    p.add_argument("--preset", choices=sorted(PRESETS), help="quick or full (default: full)")
    p.add_argument("--time-limit", type=float, metavar="SECONDS", help="per-trial wall-clock limit (default: 60)")
    p.add_argument("--memory-limit", type=float, metavar="MB", help="per-trial memory limit in MB (default: 4096)")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="progress bar (default: when stderr is a terminal)")
    p.add_argument("--secure", action="store_true",
                   help="draw the Gaussian and Laplace noise with OpenDP's samplers (needs dpstats[secure]); "
                        "trials are then not reproducible bit for bit")
    p.add_argument("--inference", action="store_true",
                   help="run the coverage benchmark: each trial resamples the instance, runs the method and stores "
                        "its 95%% interval beside the non-private one of the study's SE type (default algorithms: "
                        "those with intervals)")
    p.add_argument("--costs-from", metavar="PATH",
                   help="results file of an earlier run: its trial times order a fresh run's jobs longest first "
                        "(the results file's own times come first; read only)")
    p.add_argument("--dry-run", action="store_true", help="print the plan and stop")
    return p


def _config_from_args(args: argparse.Namespace) -> BenchConfig:
    return BenchConfig(
        corpus=args.corpus, tasks=args.task, epsilons=args.epsilon, delta=args.delta, algorithms=args.algorithm,
        instances=args.instance, trials=args.trials, results=args.results, workers=args.workers, dask=args.dask,
        preset=args.preset, time_limit=args.time_limit, memory_mb=args.memory_limit, progress=args.progress,
        secure=bool(getattr(args, "secure", False)), inference=bool(getattr(args, "inference", False)),
        costs_from=getattr(args, "costs_from", None),
    )


def cmd_bench(args: argparse.Namespace) -> int:
    """Handler of ``dpstats bench``: 0 when the run completes (failed trials are results), 130 if interrupted."""
    config = _config_from_args(args)
    if args.dry_run:
        store = Store(config.results) if Path(config.results).is_file() else None
        try:
            plan = plan_bench(config, store)
        finally:
            if store is not None:
                store.close()
        per: Counter[tuple[str, str]] = Counter()
        for j in plan.jobs:
            per[(j.algorithm.task, j.algorithm.name)] += len(j)
        for (task, name), n in sorted(per.items()):
            print(f"{task:7s} {name:40s} {n:7d} trials")
        print(f"{plan.to_run} trials to run ({plan.skipped} of {plan.planned} already stored), "
              f"{len(plan.algorithms)} algorithms, {len(plan.instances)} instances")
        return 0
    try:
        summary = run_bench(config, log=lambda line: print(line, file=sys.stderr, flush=True))
    except KeyboardInterrupt:
        return 130
    except FatalJobError as exc:
        print(f"dpstats: {exc}", file=sys.stderr)
        return 2
    print(summary.line())
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the command(s) of this module."""
    _build_parser(sub).set_defaults(func=cmd_bench)
