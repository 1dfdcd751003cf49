"""Reports: ``trials.csv``, ``leaderboard.csv``, a static site, and the release bundle.

``dpstats report [--results PATH ...] --out DIR`` reads benchmark results (a
results file written by ``dpstats bench``, or a ``trials.csv``) and writes

* ``trials.csv``: one row per trial (:data:`dpstats.bench.evaluation.TRIAL_COLUMNS`,
  then any extra columns);
* ``leaderboard.csv``: :func:`dpstats.bench.evaluation.leaderboard`, one row per
  task, privacy level, slice and algorithm;
* ``profiles.csv``: the exact performance profiles behind the plots (the
  step points of :func:`dpstats.bench.evaluation.profile` for every task, privacy
  level and slice);
* a static site (plain HTML and CSS, no scripts, no network resources; it
  works from ``file://``): ``index.html``; a Leaderboard page per task and
  privacy level with the slices, each with its table and its performance
  profile plot (PNG and SVG); and Explore pages per instance and per
  algorithm.

Explore pages show instance names and facts. They are written only for
corpora whose instances all belong to the public corpus, unless
``--explore`` asks for them (a report of the withheld corpus is for the
maintainers).

``dpstats release --out DIR`` writes the downloadable bundle of the public
corpus: the instance list with its facts, every algorithm's trials on the
public corpus, the leaderboard computed from them, a README and a manifest
with versions and checksums, as a folder and a ``.zip``. Trials of instances
that are not in the public corpus are never included.
"""

from __future__ import annotations

import hashlib
import html
import json
import math
import os
import platform
import re
import shutil
import sys
import zipfile
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from dpstats.bench import evaluation as ev

__all__ = [
    "load_trials",
    "instance_facts",
    "profiles_table",
    "plot_profiles",
    "write_report",
    "build_release",
    "public_instance_ids",
    "SLICE_LABELS",
]

SLICE_LABELS = {
    "all": "all instances",
    "d<=10": "d ≤ 10",
    "d>10": "d > 10",
    "n/d<=100": "n/d ≤ 100",
    "n/d>100": "n/d > 100",
}
SLICE_TAGS = {"all": "all", "d<=10": "d-le-10", "d>10": "d-gt-10", "n/d<=100": "nd-le-100", "n/d>100": "nd-gt-100"}
TASK_LABELS = {"sce": "Single coefficient estimation", "linreg": "Linear regression", "mean": "Mean estimation"}

#: curve colours (Okabe-Ito, then grey shades); none of them is used by the page CSS
COLORS = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000")
LINESTYLES = ("-", "--", "-.", ":")


# --------------------------------------------------------------------------
# Reading results
# --------------------------------------------------------------------------


def _default_results() -> str:
    try:
        from dpstats.bench.runner import DEFAULT_RESULTS

        return str(DEFAULT_RESULTS)
    except ImportError:  # pragma: no cover - the runner ships with dpstats
        return "results/bench.sqlite"


def _is_sqlite(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(16) == b"SQLite format 3\x00"
    except OSError:
        return False


def load_trials(paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]]) -> pd.DataFrame:
    """Read trials from results files (SQLite from ``dpstats bench``) or ``trials.csv`` files.

    Parameters
    ----------
    paths : path or sequence of paths
        Several files are concatenated (e.g. the public and the withheld
        results); each keeps its ``corpus`` name.

    Returns
    -------
    DataFrame
        The trials, with a ``corpus`` column (the store's corpus name, or
        the file's stem when a CSV has none).
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    frames = []
    for p in map(Path, paths):
        if not p.is_file():
            raise FileNotFoundError(f"no results file {p}")
        if _is_sqlite(p):
            from dpstats.bench.store import read_trials

            df = read_trials(p)
        else:
            df = pd.read_csv(p, keep_default_na=True)
        if "corpus" not in df.columns:
            df["corpus"] = p.stem
        df["corpus"] = df["corpus"].fillna(p.stem).astype(str)
        frames.append(df)
    out = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=list(ev.TRIAL_COLUMNS))
    for c in ("error", "estimate"):
        if c in out.columns:
            out[c] = out[c].where(~out[c].isin(["None", "nan"]), None)
    return out


def _store_instances(paths: Iterable[str | os.PathLike[str]]) -> pd.DataFrame:
    frames = []
    for p in map(Path, paths):
        if p.is_file() and _is_sqlite(p):
            from dpstats.bench.store import read_instances

            try:
                frames.append(read_instances(p))
            except Exception:  # noqa: BLE001 - an older file without the table: facts come from elsewhere
                continue
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def public_instance_ids(corpus: Any = None) -> dict[str, dict[str, Any]]:
    """Instance id -> ``{"study", "task"}`` of the public corpus (empty when it cannot be read)."""
    from dpstats.data.corpus import Corpus, public_corpus_path

    try:
        c = corpus if corpus is not None else Corpus(public_corpus_path())
    except Exception:  # noqa: BLE001 - no corpus: nothing is known to be public
        return {}
    return {s.id: {"study": s.study, "task": s.task} for s in c.specs()}


def instance_facts(trials: pd.DataFrame, corpus: Any = None, results: Sequence[str | os.PathLike[str]] = ()
                   ) -> pd.DataFrame:
    """The facts shown on the Explore pages, one row per instance of the trials.

    Columns ``instance, study, task, n, d, baseline, se_type, columns,
    formula, coefficient, title, citation``; what a source does not know is
    left empty. Sources, in order: the trials, the results files'
    instance tables, the corpus manifests (default: the public corpus).
    """
    base = (trials.sort_values("instance").drop_duplicates("instance")
            [[c for c in ("instance", "study", "task", "n", "d", "baseline") if c in trials.columns]]
            .set_index("instance"))
    out = base.copy()
    for c in ("se_type", "columns", "formula", "coefficient", "title", "citation"):
        out[c] = None
    out = out.astype(object)
    st = _store_instances(results)
    if not st.empty:
        for r in st.itertuples(index=False):
            if r.instance in out.index:
                out.at[r.instance, "se_type"] = r.se_type
                facts = r.facts if isinstance(r.facts, dict) else {}
                if facts.get("columns"):
                    out.at[r.instance, "columns"] = ", ".join(map(str, facts["columns"]))
                if facts.get("coefficient"):
                    out.at[r.instance, "coefficient"] = facts["coefficient"]
    from dpstats.data.corpus import Corpus, public_corpus_path

    try:
        c = corpus if corpus is not None else Corpus(public_corpus_path())
    except Exception:  # noqa: BLE001 - no corpus available: the facts of the trials suffice
        c = None
    if c is not None:
        for s in c.specs():
            if s.id in out.index and out.at[s.id, "study"] == s.study:
                study = c.studies[s.study]
                out.at[s.id, "formula"] = s.formula
                if s.task == "sce":
                    out.at[s.id, "coefficient"] = s.coefficient
                    if out.at[s.id, "se_type"] is None:
                        out.at[s.id, "se_type"] = s.se
                if s.columns and out.at[s.id, "columns"] is None:
                    out.at[s.id, "columns"] = ", ".join(s.columns)
                out.at[s.id, "title"] = study.title
                out.at[s.id, "citation"] = study.citation
    return out.reset_index()


# --------------------------------------------------------------------------
# Tables
# --------------------------------------------------------------------------


def _order_columns(df: pd.DataFrame) -> pd.DataFrame:
    df = df.copy()
    for c in ev.TRIAL_COLUMNS:
        if c not in df.columns:
            df[c] = np.nan
    extra = [c for c in df.columns if c not in ev.TRIAL_COLUMNS]
    return df[list(ev.TRIAL_COLUMNS) + extra]


def _sort_trials(df: pd.DataFrame) -> pd.DataFrame:
    keys = [c for c in ("corpus", "task", "algorithm", "instance", "epsilon", "delta", "seed") if c in df.columns]
    return df.sort_values(keys, kind="stable").reset_index(drop=True)


def profiles_table(trials: pd.DataFrame) -> pd.DataFrame:
    """Every performance profile as exact step points.

    Returns
    -------
    DataFrame
        Columns ``corpus, task, epsilon, slice, algorithm, interpretation,
        tau, rate`` (see :func:`dpstats.bench.evaluation.profile`).
    """
    frames = []
    corpora = sorted(trials["corpus"].unique()) if "corpus" in trials.columns else [None]
    for corpus in corpora:
        sub = trials if corpus is None else trials[trials["corpus"] == corpus]
        for task, eps in ev.group_values(sub):
            for sl in ev.slices_for(task):
                p = ev.profile(sub, task, eps, sl, corpus=corpus)
                if p.empty:
                    continue
                frames.append(p.assign(corpus=corpus, task=task, epsilon=eps, slice=sl))
    cols = ["corpus", "task", "epsilon", "slice", "algorithm", "interpretation", "tau", "rate"]
    return pd.concat(frames, ignore_index=True)[cols] if frames else pd.DataFrame(columns=cols)


# --------------------------------------------------------------------------
# Plots
# --------------------------------------------------------------------------


def _figure(width: float = 7.0, height: float = 4.2):
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure

    matplotlib.rcParams["svg.hashsalt"] = "dpstats"
    return Figure(figsize=(width, height), dpi=100)


def _null_formatter() -> Any:
    from matplotlib.ticker import NullFormatter

    return NullFormatter()


def _log_axis(ax: Any) -> None:
    """Log x axis with plain tick labels (0.1, 1, 10) and no minor labels."""
    from matplotlib.ticker import FuncFormatter

    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    ax.xaxis.set_minor_formatter(_null_formatter())


def _save(fig: Any, stem: Path) -> list[Path]:
    stem.parent.mkdir(parents=True, exist_ok=True)
    png, svg = stem.with_suffix(".png"), stem.with_suffix(".svg")
    fig.savefig(png, dpi=100, metadata={"Software": None})
    fig.savefig(svg, metadata={"Date": None, "Creator": None})
    return [png, svg]


def _xlim(values: Iterable[float]) -> tuple[float, float]:
    v = np.array([x for x in values if math.isfinite(x) and x > 0], dtype=float)
    if v.size == 0:
        return 0.1, 10.0
    lo, hi = float(v.min()) / 1.5, float(v.max()) * 1.5
    lo, hi = min(lo, 0.5), max(hi, 2.0)
    return lo, hi


def plot_profiles(curves: Sequence[Mapping[str, Any]], stem: Path, title: str) -> list[Path]:
    """Performance-profile plot: success rate against tau on a log axis, one step curve per entry.

    Parameters
    ----------
    curves : sequence of mappings
        Each with ``label``, ``taus`` and ``rates`` (step points of
        :func:`dpstats.bench.evaluation.profile`) and optionally ``dashed``.
    stem : Path
        Output path without suffix; ``.png`` and ``.svg`` are written.
    title : str

    Returns
    -------
    list of Path
    """
    fig = _figure()
    ax = fig.add_subplot(1, 1, 1)
    lo, hi = _xlim(t for c in curves for t in c["taus"])
    for k, c in enumerate(curves):
        taus = np.asarray(c["taus"], dtype=float)
        rates = np.asarray(c["rates"], dtype=float)
        keep = np.isfinite(taus)
        taus, rates = np.clip(taus[keep], lo, None), rates[keep]
        xs = np.r_[lo, taus, hi]
        ys = np.r_[0.0, rates, rates[-1] if rates.size else 0.0]
        ax.step(xs, ys, where="post", color=COLORS[k % len(COLORS)],
                linestyle="--" if c.get("dashed") else LINESTYLES[(k // len(COLORS)) % len(LINESTYLES)],
                linewidth=1.8, label=c["label"])
    _log_axis(ax)
    ax.set_xlim(lo, hi)
    ax.set_ylim(-0.02, 1.02)
    ax.axhline(0.5, color="#999999", linewidth=0.8, linestyle=":")
    ax.axvline(1.0, color="#999999", linewidth=0.8, linestyle=":")
    ax.set_xlabel("τ (error / sampling-error baseline)")
    ax.set_ylabel("success rate (study-weighted)")
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="major", alpha=0.25)
    if curves:
        ax.legend(fontsize=7, loc="lower right", framealpha=0.9)
    fig.subplots_adjust(left=0.09, right=0.98, bottom=0.12, top=0.92)
    return _save(fig, stem)


def plot_trials(rows: Sequence[tuple[str, Sequence[float], Sequence[float]]], stem: Path, title: str) -> list[Path]:
    """Error ratios over trials: one row per label, one point per trial (x: ratio, log); failures at the right.

    Parameters
    ----------
    rows : sequence of (label, epsilons, ratios)
        ``ratios`` are the trials' scores (``inf`` for failures).
    """
    fig = _figure(7.0, max(2.0, 0.32 * len(rows) + 1.2))
    ax = fig.add_subplot(1, 1, 1)
    lo, hi = _xlim(r for _, _, rs in rows for r in rs)
    band = max(2.0, (hi / lo) ** 0.12)  # the failure band: an eighth of the log range
    fail_x = hi * band ** 0.5
    eps_all = sorted({float(e) for _, es, _ in rows for e in es})
    colors = {e: COLORS[k % len(COLORS)] for k, e in enumerate(eps_all)}
    seen: set[float] = set()
    for y, (label, eps, ratios) in enumerate(rows):
        eps = np.asarray(eps, dtype=float)
        r = np.asarray(ratios, dtype=float)
        for e in sorted(set(eps.tolist())):
            m = eps == e
            off = (eps_all.index(e) - (len(eps_all) - 1) / 2) * 0.12
            x = np.clip(r[m], lo, None)
            bad = ~np.isfinite(x)
            if bad.any():  # failures spread over the grey band so that their count shows
                x[bad] = np.geomspace(hi, hi * band, int(bad.sum()) + 2)[1:-1]
            ax.scatter(x, np.full(x.shape, y + off), s=12, color=colors[e], marker="o", alpha=0.75,
                       label=f"ε = {e:g}" if e not in seen else None, linewidths=0)
            seen.add(e)
    ax.axvspan(hi, hi * band, color="#eeeeee", zorder=0)
    ax.text(fail_x, -0.6, "failed", ha="center", va="center", fontsize=7, color="#555555")
    _log_axis(ax)
    ax.set_xlim(lo, hi * band)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([r[0] for r in rows], fontsize=7)
    ax.set_ylim(len(rows) - 0.5, -0.9)
    ax.axvline(1.0, color="#999999", linewidth=0.8, linestyle=":")
    ax.set_xlabel("error ratio (error / baseline)")
    ax.set_title(title, fontsize=10)
    ax.grid(True, axis="x", alpha=0.25)
    if seen:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    longest = max((len(r[0]) for r in rows), default=4)
    height = fig.get_size_inches()[1]
    fig.subplots_adjust(left=min(0.45, max(0.1, 0.03 + 0.0095 * longest)), right=0.87,
                        bottom=min(0.45, 0.55 / height), top=1 - min(0.3, 0.35 / height))
    return _save(fig, stem)


# --------------------------------------------------------------------------
# HTML
# --------------------------------------------------------------------------

CSS = """\
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 0; color: #222; background: #fff; }
header { background: #2b2d42; color: #fff; padding: 0.6em 1.2em; }
header a { color: #fff; margin-right: 1.2em; text-decoration: none; }
header a.here { text-decoration: underline; }
main { padding: 0.8em 1.2em 3em 1.2em; max-width: 70em; }
h1 { font-size: 1.5em; } h2 { font-size: 1.25em; margin-top: 1.6em; } h3 { font-size: 1.05em; margin-top: 1.4em; }
table { border-collapse: collapse; margin: 0.6em 0; font-size: 0.92em; }
th, td { border: 1px solid #cccccc; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }
th { background: #f1f1f1; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.comparison td { color: #666666; font-style: italic; }
.note { color: #555555; font-size: 0.9em; }
figure { margin: 0.6em 0 1.4em 0; }
figure img { max-width: 100%; height: auto; border: 1px solid #dddddd; }
figcaption { font-size: 0.85em; color: #555555; }
nav.sub a { margin-right: 0.9em; }
code { background: #f4f4f4; padding: 0 0.2em; }
.ratios { font-family: ui-monospace, monospace; font-size: 0.85em; }
"""


def _e(x: Any) -> str:
    return html.escape("" if x is None else str(x), quote=True)


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", str(name))


def _eps(e: float) -> str:
    return f"{float(e):g}"


def _lb_page(task: str, eps: float) -> str:
    return f"leaderboard-{task}-eps{_eps(eps)}.html"


def _instance_page(iid: str) -> str:
    return f"explore/instance-{_safe(iid)}.html"


def _algorithm_page(task: str, name: str) -> str:
    return f"explore/algorithm-{task}-{_safe(name)}.html"


def _page(title: str, body: str, depth: int, here: str = "") -> str:
    up = "../" * depth
    links = [("index.html", "Overview"), ("explore.html", "Explore")]
    here_attr = ' class="here"'
    nav = "".join(f'<a href="{up}{h}"{here_attr if h == here else ""}>{_e(t)}</a>' for h, t in links)
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
        f"<title>{_e(title)} · dpstats benchmark</title>\n"
        f"<link rel=\"stylesheet\" href=\"{up}style.css\">\n</head>\n<body>\n"
        f"<header><strong>dpstats benchmark</strong> &nbsp; {nav}</header>\n<main>\n{body}\n</main>\n</body>\n</html>\n"
    )


def _table(header: Sequence[str], rows: Iterable[Sequence[str]], cls: str = "", attrs: str = "",
           row_attrs: Sequence[str] | None = None, num: Sequence[int] = ()) -> str:
    out = [f'<table class="{cls}" {attrs}>', "<thead><tr>" + "".join(f"<th>{h}</th>" for h in header) + "</tr></thead>",
           "<tbody>"]
    for k, r in enumerate(rows):
        ra = row_attrs[k] if row_attrs else ""
        cells = "".join(f'<td class="num">{c}</td>' if j in num else f"<td>{c}</td>" for j, c in enumerate(r))
        out.append(f"<tr {ra}>{cells}</tr>")
    out.append("</tbody></table>")
    return "\n".join(out)


def _figure_html(stem_rel: str, alt: str, caption: str) -> str:
    return (f'<figure><img src="{_e(stem_rel)}.png" alt="{_e(alt)}" width="700">'
            f'<figcaption>{_e(caption)} (<a href="{_e(stem_rel)}.svg">SVG</a>)</figcaption></figure>')


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
        return _e(x)
    if math.isnan(v):
        return ""
    if math.isinf(v):
        return "∞"
    if v == int(v) and abs(v) < 1e9:
        return str(int(v))
    return f"{v:.{digits}g}"


# --------------------------------------------------------------------------
# The report
# --------------------------------------------------------------------------


def _explorable(trials: pd.DataFrame, public: Mapping[str, Mapping[str, Any]], explore: bool | None) -> set[str]:
    corpora = set(trials["corpus"].unique())
    if explore is True:
        return corpora
    if explore is False:
        return set()
    ok = set()
    for c in corpora:
        sub = trials.loc[trials["corpus"] == c, ["instance", "study"]].drop_duplicates()
        if all(i in public and public[i]["study"] == s for i, s in sub.itertuples(index=False)):
            ok.add(c)
    return ok


def write_report(trials: pd.DataFrame, out: str | os.PathLike[str], *, facts: pd.DataFrame | None = None,
                 explore: bool | None = None, site: bool = True, public: Mapping[str, Any] | None = None
                 ) -> dict[str, Any]:
    """Write ``trials.csv``, ``leaderboard.csv``, ``profiles.csv`` and the static site.

    Parameters
    ----------
    trials : DataFrame
        A trials table (see :mod:`dpstats.bench.evaluation`).
    out : path-like
        Output folder (created).
    facts : DataFrame, optional
        :func:`instance_facts`; computed from the trials and the public corpus when omitted.
    explore : bool, optional
        Write Explore pages for every corpus (True), none (False), or only
        for corpora whose instances are all public (None, the default).
    site : bool
        Write the HTML site and the plots.
    public : mapping, optional
        :func:`public_instance_ids` (read from the public corpus when omitted).

    Returns
    -------
    dict
        ``leaderboard`` (DataFrame), ``files`` (list of written paths),
        ``explored`` (corpora with Explore pages).
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    trials = trials.copy()
    if "corpus" not in trials.columns:
        trials["corpus"] = "results"
    trials["corpus"] = trials["corpus"].fillna("results").astype(str)
    ev.prepare(trials)  # validate before writing anything
    trials = _sort_trials(_order_columns(trials))
    files: list[Path] = []
    trials.to_csv(out / "trials.csv", index=False)
    files.append(out / "trials.csv")
    lb = ev.leaderboard(trials)
    lb.to_csv(out / "leaderboard.csv", index=False)
    files.append(out / "leaderboard.csv")
    prof = profiles_table(trials)
    prof.to_csv(out / "profiles.csv", index=False)
    files.append(out / "profiles.csv")
    explored: set[str] = set()
    if site:
        if public is None:
            public = public_instance_ids()
        explored = _explorable(trials, public, explore)
        if facts is None:
            facts = instance_facts(trials)
        files += _write_site(trials, lb, prof, facts, out, explored)
    return {"leaderboard": lb, "files": files, "explored": sorted(explored)}


def _curves(prof: pd.DataFrame, lb: pd.DataFrame) -> list[dict[str, Any]]:
    curves = []
    for r in lb.itertuples(index=False):
        p = prof[prof["algorithm"] == r.algorithm]
        label = f"{r.algorithm}  τ@50 = {ev.format_tau50(r.tau50, r.reaches)}"
        if r.interpretation != "standard":
            label += f"  [{r.interpretation}]"
        curves.append({"label": label, "taus": p["tau"].to_numpy(), "rates": p["rate"].to_numpy(),
                       "dashed": r.interpretation != "standard"})
    return curves


def _leaderboard_table(g: pd.DataFrame, link_algorithms: bool, task: str, table_id: str, sl: str) -> str:
    rows, attrs = [], []
    for r in g.itertuples(index=False):
        name = _e(r.algorithm)
        if link_algorithms:
            name = f'<a href="{_e(_algorithm_page(task, r.algorithm))}">{name}</a>'
        rank = str(int(r.rank)) if not pd.isna(r.rank) else "comparison"
        rows.append([rank, name, _e(r.interpretation), _e(ev.format_tau50(r.tau50, r.reaches)),
                     _e(ev.format_rate(r.reaches))])
        cls = "ranked" if not pd.isna(r.rank) else "comparison"
        attrs.append(f'class="{cls}" data-algorithm="{_e(r.algorithm)}"')
    return _table(["Rank", "Algorithm", "Privacy class", "τ@50", "Highest success rate"], rows, cls="leaderboard",
                  attrs=f'id="{_e(table_id)}" data-slice="{_e(sl)}"', row_attrs=attrs, num=(0, 3, 4))


def _write_site(trials: pd.DataFrame, lb: pd.DataFrame, prof: pd.DataFrame, facts: pd.DataFrame, out: Path,
                explored: set[str]) -> list[Path]:
    files: list[Path] = []
    (out / "style.css").write_text(CSS, encoding="utf-8")
    files.append(out / "style.css")
    corpora = sorted(trials["corpus"].unique())
    groups = list(ev.group_values(trials))
    prep = ev.prepare(trials)

    # leaderboard pages ----------------------------------------------------
    for task, eps in groups:
        parts = [f"<h1>{_e(TASK_LABELS[task])}, ε = {_eps(eps)}</h1>"]
        others = " ".join(
            f'<a href="{_lb_page(t, e)}">{_e(t)} ε = {_eps(e)}</a>' for t, e in groups if (t, e) != (task, eps))
        parts.append(f'<nav class="sub">Other leaderboards: {others}</nav>')
        parts.append(
            '<p class="note">τ@50 is the smallest threshold τ at which the study-weighted share of trials with '
            "error ≤ τ × baseline reaches 50 %. “∞ (reaches x%)” means the success rate never reaches 50 %: "
            "these rank below every finite τ@50, by the highest rate reached, then by the threshold at which "
            "they reach it. Only algorithms of the standard privacy class are ranked; the others are shown for "
            "comparison.</p>")
        for corpus in corpora:
            sub = lb[(lb["corpus"] == corpus) & (lb["task"] == task) & (lb["epsilon"] == eps)]
            if sub.empty:
                continue
            if len(corpora) > 1:
                parts.append(f"<h2>Corpus {_e(corpus)}</h2>")
            for sl in ev.slices_for(task):
                g = sub[sub["slice"] == sl]
                if g.empty:
                    parts.append(f"<h3>Slice: {_e(SLICE_LABELS[sl])}</h3><p class=\"note\">No instances.</p>")
                    continue
                ni, ns = int(g["instances"].iloc[0]), int(g["studies"].iloc[0])
                parts.append(f"<h3>Slice: {_e(SLICE_LABELS[sl])} — {ni} instance{'s' * (ni != 1)} "
                             f"from {ns} stud{'ies' if ns != 1 else 'y'}</h3>")
                tid = f"lb-{_safe(corpus)}-{SLICE_TAGS[sl]}"
                parts.append(_leaderboard_table(g, corpus in explored, task, tid, sl))
                p = prof[(prof["corpus"] == corpus) & (prof["task"] == task) & (prof["epsilon"] == eps)
                         & (prof["slice"] == sl)]
                stem = f"img/profile-{_safe(corpus)}-{task}-eps{_eps(eps)}-{SLICE_TAGS[sl]}"
                files += plot_profiles(_curves(p, g), out / stem,
                                       f"{task}, ε = {_eps(eps)}, {SLICE_LABELS[sl]} ({corpus})")
                parts.append(_figure_html(stem, f"performance profiles, {task}, epsilon {_eps(eps)}, {sl}",
                                          "Performance profiles: success rate against τ (log axis)"))
        path = out / _lb_page(task, eps)
        path.write_text(_page(f"Leaderboard {task} ε = {_eps(eps)}", "\n".join(parts), 0), encoding="utf-8")
        files.append(path)

    # overview ----------------------------------------------------------------
    parts = ["<h1>dpstats benchmark results</h1>"]
    n_alg = len(prep[["task", "algorithm"]].drop_duplicates())
    parts.append(f"<p>{len(prep)} trials of {n_alg} algorithm{'s' * (n_alg != 1)} (counted per task) on "
                 f"{prep['instance'].nunique()} instances from {prep['study'].nunique()} studies; corpora: "
                 f"{_e(', '.join(corpora))}.</p>")
    rows = []
    for task, eps in groups:
        best = lb[(lb["task"] == task) & (lb["epsilon"] == eps) & (lb["slice"] == "all") & (lb["rank"] == 1)]
        lead = "; ".join(f"{_e(r.algorithm)} ({_e(ev.format_tau50(r.tau50, r.reaches))}, {_e(r.corpus)})"
                         for r in best.itertuples(index=False)) or "—"
        rows.append([f'<a href="{_lb_page(task, eps)}">{_e(TASK_LABELS[task])}</a>', _eps(eps), lead])
    parts.append("<h2>Leaderboards</h2>")
    parts.append(_table(["Task", "ε", "Rank 1 on all instances (τ@50, corpus)"], rows, cls="overview"))
    parts.append("<h2>Downloads</h2><ul>"
                 '<li><a href="trials.csv">trials.csv</a>: one row per trial</li>'
                 '<li><a href="leaderboard.csv">leaderboard.csv</a>: τ@50 and rank per task, ε, slice</li>'
                 '<li><a href="profiles.csv">profiles.csv</a>: the exact performance profiles</li></ul>')
    path = out / "index.html"
    path.write_text(_page("Overview", "\n".join(parts), 0, "index.html"), encoding="utf-8")
    files.append(path)

    # explore -----------------------------------------------------------------
    ex = prep[prep["corpus"].isin(explored)]
    parts = ["<h1>Explore</h1>"]
    if ex.empty:
        parts.append('<p class="note">No Explore pages: the results are not from the public corpus '
                     "(use <code>dpstats report --explore</code> for a private report).</p>")
    fx = facts.set_index("instance") if not facts.empty else pd.DataFrame()
    for task in [t for t in ev.TASKS if t in set(ex["task"])]:
        et = ex[ex["task"] == task]
        parts.append(f"<h2>{_e(TASK_LABELS[task])}</h2><h3>Algorithms</h3><ul>")
        for (name, interp), _ in et.groupby(["algorithm", "interpretation"], sort=True):
            parts.append(f'<li><a href="{_e(_algorithm_page(task, name))}">{_e(name)}</a> ({_e(interp)})</li>')
        parts.append("</ul><h3>Instances</h3>")
        rows = []
        for iid, g in et.groupby("instance", sort=True):
            f = fx.loc[iid] if iid in fx.index else None
            rows.append([f'<a href="{_e(_instance_page(iid))}">{_e(iid)}</a>', _e(g["study"].iloc[0]),
                         _fmt(g["n"].iloc[0]), _fmt(g["d"].iloc[0]), _fmt(_val(f, "baseline"), 4),
                         _e(_val(f, "se_type") or "")])
        parts.append(_table(["Instance", "Study", "n", "d", "Baseline", "SE type"], rows, cls="instances",
                            num=(2, 3, 4)))
        for iid, g in et.groupby("instance", sort=True):
            files += _instance_page_write(out, iid, g, fx)
        for name, g in et.groupby("algorithm", sort=True):
            files += _algorithm_page_write(out, task, name, g, lb)
    path = out / "explore.html"
    path.write_text(_page("Explore", "\n".join(parts), 0, "explore.html"), encoding="utf-8")
    files.append(path)
    return files


def _trial_stats(g: pd.DataFrame) -> list[str]:
    s = g["score"].to_numpy(dtype=float)
    fin = s[np.isfinite(s)]
    counts = g["status"].value_counts()
    fails = ", ".join(f"{k} {int(counts[k])}" for k in ev.FAILURE_STATUSES if counts.get(k, 0))
    inf_ok = int(((g["status"] == "ok") & ~np.isfinite(s)).sum())
    if inf_ok:
        fails = (fails + ", " if fails else "") + f"infinite error {inf_ok}"
    return [str(len(s)), _fmt(np.median(fin)) if fin.size else "—", _fmt(fin.min()) if fin.size else "—",
            _fmt(fin.max()) if fin.size else "—", f"{100 * float(np.mean(s <= 1.0)):.0f}%", _e(fails or "—")]


def _ratios_cell(g: pd.DataFrame) -> str:
    g = g.sort_values("seed") if "seed" in g.columns else g
    return '<span class="ratios">' + " ".join(
        _fmt(x) if math.isfinite(x) else "✗" for x in g["score"].to_numpy(dtype=float)) + "</span>"


def _instance_page_write(out: Path, iid: str, g: pd.DataFrame, fx: pd.DataFrame) -> list[Path]:
    files: list[Path] = []
    f = fx.loc[iid] if iid in fx.index else pd.Series(dtype=object)
    task = g["task"].iloc[0]
    n, d = int(g["n"].iloc[0]), int(g["d"].iloc[0])
    slices = [SLICE_LABELS[s] for s in ev.slices_for(task) if s != "all" and ev.slice_mask(n, d, s)]
    facts_rows = [
        ("Study", _e(g["study"].iloc[0]) + (f" — {_e(_val(f, 'title'))}" if _val(f, "title") else "")),
        ("Citation", _e(_val(f, "citation") or "")),
        ("Task", _e(task)), ("n", str(n)), ("d", str(d)), ("n/d", _fmt(n / d)),
        ("Slices", _e(", ".join(slices))),
        ("Formula", _e(_val(f, "formula") or "")),
        ("Columns", _e(_val(f, "columns") or "")),
        ("Coefficient", _e(_val(f, "coefficient") or "")), ("SE type", _e(_val(f, "se_type") or "")),
        ("Baseline", _fmt(_val(f, "baseline"), 6) if _val(f, "baseline") is not None else ""),
    ]
    parts = [f"<h1>Instance {_e(iid)}</h1>",
             _table(["Fact", "Value"], [[a, b] for a, b in facts_rows if b], cls="facts")]
    rows_plot, rows = [], []
    for (name, eps), h in g.groupby(["algorithm", "epsilon"], sort=True):
        rows.append([f'<a href="{_e("algorithm-" + task + "-" + _safe(name) + ".html")}">{_e(name)}</a>',
                     _eps(eps), *_trial_stats(h), _ratios_cell(h)])
    for name, h in g.groupby("algorithm", sort=True):
        rows_plot.append((name, h["epsilon"].to_numpy(), h["score"].to_numpy()))
    stem = f"img/instance-{_safe(iid)}"
    files += plot_trials(rows_plot, out / "explore" / stem, f"{iid}: error ratios over trials")
    parts.append("<h2>Error ratios over trials</h2>")
    parts.append(_figure_html(stem, f"error ratios of every trial on {iid}",
                              "Each point is a trial; failed trials (declined, error, timeout, memory, "
                              "infinite error) are drawn in the grey band"))
    parts.append(_table(["Algorithm", "ε", "Trials", "Median ratio", "Min", "Max", "Success at τ = 1", "Failures",
                         "Ratios by seed (✗ = failed)"], rows, cls="trials", num=(1, 2, 3, 4, 5, 6)))
    path = out / _instance_page(iid)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(_page(f"Instance {iid}", "\n".join(parts), 1), encoding="utf-8")
    files.append(path)
    return files


def _algorithm_page_write(out: Path, task: str, name: str, g: pd.DataFrame, lb: pd.DataFrame) -> list[Path]:
    files: list[Path] = []
    interp = g["interpretation"].iloc[0]
    parts = [f"<h1>{_e(name)} ({_e(task)})</h1>", f"<p>Privacy class: <strong>{_e(interp)}</strong>.</p>"]
    mine = lb[(lb["algorithm"] == name) & (lb["task"] == task) & lb["corpus"].isin(set(g["corpus"]))]
    rows = [[_e(r.corpus), _eps(r.epsilon), _e(SLICE_LABELS[r.slice]), _e(ev.format_tau50(r.tau50, r.reaches)),
             "" if pd.isna(r.rank) else str(int(r.rank)), f"{r.instances} / {r.studies}"]
            for r in mine.itertuples(index=False)]
    parts.append("<h2>Leaderboard positions</h2>")
    parts.append(_table(["Corpus", "ε", "Slice", "τ@50", "Rank", "Instances / studies"], rows, cls="positions",
                         num=(1, 4)))
    curves = []
    for corpus in sorted(set(g["corpus"])):
        for eps in sorted(set(g["epsilon"])):
            sub = g[(g["corpus"] == corpus) & (g["epsilon"] == eps)]
            if sub.empty:
                continue
            inst = ev._instance_set(sub)
            p = ev.step_profile(sub, inst)
            lbl = f"ε = {_eps(eps)}  τ@50 = {ev.format_tau50(p.tau50, float(p.reach))}"
            curves.append({"label": lbl + (f" ({corpus})" if g["corpus"].nunique() > 1 else ""),
                           "taus": p.taus if len(p.taus) else np.array([math.inf]),
                           "rates": p.rates if len(p.taus) else np.array([0.0])})
    stem = f"img/algorithm-{task}-{_safe(name)}"
    files += plot_profiles(curves, out / "explore" / stem, f"{name} ({task}): profiles on the instances it ran on")
    parts.append(_figure_html(stem, f"performance profiles of {name}", "Success rate against τ at each ε "
                              "(the instances this algorithm ran on, studies weighted equally)"))
    rows = []
    for (iid, eps), h in g.groupby(["instance", "epsilon"], sort=True):
        rows.append([f'<a href="instance-{_e(_safe(iid))}.html">{_e(iid)}</a>', _eps(eps), *_trial_stats(h),
                     _ratios_cell(h)])
    parts.append("<h2>Error ratios over trials, per instance</h2>")
    parts.append(_table(["Instance", "ε", "Trials", "Median ratio", "Min", "Max", "Success at τ = 1", "Failures",
                         "Ratios by seed (✗ = failed)"], rows, cls="trials", num=(1, 2, 3, 4, 5, 6)))
    path = out / _algorithm_page(task, name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(_page(f"{name} ({task})", "\n".join(parts), 1), encoding="utf-8")
    files.append(path)
    return files


# --------------------------------------------------------------------------
# Release bundle
# --------------------------------------------------------------------------


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _versions() -> dict[str, str]:
    import importlib.metadata as md

    from dpstats import __version__

    out = {"dpstats": __version__, "python": sys.version.split()[0], "platform": platform.platform()}
    for pkg in ("numpy", "scipy", "pandas", "matplotlib", "statsmodels", "patsy"):
        try:
            out[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            out[pkg] = "absent"
    return out


def _git_commit() -> str | None:
    import subprocess

    root = Path(__file__).resolve().parents[2]
    try:
        r = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    if r.returncode != 0 or not r.stdout.strip():
        return None
    commit = r.stdout.strip()
    try:
        st = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no", "--", "dpstats"],
                            capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return commit
    return commit + ("-dirty" if st.stdout.strip() else "")


def corpus_instance_table(corpus: Any) -> tuple[pd.DataFrame, list[str]]:
    """The public instance list with facts: ``instance, study, task, n, d, columns, se_type, baseline, ...``.

    Returns
    -------
    table : DataFrame
    problems : list of str
        Instances that could not be built (left out of the table).
    """
    from dpstats.ols.baseline import compute_baseline

    rows, problems = [], []
    for s in corpus.specs():
        try:
            inst = corpus.instance(s.id)
            b = compute_baseline(inst)
        except Exception as exc:  # noqa: BLE001 - reported in the manifest, not fatal
            problems.append(f"{s.id}: {type(exc).__name__}: {exc}")
            continue
        f = inst.facts
        study = corpus.studies[s.study]
        rows.append({
            "instance": s.id, "study": s.study, "task": s.task, "n": f.n, "d": f.d,
            "columns": " | ".join(f.columns), "outcome": f.outcome or "", "coefficient": f.coefficient or "",
            "se_type": b.se_type or "", "baseline": float(b.baseline),
            "estimate": json.dumps([float(v) for v in np.atleast_1d(b.estimate)]),
            "formula": s.formula or "", "dataset": study.datasets[s.dataset].source or study.datasets[s.dataset].path
            or "stack", "study_title": study.title, "citation": study.citation,
        })
    return pd.DataFrame(rows), problems


README = """\
# dpstats benchmark release {version}

This bundle is the public part of the dpstats benchmark:

* `instances.csv`: every instance of the public corpus with its public facts:
  study, task, `n`, `d`, the design columns (or the mean columns), the
  outcome and the coefficient of interest, the standard-error type, the
  non-private estimate and the sampling-error baseline.
* `trials.csv`: every trial of every algorithm on the public corpus (one row
  per algorithm, instance, ε and seed): status (ok, declined, error, timeout,
  memory), the error ratio `error / baseline` (`inf` for failures), time and
  memory.
* `leaderboard.csv`: τ@50 and rank per task, ε and slice, recomputed from
  `trials.csv` (`dpstats.bench.evaluation.verify_leaderboard` checks it).
* `profiles.csv`: the exact performance profiles (success rate as a step
  function of τ).
* `manifest.json`: versions, the source commit, counts and SHA-256 checksums
  of every file.

Scoring: a trial succeeds at threshold τ when its ratio is at most τ;
failures fail at every τ. An instance's success rate is the share of its
successful trials; the corpus success rate averages instances so that every
study weighs the same. τ@50 is the smallest τ at which the corpus success
rate reaches 50 % (∞ when it never does). See the benchmark documentation
(`docs/benchmark/evaluation.md`) for the formulas.

Counts: {n_instances} instances from {n_studies} studies; {n_trials} trials of
{n_algorithms} algorithms.
"""


def build_release(out: str | os.PathLike[str], results: Sequence[str | os.PathLike[str]] | None = None,
                  corpus: Any = None, trials: pd.DataFrame | None = None, name: str | None = None
                  ) -> dict[str, Any]:
    """Write the release bundle as a folder and a ``.zip``.

    Parameters
    ----------
    out : path-like
        Parent folder; the bundle is ``out/<name>/`` and ``out/<name>.zip``.
    results : sequence of path-like, optional
        Results files (SQLite or CSV) with public-corpus trials.
    corpus : Corpus, optional
        The public corpus (default: the one shipped with dpstats). A corpus
        whose ``corpus.toml`` does not say ``public = true`` is refused unless
        it is the shipped public corpus.
    trials : DataFrame, optional
        Trials given directly instead of ``results``.
    name : str, optional
        Bundle name (default ``dpstats-benchmark-<version>``).

    Returns
    -------
    dict
        ``folder``, ``zip``, ``manifest`` and ``dropped`` (trials left out
        because their instance is not in the public corpus).
    """
    from dpstats import __version__
    from dpstats.data.corpus import Corpus, public_corpus_path

    if corpus is None:
        corpus = Corpus(public_corpus_path())
    elif not corpus.is_public and Path(corpus.root).resolve() != Path(public_corpus_path()).resolve():
        raise ValueError(f"corpus {corpus.root} is not public (its corpus.toml lacks public = true); "
                         "only the public corpus is released")
    name = name or f"dpstats-benchmark-{__version__}"
    out = Path(out)
    folder = out / name
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    table, problems = corpus_instance_table(corpus)
    table.to_csv(folder / "instances.csv", index=False)
    if trials is None:
        trials = load_trials(results) if results else pd.DataFrame(columns=list(ev.TRIAL_COLUMNS))
    dropped = 0
    if len(trials):
        known = table.set_index("instance")[["study", "task", "n", "d"]]
        t = trials.copy()
        idx = t["instance"].astype(str)
        ok = idx.isin(known.index)
        for col in ("study", "task"):
            ok &= t[col].astype(str) == idx.map(known[col]).astype(str)
        for col in ("n", "d"):
            ok &= pd.to_numeric(t[col], errors="coerce").to_numpy() == idx.map(known[col]).astype(float).to_numpy()
        dropped = int((~ok).sum())
        trials = t[ok]
    files = {"instances.csv": folder / "instances.csv"}
    report_dir = folder / "_work"
    if len(trials):
        rep = write_report(trials, report_dir, site=False)
        for f in ("trials.csv", "leaderboard.csv", "profiles.csv"):
            shutil.move(str(report_dir / f), folder / f)
            files[f] = folder / f
        shutil.rmtree(report_dir)
        lb = rep["leaderboard"]
    else:
        pd.DataFrame(columns=list(ev.TRIAL_COLUMNS)).to_csv(folder / "trials.csv", index=False)
        files["trials.csv"] = folder / "trials.csv"
        lb = pd.DataFrame()
    prot = Path(__file__).resolve().parents[2] / "docs" / "benchmark"
    for doc in ("protocol.md", "evaluation.md", "reports.md"):
        if (prot / doc).is_file():
            shutil.copy(prot / doc, folder / doc)
            files[doc] = folder / doc
    n_alg = int(trials[["task", "algorithm"]].drop_duplicates().shape[0]) if len(trials) else 0
    (folder / "README.md").write_text(README.format(
        version=__version__, n_instances=len(table), n_studies=table["study"].nunique() if len(table) else 0,
        n_trials=len(trials), n_algorithms=n_alg), encoding="utf-8")
    files["README.md"] = folder / "README.md"
    manifest = {
        "name": name, "versions": _versions(), "commit": _git_commit(),
        "corpus": {"name": corpus.name, "instances": int(len(table)),
                   "studies": int(table["study"].nunique()) if len(table) else 0, "not_built": problems},
        "trials": {"rows": int(len(trials)), "dropped_not_public": dropped,
                   "algorithms": n_alg, "epsilons": sorted({float(e) for e in trials["epsilon"]}) if len(trials) else []},
        "leaderboard_rows": int(len(lb)),
        "protocol": {"epsilons": [0.3, 1, 3, 10], "delta": 1e-6, "trials_public": 10, "trials_withheld": 30,
                     "time_limit_s": 60, "memory_limit_mb": 4096},
        "files": {k: {"sha256": _sha256(v), "bytes": v.stat().st_size} for k, v in sorted(files.items())},
    }
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    zpath = out / f"{name}.zip"
    with zipfile.ZipFile(zpath, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for p in sorted(folder.rglob("*")):
            if p.is_file():
                info = zipfile.ZipInfo(f"{name}/{p.relative_to(folder).as_posix()}", date_time=(1980, 1, 1, 0, 0, 0))
                info.compress_type = zipfile.ZIP_DEFLATED
                info.external_attr = 0o644 << 16
                zf.writestr(info, p.read_bytes())
    return {"folder": folder, "zip": zpath, "manifest": manifest, "dropped": dropped}


# --------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------










