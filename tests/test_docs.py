"""The docs site builds with warnings as errors (its examples run as doctests via pytest's --doctest-glob)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def test_docs_build_without_warnings(tmp_path: Path) -> None:
    pytest.importorskip("sphinx", reason="sphinx is not installed (pip install dpstats[docs])")
    pytest.importorskip("myst_parser", reason="myst-parser is not installed (pip install dpstats[docs])")
    out = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-b", "html", "-q", str(REPO / "docs"), str(tmp_path / "html")],
        capture_output=True, text=True, timeout=900,
    )
    assert out.returncode == 0, out.stderr[-5000:]
    index = (tmp_path / "html" / "index.html").read_text()
    assert "dpstats" in index
    # a page per study, generated from the manifests
    from dpstats.data.corpus import Corpus

    for sid in Corpus.public().studies:
        assert (tmp_path / "html" / "generated" / "studies" / f"{sid}.html").is_file(), sid
