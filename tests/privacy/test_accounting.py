"""Privacy conversions and accountants, checked against independent computations."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy import integrate, stats

from dpstats.privacy.accounting import (
    BudgetExceeded,
    GDPAccountant,
    PureAccountant,
    ZCDPAccountant,
    em_epsilon,
    gaussian_sigma,
    gdp_delta,
    gdp_mu,
    validate_budget,
    zcdp_epsilon,
    zcdp_rho,
)
from dpstats.privacy.mechanisms import exponential_mechanism, private_quantile, private_quantile_grid
from dpstats.privacy.composition import part
from tests.privacy import direct_charges as dc

EPS = [0.3, 1.0, 3.0, 10.0]


def hockey_stick(sigma: float, sens: float, eps: float) -> float:
    """delta(eps) of N(0, sigma^2) vs N(sens, sigma^2) by numerical integration."""
    p, q = stats.norm(0, sigma), stats.norm(sens, sigma)
    f = lambda x: max(p.pdf(x) - math.exp(eps) * q.pdf(x), 0.0)  # noqa: E731
    # the integrand is positive left of the crossing point
    cross = sens / 2 - eps * sigma**2 / sens
    val, _ = integrate.quad(f, -np.inf, cross, epsabs=1e-14, limit=200)
    return val


@pytest.mark.parametrize("eps", EPS)
def test_gaussian_sigma_is_exactly_calibrated(eps: float) -> None:
    sigma = gaussian_sigma(2.0, eps, 1e-6)
    assert hockey_stick(sigma, 2.0, eps) == pytest.approx(1e-6, rel=1e-4)
    # 1% less noise violates the budget
    assert hockey_stick(0.99 * sigma, 2.0, eps) > 1e-6


def test_gaussian_beats_classical_bound() -> None:
    for eps in (0.3, 0.9):
        classical = math.sqrt(2 * math.log(1.25 / 1e-6)) / eps
        assert gaussian_sigma(1.0, eps, 1e-6) < classical


@pytest.mark.parametrize("eps", EPS)
def test_zcdp_roundtrip_and_known_bounds(eps: float) -> None:
    rho = zcdp_rho(eps, 1e-6)
    assert zcdp_epsilon(rho, 1e-6) == pytest.approx(eps, rel=1e-9)
    # tighter than the classical rho + 2 sqrt(rho log(1/delta)) conversion
    assert zcdp_epsilon(rho, 1e-6) <= rho + 2 * math.sqrt(rho * math.log(1e6)) + 1e-12
    # the zCDP of a Gaussian that is exactly (eps, delta)-DP converts back to no less than eps
    sigma = gaussian_sigma(1.0, eps, 1e-6)
    assert zcdp_epsilon(1 / (2 * sigma**2), 1e-6) >= eps - 1e-9


def test_gdp_delta_monotone() -> None:
    assert gdp_delta(0.5, 1.0) > gdp_delta(0.5, 2.0) > 0
    assert gdp_delta(gdp_mu(1.0, 1e-6), 1.0) == pytest.approx(1e-6, rel=1e-8)


def test_accountants_spend_exactly() -> None:
    z = ZCDPAccountant(1.0, 1e-6)
    dc.spend_gaussian(z, "a", 1.0, z.gaussian_sigma(1.0, 0.3))
    dc.spend_pure(z, "b", z.pure_epsilon(0.5))
    assert not z.exhausted()
    dc.spend_rho(z, "c", z.remaining)
    assert z.exhausted()
    eps, delta = z.achieved()
    assert eps == pytest.approx(1.0, rel=1e-9) and delta == 1e-6
    with pytest.raises(BudgetExceeded):
        dc.spend_rho(z, "d", 1e-6)

    g = GDPAccountant(3.0, 1e-6)
    for share in (0.5, 0.25, 0.25):
        dc.spend_gaussian(g, "m", 2.0, g.gaussian_sigma(2.0, share))
    assert g.exhausted() and g.achieved()[1] == pytest.approx(1e-6, rel=1e-8)

    p = PureAccountant(1.0, 1e-6)
    dc.spend(p, "lap", 0.4)
    dc.spend(p, "ptr", 0.6, 1e-6)
    assert p.exhausted() and p.achieved() == pytest.approx((1.0, 1e-6))


@pytest.mark.parametrize(
    "eps, delta, msg",
    [(0, 1e-6, "epsilon"), (-1, 1e-6, "epsilon"), (math.inf, 1e-6, "epsilon"), (math.nan, 0, "epsilon"),
     (1, 1.0, "delta"), (1, -1e-9, "delta"), ("a", 0, "epsilon")],
)
def test_budget_validation(eps, delta, msg) -> None:
    with pytest.raises(ValueError, match=msg):
        validate_budget(eps, delta)


def test_delta_above_one_over_n_warns() -> None:
    with pytest.warns(UserWarning, match="1/n"):
        validate_budget(1.0, 0.01, n=1000)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        validate_budget(1.0, 1e-6, n=1000)


def _em_probs(scores, eps, sens=1.0):
    w = np.exp(eps * np.asarray(scores, float) / (2 * sens))
    return w / w.sum()


def test_exponential_mechanism_distribution() -> None:
    scores = np.array([0.0, -1.0, -3.0])
    rng = np.random.default_rng(0)
    draws = np.bincount([exponential_mechanism(scores, 2.0, 1.0, rng) for _ in range(20000)], minlength=3) / 20000
    np.testing.assert_allclose(draws, _em_probs(scores, 2.0), atol=0.015)


def _grid_scores(x, q, grid):
    z = np.sort(x)
    r = max(1, math.ceil(q * len(z)))
    c = np.searchsorted(z, grid, side="right").astype(float)
    cp = np.r_[0.0, c[:-1]]
    return -np.maximum.reduce([np.zeros_like(c), cp - r + 1, r - c])


def test_grid_quantile_score_sensitivity_brute_force() -> None:
    """Replacing any one row moves every grid score by at most 1 (tie-heavy data)."""
    grid = np.array([0.0, 0.5, 1.0, 2.0, 52.0, 60.0])
    base = np.array([0, 0, 1, 1, 1, 52, 52, 52.0])
    for q in (0.1, 0.5, 0.9, 1.0):
        s0 = _grid_scores(base, q, grid)
        for i in range(len(base)):
            for v in (-5.0, 0.0, 0.7, 1.0, 52.0, 99.0):
                x2 = base.copy()
                x2[i] = v
                assert np.max(np.abs(_grid_scores(x2, q, grid) - s0)) <= 1.0
    # only the cell holding the quantile scores 0
    s = _grid_scores(base, 0.9, grid)
    assert list(np.flatnonzero(s == 0)) == [4]


def test_private_quantiles_concentrate() -> None:
    rng = np.random.default_rng(5)
    x = rng.normal(10, 2, size=5000)
    qs = [private_quantile(x, 0.5, -100, 100, 1.0, np.random.default_rng(s)) for s in range(20)]
    assert abs(np.median(qs) - 10) < 0.2
    grid = np.linspace(-100, 100, 2001)
    qg = [private_quantile_grid(x, 0.5, grid, 1.0, np.random.default_rng(s)) for s in range(20)]
    assert abs(np.median(qg) - np.median(x)) < 0.3  # grid step 0.1: the release is a cell edge
    # same seed, same release
    assert private_quantile(x, 0.5, -100, 100, 1.0, np.random.default_rng(3)) == private_quantile(
        x, 0.5, -100, 100, 1.0, np.random.default_rng(3))


def test_direct_gaussian_and_pure_charges_cost_their_formulas() -> None:
    acc = ZCDPAccountant(10.0, 1e-6)
    dc.spend_gaussian(acc, "g", sensitivity=2.0, sigma=8.0)
    dc.spend_pure(acc, "p", epsilon=0.3)
    assert [(s.mechanism, s.cost) for s in acc.ledger] == [("g", pytest.approx(2.0**2 / (2 * 8.0**2))),
                                                          ("p", pytest.approx(0.3**2 / 2))]
    assert acc.spent == pytest.approx(0.03125 + 0.045)


# --------------------------------------------------------------------------
# parts of a zCDP budget (sequential composition)
# --------------------------------------------------------------------------


def test_parts_charge_their_share_into_the_parent_ledger() -> None:
    acc = ZCDPAccountant(1.0, 1e-6)
    rng = np.random.default_rng(0)
    a, b = part(acc, 0.25, "educ"), part(acc, 0.75, "exper")
    assert (a.rho, b.rho) == pytest.approx((0.25 * acc.rho, 0.75 * acc.rho), rel=1e-12)
    a.gaussian("sum", 1.0, sensitivity=2.0, sigma=a.gaussian_sigma(2.0, 1.0), rng=rng)
    assert a.exhausted() and not acc.exhausted()
    b.exponential("grid median", np.zeros(5), sensitivity=1.0, rng=rng, bound="bounded_range",
                  epsilon=em_epsilon(0.5 * b.rho, bound="bounded_range"))
    b.gaussian("Gram", 0.0, sensitivity=1.0, sigma=b.gaussian_sigma(1.0, 0.5), rng=rng)
    assert b.exhausted() and acc.exhausted()
    assert [e.mechanism for e in acc.ledger] == ["sum (educ)", "grid median (exper)", "Gram (exper)"]
    assert [e.mechanism for e in b.ledger] == ["grid median", "Gram"]
    # the parent's entries are the parts' (same costs, scales, sensitivities)
    for whole, own in zip(acc.ledger, a.ledger + b.ledger, strict=True):
        assert (whole.cost, whole.scale, whole.sensitivity, whole.kind) == (own.cost, own.scale, own.sensitivity,
                                                                            own.kind)
    assert acc.spent == pytest.approx(acc.rho, rel=1e-12)


def test_a_part_refuses_more_than_its_share_before_any_draw() -> None:
    acc = ZCDPAccountant(1.0, 1e-6)
    share = part(acc, 0.5, "educ")
    rng = np.random.default_rng(3)
    state = rng.bit_generator.state
    # the part's whole share at sensitivity 1 is sigma_half; half that noise costs four times the share
    sigma_half = share.gaussian_sigma(1.0, 1.0)
    with pytest.raises(BudgetExceeded, match="educ"):
        share.gaussian("sum", 0.0, sensitivity=1.0, sigma=sigma_half / 2.0, rng=rng)
    assert acc.ledger == [] and share.ledger == [] and rng.bit_generator.state == state


def test_parts_beyond_the_whole_are_refused_by_the_parent() -> None:
    acc = ZCDPAccountant(1.0, 1e-6)
    rng = np.random.default_rng(0)
    first, second = part(acc, 0.7, "a"), part(acc, 0.7, "b")
    first.gaussian("x", 0.0, sensitivity=1.0, sigma=first.gaussian_sigma(1.0, 1.0), rng=rng)
    with pytest.raises(BudgetExceeded):
        second.gaussian("y", 0.0, sensitivity=1.0, sigma=second.gaussian_sigma(1.0, 1.0), rng=rng)
    assert len(acc.ledger) == 1 and second.ledger == []


@pytest.mark.parametrize("fraction", [0.0, -0.1, 1.5, math.nan])
def test_a_part_needs_a_fraction_in_0_1(fraction: float) -> None:
    with pytest.raises(ValueError, match="fraction"):
        part(ZCDPAccountant(1.0, 1e-6), fraction, "x")
