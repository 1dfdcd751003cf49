"""What every page of the results site shares: labels, page names, number formats, rendering.

The pages are rendered from the Jinja2 templates in ``dpstats/bench/templates``
(:func:`environment`, autoescaping on); the Python side prepares plain
strings (formatted numbers, relative links).
"""

from __future__ import annotations

import math
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

__all__ = ["SLICE_LABELS", "SLICE_TAGS", "TASK_LABELS", "TEMPLATES", "environment"]

SLICE_LABELS = {
    "all": "all instances",
    "d<=10": "d ≤ 10",
    "d>10": "d > 10",
    "n/d<=100": "n/d ≤ 100",
    "n/d>100": "n/d > 100",
}
SLICE_TAGS = {"all": "all", "d<=10": "d-le-10", "d>10": "d-gt-10", "n/d<=100": "nd-le-100", "n/d>100": "nd-gt-100"}
TASK_LABELS = {"sce": "Single coefficient estimation", "linreg": "Linear regression", "mean": "Mean estimation"}

#: the folder of the page templates and the style sheet
TEMPLATES = Path(__file__).resolve().parent.parent / "templates"

_NAV = (("index.html", "Overview"), ("explore.html", "Explore"))


@lru_cache(maxsize=1)
def environment() -> Any:
    """The Jinja2 environment of the site: templates from :data:`TEMPLATES`, autoescaping on."""
    import jinja2

    return jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), autoescape=True,
                              undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                              keep_trailing_newline=True)


def _render(path: Path, template: str, title: str, depth: int, here: str = "", **context: Any) -> Path:
    text = environment().get_template(template).render(title=title, up="../" * depth, nav=_NAV, here=here,
                                                       **context)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", str(name))


def _eps(e: float) -> str:
    return f"{float(e):g}"


def _lb_page(task: str, eps: float) -> str:
    return f"leaderboard-{task}-eps{_eps(eps)}.html"


def _inference_page(task: str) -> str:
    return f"inference-{task}.html"


def _instance_page(iid: str) -> str:
    return f"explore/instance-{_safe(iid)}.html"


def _algorithm_page(task: str, name: str) -> str:
    return f"explore/algorithm-{task}-{_safe(name)}.html"


def _val(f: Any, key: str) -> Any:
    """``f[key]`` or None when absent or missing (NaN)."""
    try:
        v = f.get(key)
    except AttributeError:
        return None
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    return v


def _fmt(x: Any, digits: int = 3) -> str:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return "" if x is None else str(x)
    if math.isnan(v):
        return ""
    if math.isinf(v):
        return "∞"
    if v == int(v) and abs(v) < 1e9:
        return str(int(v))
    return f"{v:.{digits}g}"


def _pct(x: Any) -> str:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return ""
    return "" if math.isnan(v) else f"{100 * v:.1f}"
