"""The leaderboard: tau@50 ranking, tails and fallback shares, and the formatting of their values.

The leaderboard is computed from a trials table as described in
:mod:`dpstats.bench.evaluation`, from the exact step functions
``S(tau)`` there (the corpus success rate and tau@50).

Ranking
-------
Algorithms of interpretation ``standard`` are ranked by tau@50 (lower is
better). If ``S`` never reaches 1/2, tau@50 is infinite; these rank below
every finite one, ordered by the highest rate they reach (``S(inf)``,
descending) and then by the threshold at which they first reach it
(ascending). Equal keys share a rank (competition ranking: 1, 2, 2, 4).
Other interpretation classes are listed as comparisons with an empty rank.

Tails
-----
Next to tau@50, the leaderboard reports how often an algorithm is far off:
``tail10 = 1 - S(10)`` and ``tail100 = 1 - S(100)``, the study-weighted share
of trials whose error exceeds 10 and 100 times the baseline (failures count
as exceeding every threshold). They are exact like ``S`` and are not used
for the ranking.

Fallback share
--------------
``fallback`` is the study-weighted share of trials (the weights of ``S``)
whose release is a *fallback*, a number that is not an estimate (an
intercept-only model, an estimate shrunk to exactly zero, the prior centre, a
failed standardisation released as 0): the trials' column ``fallback``, which
the benchmark sets from the release's ``details["fallback"]``. A failed trial
is not a fallback. It is missing (NaN) when the trials have no ``fallback``
column or a release of the entry has no flag (results stored before the flag
was recorded). It is not used for the ranking.

Examples
--------
>>> import pandas as pd
>>> from dpstats.bench.leaderboard import leaderboard, format_tau50
>>> trials = pd.DataFrame({
...     "algorithm": "a", "interpretation": "standard", "instance": ["i1", "i1", "i2", "i2"],
...     "study": ["s1", "s1", "s2", "s2"], "task": "mean", "epsilon": 1.0,
...     "status": ["ok", "ok", "ok", "error"], "ratio": [0.5, 2.0, 1.0, float("inf")],
...     "n": 500, "d": 2})
>>> lb = leaderboard(trials)
>>> lb.loc[lb.slice == "all", ["tau50", "reaches", "rank"]].to_numpy().tolist()
[[1.0, 0.75, 1]]
>>> format_tau50(float("inf"), 0.34)
'∞ (reaches 34%)'
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dpstats.bench.evaluation import SLICES, _corpus_keys, _groups, _profiles, prepare
from dpstats.data.manifest import TASKS

__all__ = [
    "LEADERBOARD_COLUMNS",
    "TAIL_TAUS",
    "rank_key",
    "competition_ranks",
    "leaderboard",
    "read_leaderboard",
    "verify_leaderboard",
    "format_tau",
    "format_tau50",
    "format_rate",
    "format_tail",
    "format_fallback",
]

#: the columns of leaderboard.csv, in order (``corpus`` is appended when the trials have one)
LEADERBOARD_COLUMNS = (
    "task", "epsilon", "slice", "algorithm", "interpretation", "tau50", "reaches", "rank", "instances", "studies",
    "tail10", "tail100", "fallback",
)

#: the thresholds of the tail columns: ``tail<t>`` is ``1 - S(t)``
TAIL_TAUS = (10, 100)


def _fallback_shares(sub: pd.DataFrame, study_of: dict[Any, Any]) -> dict[str, float]:
    """Per algorithm: the study-weighted share of trials that released a fallback (NaN when a flag is missing).

    Exact like :func:`dpstats.bench.evaluation._step`: trial weights ``1 / (K m_s T_i)`` as integers over their common denominator.
    """
    algos = sorted(set(sub["algorithm"].astype(str)))
    if "fallback" not in sub.columns:
        return {a: math.nan for a in algos}
    per_study: dict[Any, int] = {}
    for st in study_of.values():
        per_study[st] = per_study.get(st, 0) + 1
    k = len(per_study)
    flags = sub["fallback"]
    # counts per (algorithm, instance) from integer codes: trials, fallback releases, and whether a flag is missing
    a_codes, a_names = pd.factorize(sub["algorithm"].astype(str).to_numpy(dtype=object))
    i_codes, i_names = pd.factorize(sub["instance"].to_numpy(dtype=object))
    cell = a_codes * len(i_names) + i_codes
    size = len(a_names) * len(i_names)
    trials = np.bincount(cell, minlength=size).reshape(len(a_names), len(i_names))
    hits = np.bincount(cell, weights=flags.fillna(False).astype(bool).to_numpy(dtype=bool),
                       minlength=size).astype(np.int64).reshape(trials.shape)
    unknown = np.bincount(cell, weights=flags.isna().to_numpy(dtype=bool), minlength=size).reshape(trials.shape) > 0
    out = {a: 0.0 for a in algos}
    for a, algo in enumerate(a_names):
        if unknown[a].any():
            out[str(algo)] = math.nan
            continue
        terms = [(int(hits[a, j]), k * per_study[study_of[i]] * int(trials[a, j]))
                 for j, i in enumerate(i_names) if hits[a, j] and i in study_of]
        if terms:
            L = math.lcm(*(d for _, d in terms))
            out[str(algo)] = float(Fraction(sum(h * (L // d) for h, d in terms), L))
    return out


# --------------------------------------------------------------------------
# Ranking
# --------------------------------------------------------------------------


def rank_key(tau50: float, reach: float, reach_tau: float) -> tuple[int, float, float]:
    """Sort key of the ranking rules (smaller is better).

    Finite ``tau50``: ``(0, tau50, 0)``. Infinite: ``(1, -reach, reach_tau)``,
    i.e. below every finite one, higher reached rate first, then the smaller
    threshold at which it is first reached (``inf`` when nothing succeeds).
    """
    if math.isfinite(tau50):
        return (0, float(tau50), 0.0)
    return (1, -float(reach), float(reach_tau) if math.isfinite(reach_tau) else math.inf)


def competition_ranks(keys: Sequence[tuple[Any, ...]]) -> list[int]:
    """Competition ranks (1, 2, 2, 4) of sort keys: one plus the number of strictly smaller keys."""
    srt = sorted(keys)
    import bisect

    return [1 + bisect.bisect_left(srt, k) for k in keys]


def leaderboard(trials: pd.DataFrame, standard_only_ranked: bool = True) -> pd.DataFrame:
    """The leaderboard: tau@50 and rank of every algorithm per task, epsilon and slice.

    Parameters
    ----------
    trials : DataFrame
        A trials table (see :mod:`dpstats.bench.evaluation`).
    standard_only_ranked : bool
        Rank only interpretation ``standard`` (the benchmark's rule); others get
        an empty rank.

    Returns
    -------
    DataFrame
        Columns :data:`LEADERBOARD_COLUMNS` (then ``corpus`` when the trials
        have it). ``tau50`` is a float (``inf`` allowed), ``reaches`` is the
        highest success rate reached (``S(inf)``), ``rank`` a nullable integer,
        ``instances`` and ``studies`` the size of the slice, ``tail10`` and
        ``tail100`` the weighted shares of trials with a ratio above 10 and
        100 (failures included), i.e. ``1 - S(10)`` and ``1 - S(100)``,
        ``fallback`` the weighted share of trials that released a fallback
        (NaN when the trials do not record it). Empty slices are
        left out. Rows are ordered by task, epsilon, slice, then ranked
        algorithms by rank and comparisons by the same key.
    """
    df = prepare(trials)
    ck = _corpus_keys(df)
    rows: list[dict[str, Any]] = []
    for key, sub in _groups(df, None, None, None):
        if sub.empty:
            continue
        inst, profs = _profiles(sub)
        fallback = _fallback_shares(sub, dict(zip(inst["instance"].to_numpy(dtype=object),
                                                  inst["study"].to_numpy(dtype=object), strict=True)))
        entries = []
        for algo, (interp, p) in profs.items():
            reach = float(p.reach)
            entries.append({
                **dict(zip(ck + ["task", "epsilon", "slice"], key, strict=True)), "algorithm": algo,
                "interpretation": interp,
                "tau50": p.tau50, "reaches": reach, "fallback": fallback[algo],
                "_key": rank_key(p.tau50, reach, p.reach_tau),
                "instances": len(inst), "studies": int(inst["study"].nunique()),
                **{f"tail{t}": float(p.tail(t)) for t in TAIL_TAUS},
            })
        ranked = [e for e in entries if e["interpretation"] == "standard" or not standard_only_ranked]
        for e, r in zip(ranked, competition_ranks([e["_key"] for e in ranked]), strict=True):
            e["rank"] = r
        entries.sort(key=lambda e: (e.get("rank") is None, e["_key"], e["algorithm"]))
        rows.extend(entries)
    cols = list(LEADERBOARD_COLUMNS) + ck
    out = pd.DataFrame(rows, columns=cols + ["_key"]) if rows else pd.DataFrame(columns=cols + ["_key"])
    out = out.drop(columns="_key")
    out["rank"] = pd.array(out["rank"].tolist(), dtype="Int64") if len(out) else pd.array([], dtype="Int64")
    out["instances"] = out["instances"].astype(int)
    out["studies"] = out["studies"].astype(int)
    out["tau50"] = out["tau50"].astype(float)
    out["reaches"] = out["reaches"].astype(float)
    out["fallback"] = out["fallback"].astype(float)
    for t in TAIL_TAUS:
        out[f"tail{t}"] = out[f"tail{t}"].astype(float)
    order = {t: i for i, t in enumerate(TASKS)}
    sl = {s: i for i, s in enumerate(SLICES)}
    out["_o"] = np.arange(len(out))
    out = out.sort_values(
        ck + ["task", "epsilon", "slice", "_o"],
        key=lambda s: s.map(order) if s.name == "task" else (s.map(sl) if s.name == "slice" else s),
        kind="stable",
    ).drop(columns="_o").reset_index(drop=True)
    return out


def read_leaderboard(path: str | Path) -> pd.DataFrame:
    """Read ``leaderboard.csv`` back (``inf`` tau50 parsed, rank as nullable integer)."""
    lb = pd.read_csv(path, dtype={"algorithm": str, "interpretation": str, "slice": str, "task": str})
    lb["tau50"] = pd.to_numeric(lb["tau50"].astype(str).str.replace("∞", "inf"), errors="raise").astype(float)
    lb["rank"] = pd.array(lb["rank"], dtype="Int64")
    return lb


def verify_leaderboard(trials: pd.DataFrame | str | Path, board: pd.DataFrame | str | Path,
                       rtol: float = 1e-12) -> list[str]:
    """Recompute the leaderboard from a trials table and list every disagreement.

    Parameters
    ----------
    trials : DataFrame or path
        A trials table or ``trials.csv``.
    board : DataFrame or path
        A leaderboard or ``leaderboard.csv``.
    rtol : float
        Relative tolerance for ``tau50``, ``reaches``, ``fallback`` and the tail shares (CSV round trip).

    Returns
    -------
    list of str
        Empty when they agree.
    """
    if not isinstance(trials, pd.DataFrame):
        trials = pd.read_csv(trials)
    if not isinstance(board, pd.DataFrame):
        board = read_leaderboard(board)
    fresh = leaderboard(trials)
    keys = [c for c in ("corpus", "task", "epsilon", "slice", "algorithm") if c in fresh.columns]
    problems: list[str] = []
    if set(fresh.columns) != set(board.columns):
        problems.append(f"columns differ: {sorted(board.columns)} vs recomputed {sorted(fresh.columns)}")
        return problems
    a = fresh.set_index(keys)
    b = board.copy()
    b["epsilon"] = b["epsilon"].astype(float)
    b = b.set_index(keys)
    for k in a.index.difference(b.index):
        problems.append(f"missing row {k}")
    for k in b.index.difference(a.index):
        problems.append(f"unexpected row {k}")
    if a.index.has_duplicates or b.index.has_duplicates:
        problems.append("duplicate leaderboard rows")
        return problems
    for k in a.index.intersection(b.index):
        ra, rb = a.loc[k], b.loc[k]
        for col in ("tau50", "reaches", "fallback") + tuple(f"tail{t}" for t in TAIL_TAUS):
            x, y = float(ra[col]), float(rb[col])
            if math.isnan(x) and math.isnan(y):  # a fallback share the trials do not record
                continue
            if not (x == y or (math.isfinite(x) and math.isfinite(y) and math.isclose(x, y, rel_tol=rtol, abs_tol=0))):
                problems.append(f"{k}: {col} {y!r} but recomputed {x!r}")
        for col in ("rank", "instances", "studies", "interpretation"):
            x, y = ra[col], rb[col]
            if (pd.isna(x) != pd.isna(y)) or (not pd.isna(x) and x != y):
                problems.append(f"{k}: {col} {y!r} but recomputed {x!r}")
    return problems


# --------------------------------------------------------------------------
# Formatting
# --------------------------------------------------------------------------


def format_tau(tau: float) -> str:
    """A threshold with three significant digits (``∞`` for infinity)."""
    if not math.isfinite(tau):
        return "∞"
    if tau == 0:
        return "0"
    s = f"{tau:.3g}" if 1e-3 <= abs(tau) < 1e5 else f"{tau:.2e}"
    return s


def format_rate(rate: float) -> str:
    """A rate as a percentage, rounded down (so 49.9 % never shows as 50 %)."""
    pct = math.floor(100 * float(rate) + 1e-9)
    return f"{pct}%"


def format_tail(share: float) -> str:
    """A tail share as a percentage, rounded up (so a non-zero tail never shows as 0 %)."""
    pct = math.ceil(100 * float(share) - 1e-9)
    return f"{pct}%"


def format_fallback(share: float) -> str:
    """A fallback share as a percentage rounded up like a tail, ``"NA"`` when the trials do not record it."""
    v = float(share)
    return "NA" if math.isnan(v) else format_tail(v)


def format_tau50(tau50: float, reaches: float) -> str:
    """``"1.23"`` or ``"∞ (reaches 34%)"``."""
    if math.isfinite(tau50):
        return format_tau(tau50)
    return f"∞ (reaches {format_rate(reaches)})"
