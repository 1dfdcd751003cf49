"""Evaluation: success rates, performance profiles and tau@50.

Everything here works on a trials table with one row per trial and (at
least) the columns ``algorithm, interpretation, instance, study, task,
epsilon, status, ratio, n, d``; an optional ``corpus`` column keeps corpora
apart. This is what :func:`dpstats.bench.store.read_trials` returns and what
``trials.csv`` holds.

Scoring
-------
A trial *succeeds at threshold* ``tau`` when its status is ``ok`` and its
error ratio ``r = error / baseline`` is finite with ``r <= tau``; failures
(``declined``, ``error``, ``timeout``, ``memory``, non-finite ratios) fail at
every ``tau``. For one task, privacy level and slice, with ``K`` studies,
``m_s`` instances of study ``s`` and ``T_i`` trials of instance ``i``:

.. math::

    S(\\tau) = \\sum_i \\frac{1}{K\\,m_{s(i)}} \\cdot \\frac{1}{T_i}
               \\sum_{t=1}^{T_i} \\mathbf 1[r_{it} \\le \\tau]

is a right-continuous step function of ``tau`` that jumps only at observed
finite ratios. It is computed exactly, with integer numerators over a common
denominator, so ``tau@50 = min {tau : S(tau) >= 1/2}`` is an observed ratio
and never a grid point or a rounding artefact. An instance on which an
algorithm has no trials counts as failed.

The leaderboard built on these (the ranking, the tails, the fallback share)
and the formatting of its values are in :mod:`dpstats.bench.leaderboard`.

Examples
--------
>>> import pandas as pd
>>> from dpstats.bench.evaluation import tau_at
>>> trials = pd.DataFrame({
...     "algorithm": "a", "interpretation": "standard", "instance": ["i1", "i1", "i2", "i2"],
...     "study": ["s1", "s1", "s2", "s2"], "task": "mean", "epsilon": 1.0,
...     "status": ["ok", "ok", "ok", "error"], "ratio": [0.5, 2.0, 1.0, float("inf")],
...     "n": 500, "d": 2})
>>> tau_at(trials, 0.5, "mean", 1.0).to_dict()
{'a': 1.0}
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd

from dpstats.bench.model import STATUSES
from dpstats.data.manifest import TASKS

__all__ = [
    "TASKS",
    "STATUSES",
    "FAILURE_STATUSES",
    "SLICES",
    "TRIAL_COLUMNS",
    "slices_for",
    "slice_mask",
    "prepare",
    "StepProfile",
    "step_profile",
    "profile",
    "success_rates",
    "instance_success",
    "tau_at",
]

FAILURE_STATUSES = STATUSES[1:]

#: slice name -> description; the predicates are in :func:`slice_mask`
SLICES: dict[str, str] = {
    "all": "every instance",
    "d<=10": "dimension d <= 10",
    "d>10": "dimension d > 10",
    "n/d<=100": "at most 100 samples per dimension",
    "n/d>100": "more than 100 samples per dimension",
}

#: the columns the evaluation needs
REQUIRED_COLUMNS = ("algorithm", "interpretation", "instance", "study", "task", "epsilon", "status", "ratio", "n", "d")

#: the columns of trials.csv, in order (extra columns follow them)
TRIAL_COLUMNS = (
    "algorithm", "interpretation", "instance", "study", "task", "epsilon", "delta", "seed", "status", "error",
    "baseline", "ratio", "seconds", "peak_mb", "n", "d",
)


def slices_for(task: str) -> tuple[str, ...]:
    """The slices reported for a task (mean estimation is sliced by n/d only)."""
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; choose one of {TASKS}")
    if task == "mean":
        return ("all", "n/d<=100", "n/d>100")
    return tuple(SLICES)


def slice_mask(n: Any, d: Any, name: str) -> np.ndarray:
    """Boolean mask of the rows with sizes ``(n, d)`` that belong to slice ``name``.

    ``n/d <= 100`` is tested as ``n <= 100 d`` (exact for integers).
    """
    n = np.asarray(n, dtype=float)
    d = np.asarray(d, dtype=float)
    if name == "all":
        return np.ones(n.shape, dtype=bool)
    if name == "d<=10":
        return np.asarray(d <= 10)
    if name == "d>10":
        return np.asarray(d > 10)
    if name == "n/d<=100":
        return np.asarray(n <= 100 * d)
    if name == "n/d>100":
        return np.asarray(n > 100 * d)
    raise ValueError(f"unknown slice {name!r}; known: {list(SLICES)}")


# --------------------------------------------------------------------------
# Input checking
# --------------------------------------------------------------------------


def prepare(trials: pd.DataFrame) -> pd.DataFrame:
    """Validate a trials table and add the column ``score``.

    ``score`` is the ratio when the trial succeeded in releasing a finite
    error and ``inf`` otherwise (any failure status, NaN or infinite ratio).

    Raises
    ------
    ValueError
        Missing columns, an unknown task or status, a negative ratio, an
        instance listed with two studies or two sizes, or an algorithm listed
        with two interpretation classes.
    """
    missing = [c for c in REQUIRED_COLUMNS if c not in trials.columns]
    if missing:
        raise ValueError(f"trials table lacks column(s) {missing}")
    df = trials.copy()
    df["status"] = df["status"].astype(str).str.strip()
    bad = sorted(set(df["status"].unique()) - set(STATUSES))
    if bad:
        raise ValueError(f"unknown trial status(es) {bad}; known: {STATUSES}")
    bad = sorted(set(df["task"].astype(str).unique()) - set(TASKS))
    if bad:
        raise ValueError(f"unknown task(s) {bad}; known: {TASKS}")
    df["task"] = df["task"].astype(str)
    df["algorithm"] = df["algorithm"].astype(str)
    df["instance"] = df["instance"].astype(str)
    df["study"] = df["study"].astype(str)
    df["interpretation"] = df["interpretation"].astype(str)
    if "corpus" in df.columns:
        df["corpus"] = df["corpus"].fillna("").astype(str)
    df["epsilon"] = pd.to_numeric(df["epsilon"], errors="raise").astype(float)
    ratio = pd.to_numeric(df["ratio"], errors="coerce").astype(float).to_numpy()
    if np.any(ratio < 0):
        raise ValueError("error ratios must be non-negative")
    ok = (df["status"] == "ok").to_numpy() & np.isfinite(ratio)
    df["score"] = np.where(ok, ratio, np.inf)
    if "fallback" in df.columns:
        df["fallback"] = _flags(df["fallback"], (df["status"] == "ok").to_numpy())
    ck = _corpus_keys(df)
    for key in ("study", "n", "d"):
        per = df.groupby(ck + ["task", "instance"])[key].nunique()
        if (per > 1).any():
            raise ValueError(f"instance(s) {list(per[per > 1].index.get_level_values(-1))} have several values of {key!r}")
    per = df.groupby(ck + ["task", "algorithm"])["interpretation"].nunique()
    if (per > 1).any():
        raise ValueError(f"algorithm(s) {list(per[per > 1].index.get_level_values(-1))} have several interpretations")
    return df


_TRUE = {"true", "1", "1.0", "yes"}
_FALSE = {"false", "0", "0.0", "no"}
_MISSING = {"", "nan", "none", "<na>", "na"}


def _flags(col: pd.Series, released: np.ndarray) -> pd.Series:
    """The ``fallback`` column as a nullable boolean (from bools, 0/1 or their CSV spellings); False for failures."""
    if col.dtype == bool or str(col.dtype) == "boolean":
        flags = col.astype("boolean")
    else:
        text = col.astype("string").str.strip().str.lower()
        bad = ~(text.isna() | text.isin(_TRUE | _FALSE | _MISSING))
        if bad.any():
            raise ValueError(f"fallback must be true, false or missing, got {col[bad].iloc[0]!r}")
        flags = pd.Series(pd.array([None] * len(col), dtype="boolean"), index=col.index)
        flags[text.isin(_TRUE).fillna(False).to_numpy(dtype=bool)] = True
        flags[text.isin(_FALSE).fillna(False).to_numpy(dtype=bool)] = False
    flags = flags.copy()
    flags[~np.asarray(released, dtype=bool)] = False
    return flags


def _corpus_keys(df: pd.DataFrame) -> list[str]:
    return ["corpus"] if "corpus" in df.columns else []


# --------------------------------------------------------------------------
# The exact step function
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class StepProfile:
    """The corpus success rate of one algorithm as an exact step function.

    ``S(tau) = numerators[k] / denominator`` for ``taus[k] <= tau < taus[k+1]``
    and 0 below ``taus[0]``.

    Attributes
    ----------
    taus : ndarray
        Distinct finite ratios observed, ascending.
    numerators : tuple of int
        Cumulative study-weighted success counts at each ``taus[k]``.
    denominator : int
        Common denominator: ``S = 1`` when every trial succeeds.
    """

    taus: np.ndarray
    numerators: tuple[int, ...]
    denominator: int

    @property
    def rates(self) -> np.ndarray:
        """``S`` at each ``taus[k]`` as floats."""
        return np.array([float(Fraction(c, self.denominator)) for c in self.numerators], dtype=float)

    def rate(self, tau: float) -> Fraction:
        """Exact ``S(tau)``."""
        k = int(np.searchsorted(self.taus, tau, side="right"))
        return Fraction(self.numerators[k - 1], self.denominator) if k else Fraction(0)

    @property
    def reach(self) -> Fraction:
        """``S(inf)``: the highest rate reached (the weighted share of finite ratios)."""
        return Fraction(self.numerators[-1], self.denominator) if self.numerators else Fraction(0)

    @property
    def reach_tau(self) -> float:
        """Smallest ``tau`` with ``S(tau) = S(inf)`` (``inf`` when nothing succeeds)."""
        return float(self.taus[-1]) if len(self.taus) else math.inf

    def tau_at(self, level: float | Fraction = Fraction(1, 2)) -> float:
        """Smallest ``tau`` with ``S(tau) >= level``; ``inf`` when ``S`` never gets there."""
        lv = Fraction(level)
        if lv <= 0:
            return 0.0
        for t, c in zip(self.taus, self.numerators, strict=False):
            if c * lv.denominator >= lv.numerator * self.denominator:
                return float(t)
        return math.inf

    def tail(self, tau: float) -> Fraction:
        """Exact ``1 - S(tau)``: the weighted share of trials with a ratio above ``tau`` or failed."""
        return 1 - self.rate(tau)

    @property
    def tau50(self) -> float:
        """``tau@50``: the smallest ``tau`` with ``S(tau) >= 1/2``."""
        return self.tau_at(Fraction(1, 2))


def step_profile(scores: pd.DataFrame, instances: pd.DataFrame) -> StepProfile:
    """Exact corpus success rate of one algorithm.

    Parameters
    ----------
    scores : DataFrame
        The algorithm's trials with columns ``instance`` and ``score`` (see
        :func:`prepare`).
    instances : DataFrame
        The instance set being scored, one row per instance, with columns
        ``instance`` and ``study``. Every study gets weight ``1/K`` shared
        equally by its instances. Trials of other instances are ignored;
        instances without trials count as failed.

    Returns
    -------
    StepProfile
    """
    inst = instances[["instance", "study"]].drop_duplicates()
    if inst["instance"].duplicated().any():
        raise ValueError("an instance appears with two studies")
    study_of = dict(zip(inst["instance"].to_numpy(dtype=object), inst["study"].to_numpy(dtype=object), strict=True))
    return _step(scores["instance"].to_numpy(dtype=object), scores["score"].to_numpy(dtype=float), study_of)


def _step(instances: np.ndarray, scores: np.ndarray, study_of: dict[Any, Any]) -> StepProfile:
    """:func:`step_profile` on plain arrays (``study_of``: instance -> study of the instance set)."""
    if not study_of:
        return StepProfile(np.array([], dtype=float), (), 1)
    per_study: dict[Any, int] = {}
    for s in study_of.values():
        per_study[s] = per_study.get(s, 0) + 1
    k = len(per_study)
    t_counts: dict[Any, int] = {}
    for i in instances:
        if i in study_of:
            t_counts[i] = t_counts.get(i, 0) + 1
    denoms = {i: k * per_study[study_of[i]] * t for i, t in t_counts.items()}
    # trial weight 1 / (K m_s T_i) = (L / D_i) / L with L the lcm of the D_i; the
    # weights of all trials of instance i add up to L / (K m_s), those of all
    # instances to L, so S = (sum of weights of successes) / L exactly
    L = math.lcm(*denoms.values()) if denoms else 1
    sums: dict[float, int] = {}
    for i, r in zip(instances, scores, strict=True):
        if i in denoms and math.isfinite(r):
            sums[r] = sums.get(r, 0) + L // denoms[i]
    taus = sorted(sums)
    cum, acc = [], 0
    for t in taus:
        acc += sums[t]
        cum.append(acc)
    return StepProfile(np.array(taus, dtype=float), tuple(cum), L)


def _instance_set(df: pd.DataFrame) -> pd.DataFrame:
    return df[["instance", "study", "n", "d"]].drop_duplicates("instance").reset_index(drop=True)


def _groups(df: pd.DataFrame, task: str | None, epsilon: float | None,
            slice_: str | None) -> Iterator[tuple[tuple[Any, ...], pd.DataFrame]]:
    """Yield ((corpus..., task, epsilon, slice), slice frame) for the requested groups."""
    ck = _corpus_keys(df)
    if task is not None:
        df = df[df["task"] == task]
    if epsilon is not None:
        df = df[np.isclose(df["epsilon"].to_numpy(), float(epsilon), rtol=1e-12, atol=0)]
    for key, g in df.groupby(ck + ["task", "epsilon"], sort=False):
        key = key if isinstance(key, tuple) else (key,)
        t = key[len(ck)]
        for s in slices_for(t) if slice_ is None else (slice_,):
            if slice_ is not None and s not in slices_for(t):
                raise ValueError(f"slice {s!r} is not reported for task {t!r}; use one of {slices_for(t)}")
            sub = g[slice_mask(g["n"], g["d"], s)]
            yield key + (s,), sub


def _profiles(sub: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, tuple[str, StepProfile]]]:
    inst = _instance_set(sub)
    study_of = dict(zip(inst["instance"].to_numpy(dtype=object), inst["study"].to_numpy(dtype=object), strict=True))
    algos = sub["algorithm"].to_numpy(dtype=object)
    interps = sub["interpretation"].to_numpy(dtype=object)
    insts = sub["instance"].to_numpy(dtype=object)
    scores = sub["score"].to_numpy(dtype=float)
    out = {}
    for algo in sorted(set(algos)):
        sel = algos == algo
        out[str(algo)] = (str(interps[sel][0]), _step(insts[sel], scores[sel], study_of))
    return inst, out


def _select(trials: pd.DataFrame, corpus: str | None) -> pd.DataFrame:
    df = prepare(trials)
    if "corpus" in df.columns:
        if corpus is not None:
            df = df[df["corpus"].astype(str) == str(corpus)]
        elif df["corpus"].nunique() > 1:
            raise ValueError(f"trials from several corpora {sorted(df['corpus'].unique())}: pass corpus=")
    elif corpus is not None:
        raise ValueError("the trials have no corpus column")
    return df


def profile(trials: pd.DataFrame, task: str, epsilon: float, slice: str = "all", corpus: str | None = None) -> pd.DataFrame:
    """Performance profiles: the exact corpus success rate of every algorithm as steps.

    Parameters
    ----------
    trials : DataFrame
        A trials table.
    task : str
    epsilon : float
    slice : str
        One of :func:`slices_for` ``(task)``.
    corpus : str, optional
        Required when the trials hold several corpora.

    Returns
    -------
    DataFrame
        Columns ``algorithm, interpretation, tau, rate``: one row per jump,
        where ``rate`` is ``S(tau)`` on ``[tau, next tau)`` (0 before the
        first). An algorithm with no finite ratio has a single row with
        ``tau = inf`` and ``rate = 0``. Rows are sorted by algorithm, then
        ``tau``. Plot with ``where="post"`` steps on a log axis.
    """
    return _profile_frame(_select(trials, corpus), task, epsilon, slice)


def _profile_frame(df: pd.DataFrame, task: str, epsilon: float, slice: str) -> pd.DataFrame:
    """:func:`profile` of a table already through :func:`prepare` and holding one corpus."""
    rows: list[dict[str, Any]] = []
    for _, sub in _groups(df, task, epsilon, slice):
        _, profs = _profiles(sub)
        for algo, (interp, p) in profs.items():
            if not len(p.taus):
                rows.append({"algorithm": algo, "interpretation": interp, "tau": math.inf, "rate": 0.0})
            for t, r in zip(p.taus, p.rates, strict=True):
                rows.append({"algorithm": algo, "interpretation": interp, "tau": float(t), "rate": float(r)})
    return pd.DataFrame(rows, columns=["algorithm", "interpretation", "tau", "rate"])


def success_rates(trials: pd.DataFrame, taus: Sequence[float], task: str, epsilon: float, slice: str = "all",
                  corpus: str | None = None) -> pd.DataFrame:
    """Corpus success rates ``S(tau)`` at given thresholds.

    Returns
    -------
    DataFrame
        Index: algorithms; columns: the thresholds; values in [0, 1].
    """
    df = _select(trials, corpus)
    data: dict[str, list[float]] = {}
    for _, sub in _groups(df, task, epsilon, slice):
        _, profs = _profiles(sub)
        for algo, (_, p) in profs.items():
            data[algo] = [float(p.rate(float(t))) for t in taus]
    return pd.DataFrame.from_dict(data, orient="index", columns=list(taus))


def instance_success(trials: pd.DataFrame, tau: float) -> pd.DataFrame:
    """Per-instance success rates at ``tau`` (share of an algorithm's trials on an instance with ratio <= tau).

    Returns
    -------
    DataFrame
        Columns ``[corpus,] task, epsilon, algorithm, instance, study, trials, success``.
    """
    df = prepare(trials)
    df["_hit"] = df["score"] <= tau
    keys = _corpus_keys(df) + ["task", "epsilon", "algorithm", "instance", "study"]
    out = df.groupby(keys, sort=True).agg(trials=("_hit", "size"), success=("_hit", "mean")).reset_index()
    return out


def tau_at(trials: pd.DataFrame, level: float, task: str, epsilon: float, slice: str = "all",
           corpus: str | None = None) -> pd.Series:
    """Smallest ``tau`` at which each algorithm's corpus success rate reaches ``level`` (``inf`` if never)."""
    df = _select(trials, corpus)
    out: dict[str, float] = {}
    for _, sub in _groups(df, task, epsilon, slice):
        _, profs = _profiles(sub)
        lv = Fraction(repr(float(level))) if isinstance(level, float) else Fraction(level)
        out.update({a: p.tau_at(lv) for a, (_, p) in profs.items()})
    return pd.Series(out, dtype=float, name=f"tau@{level:g}")


def group_values(trials: pd.DataFrame) -> Iterable[tuple[str, float]]:
    """The (task, epsilon) pairs present, in task order then epsilon."""
    df = trials[["task", "epsilon"]].drop_duplicates()
    return sorted(((str(t), float(e)) for t, e in df.itertuples(index=False)), key=lambda x: (TASKS.index(x[0]), x[1]))
