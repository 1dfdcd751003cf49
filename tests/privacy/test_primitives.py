"""The privacy primitives: charging calls that draw and charge in one step, the EM conversion,
the one tie-robust grid quantile and the public grids.

Every noise check replays the draw from a copy of the generator's state, so the
scale drawn is compared bit for bit with the scale recorded and the cost with its
formula, written out here independently of the code.
"""

from __future__ import annotations

import copy
import itertools
import math

import numpy as np
import pytest

from dpstats.privacy.accounting import (
    BudgetExceeded,
    GDPAccountant,
    PureAccountant,
    ZCDPAccountant,
    em_epsilon,
    em_rho,
    laplace_scale,
)
from dpstats.privacy.mechanisms import (
    exponential_mechanism,
    grid_quantile_rank,
    grid_quantile_scores,
    log_grid,
    private_quantile,
    private_quantile_grid,
    range_grid,
    signed_log_grid,
)

# --------------------------------------------------------------------------
# Gaussian
# --------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_gaussian_zcdp_draws_the_recorded_sigma_and_charges_the_formula(seed: int) -> None:
    acc = ZCDPAccountant(10.0, 1e-6)
    rng = np.random.default_rng(seed)
    twin = copy.deepcopy(rng)
    value = np.array([1.0, -2.0, 3.5])
    out = acc.gaussian("mean", value, sensitivity=0.7, sigma=1.3, rng=rng, note="n")
    np.testing.assert_array_equal(out, value + twin.normal(0.0, 1.3, size=3))
    e = acc.ledger[-1]
    assert (e.mechanism, e.kind, e.sensitivity, e.scale, e.note, e.unit) == ("mean", "gaussian", 0.7, 1.3, "n", "rho")
    assert e.cost == pytest.approx(0.7**2 / (2 * 1.3**2), rel=1e-15)
    # the generators stay in step: nothing else was drawn
    assert rng.random() == twin.random()


def test_gaussian_scalar_in_float_out_and_same_draw_as_before() -> None:
    acc = ZCDPAccountant(30.0, 1e-6)
    rng, twin = np.random.default_rng(5), np.random.default_rng(5)
    out = acc.gaussian("s", 2.0, sensitivity=1.0, sigma=0.5, rng=rng)
    assert type(out) is float
    assert out == 2.0 + twin.normal(0.0, 0.5)
    # a 2-d value draws its shape
    M = np.zeros((2, 3))
    out2 = acc.gaussian("m", M, sensitivity=0.1, sigma=0.5, rng=rng)
    np.testing.assert_array_equal(out2, twin.normal(0.0, 0.5, size=(2, 3)))


def test_gaussian_gdp_cost_is_mu_squared() -> None:
    acc = GDPAccountant(1.0, 1e-6)
    sigma = acc.gaussian_sigma(2.0, fraction=0.25)
    acc.gaussian("g", np.zeros(4), sensitivity=2.0, sigma=sigma, rng=np.random.default_rng(0))
    assert acc.ledger[-1].cost == pytest.approx((2.0 / sigma) ** 2, rel=1e-15)
    assert acc.ledger[-1].cost == pytest.approx(0.25 * acc.mu**2, rel=1e-12)
    assert acc.ledger[-1].scale == sigma


def test_gaussian_sigma_share_spends_the_share() -> None:
    acc = ZCDPAccountant(0.5, 1e-6)
    sigma = acc.gaussian_sigma(3.0, fraction=1.0)
    acc.gaussian("all", 0.0, sensitivity=3.0, sigma=sigma, rng=np.random.default_rng(0))
    assert acc.exhausted()


def test_gaussian_refuses_bad_input_and_pure_accountant_and_overspend() -> None:
    rng = np.random.default_rng(0)
    acc = ZCDPAccountant(1.0, 1e-6)
    for bad in (0.0, -1.0, math.inf, math.nan):
        with pytest.raises(ValueError):
            acc.gaussian("x", 0.0, sensitivity=1.0, sigma=bad, rng=rng)
    with pytest.raises(ValueError):
        acc.gaussian("x", 0.0, sensitivity=-1.0, sigma=1.0, rng=rng)
    with pytest.raises(TypeError):
        PureAccountant(1.0, 0.0).gaussian("x", 0.0, sensitivity=1.0, sigma=1.0, rng=rng)
    twin = copy.deepcopy(rng)
    with pytest.raises(BudgetExceeded):
        acc.gaussian("x", 0.0, sensitivity=1.0, sigma=acc.gaussian_sigma(1.0, 1.0) / 2, rng=rng)
    # charged before drawing: a refused release draws nothing
    assert rng.random() == twin.random()
    assert acc.ledger == []


# --------------------------------------------------------------------------
# Laplace
# --------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 3])
def test_laplace_epsilon_form(seed: int) -> None:
    acc = PureAccountant(1.0, 0.0)
    rng = np.random.default_rng(seed)
    twin = copy.deepcopy(rng)
    out = acc.laplace("count", 10.0, sensitivity=2.0, epsilon=0.4, rng=rng)
    assert type(out) is float
    assert out == 10.0 + twin.laplace(0.0, 2.0 / 0.4)
    e = acc.ledger[-1]
    assert (e.kind, e.sensitivity, e.scale, e.cost) == ("laplace", 2.0, 2.0 / 0.4, 0.4)


def test_laplace_scale_form_and_zcdp_cost() -> None:
    acc = ZCDPAccountant(3.0, 1e-6)
    rng, twin = np.random.default_rng(1), np.random.default_rng(1)
    out = acc.laplace("v", np.ones(3), sensitivity=0.5, scale=2.0, rng=rng)
    np.testing.assert_array_equal(out, 1.0 + twin.laplace(0.0, 2.0, size=3))
    e = acc.ledger[-1]
    assert (e.kind, e.sensitivity, e.scale) == ("laplace", 0.5, 2.0)
    assert e.cost == pytest.approx((0.5 / 2.0) ** 2 / 2.0, rel=1e-15)


def test_laplace_needs_exactly_one_of_epsilon_and_scale() -> None:
    acc = PureAccountant(1.0, 0.0)
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError):
        acc.laplace("x", 0.0, sensitivity=1.0, rng=rng)
    with pytest.raises(ValueError):
        acc.laplace("x", 0.0, sensitivity=1.0, epsilon=1.0, scale=1.0, rng=rng)
    with pytest.raises(ValueError):
        acc.laplace("x", 0.0, sensitivity=0.0, epsilon=1.0, rng=rng)
    with pytest.raises(TypeError):
        GDPAccountant(1.0, 1e-6).laplace("x", 0.0, sensitivity=1.0, epsilon=1.0, rng=rng)


def test_laplace_scale_is_sensitivity_over_epsilon() -> None:
    # kills the mutation survivor "laplace_scale returns half the scale"
    assert laplace_scale(2.0, 0.5) == 4.0
    assert laplace_scale(1.0, 3.0) == pytest.approx(1.0 / 3.0, rel=1e-15)
    with pytest.raises(ValueError):
        laplace_scale(1.0, 0.0)


# --------------------------------------------------------------------------
# Exponential mechanism
# --------------------------------------------------------------------------


def _gumbel_replay(scores: np.ndarray, temperature: float, rng: np.random.Generator,
                   log_base: np.ndarray | None = None) -> int:
    """argmax of ``scores / temperature + log_base + Gumbel`` with the Gumbel noise of ``rng``."""
    logits = np.asarray(scores, dtype=float) / temperature
    if log_base is not None:
        logits = logits + log_base
    return int(np.argmax(logits + rng.gumbel(size=logits.size)))


@pytest.mark.parametrize("bound, factor", [("bounded_range", 1 / 8), ("pure", 1 / 2)])
def test_exponential_charges_its_bound_and_draws_at_its_temperature(bound: str, factor: float) -> None:
    scores = -np.abs(np.arange(40) - 17.0)
    for seed in range(30):
        acc = ZCDPAccountant(10.0, 1e-6)
        rng = np.random.default_rng(seed)
        twin = copy.deepcopy(rng)
        j = acc.exponential("em", scores, sensitivity=2.0, epsilon=0.6, rng=rng, bound=bound)  # type: ignore[arg-type]
        # temperature 2 * sensitivity / epsilon
        assert j == _gumbel_replay(scores, 2 * 2.0 / 0.6, twin)
        e = acc.ledger[-1]
        assert (e.kind, e.sensitivity, e.scale) == ("exponential", 2.0, 0.6)
        assert e.cost == pytest.approx(factor * 0.6**2, rel=1e-15)


def test_exponential_monotone_and_log_base_and_pure_accountant() -> None:
    scores = np.arange(10.0)
    base = np.log(np.arange(1.0, 11.0))
    for seed in range(20):
        acc = PureAccountant(1.0, 0.0)
        rng = np.random.default_rng(seed)
        twin = copy.deepcopy(rng)
        j = acc.exponential("m", scores, sensitivity=1.0, epsilon=0.5, rng=rng, log_base=base, monotone=True)
        assert j == _gumbel_replay(scores, 1.0 / 0.5, twin, base)
        assert acc.ledger[-1].cost == 0.5


def test_exponential_zcdp_needs_an_explicit_bound() -> None:
    acc = ZCDPAccountant(1.0, 1e-6)
    with pytest.raises(ValueError):
        acc.exponential("x", np.zeros(3), sensitivity=1.0, epsilon=0.1, rng=np.random.default_rng(0))
    with pytest.raises(ValueError):
        acc.exponential("x", np.zeros(3), sensitivity=0.0, epsilon=0.1, rng=np.random.default_rng(0),
                        bound="pure")


def test_exponential_mechanism_temperature() -> None:
    scores = -np.abs(np.arange(25) - 9.0)
    for seed in range(30):
        rng = np.random.default_rng(seed)
        twin = copy.deepcopy(rng)
        assert exponential_mechanism(scores, 0.8, 1.5, rng) == _gumbel_replay(scores, 2 * 1.5 / 0.8, twin)


def test_em_conversion_formulas_and_round_trip() -> None:
    assert em_rho(0.4, bound="bounded_range") == 0.4**2 / 8.0
    assert em_rho(0.4, bound="pure") == 0.4**2 / 2.0
    assert em_epsilon(0.02, bound="bounded_range") == math.sqrt(8 * 0.02)
    assert em_epsilon(0.02, bound="pure") == math.sqrt(2 * 0.02)
    assert ZCDPAccountant.em_epsilon(0.02, bound="bounded_range") == em_epsilon(0.02, bound="bounded_range")
    for eps in (0.01, 0.5, 3.0):
        for b in ("bounded_range", "pure"):
            assert em_epsilon(em_rho(eps, bound=b), bound=b) == pytest.approx(eps, rel=1e-14)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        em_epsilon(-1.0, bound="pure")
    with pytest.raises(ValueError):
        em_rho(1.0, bound="gumbel")  # type: ignore[arg-type]


# --------------------------------------------------------------------------
# private_quantile: its EM runs at temperature 2 / epsilon (kills "epsilon x 2")
# --------------------------------------------------------------------------


def test_private_quantile_replays_at_the_documented_temperature() -> None:
    x = np.array([0.1, 0.5, 0.9, 1.7, 2.0, 3.3, 4.1])
    lo, hi, q, eps = -5.0, 5.0, 0.5, 0.7
    z = np.sort(x)
    edges = np.concatenate([[lo], z, [hi]])
    scores = -np.abs(np.arange(z.size + 1) - q * z.size)
    log_len = np.log(np.diff(edges))
    for seed in range(40):
        rng = np.random.default_rng(seed)
        twin = copy.deepcopy(rng)
        got = private_quantile(x, q, lo, hi, eps, rng)
        i = _gumbel_replay(scores, 2.0 / eps, twin, log_len)
        assert got == twin.uniform(edges[i], edges[i + 1])


# --------------------------------------------------------------------------
# the one tie-robust grid quantile
# --------------------------------------------------------------------------


def _cell_below_scores(x: np.ndarray, grid: np.ndarray, r: int) -> np.ndarray:
    """The definition, point by point: cell (g_{j-1}, g_j] scores -max(0, c(g_{j-1}) - r + 1, r - c(g_j))."""
    out = []
    for j, g in enumerate(grid):
        c = int(np.sum(x <= g))
        c_prev = int(np.sum(x <= grid[j - 1])) if j > 0 else 0
        out.append(-max(0, c_prev - r + 1, r - c))
    return np.array(out, dtype=float)


def test_grid_quantile_scores_match_the_definition() -> None:
    rng = np.random.default_rng(0)
    grid = np.linspace(-3, 3, 13)
    for n in (1, 2, 7, 30):
        x = np.round(rng.normal(size=n), 1)
        for q in (0.0, 0.1, 0.5, 0.9, 1.0):
            r = max(1, math.ceil(q * n))
            np.testing.assert_array_equal(grid_quantile_scores(x, grid, q=q), _cell_below_scores(x, grid, r))
        for rank in (-3, 1, n // 2 + 1, n, n + 5):
            r = min(max(rank, 1), n)
            np.testing.assert_array_equal(grid_quantile_scores(x, grid, rank=rank), _cell_below_scores(x, grid, r))


def test_grid_quantile_scores_tie_robust_zero_only_in_the_cell() -> None:
    x = np.array([0.0] * 6 + [1.0] * 4)  # a dummy: the median is 0, the maximum 1
    grid = np.array([-1.0, -0.5, 0.0, 0.5, 1.0, 2.0, 4.0])
    s = grid_quantile_scores(x, grid, q=0.5)
    assert list(np.flatnonzero(s == 0)) == [2]
    # above the maximum the score keeps falling: no flat plateau
    assert s[5] < 0 and s[6] < 0


def test_grid_quantile_scores_sensitivity_one_by_brute_force() -> None:
    grid = np.array([-1.0, 0.0, 1.0, 2.0, 3.0])
    values = [-2.0, 0.0, 0.5, 1.0, 3.0, 9.0]
    worst = 0.0
    for x in itertools.product(values, repeat=4):
        x = np.array(x)
        for i, v in itertools.product(range(4), values):
            y = x.copy()
            y[i] = v
            for kw in ({"q": 0.5}, {"q": 0.9}, {"rank": 2}):
                worst = max(worst, float(np.max(np.abs(grid_quantile_scores(x, grid, **kw)
                                                        - grid_quantile_scores(y, grid, **kw)))))
    assert worst == 1.0


def test_grid_quantile_keywords_are_unambiguous() -> None:
    x, grid = np.arange(5.0), np.arange(6.0)
    with pytest.raises(TypeError):
        grid_quantile_scores(x, grid, 0.5)  # type: ignore[misc]
    with pytest.raises(ValueError):
        grid_quantile_scores(x, grid)
    with pytest.raises(ValueError):
        grid_quantile_scores(x, grid, q=0.5, rank=2)
    with pytest.raises(ValueError):
        grid_quantile_rank(5, q=1.5)
    assert grid_quantile_rank(10, q=0.5) == 5
    assert grid_quantile_rank(10, rank=11) == 10
    assert grid_quantile_rank(0, rank=3) == 1


def test_private_quantile_grid_uses_the_scores_at_temperature_two_over_epsilon() -> None:
    x = np.array([0.0, 0.0, 1.0, 2.0, 2.0, 2.0, 5.0])
    grid = np.linspace(-1, 6, 15)
    for seed in range(30):
        rng = np.random.default_rng(seed)
        twin = copy.deepcopy(rng)
        got = private_quantile_grid(x, 0.5, grid, 0.9, rng)
        assert got == grid[_gumbel_replay(_cell_below_scores(x, grid, 4), 2.0 / 0.9, twin)]


# --------------------------------------------------------------------------
# public grids
# --------------------------------------------------------------------------


def test_signed_log_grid() -> None:
    g = signed_log_grid(0.5, 8.0, per_octave=2)
    pos = 0.5 * 2.0 ** (np.arange(9) / 2)
    np.testing.assert_allclose(g, np.concatenate([-pos[::-1], [0.0], pos]), rtol=1e-15)
    np.testing.assert_array_equal(g[g > 0], log_grid(0.5, 8.0, 2))
    assert np.all(np.diff(g) > 0)


@pytest.mark.parametrize("lo, hi", [(0.0, 1.0), (-1e6, 1e6), (3.0, 52.0), (-7.5, -2.0)])
def test_range_grid_stays_in_the_range(lo: float, hi: float) -> None:
    g = range_grid(lo, hi, per_octave=4)
    assert g[0] == lo and g[-1] == hi
    assert np.all(np.diff(g) > 0)
    if lo <= 0 <= hi:
        assert 0.0 in g
    res = (hi - lo) * 1e-6
    mags = np.abs(g[(g != 0) & (g != lo) & (g != hi)])
    # every interior point is a public magnitude res * 2^(k/4)
    k = np.log2(mags / res) * 4
    np.testing.assert_allclose(k, np.round(k), atol=1e-6)
    with pytest.raises(ValueError):
        range_grid(1.0, 1.0)
