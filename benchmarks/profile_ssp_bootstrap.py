"""Seconds per ``ssp_bootstrap`` trial (linreg) on public instances, and where they go.

Each instance is run once untimed by the profiler (the seconds per trial) and
once under cProfile (the functions with the most own time). Run it as the
benchmark's workers run, with one BLAS thread::

    OPENBLAS_NUM_THREADS=1 PYTHONPATH=. .venv/bin/python benchmarks/profile_ssp_bootstrap.py vv98_fe papke05_mathpnl

``PYTHONPATH`` picks the tree whose ``dpstats`` is measured (an export of an
earlier commit measures that commit). ``--eigh`` also times one symmetric
eigendecomposition of the last bootstrap replicate's matrix with scipy's default
LAPACK driver (``evr``, what ``solve_floor`` calls), with ``evd``, and for the
eigenvalues only: the bootstrap's cost per replicate and what other
formulations would cost.
"""
from __future__ import annotations

import argparse
import cProfile
import pstats
import time
import warnings

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("instances", nargs="+")
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--top", type=int, default=6, help="functions listed per instance")
    ap.add_argument("--eigh", action="store_true", help="also time the eigh of a replicate's matrix by driver")
    args = ap.parse_args()

    from dpstats.algorithms import get
    from dpstats.algorithms.linreg import ssp_bootstrap
    from dpstats.data.corpus import Corpus

    corpus = Corpus.public()
    algo = get("linreg", "ssp_bootstrap")
    for name in args.instances:
        inst = corpus.instance(name)
        data = inst.task_data()

        def trial() -> None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                algo().run(data, inst.facts, args.epsilon, 1e-6, np.random.default_rng(args.seed))

        t0 = time.perf_counter()
        trial()
        seconds = time.perf_counter() - t0
        last: dict[str, np.ndarray] = {}
        solve = ssp_bootstrap.solve_floor

        def keep_last(H: np.ndarray, b: np.ndarray, floor: float) -> np.ndarray:
            last["H"] = (H + H.T) / 2.0
            return solve(H, b, floor)

        ssp_bootstrap.solve_floor = keep_last  # the matrix each replicate factorises, kept for --eigh
        prof = cProfile.Profile()
        try:
            prof.runcall(trial)
        finally:
            ssp_bootstrap.solve_floor = solve
        stats = pstats.Stats(prof)
        total = stats.total_tt  # type: ignore[attr-defined]
        n, d = data.X.shape
        print(f"{name}: n = {n}, d = {d}, epsilon {args.epsilon:g}, seed {args.seed}: {seconds:.2f} s per trial")
        rows = sorted(stats.stats.items(), key=lambda kv: -kv[1][2])  # type: ignore[attr-defined]
        for (file, line, func), (_, ncalls, tottime, _, _) in rows[: args.top]:
            where = f"{file.rsplit('/', 1)[-1]}:{line}({func})" if line else func
            print(f"    {tottime:7.2f} s own ({100 * tottime / total:4.1f} %)  {ncalls:6d} calls  {where}")
        if args.eigh:
            from scipy import linalg

            G = last["H"]
            for label, kw in (("evr (default)", {}), ("evd", {"driver": "evd"}), ("values only", {"eigvals_only": True})):
                t0 = time.perf_counter()
                for _ in range(5):
                    linalg.eigh(G, **kw)
                print(f"    eigh {label}: {1e3 * (time.perf_counter() - t0) / 5:.0f} ms per call")


if __name__ == "__main__":
    main()
