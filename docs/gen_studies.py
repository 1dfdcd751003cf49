"""Generate one docs page per study from its manifest (run at every docs build)."""

from __future__ import annotations

import shutil
from pathlib import Path


def _fmt_bounds(b) -> str:  # noqa: ANN001
    return ", ".join(f"`{k}` in [{lo:g}, {hi:g}]" for k, (lo, hi) in b.items()) or "none"


def write_pages(corpus_dir: Path, out: Path) -> None:
    """Write ``out/<study>.md`` for every study of the corpus and ``out/index.md``."""
    from dpstats.data.corpus import Corpus

    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    corpus = Corpus(corpus_dir)
    rows = []
    for sid, study in corpus.studies.items():
        counts = {t: sum(i.task == t for i in study.instances) for t in ("sce", "linreg", "mean")}
        rows.append(f"| [{study.title}]({sid}.md) | {study.year or ''} | {counts['sce']} | {counts['linreg']} | {counts['mean']} |")
        lines = [f"# {study.title}", ""]
        if study.authors:
            lines.append(f"**Authors:** {', '.join(study.authors)}" + (f" ({study.year})" if study.year else ""))
            lines.append("")
        if study.citation:
            lines += [f"**Citation:** {study.citation}", ""]
        if study.notes:
            lines += [study.notes, ""]
        lines += ["## Datasets", ""]
        for ds in study.datasets.values():
            src = ds.source or (f"file `{ds.path}`" if ds.path else "stack of " + ", ".join(f"`{s}`" for s in ds.stack))
            lines.append(f"- `{ds.name}`: `{src}`" if ds.source else f"- `{ds.name}`: {src}")
            for d in ds.derive:
                lines.append(f"  - derive `{d}`")
            if ds.query:
                lines.append(f"  - rows where `{ds.query}`")
        lines += ["", "## Instances", ""]
        for inst in study.instances:
            lines += [f"### `{inst.id}` ({inst.task})", ""]
            if inst.task == "mean":
                lines.append(f"- columns: {', '.join(f'`{c}`' for c in inst.columns)}")
            else:
                lines.append(f"- formula: `{inst.formula}`")
                if inst.fixed_effects:
                    lines.append(f"- fixed effects: {', '.join(f'`{c}`' for c in inst.fixed_effects)}")
                if inst.weights:
                    lines.append(f"- weights: `{inst.weights}`")
            if inst.task == "sce":
                lines.append(f"- coefficient: `{inst.coefficient}`; standard error: `{inst.se}`")
            lines.append(f"- public bounds: {_fmt_bounds(inst.bounds)}")
            if inst.table:
                lines.append(f"- printed in: {inst.table}")
            if inst.reported:
                lines.append("- reported (checked by `dpstats corpus verify`): "
                             + ", ".join(f"{k} = {v}" for k, v in inst.reported.items()))
            if inst.unreproduced:
                u = dict(inst.unreproduced)
                why = u.pop("why", "")
                lines.append("- published but not reproduced: " + ", ".join(f"{k} = {v}" for k, v in u.items())
                             + (f" ({why})" if why else ""))
            if inst.notes:
                lines.append(f"- notes: {inst.notes}")
            lines.append("")
        (out / f"{sid}.md").write_text("\n".join(lines), encoding="utf-8")
    index = [
        "# Studies of the public corpus",
        "",
        "One page per study, generated from its `study.toml` at every docs build.",
        "",
        "| study | year | sce | linreg | mean |",
        "|---|---|---|---|---|",
        *rows,
        "",
        "```{toctree}",
        ":hidden:",
        ":glob:",
        "",
        "*",
        "```",
        "",
    ]
    (out / "index.md").write_text("\n".join(index), encoding="utf-8")
