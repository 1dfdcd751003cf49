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
from dpstats.bench import leaderboard as lbd
from dpstats.bench.report.loading import _order_columns, _sort_trials, instance_facts, profiles_table, \
    public_instance_ids
from dpstats.bench.report.plots import TAU_MAX, plot_coverage, plot_forest, plot_instance_coverage, plot_profiles, \
    plot_trials

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
                 defaults: Mapping[str, str] | None = None, intervals: pd.DataFrame | None = None) -> dict[str, Any]:
    """Write ``trials.csv``, ``leaderboard.csv``, ``profiles.csv`` and the static site.

    With coverage trials (``intervals``, from ``dpstats bench --inference``)
    it also writes ``intervals.csv`` (one row per coverage trial),
    ``coverage.csv`` (:func:`dpstats.bench.inference.coverage_table`),
    ``coverage_instances.csv`` (:func:`dpstats.bench.inference.instance_coverage`),
    a Coverage page per task (with the per-instance table and the figure of
    coverage against median width ratio, one point per instance) and a
    forest plot on each ``sce`` instance's Explore page.

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
    intervals : DataFrame, optional
        Coverage trials (:func:`dpstats.bench.store.read_intervals`); ``trials``
        may then be empty.

    Returns
    -------
    dict
        ``leaderboard`` (DataFrame), ``coverage`` (DataFrame or None),
        ``instances`` (the per-instance table, DataFrame or None), ``files``
        (list of written paths), ``explored`` (corpora with Explore pages).
    """
    from dpstats.bench.inference import INTERVAL_COLUMNS, coverage_table, instance_coverage, prepare_intervals, \
        trial_validity

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    cov = None
    iv = None
    per = None
    if intervals is not None and not intervals.empty:
        iv = prepare_intervals(intervals)
        iv["corpus"] = iv["corpus"].fillna("results").astype(str)
        valid = trial_validity(iv)  # validates before anything is written; computed once for both tables
        cov = coverage_table(valid)
        per = instance_coverage(valid)
    trials = trials.copy()
    if trials.empty and iv is not None and cov is not None and per is not None:
        return _write_inference_only(trials, iv, cov, per, out, site, public, explore)
    if "corpus" not in trials.columns:
        trials["corpus"] = "results"
    trials["corpus"] = trials["corpus"].fillna("results").astype(str)
    ev.prepare(trials)  # validate before writing anything
    trials = _sort_trials(_order_columns(trials))
    files: list[Path] = []
    trials.to_csv(out / "trials.csv", index=False)
    files.append(out / "trials.csv")
    lb = lbd.leaderboard(trials)
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
        files += _write_site(trials, lb, prof, facts, out, explored, dict(defaults or {}), iv, cov, per)
    if iv is not None and cov is not None and per is not None:
        files += _write_inference_csv(iv, cov, per, out, INTERVAL_COLUMNS)
    return {"leaderboard": lb, "coverage": cov, "instances": per, "files": files, "explored": sorted(explored)}


def _write_inference_csv(iv: pd.DataFrame, cov: pd.DataFrame, per: pd.DataFrame, out: Path, columns: Any
                         ) -> list[Path]:
    cols = [c for c in columns if c in iv.columns] + [c for c in iv.columns if c not in columns]
    iv[cols].sort_values(["corpus", "task", "algorithm", "instance", "epsilon", "seed"], kind="stable").to_csv(
        out / "intervals.csv", index=False)
    cov.to_csv(out / "coverage.csv", index=False)
    per.to_csv(out / "coverage_instances.csv", index=False)
    return [out / "intervals.csv", out / "coverage.csv", out / "coverage_instances.csv"]


def _write_inference_only(trials: pd.DataFrame, iv: pd.DataFrame, cov: pd.DataFrame, per: pd.DataFrame, out: Path,
                          site: bool, public: Mapping[str, Any] | None, explore: bool | None) -> dict[str, Any]:
    """A report of coverage trials alone (a results file written by ``dpstats bench --inference`` only)."""
    from dpstats.bench.inference import INTERVAL_COLUMNS

    files = _write_inference_csv(iv, cov, per, out, INTERVAL_COLUMNS)
    explored: set[str] = set()
    if site:
        if public is None:
            public = public_instance_ids()
        explored = _explorable(iv, public, explore)
        (out / "style.css").write_text((TEMPLATES / "style.css").read_text(encoding="utf-8"), encoding="utf-8")
        files.append(out / "style.css")
        files += _write_inference_pages(iv, cov, per, out, explored)
        fx = instance_facts(iv.drop_duplicates("instance").assign(baseline=np.nan))
        files += _write_explore(iv.iloc[0:0].assign(score=[]), pd.DataFrame(), fx.set_index("instance")
                                if not fx.empty else pd.DataFrame(), out, explored, iv)
        files.append(_render(out / "index.html", "index.html", "Overview", 0, "index.html", rows=[],
                             n_trials=0, n_algorithms=0, n_instances=0, n_studies=0,
                             corpora=sorted(iv["corpus"].unique()), coverage=_coverage_links(iv), point=False))
    return {"leaderboard": pd.DataFrame(columns=list(lbd.LEADERBOARD_COLUMNS)), "coverage": cov, "instances": per,
            "files": files, "explored": sorted(explored)}


def _coverage_links(iv: pd.DataFrame | None) -> list[dict[str, str]]:
    if iv is None or iv.empty:
        return []
    return [{"href": _inference_page(t), "task": TASK_LABELS[t]} for t in ev.TASKS if t in set(iv["task"])]


def _pct(x: Any) -> str:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return ""
    return "" if math.isnan(v) else f"{100 * v:.1f}"


def _worst_cell(r: Any) -> str:
    if pd.isna(r.worst_coverage):
        return ""
    return f"{_pct(r.worst_coverage)} ({r.worst_instance})"


def _instance_section(pc: pd.DataFrame, corpus: str, task: str, out: Path, explored: set[str]
                      ) -> tuple[list[Path], dict[str, Any] | None]:
    """The per-instance part of a Coverage page: the figure (a panel per ε) and a table per ε, by coverage."""
    from dpstats.bench.inference import CONFIDENT_MISS_SE, INSTANCE_FLOOR, LEVEL

    if pc.empty:
        return [], None
    panels, tables = [], []
    link = corpus in explored and task == "sce"  # an sce instance of an explored corpus has a page (forest plot)
    for eps in sorted(pc["epsilon"].unique()):
        g = pc[pc["epsilon"] == eps]
        points = [{"label": str(name), "x": h["median_width_ratio"].to_numpy(dtype=float),
                   "y": h["coverage"].to_numpy(dtype=float), "names": h["instance"].astype(str).tolist()}
                  for name, h in g.groupby("algorithm", sort=True)]
        panels.append({"title": f"ε = {_eps(eps)}", "points": points})
        rows = [{
            "instance": r.instance, "href": _instance_page(r.instance) if link else None,
            "algorithm": r.algorithm, "coverage": f"{_pct(r.coverage)} ± {_pct(r.coverage_se)}",
            "all": _pct(r.coverage_all), "reference": _pct(r.reference),
            "coord": "" if pd.isna(r.coordinate_coverage) else f"{_pct(r.coordinate_coverage)} (#{int(r.worst_coordinate)})",
            "difference": "" if pd.isna(r.difference) else f"{100 * r.difference:+.1f}",
            "width": _fmt(r.median_width_ratio), "infinite": _pct(r.infinite), "failed": _pct(r.failed),
            "misses": str(int(r.confident_misses)), "max_miss": _fmt(r.max_miss_se, 2) + ("" if r.se_exact or pd.isna(r.max_miss_se) else " *"),
            "trials": str(int(r.trials)),
            "cls": "comparison" if not (r.coverage < INSTANCE_FLOOR - 1e-12 or r.confident_misses > 0
                                         or r.coordinate_coverage < INSTANCE_FLOOR - 1e-12) else "",
        } for r in g.itertuples(index=False)]
        low = int((g["coverage"] < INSTANCE_FLOOR - 1e-12).sum())
        tables.append({"eps": _eps(eps), "table_id": f"inst-{_safe(corpus)}-eps{_eps(eps)}", "rows": rows,
                       "low": low, "pairs": len(g), "misses": int(g["confident_misses"].sum()),
                       "inexact": bool((~g["se_exact"].astype(bool)).any())})
    stem = f"img/coverage-instances-{_safe(corpus)}-{task}"
    files = plot_instance_coverage(panels, out / stem, f"{task}: per-instance coverage of the {LEVEL:g} intervals "
                                   f"({corpus})", level=LEVEL, floor=INSTANCE_FLOOR)
    fig = {"stem": stem, "alt": f"per-instance coverage against median width ratio, {task}", "width": None,
           "caption": f"One point per instance and method: its coverage over the trials against its median width "
                      f"ratio (log axis); instances whose median width ratio is infinite are drawn in the grey band "
                      f"at the right (▸, one column per method, the number of instances above a shared point). "
                      f"Dotted: the nominal {LEVEL:g}; dashed: the {INSTANCE_FLOOR:g} line; the lowest instances "
                      f"below it are named"}
    return files, {"figure": fig, "tables": tables, "floor": f"{100 * INSTANCE_FLOOR:g}",
                   "threshold": f"{CONFIDENT_MISS_SE:g}"}


def _write_inference_pages(iv: pd.DataFrame, cov: pd.DataFrame, per: pd.DataFrame, out: Path, explored: set[str]
                           ) -> list[Path]:
    """One Coverage page per task: per ε and slice the coverage table, a coverage/width figure per corpus, and the
    per-instance validity (a figure with a panel per ε, a table per ε sorted by coverage)."""
    from dpstats.bench.inference import CONFIDENT_MISS_SE, COVERAGE_TOLERANCE, INSTANCE_FLOOR, LEVEL

    files: list[Path] = []
    tasks = [t for t in ev.TASKS if t in set(cov["task"])]
    for task in tasks:
        ct = cov[cov["task"] == task]
        sections = []
        for corpus in sorted(ct["corpus"].unique()):
            cc = ct[ct["corpus"] == corpus]
            inst_files, inst = _instance_section(per[(per["corpus"] == corpus) & (per["task"] == task)], corpus, task,
                                                 out, explored)
            files += inst_files
            a = cc[cc["slice"] == "all"]
            series = []
            for name, g in a.groupby("algorithm", sort=False):
                g = g.sort_values("epsilon")
                series.append({"label": "non-private (study's SE type), same draws" if name == "non-private"
                               else str(name), "epsilons": g["epsilon"].to_numpy(),
                               "coverage": g["coverage"].to_numpy(), "coverage_se": g["coverage_se"].to_numpy(),
                               "width": g["median_width_ratio"].to_numpy(), "reference": name == "non-private"})
            series.sort(key=lambda s_: not s_["reference"])
            stem = f"img/coverage-{_safe(corpus)}-{task}"
            files += plot_coverage(series, out / stem, f"{task}: {LEVEL:g} intervals ({corpus})", level=LEVEL)
            epsilons = []
            for eps in sorted(cc["epsilon"].unique()):
                slices = []
                for sl in ev.slices_for(task):
                    g = cc[(cc["epsilon"] == eps) & (cc["slice"] == sl)]
                    if g.empty:
                        continue
                    ref = g[g["algorithm"] == "non-private"].iloc[0]
                    rows = [{
                        "algorithm": r.algorithm, "interpretation": r.interpretation,
                        "href": _algorithm_page(task, r.algorithm) if corpus in explored and r.algorithm !=
                        "non-private" else None,
                        "rank": "" if pd.isna(r.rank) else str(int(r.rank)),
                        "coverage": f"{_pct(r.coverage)} ± {_pct(r.coverage_se)}", "reference": _pct(r.reference),
                        "difference": "" if r.algorithm == "non-private" else f"{100 * r.difference:+.1f}",
                        "width": _fmt(r.median_width_ratio), "infinite": _pct(r.infinite), "failed": _pct(r.failed),
                        "trials": str(int(r.trials)), "worst": _worst_cell(r), "below": _pct(r.below_85),
                        "below_coord": _pct(r.coordinates_below_85),
                        "misses": "" if pd.isna(r.confident_misses) else str(int(r.confident_misses)),
                        "cls": "reference" if r.algorithm == "non-private" else ("ranked" if r.eligible else
                                                                                 "comparison"),
                    } for r in g.itertuples(index=False)]
                    slices.append({"label": SLICE_LABELS[sl], "slice": sl,
                                   "table_id": f"cov-{_safe(corpus)}-eps{_eps(eps)}-{SLICE_TAGS[sl]}",
                                   "instances": int(ref.instances), "studies": int(ref.studies), "rows": rows})
                epsilons.append({"eps": _eps(eps), "slices": slices})
            sections.append({"name": corpus, "heading": ct["corpus"].nunique() > 1, "epsilons": epsilons,
                             "anchor": f"instances-{_safe(corpus)}", "instances": inst,
                             "figure": {"stem": stem, "alt": f"coverage and width ratio against epsilon, {task}",
                                        "width": None,
                                        "caption": "Study-weighted coverage (± 2 binomial SE) and median width "
                                                   "ratio against ε, all instances"}})
        others = [(_inference_page(t), t) for t in tasks if t != task]
        files.append(_render(out / _inference_page(task), "inference.html", f"Coverage {task}", 0,
                             task_label=TASK_LABELS[task], task=task, sections=sections, others=others,
                             level=f"{LEVEL:g}", tolerance=f"{100 * COVERAGE_TOLERANCE:g}",
                             floor=f"{100 * INSTANCE_FLOOR:g}", threshold=f"{CONFIDENT_MISS_SE:g}"))
    return files


def _forest(iv: pd.DataFrame, iid: str, out: Path) -> tuple[list[Path], dict[str, Any] | None, list[dict[str, Any]]]:
    """The forest plot of an sce instance and its agreement table."""
    from dpstats.bench.inference import _first, forest_summary

    g = iv[(iv["instance"] == iid) & (iv["task"] == "sce")]
    if g.empty:
        return [], None, []
    summ = forest_summary(iv, iid)
    est = _first(g["truth"].iloc[0])
    slo, shi = _first(g["study_low"].iloc[0]), _first(g["study_high"].iloc[0])
    if not (math.isfinite(est) and math.isfinite(slo) and math.isfinite(shi)):
        return [], None, []
    rows, table = [], []
    for r in summ.itertuples(index=False):
        h = g[(g["algorithm"] == r.algorithm) & (g["epsilon"] == r.epsilon)]
        failed = h["status"].isin(["error", "timeout", "memory"]).to_numpy()
        h = h[~failed]  # no interval to draw (a decline is drawn as the infinite interval it counts as)
        note = f"sign {100 * r.sign:.0f}%, excl. 0 {100 * r.excludes_zero:.0f}%"
        if failed.any():
            note += f", {int(failed.sum())}/{len(failed)} failed"
        rows.append({"label": f"{r.algorithm}, ε = {_eps(r.epsilon)}", "color_key": _eps(r.epsilon),
                     "lows": [_first(v, -math.inf) for v in h["low"]], "highs": [_first(v, math.inf) for v in h["high"]],
                     "note": note})
        table.append({"algorithm": r.algorithm, "eps": _eps(r.epsilon), "trials": str(r.trials),
                      "sign": f"{100 * r.sign:.0f}%", "excl": f"{100 * r.excludes_zero:.0f}%",
                      "np_sign": f"{100 * r.np_sign:.0f}%", "np_excl": f"{100 * r.np_excludes_zero:.0f}%"})
    first = g.drop_duplicates("seed").sort_values("seed")
    rows.append({"label": "non-private, same draws", "reference": True,
                 "lows": [_first(v) for v in first["np_low"]], "highs": [_first(v) for v in first["np_high"]],
                 "note": ""})
    stem = f"img/forest-{_safe(iid)}"
    files = plot_forest((est, slo, shi), rows, out / "explore" / stem,
                        f"{iid}: the study's interval and the private {g['level'].iloc[0]:g} intervals")
    excl = slo > 0 or shi < 0
    fig = {"stem": stem, "alt": f"forest plot of the private intervals on {iid}", "width": None,
           "caption": ("Top: the study's estimate and interval (the non-private interval of its SE type on all rows). "
                       "Below: one line per coverage trial (a resample of the rows) for each method and ε, and the "
                       "non-private interval on the same resamples (grey). Right: how often the private interval "
                       "agrees with the study on the sign (its midpoint) and on "
                       + ("excluding zero" if excl else "including zero (the study's interval includes zero)"))}
    return files, fig, table



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
        label = f"{r.algorithm}  τ@50 = {lbd.format_tau50(r.tau50, r.reaches)}"
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
            "interpretation": r.interpretation, "tau50": lbd.format_tau50(r.tau50, r.reaches),
            "reaches": lbd.format_rate(r.reaches), "tail10": lbd.format_tail(r.tail10),
            "tail100": lbd.format_tail(r.tail100), "fallback": lbd.format_fallback(r.fallback),
        })
    return rows


def _write_site(trials: pd.DataFrame, lb: pd.DataFrame, prof: pd.DataFrame, facts: pd.DataFrame, out: Path,
                explored: set[str], defaults: Mapping[str, str], iv: pd.DataFrame | None = None,
                cov: pd.DataFrame | None = None, per: pd.DataFrame | None = None) -> list[Path]:
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
                     "best": [{"algorithm": r.algorithm, "tau50": lbd.format_tau50(r.tau50, r.reaches),
                               "corpus": r.corpus} for r in best.itertuples(index=False)]})
    if iv is not None and cov is not None and per is not None:
        files += _write_inference_pages(iv, cov, per, out, explored)
    files.append(_render(out / "index.html", "index.html", "Overview", 0, "index.html", rows=rows,
                         n_trials=len(prep), n_algorithms=len(prep[["task", "algorithm"]].drop_duplicates()),
                         n_instances=prep["instance"].nunique(), n_studies=prep["study"].nunique(), corpora=corpora,
                         coverage=_coverage_links(iv), point=True))
    fx = facts.set_index("instance") if not facts.empty else pd.DataFrame()
    files += _write_explore(prep, lb, fx, out, explored, iv)
    return files


def _write_explore(prep: pd.DataFrame, lb: pd.DataFrame, fx: pd.DataFrame, out: Path, explored: set[str],
                   iv: pd.DataFrame | None) -> list[Path]:
    """The Explore index, instance pages (with forest plots for sce coverage trials) and algorithm pages."""
    files: list[Path] = []
    ex = prep[prep["corpus"].isin(explored)]
    ivx = iv[iv["corpus"].isin(explored)] if iv is not None else None
    tasks = []
    iv_sce = ivx[ivx["task"] == "sce"] if ivx is not None else None
    cols = ["instance", "study", "task", "n", "d"]
    task_set = set(ex["task"]) | (set(iv_sce["task"]) if iv_sce is not None else set())
    for task in [t for t in ev.TASKS if t in task_set]:
        et = ex[ex["task"] == task]
        algos = [{"href": _algorithm_page(task, name), "name": name, "interpretation": interp}
                 for (name, interp), _ in et.groupby(["algorithm", "interpretation"], sort=True)]
        known = et[cols]
        if iv_sce is not None and task == "sce":
            known = pd.concat([known, iv_sce[cols]], ignore_index=True)
        inst = []
        for iid, g in known.groupby("instance", sort=True):
            f = fx.loc[iid] if iid in fx.index else None
            inst.append({"href": _instance_page(iid), "name": iid, "study": g["study"].iloc[0],
                         "n": _fmt(g["n"].iloc[0]), "d": _fmt(g["d"].iloc[0]), "baseline": _fmt(_val(f, "baseline"), 4),
                         "se_type": _val(f, "se_type") or ""})
        tasks.append({"label": TASK_LABELS[task], "algorithms": algos, "instances": inst})
        for iid, g in known.groupby("instance", sort=True):
            forest: tuple[list[Path], dict[str, Any] | None, list[dict[str, Any]]] = ([], None, [])
            if iv_sce is not None and task == "sce":
                forest = _forest(iv_sce, iid, out)
            files += _instance_page_write(out, iid, et[et["instance"] == iid], fx, g.iloc[0], forest)
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


def _instance_page_write(out: Path, iid: str, g: pd.DataFrame, fx: pd.DataFrame, head: Any = None,
                         forest: tuple[list[Path], dict[str, Any] | None, list[dict[str, Any]]] = ([], None, [])
                         ) -> list[Path]:
    files: list[Path] = list(forest[0])
    f = fx.loc[iid] if iid in fx.index else pd.Series(dtype=object)
    head = head if head is not None else g.iloc[0]
    task = head["task"]
    n, d = int(head["n"]), int(head["d"])
    slices = [SLICE_LABELS[s] for s in ev.slices_for(task) if s != "all" and ev.slice_mask(n, d, s)]
    facts_rows = [
        ("Study", str(head["study"]) + (f" — {_val(f, 'title')}" if _val(f, "title") else "")),
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
    fig = None
    if rows_plot:
        stem = f"img/instance-{_safe(iid)}"
        files += plot_trials(rows_plot, out / "explore" / stem, f"{iid}: error ratios over trials")
        fig = {"stem": stem, "alt": f"error ratios of every trial on {iid}",
               "caption": "Each point is a trial; failed trials (declined, error, timeout, memory, infinite error) "
                          "are drawn in the grey band"}
    files.append(_render(out / _instance_page(iid), "instance.html", f"Instance {iid}", 1, name=iid,
                         facts=[(a, str(b)) for a, b in facts_rows if b], fig=fig, rows=rows,
                         forest=forest[1], agreement=forest[2]))
    return files


def _algorithm_page_write(out: Path, task: str, name: str, g: pd.DataFrame, lb: pd.DataFrame) -> list[Path]:
    files: list[Path] = []
    interp = g["interpretation"].iloc[0]
    mine = lb[(lb["algorithm"] == name) & (lb["task"] == task) & lb["corpus"].isin(set(g["corpus"]))]
    positions = [{"corpus": r.corpus, "eps": _eps(r.epsilon), "slice": SLICE_LABELS[r.slice],
                  "tau50": lbd.format_tau50(r.tau50, r.reaches), "rank": "" if pd.isna(r.rank) else str(int(r.rank)),
                  "tail10": lbd.format_tail(r.tail10), "tail100": lbd.format_tail(r.tail100),
                  "size": f"{r.instances} / {r.studies}"} for r in mine.itertuples(index=False)]
    curves = []
    for corpus in sorted(set(g["corpus"])):
        for eps in sorted(set(g["epsilon"])):
            sub = g[(g["corpus"] == corpus) & (g["epsilon"] == eps)]
            if sub.empty:
                continue
            inst = ev._instance_set(sub)
            p = ev.step_profile(sub, inst)
            lbl = f"ε = {_eps(eps)}  τ@50 = {lbd.format_tau50(p.tau50, float(p.reach))}"
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
