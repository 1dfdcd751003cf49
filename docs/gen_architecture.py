"""Draw ``docs/architecture.svg``: the package's layers and the benchmark's data flow.

Plain SVG written by hand (no plotting library, no network), so the docs build
needs nothing to render it. The layers are read from ``pyproject.toml``
(``[tool.importlinter]``), so the figure follows the enforced contract. Run
``python docs/gen_architecture.py`` after changing the layers and commit the
SVG.
"""

from __future__ import annotations

import tomllib
from html import escape
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

#: what each layer holds (the figure's right-hand column)
WHAT = {
    "cli": "the dpstats command: one module per command (COMMANDS)",
    "api": "private_coef, private_ols, private_mean",
    "audit": "privacy audits",
    "bench": "model, trial, scoring, inference, runner, store, evaluation, metrics, tuning, report, synth/",
    "algorithms": "registry (BUILTIN_MODULES), base contract, sce/ linreg/ mean/, configurations",
    "synth": "synthesizers: schema, discretisers, pipeline, mechanisms (SYNTHESIZERS)",
    "ols": "covariance, non-private baselines, verify, R engine",
    "data": "manifest, sources, corpus, instance, facts (PublicFacts, TaskData)",
    "privacy": "accounting (budgets, accountants), mechanisms, randomness",
    "errors": "the exceptions",
    "params": "Param (a default and its source)",
}

#: the benchmark's data flow: (step, module)
FLOW = (
    ("corpus", "data.corpus"),
    ("instance", "data.instance"),
    ("baseline", "ols.baseline"),
    ("algorithm", "algorithms"),
    ("trial", "bench.trial"),
    ("score", "bench.scoring"),
    ("profile", "bench.evaluation"),
    ("leaderboard", "bench.report"),
)


def layers() -> list[list[str]]:
    """The layers of the import-linter contract, top first, each a list of independent packages."""
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contract = next(c for c in cfg["tool"]["importlinter"]["contracts"] if c["type"] == "layers")
    return [[p.strip() for p in layer.split("|")] for layer in contract["layers"]]


def _box(x: float, y: float, w: float, h: float, label: str, fill: str, bold: bool = True) -> str:
    weight = "bold" if bold else "normal"
    return (f'<rect x="{x}" y="{y}" width="{w}" height="{h}" rx="6" fill="{fill}" stroke="#334" />'
            f'<text x="{x + w / 2}" y="{y + h / 2 + 5}" text-anchor="middle" font-weight="{weight}">'
            f"{escape(label)}</text>")


def svg() -> str:
    """The figure as an SVG document."""
    rows = layers()
    width, row_h, gap, left, box_w = 980, 34, 14, 20, 360
    out = []
    y = 40
    out.append(f'<text x="{left}" y="24" font-weight="bold">Layers (each imports only the layers below it; '
               f'enforced by lint-imports)</text>')
    for k, row in enumerate(rows):
        w = (box_w - 8 * (len(row) - 1)) / len(row)
        for i, pkg in enumerate(row):
            out.append(_box(left + i * (w + 8), y, w, row_h, f"dpstats.{pkg}", "#dbe8f6"))
        what = "; ".join(f"{p}: {WHAT.get(p, '')}" if len(row) > 1 else WHAT.get(p, "") for p in row)
        out.append(f'<text x="{left + box_w + 20}" y="{y + row_h / 2 + 5}">{escape(what)}</text>')
        if k < len(rows) - 1:
            ax = left + box_w / 2
            out.append(f'<line x1="{ax}" y1="{y + row_h}" x2="{ax}" y2="{y + row_h + gap - 2}" '
                       f'stroke="#334" marker-end="url(#arrow)" />')
        y += row_h + gap
    y += 20
    out.append(f'<text x="{left}" y="{y}" font-weight="bold">Data flow of the benchmark</text>')
    y += 14
    step_w, step_gap = 104, 18
    for i, (step, module) in enumerate(FLOW):
        x = left + i * (step_w + step_gap)
        out.append(_box(x, y, step_w, row_h, step, "#e6f2e1"))
        out.append(f'<text x="{x + step_w / 2}" y="{y + row_h + 16}" text-anchor="middle" font-size="11">'
                   f"{escape(module)}</text>")
        if i < len(FLOW) - 1:
            out.append(f'<line x1="{x + step_w}" y1="{y + row_h / 2}" x2="{x + step_w + step_gap - 2}" '
                       f'y2="{y + row_h / 2}" stroke="#334" marker-end="url(#arrow)" />')
    height = y + row_h + 30
    head = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="13">'
            '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="6" markerHeight="6" '
            'orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="#334" /></marker></defs>'
            f'<rect width="{width}" height="{height}" fill="white" />')
    return head + "\n" + "\n".join(out) + "\n</svg>\n"


def main() -> None:
    (HERE / "architecture.svg").write_text(svg(), encoding="utf-8")


if __name__ == "__main__":
    main()
