"""The original-data row and the comparison of discretisers of the synthetic-data benchmark."""

import math

import numpy as np
import pandas as pd
import pytest

from dpstats.bench.synth.compare import (HELDOUT_F1, ORIGINAL, discretizer_comparison, original_rows,
                                         ranked_results)
from dpstats.bench.synth.metrics import original_f1, xgboost_f1
from dpstats.synth.datasets import load_dataset

pytest.importorskip("xgboost")


@pytest.fixture(scope="module")
def bank():
    df, schema = load_dataset("bank")
    return df.sample(2000, random_state=0).reset_index(drop=True), schema


def test_original_row_is_the_ceiling_of_every_metric(bank):
    df, schema = bank
    rows = original_rows([("bank", df, schema)]).set_index("metric")
    assert (rows["mechanism"] == ORIGINAL).all() and rows["epsilon"].isna().all()
    assert (rows.loc[["ind", "pair", "coracc"], "value"] == 1.0).all()
    assert rows.loc["f1", "value"] == pytest.approx(xgboost_f1(df, df, schema, seed=0), abs=0)
    # a classifier scored on rows it did not see does worse than on its own training rows, and better than
    # the majority class (whose macro-F1 is below 0.5 on a two-class label)
    held = rows.loc[HELDOUT_F1, "value"]
    assert held == original_f1(df, schema, seed=0)
    assert 0.5 < held < rows.loc["f1", "value"]


def test_original_f1_scores_each_row_out_of_fold(bank):
    df, schema = bank
    # the label copied into a feature: every fold's classifier reads it, so out-of-fold predictions are exact
    leak = df.assign(**{"marital": df[schema.label].map({"yes": "married", "no": "single"})})
    assert original_f1(leak, schema) == 1.0
    with pytest.raises(ValueError, match="folds must be >= 2"):
        original_f1(df, schema, folds=1)


def _results(values):
    rows = []
    for (disc, mech, eps, trial), v in values.items():
        rows.append({"dataset": "d", "mechanism": mech, "epsilon": eps, "delta": 1e-9, "trial": trial,
                     "status": "ok", "seconds": 0.1, "metric": "ind", "value": v, "message": "",
                     "discretizer": disc})
    rows.append({"dataset": "d", "mechanism": ORIGINAL, "epsilon": math.nan, "delta": math.nan, "trial": 0,
                 "status": "ok", "seconds": 0.0, "metric": "ind", "value": 1.0, "message": "", "discretizer": ""})
    return pd.DataFrame(rows)


def test_discretizer_comparison_by_hand():
    res = _results({("privtree", "m", 1.0, 0): 0.9, ("privtree", "m", 1.0, 1): 0.8,
                    ("equal_width", "m", 1.0, 0): 0.7, ("equal_width", "m", 1.0, 1): 0.6,
                    ("privtree", "k", 1.0, 0): 0.5})
    comp = discretizer_comparison(res).set_index("mechanism")
    assert comp.loc["m", "privtree"] == pytest.approx(0.85) and comp.loc["m", "equal_width"] == pytest.approx(0.65)
    assert comp.loc["m", "difference"] == pytest.approx(0.2)
    assert np.isnan(comp.loc["k", "equal_width"]) and np.isnan(comp.loc["k", "difference"])
    assert comp.loc["k", "trials_equal_width"] == 0 and ORIGINAL not in comp.index
    ranked = ranked_results(res)
    assert set(ranked["discretizer"]) == {"privtree"} and ORIGINAL not in set(ranked["mechanism"])
    assert ORIGINAL in set(ranked_results(res, original=True)["mechanism"])


def test_discretizer_comparison_needs_both():
    res = _results({("privtree", "m", 1.0, 0): 0.9})
    with pytest.raises(ValueError, match=r"no trial with discretizer \['equal_width'\]"):
        discretizer_comparison(res)
    with pytest.raises(ValueError, match="no discretizer column"):
        discretizer_comparison(res.drop(columns="discretizer"))
