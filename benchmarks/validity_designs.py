"""Per-design validity of private_coef's interval on simulated regressions outside the corpus.

Each design is a population with a known coefficient of ``x``; every draw is
a new sample from it and a release with its own noise seed (the API
default, ``private_coef`` with its interval). Per design and epsilon the
script prints the share of finite intervals, how many of those cover the
population value, the confident misses (a finite interval that misses by
more than 10 non-private HC0 standard errors of the same sample) and the
median width ratio (private over non-private 95 % width) of the finite ones.

The designs are the shapes that break private regressions: a heavy-tailed
regressor (A), a rare 0/1 regressor without declared bounds (B; ``--bounds``
declares (0, 1) for it), a regressor nearly collinear with a control (C),
heteroskedastic errors (D), heavy-tailed errors (E), a few extreme
regressor values (G), a regressor far from 0 relative to its spread (H),
fifteen controls (I), a 50-level fixed effect (J) and survey weights that
move the population slope away from the sample's (W: two strata; V:
lognormal weights; both with ``weights=``).

Usage::

    python benchmarks/validity_designs.py                    # every design, eps 1 3 10, 40 draws
    python benchmarks/validity_designs.py --design A B --bounds
"""

from __future__ import annotations

import argparse
import warnings
from collections.abc import Callable

import numpy as np
import pandas as pd
import statsmodels.formula.api as smf

import dpstats

Design = Callable[[np.random.Generator], tuple[pd.DataFrame, str, float]]


def heavy_x(r: np.random.Generator) -> tuple[pd.DataFrame, str, float]:
    n = 2000
    x = r.lognormal(0.0, 1.5, n)
    return pd.DataFrame({"y": 1 + 0.5 * x + r.normal(size=n), "x": x}), "y ~ x", 0.5


def rare_binary(r: np.random.Generator) -> tuple[pd.DataFrame, str, float]:
    n = 5000
    z = r.normal(size=(n, 3))
    x = (r.uniform(size=n) < 0.02).astype(float)
    y = x + z @ np.array([0.5, -0.3, 0.2]) + r.normal(size=n)
    return (pd.DataFrame({"y": y, "x": x, "z1": z[:, 0], "z2": z[:, 1], "z3": z[:, 2]}), "y ~ x + z1 + z2 + z3",
            1.0)


def collinear(r: np.random.Generator) -> tuple[pd.DataFrame, str, float]:
    n = 3000
    z = r.normal(size=n)
    x = z + 0.1 * r.normal(size=n)
    return pd.DataFrame({"y": x + z + r.normal(size=n), "x": x, "z": z}), "y ~ x + z", 1.0


def heteroskedastic(r: np.random.Generator) -> tuple[pd.DataFrame, str, float]:
    n = 1000
    x = r.normal(size=n)
    return pd.DataFrame({"y": x + 2.0 * np.abs(x) * r.normal(size=n), "x": x}), "y ~ x", 1.0


def heavy_errors(r: np.random.Generator) -> tuple[pd.DataFrame, str, float]:
    n = 3000
    x = r.normal(size=n)
    return pd.DataFrame({"y": 2 * x + r.standard_t(2, n), "x": x}), "y ~ x", 2.0


def extreme_x(r: np.random.Generator) -> tuple[pd.DataFrame, str, float]:
    n = 2000
    x = r.normal(size=n)
    x[:5] = 50.0
    return pd.DataFrame({"y": 0.3 * x + r.normal(size=n), "x": x}), "y ~ x", 0.3


def offset_x(r: np.random.Generator) -> tuple[pd.DataFrame, str, float]:
    n = 2000
    x = 1e4 + r.normal(size=n)
    return pd.DataFrame({"y": 3 * x + r.normal(size=n), "x": x}), "y ~ x", 3.0


def many_controls(r: np.random.Generator) -> tuple[pd.DataFrame, str, float]:
    n = 3000
    Z = r.normal(size=(n, 15))
    x = 0.3 * Z[:, :3].sum(axis=1) + r.normal(size=n)
    df = pd.DataFrame(Z, columns=[f"z{i}" for i in range(15)])
    df["x"] = x
    df["y"] = 0.7 * x + Z @ np.linspace(-1, 1, 15) + r.normal(size=n)
    return df, "y ~ x + " + " + ".join(f"z{i}" for i in range(15)), 0.7


def fixed_effect(r: np.random.Generator) -> tuple[pd.DataFrame, str, float]:
    n = 4000
    g = r.integers(0, 50, n)
    a = r.normal(0.0, 3.0, 50)
    x = 0.5 * a[g] + r.normal(size=n)
    return pd.DataFrame({"y": 1.5 * x + a[g] + r.normal(size=n), "x": x, "g": g}), "y ~ x + C(g)", 1.5


def survey_weights(r: np.random.Generator) -> tuple[pd.DataFrame, str, float]:
    # two strata with different slopes (0.5 in 70 % of the population, 1.0 in 30 %), sampled half and half;
    # the weights (population share over sample share) recover the population slope 0.65, unweighted 0.75
    n = 2000
    b = np.arange(n) >= n // 2
    x = r.normal(size=n)
    y = 1.0 + np.where(b, 1.0, 0.5) * x + r.normal(size=n)
    return pd.DataFrame({"y": y, "x": x, "w": np.where(b, 0.6, 1.4)}), "y ~ x", 0.65


def lognormal_weights(r: np.random.Generator) -> tuple[pd.DataFrame, str, float]:
    # weights exp(N(0, 1)) (the largest about 30 times the median), the slope 1.0 where the weight is above
    # its median and 0.5 below: the weighted population slope is 0.5 + 0.5 Phi(1) = 0.9207, unweighted 0.75
    n = 2000
    lw = r.normal(size=n)
    x = r.normal(size=n)
    y = 1.0 + np.where(lw > 0, 1.0, 0.5) * x + r.normal(size=n)
    return pd.DataFrame({"y": y, "x": x, "w": np.exp(lw)}), "y ~ x", 0.5 + 0.5 * 0.8413447460685429


DESIGNS: dict[str, tuple[str, Design]] = {
    "A": ("lognormal(0, 1.5) regressor, n = 2,000", heavy_x),
    "B": ("0/1 regressor with 2 % ones, 3 controls, n = 5,000", rare_binary),
    "C": ("regressor with corr 0.995 to its control, n = 3,000", collinear),
    "D": ("error sd 2|x|, n = 1,000", heteroskedastic),
    "E": ("t(2) errors, n = 3,000", heavy_errors),
    "G": ("5 of 2,000 regressor values at 50 sd", extreme_x),
    "H": ("regressor 10^4 + N(0, 1), n = 2,000", offset_x),
    "I": ("15 controls, n = 3,000", many_controls),
    "J": ("50-level fixed effect, n = 4,000", fixed_effect),
    "W": ("survey weights 1.4 and 0.6, slopes 0.5 and 1.0 by stratum, n = 2,000", survey_weights),
    "V": ("weights exp(N(0, 1)), slope 1.0 above the median weight and 0.5 below, n = 2,000", lognormal_weights),
}


def run(design: str, epsilon: float, draws: int, bounds: bool) -> dict[str, float]:
    """Finite share, coverage, confident misses and median width ratio of one design at one epsilon."""
    make = DESIGNS[design][1]
    finite = covered = confident = 0
    widths = []
    for s in range(draws):
        df, formula, truth = make(np.random.default_rng(1000 + s))
        kw: dict = {"levels": {"g": list(range(50))}} if design == "J" else {}
        if bounds and design == "B":
            kw["bounds"] = {"x": (0.0, 1.0)}
        if design in ("W", "V"):
            kw["weights"] = "w"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = dpstats.private_coef(df, formula, "x", epsilon=epsilon, seed=s, **kw)
        lo, hi = res.conf_int().to_numpy().ravel()
        if not (np.isfinite(lo) and np.isfinite(hi)):
            continue
        finite += 1
        fit = smf.wls(formula, df, weights=df["w"]) if design in ("W", "V") else smf.ols(formula, df)
        se = float(fit.fit(cov_type="HC0").bse["x"])
        widths.append((hi - lo) / (2 * 1.959964 * se))
        if lo <= truth <= hi:
            covered += 1
        elif min(abs(lo - truth), abs(hi - truth)) > 10 * se:
            confident += 1
    return {"finite": finite, "covered": covered, "confident": confident,
            "width": float(np.median(widths)) if widths else float("nan")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--design", nargs="+", default=list(DESIGNS), choices=list(DESIGNS))
    ap.add_argument("--epsilon", nargs="+", type=float, default=[1.0, 3.0, 10.0])
    ap.add_argument("--draws", type=int, default=40)
    ap.add_argument("--bounds", action="store_true", help="declare bounds (0, 1) for design B's regressor")
    args = ap.parse_args()
    print("| design | ε | finite | covering (of finite) | confident misses | median width ratio |")
    print("| --- | --- | --- | --- | --- | --- |")
    for d in args.design:
        for eps in args.epsilon:
            r = run(d, eps, args.draws, args.bounds)
            print(f"| {d}: {DESIGNS[d][0]} | {eps:g} | {r['finite']}/{args.draws} | {r['covered']}/{r['finite']} | "
                  f"{r['confident']} | {r['width']:.2f} |", flush=True)


if __name__ == "__main__":
    main()
