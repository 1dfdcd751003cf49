"""The docs site builds with warnings as errors (its examples run as doctests via pytest's --doctest-glob)."""

from __future__ import annotations

from tests.docs.conftest import DocsBuild


def test_docs_build_without_warnings(docs_build: DocsBuild) -> None:
    html = docs_build.require()
    index = (html / "index.html").read_text()
    assert "dpstats" in index
    # a page per study, generated from the manifests
    from dpstats.data.corpus import Corpus

    for sid in Corpus.public().studies:
        assert (html / "generated" / "studies" / f"{sid}.html").is_file(), sid
