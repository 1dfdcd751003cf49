"""Why an sce interval is infinite: the interval checks of each draw, by instance and by sample size.

Runs an sce method with its ``interval_params`` on the coverage benchmark's
draws (``resample(instance, s)``, release seed ``s``, as ``dpstats bench
--inference`` does) of every public sce instance (fetter13_ols aside, about
20 s a draw) and counts, per instance, the draws whose interval is finite and
those made infinite by each check (``interval_check`` of the release:
``failed standardisation (Gram)``, ``regression dilution``, ...). It prints
the counts per instance, then per band of ``n``, and the coverage and the
confident misses (a finite interval more than 10 non-private HC0 standard
errors of the draw from the population value) of the finite ones.

Parameters given with ``--param name=value`` override the interval
configuration, to see what a setting costs and what it guards against (for
example ``--param ridge=2``). ``--oracle-nuisance`` measures what a perfect
nuisance would be worth: the projections of ``x`` and ``y`` on the controls
(and the pilot) come from the exact Gram of the rows the noisy Gram was
computed from, and the interval's nuisance terms (the simulated nuisance
error, the regression dilution, the eigenvalue floor's bias) are 0. It reads
the data outside any mechanism: a measurement, never a release. An instance falls in the band of ``n`` of its
first draw (cluster resampling moves ``n`` a little from draw to draw).

Usage::

    python benchmarks/interval_checks.py --epsilon 1 --draws 10
    python benchmarks/interval_checks.py --epsilon 1 --draws 10 --instance engel_food mroz87_lwage --json out.json
    python benchmarks/interval_checks.py --epsilon 1 --draws 10 --oracle-nuisance
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import warnings
from concurrent.futures import ProcessPoolExecutor

import numpy as np

BANDS = (0, 1_000, 3_000, 10_000, math.inf)


def _value(text: str):
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    try:
        return int(text)
    except ValueError:
        return float(text)


_ORACLE: list[bool] = []


def _oracle_nuisance() -> None:
    """Rebind fwl_score's stage-1 nuisance to the exact Gram (a measurement: see the module docstring); once a process."""
    if _ORACLE:
        return
    _ORACLE.append(True)
    from dpstats.algorithms.sce import _fwl_nuisance as nuis
    from dpstats.algorithms.sce import _fwl_standardise as stdz
    from dpstats.algorithms.sce import fwl_score as fwl

    exact: list[np.ndarray] = []
    gram, scatter = stdz.noisy_gram, nuis.noisy_symmetric

    def noisy_gram(A, sigma, rng, **kw):
        exact[:] = [A.T @ A]
        return gram(A, sigma, rng, **kw)

    def noisy_symmetric(M, sigma, rng, **kw):
        full = np.zeros((M.shape[0] + 1,) * 2)
        full[1:, 1:] = M
        exact[:] = [full]
        return scatter(M, sigma, rng, **kw)

    def exact_pilot(G, ia, gx, gy, sig_G, p, ridge):
        floor_ev = ridge * sig_G * math.sqrt(p + 1)
        Gt = exact[0].copy()
        Gt[0, 0] = G[0, 0]
        gam, dlt, _, _ = nuis._nuisance(Gt, ia, gx, gy, 1e-9 * max(G[0, 0], 1.0))
        Dx = float(Gt[gx, gx] - gam @ Gt[ia, gx])
        return floor_ev, gam, dlt, 0, Dx, float((Gt[gx, gy] - gam @ Gt[ia, gy]) / Dx), math.inf

    stdz.noisy_gram, nuis.noisy_symmetric, nuis._pilot = noisy_gram, noisy_symmetric, exact_pilot
    fwl.nuisance_spread = lambda P, theta, T, rng, n_sim=200: (0.0, 0.0)
    fwl._floor_sensitivity = lambda P: 0.0


def _draws(args: tuple[str, str, float, int, dict, bool]) -> list[dict]:
    iid, algorithm, eps, draws, params, oracle = args
    if oracle:
        _oracle_nuisance()
    from dpstats.algorithms import get
    from dpstats.bench.inference import inference_problem, resample
    from dpstats.bench.model import Problem
    from dpstats.data.corpus import Corpus

    inst = Corpus.public().instance(iid)
    truth = float(inference_problem(inst).truth[0])
    cls = get("sce", algorithm)
    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for s in range(draws):
            pr = Problem.from_instance(resample(inst, s))
            X, y = np.asarray(pr.data.X, float), np.asarray(pr.data.y, float)
            j = pr.facts.coef_index
            A = np.linalg.pinv(X.T @ X)
            e = y - X @ (A @ X.T @ y)
            np_se = float(math.sqrt(max((A @ (X.T * e**2) @ X @ A)[j, j], 0.0)))
            rel = cls(**{**cls.interval_params, **params}).run(pr.data, pr.facts, eps, 1e-6, np.random.default_rng(s))
            se = float(np.asarray(rel.std_error).reshape(-1)[0])
            lo, hi = (float(v[0]) for v in rel.conf_int()) if math.isfinite(se) else (-math.inf, math.inf)
            rows.append({"instance": iid, "draw": s, "n": X.shape[0], "check": rel.details.get("interval_check"),
                         "finite": math.isfinite(se), "low": lo, "high": hi, "truth": truth, "np_se": np_se})
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--draws", type=int, default=10)
    ap.add_argument("--algorithm", default="fwl_score")
    ap.add_argument("--instance", nargs="*", help="sce instance ids (default: every public one but fetter13_ols)")
    ap.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                    help="override a hyperparameter of the interval configuration")
    ap.add_argument("--workers", type=int, default=2, help="processes (1: in this process)")
    ap.add_argument("--json", help="also write the per-draw rows to this file")
    ap.add_argument("--oracle-nuisance", action="store_true",
                    help="the nuisance from the exact Gram, its interval terms 0 (a measurement; fwl_score only)")
    a = ap.parse_args(argv)
    params = {}
    for item in a.param:
        name, sep, value = item.partition("=")
        if not sep:
            ap.error(f"--param {item!r}: write NAME=VALUE, e.g. --param gram_guard=false")
        params[name] = _value(value)
    from dpstats.data.corpus import Corpus

    ids = a.instance or [i.id for i in Corpus.public().instances() if i.task == "sce" and i.id != "fetter13_ols"]
    if a.oracle_nuisance and a.workers <= 1:
        ap.error("--oracle-nuisance rebinds fwl_score's stage 1: run it in worker processes (--workers 2)")
    jobs = [(i, a.algorithm, a.epsilon, a.draws, params, a.oracle_nuisance) for i in ids]
    if a.workers > 1:
        with ProcessPoolExecutor(a.workers) as ex:
            parts = list(ex.map(_draws, jobs))
    else:
        parts = [_draws(job) for job in jobs]
    rows = [r for part in parts for r in part]
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(rows, fh)
    checks = sorted({r["check"] for r in rows if not r["finite"]} - {None}, key=str)
    by_inst: dict[str, list[dict]] = collections.defaultdict(list)
    for r in rows:
        by_inst[r["instance"]].append(r)
    print(f"{a.algorithm}{' (oracle nuisance)' if a.oracle_nuisance else ''}, epsilon {a.epsilon:g}, "
          f"{a.draws} draws per instance; infinite intervals by check")
    print("instance,n,finite," + ",".join(checks))
    for iid, rs in sorted(by_inst.items(), key=lambda kv: kv[1][0]["n"]):
        cnt = collections.Counter(r["check"] for r in rs if not r["finite"])
        print(f"{iid},{rs[0]['n']},{sum(r['finite'] for r in rs)}," + ",".join(str(cnt[c]) for c in checks))
    print("\nn band,instances,draws,finite share," + ",".join(checks))
    for lo, hi in zip(BANDS[:-1], BANDS[1:], strict=True):
        rs = [r for part in by_inst.values() if lo <= part[0]["n"] < hi for r in part]
        if not rs:
            continue
        cnt = collections.Counter(r["check"] for r in rs if not r["finite"])
        k = len({r["instance"] for r in rs})
        print(f"{lo}-{hi},{k},{len(rs)},{sum(r['finite'] for r in rs) / len(rs):.3f},"
              + ",".join(f"{cnt[c] / len(rs):.3f}" for c in checks))
    fin = [r for r in rows if r["finite"]]
    cov = sum(r["low"] <= r["truth"] <= r["high"] for r in fin)
    miss = sum(min(abs(r["low"] - r["truth"]), abs(r["high"] - r["truth"])) > 10 * r["np_se"]
               for r in fin if not r["low"] <= r["truth"] <= r["high"])
    print(f"\nall: {len(rows)} draws, finite {len(fin) / max(len(rows), 1):.3f}, "
          f"finite intervals covering {cov}/{len(fin)}, confident misses {miss}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
