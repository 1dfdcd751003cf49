"""Manifests: the ``study.toml`` of a replication package, parsed and validated (format v1)."""

from __future__ import annotations

import decimal
import math
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dpstats.data.sources import PROVIDERS, READERS
from dpstats.errors import CorpusError

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


@dataclass(frozen=True)
class Reported:
    """A published number with the precision at which it was printed."""

    value: float
    decimals: int

    @classmethod
    def parse(cls, raw: Any) -> Reported:
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
