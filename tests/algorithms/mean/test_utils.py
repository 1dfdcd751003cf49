"""Sensitivity and calibration of the mechanisms shared by the mean estimators.

Sensitivities are checked by brute force: small data sets, every row replaced
by every row of an adversarial set (ties, zeros, the public extremes, far
outliers), the statistic recomputed, and the largest change compared with the
claimed replace-one sensitivity.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from dpstats.algorithms.mean import _utils as U
from dpstats.algorithms.mean.adaptive import tail_count, widen_factor
from dpstats.data.instance import PublicFacts
from dpstats.privacy.accounting import ZCDPAccountant, em_rho, zcdp_epsilon
from dpstats.privacy.mechanisms import grid_quantile_scores, range_grid
from dpstats.privacy.quantiles import private_grid_index


def _neighbours(X: np.ndarray, candidates: np.ndarray):
    """Every data set obtained by replacing one row of ``X`` by one candidate row."""
    for i in range(X.shape[0]):
        for r in candidates:
            Y = X.copy()
            Y[i] = r
            yield Y


def _big_accountant() -> ZCDPAccountant:
    """A budget (rho about 9300) large enough for the thousands of draws of a distribution test."""
    return ZCDPAccountant(1e4, 1e-6)


def _check_em_ledger(acc: ZCDPAccountant, eps: float, count: int) -> None:
    """Every draw wrote one bounded-range entry: kind, epsilon drawn, sensitivity 1, cost eps^2/8."""
    assert len(acc.ledger) == count
    for e in acc.ledger:
        assert (e.kind, e.scale, e.sensitivity) == ("exponential", eps, 1.0)
        assert e.cost == pytest.approx(eps**2 / 8, rel=1e-15)


# --------------------------------------------------------------------------
# exponential mechanism: bounded range => eps^2/8-zCDP
# --------------------------------------------------------------------------


def _exp_probs(scores: np.ndarray, eps: float) -> np.ndarray:
    """Log-probabilities of the exponential mechanism exp(eps * score / 2)."""
    logits = eps / 2.0 * scores
    m = logits.max()
    return logits - (m + np.log(np.sum(np.exp(logits - m))))


def _renyi(lp: np.ndarray, lq: np.ndarray, alpha: float) -> float:
    t = alpha * lp + (1.0 - alpha) * lq
    m = t.max()
    return float((m + np.log(np.sum(np.exp(t - m)))) / (alpha - 1.0))


@pytest.mark.parametrize("eps", [0.1, 1.0, 3.0])
def test_exponential_mechanism_renyi_within_bounded_range_rho(eps):
    """D_alpha(M(x) || M(x')) <= alpha * eps^2 / 8 for score vectors that differ by at most 1 everywhere."""
    rng = np.random.default_rng(0)
    rho = em_rho(eps, bound="bounded_range")
    worst = 0.0
    for _ in range(40):
        G = int(rng.integers(2, 8))
        u = rng.normal(0, 3, size=G)
        # adversarial neighbours: every score moves by -1, 0 or +1 (vertices of the cube)
        for shift in itertools.product((-1.0, 0.0, 1.0), repeat=min(G, 4)):
            v = u.copy()
            v[: len(shift)] += np.array(shift)
            p, q = _exp_probs(u, eps), _exp_probs(v, eps)
            for alpha in (1.5, 2.0, 4.0, 16.0, 64.0):
                worst = max(worst, _renyi(p, q, alpha) / alpha)
    assert worst <= rho * (1 + 1e-9)
    # the bound is nearly attained: half the cells up, half down
    p, q = _exp_probs(np.array([0.0, 0.0]), eps), _exp_probs(np.array([1.0, -1.0]), eps)
    assert max(_renyi(p, q, a) / a for a in (1.01, 1.1, 2.0)) > 0.5 * rho


def test_exponential_epsilon_round_trip_and_ledger():
    acc = ZCDPAccountant(1.0, 1e-6)
    e = acc.em_epsilon(acc.rho / 4, bound="bounded_range")
    for _ in range(4):
        private_grid_index(VALUES, np.arange(8.0), e, np.random.default_rng(0), acc=acc, mechanism="exp", rank=3)
    assert acc.exhausted()
    _check_em_ledger(acc, e, 4)
    assert all("exponential mechanism" in s.note for s in acc.ledger)  # what the calibration tests look for
    assert math.isclose(zcdp_epsilon(acc.spent, 1e-6), 1.0, rel_tol=1e-6)


# --------------------------------------------------------------------------
# score sensitivities (brute force)
# --------------------------------------------------------------------------

VALUES = np.array([0.0, 0.0, 1.0, 1.0, 2.5, 7.0])  # ties, an atom at 0, a far point
CANDIDATES = np.array([0.0, 0.5, 1.0, 2.5, 3.0, 7.0, 50.0])


@pytest.mark.parametrize("q", [None, 0.0, 0.5, 0.9])
@pytest.mark.parametrize("k", [0.0, 1.0, 2.5, 10.0])
def test_tail_scale_scores_sensitivity_one(k, q):
    grid_with_zero = np.concatenate([[0.0], U.scale_grid(0.01, 100.0, 4)])
    grid_positive = U.scale_grid(0.01, 100.0, 4)
    for grid in (grid_with_zero, grid_positive):
        base = U.tail_scale_scores(VALUES, k, q, grid)
        for Y in _neighbours(VALUES[:, None], CANDIDATES[:, None]):
            diff = np.abs(U.tail_scale_scores(Y[:, 0], k, q, grid) - base)
            assert diff.max() <= 1.0 + 1e-12


def test_tail_scale_targets_the_kth_largest_and_guards_the_empty_region():
    x = np.arange(1.0, 1001.0)  # deviations 1..1000
    grid = np.concatenate([[0.0], np.arange(0.5, 5000.0, 1.0)])
    s = U.tail_scale_scores(x, 10, None, grid)
    best = grid[np.argmax(s)]
    assert 989 <= best <= 991  # about 10 points beyond
    # every cell above the largest deviation loses at least k+1 against the best
    above = np.r_[False, grid[:-1] >= 1000]
    assert s[above].max() <= -11 + 1e-12
    # fewer positive deviations than k: 0 is the only zero-score cell
    s2 = U.tail_scale_scores(np.array([0.0] * 50 + [3.0] * 4), 10, None, grid)
    assert grid[np.argmax(s2)] == 0.0 and np.sum(s2 == 0) == 1
    # a dummy with an atom at the median: the q-quantile of the non-zero deviations
    dummy = np.array([0.0] * 95 + [1.0] * 5)
    s3 = U.tail_scale_scores(dummy, 10, 0.9, grid)
    assert grid[np.argmax(s3)] >= 1.0  # the scale of the ones, not of the zeros


def test_tail_scale_draw_rarely_lands_above_the_data():
    rng = np.random.default_rng(1)
    eps, beta, n = 0.1, 0.01, 400
    x = np.abs(rng.standard_t(3, size=n))
    grid = np.concatenate([[0.0], U.scale_grid(1e-6, 1e6, 4)])
    k = tail_count(grid.size, eps, beta, n)
    acc = _big_accountant()
    draws = [U.tail_scale(acc, "t", x, k, None, grid, eps, rng) for _ in range(400)]
    _check_em_ledger(acc, eps, 400)
    assert np.mean(np.array(draws) > x.max() * 2 ** 0.25) <= 3 * beta + 0.01


def test_grid_quantile_scores_sensitivity_one():
    grid = range_grid(-10.0, 10.0, per_octave=2, resolution=0.1)
    for rank in (1, 3, 6):
        base = grid_quantile_scores(VALUES, grid, rank=rank)
        for Y in _neighbours(VALUES[:, None], np.r_[CANDIDATES, -10.0][:, None]):
            assert np.abs(grid_quantile_scores(Y[:, 0], grid, rank=rank) - base).max() <= 1.0


def test_noisy_max_bin_distribution_with_aggregated_empty_bins():
    """Empirical frequencies match exp(eps c / 2) / Z, empty bins included in aggregate."""
    rng = np.random.default_rng(2)
    bins = np.array([0] * 6 + [1] * 3 + [2])  # counts 6, 3, 1; bins 3..9 empty
    eps, nb = 1.0, 10
    w = np.exp(eps / 2 * np.array([6, 3, 1] + [0] * 7, dtype=float))
    expected = w / w.sum()
    acc = _big_accountant()
    draws = np.array([U.noisy_max_bin(acc, "bin", bins, nb, eps, rng) for _ in range(20000)])
    _check_em_ledger(acc, eps, 20000)
    freq = np.bincount(draws, minlength=nb) / draws.size
    assert np.abs(freq - expected).max() < 0.015
    # a huge number of bins: the empty bin drawn is uniform and never a non-empty one by mistake
    big = [U.noisy_max_bin(acc, "bin", np.array([5, 5]), 10**12, 0.01, rng) for _ in range(50)]
    assert all(0 <= b < 10**12 for b in big) and sum(b == 5 for b in big) < 5


@pytest.mark.parametrize("which", ["grid_quantile", "tail_scale"])
def test_score_draws_follow_exp_eps_score_over_two(which):
    """The draws the ledger charges eps^2/8 for are exp(eps * score / 2) with the sensitivity-1 scores above."""
    rng = np.random.default_rng(8)
    eps, reps = 2.0, 8000
    if which == "grid_quantile":
        grid = np.array([-1.0, 0.5, 1.0, 2.0, 3.0, 8.0])
        scores = grid_quantile_scores(VALUES, grid, rank=3)
        acc = _big_accountant()
        draws = [grid[private_grid_index(VALUES, grid, eps, rng, acc=acc, mechanism="q", rank=3)] for _ in range(reps)]
    else:
        grid = np.array([0.0, 0.5, 1.5, 2.0, 5.0, 8.0])
        scores = U.tail_scale_scores(VALUES, 2.0, None, grid)
        acc = _big_accountant()
        draws = [U.tail_scale(acc, "t", VALUES, 2.0, None, grid, eps, rng) for _ in range(reps)]
    assert len(set(scores.tolist())) >= 3  # several score levels, so the temperature matters
    _check_em_ledger(acc, eps, reps)
    w = np.exp(eps / 2 * scores)
    freq = np.array([np.mean(np.array(draws) == g) for g in grid])
    assert np.abs(freq - w / w.sum()).max() < 0.02


def test_pair_differences_one_row_changes_one_difference():
    x = np.array([3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0])
    base = U.pair_differences(x, np.random.default_rng(7))
    for Y in _neighbours(x[:, None], np.array([[0.0], [100.0], [1.0]])):
        other = U.pair_differences(Y[:, 0], np.random.default_rng(7))
        assert np.sum(other != base) <= 1


# --------------------------------------------------------------------------
# Gaussian mechanisms: L2 sensitivities of the clipped statistics
# --------------------------------------------------------------------------


def test_clipped_mean_sensitivity():
    rng = np.random.default_rng(3)
    a, b = np.array([0.0, -1.0, 10.0]), np.array([1.0, 2.0, 10.5])
    X = rng.normal(0.5, 2.0, size=(5, 3))
    cand = np.array(list(itertools.product(*[(-1e6, 0.0, 1.0, 1e6)] * 3)))
    base = U.clipped_mean(X, a, b)
    worst = max(np.linalg.norm(U.clipped_mean(Y, a, b) - base) for Y in _neighbours(X, cand))
    bound = np.linalg.norm(b - a) / 5
    assert worst <= bound + 1e-12 and worst > 0.5 * bound


def test_ball_mean_sensitivity():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(6, 2)) * 3
    c, R = np.array([0.5, -0.5]), 1.7
    angles = np.linspace(0, 2 * np.pi, 16, endpoint=False)
    cand = np.r_[np.c_[np.cos(angles), np.sin(angles)] * 1e4, c[None, :]]
    base = U.ball_mean(X, c, R)
    worst = max(np.linalg.norm(U.ball_mean(Y, c, R) - base) for Y in _neighbours(X, cand))
    assert worst <= 2 * R / 6 + 1e-12 and worst > 0.9 * 2 * R / 6


def test_augmented_second_moment_sensitivity():
    rng = np.random.default_rng(5)
    C = 1.3
    Z = rng.normal(size=(5, 2))
    Z = Z * np.minimum(1, C / np.linalg.norm(Z, axis=1))[:, None]
    angles = np.linspace(0, 2 * np.pi, 24, endpoint=False)
    cand = np.r_[np.c_[np.cos(angles), np.sin(angles)] * C, [[0.0, 0.0]]]
    base = U.augmented_second_moment(Z)
    worst = max(np.linalg.norm(U.augmented_second_moment(Y) - base) for Y in _neighbours(Z, cand))
    assert worst <= math.sqrt(2) * (C * C + 1) / 5 + 1e-12


# --------------------------------------------------------------------------
# public priors and helpers
# --------------------------------------------------------------------------


def test_prior_box_and_ball_use_bounds_then_default():
    f = PublicFacts("i", "s", "mean", 10, 3, ("a", "b", "c"), bounds={"a": (0.0, 1.0), "c": (-5.0, 15.0)})
    lo, hi = U.prior_box(f)
    assert lo.tolist() == [0.0, -1e6, -5.0] and hi.tolist() == [1.0, 1e6, 15.0]
    center, radius = U.prior_ball(f)
    assert center.tolist() == [0.5, 0.0, 5.0]
    assert math.isclose(radius, math.sqrt(0.25 + 1e12 + 100.0))
    g = PublicFacts("i", "s", "mean", 10, 4, ("a", "b", "c", "d"))
    assert math.isclose(U.prior_ball(g)[1], 1e6 * 2.0)


def test_grids_are_public_and_cover_the_range():
    g = range_grid(-1e6, 1e6, per_octave=16, resolution=1e-6)
    assert g[0] == -1e6 and g[-1] == 1e6 and 0.0 in g and np.all(np.diff(g) > 0)
    rel = np.diff(g[g > 1]) / g[g > 1][:-1]
    assert rel.max() < 2 ** (1 / 16) - 1 + 1e-9
    s = U.scale_grid(1e-3, 7.0, 4)
    assert s[-1] == 7.0 and s[0] == 1e-3


def test_widen_factor_and_tail_count():
    assert widen_factor(5, 10, 1000) == 1.0  # already fewer beyond than wanted
    f = widen_factor(50, 1, 1000)
    assert math.isclose(f, 3.090232 / 1.644854, rel_tol=1e-4)
    assert widen_factor(50, 1, 1000, d=3) > 1.0
    assert tail_count(100, 0.5, 0.01, 10**6) == pytest.approx(2 * (math.log(100) + math.log(100)) / 0.5)
    assert tail_count(100, 1e-4, 0.01, 40) == 20.0
