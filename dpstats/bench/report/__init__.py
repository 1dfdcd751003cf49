"""Reports: ``trials.csv``, ``leaderboard.csv``, a static site, and the release bundle.

``dpstats report [--results PATH ...] --out DIR`` reads benchmark results (a
results file written by ``dpstats bench``, or a ``trials.csv``) and writes

* ``trials.csv``: one row per trial (:data:`dpstats.bench.evaluation.TRIAL_COLUMNS`,
  then any extra columns);
* ``leaderboard.csv``: :func:`dpstats.bench.leaderboard.leaderboard`, one row per
  task, privacy level, slice and algorithm;
* ``profiles.csv``: the exact performance profiles behind the plots (the
  step points of :func:`dpstats.bench.evaluation.profile` for every task, privacy
  level and slice);
* with coverage trials (``dpstats bench --inference``): ``intervals.csv``
  (one row per coverage trial), ``coverage.csv``
  (:func:`dpstats.bench.inference.coverage_table`), ``coverage_instances.csv``
  (:func:`dpstats.bench.inference.instance_coverage`, one row per instance,
  method and ε), a Coverage page per task (with the per-instance tables and
  the figure of coverage against median width ratio, one point per
  instance) and a forest plot on each ``sce`` instance's Explore page;
* a static site (plain HTML and CSS, no scripts, no network resources; it
  works from ``file://``): ``index.html``; a Leaderboard page per task and
  privacy level with the slices, each with its table and its performance
  profile plot (PNG and SVG); and Explore pages per instance and per
  algorithm. The pages are rendered from the Jinja2 templates in
  ``dpstats/bench/templates`` (one ``base.html`` layout, autoescaping on).

Explore pages show instance names and facts. They are written only for
corpora whose instances all belong to the public corpus, unless
``--explore`` asks for them (a report of the withheld corpus is for the
maintainers).

``dpstats release --out DIR`` writes the downloadable bundle of the public
corpus: the instance list with its facts, every algorithm's trials on the
public corpus, the leaderboard computed from them, a README and a manifest
with versions and checksums, as a folder and a ``.zip``. Trials of instances
that are not in the public corpus are never included.

The package is split by concern: :mod:`~dpstats.bench.report.loading`
(reading results and facts), :mod:`~dpstats.bench.report.plots` (matplotlib
figures), :mod:`~dpstats.bench.report.site` (the report, the Leaderboard and
Coverage pages), :mod:`~dpstats.bench.report.explore` (the Explore pages),
:mod:`~dpstats.bench.report.pages` (what the pages share),
:mod:`~dpstats.bench.report.pool` (the worker processes that draw the pages
and their figures, ``--workers``) and :mod:`~dpstats.bench.report.release`
(the bundle).
"""

from __future__ import annotations

from dpstats.bench.report.loading import _default_results as _default_results
from dpstats.bench.report.loading import (
    instance_facts,
    load_intervals,
    load_trials,
    profiles_table,
    public_instance_ids,
)
from dpstats.bench.report.plots import COLORS, TAU_MAX, plot_instance_coverage, plot_profiles, plot_trials
from dpstats.bench.report.release import build_release, corpus_instance_table
from dpstats.bench.report.site import SLICE_LABELS, SLICE_TAGS, TASK_LABELS, profile_leaders, write_report

__all__ = [
    "load_trials",
    "load_intervals",
    "instance_facts",
    "profiles_table",
    "plot_profiles",
    "plot_trials",
    "plot_instance_coverage",
    "profile_leaders",
    "write_report",
    "build_release",
    "corpus_instance_table",
    "public_instance_ids",
    "SLICE_LABELS",
    "SLICE_TAGS",
    "TASK_LABELS",
    "COLORS",
    "TAU_MAX",
]
