"""The static results site, rendered from the Jinja2 templates in ``dpstats/bench/templates``.

Every page extends ``base.html``; autoescaping is on, so algorithm names,
instance facts and corpus names reach the HTML escaped. The Python side
prepares plain strings (formatted numbers, relative links); the templates
hold all the markup.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dpstats.bench import evaluation as ev
from dpstats.bench import leaderboard as lbd
from dpstats.bench.report.explore import (
    _explore_index,
    _explore_tasks,
    _submit_algorithm_pages,
    _submit_instance_pages,
    _write_explore,
)
from dpstats.bench.report.loading import (
    _order_columns,
    _sort_trials,
    instance_facts,
    profiles_table,
    public_instance_ids,
)
from dpstats.bench.report.pages import (
    SLICE_LABELS,
    SLICE_TAGS,
    TASK_LABELS,
    TEMPLATES,
    _algorithm_page,
    _eps,
    _fmt,
    _inference_page,
    _instance_page,
    _lb_page,
    _pct,
    _render,
    _safe,
    environment,
)
from dpstats.bench.report.plots import TAU_MAX, plot_coverage, plot_instance_coverage, plot_profiles
from dpstats.bench.report.pool import JobRunner, resolve_workers

__all__ = ["SLICE_LABELS", "SLICE_TAGS", "TASK_LABELS", "PROFILE_LEADERS", "TEMPLATES", "environment",
           "profile_leaders", "write_report"]

#: how many algorithms of each privacy class the profile plots draw (the best by τ@50)
PROFILE_LEADERS = 3


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
                 defaults: Mapping[str, str] | None = None, intervals: pd.DataFrame | None = None,
                 workers: int | None = 1) -> dict[str, Any]:
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
    workers : int, optional
        Processes drawing the pages and their figures: 1 (the default) draws
        them in this process; more draws the pages of each task and ε, each
        instance and each algorithm in a pool of that many processes; None
        means one per CPU available. The files written are the same bytes
        for any number.

    Returns
    -------
    dict
        ``leaderboard`` (DataFrame), ``coverage`` (DataFrame or None),
        ``instances`` (the per-instance table, DataFrame or None), ``files``
        (list of written paths), ``explored`` (corpora with Explore pages).
    """
    from dpstats.bench.coverage_summary import coverage_table, instance_coverage, prepare_intervals, trial_validity
    from dpstats.bench.inference import INTERVAL_COLUMNS

    out = Path(out)
    workers = resolve_workers(workers)
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
        return _write_inference_only(trials, iv, cov, per, out, site, public, explore, workers)
    if "corpus" not in trials.columns:
        trials["corpus"] = "results"
    trials["corpus"] = trials["corpus"].fillna("results").astype(str)
    ev.prepare(trials)  # validate before writing anything
    trials = _sort_trials(_order_columns(trials))
    files: list[Path] = []
    explored: set[str] = set()
    with JobRunner(workers) as run:
        prep = None
        early = None
        if site:
            if public is None:
                public = public_instance_ids()
            explored = _explorable(trials, public, explore)
            if facts is None:
                facts = instance_facts(trials)
            prep = ev.prepare(trials)  # the sorted table with its scores, shared by the profiles and the pages
            # the instance pages need neither the leaderboard nor the profiles and are most of the drawing: they
            # are submitted first, so that a pool draws them while this process writes the tables
            early = _submit_instances(prep, facts, out, explored, iv, run)
        trials.to_csv(out / "trials.csv", index=False)
        files.append(out / "trials.csv")
        lb = lbd.leaderboard(trials)
        lb.to_csv(out / "leaderboard.csv", index=False)
        files.append(out / "leaderboard.csv")
        if prep is None:
            prep = ev.prepare(trials)
        prof = profiles_table(trials, prepared=prep)
        prof.to_csv(out / "profiles.csv", index=False)
        files.append(out / "profiles.csv")
        if site and facts is not None:
            files += _write_site(trials, lb, prof, facts, out, explored, dict(defaults or {}), iv, cov, per, run,
                                 prep, early)
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
                          site: bool, public: Mapping[str, Any] | None, explore: bool | None, workers: int = 1
                          ) -> dict[str, Any]:
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
        fx = instance_facts(iv.drop_duplicates("instance").assign(baseline=np.nan))
        with JobRunner(workers) as run:
            _write_inference_pages(iv, cov, per, out, explored, run)
            _write_explore(iv.iloc[0:0].assign(score=[]), pd.DataFrame(), fx.set_index("instance")
                           if not fx.empty else pd.DataFrame(), out, explored, iv, run)
            files += [f for part in run.results() for f in part]
        files.append(_render(out / "index.html", "index.html", "Overview", 0, "index.html", rows=[],
                             n_trials=0, n_algorithms=0, n_instances=0, n_studies=0,
                             corpora=sorted(iv["corpus"].unique()), coverage=_coverage_links(iv), point=False))
    return {"leaderboard": pd.DataFrame(columns=list(lbd.LEADERBOARD_COLUMNS)), "coverage": cov, "instances": per,
            "files": files, "explored": sorted(explored)}


def _coverage_links(iv: pd.DataFrame | None) -> list[dict[str, str]]:
    if iv is None or iv.empty:
        return []
    return [{"href": _inference_page(t), "task": TASK_LABELS[t]} for t in ev.TASKS if t in set(iv["task"])]


def _worst_cell(r: Any) -> str:
    if pd.isna(r.worst_coverage):
        return ""
    return f"{_pct(r.worst_coverage)} ({r.worst_instance})"


def _misses(count: Any, expected: Any) -> str:
    """A count of confident misses with the number expected by chance, e.g. ``2 (18.2)``."""
    return f"{int(count)} ({_fmt(float(expected), 2)})"


def _instance_section(pc: pd.DataFrame, corpus: str, task: str, out: Path, explored: set[str]
                      ) -> tuple[list[Path], dict[str, Any] | None]:
    """The per-instance part of a Coverage page: the figure (a panel per ε) and a table per ε, by coverage."""
    from dpstats.bench.coverage_summary import CONFIDENT_MISS_SE, INSTANCE_FLOOR, LEVEL, NARROW_MISS_SE

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
            "misses": _misses(r.confident_misses, r.confident_expected), "max_miss": _fmt(r.max_miss_se, 2) + ("" if r.se_exact or pd.isna(r.max_miss_se) else " *"),
            "narrow": str(int(r.narrow_misses)), "trials": str(int(r.trials)),
            "cls": "comparison" if not (r.coverage < INSTANCE_FLOOR - 1e-12 or r.confident_misses > 0
                                         or r.narrow_misses > 0
                                         or r.coordinate_coverage < INSTANCE_FLOOR - 1e-12) else "",
        } for r in g.itertuples(index=False)]
        low = int((g["coverage"] < INSTANCE_FLOOR - 1e-12).sum())
        tables.append({"eps": _eps(eps), "table_id": f"inst-{_safe(corpus)}-eps{_eps(eps)}", "rows": rows,
                       "low": low, "pairs": len(g), "misses": int(g["confident_misses"].sum()),
                       "expected": _fmt(float(np.nansum(g["confident_expected"].to_numpy(dtype=float))), 2),
                       "narrow": int(g["narrow_misses"].sum()),
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
                   "threshold": f"{CONFIDENT_MISS_SE:g}", "narrow_se": f"{NARROW_MISS_SE:g}"}


def _write_inference_pages(iv: pd.DataFrame, cov: pd.DataFrame, per: pd.DataFrame, out: Path, explored: set[str],
                           run: JobRunner) -> None:
    """One Coverage page per task, each a job of ``run`` (its result: the files it wrote)."""
    tasks = [t for t in ev.TASKS if t in set(cov["task"])]
    for task in tasks:
        run.submit(_inference_page_write, task, tasks, cov[cov["task"] == task], per[per["task"] == task], out,
                   explored)


def _inference_page_write(task: str, tasks: list[str], ct: pd.DataFrame, pt: pd.DataFrame, out: Path,
                          explored: set[str]) -> list[Path]:
    """The Coverage page of a task: per ε and slice the coverage table, a coverage/width figure per corpus, and the
    per-instance validity (a figure with a panel per ε, a table per ε sorted by coverage).

    ``ct`` and ``pt`` are the task's rows of the coverage table and of the per-instance table.
    """
    from dpstats.bench.coverage_summary import (
        CONFIDENT_MISS_SE,
        COVERAGE_TOLERANCE,
        INSTANCE_FLOOR,
        LEVEL,
        NARROW_MISS_SE,
    )

    files: list[Path] = []
    sections = []
    for corpus in sorted(ct["corpus"].unique()):
        cc = ct[ct["corpus"] == corpus]
        inst_files, inst = _instance_section(pt[pt["corpus"] == corpus], corpus, task, out, explored)
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
                    "misses": "" if pd.isna(r.confident_misses) else (
                        str(int(r.confident_misses)) if pd.isna(r.confident_expected)
                        else _misses(r.confident_misses, r.confident_expected)),
                    "narrow": "" if pd.isna(r.narrow_misses) else str(int(r.narrow_misses)),
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
                         floor=f"{100 * INSTANCE_FLOOR:g}", threshold=f"{CONFIDENT_MISS_SE:g}",
                         narrow_se=f"{NARROW_MISS_SE:g}"))
    return files


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


def _submit_instances(prep: pd.DataFrame, facts: pd.DataFrame, out: Path, explored: set[str],
                      iv: pd.DataFrame | None, run: JobRunner) -> tuple[list[dict[str, Any]], list[tuple[int, int]]]:
    """Submit the Explore instance pages to ``run``: the Explore tasks and, per task, the positions of its jobs
    among ``run``'s results (for :func:`_write_site`)."""
    fx = facts.set_index("instance") if not facts.empty else pd.DataFrame()
    tasks = _explore_tasks(prep, explored, iv)
    spans = []
    for t in tasks:
        start = run.pending
        _submit_instance_pages(t, fx, out, run)
        spans.append((start, run.pending))
    return tasks, spans


def _write_site(trials: pd.DataFrame, lb: pd.DataFrame, prof: pd.DataFrame, facts: pd.DataFrame, out: Path,
                explored: set[str], defaults: Mapping[str, str], iv: pd.DataFrame | None = None,
                cov: pd.DataFrame | None = None, per: pd.DataFrame | None = None,
                run: JobRunner | None = None, prep: pd.DataFrame | None = None,
                early: tuple[list[dict[str, Any]], list[tuple[int, int]]] | None = None) -> list[Path]:
    """The pages and figures; those of each task and ε, instance and algorithm are jobs of ``run``.

    ``prep`` is ``ev.prepare(trials)`` when the caller has it; ``early`` is
    :func:`_submit_instances` when the caller has submitted the instance
    pages already (otherwise they are submitted here).

    Returns the written files in a fixed order, whatever the number of
    workers and whenever the instance pages were submitted: the style sheet,
    the Leaderboard pages, the Coverage pages, the overview, then per task
    its instance pages and its algorithm pages, then the Explore index.
    """
    run = run if run is not None else JobRunner(1)
    prep = ev.prepare(trials) if prep is None else prep
    if early is None:
        early = _submit_instances(prep, facts, out, explored, iv, run)
    tasks, instance_spans = early
    head = run.pending
    (out / "style.css").write_text((TEMPLATES / "style.css").read_text(encoding="utf-8"), encoding="utf-8")
    run.add([out / "style.css"])
    corpora = sorted(trials["corpus"].unique())
    groups = list(ev.group_values(trials))

    for task, eps in groups:
        lb_te = lb[(lb["task"] == task) & (lb["epsilon"] == eps)]
        prof_te = prof[(prof["task"] == task) & (prof["epsilon"] == eps)]
        run.submit(_leaderboard_page_write, out, task, eps, corpora, groups, lb_te, prof_te, explored,
                   defaults.get(task))

    rows = []
    for task, eps in groups:
        best = lb[(lb["task"] == task) & (lb["epsilon"] == eps) & (lb["slice"] == "all") & (lb["rank"] == 1)]
        rows.append({"href": _lb_page(task, eps), "task": TASK_LABELS[task], "eps": _eps(eps),
                     "best": [{"algorithm": r.algorithm, "tau50": lbd.format_tau50(r.tau50, r.reaches),
                               "corpus": r.corpus} for r in best.itertuples(index=False)]})
    if iv is not None and cov is not None and per is not None:
        _write_inference_pages(iv, cov, per, out, explored, run)
    run.add([_render(out / "index.html", "index.html", "Overview", 0, "index.html", rows=rows,
                     n_trials=len(prep), n_algorithms=len(prep[["task", "algorithm"]].drop_duplicates()),
                     n_instances=prep["instance"].nunique(), n_studies=prep["study"].nunique(), corpora=corpora,
                     coverage=_coverage_links(iv), point=True)])
    order = list(range(min([head] + [a for a, _ in instance_spans]))) + list(range(head, run.pending))
    for t, (a, b) in zip(tasks, instance_spans, strict=True):
        start = run.pending
        _submit_algorithm_pages(t, lb, out, run)
        order += list(range(a, b)) + list(range(start, run.pending))
    fx = facts.set_index("instance") if not facts.empty else pd.DataFrame()
    order.append(run.pending)
    run.add([_explore_index(tasks, fx, out)])
    parts = run.results()
    return [f for k in order for f in parts[k]]


def _leaderboard_page_write(out: Path, task: str, eps: float, corpora: list[str], groups: list[tuple[str, float]],
                            lb: pd.DataFrame, prof: pd.DataFrame, explored: set[str], default: str | None
                            ) -> list[Path]:
    """The Leaderboard page of a task and ε with a profile plot per corpus and slice.

    ``lb`` and ``prof`` hold (at least) the rows of this task and ε of the
    leaderboard and of the profiles table; ``default`` is the task's API
    default, always drawn.
    """
    files: list[Path] = []
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
            drawn = profile_leaders(g, default=default)
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
                         leaders=PROFILE_LEADERS, default=default, tau_max=f"{TAU_MAX:g}"))
    return files
