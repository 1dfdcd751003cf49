"""Measure the benchmark harness: overhead per trial, Dask speed-up, wall time of whole runs.

Usage (from the repository root)::

    python benchmarks/bench_harness.py                 # overhead and Dask speed-up (a few minutes)
    python benchmarks/bench_harness.py --overhead      # only the overhead
    python benchmarks/bench_harness.py --dask          # only the Dask speed-up
    python benchmarks/bench_harness.py --preset quick  # wall time of `dpstats bench --preset quick`
    python benchmarks/bench_harness.py --preset full   # wall time of the full public benchmark
    python benchmarks/bench_harness.py --preset quick --keep results/quick.sqlite
    python benchmarks/bench_harness.py --estimate-full results/quick.sqlite  # extrapolate the full run

Overhead
    Every algorithm of the roster on one instance per task (a small and a
    medium setting), the same trials (epsilon 1, seeds 0..T-1) run (a) in a
    plain loop in this process, with the instances already loaded, and (b)
    by ``run_bench`` with one worker process, scoring and storing every trial
    in SQLite. The overhead is ``wall(b) / wall(a) - 1``: starting and
    stopping the worker, supervision, scoring, messages, commits. The
    instances are loaded before (b) too, so that the one-off cost of loading
    an instance (reported separately) is not spread over the trials.

Dask speed-up
    The same CPU-bound trials (``tests.plugins_hostile:BusyMean``: 0.1 CPU
    seconds of pure-Python work per trial, on 8 public mean instances) on a Dask
    ``LocalCluster`` of 1 and of 2 worker processes, each first warmed up
    (trial processes started, instances loaded); best of 3 runs each, since
    the machine may be shared. Speed-up = wall(1) / wall(2). The same with
    local worker processes shows what the machine allowed at the time.

Wall time of a preset
    ``run_bench`` with the preset on the public corpus, all algorithms, local
    workers (one per CPU), into a fresh results file; the wall time includes
    loading every instance and computing its baseline.
"""

from __future__ import annotations

import argparse
import io
import math
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from dpstats.bench import runner as R  # noqa: E402
from dpstats.data.corpus import public_corpus_path  # noqa: E402
from dpstats.bench.model import load_problem  # noqa: E402
from dpstats.bench.trial import execute  # noqa: E402

SETTINGS = {
    "small (Mroz 1987, n = 428-753)": {"sce": "mroz87_lwage", "linreg": "mroz87_lwage_linreg",
                                       "mean": "mean_mroz87_lwage"},
    "medium (Card 1995, n = 2040-3010)": {"sce": "card95_ols_full", "linreg": "card95_ols_full_linreg",
                                          "mean": "mean_card95_ols_full"},
}


def machine() -> str:
    import platform

    import psutil

    return (f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
            f"{psutil.virtual_memory().total / 2**30:.0f} GB, Python {platform.python_version()}, "
            f"load average {os.getloadavg()[0]:.2f}")


def overhead(trials: int) -> None:
    """Every roster algorithm on one instance per task: a plain loop against ``run_bench`` with one worker."""
    from dpstats.algorithms import list_configurations

    root = str(public_corpus_path())
    print(f"\n## Harness overhead (every algorithm, {trials} trials each at epsilon 1, one worker)\n")
    print("| instances | trials | algorithm time s | plain loop s | harness s | overhead | ms per trial |")
    print("|---|---|---|---|---|---|---|")
    for label, ids in SETTINGS.items():
        algos = {task: list_configurations(task) for task in ids}
        t0 = time.perf_counter()
        problems = {task: load_problem(root, iid) for task, iid in ids.items()}  # forked workers inherit them
        load_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        seconds = 0.0
        n = 0
        for task, problem in problems.items():
            for cfg in algos[task]:
                for seed in range(trials):
                    seconds += execute(cfg.spec(), problem, 1.0, 1e-6, seed)[3]
                    n += 1
        loop = time.perf_counter() - t0
        with tempfile.TemporaryDirectory() as tmp:
            s = R.run_bench(R.BenchConfig(corpus=root, results=f"{tmp}/r.sqlite", instances=list(ids.values()),
                                          epsilons=[1.0], trials=trials, workers=1, progress=False),
                            out=io.StringIO())
        assert s.ran == n, (s.ran, n)
        print(f"| {label} | {n} | {seconds:.2f} | {loop:.2f} | {s.wall_seconds:.2f} | "
              f"{100 * (s.wall_seconds / loop - 1):+.1f} % | {1000 * (s.wall_seconds - loop) / n:.2f} |")
        print(f"\n(loading the {label.split(' (')[0]} instances with their baselines, once per worker: {load_s:.2f} s)\n")


def _mean_instances(k: int) -> list[str]:
    from dpstats.data.corpus import Corpus

    return [s.id for s in Corpus(public_corpus_path()).specs("mean")][:k]


def dask_speedup(seeds: int, repeats: int) -> None:
    """Best of ``repeats`` wall times on warm LocalClusters of 1 and 2 workers, then the same locally."""
    from distributed import LocalCluster

    from tests.plugins_hostile import BusyMean

    root = str(public_corpus_path())
    ids = _mean_instances(8)
    algo = ["tests.plugins_hostile:BusyMean"]
    work = BusyMean.defaults["work"].value
    n = len(ids) * 2 * seeds
    print(f"\n## Speed-up ({n} trials of {work:g} CPU-seconds on {len(ids)} mean instances, best of {repeats})\n")

    def measure(label: str, **where) -> float:
        best = math.inf
        for r in range(repeats):
            with tempfile.TemporaryDirectory() as tmp:
                s = R.run_bench(R.BenchConfig(corpus=root, algorithms=algo, tasks=["mean"], instances=ids,
                                              results=f"{tmp}/r.sqlite", epsilons=[1.0, 10.0], trials=seeds,
                                              progress=False, **where), out=io.StringIO())
            busy = s.trial_seconds / (s.workers * s.wall_seconds)
            print(f"- {label}, run {r + 1}: {s.wall_seconds:.1f} s for {s.ran} trials; workers running trials "
                  f"{100 * busy:.0f} % of the time; load average {os.getloadavg()[0]:.2f}")
            best = min(best, s.wall_seconds)
        return best

    walls = {}
    for workers in (1, 2):
        with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None) as cl:
            # warm up: start each worker's trial process and load the instances
            with tempfile.TemporaryDirectory() as tmp:
                R.run_bench(R.BenchConfig(corpus=root, algorithms=algo, tasks=["mean"], instances=ids,
                                          results=f"{tmp}/w.sqlite", epsilons=[0.5], trials=4, progress=False,
                                          dask=cl.scheduler_address), out=io.StringIO())
            walls[workers] = measure(f"Dask, {workers} worker(s)", dask=cl.scheduler_address)
    print(f"\nSpeed-up of 2 Dask workers over 1: {walls[1] / walls[2]:.2f}x (best wall times {walls[1]:.1f} s and "
          f"{walls[2]:.1f} s)\n")
    for iid in ids:  # forked local workers inherit the loaded instances
        load_problem(root, iid)
    local = {w: measure(f"local, {w} worker(s)", workers=w) for w in (1, 2)}
    print(f"\nSpeed-up of 2 local workers over 1 (what the machine allows meanwhile): {local[1] / local[2]:.2f}x")


def preset_wall(preset: str, workers: int | None, keep: str | None = None) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        results = keep or f"{tmp}/r.sqlite"
        if keep and Path(keep).exists():
            raise SystemExit(f"{keep} exists; the wall time needs a fresh results file")
        t0 = time.perf_counter()
        s = R.run_bench(R.BenchConfig(results=results, preset=preset, workers=workers, progress=False))
        total = time.perf_counter() - t0
    print(f"\n## Preset {preset}\n\n{s.ran} trials, {s.workers} workers: {total:.0f} s wall "
          f"({s.wall_seconds:.0f} s running trials; sum of trial times {s.trial_seconds:.0f} s); "
          f"statuses {s.counts}")


def estimate_full(path: str, workers: int) -> None:
    """Extrapolate the full public benchmark's wall time from a results file of the public corpus.

    Each trial of the full plan is charged the mean ``seconds`` of its algorithm on the same instance
    in the file, or else the algorithm's mean over the file; the sum is divided by the workers.
    Loading instances and the harness overhead are not included.
    """
    from collections import Counter

    from dpstats.bench.store import read_trials

    df = read_trials(path)
    per_inst = df.groupby(["task", "algorithm", "instance"]).seconds.mean().to_dict()
    per_alg = df.groupby(["task", "algorithm"]).seconds.mean().to_dict()
    plan = R.plan_bench(R.BenchConfig(preset="full"))
    total = 0.0
    missing: Counter[str] = Counter()
    for job in plan.jobs:
        key = (job.algorithm.task, job.algorithm.name)
        sec = per_inst.get(key + (job.instance,), per_alg.get(key))
        if sec is None:
            missing[job.algorithm.name] += len(job)
            continue
        total += sec * len(job)
    print(f"\n## Estimated full public benchmark\n\n{plan.to_run} trials ({plan.trials} per instance and epsilon): "
          f"about {total / workers / 60:.0f} min of trials on {workers} workers (sum {total / 60:.0f} CPU-min), "
          f"from the trial times in {path}" + (f"; no times for {dict(missing)}" if missing else ""))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--overhead", action="store_true")
    ap.add_argument("--dask", action="store_true")
    ap.add_argument("--preset", choices=("quick", "full"))
    ap.add_argument("--trials", type=int, default=40, help="trials per overhead row")
    ap.add_argument("--seeds", type=int, default=10, help="seeds per instance and epsilon for the speed-up")
    ap.add_argument("--repeats", type=int, default=3, help="repetitions of each speed-up measurement (best kept)")
    ap.add_argument("--workers", type=int, help="local workers for --preset (default: one per CPU)")
    ap.add_argument("--keep", metavar="PATH", help="with --preset: keep the results file at PATH")
    ap.add_argument("--estimate-full", metavar="PATH",
                    help="estimate the full public benchmark's wall time from the trial times in a results file")
    a = ap.parse_args()
    if a.estimate_full:
        estimate_full(a.estimate_full, a.workers or os.cpu_count() or 1)
        return
    if not (a.overhead or a.dask or a.preset):
        a.overhead = a.dask = True
    print(f"Machine: {machine()}")
    if a.overhead:
        overhead(a.trials)
    if a.dask:
        dask_speedup(a.seeds, a.repeats)
    if a.preset:
        preset_wall(a.preset, a.workers, a.keep)


if __name__ == "__main__":
    main()
