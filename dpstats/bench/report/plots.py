"""The report's plots: performance profiles and error ratios over trials (matplotlib, Agg, deterministic)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["COLORS", "LINESTYLES", "TAU_MAX", "profile_frame", "plot_profiles", "plot_trials", "plot_coverage", "plot_forest",
           "plot_instance_coverage"]

#: curve colours (Okabe-Ito, then grey shades); none of them is used by the page CSS
COLORS = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000")
LINESTYLES = ("-", "--", "-.", ":")

#: the right end of the profile plots' τ axis; curves that rise further are marked (the full
#: profiles are in ``profiles.csv``)
TAU_MAX = 1e3


def _figure(width: float = 7.0, height: float = 4.2) -> Any:
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure

    matplotlib.rcParams["svg.hashsalt"] = "dpstats"
    return Figure(figsize=(width, height), dpi=100)


def _null_formatter() -> Any:
    from matplotlib.ticker import NullFormatter

    return NullFormatter()


def profile_frame(ax: Any, lo: float, hi: float) -> None:
    """The frame of a performance profile: τ from ``lo`` to ``hi``, rates 0 to 1, dotted lines at 50 % and τ = 1."""
    ax.set_xlim(lo, hi)
    ax.set_ylim(-0.02, 1.02)
    ax.axhline(0.5, color="#999999", linewidth=0.8, linestyle=":")
    ax.axvline(1.0, color="#999999", linewidth=0.8, linestyle=":")


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


def plot_profiles(curves: Sequence[Mapping[str, Any]], stem: Path, title: str, tau_max: float = TAU_MAX
                  ) -> list[Path]:
    """Performance-profile plot: success rate against τ on a log axis, one step curve per entry.

    The τ axis ends at ``tau_max`` at the latest. A curve that still rises
    beyond it ends in a right-pointing triangle at the edge and its legend
    entry ends in ``▸``; the legend sits to the right of the axes.

    Parameters
    ----------
    curves : sequence of mappings
        Each with ``label``, ``taus`` and ``rates`` (step points of
        :func:`dpstats.bench.evaluation.profile`) and optionally ``dashed``.
    stem : Path
        Output path without suffix; ``.png`` and ``.svg`` are written.
    title : str
    tau_max : float
        Largest τ shown.

    Returns
    -------
    list of Path
    """
    lo, hi = _xlim(t for c in curves for t in c["taus"])
    hi = min(hi, float(tau_max))
    drawn = []
    for c in curves:
        taus = np.asarray(c["taus"], dtype=float)
        rates = np.asarray(c["rates"], dtype=float)
        keep = np.isfinite(taus)
        taus, rates = np.clip(taus[keep], lo, None), rates[keep]
        shown = taus <= hi
        more = bool((~shown).any())
        label = str(c["label"]) + ("  ▸" if more else "")
        drawn.append((taus[shown], rates[shown], more, label))
    axes_in = 6.2  # the width of the axes and their labels, in inches
    fig = _figure(axes_in, 4.2)
    ax = fig.add_subplot(1, 1, 1)
    beyond = 0
    for k, (c, (taus, rates, more, label)) in enumerate(zip(curves, drawn, strict=True)):
        end = rates[-1] if rates.size else 0.0
        xs = np.r_[lo, taus, hi]
        ys = np.r_[0.0, rates, end]
        color = COLORS[k % len(COLORS)]
        ax.step(xs, ys, where="post", color=color,
                linestyle="--" if c.get("dashed") else LINESTYLES[(k // len(COLORS)) % len(LINESTYLES)],
                linewidth=1.8, label=label)
        if more:
            beyond += 1
            ax.plot([hi], [end], marker=">", markersize=7, color=color, clip_on=False, linestyle="none")
    _log_axis(ax)
    profile_frame(ax, lo, hi)
    ax.set_xlabel("τ (error / sampling-error baseline)"
                  + (f"; ▸ = still rising beyond τ = {hi:g} (see profiles.csv)" if beyond else ""))
    ax.set_ylabel("success rate (study-weighted)")
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="major", alpha=0.25)
    legend_in = 0.0
    if curves:  # the legend goes to the right of the axes: widen the figure by its measured width
        leg = ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False)
        # the legend lays itself out to measure its width: no draw of the whole figure is needed
        legend_in = leg.get_window_extent().width / fig.dpi + 0.25
    width = axes_in + legend_in
    fig.set_size_inches(width, 4.2)
    fig.subplots_adjust(left=0.6 / width, right=1 - (legend_in + 0.15) / width, bottom=0.12, top=0.92)
    return _save(fig, stem)


def plot_trials(rows: Sequence[tuple[str, Sequence[float], Sequence[float]]], stem: Path, title: str) -> list[Path]:
    """Error ratios over trials: one row per label, one point per trial (x: ratio, log); failures at the right.

    Parameters
    ----------
    rows : sequence of tuple
        ``(label, epsilons, ratios)`` per row: the trials' privacy levels and
        scores (``inf`` for failures).
    stem : Path
        Output path without suffix; ``.png`` and ``.svg`` are written.
    title : str

    Returns
    -------
    list of Path
    """
    fig = _figure(7.0, max(2.0, 0.32 * len(rows) + 1.2))
    ax = fig.add_subplot(1, 1, 1)
    ax.autoscale(False)  # both limits are set below; without this every scatter call rescales the view again
    lo, hi = _xlim(r for _, _, rs in rows for r in rs)
    band = max(2.0, (hi / lo) ** 0.12)  # the failure band: an eighth of the log range
    fail_x = hi * band ** 0.5
    eps_all = sorted({float(e) for _, es, _ in rows for e in es})
    colors = {e: COLORS[k % len(COLORS)] for k, e in enumerate(eps_all)}
    # the points of one ε, over all rows, go into one collection: rows lie a unit apart and the markers of
    # different rows never overlap, so the picture is that of one collection per row and ε, drawn faster
    xs: dict[float, list[np.ndarray]] = {e: [] for e in eps_all}
    ys: dict[float, list[np.ndarray]] = {e: [] for e in eps_all}
    for y, (_label, eps_seq, ratios) in enumerate(rows):
        eps = np.asarray(eps_seq, dtype=float)
        r = np.asarray(ratios, dtype=float)
        for e in sorted(set(eps.tolist())):
            m = eps == e
            off = (eps_all.index(e) - (len(eps_all) - 1) / 2) * 0.12
            x = np.clip(r[m], lo, None)
            bad = ~np.isfinite(x)
            if bad.any():  # failures spread over the grey band so that their count shows
                x[bad] = np.geomspace(hi, hi * band, int(bad.sum()) + 2)[1:-1]
            xs[e].append(x)
            ys[e].append(np.full(x.shape, y + off))
    seen = [e for e in eps_all if xs[e]]
    for e in seen:
        ax.scatter(np.concatenate(xs[e]), np.concatenate(ys[e]), s=12, color=colors[e], marker="o", alpha=0.75,
                   label=f"ε = {e:g}", linewidths=0)
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




def plot_coverage(series: Sequence[Mapping[str, Any]], stem: Path, title: str, level: float = 0.95) -> list[Path]:
    """Coverage and median width ratio against ε: two panels, one line per method.

    Parameters
    ----------
    series : sequence of mappings
        Each with ``label``, ``epsilons``, ``coverage``, ``coverage_se`` and
        ``width`` (median width ratio; ``inf`` is drawn at the top edge), and
        optionally ``reference`` (True for the non-private interval: dashed,
        black).
    stem : Path
    title : str
    level : float
        The nominal level (a dotted line on the coverage panel).
    """
    fig = _figure(9.0, 3.6)
    ax1 = fig.add_subplot(1, 2, 1)
    ax2 = fig.add_subplot(1, 2, 2)
    widths = [w for s in series for w in s["width"] if math.isfinite(w) and w > 0]
    top = max(widths + [2.0]) * 2.0
    k = 0
    for s in series:
        eps = np.asarray(s["epsilons"], dtype=float)
        ref = bool(s.get("reference"))
        color = "#000000" if ref else COLORS[k % len(COLORS)]
        style = "--" if ref else LINESTYLES[(k // len(COLORS)) % len(LINESTYLES)]
        if not ref:
            k += 1
        cov = np.asarray(s["coverage"], dtype=float)
        se = np.asarray(s["coverage_se"], dtype=float)
        ax1.errorbar(eps, cov, yerr=2 * se, color=color, linestyle=style, marker="o", markersize=4, capsize=3,
                     linewidth=1.5, label=s["label"])
        w = np.asarray(s["width"], dtype=float)
        shown = np.where(np.isfinite(w), w, top)
        ax2.plot(eps, shown, color=color, linestyle=style, marker="o", markersize=4, linewidth=1.5)
        inf = ~np.isfinite(w)
        if inf.any():
            ax2.plot(eps[inf], shown[inf], marker="^", color=color, linestyle="none", markersize=7)
    ax1.axhline(level, color="#999999", linewidth=0.8, linestyle=":")
    ax1.set_ylim(max(0.0, min([0.5] + [c for s in series for c in s["coverage"] if math.isfinite(c)]) - 0.05), 1.02)
    ax1.set_ylabel(f"coverage of the truth (nominal {level:g})")
    ax2.set_yscale("log")
    ax2.set_ylim(0.5, top * 1.3)
    ax2.set_ylabel("median width ratio (private / non-private)")
    all_eps = sorted({float(e) for s in series for e in s["epsilons"]})
    for ax in (ax1, ax2):
        _log_axis(ax)
        if all_eps:
            ax.set_xticks(all_eps)
            ax.set_xlim(all_eps[0] / 1.4, all_eps[-1] * 1.4)
        ax.set_xlabel("ε")
        ax.grid(True, which="major", alpha=0.25)
    ax1.set_title("coverage ± 2 binomial SE", fontsize=9)
    ax2.set_title("width ratio (▲ = infinite)", fontsize=9)
    fig.suptitle(title, fontsize=10)
    leg = ax1.legend(fontsize=7, loc="upper left", bbox_to_anchor=(2.35, 1.0), frameon=False)
    fig.draw_without_rendering()
    legend_in = leg.get_window_extent().width / fig.dpi + 0.3
    width = 9.0 + legend_in
    fig.set_size_inches(width, 3.6)
    fig.subplots_adjust(left=0.7 / width, right=1 - (legend_in + 0.1) / width, wspace=0.35, bottom=0.15, top=0.84)
    return _save(fig, stem)


def plot_forest(study: tuple[float, float, float], rows: Sequence[Mapping[str, Any]], stem: Path, title: str
                ) -> list[Path]:
    """Forest plot: the study's estimate and interval above the private intervals, one row per method and ε.

    Parameters
    ----------
    study : (estimate, low, high)
        The study's estimate and interval (the non-private one of its SE type on all rows).
    rows : sequence of mappings
        Each with ``label`` (left), ``note`` (right), ``lows`` and ``highs``
        (one interval per trial, drawn thin) and optionally ``reference``
        (the non-private interval on the same draws: grey).
    stem : Path
    title : str
    """
    est, slo, shi = (float(v) for v in study)
    half = max(shi - slo, 1e-12) / 2.0
    lo_x = min(est - 6 * half, 0.0 - half)
    hi_x = max(est + 6 * half, 0.0 + half)
    fig = _figure(8.0, max(2.2, 0.3 * (len(rows) + 1) + 1.2))
    ax = fig.add_subplot(1, 1, 1)
    ax.plot([slo, shi], [0, 0], color="#000000", linewidth=3.0, solid_capstyle="butt")
    ax.plot([est], [0], marker="D", color="#000000", markersize=6)
    labels = ["study (all rows)"]
    notes = [""]
    eps_colors: dict[str, str] = {}
    for y, r in enumerate(rows, start=1):
        key = str(r.get("color_key", r["label"]))
        color = "#888888" if r.get("reference") else eps_colors.setdefault(key, COLORS[len(eps_colors) % len(COLORS)])
        lows = np.asarray(r["lows"], dtype=float)
        highs = np.asarray(r["highs"], dtype=float)
        m = len(lows)
        offs = np.linspace(-0.25, 0.25, m) if m > 1 else np.zeros(1)
        for off, a, b in zip(offs, lows, highs, strict=False):
            if not (math.isfinite(a) or a == -math.inf) or not (math.isfinite(b) or b == math.inf):
                continue
            a_c, b_c = max(a, lo_x), min(b, hi_x)
            if a_c > b_c:  # wholly outside the axis: an arrow at the side it lies on
                side = hi_x if a > hi_x else lo_x
                ax.plot([side], [y + off], marker=">" if side == hi_x else "<", color=color, markersize=4)
                continue
            ax.plot([a_c, b_c], [y + off, y + off], color=color, linewidth=1.2, alpha=0.85)
            if a < lo_x:
                ax.plot([lo_x], [y + off], marker="<", color=color, markersize=4)
            if b > hi_x:
                ax.plot([hi_x], [y + off], marker=">", color=color, markersize=4)
        labels.append(str(r["label"]))
        notes.append(str(r.get("note", "")))
    ax.axvline(0.0, color="#999999", linewidth=0.8, linestyle=":")
    ax.axvline(est, color="#000000", linewidth=0.6, linestyle="--", alpha=0.5)
    ax.set_xlim(lo_x, hi_x)
    ax.set_ylim(len(rows) + 0.6, -0.6)
    ax.set_yticks(range(len(labels)))
    ax.set_yticklabels(labels, fontsize=7)
    ax2 = ax.twinx()
    ax2.set_ylim(ax.get_ylim())
    ax2.set_yticks(range(len(notes)))
    ax2.set_yticklabels(notes, fontsize=7)
    ax.set_xlabel("coefficient (◂ ▸: interval runs beyond the axis)")
    ax.set_title(title, fontsize=10)
    ax.grid(True, axis="x", alpha=0.25)
    longest = max((len(s) for s in labels), default=4)
    longest_r = max((len(s) for s in notes), default=4)
    height = fig.get_size_inches()[1]
    fig.subplots_adjust(left=min(0.4, 0.04 + 0.0085 * longest), right=1 - min(0.4, 0.03 + 0.0085 * longest_r),
                        bottom=min(0.4, 0.55 / height), top=1 - min(0.3, 0.4 / height))
    return _save(fig, stem)


def plot_instance_coverage(panels: Sequence[Mapping[str, Any]], stem: Path, title: str, level: float = 0.95,
                           floor: float = 0.85, labels: int = 4) -> list[Path]:
    """Per-instance coverage against median width ratio: one panel per ε, one point per instance and method.

    The x axis (median width ratio, log, shared by the panels) ends in a grey
    band where the instances whose median width ratio is infinite are drawn
    (``▸``), one column per method, with their count above the marker when
    several share a coverage. Dotted: the nominal ``level``; dashed: the
    per-instance ``floor``; the ``labels`` lowest instances below the floor
    in each panel are named.

    Parameters
    ----------
    panels : sequence of mappings
        Each with ``title`` and ``points``: a sequence of mappings with
        ``label`` (the method), ``x`` (median width ratios), ``y``
        (coverages) and ``names`` (instance ids). A method keeps its colour
        across panels.
    stem : Path
        Output path without suffix; ``.png`` and ``.svg`` are written.
    title : str
    level, floor : float
    labels : int
        Instances named per panel.

    Returns
    -------
    list of Path
    """
    methods: list[str] = []
    for pn in panels:
        for pt in pn["points"]:
            if str(pt["label"]) not in methods:
                methods.append(str(pt["label"]))
    colors = {m: COLORS[k % len(COLORS)] for k, m in enumerate(methods)}
    lo, hi = _xlim(x for pn in panels for pt in pn["points"] for x in pt["x"])
    band = max(4.0, (hi / lo) ** (1 / 3))  # a quarter of the axis: room for a column per method
    slots = np.geomspace(hi, hi * band, len(methods) + 2)[1:-1] if methods else np.zeros(0)
    ncols = 1 if len(panels) <= 1 else 2
    nrows = max(1, math.ceil(len(panels) / ncols))
    panel_w, panel_h = 4.3, 3.3
    fig = _figure(panel_w * ncols, panel_h * nrows + 0.5)
    axes = [fig.add_subplot(nrows, ncols, k + 1) for k in range(max(1, len(panels)))]
    for ax, pn in zip(axes, panels, strict=False):
        low: list[tuple[float, float, str]] = []
        for pt in pn["points"]:
            m = str(pt["label"])
            x = np.asarray(pt["x"], dtype=float)
            y = np.asarray(pt["y"], dtype=float)
            names = [str(v) for v in pt.get("names", [""] * len(x))]
            fin = np.isfinite(x)
            xs = np.clip(x, lo, None)
            ax.scatter(xs[fin], y[fin], s=16, color=colors[m], marker="o", alpha=0.8, linewidths=0, zorder=3)
            slot = float(slots[methods.index(m)])
            ys, counts = np.unique(y[~fin & np.isfinite(y)], return_counts=True)
            ax.scatter(np.full(ys.shape, slot), ys, s=22, color=colors[m], marker=">", linewidths=0, zorder=3)
            for yv, cnt in zip(ys, counts, strict=True):
                if cnt > 1:  # the count above the marker, so that neighbouring columns do not collide
                    ax.annotate(f"{cnt}", (slot, yv), xytext=(0, 3), textcoords="offset points", fontsize=5,
                                color=colors[m], ha="center", va="bottom", zorder=4)
            for k in range(len(x)):
                if math.isfinite(y[k]) and y[k] < floor - 1e-12:
                    low.append((float(y[k]), float(xs[k]) if fin[k] else slot, names[k]))
        near = (hi * band / lo) ** 0.04  # points this close (and at the same coverage) share one label
        groups: list[tuple[float, float, list[str]]] = []
        for yv, xv, name in sorted(low)[:labels]:
            for gy, gx, gnames in groups:
                if abs(gy - yv) < 1e-9 and max(gx, xv) / min(gx, xv) < near:
                    if name not in gnames:  # one instance, several methods: named once
                        gnames.append(name)
                    break
            else:
                groups.append((yv, xv, [name]))
        for yv, xv, gnames in groups:
            left = xv < hi
            ax.annotate(", ".join(gnames), (xv, yv), xytext=(4 if left else -5, 0), textcoords="offset points",
                        fontsize=5.5, color="#333333", ha="left" if left else "right", va="center", zorder=5)
        ax.axvspan(hi, hi * band, color="#eeeeee", zorder=0)
        ax.text((hi * hi * band) ** 0.5, -0.015, "∞", ha="center", va="top", fontsize=8, color="#555555",
                transform=ax.get_xaxis_transform())  # in the row of the tick labels
        ax.axhline(level, color="#999999", linewidth=0.8, linestyle=":", zorder=1)
        ax.axhline(floor, color="#D55E00", linewidth=0.8, linestyle="--", zorder=1)
        ax.axvline(1.0, color="#999999", linewidth=0.8, linestyle=":", zorder=1)
        _log_axis(ax)
        from matplotlib.ticker import FuncFormatter

        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}" if v <= hi * 1.0001 else ""))
        ax.set_xlim(lo, hi * band)
        ax.set_ylim(-0.03, 1.07)
        ax.set_title(str(pn["title"]), fontsize=9)
        ax.grid(True, which="major", alpha=0.25)
        ax.tick_params(labelsize=7)
    for k, ax in enumerate(axes):
        if k // ncols == nrows - 1 or k + ncols >= len(axes):
            ax.set_xlabel("median width ratio (private / non-private; ▸ grey band = ∞)", fontsize=7)
        if k % ncols == 0:
            ax.set_ylabel("coverage of the instance", fontsize=7)
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], color=colors[m], marker="o", linestyle="none", label=m) for m in methods]
    handles += [Line2D([], [], color="#999999", linestyle=":", label=f"nominal {level:g}"),
                Line2D([], [], color="#D55E00", linestyle="--", label=f"per-instance line {floor:g}")]
    fig.suptitle(title, fontsize=10)
    leg = fig.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(0.0, 1.0), frameon=False)
    fig.draw_without_rendering()
    legend_in = leg.get_window_extent().width / fig.dpi + 0.3
    width = panel_w * ncols + legend_in
    height = panel_h * nrows + 0.5
    fig.set_size_inches(width, height)
    right = 1 - (legend_in + 0.1) / width
    fig.subplots_adjust(left=0.6 / width, right=right, wspace=0.25, hspace=0.4, bottom=0.5 / height,
                        top=1 - 0.55 / height)
    leg.set_bbox_to_anchor((right + 0.1 / width, 1 - 0.55 / height), transform=fig.transFigure)
    return _save(fig, stem)
