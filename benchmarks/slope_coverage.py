"""Per-coordinate coverage of a vector method's intervals, from a coverage report's ``intervals.csv``.

The coverage benchmark's per-instance table averages coverage over an
instance's coordinates; a vector method is judged here one coordinate at a
time, the intercept (coordinate 0) aside. Prints, per epsilon, a Markdown
row: instances, slope coordinates, the share of finite slope intervals, the
median width ratio of the finite ones, the share of trials whose median
width ratio is finite (the benchmark's finite share), the instances below
85 %, the slopes below 85 % with the non-private interval's coverage of the
same draws in brackets, and the confident misses (from
``coverage_instances.csv``).

Usage::

    dpstats bench --inference --task linreg --algorithm fwl_each --instance ... --trials 40 --results fe40.sqlite
    dpstats report --results fe40.sqlite --out fe40 --no-site
    python benchmarks/slope_coverage.py fe40
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd

FLOOR = 0.85


def _arr(col: pd.Series) -> np.ndarray:
    return np.array([json.loads(x) for x in col], dtype=float)


def table(report: Path) -> str:
    iv = pd.read_csv(report / "intervals.csv")
    inst = pd.read_csv(report / "coverage_instances.csv")
    lines = ["| $\\varepsilon$ | instances | slopes | finite slope intervals | median width ratio of the finite "
             "| trials with a finite median | instances below 85 % | slopes below 85 % (non-private) "
             "| confident misses |", "|---|---|---|---|---|---|---|---|---|"]
    for eps, gi in iv.groupby("epsilon"):
        rows, widths = [], []
        for name, h in gi.groupby("instance"):
            T, L, H = _arr(h.truth), _arr(h.low), _arr(h.high)
            NL, NH = _arr(h.np_low), _arr(h.np_high)
            with np.errstate(invalid="ignore"):
                cov = ((L <= T) & (T <= H)).mean(axis=0)
                ncov = ((NL <= T) & (T <= NH)).mean(axis=0)
                ratio = (H - L) / (NH - NL)
            fin = np.isfinite(L) & np.isfinite(H)
            for k in range(1, T.shape[1]):
                rows.append((name, k, cov[k], ncov[k], fin[:, k].mean()))
                widths += list(ratio[fin[:, k], k])
        c = pd.DataFrame(rows, columns=["instance", "k", "cov", "ncov", "finite"])
        g = inst[inst.epsilon == eps]
        bad = c[c["cov"] < FLOOR]
        text = ", ".join(f"{r.instance} #{r.k} {r.cov:.3f} ({r.ncov:.3f})" for r in bad.itertuples()) or "none"
        med = f"{np.median(widths):.2f}" if widths else "–"
        lines.append(f"| {eps:g} | {len(g)} | {len(c)} | {100 * c.finite.mean():.1f} % | {med} "
                     f"| {100 * (1 - g.infinite.mean()):.1f} % | {int((g.coverage < FLOOR).sum())} | {text} "
                     f"| {int(g.confident_misses.sum())} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("report", type=Path, help="a report folder of dpstats report (intervals.csv, coverage_instances.csv)")
    print(table(ap.parse_args(argv).report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
