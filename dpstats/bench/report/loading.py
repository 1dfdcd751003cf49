"""Reading results for the report: trials, instance facts, and the exact profiles table."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dpstats.bench import evaluation as ev

__all__ = ["load_trials", "load_intervals", "instance_facts", "public_instance_ids", "profiles_table"]


def _default_results() -> str:
    try:
        from dpstats.bench.runner import DEFAULT_RESULTS

        return str(DEFAULT_RESULTS)
    except ImportError:  # pragma: no cover - the runner ships with dpstats
        return "results/bench.sqlite"

def _is_sqlite(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(16) == b"SQLite format 3\x00"
    except OSError:
        return False


def _read_results(paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
                  from_store: Callable[[Path], pd.DataFrame],
                  csv_ok: Callable[[Path], bool] = lambda p: True) -> list[pd.DataFrame]:
    """One frame per results file (a store through ``from_store``, or a CSV that ``csv_ok`` accepts),
    each with a ``corpus`` column (the store's corpus name, or the file's stem)."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    frames = []
    for p in map(Path, paths):
        if not p.is_file():
            raise FileNotFoundError(f"no results file {p}")
        if _is_sqlite(p):
            df = from_store(p)
        elif csv_ok(p):
            df = pd.read_csv(p, keep_default_na=True)
        else:
            continue
        if "corpus" not in df.columns:
            df["corpus"] = p.stem
        df["corpus"] = df["corpus"].fillna(p.stem).astype(str)
        frames.append(df)
    return frames


def load_trials(paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]]) -> pd.DataFrame:
    """Read trials from results files (SQLite from ``dpstats bench``) or ``trials.csv`` files.

    Parameters
    ----------
    paths : path or sequence of paths
        Several files are concatenated (e.g. the public and the withheld
        results); each keeps its ``corpus`` name.

    Returns
    -------
    DataFrame
        The trials, with a ``corpus`` column (the store's corpus name, or
        the file's stem when a CSV has none).
    """
    from dpstats.bench.store import read_trials

    frames = _read_results(paths, read_trials)
    out = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=list(ev.TRIAL_COLUMNS))
    for c in ("error", "estimate"):
        if c in out.columns:
            out[c] = out[c].where(~out[c].isin(["None", "nan"]), None)
    return out


def _has_interval_columns(p: Path) -> bool:
    head = pd.read_csv(p, nrows=0)
    return "covered" in head.columns and "np_covered" in head.columns


def _read_intervals_with_se(path: Path) -> pd.DataFrame:
    """A results file's coverage trials with ``study_se`` from its instance table (see
    :func:`dpstats.bench.inference.attach_study_se`)."""
    from dpstats.bench.coverage_summary import attach_study_se
    from dpstats.bench.store import read_instances, read_intervals

    iv = read_intervals(path)
    if iv.empty:
        return iv
    try:
        inst = read_instances(path)
    except Exception:  # noqa: BLE001 - an older file without the table: the SEs of clustered instances are bounds
        inst = None
    return attach_study_se(iv, inst)


def load_intervals(paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]]) -> pd.DataFrame:
    """Read coverage trials (``dpstats bench --inference``) from results files or ``intervals.csv`` files.

    A results file without coverage trials, or a CSV of point trials,
    contributes nothing; the frame is empty when no file has any. From a
    results file the trials get the column ``study_se`` (the study's SE of
    each ``sce`` instance, from the file's instance table), with which the
    per-instance summaries recover the non-private SE of clustered
    instances exactly (:func:`dpstats.bench.inference.attach_study_se`);
    ``intervals.csv`` keeps it.
    """
    frames = [df for df in _read_results(paths, _read_intervals_with_se, _has_interval_columns) if not df.empty]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _store_instances(paths: Iterable[str | os.PathLike[str]]) -> pd.DataFrame:
    frames = []
    for p in map(Path, paths):
        if p.is_file() and _is_sqlite(p):
            from dpstats.bench.store import read_instances

            try:
                frames.append(read_instances(p))
            except Exception:  # noqa: BLE001 - an older file without the table: facts come from elsewhere
                continue
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()

def public_instance_ids(corpus: Any = None) -> dict[str, dict[str, Any]]:
    """Instance id -> ``{"study", "task"}`` of the public corpus (empty when it cannot be read)."""
    from dpstats.data.corpus import Corpus, public_corpus_path

    try:
        c = corpus if corpus is not None else Corpus(public_corpus_path())
    except Exception:  # noqa: BLE001 - no corpus: nothing is known to be public
        return {}
    return {s.id: {"study": s.study, "task": s.task} for s in c.specs()}

def instance_facts(trials: pd.DataFrame, corpus: Any = None, results: Sequence[str | os.PathLike[str]] = ()
                   ) -> pd.DataFrame:
    """The facts shown on the Explore pages, one row per instance of the trials.

    Columns ``instance, study, task, n, d, baseline, se_type, columns,
    formula, coefficient, title, citation``; what a source does not know is
    left empty. Sources, in order: the trials, the results files'
    instance tables, the corpus manifests (default: the public corpus).
    """
    base = (trials.sort_values("instance").drop_duplicates("instance")
            [[c for c in ("instance", "study", "task", "n", "d", "baseline") if c in trials.columns]]
            .set_index("instance"))
    out = base.copy()
    for c in ("se_type", "columns", "formula", "coefficient", "title", "citation"):
        out[c] = None
    out = out.astype(object)
    st = _store_instances(results)
    if not st.empty:
        for r in st.itertuples(index=False):
            if r.instance in out.index:
                out.at[r.instance, "se_type"] = r.se_type
                facts = r.facts if isinstance(r.facts, dict) else {}
                if facts.get("columns"):
                    out.at[r.instance, "columns"] = ", ".join(map(str, facts["columns"]))
                if facts.get("coefficient"):
                    out.at[r.instance, "coefficient"] = facts["coefficient"]
    from dpstats.data.corpus import Corpus, public_corpus_path

    corp: Corpus | None
    try:
        corp = corpus if corpus is not None else Corpus(public_corpus_path())
    except Exception:  # noqa: BLE001 - no corpus available: the facts of the trials suffice
        corp = None
    if corp is not None:
        for s in corp.specs():
            if s.id in out.index and out.at[s.id, "study"] == s.study:
                study = corp.studies[s.study]
                out.at[s.id, "formula"] = s.formula
                if s.task == "sce":
                    out.at[s.id, "coefficient"] = s.coefficient
                    if out.at[s.id, "se_type"] is None:
                        out.at[s.id, "se_type"] = s.se
                if s.columns and out.at[s.id, "columns"] is None:
                    out.at[s.id, "columns"] = ", ".join(s.columns)
                out.at[s.id, "title"] = study.title
                out.at[s.id, "citation"] = study.citation
    return out.reset_index()

def _order_columns(df: pd.DataFrame) -> pd.DataFrame:
    df = df.copy()
    for c in ev.TRIAL_COLUMNS:
        if c not in df.columns:
            df[c] = np.nan
    extra = [c for c in df.columns if c not in ev.TRIAL_COLUMNS]
    return df[list(ev.TRIAL_COLUMNS) + extra]

def _sort_trials(df: pd.DataFrame) -> pd.DataFrame:
    keys = [c for c in ("corpus", "task", "algorithm", "instance", "epsilon", "delta", "seed") if c in df.columns]
    return df.sort_values(keys, kind="stable").reset_index(drop=True)

def profiles_table(trials: pd.DataFrame, prepared: pd.DataFrame | None = None) -> pd.DataFrame:
    """Every performance profile as exact step points.

    Parameters
    ----------
    trials : DataFrame
        A trials table.
    prepared : DataFrame, optional
        ``dpstats.bench.evaluation.prepare(trials)`` when the caller has it
        (the same rows in the same order); otherwise it is computed here,
        once for every task, ε and slice.

    Returns
    -------
    DataFrame
        Columns ``corpus, task, epsilon, slice, algorithm, interpretation,
        tau, rate`` (see :func:`dpstats.bench.evaluation.profile`).
    """
    prep = ev.prepare(trials) if prepared is None else prepared
    if len(prep) != len(trials):
        raise ValueError("prepared must be prepare(trials): the row counts differ")
    frames = []
    corpora = sorted(trials["corpus"].unique()) if "corpus" in trials.columns else [None]
    for corpus in corpora:
        mask = (np.ones(len(trials), dtype=bool) if corpus is None
                else (trials["corpus"] == corpus).to_numpy(dtype=bool, na_value=False))
        sub, psub = trials[mask], prep[mask]
        for task, eps in ev.group_values(sub):
            for sl in ev.slices_for(task):
                p = ev._profile_frame(psub, task, eps, sl)
                if p.empty:
                    continue
                frames.append(p.assign(corpus=corpus, task=task, epsilon=eps, slice=sl))
    cols = ["corpus", "task", "epsilon", "slice", "algorithm", "interpretation", "tau", "rate"]
    return pd.concat(frames, ignore_index=True)[cols] if frames else pd.DataFrame(columns=cols)

