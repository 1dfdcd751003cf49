"""The committed point-benchmark table behind the docs' algorithm figures.

Reads benchmark results (the SQLite file of ``dpstats bench`` or a report's
``trials.csv``) and writes one CSV row per task, ε, algorithm and instance:

``task, epsilon, algorithm, interpretation, instance, study, n, d, ratios``

where ``ratios`` lists the error ratio of each trial, seed ``0, 1, ...`` in
order, separated by spaces, with 6 significant digits, ``inf`` for a failure
(declined, error, timeout, memory, or an infinite ratio). That is all the
performance profiles and τ@50 need (:mod:`dpstats.bench.evaluation` weighs
instances by study and counts failures as infinite), so the docs build
rebuilds the trials from it (:func:`read_ratio_table`) and draws each
algorithm's profile with the package's own code. On the quick preset the
leaderboard rebuilt from the table has the exact one's ranks, reaches and
tails, and its τ@50 within a relative 10⁻⁵ (the rounding).

Usage (the quick preset of ``scripts/main.sh`` at the protocol's four ε)::

    dpstats bench --preset quick --epsilon 0.3 1 3 10 --workers 2 --results results/bench.sqlite
    python benchmarks/ratio_table.py results/bench.sqlite docs/benchmark/ratios_public_quick.csv

``--merge TABLE`` keeps the rows of an existing table of every (task, ε,
algorithm) the results do not hold: the committed table has ε = 1 and 10 from
the quick preset at commit ``8cff1f2`` (14,190 trials, 12 minutes on two shared
cores), ε = 0.3 and 3 from a later run at commit ``fc870b8`` (14,448 trials,
one worker), and ``fwl_each`` and ``fwl_each[api]`` (linreg) at all four ε from
a run of those two entries (1,032 trials)::

    dpstats bench --preset quick --epsilon 0.3 3 --workers 1 --results /tmp/docs22_quick.sqlite
    python benchmarks/ratio_table.py /tmp/docs22_quick.sqlite docs/benchmark/ratios_public_quick.csv \
        --merge docs/benchmark/ratios_public_quick.csv
    dpstats bench --preset quick --task linreg --algorithm fwl_each "fwl_each[api]" --epsilon 0.3 1 3 10 \
        --workers 2 --results /tmp/fwl_each_quick.sqlite
    python benchmarks/ratio_table.py /tmp/fwl_each_quick.sqlite docs/benchmark/ratios_public_quick.csv \
        --merge docs/benchmark/ratios_public_quick.csv
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np
import pandas as pd

COLUMNS = ("task", "epsilon", "algorithm", "interpretation", "instance", "study", "n", "d", "ratios")


def _fmt(r: float) -> str:
    return f"{r:.6g}" if math.isfinite(r) else "inf"


def ratio_table(trials: pd.DataFrame) -> pd.DataFrame:
    """One row per task, ε, algorithm and instance with the trials' ratios (seed order)."""
    from dpstats.bench.evaluation import prepare

    df = prepare(trials)
    if "corpus" in df.columns and df["corpus"].nunique() > 1:
        raise SystemExit(f"results of several corpora {sorted(df['corpus'].unique())}: give one")
    df = df.sort_values(["task", "epsilon", "algorithm", "instance", "seed"], kind="stable")
    keys = ["task", "epsilon", "algorithm", "interpretation", "instance", "study", "n", "d"]
    out = (df.groupby(keys, sort=False)["score"].agg(lambda s: " ".join(_fmt(float(r)) for r in s))
           .rename("ratios").reset_index())
    return _ordered(out)


def _ordered(table: pd.DataFrame) -> pd.DataFrame:
    """The table's rows by task (the package's order), ε, algorithm and instance; its columns in order."""
    from dpstats.bench.evaluation import TASKS

    out = table.copy()
    out["task"] = pd.Categorical(out["task"], categories=list(TASKS), ordered=True)
    out = out.sort_values(["task", "epsilon", "algorithm", "instance"], kind="stable").reset_index(drop=True)
    out["task"] = out["task"].astype(str)
    out["n"] = out["n"].astype(np.int64)
    out["d"] = out["d"].astype(np.int64)
    return out[list(COLUMNS)]


def merge_tables(new: pd.DataFrame, old: pd.DataFrame) -> pd.DataFrame:
    """``new`` and the rows of ``old`` of every (task, ε, algorithm) that ``new`` does not have.

    A run at other ε, or of other algorithms (a new method at every ε), added to a table.
    """
    def keys(t: pd.DataFrame) -> pd.Series:
        return t["task"].astype(str) + "|" + t["epsilon"].astype(float).map(repr) + "|" + t["algorithm"].astype(str)

    keep = old[~keys(old).isin(set(keys(new)))]
    return _ordered(pd.concat([keep, new], ignore_index=True))


def read_ratio_table(path: str | Path) -> pd.DataFrame:
    """The trials table (columns of :func:`dpstats.bench.evaluation.prepare`) a ratio table stands for.

    A finite ratio becomes a trial with status ``ok``, ``inf`` one with status ``error``.
    """
    tab = pd.read_csv(path, dtype={"ratios": str})
    missing = [c for c in COLUMNS if c not in tab.columns]
    if missing:
        raise ValueError(f"{path}: not a ratio table, columns {missing} missing")
    ratios = tab["ratios"].str.split(" ")
    rows = tab.drop(columns="ratios").loc[tab.index.repeat(ratios.str.len())].reset_index(drop=True)
    rows["ratio"] = np.array([float(r) for rs in ratios for r in rs], dtype=float)
    rows["seed"] = rows.groupby(["task", "epsilon", "algorithm", "instance"]).cumcount()
    rows["status"] = np.where(np.isfinite(rows["ratio"]), "ok", "error")
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", help="results file: SQLite from dpstats bench, or a report's trials.csv")
    ap.add_argument("out", help="the CSV to write (docs/benchmark/ratios_public_quick.csv)")
    ap.add_argument("--merge", metavar="TABLE",
                    help="keep this ratio table's rows of every (task, ε, algorithm) the results do not hold")
    args = ap.parse_args(argv)
    from dpstats.bench.report import load_trials

    table = ratio_table(load_trials(args.results))
    if args.merge:
        table = merge_tables(table, pd.read_csv(args.merge, dtype={"ratios": str}))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(args.out, index=False, lineterminator="\n")
    size = Path(args.out).stat().st_size
    print(f"{args.out}: {len(table)} rows, {table['ratios'].str.count(' ').add(1).sum()} trials, {size / 1024:.0f} KiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
