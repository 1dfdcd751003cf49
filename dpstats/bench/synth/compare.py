"""What the synthetic-data benchmark's results are read against: the original data, and the other discretiser.

* **The original-data row** (:func:`original_rows`): the paper's metrics of
  the data set itself, scored as any synthetic table is, i.e. the table a
  "synthesizer" without privacy would return: the ceiling of each metric.
  The marginal and correlation metrics are 1 by construction; ``f1`` is
  that of XGBoost trained on the original data and scored on the same rows.
  One more metric, ``f1_heldout``, scores each row with a classifier trained
  on the other rows (:func:`~dpstats.bench.synth.metrics.original_f1`,
  5-fold): what a fresh sample of the same size would give, without the
  advantage of holding the rows it is scored on. The row is not a
  mechanism: :func:`ranked_results` leaves it out of the ranking.
* **PrivTree against equal width** (:func:`discretizer_comparison`): the
  paper's finding that a data-aware discretisation helps, per data set, ε,
  mechanism and metric, from a run with both discretisers
  (``dpstats synth bench --discretizer privtree equal_width``): the mean of
  each over its trials and their difference.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd

from dpstats.bench.synth.metrics import MetricBins, evaluate, metric_bins, original_f1
from dpstats.synth.schema import Schema

__all__ = ["ORIGINAL", "HELDOUT_F1", "original_rows", "ranked_results", "discretizer_comparison"]

#: the mechanism name of the original-data row in ``results.csv``
ORIGINAL = "original"

#: the metric of the original-data row that scores each row with a classifier trained on the others
HELDOUT_F1 = "f1_heldout"

#: the discretiser the paper ran (and the ranking's, when a run has several)
PAPER_DISCRETIZER = "privtree"


def original_rows(datasets: Sequence[tuple[str, pd.DataFrame, Schema]],
                  bins: dict[str, MetricBins] | None = None) -> pd.DataFrame:
    """Rows of ``results.csv`` for the original data: mechanism :data:`ORIGINAL`, one trial, no epsilon.

    Columns as :func:`~dpstats.bench.synth.benchmark.run_benchmark`'s
    results; ``epsilon`` and ``delta`` are NaN (nothing is private) and
    ``seconds`` is the time of nothing, 0.
    """
    rows = []
    for name, df, schema in datasets:
        b = (bins or {}).get(name) or metric_bins(df, schema)
        scores = evaluate(df, df, schema, bins=b, seed=0)
        if schema.label is not None:
            scores[HELDOUT_F1] = original_f1(df, schema, seed=0)
        for metric, value in scores.items():
            rows.append({"dataset": name, "mechanism": ORIGINAL, "epsilon": math.nan, "delta": math.nan,
                         "trial": 0, "status": "ok", "seconds": 0.0, "metric": metric, "value": value,
                         "message": ""})
    return pd.DataFrame(rows)


def ranked_results(results: pd.DataFrame, *, original: bool = False) -> pd.DataFrame:
    """The rows a ranking compares: the paper's discretiser's when a run has several, without the original data.

    With ``original``, the original-data rows are kept (for the figures' ceiling).
    """
    mech = results["mechanism"] != ORIGINAL
    keep = mech if not original else pd.Series(True, index=results.index)
    if "discretizer" in results and results.loc[mech, "discretizer"].nunique() > 1:
        keep &= ~mech | (results["discretizer"] == PAPER_DISCRETIZER)
    return results[keep]


def discretizer_comparison(results: pd.DataFrame, a: str = "privtree", b: str = "equal_width") -> pd.DataFrame:
    """Mean metric over trials under discretisers ``a`` and ``b``, and ``a - b``, per data set, ε, mechanism, metric.

    Only successful trials count; a cell where either discretiser has none
    has NaN in its column and in the difference. Columns ``dataset, epsilon,
    mechanism, metric, <a>, <b>, difference, trials_<a>, trials_<b>``.

    Raises
    ------
    ValueError
        When ``results`` has no ``discretizer`` column or lacks ``a`` or ``b``.
    """
    if "discretizer" not in results:
        raise ValueError("the results have no discretizer column: run with --discretizer privtree equal_width")
    missing = [d for d in (a, b) if d not in set(results["discretizer"])]
    if missing:
        raise ValueError(f"the results hold no trial with discretizer {missing}: run with --discretizer {a} {b}")
    ok = results[(results["status"] == "ok") & (results["metric"] != "") & (results["mechanism"] != ORIGINAL)]
    keys = ["dataset", "epsilon", "mechanism", "metric"]
    g = ok[ok["discretizer"].isin([a, b])].groupby(keys + ["discretizer"])["value"]
    mean = g.mean().unstack("discretizer").reindex(columns=[a, b])
    count = g.size().unstack("discretizer").reindex(columns=[a, b]).fillna(0).astype(int)
    out = mean.assign(difference=mean[a] - mean[b])
    out[f"trials_{a}"] = count[a]
    out[f"trials_{b}"] = count[b]
    out.columns.name = None
    return out.reset_index()
