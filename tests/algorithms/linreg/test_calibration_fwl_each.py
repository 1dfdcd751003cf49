"""fwl_each: each slope by fwl_score on 1/k of the budget, the intercept from the released Grams' means.

The slopes' noise scales are fwl_score's, pinned by running it in
``tests/algorithms/sce/test_calibration.py``; here the tests pin what
fwl_each adds: the split of the budget (each slope's ledger entries hold
exactly ``rho / k``, the whole ledger ``rho``), that each slope is
fwl_score's release run on its part (bit for bit with one slope), the
intercept's post-processing, and the public rule that hands small budgets
per slope to dpnewton's point estimates (``points_below``; the tests of the
split turn it off).
"""

from __future__ import annotations

import math
import re
import warnings
from dataclasses import replace

import numpy as np
import pytest

from dpstats.algorithms import Decline, Release, get
from dpstats.algorithms.linreg.fwl_each import (
    INTERCEPT_CHECK,
    LOW_BUDGET_CHECK,
    MANY_SLOPES_CHECK,
    intercept_from_means,
)
from dpstats.data.corpus import Corpus
from dpstats.privacy.accounting import PrivacyLeakWarning, zcdp_rho

DELTA = 1e-6


def _instance(iid: str):
    inst = Corpus.public().instance(iid)
    return inst.task_data(), inst.facts


def _run(name: str, task: str, data, facts, eps: float, seed: int, intervals: bool = True, **params):
    cls = get(task, name)
    if name == "fwl_each":
        # the split itself: without the rule that gives small budgets per slope to dpnewton
        params = {"points_below": 0.0, **params}
    algo = cls(**{**(dict(cls.interval_params) if intervals else {}), **params})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        return algo.run(data, facts, eps, DELTA, np.random.default_rng(seed))


@pytest.mark.parametrize("eps,seed", [(1.0, 0), (3.0, 1), (10.0, 2)])
@pytest.mark.parametrize("intervals", [True, False])
def test_one_slope_is_fwl_score_bit_for_bit(eps, seed, intervals):
    """Split stages, one slope: the part is the whole budget, and the slope is fwl_score's release, same draws."""
    data, facts = _instance("engel_food_linreg")
    out = _run("fwl_each", "linreg", data, facts, eps, seed, intervals, shared=False)
    sce = replace(facts, task="sce", coefficient="income", coef_index=1)
    ref = _run("fwl_score", "sce", data, sce, eps, seed, intervals)
    assert isinstance(out, Release) and isinstance(ref, Release)
    assert out.estimate[1] == ref.estimate[0]
    assert [e.cost for e in out.ledger] == [e.cost for e in ref.ledger]
    assert [e.scale for e in out.ledger] == [e.scale for e in ref.ledger]
    assert [e.mechanism for e in out.ledger] == [f"{e.mechanism} (income)" for e in ref.ledger]
    if intervals:
        assert (out.std_error[1], out.bias_bound[1], out.df) == (ref.std_error[0], ref.bias_bound[0], ref.df)
        assert out.std_error[0] == math.inf
        assert out.details["interval_checks"][0] == INTERCEPT_CHECK
    else:
        assert out.std_error is None


@pytest.mark.parametrize("iid,eps,seed", [("mroz87_lwage_linreg", 1.0, 0), ("card95_ols_basic_linreg", 3.0, 1),
                                          ("bm04_call_linreg", 10.0, 2)])
def test_each_slope_spends_exactly_its_share(iid, eps, seed):
    """Split stages: the ledger holds rho; the entries of each slope (named '... (<slope>)') hold rho / k each."""
    data, facts = _instance(iid)
    out = _run("fwl_each", "linreg", data, facts, eps, seed, shared=False)
    assert isinstance(out, Release)
    rho = zcdp_rho(eps, DELTA)
    slopes = [c for c in facts.columns if c != "Intercept"]
    k = len(slopes)
    assert out.details["parts"] == k
    spent: dict[str, float] = {}
    for e in out.ledger:
        m = re.fullmatch(r"(.*) \((.+)\)", e.mechanism)
        assert m is not None and m.group(2) in slopes, e.mechanism
        spent[m.group(2)] = spent.get(m.group(2), 0.0) + e.cost
    assert sorted(spent) == sorted(slopes)
    for name in slopes:
        assert spent[name] == pytest.approx(rho / k, rel=1e-9), name
    assert sum(e.cost for e in out.ledger) == pytest.approx(rho, rel=1e-9)


def test_intercept_is_the_mean_line_through_the_released_means():
    """At a large budget on 4,870 rows the intercept lands near OLS's: the means of the Grams are nearly exact."""
    data, facts = _instance("bm04_call_linreg")
    X, y = data.X, np.asarray(data.y)
    ols = np.linalg.lstsq(X, y, rcond=None)[0]
    out = _run("fwl_each", "linreg", data, facts, 1e4, 0)
    assert isinstance(out, Release)
    # every regressor here is a 0/1 dummy, so the means are exact up to the Gram's noise at this budget
    assert out.estimate[0] == pytest.approx(ols[0], abs=0.01)
    np.testing.assert_allclose(out.estimate[1:], ols[1:], atol=0.01)
    assert out.std_error[0] == math.inf and np.all(np.isfinite(out.std_error[1:]))


def test_intercept_from_means_averages_the_runs_that_report_them():
    runs = [{-1: 10.0, 1: 2.0, 2: 4.0}, {}, {-1: 12.0, 1: 4.0}]
    beta = np.array([0.0, 1.0, 0.5])
    # y: (10 + 12) / 2 = 11; column 1: 3; column 2: 4 (one run)
    assert intercept_from_means(beta, [1, 2], runs) == pytest.approx(11.0 - 3.0 - 2.0)
    assert intercept_from_means(beta, [1, 2], [{}, {}]) is None


def test_failed_standardisations_leave_the_intercept_a_flagged_fallback():
    """48 rows at epsilon 0.3: no slope's standardisation passes, so no Gram gives means; nothing is finite."""
    data, facts = _instance("cd09_mlda_linreg")
    out = _run("fwl_each", "linreg", data, facts, 0.3, 0)
    assert isinstance(out, Release)
    assert not np.any(np.isfinite(out.std_error))
    # every term is a fallback: the slopes released 0 (failed standardisations), the intercept has no means
    assert np.all(out.estimate == 0.0) and out.details["guard"].all()
    assert out.details["fallback"].startswith("0 released: the private standardisation failed")


def test_designs_with_more_slopes_than_max_parts_decline_before_any_spend():
    data, facts = _instance("mroz87_lwage_linreg")
    algo = get("linreg", "fwl_each")(max_parts=2, points_below=0.0)
    out = algo.run(data, facts, 1.0, DELTA, np.random.default_rng(0))
    assert isinstance(out, Decline) and "max_parts = 2" in out.reason and out.ledger == ()


def _newton(data, facts, eps: float, seed: int):
    return get("linreg", "dpnewton")().run(data, facts, eps, DELTA, np.random.default_rng(seed))


@pytest.mark.parametrize("intervals", [True, False])
@pytest.mark.parametrize("eps,seed", [(1.0, 0), (2.0, 1)])
def test_small_budget_per_slope_releases_dpnewtons_points_draw_for_draw(eps, seed, intervals):
    """428 rows, 3 slopes: n eps / k = 143 and 285 < 300, so the release is dpnewton's, same draws, no interval."""
    data, facts = _instance("mroz87_lwage_linreg")
    cls = get("linreg", "fwl_each")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        out = cls(**(dict(cls.interval_params) if intervals else {})).run(data, facts, eps, DELTA,
                                                                           np.random.default_rng(seed))
    ref = _newton(data, facts, eps, seed)
    assert isinstance(out, Release) and isinstance(ref, Release)
    np.testing.assert_array_equal(out.estimate, ref.estimate)
    assert [(e.mechanism, e.cost, e.scale) for e in out.ledger] == [(e.mechanism, e.cost, e.scale) for e in ref.ledger]
    assert sum(e.cost for e in out.ledger) == pytest.approx(zcdp_rho(eps, DELTA), rel=1e-9)
    assert out.details["points"] == "dpnewton"
    if not intervals:
        # the point configuration gives no interval, here as elsewhere
        assert out.std_error is None and "interval_checks" not in out.details
        return
    assert out.std_error.shape == (4,) and np.all(out.std_error == math.inf) and out.bias_bound is None
    checks = out.details["interval_checks"]
    assert len(checks) == 4 and all(c.startswith(LOW_BUDGET_CHECK) for c in checks)
    assert f"= {428 * eps / 3:.3g} is below points_below = 300" in out.details["interval_check"]


def test_the_rule_is_n_epsilon_over_k_on_public_facts():
    """Just above the line (n eps / k = 300.4) the slopes are fwl_each's; just below (299.6), dpnewton's."""
    data, facts = _instance("mroz87_lwage_linreg")
    cls = get("linreg", "fwl_each")
    above = cls(**cls.interval_params).run(data, facts, 300.4 * 3 / 428, DELTA, np.random.default_rng(0))
    below = cls(**cls.interval_params).run(data, facts, 299.6 * 3 / 428, DELTA, np.random.default_rng(0))
    assert isinstance(above, Release) and isinstance(below, Release)
    assert "points" not in above.details and above.details["parts"] == 3
    assert below.details["points"] == "dpnewton" and "parts" not in below.details


def test_more_slopes_than_max_parts_release_dpnewtons_points():
    data, facts = _instance("mroz87_lwage_linreg")
    cls = get("linreg", "fwl_each")
    out = cls(**{**cls.interval_params, "max_parts": 2}).run(data, facts, 1e3, DELTA, np.random.default_rng(0))
    ref = _newton(data, facts, 1e3, 0)
    assert isinstance(out, Release) and isinstance(ref, Release)
    np.testing.assert_array_equal(out.estimate, ref.estimate)
    assert out.details["points"] == "dpnewton"
    assert all(c.startswith(MANY_SLOPES_CHECK) for c in out.details["interval_checks"])


def _shared(name: str = "fwl_each", **kw):
    cls = get("linreg", name)
    return cls(**{**cls.interval_params, "shared": True, "points_below": 0.0, **kw})


@pytest.mark.parametrize("eps,seed", [(1.0, 0), (3.0, 1), (10.0, 2)])
def test_shared_stage_1_with_one_slope_is_fwl_score(eps, seed):
    """One slope: the shared stage 1 is fwl_score's, and the slope's part holds all of stage 2 (the same draws; the
    part's budget goes through an epsilon and back, so the last digit of a noise scale, and of the estimate, can
    differ)."""
    data, facts = _instance("engel_food_linreg")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        out = _shared().run(data, facts, eps, DELTA, np.random.default_rng(seed))
    sce = replace(facts, task="sce", coefficient="income", coef_index=1)
    ref = _run("fwl_score", "sce", data, sce, eps, seed, True)
    assert out.estimate[1] == pytest.approx(ref.estimate[0], rel=1e-12)
    assert (out.std_error[1], out.bias_bound[1]) == pytest.approx((ref.std_error[0], ref.bias_bound[0]), rel=1e-12)
    assert [e.cost for e in out.ledger] == pytest.approx([e.cost for e in ref.ledger], rel=1e-12)
    # one scale per entry, one per block of a joint mechanism
    assert [np.ravel(e.scale).tolist() for e in out.ledger] == [
        pytest.approx(np.ravel(e.scale).tolist(), rel=1e-12) for e in ref.ledger]


@pytest.mark.parametrize("iid,eps,seed", [("mroz87_lwage_linreg", 1.0, 0), ("card95_ols_basic_linreg", 3.0, 1),
                                          ("bm04_call_linreg", 10.0, 2)])
def test_shared_stage_1_is_paid_once_and_stage_2_split(iid, eps, seed):
    """Stage 1 (unlabelled entries) holds fwl_score's shares of rho once; each slope's entries hold 1/k of the rest."""
    data, facts = _instance(iid)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        out = _shared().run(data, facts, eps, DELTA, np.random.default_rng(seed))
    assert isinstance(out, Release)
    rho = zcdp_rho(eps, DELTA)
    slopes = [c for c in facts.columns if c != "Intercept"]
    k, d = len(slopes), len(facts.columns)
    stage1, spent, refined = 0.0, {}, []
    for e in out.ledger:
        # stage 1's entries (some name a column of their own); stage 2's end with their slope's part label
        if e.mechanism.startswith(("grid median, refined", "Gaussian count of non-zero pair differences")):
            # a refined location (a column far from 0) is charged on top of stage 1's share, at the location's
            # epsilon, and so are the counts of non-zero pair differences (nonzero_share of rho in all); the
            # slopes share what is left
            refined.append(e)
            continue
        if e.mechanism.startswith(("grid median", "grid quantile (row norm)", "Gaussian Gram")):
            stage1 += e.cost
            continue
        m = re.fullmatch(r"(.*) \((.+)\)", e.mechanism)
        assert m is not None and m.group(2) in slopes, e.mechanism
        spent[m.group(2)] = spent.get(m.group(2), 0.0) + e.cost
    # docs (fwl_score): 25 % for the locations, scales and row bound; the Gram 40 % times min(1, (d - 1) / 4)
    share1 = 0.25 + 0.4 * min(1.0, (d - 1) / 4.0)
    assert stage1 == pytest.approx(share1 * rho, rel=1e-9)
    costs = {e.mechanism: e.cost for e in out.ledger}
    counts = [e.cost for e in refined if e.mechanism.startswith("Gaussian count")]
    # one count per privately scaled column (public 0/1 columns have none), nonzero_share of rho in all
    assert len(counts) <= d
    if counts:
        assert sum(counts) == pytest.approx(_shared().params["nonzero_share"] * rho, rel=1e-9)
    for e in refined:
        if e.mechanism.startswith("grid median"):
            assert e.cost == pytest.approx(costs[e.mechanism.replace("grid median, refined", "grid median")],
                                           rel=1e-9)
    extra = sum(e.cost for e in refined)
    assert sorted(spent) == sorted(slopes)
    for name in slopes:
        assert spent[name] == pytest.approx(((1.0 - share1) * rho - extra) / k, rel=1e-9), name
    # one Gram for all the slopes
    assert sum(e.mechanism.startswith("Gaussian Gram") for e in out.ledger) == 1
