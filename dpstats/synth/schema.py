"""Public schemas: the domain a synthesizer may assume without paying for it.

A synthesizer's domain (the categories of each categorical column, the range
of each numeric column) must be *public*: known before the data are seen, or
paid for with privacy budget. Reading it from the private data is not
differentially private (the set of values that occur, or the largest value,
reveals rows). A :class:`Schema` therefore comes from

* a schema file beside the data (:meth:`Schema.from_file`, TOML or JSON), or
* the bounds of a corpus manifest (:meth:`Schema.from_bounds`), or
* the shipped data sets (:mod:`dpstats.synth.datasets`), or
* the data themselves (:meth:`Schema.from_data`), which is marked
  non-standard (``standard=False``) and warns with a
  :class:`~dpstats.privacy.accounting.PrivacyLeakWarning`.

Schema files
------------
TOML (JSON with the same structure also works)::

    label = "y"                       # optional: the label column

    [columns.age]
    type = "numeric"
    bounds = [18, 95]                 # public bounds, lo <= hi
    integer = true                    # optional, default false

    [columns.job]
    type = "categorical"
    levels = ["admin.", "blue-collar", "unknown"]

Columns are in file order. Every column of the data that a synthesizer should
see must be listed; columns of the data not in the schema are dropped.

Examples
--------
>>> s = Schema.from_dict({"label": "y", "columns": {
...     "x": {"type": "numeric", "bounds": [0, 10], "integer": True},
...     "y": {"type": "categorical", "levels": ["no", "yes"]}}})
>>> s.names, s.label, s["x"].bounds
(('x', 'y'), 'y', (0.0, 10.0))
"""

from __future__ import annotations

import gzip
import json
import math
import tomllib
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd

from dpstats.errors import CorpusError
from dpstats.privacy.accounting import PrivacyLeakWarning

__all__ = ["Column", "Schema", "SchemaError", "level_key", "level_keys", "read_table"]

Kind = Literal["categorical", "numeric"]


class SchemaError(CorpusError):
    """A schema or a data file does not fit: names the file and the column at fault.

    The message reads ``FILE: column 'COL': what is wrong``. It is a
    :class:`~dpstats.errors.CorpusError` (hence a ``ValueError``), so the
    command line reports it in one line with exit status 2.
    """

    def __init__(self, message: str, *, file: str | Path | None = None, column: str | None = None) -> None:
        self.file = Path(file) if file is not None else None
        self.instance = None
        self.field = column
        self.column = column
        self.message = message
        parts = []
        if self.file is not None:
            parts.append(str(self.file))
        if column is not None:
            parts.append(f"column {column!r}")
        parts.append(message)
        ValueError.__init__(self, ": ".join(parts))


def level_key(value: Any) -> str:
    """The key a value is matched to a level by (``1``, ``1.0`` and ``"1"`` all match ``"1"``).

    Missing values (``None``, NaN) have key ``""``; list ``""`` (or write
    them as ``"?"`` in the data) to allow them.
    """
    if value is None:
        return ""
    if isinstance(value, (bool, np.bool_)):
        return "TRUE" if value else "FALSE"
    if isinstance(value, (float, np.floating)):
        if math.isnan(value):
            return ""
        if float(value).is_integer():
            return str(int(value))
        return repr(float(value))
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    s = str(value)
    if s.upper() in ("TRUE", "FALSE"):
        return s.upper()
    return s


def level_keys(s: pd.Series) -> tuple[np.ndarray, list[str]]:
    """The :func:`level_key` of every value of ``s``, computed once per distinct value.

    Parameters
    ----------
    s : Series

    Returns
    -------
    inverse : ndarray of int, shape (len(s),)
    keys : list of str
        ``keys[inverse[i]]`` is ``level_key`` of the ``i``-th value, as
        ``s.map(level_key)`` gives it.

    Notes
    -----
    Values are grouped by :func:`pandas.factorize` only for numeric, boolean
    and string dtypes, where values that compare equal have equal keys. An
    object column may hold ``True``, ``1`` and ``1.0``, which compare equal
    but have keys ``"TRUE"``, ``"1"`` and ``"1"``; other dtypes are keyed
    value by value. Missing values are keyed value by value in every case.
    """
    dtype = s.dtype
    if not ((isinstance(dtype, np.dtype) and dtype.kind in "biuf") or isinstance(dtype, pd.StringDtype)):
        return np.arange(len(s)), list(s.map(level_key))
    inverse, uniques = pd.factorize(s, use_na_sentinel=True)
    keys = [level_key(v) for v in uniques]
    missing = inverse < 0
    if missing.any():
        inverse = inverse.copy()
        inverse[missing] = len(keys) + np.arange(int(missing.sum()))
        keys.extend(s[missing].map(level_key))
    return inverse, keys


@dataclass(frozen=True)
class Column:
    """One column of a schema.

    Attributes
    ----------
    name : str
    kind : {"categorical", "numeric"}
    levels : tuple, optional
        The public categories of a categorical column, in order (the codes
        ``0..k-1`` follow this order).
    bounds : (float, float), optional
        Public bounds ``lo <= hi`` of a numeric column; values outside are an
        error, not clipped silently.
    integer : bool
        The numeric column takes integer values (decoding rounds).
    """

    name: str
    kind: Kind
    levels: tuple[Any, ...] | None = None
    bounds: tuple[float, float] | None = None
    integer: bool = False

    def __post_init__(self) -> None:
        if self.kind == "categorical":
            if not self.levels:
                raise SchemaError("a categorical column needs a non-empty list 'levels'", column=self.name)
            keys = [level_key(v) for v in self.levels]
            if len(set(keys)) != len(keys):
                raise SchemaError(f"levels repeat: {list(self.levels)!r}", column=self.name)
        elif self.kind == "numeric":
            if self.bounds is None or len(self.bounds) != 2:
                raise SchemaError("a numeric column needs 'bounds = [lo, hi]'", column=self.name)
            lo, hi = float(self.bounds[0]), float(self.bounds[1])
            if not (math.isfinite(lo) and math.isfinite(hi) and lo <= hi):
                raise SchemaError(f"bounds must be finite with lo <= hi, got {list(self.bounds)!r}", column=self.name)
            object.__setattr__(self, "bounds", (lo, hi))
        else:
            raise SchemaError(f"type must be 'categorical' or 'numeric', got {self.kind!r}", column=self.name)

    @property
    def categorical(self) -> bool:
        return self.kind == "categorical"

    def to_dict(self) -> dict[str, Any]:
        if self.categorical:
            return {"type": "categorical", "levels": [_plain(v) for v in (self.levels or ())]}
        assert self.bounds is not None
        return {"type": "numeric", "bounds": list(self.bounds), "integer": self.integer}


def _plain(v: Any) -> Any:
    if isinstance(v, np.generic):
        return v.item()
    return v


@dataclass(frozen=True)
class Schema:
    """The public domain of a table: its columns in order and an optional label.

    Attributes
    ----------
    columns : tuple of Column
    label : str, optional
        The label column (classification target of the paper's F1 metric,
        and the column every 3-way workload marginal includes).
    standard : bool
        False when the domain was read from the private data
        (:meth:`from_data`): results are then not DP.
    source : str
        Where the schema came from (a file name, ``"manifest"``, ``"data"``).
    """

    columns: tuple[Column, ...]
    label: str | None = None
    standard: bool = True
    source: str = ""
    _index: dict[str, Column] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        index: dict[str, Column] = {}
        for c in self.columns:
            if c.name in index:
                raise SchemaError("column listed twice", file=self.source or None, column=c.name)
            index[c.name] = c
        if not index:
            raise SchemaError("a schema needs at least one column", file=self.source or None)
        if self.label is not None:
            if self.label not in index:
                raise SchemaError("the label is not a column of the schema", file=self.source or None,
                                  column=self.label)
            if not index[self.label].categorical:
                raise SchemaError("the label must be categorical", file=self.source or None, column=self.label)
        object.__setattr__(self, "_index", index)

    # -- access -----------------------------------------------------------
    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    def __getitem__(self, name: str) -> Column:
        try:
            return self._index[name]
        except KeyError:
            raise SchemaError("not a column of the schema", file=self.source or None, column=name) from None

    def __contains__(self, name: object) -> bool:
        return name in self._index

    def __iter__(self) -> Iterator[Column]:
        return iter(self.columns)

    def __len__(self) -> int:
        return len(self.columns)

    @property
    def categorical(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns if c.categorical)

    @property
    def numeric(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns if not c.categorical)

    def with_label(self, label: str | None) -> Schema:
        """The same schema with another label (``None`` for none)."""
        return Schema(self.columns, label, self.standard, self.source)

    def select(self, names: Sequence[str]) -> Schema:
        """The schema restricted to ``names`` (in that order); the label is kept if selected."""
        cols = tuple(self[n] for n in names)
        label = self.label if self.label in names else None
        return Schema(cols, label, self.standard, self.source)

    # -- construction -----------------------------------------------------
    @classmethod
    def from_dict(cls, raw: Mapping[str, Any], source: str = "") -> Schema:
        """Build from the parsed content of a schema file (see the module docstring)."""
        file = source or None
        if not isinstance(raw, Mapping):
            raise SchemaError("a schema must be a table with 'columns'", file=file)
        unknown = sorted(set(raw) - {"columns", "label"})
        if unknown:
            raise SchemaError(f"unknown key(s) {unknown}; known: ['columns', 'label']", file=file)
        cols_raw = raw.get("columns")
        if not isinstance(cols_raw, Mapping) or not cols_raw:
            raise SchemaError("'columns' must be a non-empty table {name = {type = ...}}", file=file)
        cols = []
        for name, spec in cols_raw.items():
            if not isinstance(spec, Mapping):
                raise SchemaError("must be a table with 'type'", file=file, column=name)
            bad = sorted(set(spec) - {"type", "levels", "bounds", "integer"})
            if bad:
                raise SchemaError(f"unknown key(s) {bad}; known: type, levels, bounds, integer", file=file,
                                  column=name)
            kind = spec.get("type")
            try:
                if kind == "categorical":
                    levels = spec.get("levels")
                    if not isinstance(levels, (list, tuple)):
                        raise SchemaError("'levels' must be a list", column=name)
                    cols.append(Column(str(name), "categorical", levels=tuple(levels)))
                else:
                    b = spec.get("bounds")
                    if kind == "numeric" and (not isinstance(b, (list, tuple)) or len(b) != 2
                                              or not all(isinstance(x, (int, float)) for x in b)):
                        raise SchemaError(f"'bounds' must be [lo, hi] numbers, got {b!r}", column=name)
                    cols.append(Column(str(name), kind, bounds=tuple(b) if b is not None else None,  # type: ignore[arg-type]
                                       integer=bool(spec.get("integer", False))))
            except SchemaError as exc:
                raise SchemaError(exc.message, file=file, column=name) from None
        label = raw.get("label")
        if label is not None and not isinstance(label, str):
            raise SchemaError(f"'label' must be a column name, got {label!r}", file=file)
        return cls(tuple(cols), label, True, source)

    @classmethod
    def from_file(cls, path: str | Path) -> Schema:
        """Read a TOML (``.toml``) or JSON (anything else) schema file."""
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise SchemaError(f"cannot read the schema file: {exc.__class__.__name__}: {exc}", file=path) from None
        try:
            raw = tomllib.loads(text) if path.suffix.lower() == ".toml" else json.loads(text)
        except (tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
            raise SchemaError(f"not valid {'TOML' if path.suffix.lower() == '.toml' else 'JSON'}: {exc}",
                              file=path) from None
        return cls.from_dict(raw, source=str(path))

    @classmethod
    def from_bounds(cls, bounds: Mapping[str, tuple[float, float]],
                    categorical: Mapping[str, Sequence[Any]] | None = None, *,
                    integer: Iterable[str] = (), label: str | None = None,
                    order: Sequence[str] | None = None, source: str = "manifest") -> Schema:
        """Build from a corpus manifest's ``bounds`` (numeric columns) and known categorical levels.

        Parameters
        ----------
        bounds : mapping of column to (lo, hi)
            E.g. :attr:`dpstats.data.manifest.InstanceSpec.bounds`.
        categorical : mapping of column to levels, optional
        integer : iterable of str
            Numeric columns that take integer values.
        label : str, optional
        order : sequence of str, optional
            Column order (default: numeric then categorical, as given).
        """
        categorical = dict(categorical or {})
        integer = set(integer)
        names = list(order) if order is not None else list(bounds) + [c for c in categorical if c not in bounds]
        cols = []
        for n in names:
            if n in categorical:
                cols.append(Column(n, "categorical", levels=tuple(categorical[n])))
            elif n in bounds:
                cols.append(Column(n, "numeric", bounds=tuple(bounds[n]), integer=n in integer))  # type: ignore[arg-type]
            else:
                raise SchemaError("no public bounds or levels for this column", file=source or None, column=n)
        return cls(tuple(cols), label, True, source)

    @classmethod
    def from_data(cls, df: pd.DataFrame, label: str | None = None, *, categorical: Iterable[str] | None = None,
                  warn: bool = True) -> Schema:
        """Read the domain from the (private) data: **not DP**, marked ``standard=False``.

        Columns of numeric dtype are numeric unless listed in ``categorical``
        (or the label); other columns are categorical. Bounds are the observed
        minimum and maximum, levels the observed values (sorted by
        :func:`level_key`). Warns with a
        :class:`~dpstats.privacy.accounting.PrivacyLeakWarning`.
        """
        if warn:
            warnings.warn(
                "the schema (categories and numeric ranges) is read from the private data: "
                "the synthetic data are not differentially private (non-standard domain); "
                "give a schema file with public levels and bounds",
                PrivacyLeakWarning, stacklevel=2,
            )
        cats = set(categorical or ())
        if label is not None:
            if label not in df.columns:
                raise SchemaError("the label is not a column of the data", column=label)
            cats.add(label)
        cols = []
        for name in df.columns:
            s = df[name]
            if name in cats or not (pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s)):
                keys: dict[str, Any] = {}
                for v in s.dropna().unique():
                    keys.setdefault(level_key(v), _plain(v))
                if s.isna().any():
                    keys.setdefault("", "")
                levels = tuple(keys[k] for k in sorted(keys))
                cols.append(Column(str(name), "categorical", levels=levels))
            else:
                x = s.to_numpy(dtype=float)
                x = x[np.isfinite(x)]
                if x.size == 0:
                    raise SchemaError("no finite value to read bounds from", column=str(name))
                integer = bool(np.all(x == np.round(x)))
                cols.append(Column(str(name), "numeric", bounds=(float(x.min()), float(x.max())), integer=integer))
        return cls(tuple(cols), label, False, "data")

    # -- output and checks ---------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.label is not None:
            out["label"] = self.label
        out["columns"] = {c.name: c.to_dict() for c in self.columns}
        return out

    def write_json(self, path: str | Path) -> None:
        """Write the schema as a JSON schema file (readable by :meth:`from_file`)."""
        Path(path).write_text(json.dumps(self.to_dict(), indent=2) + "\n", encoding="utf-8")

    def validate(self, df: pd.DataFrame, file: str | Path | None = None) -> pd.DataFrame:
        """Check ``df`` against the schema; return its schema columns in schema order.

        Raises
        ------
        SchemaError
            Naming ``file`` and the column: a schema column missing from the
            data, a categorical value not among the levels, a numeric column
            with missing values (with their number of rows), a numeric value
            not a finite number or outside the bounds.
        """
        missing = [c for c in self.names if c not in df.columns]
        if missing:
            where = f" {self.source}" if self.source and self.source not in ("data", str(file)) else ""
            raise SchemaError(f"named in the schema{where} but not a column of the data",
                              file=file, column=missing[0])
        for c in self.columns:
            s = df[c.name]
            if c.categorical:
                allowed = {level_key(v) for v in c.levels or ()}
                inverse, keys = level_keys(s)
                bad = np.array([k not in allowed for k in keys], dtype=bool)[inverse]
                if bad.any():
                    first = s[bad].iloc[0]
                    raise SchemaError(f"value {first!r} (row {int(np.flatnonzero(bad)[0]) + 1}) "
                                      f"is not among the schema's levels ({int(bad.sum())} such rows)",
                                      file=file, column=c.name)
            else:
                missing = s.isna().to_numpy()
                if missing.any():
                    i = int(np.flatnonzero(missing)[0])
                    k = int(missing.sum())
                    raise SchemaError(f"{k} row{'s' if k > 1 else ''} with a missing value (first: row {i + 1}); "
                                      "a numeric column needs a number in every row (drop or impute them first)",
                                      file=file, column=c.name)
                x = pd.to_numeric(s, errors="coerce").to_numpy(dtype=float)
                bad = ~np.isfinite(x)
                if bad.any():
                    i = int(np.flatnonzero(bad)[0])
                    raise SchemaError(f"value {s.iloc[i]!r} (row {i + 1}) is not a finite number "
                                      f"({int(bad.sum())} such rows)", file=file, column=c.name)
                assert c.bounds is not None
                lo, hi = c.bounds
                out = (x < lo) | (x > hi)
                if out.any():
                    i = int(np.flatnonzero(out)[0])
                    raise SchemaError(f"value {x[i]:g} (row {i + 1}) is outside the public bounds [{lo:g}, {hi:g}] "
                                      f"({int(out.sum())} such rows)", file=file, column=c.name)
        return df.loc[:, list(self.names)]


def _blank(path: Path) -> bool:
    """Whether a (possibly gzip-compressed) text file holds nothing but white space."""
    if not path.is_file() or path.suffix.lower() == ".parquet":
        return False
    opener = gzip.open if path.suffix.lower() == ".gz" else open
    with opener(path, "rb") as fh:
        while chunk := fh.read(1 << 16):
            if chunk.strip():
                return False
    return True


def read_table(path: str | Path) -> pd.DataFrame:
    """Read a CSV (optionally gzip-compressed; separator sniffed) or Parquet file.

    Raises
    ------
    SchemaError
        Naming the file when it cannot be read, is empty (no bytes, or only
        blank lines) or has a header and no rows.
    """
    path = Path(path)
    try:
        if _blank(path):
            raise SchemaError("empty file", file=path)
        if path.suffix.lower() == ".parquet":
            df = pd.read_parquet(path)
        else:
            df = pd.read_csv(path, sep=None, engine="python")
    except SchemaError:
        raise
    except pd.errors.EmptyDataError:
        raise SchemaError("empty file", file=path) from None
    except Exception as exc:  # pandas raises many types; all mean "cannot read"
        raise SchemaError(f"cannot read the data file: {exc.__class__.__name__}: {exc}", file=path) from None
    if len(df.columns) == 0:
        raise SchemaError("empty file", file=path)
    if len(df) == 0:
        raise SchemaError("empty file: a header and no rows", file=path)
    return df
