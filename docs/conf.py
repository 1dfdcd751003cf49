"""Sphinx configuration for the dpstats docs (built with -W: warnings are errors)."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

project = "dpstats"
author = "dpstats developers"
copyright = "2026, dpstats developers"
release = __import__("dpstats").__version__  # the one version string: dpstats/__init__.py

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.mathjax",
    "sphinx.ext.doctest",
    "sphinx.ext.napoleon",
    # MathJax 3 served from the site's own _static/mathjax/ (copied at the end of the build), not a
    # CDN, so formulas render in a browser without internet (tests/docs/test_render.py checks it)
    "sphinx-mathjax-offline",
]
myst_enable_extensions = ["dollarmath", "amsmath", "deflist", "colon_fence"]
myst_heading_anchors = 3
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store"]
napoleon_numpy_docstring = True
napoleon_google_docstring = False
autodoc_typehints = "none"
autodoc_member_order = "bysource"
html_theme = "alabaster"
html_static_path: list[str] = []
html_theme_options = {"description": "Differential privacy for economists", "fixed_sidebar": True}
suppress_warnings = ["myst.header"]
nitpicky = False


def _generate(app) -> None:  # noqa: ANN001
    import gen_studies

    gen_studies.write_pages(ROOT / "replication", Path(app.srcdir) / "generated" / "studies")


def setup(app):  # noqa: ANN001
    app.connect("builder-inited", _generate)
