"""The paper's figures as PNG: 1-way marginal stacked bars (Fig. 3) and Cramér's V heatmaps (Fig. 4)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from dpstats.bench.synth.metrics import MetricBins, cramers_v_matrix, metric_bins
from dpstats.synth.schema import Schema

__all__ = ["marginal_bars", "correlation_heatmaps"]


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def marginal_bars(real: pd.DataFrame, synthetic: Mapping[str, pd.DataFrame], schema: Schema, path: str | Path,
                  *, columns: Sequence[str] | None = None, bins: MetricBins | None = None, title: str = "") -> Path:
    """Stacked bars of each column's 1-way marginal (evaluation bins) for the original and each mechanism."""
    plt = _plt()
    bins = bins or metric_bins(real, schema)
    columns = list(columns or schema.names[:6])
    sizes = bins.sizes()
    tables = {"original": bins.bin(real), **{k: bins.bin(v) for k, v in synthetic.items()}}
    fig, axes = plt.subplots(1, len(columns), figsize=(2.2 * len(columns) + 1, 3.4), squeeze=False)
    for ax, col in zip(axes[0], columns):
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
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


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
    for ax, (name, m) in zip(flat, mats.items()):
        im = ax.imshow(m, vmin=0, vmax=1, cmap="viridis")
        ax.set_title(name, fontsize=9)
        ax.set_xticks([])
        ax.set_yticks([])
    for ax in flat[len(mats):]:
        ax.set_axis_off()
    if im is not None:
        fig.colorbar(im, ax=flat, shrink=0.8, label="Cramér's V (bias-corrected)")
    fig.suptitle(title or "pairwise correlation", fontsize=9)
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
