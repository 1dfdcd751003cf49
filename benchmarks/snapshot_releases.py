"""Snapshot the releases of the whole roster bit for bit, or compare two snapshots.

A refactor that must not change a number (moving code, routing noise through the
accountant's charging calls) is checked by snapshotting before and after::

    python benchmarks/snapshot_releases.py write before.json [--task sce linreg mean] [--algorithm A ...] [--instance I ...]
    python benchmarks/snapshot_releases.py compare before.json after.json [--rtol 1e-12]

Each release (every roster entry, :func:`dpstats.algorithms.list_configurations`:
the registered algorithms and the named configurations such as ``fwl_score[api]``,
on a few public instances, at three epsilons and three seeds) is kept as the
float.hex of its estimate, or its decline reason, with the costs of its ledger.
``compare`` exits 1 on any difference; with ``--rtol`` (for a faster
formulation that changes only the last digits) it prints the largest normwise relative
difference of the estimates and exits 1 only on a larger one, a different
decline, or ledger costs that differ by more (a cost recomputed from a
data-derived sensitivity and noise scale can move in its last digit).
Run ``write`` with ``PYTHONPATH`` at the tree to snapshot.
"""
from __future__ import annotations

import json
import sys
import warnings

import numpy as np

INSTANCES = {
    "sce": ["mroz87_lwage", "engel_food", "graddy97_discrim"],
    "linreg": ["engel_food_linreg", "mrw92_solow_linreg"],
    "mean": ["mean_engel_food", "mean_mrw92_solow", "mean_grogger91"],
}
EPS = (0.3, 1.0, 10.0)
SEEDS = (0, 1, 2)


def write(out: str, tasks: list[str], algorithms: list[str] | None = None,
          instances: list[str] | None = None) -> None:
    from dpstats.data.corpus import Corpus
    from dpstats.algorithms import list_configurations

    corpus = Corpus.public()
    chosen = [corpus.instance(i) for i in instances] if instances else None
    snap = {}
    for task in tasks:
        insts = ([inst for inst in chosen if inst.facts.task == task] if chosen is not None
                 else [corpus.instance(i) for i in INSTANCES[task]])
        for cfg in list_configurations(task):
            if algorithms and cfg.name not in algorithms:
                continue
            for inst in insts:
                for eps in EPS:
                    for seed in SEEDS:
                        with warnings.catch_warnings():
                            warnings.simplefilter("ignore")
                            # release() without its outcome check, so that a non-finite estimate is kept too
                            out_ = cfg.spec().build().run(inst.task_data(), inst.facts, eps, 1e-6,
                                                          np.random.default_rng(seed))
                        key = f"{task}/{cfg.name}/{inst.facts.instance}/{eps}/{seed}"
                        if out_.released:
                            est = [float(x).hex() for x in np.asarray(out_.estimate).ravel()]
                        else:
                            est = "declined: " + out_.reason
                        ledger = [[str(e[0]) if not hasattr(e, "mechanism") else e.mechanism,
                                   float(e[1] if not hasattr(e, "cost") else e.cost).hex()] for e in out_.ledger]
                        snap[key] = {"estimate": est, "ledger": ledger}
    with open(out, "w") as f:
        json.dump(snap, f, indent=0, sort_keys=True)
    print(f"{len(snap)} releases written to {out}")


def _relative(a: list[str], b: list[str]) -> float:
    """Normwise relative difference of two hex-encoded estimates: ``max |x - y| / max(|x|, |y|)``.

    Infinite when their shapes or their non-finite entries differ.
    """
    x, y = np.array([float.fromhex(v) for v in a]), np.array([float.fromhex(v) for v in b])
    if x.shape != y.shape or not np.array_equal(np.isfinite(x), np.isfinite(y)):
        return float("inf")
    f = np.isfinite(x)
    if not np.array_equal(x[~f], y[~f]):
        return float("inf")
    if not f.any():
        return 0.0
    scale = max(float(np.max(np.abs(x[f]))), float(np.max(np.abs(y[f]))))
    diff = float(np.max(np.abs(x[f] - y[f])))
    return 0.0 if diff == 0.0 else (diff / scale if scale > 0 else float("inf"))


def compare(a: str, b: str, rtol: float | None = None) -> int:
    A, B = json.load(open(a)), json.load(open(b))
    keys = sorted(set(A) | set(B))
    bad = close = 0
    worst = 0.0
    for k in keys:
        if k not in A or k not in B:
            print("only in one:", k)
            bad += 1
            continue
        ca, cb = [c for _, c in A[k]["ledger"]], [c for _, c in B[k]["ledger"]]
        # a cost recomputed from a data-derived sensitivity and scale can move in its last digit
        if ca != cb and not (rtol is not None and len(ca) == len(cb) and _relative(ca, cb) <= rtol):
            print("ledger costs differ:", k)
            bad += 1
        elif A[k]["estimate"] != B[k]["estimate"]:
            ea, eb = A[k]["estimate"], B[k]["estimate"]
            rel = _relative(ea, eb) if isinstance(ea, list) and isinstance(eb, list) else float("inf")
            if rtol is not None and rel <= rtol:
                close += 1
                worst = max(worst, rel)
            else:
                print("estimate differs:", k, ea, eb, f"(relative {rel:.3g})")
                bad += 1
    tail = f"; {close} differ by at most {worst:.3g} relative (--rtol {rtol:g})" if rtol is not None else ""
    print(f"{len(keys)} releases compared, {bad} differ{tail}")
    return 1 if bad else 0


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description="Snapshot the roster's releases bit for bit, or compare two snapshots.")
    sub = ap.add_subparsers(dest="command", required=True)
    w = sub.add_parser("write", help="write a snapshot of the releases")
    w.add_argument("out")
    w.add_argument("--task", nargs="+", default=["sce", "linreg", "mean"], choices=sorted(INSTANCES))
    w.add_argument("--algorithm", nargs="+", help="only these roster entries (default: all)")
    w.add_argument("--instance", nargs="+", help="these public instances instead of the default few (each in its task)")
    c = sub.add_parser("compare", help="compare two snapshots; exit 1 on a difference")
    c.add_argument("before")
    c.add_argument("after")
    c.add_argument("--rtol", type=float, help="estimates within this relative difference count as rounding")
    args = ap.parse_args()
    if args.command == "write":
        write(args.out, args.task, args.algorithm, args.instance)
    else:
        sys.exit(compare(args.before, args.after, args.rtol))
