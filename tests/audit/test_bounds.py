"""Epsilon lower bounds: known values, validity on honest mechanisms, cross-checks with jax-privacy and privacy-estimates."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from dpstats.audit.bounds import (
    clopper_pearson_lower,
    clopper_pearson_upper,
    epsilon_clopper_pearson_scores,
    epsilon_from_gdp,
    epsilon_gdp_scores,
    epsilon_lower_bound,
    epsilon_one_run,
    epsilon_one_run_scores,
    exposure_epsilon_bound,
    gdp_mu_lower_bound,
    zcdp_rho_lower_bound,
)
from dpstats.privacy.accounting import gdp_delta, gdp_mu, zcdp_epsilon


def test_known_value_one_run_closed_form():
    b = epsilon_one_run(m=1000, r=100, v=100, delta=0.0, confidence=0.95)
    closed = math.log(0.05 ** (1 / 100) / (1 - 0.05 ** (1 / 100)))  # logit(alpha^(1/r))
    assert round(b.epsilon, 4) == 3.4930
    assert b.epsilon == pytest.approx(closed, abs=1e-8)
    # delta > 0 can only lower it; fewer correct guesses too
    assert epsilon_one_run(1000, 100, 100, delta=1e-6).epsilon < b.epsilon
    assert epsilon_one_run(1000, 100, 90).epsilon < b.epsilon


def test_known_value_median_exposure_10():
    # n = 1000 canaries, 500 below the threshold; N = 2^20 references, 1024 below (median exposure 10)
    split = epsilon_lower_bound(500, 1000, 1024, 2**20, delta=1e-6, confidence=0.95, split=True)
    each = epsilon_lower_bound(500, 1000, 1024, 2**20, delta=1e-6, confidence=0.95, split=False)
    assert round(split.epsilon, 2) == 6.11
    assert round(each.epsilon, 2) == 6.13
    # the point estimate ln(0.5 / 2^-10) = 10 ln 2 = 6.93 is above both
    assert split.epsilon < each.epsilon < 10 * math.log(2)


def test_exposure_bound_from_losses_reproduces_the_counts():
    # build losses with exactly those counts: 1000 canaries, 2^20 references, median threshold at 0
    canary = np.concatenate([-np.ones(499), [0.0], np.ones(500)])
    refs = np.concatenate([np.full(1023, -2.0), [0.0], np.full(2**20 - 1024, 5.0)])
    b = exposure_epsilon_bound(canary, refs, quantile=0.5, delta=1e-6)
    assert (b.details["tp"], b.details["fp"]) == (500, 1024)
    assert round(b.epsilon, 2) == 6.11
    assert b.details["exposure"] == pytest.approx(10.0)
    assert b.assumption  # labelled heuristic


def test_group_privacy_divides_by_k():
    one = epsilon_lower_bound(500, 1000, 1024, 2**20, delta=1e-6)
    four = epsilon_lower_bound(500, 1000, 1024, 2**20, delta=1e-6, group_size=4)
    assert four.epsilon == pytest.approx(one.epsilon / 4)
    assert epsilon_one_run(1000, 100, 100, group_size=2).epsilon == pytest.approx(
        epsilon_one_run(1000, 100, 100).epsilon / 2)
    with pytest.raises(ValueError, match="group_size"):
        epsilon_lower_bound(1, 2, 1, 2, group_size=0)


def test_null_scores_give_zero():
    rng = np.random.default_rng(0)
    # identical (constant) scores: no test separates them
    z = np.zeros(5000)
    assert epsilon_clopper_pearson_scores(z, z, delta=1e-6).epsilon == 0.0
    assert epsilon_gdp_scores(z, z, delta=1e-6).epsilon == 0.0
    assert epsilon_one_run_scores(z, z, delta=1e-6).epsilon == 0.0
    assert exposure_epsilon_bound(z, z, delta=1e-6).epsilon == 0.0
    # identically distributed scores: zero in (nearly) every seeded repetition
    hits = 0
    for s in range(20):
        a, b = rng.normal(size=2000), rng.normal(size=2000)
        hits += epsilon_clopper_pearson_scores(a, b, delta=1e-6, max_thresholds=100).epsilon > 0
    assert hits <= 2
    assert epsilon_lower_bound(10, 100, 10, 100).epsilon == 0.0


def test_clopper_pearson_coverage_by_simulation():
    rng = np.random.default_rng(5)
    n, p, a = 200, 0.03, 0.05
    k = rng.binomial(n, p, size=20000)
    assert np.mean(clopper_pearson_upper(k, n, a) < p) <= a
    assert np.mean(clopper_pearson_lower(k, n, a) > p) <= a
    assert clopper_pearson_lower(0, 10, a) == 0.0 and clopper_pearson_upper(10, 10, a) == 1.0


def test_bounds_hold_for_an_honest_gaussian_mechanism():
    # Gaussian mechanism at (1, 1e-6): sensitivity 1, sigma = 1/mu. Bounds must stay below 1 (seeded).
    mu = gdp_mu(1.0, 1e-6)
    rng = np.random.default_rng(7)
    out = rng.normal(0.0, 1 / mu, 20000)
    inn = rng.normal(1.0, 1 / mu, 20000)
    for fn in (epsilon_clopper_pearson_scores, epsilon_gdp_scores, epsilon_one_run_scores):
        b = fn(inn, out, delta=1e-6, correction="split", rng=np.random.default_rng(1), max_thresholds=100)
        assert 0.0 <= b.epsilon < 1.0, b
    # the GDP estimator finds a real signal but stays below the truth
    g = epsilon_gdp_scores(inn, out, delta=1e-6, max_thresholds=100)
    assert 0.0 < g.details["mu_lower"] < mu


def test_bounds_catch_a_mechanism_with_half_the_noise():
    mu = gdp_mu(1.0, 1e-6)
    rng = np.random.default_rng(8)
    out = rng.normal(0.0, 0.5 / mu, 20000)
    inn = rng.normal(1.0, 0.5 / mu, 20000)
    g = epsilon_gdp_scores(inn, out, delta=1e-6, max_thresholds=100)
    assert g.epsilon > 1.0 and g.details["mu_lower"] > mu


def test_gdp_conversion_and_mu_bound():
    mu = 0.8
    eps = epsilon_from_gdp(mu, 1e-5)
    assert gdp_delta(mu, eps) == pytest.approx(1e-5, rel=1e-6)
    assert epsilon_from_gdp(0.0, 1e-5) == 0.0
    # the trade-off point of a mu-GDP mechanism gives back mu
    fpr = 0.1
    fnr = stats.norm.cdf(stats.norm.ppf(1 - fpr) - mu)
    assert gdp_mu_lower_bound(fpr, fnr) == pytest.approx(mu)


def test_zcdp_rho_bound_is_below_the_truth_for_a_gaussian():
    # N(0,1) vs N(m,1) is m^2/2-zCDP; any threshold test gives rho_lower <= m^2/2
    m = 0.5
    for t in np.linspace(-2, 3, 11):
        p, q = stats.norm.sf(t - m), stats.norm.sf(t)
        r = zcdp_rho_lower_bound(p, q)
        assert 0 < r <= m * m / 2 + 1e-12
    assert zcdp_rho_lower_bound(0.3, 0.4) == 0.0
    # the best threshold keeps a large part of the divergence
    best = max(zcdp_rho_lower_bound(stats.norm.sf(t - m), stats.norm.sf(t)) for t in np.linspace(-3, 4, 200))
    assert best > 0.5 * m * m / 2
    assert zcdp_epsilon(best, 1e-6) < zcdp_epsilon(m * m / 2, 1e-6)


def test_bad_input_names_the_argument():
    with pytest.raises(ValueError, match="confidence"):
        epsilon_lower_bound(1, 2, 1, 2, confidence=1.0)
    with pytest.raises(ValueError, match="confidence"):
        epsilon_one_run(10, 1, 1, confidence=0)
    with pytest.raises(ValueError, match="delta"):
        epsilon_lower_bound(1, 2, 1, 2, delta=1.0)
    with pytest.raises(ValueError, match="correction"):
        epsilon_clopper_pearson_scores([1.0], [0.0], correction="none")
    with pytest.raises(ValueError, match="rng"):
        epsilon_clopper_pearson_scores([1.0, 2.0], [0.0, 1.0], correction="split")


# --------------------------------------------------------------------------
# cross-checks with second implementations on the same scores
# --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def scores():
    rng = np.random.default_rng(2024)
    return rng.normal(1.0, 1.0, 3000), rng.normal(0.0, 1.0, 2500)


def test_cross_check_jax_privacy(scores):
    auditing = pytest.importorskip("jax_privacy.auditing", reason="jax-privacy 2.0 (extra audit-test) not installed")
    inn, out = scores
    aud = auditing.CanaryScoreAuditor(inn, out)
    for t in (0.5, 1.5, 2.5):
        ours = epsilon_clopper_pearson_scores(inn, out, delta=1e-6, thresholds=[t]).epsilon
        theirs = aud.epsilon_clopper_pearson(0.05, 1e-6, one_sided=False, threshold_strategy=auditing.Explicit(t))
        assert ours == pytest.approx(theirs, rel=1e-9, abs=1e-12)
        ours = epsilon_one_run_scores(inn, out, delta=1e-6, thresholds=[t]).epsilon
        theirs = aud.epsilon_one_run(0.05, 1e-6, threshold_strategy=auditing.Explicit(t))
        assert ours == pytest.approx(theirs, abs=1e-5)
    # Bonferroni over the same threshold set
    t = aud._thresholds
    ours = epsilon_clopper_pearson_scores(inn, out, delta=1e-6, thresholds=t).epsilon
    assert ours == pytest.approx(aud.epsilon_clopper_pearson(0.05, 1e-6, one_sided=False), rel=1e-9)
    # GDP: jax-privacy takes |mu| over all thresholds, which for thresholds worse than random guessing uses
    # the wrong side of the intervals (see test_gdp_bound_of_a_reversed_test_is_zero...); on these scores
    # (mu = 1) it picks such a threshold, so it is larger than ours; both stay below the truth here
    ours = epsilon_gdp_scores(inn, out, delta=1e-6, thresholds=t).epsilon
    theirs = aud.epsilon_from_gdp(0.05, 1e-6)
    assert 0.5 < ours < theirs < epsilon_from_gdp(1.0, 1e-6)
    mu_pos = epsilon_gdp_scores(inn, out, delta=1e-6, thresholds=t).details["mu_lower"]
    assert 0 < mu_pos < 1.0
    # where the best threshold is a valid-direction one the two agree
    rng = np.random.default_rng(2024)
    inn2, out2 = rng.normal(2.0, 1.0, 3000), rng.normal(0.0, 1.0, 2500)
    aud2 = auditing.CanaryScoreAuditor(inn2, out2)
    ours2 = epsilon_gdp_scores(inn2, out2, delta=1e-6, thresholds=aud2._thresholds).epsilon
    assert ours2 == pytest.approx(aud2.epsilon_from_gdp(0.05, 1e-6), abs=1e-5)
    assert ours2 < epsilon_from_gdp(2.0, 1e-6)


def test_cross_check_privacy_estimates(scores):
    pe = pytest.importorskip("privacy_estimates", reason="privacy-estimates (extra audit-test) not installed")
    inn, out = scores
    for t in (0.5, 1.5, 2.5):
        tp, fp = int((inn >= t).sum()), int((out >= t).sum())
        counts = pe.AttackResults(FN=inn.size - tp, FP=fp, TN=out.size - fp, TP=tp)
        theirs = pe.compute_eps_lo(counts, delta=1e-6, alpha=0.05, method="beta")
        ours = epsilon_lower_bound(tp, inn.size, fp, out.size, delta=1e-6, confidence=0.95, split=True).epsilon
        assert ours == pytest.approx(theirs, rel=1e-6, abs=1e-9)
        assert ours > 0


def test_gdp_bound_of_a_reversed_test_is_zero_not_its_absolute_value():
    # a test worse than random guessing at extreme rates: |mu| from upper bounds would claim mu > 0.4,
    # far above an honest Gaussian mechanism's mu = 0.22; the valid bound is 0
    fpr_hi = float(clopper_pearson_upper(486, 495, 0.05 / 6))
    fnr_hi = float(clopper_pearson_upper(4, 505, 0.05 / 6))
    assert fpr_hi + fnr_hi > 1
    assert gdp_mu_lower_bound(fpr_hi, fnr_hi) == 0.0
