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
>>> from dpstats.data.corpus import Corpus
>>> corpus = Corpus.public()
>>> inst = corpus.instance("mroz87_lwage")
>>> inst.facts.n, inst.facts.d
(428, 4)
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd

from dpstats.data.instance import build_instance
from dpstats.data.manifest import TASKS, DatasetSpec, InstanceSpec, Reported, StudySpec, parse_manifest
from dpstats.data.sources import PROVIDERS, _widen_integers, read_path, read_source
from dpstats.errors import CorpusError

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


def public_corpus_path() -> Path:
    """Path of the public corpus shipped in the repository (``replication/``).

    ``DPSTATS_CORPUS`` overrides it.
    """
    env = os.environ.get("DPSTATS_CORPUS")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[2] / "replication"


# --------------------------------------------------------------------------
# Providers
# --------------------------------------------------------------------------


# --------------------------------------------------------------------------
# Manifest model
# --------------------------------------------------------------------------


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
    def public(cls) -> Corpus:
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
        """Build the :class:`~dpstats.data.instance.Instance` (design, outcome, facts)."""
        spec = self.spec(instance_id)
        return build_instance(spec, self.frame(spec.study, spec.dataset))

    def instances(self, task: str | None = None):
        """Build every instance (optionally of one task); each dataset is read once."""
        return [self.instance(s.id) for s in self.specs(task)]
