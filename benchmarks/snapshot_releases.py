"""Snapshot the releases of the whole roster bit for bit, or compare two snapshots.

A refactor that must not change a number (moving code, routing noise through the
accountant's charging calls) is checked by snapshotting before and after::

    python benchmarks/snapshot_releases.py write before.json [--task sce linreg mean]
    python benchmarks/snapshot_releases.py compare before.json after.json

Each release (every roster entry, :func:`dpstats.algorithms.list_configurations`:
the registered algorithms and the named configurations such as ``fwl_score[api]``,
on a few public instances, at three epsilons and three seeds) is kept as the
float.hex of its estimate, or its decline reason, with the costs of its ledger.
``compare`` exits 1 on any difference.
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


def write(out: str, tasks: list[str]) -> None:
    from dpstats.data.corpus import Corpus
    from dpstats.algorithms import list_configurations

    corpus = Corpus.public()
    snap = {}
    for task in tasks:
        insts = [corpus.instance(i) for i in INSTANCES[task]]
        for cfg in list_configurations(task):
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


def compare(a: str, b: str) -> int:
    A, B = json.load(open(a)), json.load(open(b))
    keys = sorted(set(A) | set(B))
    bad = 0
    for k in keys:
        if k not in A or k not in B:
            print("only in one:", k)
            bad += 1
        elif A[k]["estimate"] != B[k]["estimate"]:
            print("estimate differs:", k, A[k]["estimate"], B[k]["estimate"])
            bad += 1
        elif [c for _, c in A[k]["ledger"]] != [c for _, c in B[k]["ledger"]]:
            print("ledger costs differ:", k)
            bad += 1
    print(f"{len(keys)} releases compared, {bad} differ")
    return 1 if bad else 0


if __name__ == "__main__":
    if sys.argv[1] == "write":
        tasks = sys.argv[sys.argv.index("--task") + 1:] if "--task" in sys.argv else ["sce", "linreg", "mean"]
        write(sys.argv[2], tasks)
    else:
        sys.exit(compare(sys.argv[2], sys.argv[3]))
