"""Time loading the whole public corpus and computing every baseline.

Target (issue: foundation): at most 30 s on the project's 2-core machine, each
dataset read once. Prints a JSON summary with the slowest instances.

Usage::

    .venv/bin/python benchmarks/bench_corpus.py [--corpus DIR] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import time

from dpstats.ols.baseline import compute_baseline
from dpstats.data.corpus import Corpus, public_corpus_path


def run_once(root: str) -> tuple[float, dict[str, float], int]:
    t0 = time.perf_counter()
    corpus = Corpus(root)
    per: dict[str, float] = {}
    for spec in corpus.specs():
        t = time.perf_counter()
        compute_baseline(corpus.instance(spec.id))
        per[spec.id] = time.perf_counter() - t
    reads = len(corpus._frames)
    return time.perf_counter() - t0, per, reads


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", default=str(public_corpus_path()))
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    totals = []
    per: dict[str, float] = {}
    for _ in range(args.repeat):
        total, per, reads = run_once(args.corpus)
        totals.append(total)
    slowest = sorted(per.items(), key=lambda kv: -kv[1])[:5]
    print(json.dumps({
        "instances": len(per), "datasets_read": reads, "seconds_min": round(min(totals), 2),
        "seconds_all": [round(t, 2) for t in totals], "target_seconds": 30,
        "slowest": {k: round(v, 2) for k, v in slowest},
    }, indent=2))


if __name__ == "__main__":
    main()
