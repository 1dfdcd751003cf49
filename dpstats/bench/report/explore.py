"""The Explore pages: the index, a page per instance (its trials; a forest plot of its sce coverage trials) and
a page per algorithm (its leaderboard positions and profiles).

Each instance page and each algorithm page, with its figures, is a job of a
:class:`~dpstats.bench.report.pool.JobRunner`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dpstats.bench import evaluation as ev
from dpstats.bench import leaderboard as lbd
from dpstats.bench.report.pages import (
    SLICE_LABELS,
    TASK_LABELS,
    _algorithm_page,
    _eps,
    _fmt,
    _instance_page,
    _render,
    _safe,
    _val,
)
from dpstats.bench.report.plots import TAU_MAX, plot_forest, plot_profiles, plot_trials
from dpstats.bench.report.pool import JobRunner

__all__: list[str] = []


def _write_explore(prep: pd.DataFrame, lb: pd.DataFrame, fx: pd.DataFrame, out: Path, explored: set[str],
                   iv: pd.DataFrame | None, run: JobRunner) -> None:
    """The Explore index, instance pages (with forest plots for sce coverage trials) and algorithm pages.

    Each instance page and each algorithm page is a job of ``run``, a task's
    instance pages before its algorithm pages; the Explore index is written
    here, its file added to ``run``'s results last.
    """
    tasks = _explore_tasks(prep, explored, iv)
    for t in tasks:
        _submit_instance_pages(t, fx, out, run)
        _submit_algorithm_pages(t, lb, out, run)
    run.add([_explore_index(tasks, fx, out)])


def _explore_tasks(prep: pd.DataFrame, explored: set[str], iv: pd.DataFrame | None) -> list[dict[str, Any]]:
    """Per task with Explore pages, in task order: its trials (``trials``), its instances with their sizes
    (``known``: trials and sce coverage trials) and its sce coverage trials (``iv``, or None)."""
    ex = prep[prep["corpus"].isin(explored)]
    ivx = iv[iv["corpus"].isin(explored)] if iv is not None else None
    iv_sce = ivx[ivx["task"] == "sce"] if ivx is not None else None
    cols = ["instance", "study", "task", "n", "d"]
    task_set = set(ex["task"]) | (set(iv_sce["task"]) if iv_sce is not None else set())
    tasks = []
    for task in [t for t in ev.TASKS if t in task_set]:
        et = ex[ex["task"] == task]
        known = et[cols]
        if iv_sce is not None and task == "sce":
            known = pd.concat([known, iv_sce[cols]], ignore_index=True)
        tasks.append({"task": task, "trials": et, "known": known, "iv": iv_sce if task == "sce" else None})
    return tasks


def _submit_instance_pages(t: Mapping[str, Any], fx: pd.DataFrame, out: Path, run: JobRunner) -> None:
    """The instance pages of one task of :func:`_explore_tasks`, a job of ``run`` each, by instance."""
    et, iv_sce = t["trials"], t["iv"]
    et_by = dict(tuple(et.groupby("instance", sort=False)))
    for iid, g in t["known"].groupby("instance", sort=True):
        iv_i = iv_sce[iv_sce["instance"] == iid] if iv_sce is not None else None
        fx_i = fx.loc[[iid]] if iid in fx.index else fx.iloc[0:0]
        run.submit(_instance_job, out, iid, et_by.get(iid, et.iloc[0:0]), fx_i, g.iloc[0], iv_i)


def _submit_algorithm_pages(t: Mapping[str, Any], lb: pd.DataFrame, out: Path, run: JobRunner) -> None:
    """The algorithm pages of one task of :func:`_explore_tasks`, a job of ``run`` each, by algorithm."""
    task, et = t["task"], t["trials"]
    lb_t = lb[lb["task"] == task] if not lb.empty else lb
    for name, g in et.groupby("algorithm", sort=True):
        run.submit(_algorithm_page_write, out, task, name, g, lb_t[lb_t["algorithm"] == name]
                   if not lb_t.empty else lb_t)


def _explore_index(tasks: list[dict[str, Any]], fx: pd.DataFrame, out: Path) -> Path:
    """``explore.html``: per task of :func:`_explore_tasks` its algorithms and its instances with their facts."""
    entries = []
    for t in tasks:
        task, et = t["task"], t["trials"]
        algos = [{"href": _algorithm_page(task, name), "name": name, "interpretation": interp}
                 for (name, interp), _ in et.groupby(["algorithm", "interpretation"], sort=True)]
        inst = []
        for iid, g in t["known"].groupby("instance", sort=True):
            f = fx.loc[iid] if iid in fx.index else None
            inst.append({"href": _instance_page(iid), "name": iid, "study": g["study"].iloc[0],
                         "n": _fmt(g["n"].iloc[0]), "d": _fmt(g["d"].iloc[0]), "baseline": _fmt(_val(f, "baseline"), 4),
                         "se_type": _val(f, "se_type") or ""})
        entries.append({"label": TASK_LABELS[task], "algorithms": algos, "instances": inst})
    return _render(out / "explore.html", "explore.html", "Explore", 0, "explore.html", tasks=entries)


def _instance_job(out: Path, iid: str, g: pd.DataFrame, fx: pd.DataFrame, head: Any, iv: pd.DataFrame | None
                  ) -> list[Path]:
    """An instance page with its figures: the forest plot from ``iv`` (its sce coverage trials), if any."""
    forest: tuple[list[Path], dict[str, Any] | None, list[dict[str, Any]]] = ([], None, [])
    if iv is not None:
        forest = _forest(iv, iid, out)
    return _instance_page_write(out, iid, g, fx, head, forest)


def _trial_stats(g: pd.DataFrame) -> list[str]:
    """Trials, median, minimum and maximum finite ratio, success at τ = 1, failures by status (table cells).

    Counted on numpy arrays: the report calls this once per instance or
    algorithm and ε, thousands of times, where pandas' per-call overhead
    (``value_counts``, boolean Series) was most of its cost.
    """
    s = g["score"].to_numpy(dtype=float)
    status = g["status"].to_numpy(dtype=object)
    fin = s[np.isfinite(s)]
    counts = {k: int(np.count_nonzero(status == k)) for k in ev.FAILURE_STATUSES}
    fails = ", ".join(f"{k} {counts[k]}" for k in ev.FAILURE_STATUSES if counts[k])
    inf_ok = int(np.count_nonzero((status == "ok") & ~np.isfinite(s)))
    if inf_ok:
        fails = (fails + ", " if fails else "") + f"infinite error {inf_ok}"
    return [str(len(s)), _fmt(np.median(fin)) if fin.size else "—", _fmt(fin.min()) if fin.size else "—",
            _fmt(fin.max()) if fin.size else "—", f"{100 * float(np.mean(s <= 1.0)):.0f}%", fails or "—"]


def _ratios(g: pd.DataFrame) -> str:
    """Every trial's ratio, by seed (``✗`` for a failure).

    Integer seeds are ordered by ``numpy.argsort`` (quicksort), the order
    ``DataFrame.sort_values`` gives for one column without missing values;
    other seed columns go through ``sort_values``.
    """
    s = g["score"].to_numpy(dtype=float)
    if "seed" in g.columns:
        seed = g["seed"]
        if isinstance(seed.dtype, np.dtype) and seed.dtype.kind in "iu":
            s = s[np.argsort(seed.to_numpy(), kind="quicksort")]
        else:
            s = g.sort_values("seed")["score"].to_numpy(dtype=float)
    return " ".join(_fmt(x) if math.isfinite(x) else "✗" for x in s)


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


def _forest(iv: pd.DataFrame, iid: str, out: Path) -> tuple[list[Path], dict[str, Any] | None, list[dict[str, Any]]]:
    """The forest plot of an sce instance and its agreement table."""
    from dpstats.bench.coverage_forest import _first, forest_summary

    g = iv[(iv["instance"] == iid) & (iv["task"] == "sce")]
    if g.empty:
        return [], None, []
    summ = forest_summary(iv, iid)
    est = _first(g["truth"].iloc[0])
    slo, shi = _first(g["study_low"].iloc[0]), _first(g["study_high"].iloc[0])
    if not (math.isfinite(est) and math.isfinite(slo) and math.isfinite(shi)):
        return [], None, []
    rows: list[dict[str, Any]] = []
    table: list[dict[str, str]] = []
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
