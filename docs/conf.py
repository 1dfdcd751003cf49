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
html_theme = "pydata_sphinx_theme"
html_title = "dpstats"
html_static_path = ["_static"]
html_css_files = ["dpstats.css"]
templates_path = ["_templates"]
html_theme_options = {
    # the whole table of contents in the left sidebar (_templates/sidebar-site-nav.html), top-level
    # pages folded, the current page's branch open; no top-bar links (16 top-level pages do not fit)
    "navbar_center": [],
    "show_nav_level": 1,
    "navigation_depth": 3,
    "show_toc_level": 2,
    # nothing fetched from outside at build or view time: no version switcher, no icon links,
    # no announcement banner
    "icon_links": [],
    "navbar_persistent": [],
    "navbar_end": ["search-button-field", "theme-switcher"],
    "footer_start": ["copyright"],
    "footer_end": ["sphinx-version"],
    "secondary_sidebar_items": ["page-toc"],
}
html_sidebars = {"**": ["sidebar-site-nav"]}
suppress_warnings = ["myst.header"]
nitpicky = False


def _generate(app) -> None:  # noqa: ANN001
    import gen_algorithm_figures
    import gen_studies

    gen_studies.write_pages(ROOT / "replication", Path(app.srcdir) / "generated" / "studies")
    # each algorithm page's benchmark figures, from docs/benchmark/*_public_quick.csv
    gen_algorithm_figures.write_figures(Path(app.srcdir))


def setup(app):  # noqa: ANN001
    app.connect("builder-inited", _generate)
