"""Cost of secure mode: OpenDP's samplers against numpy's, per draw and per release.

CPU times of this process (OpenDP samples in the calling thread), best of
``--repeat`` runs each:

- ``10^4 draws``: one call ``normal(0, 1, size=10_000)`` / ``laplace(...)`` on
  ``numpy.random.default_rng()`` and on :class:`dpstats.privacy.randomness.SecureGenerator`;
- ``one call``: a single scalar draw (``normal(0.0, 2.5)``), which is what
  most algorithms make a few times per release (the OpenDP measurement is
  built per distinct scale);
- ``release``: one release of each economist-API default algorithm
  (``fwl_score``, ``dpnewton``, ``adaptive_whiten``) on the Mroz (1987)
  instances of the public corpus, in both modes.

Usage::

    .venv/bin/python benchmarks/bench_secure.py [--repeat 5] [--releases 30] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

from dpstats.privacy.randomness import SecureGenerator


def _best(fn, repeat: int) -> float:
    """Best CPU time of this process over ``repeat`` runs (robust to other jobs on a shared machine)."""
    times = []
    for _ in range(repeat):
        t = time.process_time()
        fn()
        times.append(time.process_time() - t)
    return min(times)


def draws(repeat: int) -> list[dict]:
    """Seconds per 10^4 draws and per scalar call, numpy vs secure."""
    rows = []
    for method in ("normal", "laplace"):
        for mode, make in (("numpy", np.random.default_rng), ("secure", SecureGenerator)):
            g = make()
            draw = getattr(g, method)
            bulk = _best(lambda: draw(0.0, 1.0, size=10_000), repeat)
            one = _best(lambda: [draw(0.0, 2.5) for _ in range(1000)], repeat) / 1000
            rows.append({"method": method, "mode": mode, "seconds_per_1e4": bulk, "seconds_per_call": one})
    return rows


def releases(n: int, repeat: int) -> list[dict]:
    """Seconds per release of the three API defaults, numpy vs secure (a fresh generator per release)."""
    from dpstats.algorithms import get
    from dpstats.data.corpus import Corpus
    from dpstats.bench.model import Problem

    corpus = Corpus.public()
    rows = []
    for task, name, iid, eps in (("sce", "fwl_score", "mroz87_lwage", 1.0),
                                 ("linreg", "dpnewton", "mroz87_lwage_linreg", 1.0),
                                 ("mean", "adaptive_whiten", "mean_mroz87_lwage", 1.0)):
        p = Problem.from_instance(corpus.instance(iid))
        cls = get(task, name)
        out = {"algorithm": name, "instance": iid}
        for mode, make in (("numpy", np.random.default_rng), ("secure", SecureGenerator)):
            out[mode] = _best(lambda: [cls().run(p.data, p.facts, eps, 1e-6, make()) for _ in range(n)], repeat) / n
        rows.append(out)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--releases", type=int, default=30, help="releases per timing (0: skip)")
    ap.add_argument("--json", metavar="PATH")
    args = ap.parse_args()
    load = os.getloadavg()[0]
    res = {"load_average": load, "draws": draws(args.repeat)}
    print(f"load average {load:.1f}; CPU time, best of {args.repeat}")
    print(f"{'method':8s} {'mode':7s} {'10^4 draws':>12s} {'one call':>10s}")
    for r in res["draws"]:
        print(f"{r['method']:8s} {r['mode']:7s} {r['seconds_per_1e4'] * 1e3:9.2f} ms "
              f"{r['seconds_per_call'] * 1e6:7.1f} us")
    if args.releases:
        res["releases"] = releases(args.releases, max(1, args.repeat // 2))
        print(f"{'algorithm':16s} {'numpy':>9s} {'secure':>9s}")
        for r in res["releases"]:
            print(f"{r['algorithm']:16s} {r['numpy'] * 1e3:6.1f} ms {r['secure'] * 1e3:6.1f} ms")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(res, f, indent=2)


if __name__ == "__main__":
    main()
