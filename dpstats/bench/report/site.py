"""The static results site, rendered from the Jinja2 templates in ``dpstats/bench/templates``.

Every page extends ``base.html``; autoescaping is on, so algorithm names,
instance facts and corpus names reach the HTML escaped. The Python side
prepares plain strings (formatted numbers, relative links); the templates
hold all the markup.
"""

from __future__ import annotations

import math
import os
import re
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pandas as pd

from dpstats.bench import evaluation as ev
from dpstats.bench.report.loading import _order_columns, _sort_trials, instance_facts, profiles_table, \
    public_instance_ids
from dpstats.bench.report.plots import TAU_MAX, plot_profiles, plot_trials

__all__ = ["SLICE_LABELS", "SLICE_TAGS", "TASK_LABELS", "PROFILE_LEADERS", "TEMPLATES", "environment",
           "profile_leaders", "write_report"]

SLICE_LABELS = {
    "all": "all instances",
    "d<=10": "d ≤ 10",
    "d>10": "d > 10",
    "n/d<=100": "n/d ≤ 100",
    "n/d>100": "n/d > 100",
}
SLICE_TAGS = {"all": "all", "d<=10": "d-le-10", "d>10": "d-gt-10", "n/d<=100": "nd-le-100", "n/d>100": "nd-gt-100"}
TASK_LABELS = {"sce": "Single coefficient estimation", "linreg": "Linear regression", "mean": "Mean estimation"}

#: how many algorithms of each privacy class the profile plots draw (the best by τ@50)
PROFILE_LEADERS = 3

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
                 explore: bool | None = None, site: bool = True, public: Mapping[str, Any] | None = None,
                 defaults: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Write ``trials.csv``, ``leaderboard.csv``, ``profiles.csv`` and the static site.

    Parameters
    ----------
    trials : DataFrame
        A trials table (see :mod:`dpstats.bench.evaluation`).
    out : path-like
        Output folder (created).
    facts : DataFrame, optional
        :func:`~dpstats.bench.report.instance_facts`; computed from the trials and the public corpus when omitted.
    explore : bool, optional
        Write Explore pages for every corpus (True), none (False), or only
        for corpora whose instances are all public (None, the default).
    site : bool
        Write the HTML site and the plots.
    public : mapping, optional
        :func:`~dpstats.bench.report.public_instance_ids` (read from the public corpus when omitted).
    defaults : mapping, optional
        Task -> the API's default algorithm, always drawn in the profile
        plots (``dpstats report`` passes ``dpstats.api.DEFAULT_METHODS``).

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
        files += _write_site(trials, lb, prof, facts, out, explored, dict(defaults or {}))
    return {"leaderboard": lb, "files": files, "explored": sorted(explored)}


def profile_leaders(board: pd.DataFrame, k: int = PROFILE_LEADERS, default: str | None = None) -> list[str]:
    """The algorithms a profile plot draws: the best ``k`` of each privacy class, and ``default``.

    Parameters
    ----------
    board : DataFrame
        The leaderboard rows of one corpus, task, ε and slice, in leaderboard
        order (ranked by rank, comparisons by the same key).
    k : int
        Algorithms per interpretation class.
    default : str, optional
        Drawn too when it is on the board.

    Returns
    -------
    list of str
        Algorithm names in leaderboard order.
    """
    seen: dict[str, int] = {}
    keep = []
    for r in board.itertuples(index=False):
        n = seen.get(r.interpretation, 0)
        if n < k or r.algorithm == default:
            keep.append(str(r.algorithm))
        seen[r.interpretation] = n + 1
    return keep


def _curves(prof: pd.DataFrame, board: pd.DataFrame) -> list[dict[str, Any]]:
    curves = []
    for r in board.itertuples(index=False):
        p = prof[prof["algorithm"] == r.algorithm]
        label = f"{r.algorithm}  τ@50 = {ev.format_tau50(r.tau50, r.reaches)}"
        if r.interpretation != "standard":
            label += f"  [{r.interpretation}]"
        curves.append({"label": label, "taus": p["tau"].to_numpy(), "rates": p["rate"].to_numpy(),
                       "dashed": r.interpretation != "standard"})
    return curves


def _board_rows(g: pd.DataFrame, link: bool, task: str) -> list[dict[str, Any]]:
    rows = []
    for r in g.itertuples(index=False):
        ranked = not pd.isna(r.rank)
        rows.append({
            "rank": str(int(r.rank)) if ranked else "comparison", "cls": "ranked" if ranked else "comparison",
            "algorithm": r.algorithm, "href": _algorithm_page(task, r.algorithm) if link else None,
            "interpretation": r.interpretation, "tau50": ev.format_tau50(r.tau50, r.reaches),
            "reaches": ev.format_rate(r.reaches), "tail10": ev.format_tail(r.tail10),
            "tail100": ev.format_tail(r.tail100),
        })
    return rows


def _write_site(trials: pd.DataFrame, lb: pd.DataFrame, prof: pd.DataFrame, facts: pd.DataFrame, out: Path,
                explored: set[str], defaults: Mapping[str, str]) -> list[Path]:
    files: list[Path] = []
    (out / "style.css").write_text((TEMPLATES / "style.css").read_text(encoding="utf-8"), encoding="utf-8")
    files.append(out / "style.css")
    corpora = sorted(trials["corpus"].unique())
    groups = list(ev.group_values(trials))
    prep = ev.prepare(trials)

    for task, eps in groups:
        sections = []
        for corpus in corpora:
            sub = lb[(lb["corpus"] == corpus) & (lb["task"] == task) & (lb["epsilon"] == eps)]
            if sub.empty:
                continue
            slices = []
            for sl in ev.slices_for(task):
                g = sub[sub["slice"] == sl]
                if g.empty:
                    slices.append({"label": SLICE_LABELS[sl], "empty": True})
                    continue
                p = prof[(prof["corpus"] == corpus) & (prof["task"] == task) & (prof["epsilon"] == eps)
                         & (prof["slice"] == sl)]
                drawn = profile_leaders(g, default=defaults.get(task))
                stem = f"img/profile-{_safe(corpus)}-{task}-eps{_eps(eps)}-{SLICE_TAGS[sl]}"
                files += plot_profiles(_curves(p, g[g["algorithm"].isin(drawn)]), out / stem,
                                       f"{task}, ε = {_eps(eps)}, {SLICE_LABELS[sl]} ({corpus})")
                slices.append({
                    "label": SLICE_LABELS[sl], "empty": False, "slice": sl,
                    "table_id": f"lb-{_safe(corpus)}-{SLICE_TAGS[sl]}",
                    "instances": int(g["instances"].iloc[0]), "studies": int(g["studies"].iloc[0]),
                    "rows": _board_rows(g, corpus in explored, task),
                    "figure": {"stem": stem, "alt": f"performance profiles, {task}, epsilon {_eps(eps)}, {sl}",
                               "width": None, "caption": "Performance profiles: success rate against τ (log axis)"},
                    "hidden": [a for a in g["algorithm"] if a not in drawn],
                })
            sections.append({"name": corpus, "heading": len(corpora) > 1, "slices": slices})
        others = [(_lb_page(t, e), f"{t} ε = {_eps(e)}") for t, e in groups if (t, e) != (task, eps)]
        files.append(_render(out / _lb_page(task, eps), "leaderboard.html", f"Leaderboard {task} ε = {_eps(eps)}", 0,
                             task_label=TASK_LABELS[task], eps=_eps(eps), others=others, corpora=sections,
                             leaders=PROFILE_LEADERS, default=defaults.get(task), tau_max=f"{TAU_MAX:g}"))

    rows = []
    for task, eps in groups:
        best = lb[(lb["task"] == task) & (lb["epsilon"] == eps) & (lb["slice"] == "all") & (lb["rank"] == 1)]
        rows.append({"href": _lb_page(task, eps), "task": TASK_LABELS[task], "eps": _eps(eps),
                     "best": [{"algorithm": r.algorithm, "tau50": ev.format_tau50(r.tau50, r.reaches),
                               "corpus": r.corpus} for r in best.itertuples(index=False)]})
    files.append(_render(out / "index.html", "index.html", "Overview", 0, "index.html", rows=rows,
                         n_trials=len(prep), n_algorithms=len(prep[["task", "algorithm"]].drop_duplicates()),
                         n_instances=prep["instance"].nunique(), n_studies=prep["study"].nunique(), corpora=corpora))

    ex = prep[prep["corpus"].isin(explored)]
    fx = facts.set_index("instance") if not facts.empty else pd.DataFrame()
    tasks = []
    for task in [t for t in ev.TASKS if t in set(ex["task"])]:
        et = ex[ex["task"] == task]
        algos = [{"href": _algorithm_page(task, name), "name": name, "interpretation": interp}
                 for (name, interp), _ in et.groupby(["algorithm", "interpretation"], sort=True)]
        inst = []
        for iid, g in et.groupby("instance", sort=True):
            f = fx.loc[iid] if iid in fx.index else None
            inst.append({"href": _instance_page(iid), "name": iid, "study": g["study"].iloc[0],
                         "n": _fmt(g["n"].iloc[0]), "d": _fmt(g["d"].iloc[0]), "baseline": _fmt(_val(f, "baseline"), 4),
                         "se_type": _val(f, "se_type") or ""})
        tasks.append({"label": TASK_LABELS[task], "algorithms": algos, "instances": inst})
        for iid, g in et.groupby("instance", sort=True):
            files += _instance_page_write(out, iid, g, fx)
        for name, g in et.groupby("algorithm", sort=True):
            files += _algorithm_page_write(out, task, name, g, lb)
    files.append(_render(out / "explore.html", "explore.html", "Explore", 0, "explore.html", tasks=tasks))
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
            _fmt(fin.max()) if fin.size else "—", f"{100 * float(np.mean(s <= 1.0)):.0f}%", fails or "—"]


def _ratios(g: pd.DataFrame) -> str:
    g = g.sort_values("seed") if "seed" in g.columns else g
    return " ".join(_fmt(x) if math.isfinite(x) else "✗" for x in g["score"].to_numpy(dtype=float))


def _instance_page_write(out: Path, iid: str, g: pd.DataFrame, fx: pd.DataFrame) -> list[Path]:
    files: list[Path] = []
    f = fx.loc[iid] if iid in fx.index else pd.Series(dtype=object)
    task = g["task"].iloc[0]
    n, d = int(g["n"].iloc[0]), int(g["d"].iloc[0])
    slices = [SLICE_LABELS[s] for s in ev.slices_for(task) if s != "all" and ev.slice_mask(n, d, s)]
    facts_rows = [
        ("Study", str(g["study"].iloc[0]) + (f" — {_val(f, 'title')}" if _val(f, "title") else "")),
        ("Citation", _val(f, "citation") or ""),
        ("Task", task), ("n", str(n)), ("d", str(d)), ("n/d", _fmt(n / d)),
        ("Slices", ", ".join(slices)),
        ("Formula", _val(f, "formula") or ""),
        ("Columns", _val(f, "columns") or ""),
        ("Coefficient", _val(f, "coefficient") or ""), ("SE type", _val(f, "se_type") or ""),
        ("Baseline", _fmt(_val(f, "baseline"), 6) if _val(f, "baseline") is not None else ""),
    ]
    rows, rows_plot = [], []
    for (name, eps), h in g.groupby(["algorithm", "epsilon"], sort=True):
        rows.append({"href": "algorithm-" + task + "-" + _safe(name) + ".html", "name": name, "eps": _eps(eps),
                     "stats": _trial_stats(h), "ratios": _ratios(h)})
    for name, h in g.groupby("algorithm", sort=True):
        rows_plot.append((name, h["epsilon"].to_numpy(), h["score"].to_numpy()))
    stem = f"img/instance-{_safe(iid)}"
    files += plot_trials(rows_plot, out / "explore" / stem, f"{iid}: error ratios over trials")
    fig = {"stem": stem, "alt": f"error ratios of every trial on {iid}",
           "caption": "Each point is a trial; failed trials (declined, error, timeout, memory, infinite error) are "
                      "drawn in the grey band"}
    files.append(_render(out / _instance_page(iid), "instance.html", f"Instance {iid}", 1, name=iid,
                         facts=[(a, str(b)) for a, b in facts_rows if b], fig=fig, rows=rows))
    return files


def _algorithm_page_write(out: Path, task: str, name: str, g: pd.DataFrame, lb: pd.DataFrame) -> list[Path]:
    files: list[Path] = []
    interp = g["interpretation"].iloc[0]
    mine = lb[(lb["algorithm"] == name) & (lb["task"] == task) & lb["corpus"].isin(set(g["corpus"]))]
    positions = [{"corpus": r.corpus, "eps": _eps(r.epsilon), "slice": SLICE_LABELS[r.slice],
                  "tau50": ev.format_tau50(r.tau50, r.reaches), "rank": "" if pd.isna(r.rank) else str(int(r.rank)),
                  "tail10": ev.format_tail(r.tail10), "tail100": ev.format_tail(r.tail100),
                  "size": f"{r.instances} / {r.studies}"} for r in mine.itertuples(index=False)]
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
    fig = {"stem": stem, "alt": f"performance profiles of {name}", "width": None,
           "caption": "Success rate against τ at each ε (the instances this algorithm ran on, studies weighted "
                      f"equally; τ shown up to {TAU_MAX:g}, ▸ marks a curve that rises further)"}
    rows = [{"href": f"instance-{_safe(iid)}.html", "name": iid, "eps": _eps(eps), "stats": _trial_stats(h),
             "ratios": _ratios(h)} for (iid, eps), h in g.groupby(["instance", "epsilon"], sort=True)]
    files.append(_render(out / _algorithm_page(task, name), "algorithm.html", f"{name} ({task})", 1, name=name,
                         task=task, interpretation=interp, positions=positions, fig=fig, rows=rows))
    return files
