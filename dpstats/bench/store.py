"""The benchmark's results store: an embedded SQLite file, written trial by trial.

One file holds the results of one corpus: a row per trial in ``trials``, with
a ``UNIQUE (algorithm, task, instance, epsilon, delta, seed)`` constraint, so
that no trial is ever stored twice; the runs that wrote them (``runs``: dpstats
version, platform, corpus, configuration); the algorithms (``algorithms``:
interpretation class, citation, defaults, where they came from); and the
instances (``instances``: study, task, n, d, the non-private estimate and the
baseline). The coverage benchmark (``dpstats bench --inference``, see
:mod:`dpstats.bench.inference`) stores its trials in the table ``intervals``
of the same file, with the same unique key: a coverage trial runs on a
resample, so it is never mixed with the point trials.

A trial's ``fallback`` column holds why its release is a fallback (the
release's ``details["fallback"]``), ``''`` for a trial that is not one, and
is NULL in rows written before the column existed: opening such a file for
writing adds the column, and :func:`read_trials` reads the flag of those rows
as missing.

The file is in WAL mode and every trial is committed as it finishes, so a run
that is killed (even with SIGKILL) loses at most the trials that were running,
and a rerun of the same command skips every stored trial. Readers
(:func:`read_trials`) can open the file while a run writes to it.

Examples
--------
>>> from dpstats.bench.store import read_trials
>>> trials = read_trials("results/bench.sqlite")  # doctest: +SKIP
>>> list(trials.columns)[:6]  # doctest: +SKIP
['algorithm', 'interpretation', 'instance', 'study', 'task', 'epsilon']
"""

from __future__ import annotations

import json
import math
import os
import platform
import socket
import sqlite3
import sys
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd

from dpstats.bench.model import STATUSES, TrialResult

__all__ = [
    "read_costs",
    "SCHEMA_VERSION",
    "TRIAL_COLUMNS",
    "EXTRA_COLUMNS",
    "Store",
    "StoreMismatch",
    "read_trials",
    "read_runs",
    "read_algorithms",
    "read_instances",
    "read_meta",
    "read_intervals",
]

SCHEMA_VERSION = 1

#: the columns of ``trials.csv`` and of :func:`read_trials`, in order
TRIAL_COLUMNS = (
    "algorithm", "interpretation", "instance", "study", "task", "epsilon", "delta", "seed", "status", "error",
    "baseline", "ratio", "seconds", "peak_mb", "n", "d",
)
#: further columns :func:`read_trials` appends
EXTRA_COLUMNS = ("error_value", "estimate", "fallback", "corpus")

_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS meta (
    key TEXT PRIMARY KEY,
    value TEXT
);
CREATE TABLE IF NOT EXISTS runs (
    run_id INTEGER PRIMARY KEY AUTOINCREMENT,
    started_at TEXT NOT NULL,
    finished_at TEXT,
    status TEXT NOT NULL,
    dpstats_version TEXT,
    python TEXT,
    numpy TEXT,
    platform TEXT,
    host TEXT,
    corpus_name TEXT,
    corpus_path TEXT,
    public INTEGER,
    config TEXT,
    planned INTEGER,
    skipped INTEGER,
    completed INTEGER,
    wall_seconds REAL
);
CREATE TABLE IF NOT EXISTS algorithms (
    task TEXT NOT NULL,
    algorithm TEXT NOT NULL,
    interpretation TEXT NOT NULL,
    citation TEXT,
    summary TEXT,
    ref TEXT,
    source TEXT,
    metadata TEXT,
    PRIMARY KEY (task, algorithm)
);
CREATE TABLE IF NOT EXISTS instances (
    instance TEXT PRIMARY KEY,
    study TEXT NOT NULL,
    task TEXT NOT NULL,
    n INTEGER NOT NULL,
    d INTEGER NOT NULL,
    baseline REAL NOT NULL,
    se_type TEXT,
    estimate TEXT,
    facts TEXT
);
CREATE TABLE IF NOT EXISTS trials (
    id INTEGER PRIMARY KEY,
    algorithm TEXT NOT NULL,
    interpretation TEXT NOT NULL,
    instance TEXT NOT NULL,
    study TEXT NOT NULL,
    task TEXT NOT NULL,
    epsilon REAL NOT NULL,
    delta REAL NOT NULL,
    seed INTEGER NOT NULL,
    status TEXT NOT NULL CHECK (status IN ({", ".join(repr(s) for s in STATUSES)})),
    error TEXT,
    estimate TEXT,
    error_value REAL,
    baseline REAL,
    ratio REAL,
    seconds REAL,
    peak_mb REAL,
    n INTEGER,
    d INTEGER,
    run_id INTEGER REFERENCES runs(run_id),
    finished_at TEXT,
    fallback TEXT,
    UNIQUE (algorithm, task, instance, epsilon, delta, seed)
);
CREATE TABLE IF NOT EXISTS intervals (
    id INTEGER PRIMARY KEY,
    algorithm TEXT NOT NULL,
    interpretation TEXT NOT NULL,
    instance TEXT NOT NULL,
    study TEXT NOT NULL,
    task TEXT NOT NULL,
    epsilon REAL NOT NULL,
    delta REAL NOT NULL,
    seed INTEGER NOT NULL,
    status TEXT NOT NULL CHECK (status IN ({", ".join(repr(s) for s in STATUSES)})),
    error TEXT,
    level REAL,
    se_type TEXT,
    n INTEGER,
    d INTEGER,
    n_draw INTEGER,
    truth TEXT,
    study_low TEXT,
    study_high TEXT,
    estimate TEXT,
    low TEXT,
    high TEXT,
    np_estimate TEXT,
    np_low TEXT,
    np_high TEXT,
    covered REAL,
    np_covered REAL,
    width_ratio REAL,
    seconds REAL,
    peak_mb REAL,
    run_id INTEGER REFERENCES runs(run_id),
    finished_at TEXT,
    UNIQUE (algorithm, task, instance, epsilon, delta, seed)
);
"""

#: the JSON columns of the ``intervals`` table (lists, one value per coordinate)
_INTERVAL_JSON = ("truth", "study_low", "study_high", "estimate", "low", "high", "np_estimate", "np_low", "np_high")


class StoreMismatch(ValueError):
    """The results file holds results that the current run would contradict."""


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _json(obj: Any) -> str:
    return json.dumps(obj, default=str, sort_keys=True)


def _columns(con: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in con.execute(f"PRAGMA table_info({table})")}


def _connect(path: Path, readonly: bool = False) -> sqlite3.Connection:
    if readonly:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30.0)
    else:
        con = sqlite3.connect(str(path), timeout=30.0)
    con.execute("PRAGMA busy_timeout = 30000")
    return con


class Store:
    """A results file, open for writing.

    Parameters
    ----------
    path : path-like
        The SQLite file (created with its folder when missing).

    Notes
    -----
    Only one process writes: the runner's main process (local workers and
    Dask tasks send their results back to it). Inserting a trial that is
    already stored is ignored, so two runs writing the same file never
    duplicate a row.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.con = _connect(self.path)
        self.con.execute("PRAGMA journal_mode = WAL")
        self.con.execute("PRAGMA synchronous = NORMAL")
        with self.con:
            self.con.executescript(_SCHEMA)
            row = self.con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            if row is None:
                self.con.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
            elif int(row[0]) != SCHEMA_VERSION:
                raise StoreMismatch(f"{self.path} has results schema {row[0]}; this dpstats writes {SCHEMA_VERSION}")
            if "fallback" not in _columns(self.con, "trials"):  # a file written before the column existed
                self.con.execute("ALTER TABLE trials ADD COLUMN fallback TEXT")
        self._instances: dict[str, tuple[Any, ...]] = {}

    def close(self) -> None:
        """Close the file (checkpointing the write-ahead log)."""
        self.con.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- the corpus ------------------------------------------------------
    def bind_corpus(self, name: str, path: str, public: bool) -> None:
        """Record the corpus the file holds results for; refuse another corpus.

        Raises
        ------
        StoreMismatch
            The file already holds results of a corpus with another name or
            public flag.
        """
        meta = dict(self.con.execute("SELECT key, value FROM meta").fetchall())
        if "corpus_name" in meta:
            if meta["corpus_name"] != name or meta.get("corpus_public") != str(bool(public)):
                raise StoreMismatch(
                    f"{self.path} holds results of corpus {meta['corpus_name']!r} "
                    f"(public={meta.get('corpus_public')}), not {name!r} (public={bool(public)}); "
                    "use another --results file"
                )
            return
        with self.con:
            self.con.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)",
                                 [("corpus_name", name), ("corpus_path", path), ("corpus_public", str(bool(public)))])

    def bind_secure(self, secure: bool) -> None:
        """Record whether the file's trials draw their noise securely (``dpstats bench --secure``).

        A file holds secure trials or ordinary (seeded, reproducible) ones,
        never both; a file with trials but no record holds ordinary ones.

        Raises
        ------
        StoreMismatch
            The file holds trials of the other kind.
        """
        row = self.con.execute("SELECT value FROM meta WHERE key = 'secure'").fetchone()
        if row is None:  # noqa: SIM108 (a nested conditional expression would read worse)
            old = "False" if self.count() else None
        else:
            old = row[0]
        if old is not None and old != str(bool(secure)):
            kind = "secure (OpenDP noise)" if old == "True" else "ordinary (seeded numpy noise)"
            raise StoreMismatch(f"{self.path} holds {kind} trials; a run with secure={bool(secure)} "
                                "needs another --results file")
        if row is None:
            with self.con:
                self.con.execute("INSERT OR REPLACE INTO meta VALUES ('secure', ?)", (str(bool(secure)),))

    # -- runs ------------------------------------------------------------
    def start_run(self, corpus_name: str, corpus_path: str, public: bool, config: Mapping[str, Any],
                  planned: int, skipped: int) -> int:
        """Add a run; returns its id."""
        import numpy as np

        from dpstats import __version__

        with self.con:
            cur = self.con.execute(
                "INSERT INTO runs (started_at, status, dpstats_version, python, numpy, platform, host, corpus_name,"
                " corpus_path, public, config, planned, skipped, completed) VALUES"
                " (?, 'running', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0)",
                (_now(), __version__, sys.version.split()[0], np.__version__, platform.platform(),
                 socket.gethostname(), corpus_name, corpus_path, int(bool(public)), _json(dict(config)), planned,
                 skipped),
            )
        assert cur.lastrowid is not None  # an INSERT sets it
        return int(cur.lastrowid)

    def finish_run(self, run_id: int, status: str, completed: int, wall_seconds: float) -> None:
        """Mark a run ``complete``, ``interrupted`` or ``failed``."""
        with self.con:
            self.con.execute(
                "UPDATE runs SET finished_at = ?, status = ?, completed = ?, wall_seconds = ? WHERE run_id = ?",
                (_now(), status, completed, wall_seconds, run_id),
            )

    # -- algorithms and instances -----------------------------------------
    def add_algorithm(self, meta: Mapping[str, Any], ref: str, source: str) -> None:
        """Record an algorithm (its :meth:`~dpstats.algorithms.Algorithm.metadata`).

        Raises
        ------
        StoreMismatch
            The file holds results of an algorithm of that name and task with
            another interpretation class.
        """
        row = self.con.execute("SELECT interpretation FROM algorithms WHERE task = ? AND algorithm = ?",
                               (meta["task"], meta["name"])).fetchone()
        if row is not None and row[0] != meta["interpretation"]:
            raise StoreMismatch(
                f"{self.path} holds results of {meta['task']} algorithm {meta['name']!r} as interpretation "
                f"{row[0]!r}; it is now {meta['interpretation']!r}. Use another --results file"
            )
        with self.con:
            self.con.execute(
                "INSERT OR REPLACE INTO algorithms VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (meta["task"], meta["name"], meta["interpretation"], meta.get("citation"), meta.get("summary"), ref,
                 source, _json(dict(meta))),
            )

    def add_instance(self, info: Mapping[str, Any]) -> None:
        """Record an instance's description (:meth:`~dpstats.bench.model.Problem.info`).

        Raises
        ------
        StoreMismatch
            The file holds the instance with another study, task, n, d or
            baseline (the corpus changed since those results were stored).
        """
        iid = info["instance"]
        sig = (info["study"], info["task"], int(info["n"]), int(info["d"]), float(info["baseline"]))
        if self._instances.get(iid) == sig:
            return
        row = self.con.execute("SELECT study, task, n, d, baseline FROM instances WHERE instance = ?",
                               (iid,)).fetchone()
        if row is not None:
            old = (row[0], row[1], int(row[2]), int(row[3]), float(row[4]))
            same = old[:4] == sig[:4] and math.isclose(old[4], sig[4], rel_tol=1e-9, abs_tol=0.0)
            if not same:
                raise StoreMismatch(
                    f"{self.path} holds instance {iid!r} as (study, task, n, d, baseline) = {old}, "
                    f"but the corpus now gives {sig}; use another --results file"
                )
        else:
            with self.con:
                self.con.execute(
                    "INSERT INTO instances VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (iid, *sig, info.get("se_type"), _json(info.get("estimate")), _json(info.get("facts"))),
                )
        self._instances[iid] = sig

    # -- trials ------------------------------------------------------------
    def stored_keys(self) -> set[tuple[str, str, str, float, float, int]]:
        """Keys ``(algorithm, task, instance, epsilon, delta, seed)`` of the stored trials."""
        rows = self.con.execute("SELECT algorithm, task, instance, epsilon, delta, seed FROM trials")
        return {(a, t, i, float(e), float(dl), int(s)) for a, t, i, e, dl, s in rows}

    def trial_seconds(self, inference: bool = False) -> dict[tuple[str, str, str, float], float]:
        """Mean stored ``seconds`` per trial of each ``(algorithm, task, instance, epsilon)``.

        Parameters
        ----------
        inference : bool
            Read the coverage trials (``intervals``) instead of the point trials.

        Returns
        -------
        dict
            Only keys with at least one trial whose ``seconds`` is recorded.
        """
        return _trial_seconds(self.con, inference)

    def instance_sizes(self) -> dict[str, int]:
        """``n * d`` of each stored instance (from ``instances``)."""
        return _instance_sizes(self.con)

    def add_trial(self, r: TrialResult, run_id: int | None = None, commit: bool = True) -> bool:
        """Store one trial; False when it was already stored.

        Parameters
        ----------
        r : TrialResult
        run_id : int, optional
        commit : bool
            Commit at once (default). With False the row joins the open
            transaction, which :meth:`commit` ends (the runner commits at
            least every 0.1 s).
        """
        est = None if r.estimate is None else json.dumps(list(r.estimate))
        try:
            cur = self.con.execute(
                "INSERT OR IGNORE INTO trials (algorithm, interpretation, instance, study, task, epsilon, delta, seed,"
                " status, error, estimate, error_value, baseline, ratio, seconds, peak_mb, n, d, run_id, finished_at,"
                " fallback) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (r.algorithm, r.interpretation, r.instance, r.study, r.task, float(r.epsilon), float(r.delta),
                 int(r.seed), r.status, r.error, est, r.error_value, r.baseline, r.ratio, r.seconds, r.peak_mb,
                 int(r.n), int(r.d), run_id, _now(), r.fallback or ""),
            )
        except BaseException:
            self.con.rollback()
            raise
        if commit:
            self.con.commit()
        return cur.rowcount == 1

    def stored_interval_keys(self) -> set[tuple[str, str, str, float, float, int]]:
        """Keys ``(algorithm, task, instance, epsilon, delta, seed)`` of the stored coverage trials."""
        rows = self.con.execute("SELECT algorithm, task, instance, epsilon, delta, seed FROM intervals")
        return {(a, t, i, float(e), float(dl), int(s)) for a, t, i, e, dl, s in rows}

    def add_interval(self, r: TrialResult, run_id: int | None = None, commit: bool = True) -> bool:
        """Store one coverage trial (``r.interval`` holds its interval record); False when already stored.

        A failed trial (timeout, memory, a dead worker) arrives without an
        interval record: it is stored as not covering, with an infinite width
        ratio.
        """
        import math

        rec = dict(r.interval or {})
        if r.interval is None:
            rec.update(covered=0.0, np_covered=math.nan, width_ratio=math.inf)

        def js(k: str) -> str | None:
            v = rec.get(k)
            return None if v is None else json.dumps(list(v))

        est = None if r.estimate is None else json.dumps(list(r.estimate))
        np_cov = rec.get("np_covered")
        np_cov = None if np_cov is None or (isinstance(np_cov, float) and math.isnan(np_cov)) else float(np_cov)
        try:
            cur = self.con.execute(
                "INSERT OR IGNORE INTO intervals (algorithm, interpretation, instance, study, task, epsilon, delta,"
                " seed, status, error, level, se_type, n, d, n_draw, truth, study_low, study_high, estimate, low,"
                " high, np_estimate, np_low, np_high, covered, np_covered, width_ratio, seconds, peak_mb, run_id,"
                " finished_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?,"
                " ?, ?, ?, ?, ?)",
                (r.algorithm, r.interpretation, r.instance, r.study, r.task, float(r.epsilon), float(r.delta),
                 int(r.seed), r.status, r.error, rec.get("level"), rec.get("se_type"), int(r.n), int(r.d),
                 rec.get("n_draw"), js("truth"), js("study_low"), js("study_high"), est, js("low"), js("high"),
                 js("np_estimate"), js("np_low"), js("np_high"), float(rec.get("covered", 0.0)), np_cov,
                 float(rec.get("width_ratio", math.inf)), r.seconds, r.peak_mb, run_id, _now()),
            )
        except BaseException:
            self.con.rollback()
            raise
        if commit:
            self.con.commit()
        return cur.rowcount == 1

    def count_intervals(self) -> int:
        """Number of stored coverage trials."""
        return int(self.con.execute("SELECT COUNT(*) FROM intervals").fetchone()[0])

    def commit(self) -> None:
        """Commit the trials added with ``commit=False``."""
        self.con.commit()

    def count(self) -> int:
        """Number of stored trials."""
        return int(self.con.execute("SELECT COUNT(*) FROM trials").fetchone()[0])


# --------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------


def _trial_seconds(con: sqlite3.Connection, inference: bool) -> dict[tuple[str, str, str, float], float]:
    table = "intervals" if inference else "trials"
    rows = con.execute(f"SELECT algorithm, task, instance, epsilon, AVG(seconds) FROM {table} "
                       "WHERE seconds IS NOT NULL GROUP BY algorithm, task, instance, epsilon")
    return {(a, t, i, float(e)): float(s) for a, t, i, e, s in rows}


def _instance_sizes(con: sqlite3.Connection) -> dict[str, int]:
    return {i: int(n) * int(d) for i, n, d in con.execute("SELECT instance, n, d FROM instances")}


def read_costs(path: str | os.PathLike[str], inference: bool = False
               ) -> tuple[dict[tuple[str, str, str, float], float], dict[str, int]]:
    """A results file's stored trial times and instance sizes, read-only.

    The same as :meth:`Store.trial_seconds` and :meth:`Store.instance_sizes`
    of that file, without opening it for writing (``dpstats bench
    --costs-from``).
    """
    con = _open_existing(path)
    try:
        return _trial_seconds(con, inference), _instance_sizes(con)
    finally:
        con.close()


def _open_existing(path: str | os.PathLike[str]) -> sqlite3.Connection:
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"no results file {p}")
    return _connect(p, readonly=True)


def read_meta(path: str | os.PathLike[str]) -> dict[str, str]:
    """The ``meta`` table (schema version, corpus name, path and public flag; ``secure``: OpenDP noise or not)."""
    con = _open_existing(path)
    try:
        return dict(con.execute("SELECT key, value FROM meta").fetchall())
    finally:
        con.close()


def read_trials(path: str | os.PathLike[str]) -> pd.DataFrame:
    """All stored trials as a data frame.

    Parameters
    ----------
    path : path-like
        A results file written by ``dpstats bench``.

    Returns
    -------
    DataFrame
        One row per trial, sorted by task, algorithm, instance, epsilon,
        delta and seed, with the columns of ``trials.csv`` in this order:
        ``algorithm, interpretation, instance, study, task, epsilon, delta,
        seed, status, error, baseline, ratio, seconds, peak_mb, n, d``,
        then ``error_value`` (the task metric; ``inf`` for failures),
        ``estimate`` (the release as a JSON list, or missing), ``fallback``
        (nullable boolean: whether the release is a fallback, its
        ``details["fallback"]``; ``<NA>`` for trials stored before the flag
        was recorded) and ``corpus`` (the corpus name).

        ``ratio`` is ``error_value / baseline``, ``inf`` for every status but
        ``ok``; ``error`` holds the decline reason or the error message
        (missing for ``ok``); ``seconds`` is the algorithm's wall time and
        ``peak_mb`` its peak resident memory above the worker's size at the
        start of the trial.

    Raises
    ------
    FileNotFoundError
        No file at ``path``.
    """
    con = _open_existing(path)
    try:
        meta = dict(con.execute("SELECT key, value FROM meta").fetchall())
        cols = [c for c in TRIAL_COLUMNS + EXTRA_COLUMNS if c != "corpus"]
        have = _columns(con, "trials")
        sel = [c if c in have else f"NULL AS {c}" for c in cols]  # an older file has no fallback column
        rows = con.execute(
            f"SELECT {', '.join(sel)} FROM trials ORDER BY task, algorithm, instance, epsilon, delta, seed"
        ).fetchall()
    finally:
        con.close()
    df = pd.DataFrame.from_records(rows, columns=cols)
    df["corpus"] = meta.get("corpus_name")
    df["fallback"] = pd.array([None if v is None else v != "" for v in df["fallback"]], dtype="boolean")
    for c in ("epsilon", "delta", "baseline", "ratio", "seconds", "peak_mb", "error_value"):
        df[c] = pd.to_numeric(df[c]).astype(float)
    for c in ("seed", "n", "d"):
        df[c] = pd.to_numeric(df[c]).astype("int64")
    for c in ("algorithm", "interpretation", "instance", "study", "task", "status", "corpus", "error", "estimate"):
        df[c] = df[c].astype("str")
    return df[list(TRIAL_COLUMNS + EXTRA_COLUMNS)].reset_index(drop=True)


def _read_table(path: str | os.PathLike[str], sql: str, json_cols: Iterable[str] = ()) -> pd.DataFrame:
    con = _open_existing(path)
    try:
        cur = con.execute(sql)
        cols = [c[0] for c in cur.description]
        df = pd.DataFrame.from_records(cur.fetchall(), columns=cols)
    finally:
        con.close()
    for c in json_cols:
        df[c] = [None if v is None else json.loads(v) for v in df[c]]
    return df


def read_runs(path: str | os.PathLike[str]) -> pd.DataFrame:
    """The runs that wrote the file (one row per ``dpstats bench`` invocation; ``config`` decoded)."""
    return _read_table(path, "SELECT * FROM runs ORDER BY run_id", ["config"])


def read_algorithms(path: str | os.PathLike[str]) -> pd.DataFrame:
    """The algorithms of the stored trials (``metadata`` decoded: citation, summary, defaults...)."""
    return _read_table(path, "SELECT * FROM algorithms ORDER BY task, algorithm", ["metadata"])


def read_instances(path: str | os.PathLike[str]) -> pd.DataFrame:
    """The instances of the stored trials (``estimate`` and ``facts`` decoded)."""
    return _read_table(path, "SELECT * FROM instances ORDER BY task, instance", ["estimate", "facts"])


def read_intervals(path: str | os.PathLike[str]) -> pd.DataFrame:
    """The stored coverage trials (``dpstats bench --inference``), one row per trial.

    Columns: :data:`dpstats.bench.inference.INTERVAL_COLUMNS` then ``corpus``.
    The per-coordinate columns (``truth``, ``low``, ``high``, ``np_low``, ...)
    are JSON lists; ``covered`` and ``np_covered`` are the shares of
    coordinates each interval covers, ``width_ratio`` the median ratio of the
    widths (``inf`` for an infinite interval or a failure). A file written
    before the table existed gives an empty frame.
    """
    from dpstats.bench.inference import INTERVAL_COLUMNS

    con = _open_existing(path)
    try:
        meta = dict(con.execute("SELECT key, value FROM meta").fetchall())
        has = con.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'intervals'").fetchone()
        rows = con.execute(
            f"SELECT {', '.join(INTERVAL_COLUMNS)} FROM intervals ORDER BY task, algorithm, instance, epsilon, delta, "
            "seed").fetchall() if has else []
    finally:
        con.close()
    df = pd.DataFrame.from_records(rows, columns=list(INTERVAL_COLUMNS))
    df["corpus"] = meta.get("corpus_name")
    for c in ("epsilon", "delta", "level", "covered", "np_covered", "width_ratio", "seconds", "peak_mb"):
        df[c] = pd.to_numeric(df[c]).astype(float)
    return df
