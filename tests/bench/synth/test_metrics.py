import numpy as np
import pandas as pd
import pytest

from dpstats.synth.discretize import EqualWidth, encode
from dpstats.synth.mechanisms.independent import Independent
from dpstats.bench.synth.metrics import (coracc, correlation_level, cramers_v, evaluate, macro_f1, metric_bins,
                                   one_way_score, two_way_score)


@pytest.fixture(scope="module")
def real_and_syn(bank):
    df, schema = bank
    data = encode(df, schema, EqualWidth().edges(df, schema, None, None))
    syn = Independent().synthesize(data, 1.0, 1e-6, np.random.default_rng(0)).data.decode(np.random.default_rng(1))
    return df, syn, schema


def test_equal_depth_bins_from_the_original(bank):
    df, schema = bank
    bins = metric_bins(df, schema)
    e = bins.edges["age"]
    assert len(e) == 20                              # 19 equal-depth bins (age has no heavy ties)
    assert e[0] == df["age"].min() and e[-1] == df["age"].max()
    codes = bins.bin(df)
    j = schema.names.index("age")
    counts = np.bincount(codes[:, j], minlength=21)
    assert counts[0] == 0 and counts[-1] == 0        # the two end bins are empty on the original
    assert counts[1:-1].max() < 3 * len(df) / 19     # roughly equal depth
    out = pd.DataFrame({c: df[c].iloc[:2] for c in schema.names})
    out.loc[0, "age"], out.loc[1, "age"] = 5, 500
    assert bins.bin(out)[:, j].tolist() == [0, 20]   # below the minimum, above the maximum
    assert len(bins.edges["pdays"]) < 20             # pdays = -1 for most rows: tied quantiles merge


def test_tvd_scores_match_sdmetrics(real_and_syn):
    sdmetrics = pytest.importorskip("sdmetrics")
    from sdmetrics.column_pairs import ContingencySimilarity
    from sdmetrics.single_column import TVComplement

    real, syn, schema = real_and_syn
    bins = metric_bins(real, schema)
    r, s = bins.bin(real), bins.bin(syn)
    rb, sb = pd.DataFrame(r, columns=schema.names).astype(str), pd.DataFrame(s, columns=schema.names).astype(str)
    sizes = list(bins.sizes().values())
    ours = one_way_score(r, s, sizes)
    theirs = np.mean([TVComplement.compute(rb[c], sb[c]) for c in schema.names])
    assert ours == pytest.approx(theirs, abs=1e-8)
    cols = list(schema.names)[:7]
    idx = [schema.names.index(c) for c in cols]
    ours2 = two_way_score(r[:, idx], s[:, idx], [sizes[i] for i in idx])
    theirs2 = np.mean([ContingencySimilarity.compute(rb[[a, b]], sb[[a, b]])
                       for i, a in enumerate(cols) for b in cols[i + 1:]])
    assert ours2 == pytest.approx(theirs2, abs=1e-8)
    assert sdmetrics.__version__.startswith("0.32")


def test_bias_corrected_cramers_v_bergsma():
    # Bergsma (2013) formula by hand on a 2x3 table
    t = np.array([[30, 10, 5], [10, 25, 20]], dtype=float)
    n = t.sum()
    e = np.outer(t.sum(1), t.sum(0)) / n
    chi2 = ((t - e) ** 2 / e).sum()
    phi2c = max(0, chi2 / n - 2 * 1 / (n - 1))
    kc, rc = 3 - 4 / (n - 1), 2 - 1 / (n - 1)
    assert cramers_v(t) == pytest.approx(np.sqrt(phi2c / min(kc - 1, rc - 1)))
    # corrected V is below the plain V and 0 for independence; empty cells are dropped
    plain = np.sqrt(chi2 / n / 1)
    assert cramers_v(t) < plain
    assert cramers_v(np.outer([1, 2], [3, 4, 5]) * 10) == 0.0
    assert cramers_v(np.array([[30, 10, 0], [10, 25, 0]])) == pytest.approx(cramers_v(np.array([[30, 10], [10, 25]])))
    # independent samples: the bias correction brings V near 0 where the plain V is not
    rng = np.random.default_rng(0)
    a, b = rng.integers(0, 10, 200), rng.integers(0, 10, 200)
    tab = np.zeros((10, 10))
    np.add.at(tab, (a, b), 1)
    assert cramers_v(tab) < 0.1
    assert [correlation_level(v) for v in (0.0, 0.099, 0.1, 0.3, 0.5, 1.0)] == [0, 0, 1, 2, 3, 3]


def test_coracc_and_scores_on_identical_and_independent_data(real_and_syn):
    real, syn, schema = real_and_syn
    same = evaluate(real, real, schema, metrics=("ind", "pair", "coracc"))
    assert same == {"ind": 1.0, "pair": 1.0, "coracc": 1.0}
    m = evaluate(real, syn, schema, metrics=("ind", "pair", "coracc"))
    assert 0.8 < m["ind"] < 1.0 and m["pair"] < m["ind"]
    bins = metric_bins(real, schema)
    r, s = bins.bin(real), bins.bin(syn)
    # Independent gets exactly the pairs that are weak (level 0) in the original right, give or take noise
    assert 0.2 < coracc(r, s, list(bins.sizes().values())) < 1.0


def test_macro_f1_matches_sklearn():
    sklearn_metrics = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(0)
    yt, yp = rng.choice(["a", "b", "c"], 300), rng.choice(["a", "b"], 300)
    assert macro_f1(yt, yp) == pytest.approx(sklearn_metrics.f1_score(yt, yp, average="macro"))


def test_xgboost_f1_real_beats_independent(real_and_syn):
    pytest.importorskip("xgboost")
    real, syn, schema = real_and_syn
    f_real = evaluate(real, real, schema, metrics=("f1",))["f1"]
    f_ind = evaluate(real, syn, schema, metrics=("f1",))["f1"]
    assert f_real > 0.75                       # trained and tested on the original (optimistic)
    assert f_ind < 0.6                         # Independent: no better than the majority class (paper, F7)
