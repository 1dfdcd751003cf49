"""Every ``>>>`` example in the docs' Markdown pages and the README runs and prints what the page says."""

from __future__ import annotations

import doctest
import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parent.parent / "docs"
FENCE = re.compile(r"^```(?:python|pycon)\s*\n(.*?)^```", re.S | re.M)


README = DOCS.parent / "README.md"


def _pages() -> list[Path]:
    docs = sorted(p for p in DOCS.rglob("*.md") if "_build" not in p.parts and "generated" not in p.parts)
    return docs + [README]


def _examples(page: Path) -> list[str]:
    return [b for b in FENCE.findall(page.read_text(encoding="utf-8")) if ">>>" in b]


PAGES = [p for p in _pages() if _examples(p)]


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(DOCS.parent)) for p in PAGES])
def test_markdown_examples_run(page: Path) -> None:
    parser = doctest.DocTestParser()
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    globs: dict = {}
    report: list[str] = []
    for i, block in enumerate(_examples(page)):
        test = parser.get_doctest(block, globs, f"{page.name}[{i}]", str(page), 0)
        runner.run(test, out=report.append, clear_globs=False)
        globs = test.globs  # DocTest copies globs: carry names into the next block
    assert runner.failures == 0, "".join(report)[-4000:]


def test_pages_have_examples() -> None:
    assert any(p.name == "quickstart.md" for p in PAGES)
    assert README in PAGES
