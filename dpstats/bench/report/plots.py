"""The report's plots: performance profiles and error ratios over trials (matplotlib, Agg, deterministic)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

__all__ = ["COLORS", "LINESTYLES", "TAU_MAX", "plot_profiles", "plot_trials"]

#: curve colours (Okabe-Ito, then grey shades); none of them is used by the page CSS
COLORS = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000")
LINESTYLES = ("-", "--", "-.", ":")

#: the right end of the profile plots' τ axis; curves that rise further are marked (the full
#: profiles are in ``profiles.csv``)
TAU_MAX = 1e3


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
    for k, (c, (taus, rates, more, label)) in enumerate(zip(curves, drawn)):
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
    ax.set_xlim(lo, hi)
    ax.set_ylim(-0.02, 1.02)
    ax.axhline(0.5, color="#999999", linewidth=0.8, linestyle=":")
    ax.axvline(1.0, color="#999999", linewidth=0.8, linestyle=":")
    ax.set_xlabel("τ (error / sampling-error baseline)"
                  + (f"; ▸ = still rising beyond τ = {hi:g} (see profiles.csv)" if beyond else ""))
    ax.set_ylabel("success rate (study-weighted)")
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="major", alpha=0.25)
    legend_in = 0.0
    if curves:  # the legend goes to the right of the axes: widen the figure by its measured width
        leg = ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False)
        fig.draw_without_rendering()
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


