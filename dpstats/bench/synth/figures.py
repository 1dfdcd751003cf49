"""The paper's figures as PNG.

* :func:`metric_curves`: each metric against epsilon, a line per mechanism
  and the original data's value as a dashed ceiling, one figure per data set
  (the paper's Figs. 1 and 2 show these values per data set and epsilon);
* :func:`discretizer_bars`: PrivTree minus equal width per mechanism and
  metric, a panel per epsilon (the paper's comparison of discretisers);
* :func:`marginal_bars`: 1-way marginal stacked bars (Fig. 3);
* :func:`correlation_heatmaps`: Cramér's V heatmaps (Fig. 4).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dpstats.bench.synth.compare import HELDOUT_F1, ORIGINAL
from dpstats.bench.synth.metrics import METRICS, MetricBins, cramers_v_matrix, metric_bins
from dpstats.synth.schema import Schema

__all__ = ["metric_curves", "discretizer_bars", "marginal_bars", "correlation_heatmaps"]


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(plt: Any, fig: Any, path: str | Path) -> Path:
    """Write ``fig`` as a PNG at ``path`` and close it."""
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def marginal_bars(real: pd.DataFrame, synthetic: Mapping[str, pd.DataFrame], schema: Schema, path: str | Path,
                  *, columns: Sequence[str] | None = None, bins: MetricBins | None = None, title: str = "") -> Path:
    """Stacked bars of each column's 1-way marginal (evaluation bins) for the original and each mechanism."""
    plt = _plt()
    bins = bins or metric_bins(real, schema)
    columns = list(columns or schema.names[:6])
    sizes = bins.sizes()
    tables = {"original": bins.bin(real), **{k: bins.bin(v) for k, v in synthetic.items()}}
    fig, axes = plt.subplots(1, len(columns), figsize=(2.2 * len(columns) + 1, 3.4), squeeze=False)
    for ax, col in zip(axes[0], columns, strict=True):
        j, k = schema.names.index(col), sizes[col]
        cmap = plt.get_cmap("tab20", max(k, 2))
        bottom = np.zeros(len(tables))
        for b in range(k):
            h = np.array([np.mean(t[:, j] == b) for t in tables.values()])
            ax.bar(range(len(tables)), h, bottom=bottom, color=cmap(b % 20), width=0.8)
            bottom += h
        ax.set_xticks(range(len(tables)), list(tables), rotation=60, fontsize=7)
        ax.set_title(col, fontsize=8)
        ax.set_ylim(0, 1)
    fig.suptitle(title or "1-way marginals", fontsize=9)
    fig.tight_layout()
    return _save(plt, fig, path)


def correlation_heatmaps(real: pd.DataFrame, synthetic: Mapping[str, pd.DataFrame], schema: Schema,
                         path: str | Path, *, bins: MetricBins | None = None, title: str = "") -> Path:
    """Bias-corrected Cramér's V between all columns, original and each mechanism, side by side."""
    plt = _plt()
    bins = bins or metric_bins(real, schema)
    sizes = list(bins.sizes().values())
    mats = {"original": cramers_v_matrix(bins.bin(real), sizes)}
    mats.update({k: cramers_v_matrix(bins.bin(v), sizes) for k, v in synthetic.items()})
    # a grid of at most five panels a row (twelve mechanisms in one row are unreadable)
    ncol = min(5, len(mats))
    nrow = -(-len(mats) // ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(2.6 * ncol + 1.2, 2.7 * nrow + 0.4), squeeze=False)
    im = None
    flat = list(axes.ravel())
    for ax, (name, m) in zip(flat, mats.items(), strict=False):
        im = ax.imshow(m, vmin=0, vmax=1, cmap="viridis")
        ax.set_title(name, fontsize=9)
        ax.set_xticks([])
        ax.set_yticks([])
    for ax in flat[len(mats):]:
        ax.set_axis_off()
    if im is not None:
        fig.colorbar(im, ax=flat, shrink=0.8, label="Cramér's V (bias-corrected)")
    fig.suptitle(title or "pairwise correlation", fontsize=9)
    return _save(plt, fig, path)


def metric_curves(results: pd.DataFrame, dataset: str, path: str | Path, *, title: str = "") -> Path:
    """Each metric of ``dataset`` against epsilon: mean over successful trials (markers) and range (bars).

    A mechanism without a successful trial at an epsilon has no point there.
    The original data's value (mechanism :data:`~dpstats.bench.synth.compare.ORIGINAL`,
    when the results hold it) is a dashed line: the ceiling of each metric;
    on the F1 panel a dotted line is its held-out F1.
    """
    plt = _plt()
    d = results[(results["dataset"] == dataset) & (results["status"] == "ok") & (results["metric"] != "")]
    metrics = [m for m in METRICS if m in set(d["metric"])]
    if not metrics:
        raise ValueError(f"no successful trial of data set {dataset!r} in the results")
    orig = d[d["mechanism"] == ORIGINAL].groupby("metric")["value"].mean()
    runs = d[d["mechanism"] != ORIGINAL]
    mechs = sorted(runs["mechanism"].unique())
    cmap = plt.get_cmap("tab10" if len(mechs) <= 10 else "tab20")
    fig, axes = plt.subplots(1, len(metrics), figsize=(3.3 * len(metrics) + 1.6, 3.4), squeeze=False)
    for ax, metric in zip(axes[0], metrics, strict=True):
        for i, mech in enumerate(mechs):
            g = runs[(runs["mechanism"] == mech) & (runs["metric"] == metric)].groupby("epsilon")["value"]
            if not len(g):
                continue
            st = g.agg(["mean", "min", "max"]).sort_index()
            x = st.index.to_numpy(dtype=float)
            ax.errorbar(x, st["mean"], yerr=[st["mean"] - st["min"], st["max"] - st["mean"]], color=cmap(i),
                        marker="o", ms=3, lw=1, capsize=2, label=mech)
        if metric in orig:
            ax.axhline(float(orig[metric]), color="black", ls="--", lw=1, label=ORIGINAL)
        if metric == "f1" and HELDOUT_F1 in orig:
            ax.axhline(float(orig[HELDOUT_F1]), color="black", ls=":", lw=1, label=f"{ORIGINAL} (held out)")
        ax.set_xscale("log")
        ax.set_xlabel("ε")
        ax.set_title(f"{metric} ({METRICS[metric]})", fontsize=9)
    legend: dict[str, Any] = {}
    for ax in axes[0]:
        for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
            legend.setdefault(lab, h)
    fig.legend(list(legend.values()), list(legend), loc="center right", fontsize=7, frameon=False)
    fig.suptitle(title or f"{dataset}: metrics against ε", fontsize=9)
    fig.tight_layout(rect=(0, 0, 0.86, 1))
    return _save(plt, fig, path)


def discretizer_bars(comparison: pd.DataFrame, dataset: str, path: str | Path, *, title: str = "") -> Path:
    """PrivTree minus equal width (:func:`~dpstats.bench.synth.compare.discretizer_comparison`) for ``dataset``.

    A panel per epsilon, a group of bars per mechanism, a bar per metric;
    above 0 PrivTree did better.
    """
    plt = _plt()
    d = comparison[comparison["dataset"] == dataset]
    if d.empty:
        raise ValueError(f"no comparison for data set {dataset!r}")
    epsilons = sorted(d["epsilon"].unique())
    mechs = sorted(d["mechanism"].unique())
    metrics = [m for m in METRICS if m in set(d["metric"])]
    width = 0.8 / max(len(metrics), 1)
    fig, axes = plt.subplots(1, len(epsilons), figsize=(0.55 * len(mechs) * len(epsilons) + 2.5, 3.4),
                             squeeze=False, sharey=True)
    for ax, eps in zip(axes[0], epsilons, strict=True):
        for k, metric in enumerate(metrics):
            v = d[(d["epsilon"] == eps) & (d["metric"] == metric)].set_index("mechanism")["difference"]
            ax.bar(np.arange(len(mechs)) + (k - (len(metrics) - 1) / 2) * width, v.reindex(mechs).to_numpy(),
                   width=width, label=metric)
        ax.axhline(0, color="black", lw=0.8)
        ax.set_xticks(range(len(mechs)), mechs, rotation=60, fontsize=7)
        ax.set_title(f"ε = {eps:g}", fontsize=9)
    axes[0][0].set_ylabel("PrivTree − equal width")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="center right", fontsize=7, frameon=False)
    fig.suptitle(title or f"{dataset}: PrivTree against equal width", fontsize=9)
    fig.tight_layout(rect=(0, 0, 0.9, 1))
    return _save(plt, fig, path)
