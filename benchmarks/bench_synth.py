"""Time and peak memory of the synthesizers on Adult (or Bank), at epsilon = 1 by default.

Each (mechanism, repeat) runs in a fresh Python process, as the benchmark's
workers do, so the figures include importing JAX and ``mbi`` and every JIT
compilation. The job is the protocol's: :func:`dpstats.synth.pipeline.synthesize_frame`
on the full data set with its public schema, PrivTree discretisation (its
budget share included), epsilon = 1 (``--epsilon``), the benchmark's delta,
and the mechanisms with a ``label`` parameter on the paper's workload with the
schema's label; the GANs (DPGAN, DP-CTGAN, PATE-GAN, PATE-CTGAN; the ``gan``
extra) with their defaults. Each child is killed after ``--timeout`` seconds
of wall clock (default: the protocol's 60 s, ``DEFAULT_TIME_LIMIT``; 0 for
none) and reported as a time-out. Reported per run: wall-clock seconds of the
process and of the synthesis, CPU seconds of the child (user + system) and
its peak resident memory (both from ``os.wait4``, so also for a killed
child), and the 1-minute load average at the end. On a machine shared with
other jobs the wall clock exceeds the CPU time; the CPU time is what the job
itself costs. ``--param name=value`` passes a parameter to every mechanism
that has it (e.g. ``--param round_tol=0``).

Usage::

    .venv/bin/python benchmarks/bench_synth.py [--dataset adult] [--epsilon 1] [--mechanism mst ...] [--repeat 1]
        [--timeout 60] [--param name=value ...] [--metrics] [--json out.json]
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import subprocess
import sys
import tempfile
import time

#: the protocol's per-trial limits (dpstats.bench.sandbox.DEFAULT_TIME_LIMIT / DEFAULT_MEMORY_MB)
TIME_LIMIT, MEMORY_MB = 60.0, 4096.0

CHILD = r"""
import json, resource, sys, time
import numpy as np
from dpstats.synth import get_synthesizer
from dpstats.bench.synth.benchmark import DEFAULT_DELTA
from dpstats.synth.datasets import load_dataset
from dpstats.synth.pipeline import synthesize_frame
name, dataset, seed, eps = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
params, metrics = json.loads(sys.argv[5]), sys.argv[6:] == ["metrics"]
df, schema = load_dataset(dataset)
cls = get_synthesizer(name)
kw = {"label": schema.label} if "label" in cls.defaults else {}
kw.update({k: v for k, v in params.items() if k in cls.defaults})
syn = cls(**kw)
t = time.perf_counter()
res = synthesize_frame(df, schema, syn, eps, DEFAULT_DELTA, np.random.default_rng(seed))
sec = time.perf_counter() - t
ru = resource.getrusage(resource.RUSAGE_SELF)
det = {k: v for k, v in (getattr(syn, "details", None) or {}).items() if k in ("rounds_run", "anneals", "epochs")}
print(json.dumps({"mechanism": name, "dataset": dataset, "rows": len(df), "columns": len(df.columns),
                  "synth_seconds": sec, "epsilon": res.synthetic.epsilon, **det,
                  "ledger_entries": len(res.synthetic.ledger), "peak_mb": ru.ru_maxrss / 1024,
                  **(__import__("dpstats.bench.synth.metrics", fromlist=["evaluate"]).evaluate(df, res.frame, schema)
                     if metrics else {})}))
"""


def run_child(name: str, dataset: str, seed: int, epsilon: float, params: dict[str, object], metrics: bool,
              timeout: float) -> dict[str, object]:
    """One run in a fresh process, killed after ``timeout`` s of wall clock (0: no limit); its CPU and peak RSS.

    The child is reaped with ``os.wait4``, which returns its own resource
    usage (user + system CPU, peak RSS), for a killed child too.
    """
    cmd = [sys.executable, "-c", CHILD, name, dataset, str(seed), repr(epsilon), json.dumps(params)]
    with tempfile.TemporaryFile("w+") as fo, tempfile.TemporaryFile("w+") as fe:
        t = time.perf_counter()
        p = subprocess.Popen(cmd + (["metrics"] if metrics else []), stdout=fo, stderr=fe, text=True)
        status = "ok"
        while True:
            pid, sts, ru = os.wait4(p.pid, os.WNOHANG)
            if pid == p.pid:
                break
            if timeout and time.perf_counter() - t > timeout:
                p.kill()
                pid, sts, ru = os.wait4(p.pid, 0)
                status = "timeout"
                break
            time.sleep(0.05)
        p.returncode = os.waitstatus_to_exitcode(sts)      # reaped here: keep Popen from waiting again
        wall = time.perf_counter() - t
        fo.seek(0)
        fe.seek(0)
        out, err = fo.read(), fe.read()
    rec: dict[str, object] = {"mechanism": name, "dataset": dataset, "epsilon_target": epsilon, "seed": seed,
                              "status": status, "wall_seconds": wall, "load": os.getloadavg()[0]}
    if status == "ok" and p.returncode:
        rec.update(status="error", message=(err.strip().splitlines() or ["?"])[-1])
    elif status == "ok":
        rec.update(json.loads(out.strip().splitlines()[-1]))
    rec.update(cpu_seconds=ru.ru_utime + ru.ru_stime, peak_mb=ru.ru_maxrss / 1024)
    return rec


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="adult")
    ap.add_argument("--mechanism", nargs="+", default=["mst", "aim", "mwem_pgm", "privbayes", "fem", "rap", "kamino",
                                                         "ron_gauss",
                                                         "dpgan", "dpctgan", "pategan", "patectgan"])
    ap.add_argument("--metrics", action="store_true",
                    help="also the paper's metrics of each synthetic table (computed after the timing)")
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=TIME_LIMIT,
                    help=f"kill a run after this many wall-clock seconds (default {TIME_LIMIT:g}, the protocol's; "
                         "0: no limit)")
    ap.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                    help="a parameter for every mechanism that has it (a Python literal)")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    params = {k: ast.literal_eval(v) for k, v in (a.split("=", 1) for a in args.param)}
    rows = []
    print("| mechanism | ε | status | wall s (process) | wall s (synthesize) | CPU s | peak MB | load |")
    print("|---|---|---|---|---|---|---|---|")
    for name in args.mechanism:
        for seed in range(args.repeat):
            rec = run_child(name, args.dataset, seed, args.epsilon, params, args.metrics, args.timeout)
            rows.append(rec)
            syn = f"{rec['synth_seconds']:.1f}" if "synth_seconds" in rec else "–"
            status = rec["status"] if rec["status"] != "error" else f"error: {rec.get('message', '')}"
            print(f"| {name} | {args.epsilon:g} | {status} | {rec['wall_seconds']:.1f} | {syn} | "
                  f"{rec.get('cpu_seconds', float('nan')):.1f} | {rec.get('peak_mb', float('nan')):.0f} | "
                  f"{rec['load']:.1f} |"
                  + "".join(f" {m} {rec[m]:.3f} |" for m in ("ind", "pair", "coracc", "f1") if m in rec), flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
