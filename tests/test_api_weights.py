"""private_coef / private_ols with ``weights=``: weighted least squares through the corpus's weighted path.

The data are the public corpus's NHIS extract (Angrist and Pischke 2009,
Table 1.1; 18,790 adults with the survey's sampling weight ``perweight``),
whose weighted regression the corpus already benchmarks (instance
``mm_nhis``). The API must give the same release as that path, use the
weights (the weighted and unweighted means of ``hlth`` are 4 standard errors
apart), and refuse bad weights with a message that names ``weights``.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import dpstats
from dpstats.algorithms.release import AlgorithmSpec, Budget, release
from dpstats.data.corpus import Corpus
from dpstats.privacy.randomness import release_generator


@pytest.fixture(scope="module")
def nhis():
    inst = Corpus.public().instance("mm_nhis")
    return inst, inst.frame


def _quiet(f, *a, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return f(*a, **kw)


def test_weighted_coef_is_the_corpus_release(nhis):
    inst, df = nhis
    res = _quiet(dpstats.private_coef, df, inst.spec.formula, "hi", epsilon=3, weights="perweight", seed=5)
    ref = release(AlgorithmSpec("sce", "fwl_score", {}).with_intervals(), inst.task_data(), inst.facts,
                  Budget(3.0, 1e-6), release_generator(5))
    assert float(res.estimate) == float(np.asarray(ref.estimate).item())
    assert float(res.std_error) == float(np.asarray(ref.std_error).item())
    assert res.weights == "perweight"
    assert "weights:     perweight" in res.summary()
    assert "weights themselves are private" in res.interpretation()
    # without weights it is another regression (the unweighted instance's)
    plain = _quiet(dpstats.private_coef, df, inst.spec.formula, "hi", epsilon=3, seed=5)
    assert float(plain.estimate) != float(res.estimate)


def test_weighted_ols_is_the_corpus_release(nhis):
    inst, df = nhis
    lin = Corpus.public().instance("mm_nhis_linreg")
    res = _quiet(dpstats.private_ols, df, lin.spec.formula, epsilon=10, weights="perweight", seed=2)
    ref = release(AlgorithmSpec("linreg", "fwl_each", {}).with_intervals(), lin.task_data(), lin.facts,
                  Budget(10.0, 1e-6), release_generator(2))
    np.testing.assert_array_equal(np.asarray(res.estimate), np.asarray(ref.estimate))
    assert res.terms == lin.facts.columns


def test_weighted_mean_through_the_constant(nhis):
    _, df = nhis
    wmean = float(np.average(df["hlth"], weights=df["perweight"]))
    umean = float(df["hlth"].mean())
    assert abs(wmean - umean) > 0.03  # the weights matter here (about 4 standard errors)
    res = _quiet(dpstats.private_coef, df, "hlth ~ 1", "Intercept", epsilon=10, weights="perweight", seed=7)
    est = float(res.estimate)
    # seeds 0-19 at epsilon 10: every estimate within 0.0036 of the weighted mean
    assert abs(est - wmean) < 0.012
    assert abs(est - umean) > 0.02
    assert not res.uninformative


def test_one_column_design_runs(nhis):
    # a regression through the origin has no control and once divided by a Gram share of zero
    _, df = nhis
    x, y = df["age"].to_numpy(float), df["hlth"].to_numpy(float)
    slope = float(x @ y / (x @ x))
    res = _quiet(dpstats.private_coef, df, "hlth ~ age - 1", "age", epsilon=3, seed=1)
    # seeds 0-9: within 0.00013 of the least-squares slope 0.0878
    assert abs(float(res.estimate) - slope) < 0.001
    assert np.isfinite(res.conf_int().to_numpy()).all()


def test_intercept_of_fwl_score_is_refused(nhis):
    _, df = nhis
    with pytest.raises(ValueError, match=r"^coef: fwl_score does not estimate the intercept.*private_mean"):
        _quiet(dpstats.private_coef, df, "hlth ~ 1", "Intercept", epsilon=1)
    with pytest.raises(ValueError, match=r"^coef: fwl_score does not estimate the intercept.*private_ols"):
        _quiet(dpstats.private_coef, df, "hlth ~ hi", "Intercept", epsilon=1)


@pytest.mark.parametrize(
    ("weights", "error", "match"),
    [
        (3, TypeError, r"^weights must be the name of a column"),
        ("nope", ValueError, r"^weights: 'nope' is not a column of data"),
        ("hi", ValueError, r"^weights: column 'hi' has 2974 value\(s\) that are zero, negative or infinite"),
        ("text", ValueError, r"^weights: column 'text' is not numeric"),
    ],
)
def test_bad_weights(nhis, weights, error, match):
    _, df = nhis
    data = df.assign(text=df["perweight"].astype(str))
    with pytest.raises(error, match=match):
        _quiet(dpstats.private_coef, data, "hlth ~ age", "age", epsilon=1, weights=weights)
    with pytest.raises(error, match=match):
        _quiet(dpstats.private_ols, data, "hlth ~ age", epsilon=1, weights=weights)


def test_mean_has_no_weights(nhis):
    _, df = nhis
    with pytest.raises(ValueError, match=r"^weights: private_mean has no weighted mean"):
        dpstats.private_mean(df, "hlth", epsilon=1, weights="perweight")


def test_weights_warnings(nhis):
    _, df = nhis
    data = df.assign(perweight=df["perweight"].where(df.index >= 4))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = dpstats.private_coef(data, "hlth ~ age", "age", epsilon=1, weights="perweight",
                                   bounds={"age": (0.0, 100.0)})
    texts = [str(w.message) for w in caught]
    assert any(t.startswith("data: 4 rows with a missing value in perweight were dropped") for t in texts), texts
    assert any(t.startswith("bounds: with weights='perweight' the declared bounds ['age'] are not used") for t in texts)
    assert res.n == len(df) - 4
    assert dict(res.bounds) == {}

