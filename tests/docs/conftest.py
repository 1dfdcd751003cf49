"""The docs site, built once per test session (sphinx -W: warnings are errors) for all of tests/docs."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class DocsBuild:
    html: Path  # the output directory
    returncode: int
    stderr: str

    def require(self) -> Path:
        """The output directory; fails the calling test if the build did not succeed."""
        assert self.returncode == 0, self.stderr[-5000:]
        return self.html


@pytest.fixture(scope="session")
def docs_build(tmp_path_factory: pytest.TempPathFactory) -> DocsBuild:
    pytest.importorskip("sphinx", reason="sphinx is not installed (pip install dpstats[docs])")
    pytest.importorskip("myst_parser", reason="myst-parser is not installed (pip install dpstats[docs])")
    html = tmp_path_factory.mktemp("docs") / "html"
    out = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-b", "html", "-q", str(REPO / "docs"), str(html)],
        capture_output=True, text=True, timeout=900,
    )
    return DocsBuild(html, out.returncode, out.stderr)
