"""Benchmark figures for the algorithm pages, drawn at every docs build from the committed results.

For each page ``algorithms/<task>/<name>.md`` this writes
``generated/algorithm_figures/<task>/<name>.inc`` (a Markdown snippet the page includes) and its
figures beside it:

- ``<task>-<name>-profile.png``: the algorithm's performance profile against the task's leaders
  (the :data:`LEADERS` best ``standard`` algorithms by τ@50) at each ε of the table, one panel per ε,
  two to a row, from ``benchmark/ratios_public_quick.csv`` (``benchmarks/ratio_table.py``), with the
  profiles, τ@50 and ranks of :mod:`dpstats.bench.evaluation` and :mod:`dpstats.bench.leaderboard`;
- ``<task>-<name>-coverage.png``, when the algorithm has intervals: its coverage of the truth,
  share of finite intervals and median width ratio against ε per slice, with the non-private
  interval's coverage and the 95 % line, from ``benchmark/coverage_public_quick.csv``.

Nothing is committed: ``docs/generated/`` is git-ignored. Files are rewritten only when their bytes
change, so an unchanged page is not re-read by an incremental build.
"""

from __future__ import annotations

import io
import math
import sys
from pathlib import Path
from typing import Any

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
RATIOS = DOCS / "benchmark" / "ratios_public_quick.csv"
COVERAGE = DOCS / "benchmark" / "coverage_public_quick.csv"
OUT = "generated/algorithm_figures"  # relative to the source folder
LEADERS = 3  # standard algorithms drawn beside the page's own, the best by τ@50
PANELS_PER_ROW = 2  # profile panels (one per ε) side by side; four ε make two rows
TAU_MAX = 1e3  # the right end of the τ axis, as on the report's pages
TAU_MIN = 1e-3  # its left end at the lowest (a curve's steps below it are drawn at it: S(TAU_MIN) is right)
WIDTH = 8.4  # inches at 100 dpi: about the text column at a 1,400 px window
DPI = 150
LEVEL = 0.95

#: leaders' colours (Okabe-Ito without black, which is the page's algorithm)
COLORS = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9")
SLICE_STYLE = {  # slice -> (label, colour, line width)
    "all": ("all instances", "#000000", 2.2),
    "d<=10": ("d ≤ 10", "#0072B2", 1.2),
    "d>10": ("d > 10", "#E69F00", 1.2),
    "n/d<=100": ("n/d ≤ 100", "#009E73", 1.2),
    "n/d>100": ("n/d > 100", "#CC79A7", 1.2),
}

RATIO_COMMAND = """\
dpstats bench --preset quick --epsilon 0.3 1 3 10 --workers 2 --results results/bench.sqlite
python benchmarks/ratio_table.py results/bench.sqlite \\
    docs/benchmark/ratios_public_quick.csv"""
COVERAGE_COMMAND = """\
dpstats bench --inference --preset quick --epsilon 0.3 1 3 10 --trials 5 --workers 2 \\
    --results inference.sqlite
dpstats report --results inference.sqlite --out report
cp report/coverage.csv docs/benchmark/coverage_public_quick.csv"""


def _eps(e: float) -> str:
    return f"{float(e):g}"


def _write(path: Path, data: bytes) -> None:
    """Write ``data`` unless the file already holds exactly it."""
    if path.is_file() and path.read_bytes() == data:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def _figure(width: float, height: float) -> Any:
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=100)


def _png(fig: Any) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, metadata={"Software": None})
    return buf.getvalue()


def _log_x(ax: Any) -> None:
    """A log x axis with plain labels (0.1, 1, 10) and no minor ticks (they cost most of the drawing)."""
    from matplotlib.ticker import FuncFormatter, NullLocator

    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    ax.xaxis.set_minor_locator(NullLocator())


# --------------------------------------------------------------------------
# point accuracy: performance profiles against the leaders
# --------------------------------------------------------------------------


class Profiles:
    """Leaderboards and profiles of slice ``all`` per task and ε, from the committed ratio table."""

    def __init__(self, path: Path) -> None:
        sys.path.insert(0, str(ROOT / "benchmarks"))
        try:
            from ratio_table import read_ratio_table
        finally:
            sys.path.remove(str(ROOT / "benchmarks"))
        from dpstats.bench.evaluation import profile
        from dpstats.bench.leaderboard import leaderboard

        self.trials = read_ratio_table(path)
        board = leaderboard(self.trials)
        self.board = board[board["slice"] == "all"].reset_index(drop=True)
        self.profiles = {}
        for (task, eps), _ in self.board.groupby(["task", "epsilon"], sort=False):
            self.profiles[(task, float(eps))] = profile(self.trials, task, float(eps), "all")
        self.trial_counts = self.trials.groupby(["task", "instance"]).size()

    def epsilons(self, task: str) -> list[float]:
        return sorted(float(e) for e in self.board.loc[self.board["task"] == task, "epsilon"].unique())

    def has(self, task: str, name: str) -> bool:
        return bool(((self.board["task"] == task) & (self.board["algorithm"] == name)).any())

    def facts(self, task: str) -> tuple[int, int, int]:
        """Instances, studies and trials per instance and ε of a task."""
        t = self.trials[self.trials["task"] == task]
        per = t.groupby(["epsilon", "algorithm", "instance"]).size()
        return int(t["instance"].nunique()), int(t["study"].nunique()), int(per.max())


def _profile_figure(prof: Profiles, task: str, names: list[str]) -> bytes:
    """One panel per ε, two to a row: ``names`` (black) and the leaders of that ε (colours)."""
    import numpy as np
    import pandas as pd

    from dpstats.bench.leaderboard import format_tau50
    from dpstats.bench.report.plots import profile_frame

    eps_list = prof.epsilons(task)
    boards = {e: prof.board[(prof.board["task"] == task) & (prof.board["epsilon"] == e)] for e in eps_list}
    leaders = {e: [a for a in b.loc[b["interpretation"] == "standard", "algorithm"] if a not in names][:LEADERS]
               for e, b in boards.items()}
    colour: dict[str, str] = {}
    for e in eps_list:
        for a in leaders[e]:
            if a not in names and a not in colour:
                colour[a] = COLORS[len(colour) % len(COLORS)]
    finite = [t for e in eps_list for t in prof.profiles[(task, e)]["tau"] if math.isfinite(t) and t > 0]
    lo = max(TAU_MIN, min(0.5, min(finite) / 1.5)) if finite else 0.1
    hi = TAU_MAX
    ncol = min(len(eps_list), PANELS_PER_ROW)
    nrow = math.ceil(len(eps_list) / ncol)
    entries = max(len(leaders[e]) + sum(a in boards[e]["algorithm"].values for a in names) for e in eps_list)
    # in inches, per row of panels: title, axes, tick labels and x label, then the legend under each panel
    top_in, axes_in, under_in, legend_in = 0.35, 2.9, 0.55, 0.22 * entries + 0.1
    height = nrow * (top_in + axes_in + under_in + legend_in)
    fig = _figure(WIDTH, height)
    grid = fig.subplots(nrow, ncol, sharey=True, squeeze=False)
    axes = list(grid.ravel())
    for ax in axes[len(eps_list):]:
        ax.set_visible(False)
    for ax, e in zip(axes, eps_list):
        b = boards[e].set_index("algorithm")
        p = prof.profiles[(task, e)]
        shown = [a for a in leaders[e] if a not in names] + [a for a in names if a in b.index]
        for a in shown:
            row = b.loc[a]
            steps = p[p["algorithm"] == a]
            taus = steps["tau"].to_numpy(dtype=float)
            rates = steps["rate"].to_numpy(dtype=float)
            keep = np.isfinite(taus)
            taus, rates = np.clip(taus[keep], lo, None), rates[keep]
            inside = taus <= hi
            beyond = bool((~inside).any())
            taus, rates = taus[inside], rates[inside]
            end = rates[-1] if rates.size else 0.0
            own = a in names
            col = "#000000" if own else colour[a]
            rank = "" if pd.isna(row["rank"]) else f", rank {int(row['rank'])}"
            cls = "" if row["interpretation"] == "standard" else f" [{row['interpretation']}]"
            label = f"{a}{cls}: τ@50 {format_tau50(float(row['tau50']), float(row['reaches']))}{rank}"
            api = own and a != names[0]
            ax.step(np.r_[lo, taus, hi], np.r_[0.0, rates, end], where="post", color=col,
                    linestyle="--" if api else "-", linewidth=(1.6 if api else 2.6) if own else 1.4,
                    label=label + ("  ▸" if beyond else ""), zorder=3 if own else 2)
            if beyond:
                ax.plot([hi], [end], marker=">", markersize=6, color=col, clip_on=False, linestyle="none")
        _log_x(ax)
        profile_frame(ax, lo, hi)
        ax.grid(True, which="major", alpha=0.25)
        ax.set_title(f"ε = {_eps(e)}", fontsize=10)
        ax.set_xlabel("τ (error / sampling-error baseline)", fontsize=9)
        ax.tick_params(labelsize=9)
        ax.legend(fontsize=9, loc="upper left", bbox_to_anchor=(-0.02, -under_in / axes_in), frameon=False,
                  handlelength=2.2, borderaxespad=0.0)
    for row in grid:
        row[0].set_ylabel("share of trials with error ≤ τ\n(studies weighted equally)", fontsize=9)
    fig.subplots_adjust(left=0.09, right=0.98, top=1 - top_in / height, bottom=(under_in + legend_in) / height,
                        wspace=0.16, hspace=(top_in + under_in + legend_in) / axes_in)
    return _png(fig)


# --------------------------------------------------------------------------
# intervals: coverage against ε per slice
# --------------------------------------------------------------------------


def _coverage_figure(cov: Any, task: str, name: str) -> bytes:
    """Coverage (± 2 SE on all instances), finite share and median width ratio against ε, per slice."""
    import numpy as np

    own = cov[(cov["task"] == task) & (cov["algorithm"] == name)]
    ref = cov[(cov["task"] == task) & (cov["algorithm"] == "non-private") & (cov["slice"] == "all")]
    eps = sorted(float(e) for e in own["epsilon"].unique())
    fig = _figure(WIDTH, 3.2)
    ax1, ax2, ax3 = fig.subplots(1, 3)
    widths = [w for w in own["median_width_ratio"] if math.isfinite(w) and w > 0]
    top = max(widths + [4.0]) * 2.0
    for sl, (label, col, lw) in SLICE_STYLE.items():
        g = own[own["slice"] == sl].sort_values("epsilon")
        if g.empty:
            continue
        x = g["epsilon"].to_numpy(dtype=float)
        n_inst = int(g["instances"].iloc[0])
        lab = f"{label} ({n_inst})"
        if sl == "all":
            ax1.errorbar(x, g["coverage"], yerr=2 * g["coverage_se"], color=col, linewidth=lw, marker="o",
                         markersize=4, capsize=3, label=lab, zorder=3)
        else:
            ax1.plot(x, g["coverage"], color=col, linewidth=lw, marker="o", markersize=3, label=lab)
        ax2.plot(x, 100 * (1 - g["infinite"].to_numpy(dtype=float)), color=col, linewidth=lw, marker="o",
                 markersize=3 if sl != "all" else 4)
        w = g["median_width_ratio"].to_numpy(dtype=float)
        shown = np.where(np.isfinite(w), w, top)
        ax3.plot(x, shown, color=col, linewidth=lw, marker="o", markersize=3 if sl != "all" else 4)
        inf = ~np.isfinite(w)
        if inf.any():
            ax3.plot(x[inf], shown[inf], marker="^", color=col, linestyle="none", markersize=7, clip_on=False)
    r = ref.sort_values("epsilon")
    ax1.plot(r["epsilon"], r["coverage"], color="#777777", linestyle="--", linewidth=1.4,
             label="non-private interval, same draws (all)")
    ax1.axhline(LEVEL, color="#D55E00", linewidth=1.0, linestyle=":")
    ax1.annotate(f"{LEVEL:.0%}", xy=(1.0, LEVEL), xycoords=("axes fraction", "data"), xytext=(2, 0),
                 textcoords="offset points", va="center", fontsize=7, color="#D55E00")
    low = min([0.5] + [c for c in own["coverage"] if math.isfinite(c)] + list(r["coverage"]))
    ax1.set_ylim(max(0.0, low - 0.05), 1.02)
    ax2.set_ylim(-3, 103)
    ax3.set_yscale("log")
    ax3.set_ylim(0.5, top * 1.4)
    steps = (1, 2, 5, 10, 20, 50, 100) if top < 1e3 else tuple(10.0 ** k for k in range(0, 19, 1 if top < 1e7 else 3))
    ticks = [v for v in steps if v < top / 1.6]
    ax3.set_yticks(ticks + [top], [f"{v:g}" for v in ticks] + ["∞"])
    ax3.minorticks_off()
    ax1.set_title("coverage of the truth", fontsize=9)
    ax2.set_title("finite intervals (%)", fontsize=9)
    ax3.set_title("median width / non-private (▲ = ∞)", fontsize=9)
    for ax in (ax1, ax2, ax3):
        _log_x(ax)
        ax.set_xticks(eps)
        ax.set_xlim(eps[0] / 1.5, eps[-1] * 1.5)
        ax.set_xlabel("ε", fontsize=9)
        ax.tick_params(labelsize=9)
        ax.grid(True, which="major", alpha=0.25)
    handles, labels = ax1.get_legend_handles_labels()
    order = sorted(range(len(labels)), key=lambda k: (not labels[k].startswith("all"), "non-private" not in labels[k]))
    fig.legend([handles[k] for k in order], [labels[k] for k in order], loc="lower center", ncol=3, fontsize=9,
               frameon=False)
    fig.subplots_adjust(left=0.07, right=0.97, top=0.9, bottom=0.3, wspace=0.32)
    return _png(fig)


# --------------------------------------------------------------------------
# the snippets
# --------------------------------------------------------------------------


def _snippet(task: str, name: str, prof: Profiles, cov: Any, out: Path) -> str:
    lines: list[str] = []
    names = [name] + ([f"{name}[api]"] if prof.has(task, f"{name}[api]") else [])
    if prof.has(task, name):
        png = f"{task}-{name}-profile.png"
        _write(out / png, _profile_figure(prof, task, names))
        inst, studies, trials = prof.facts(task)
        api = f"; dashed, `{name}[api]`, the configuration the API runs" if len(names) > 1 else ""
        eps = [_eps(e) for e in prof.epsilons(task)]
        at = f"ε = {eps[0]}" if len(eps) == 1 else f"each ε ({', '.join(eps[:-1])} and {eps[-1]})"
        lines += [
            f"The point benchmark's performance profile of `{name}` (black{api}) against the {LEADERS} best "
            f"other standard algorithms of the task by τ@50 at {at}: the share of trials whose error is at "
            f"most τ times the sampling error, failures never, {inst} instances of {studies} studies weighted "
            f"by study, {trials} trials each (the quick preset; ▸: still rising beyond τ = {TAU_MAX:g}).",
            "",
            f"```{{image}} /{OUT}/{png}",
            f":alt: performance profile of {name} ({task}) and the leaders at each epsilon",
            "```",
            "",
        ]
    else:
        lines += [f"`{name}` has no trials in the committed point results "
                  "(`docs/benchmark/ratios_public_quick.csv`).", ""]
    has_cov = cov is not None and ((cov["task"] == task) & (cov["algorithm"] == name)).any()
    if has_cov:
        png = f"{task}-{name}-coverage.png"
        _write(out / png, _coverage_figure(cov, task, name))
        lines += [
            f"The coverage benchmark of `{name}`'s 95 % interval against ε, per slice of the instances "
            "(the number in brackets): how often it covers the population value (± 2 binomial SE on all "
            "instances; dashed, the non-private interval on the same resampled draws), how often it is "
            "finite, and its median width relative to the non-private interval (quick preset, 5 draws).",
            "",
            f"```{{image}} /{OUT}/{png}",
            f":alt: coverage, finite share and width ratio of {name} ({task}) against epsilon",
            "```",
            "",
        ]
    lines += ["The figures are drawn by the docs build (`docs/gen_algorithm_figures.py`) from the committed "
              "results; to regenerate the data:", "", "```text", RATIO_COMMAND]
    if has_cov:
        lines += [COVERAGE_COMMAND]
    lines += ["```", ""]
    return "\n".join(lines)


def write_figures(srcdir: Path) -> list[Path]:
    """Write the snippet and figures of every algorithm page under ``srcdir/OUT``; return the snippets."""
    import pandas as pd

    out = srcdir / OUT
    prof = Profiles(RATIOS)
    cov = pd.read_csv(COVERAGE) if COVERAGE.is_file() else None
    written = []
    keep: set[Path] = set()
    for page in sorted(srcdir.glob("algorithms/*/*.md")):
        if page.stem == "index":
            continue
        task, name = page.parent.name, page.stem
        inc = out / task / f"{name}.inc"
        _write(inc, _snippet(task, name, prof, cov, out).encode("utf-8"))
        written.append(inc)
    keep = set(written) | {out / f"{p.parent.name}-{p.stem}-{k}.png" for p in written for k in ("profile", "coverage")}
    for f in out.rglob("*"):
        if f.is_file() and f not in keep:
            f.unlink()
    return written
