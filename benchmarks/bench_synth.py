"""Time and peak memory of the marginal-based and GAN synthesizers on Adult (or Bank) at epsilon = 1.

Each (mechanism, repeat) runs in a fresh Python process, as the benchmark's
workers do, so the figures include importing JAX and ``mbi`` and every JIT
compilation. The job is the protocol's: :func:`dpstats.synth.pipeline.synthesize_frame`
on the full data set with its public schema, PrivTree discretisation (its
budget share included), epsilon = 1, the benchmark's delta, and AIM and
MWEM-PGM on the paper's workload with the schema's label; the GANs (DPGAN,
DP-CTGAN, PATE-GAN, PATE-CTGAN; the ``gan`` extra) with their defaults and no
time limit (in the benchmark, past 60 s a run is a time-out). Reported per run:
wall-clock seconds, CPU seconds of the child (user + system) and its peak
resident memory (``ru_maxrss``). On a machine shared with other jobs the
wall clock exceeds the CPU time; the CPU time is what the job itself costs.

Usage::

    .venv/bin/python benchmarks/bench_synth.py [--dataset adult] [--mechanism mst ...] [--repeat 1] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

CHILD = r"""
import json, resource, sys, time
import numpy as np
from dpstats.synth import get_synthesizer
from dpstats.bench.synth.benchmark import DEFAULT_DELTA
from dpstats.synth.datasets import load_dataset
from dpstats.synth.pipeline import synthesize_frame
name, dataset, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
df, schema = load_dataset(dataset)
cls = get_synthesizer(name)
kw = {"label": schema.label} if "label" in cls.defaults else {}
t = time.perf_counter()
res = synthesize_frame(df, schema, cls(**kw), 1.0, DEFAULT_DELTA, np.random.default_rng(seed))
sec = time.perf_counter() - t
ru = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"mechanism": name, "dataset": dataset, "rows": len(df), "columns": len(df.columns),
                  "synth_seconds": sec, "epsilon": res.synthetic.epsilon,
                  "ledger_entries": len(res.synthetic.ledger), "peak_mb": ru.ru_maxrss / 1024,
                  **(__import__("dpstats.bench.synth.metrics", fromlist=["evaluate"]).evaluate(df, res.frame, schema)
                     if sys.argv[4:] == ["metrics"] else {})}))
"""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="adult")
    ap.add_argument("--mechanism", nargs="+", default=["mst", "aim", "mwem_pgm", "privbayes", "fem", "rap", "kamino",
                                                         "ron_gauss",
                                                         "dpgan", "dpctgan", "pategan", "patectgan"])
    ap.add_argument("--metrics", action="store_true",
                    help="also the paper's metrics of each synthetic table (computed after the timing)")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    rows = []
    print("| mechanism | rows x cols | wall s (process) | wall s (synthesize) | CPU s | peak MB |")
    print("|---|---|---|---|---|---|")
    for name in args.mechanism:
        for seed in range(args.repeat):
            t = time.perf_counter()
            p = subprocess.run([sys.executable, "-c", CHILD, name, args.dataset, str(seed)]
                               + (["metrics"] if args.metrics else []),
                               capture_output=True, text=True)
            wall = time.perf_counter() - t
            if p.returncode:
                print(f"| {name} | failed: {p.stderr.strip().splitlines()[-1]} |||||")
                continue
            rec = json.loads(p.stdout.strip().splitlines()[-1])
            import resource

            ru = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = ru.ru_utime + ru.ru_stime - sum(r["cpu_seconds"] for r in rows)
            rec.update(wall_seconds=wall, cpu_seconds=cpu)
            rows.append(rec)
            print(f"| {name} | {rec['rows']} x {rec['columns']} | {wall:.1f} | {rec['synth_seconds']:.1f} | "
                  f"{cpu:.1f} | {rec['peak_mb']:.0f} |"
                  + "".join(f" {m} {rec[m]:.3f} |" for m in ("ind", "pair", "coracc", "f1") if m in rec), flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
