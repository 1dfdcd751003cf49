"""Median time per trial of every roster algorithm against the non-private estimate.

For each task, each algorithm runs on a set of public instances (default: the
first instance of that task in each of ``--studies`` studies, spread over the
corpus, plus the largest one) at epsilon = 1, delta = 1e-6, with ``--seeds``
seeds. The reference is the non-private fit on the same data: ``lstsq`` for
sce and linreg (the OLS a researcher would run), the column mean for mean.
Aim (issue: estimators): at most 5x for everything but the inherently iterative
algorithms; every trial within the protocol's 60 s.

Usage::

    .venv/bin/python benchmarks/bench_algorithms.py [--task sce] [--seeds 3] [--studies 8] [--json out.json]
    .venv/bin/python benchmarks/bench_algorithms.py --task sce --instance fetter13_ols --algorithm fwl_score blb_coinpress
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import warnings

import numpy as np

from dpstats.algorithms import list_configurations
from dpstats.data.corpus import Corpus


def _nonprivate(task: str, X: np.ndarray, y: np.ndarray | None) -> None:
    if task == "mean":
        X.mean(axis=0)
    else:
        np.linalg.lstsq(X, y, rcond=None)


def _timed(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def pick_instances(corpus: Corpus, task: str, studies: int) -> list[str]:
    specs = corpus.specs(task)
    first: dict[str, str] = {}
    for s in specs:
        first.setdefault(s.study, s.id)
    ids = list(first.values())
    step = max(1, len(ids) // studies)
    chosen = ids[::step][:studies]
    return chosen


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", nargs="*", default=["sce", "linreg", "mean"])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--studies", type=int, default=8)
    ap.add_argument("--instance", nargs="*", help="explicit instance ids instead of the spread")
    ap.add_argument("--algorithm", nargs="*", help="only these roster entries (default: every one)")
    ap.add_argument("--json", help="write the table as JSON here")
    args = ap.parse_args()
    corpus = Corpus.public()
    rows = []
    for task in args.task:
        ids = [i for i in (args.instance or pick_instances(corpus, task, args.studies)) if corpus.spec(i).task == task]
        insts = [corpus.instance(i) for i in ids]
        for cfg in list_configurations(task):
            if args.algorithm and cfg.name not in args.algorithm:
                continue
            per_inst = []
            meds = []
            worst = 0.0
            for inst in insts:
                data = inst.task_data()
                base = _timed(lambda: _nonprivate(task, data.X, data.y), 5)
                ts = []
                for seed in range(args.seeds):
                    algo = cfg.spec().build()
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        t = time.perf_counter()
                        algo.run(data, inst.facts, 1.0, 1e-6, np.random.default_rng(seed))
                        ts.append(time.perf_counter() - t)
                med = statistics.median(ts)
                meds.append(med)
                worst = max(worst, max(ts))
                per_inst.append(med / max(base, 1e-6))
            rows.append({
                "task": task, "algorithm": cfg.name, "interpretation": cfg.interpretation, "iterative": cfg.cls.iterative,
                "median_ratio_to_ols": round(statistics.median(per_inst), 2),
                "median_trial_seconds": round(statistics.median(meds), 4), "max_trial_seconds": round(worst, 3),
                "instances": len(insts),
            })
            r = rows[-1]
            print(f"{task:7s} {cfg.name:28s} x{r['median_ratio_to_ols']:>9.2f}  median {r['median_trial_seconds']:.4f}s"
                  f"  max {r['max_trial_seconds']:.3f}s"
                  + ("  (iterative)" if cfg.cls.iterative else ""), flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=2)


if __name__ == "__main__":
    main()
