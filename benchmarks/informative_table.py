"""How informative the releases are at ε = 1: the status figures of ``docs/benchmark/informative.md``.

Reads the two committed quick-preset tables and prints Markdown tables:

- ``docs/benchmark/ratios_public_quick.csv`` (``benchmarks/ratio_table.py``: the error ratio of every
  trial of every algorithm, quick preset, ε ∈ {0.3, 1, 3, 10}, 3 trials per instance). The trials are rebuilt
  with :func:`ratio_table.read_ratio_table` and scored with the package's leaderboard
  (:func:`dpstats.bench.leaderboard.leaderboard`: τ@50 with studies weighted equally, the ∞ rule,
  the tails ``tail100 = 1 - S(100)``), on slice ``all``;
- ``docs/benchmark/coverage_public_quick.csv`` (``dpstats report`` on the quick coverage run: 5 draws
  per instance, ε ∈ {0.3, 1, 3, 10}); the finite share is ``1 - infinite`` (failures have an infinite
  width ratio and count as infinite there), study-weighted.

"Best standard" is the algorithm of interpretation ``standard`` with the smallest τ@50 (rank 1).
The API's interval configurations are ``<API_DEFAULTS[task]>[api]`` (``fwl_score[api]``, ``fwl_each[api]``,
``adaptive_whiten[api]``; the base algorithms when a table has no ``[api]`` entry).

Usage (from the repository root; reads only the CSVs, a few seconds)::

    PYTHONPATH=. .venv/bin/python benchmarks/informative_table.py

With ``--ratios`` another ratio table (the full preset's, remade by the command on the page) is read instead
of the committed quick one, and ``--ratio-source`` says what the source column calls it.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import pandas as pd

from dpstats.algorithms.configurations import API_DEFAULTS

ROOT = Path(__file__).resolve().parent.parent
RATIOS = ROOT / "docs" / "benchmark" / "ratios_public_quick.csv"
COVERAGE = ROOT / "docs" / "benchmark" / "coverage_public_quick.csv"

#: the API's method per task when an interval is asked for (``dpstats.api.INFERENCE_METHODS``)
DEFAULTS = dict(API_DEFAULTS)
#: τ@50 at ε = 1 that each task should reach (best standard algorithm)
TAU_TARGETS = {"sce": 1.5, "linreg": 3.0, "mean": 1.0}
TAIL_LIMIT = 0.02  # share of trials beyond 100 times the baseline, API defaults, ε ≥ 1
#: finite shares of the coverage trials at ε = 1 (the sce target's width among the finite intervals, ≤ 2.5,
#: needs the per-trial intervals, which the committed coverage table does not hold)
SCE_FINITE, LINREG_FINITE = 0.70, 0.50
#: bands of n for the τ@50 breakdown (those of benchmarks/interval_checks.py)
BANDS = ((0, 1_000, "below 1,000"), (1_000, 3_000, "1,000–3,000"), (3_000, 10_000, "3,000–10,000"),
         (10_000, math.inf, "10,000 and more"))
RATIO_SRC = "[ratios](ratios_public_quick.csv)"
COVER_SRC = "[coverage](coverage_public_quick.csv)"


def _pct(x: float) -> str:
    """A share as a percentage with one decimal."""
    return f"{100 * x:.1f} %"


def _tail(x: float) -> str:
    """A tail share rounded up to 0.1 % (a non-zero tail never shows as 0)."""
    return f"{math.ceil(1000 * x - 1e-9) / 10:.1f} %"


def _met(ok: bool) -> str:
    return "met" if ok else "**not met**"


def load(ratios: Path, coverage: Path) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """The trials, the leaderboard of slice ``all`` and the coverage table of slice ``all``."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from ratio_table import read_ratio_table
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    from dpstats.bench.leaderboard import leaderboard

    trials = read_ratio_table(ratios)
    board = leaderboard(trials)
    cov = pd.read_csv(coverage)
    return trials, board[board["slice"] == "all"].reset_index(drop=True), cov[cov["slice"] == "all"]


def api_name(board: pd.DataFrame, task: str) -> str:
    """``<default>[api]`` when the table has it, else the default itself."""
    name = f"{DEFAULTS[task]}[api]"
    return name if (board.loc[board["task"] == task, "algorithm"] == name).any() else DEFAULTS[task]


def row(board: pd.DataFrame, task: str, eps: float, algorithm: str) -> pd.Series:
    sub = board[(board["task"] == task) & (board["epsilon"] == eps) & (board["algorithm"] == algorithm)]
    return sub.iloc[0]


def best(board: pd.DataFrame, task: str, eps: float) -> pd.Series:
    sub = board[(board["task"] == task) & (board["epsilon"] == eps) & (board["interpretation"] == "standard")]
    return sub.sort_values("rank", kind="stable").iloc[0]


def cov_row(cov: pd.DataFrame, task: str, eps: float, algorithm: str) -> pd.Series:
    sub = cov[(cov["task"] == task) & (cov["epsilon"] == eps) & (cov["algorithm"] == algorithm)]
    return sub.iloc[0]


def status(board: pd.DataFrame, cov: pd.DataFrame, ratio_src: str = RATIO_SRC) -> list[str]:
    """The table of targets: target, value now, met or not, source (``ratio_src`` names the ratio table)."""
    from dpstats.bench.leaderboard import format_tau, format_tau50

    out = ["| target | value now | met | source |", "| --- | --- | --- | --- |"]
    for task in ("sce", "linreg", "mean"):
        b = best(board, task, 1.0)
        a = row(board, task, 1.0, api_name(board, task))
        val = (f"{format_tau50(b.tau50, b.reaches)} (`{b.algorithm}`; API configuration "
               f"`{a.algorithm}` {format_tau50(a.tau50, a.reaches)})")
        out.append(f"| {task}: best standard τ@50 at ε = 1 ≤ {TAU_TARGETS[task]:.1f} | {val} "
                   f"| {_met(b.tau50 <= TAU_TARGETS[task])} | {ratio_src} |")
    fwl = cov_row(cov, "sce", 1.0, DEFAULTS["sce"])
    finite = 1 - fwl.infinite
    out.append(f"| sce: finite intervals on ≥ {100 * SCE_FINITE:.0f} % of coverage trials at ε = 1 | {_pct(finite)} "
               f"(`{DEFAULTS['sce']}`) | {_met(finite >= SCE_FINITE)} | {COVER_SRC} |")
    others = cov[(cov["task"] == "sce") & (cov["epsilon"] == 1.0) & ~cov["algorithm"].isin(["non-private"])]
    for _, o in others.sort_values("infinite").iterrows():
        if o.algorithm == DEFAULTS["sce"]:
            continue
        out.append(f"| ... the other sce methods with intervals | `{o.algorithm}` {_pct(1 - o.infinite)} finite, "
                   f"median width ratio {format_tau(o.median_width_ratio)}, worst instance {o.worst_coverage:.2f}, "
                   f"confident misses {int(o.confident_misses)} | {_met(False)} (width, validity) | {COVER_SRC} |")
        break
    dpn = cov_row(cov, "linreg", 1.0, DEFAULTS["linreg"])
    out.append(f"| linreg: `dpnewton` or its successor (`{DEFAULTS['linreg']}`) finite on ≥ "
               f"{100 * LINREG_FINITE:.0f} % of coverage trials at ε = 1 "
               f"| {_pct(1 - dpn.infinite)} | {_met(1 - dpn.infinite >= LINREG_FINITE)} | {COVER_SRC} |")
    for eps in sorted(board["epsilon"].unique()):
        if eps < 1:
            continue
        cells = []
        worst = 0.0
        for task in ("sce", "linreg", "mean"):
            a = row(board, task, eps, api_name(board, task))
            cells.append(f"{task} {_tail(a.tail100)}")
            worst = max(worst, float(a.tail100))
        out.append(f"| API defaults: ≤ {100 * TAIL_LIMIT:.0f} % of trials beyond 100× the baseline, ε = {eps:g} "
                   f"| {', '.join(cells)} | {_met(worst <= TAIL_LIMIT)} | {ratio_src} |")
    return out


def by_epsilon(board: pd.DataFrame, cov: pd.DataFrame) -> list[str]:
    """Per task and ε: the best standard algorithm, the API configuration and its tail and interval."""
    from dpstats.bench.leaderboard import format_tau, format_tau50

    out = ["| task | ε | best standard (τ@50) | API configuration τ@50 | its share beyond 100× "
           "| API default's finite intervals | median width ratio |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for task in ("sce", "linreg", "mean"):
        for eps in sorted(board.loc[board["task"] == task, "epsilon"].unique()):
            b, a = best(board, task, eps), row(board, task, eps, api_name(board, task))
            c = cov_row(cov, task, eps, DEFAULTS[task])
            out.append(f"| {task} | {eps:g} | `{b.algorithm}` ({format_tau50(b.tau50, b.reaches)}) "
                       f"| {format_tau50(a.tau50, a.reaches)} | {_tail(a.tail100)} | {_pct(1 - c.infinite)} "
                       f"| {format_tau(c.median_width_ratio)} |")
    return out


def by_n(trials: pd.DataFrame, board: pd.DataFrame) -> list[str]:
    """τ@50 of each task's best standard algorithm at ε = 1 and of the API configuration, per band of n.

    The leaderboard is recomputed on the instances of each band, so the studies are weighted
    equally within the band.
    """
    from dpstats.bench.leaderboard import format_tau50, leaderboard

    head = "| task | algorithm | " + " | ".join(label for _, _, label in BANDS) + " |"
    out = [head, "| --- | --- |" + " --- |" * len(BANDS)]
    for task in ("sce", "linreg", "mean"):
        names = [best(board, task, 1.0).algorithm, api_name(board, task)]
        sub = trials[(trials["task"] == task) & (trials["epsilon"] == 1.0) & trials["algorithm"].isin(names)]
        for name in names:
            cells = []
            for lo, hi, _ in BANDS:
                part = sub[(sub["n"] >= lo) & (sub["n"] < hi)]
                lb = leaderboard(part)
                r = lb[(lb["slice"] == "all") & (lb["algorithm"] == name)]
                k = part.loc[part["algorithm"] == name, "instance"].nunique()
                cells.append(f"{format_tau50(r.tau50.iloc[0], r.reaches.iloc[0])} ({k})" if len(r) else "–")
            out.append(f"| {task} | `{name}` | " + " | ".join(cells) + " |")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ratios", type=Path, default=RATIOS, help="ratio table (benchmarks/ratio_table.py)")
    ap.add_argument("--coverage", type=Path, default=COVERAGE, help="coverage.csv of dpstats report")
    ap.add_argument("--ratio-source", default=None, metavar="TEXT",
                    help=f"what the source column says of --ratios (default: {RATIO_SRC} for the committed table, "
                         "else the file's name)")
    args = ap.parse_args(argv)
    ratio_src = args.ratio_source or (RATIO_SRC if args.ratios == RATIOS else f"`{args.ratios.name}`")
    trials, board, cov = load(args.ratios, args.coverage)
    per = trials.groupby(["task", "epsilon", "algorithm", "instance"]).size()
    inst = trials.groupby("task")["instance"].nunique()
    print(f"Ratios: {', '.join(f'{t} {k}' for t, k in inst.items())} instances, "
          f"{trials['study'].nunique()} studies, "
          f"ε ∈ {{{', '.join(f'{e:g}' for e in sorted(trials['epsilon'].unique()))}}}, "
          f"{per.min()}–{per.max()} trials per instance and ε (ratios); coverage: "
          f"{int(cov['trials'].max())} trials per task and ε.\n")
    print("\n".join(status(board, cov, ratio_src)))
    print("\nPer task and ε (slice all):\n")
    print("\n".join(by_epsilon(board, cov)))
    print("\nτ@50 at ε = 1 by band of n (instances in parentheses):\n")
    print("\n".join(by_n(trials, board)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
