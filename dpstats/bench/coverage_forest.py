"""Agreement with the study on one ``sce`` instance: how often an interval reaches the study's conclusion.

A summary of the stored interval rows (as :mod:`dpstats.bench.coverage_summary`,
beside it in the benchmark's layers) for the instance pages of the report: per algorithm and
ε, the share of trials whose interval has the study's sign and the share
that excludes zero exactly when the study's interval does, beside the same
shares of the non-private interval on the same draws.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["forest_summary"]


def forest_summary(intervals: pd.DataFrame, instance: str) -> pd.DataFrame:
    """Per algorithm and ε on one ``sce`` instance: how often the interval agrees with the study.

    The *study's* interval is the non-private interval of its SE type on all
    its rows, and its conclusion is its sign and whether it excludes zero.
    For each trial, the private interval *agrees on the sign* when its
    midpoint has the study's sign, and *agrees on excluding zero* when it
    excludes zero exactly when the study's does (with the same sign). The
    same shares for the non-private interval on the same draws are the
    reference (sampling variation alone).

    Returns
    -------
    DataFrame
        ``algorithm, epsilon, trials, sign, excludes_zero, np_sign, np_excludes_zero, median_low,
        median_high`` (the medians of the interval ends over the trials).
    """
    df = intervals[(intervals["instance"] == instance) & (intervals["task"] == "sce")]
    rows: list[dict[str, Any]] = []
    if df.empty:
        return pd.DataFrame(rows)
    truth = float(_first(df["truth"].iloc[0]))
    ref_lo, ref_hi = _study_interval(df)
    sign = np.sign(truth)
    excl = ref_lo > 0 or ref_hi < 0
    for (name, eps), g in df.groupby(["algorithm", "epsilon"], sort=True):
        lo = np.array([_first(v, -math.inf) for v in g["low"]], dtype=float)
        hi = np.array([_first(v, math.inf) for v in g["high"]], dtype=float)
        nlo = np.array([_first(v, math.nan) for v in g["np_low"]], dtype=float)
        nhi = np.array([_first(v, math.nan) for v in g["np_high"]], dtype=float)
        rows.append({"algorithm": name, "epsilon": float(eps), "trials": len(g),
                     "sign": float(np.mean(_agree_sign(lo, hi, sign))),
                     "excludes_zero": float(np.mean(_agree_excl(lo, hi, sign, excl))),
                     "np_sign": float(np.mean(_agree_sign(nlo, nhi, sign))),
                     "np_excludes_zero": float(np.mean(_agree_excl(nlo, nhi, sign, excl))),
                     "median_low": float(np.median(lo)), "median_high": float(np.median(hi))})
    return pd.DataFrame(rows)


def _first(v: Any, default: float = math.nan) -> float:
    """The first coordinate of a stored value (a JSON list, a list or a number); ``default`` when missing."""
    import json

    if v is None or (isinstance(v, float) and math.isnan(v)):
        return default
    if isinstance(v, str):
        if v in ("", "None", "nan"):
            return default
        v = json.loads(v)
    if isinstance(v, (list, tuple, np.ndarray)):
        return float(v[0]) if len(v) else default
    return float(v)


def _study_interval(df: pd.DataFrame) -> tuple[float, float]:
    """The study's interval (the non-private one of its SE type on all rows), stored with every trial."""
    if "study_low" in df.columns:
        return _first(df["study_low"].iloc[0]), _first(df["study_high"].iloc[0])
    return math.nan, math.nan


def _agree_sign(lo: np.ndarray, hi: np.ndarray, sign: float) -> np.ndarray:
    """Per trial, whether a finite interval's midpoint has the study's sign (an infinite interval never)."""
    with np.errstate(invalid="ignore"):
        mid = np.where(np.isfinite(lo) & np.isfinite(hi), (lo + hi) / 2.0, np.nan)
        return np.asarray(np.sign(mid) == sign)


def _agree_excl(lo: np.ndarray, hi: np.ndarray, sign: float, excl: bool) -> np.ndarray:
    """Per trial, whether the interval excludes zero (on the study's side) exactly when the study's does."""
    pos, neg = lo > 0, hi < 0
    if not excl:
        return ~(pos | neg)
    return pos if sign > 0 else neg
