"""adaptive_whiten's counts of rows beyond the stretched box and ball: sensitivity on adversarial neighbours.

Same seed, same noise: the difference of two noisy releases is the
difference of the true statistics, so replacing one row must move each
box count by at most 1 (L2 at most ``sqrt(d')``), the ball count by at most
1, and the ball's excess by at most ``2 (stretch - 1) R / n`` in L2; each
bound is attained, so a halved sensitivity would not cover it.
"""

from __future__ import annotations

import numpy as np
import pytest

from dpstats.algorithms.mean.adaptive import BEYOND_SHARE, ball_excess, beyond_ball, beyond_box, clipping_excess
from dpstats.privacy.accounting import ZCDPAccountant

N, D, STRETCH = 150, 3, 1.5


def _data():
    rng = np.random.default_rng(3)
    return rng.standard_t(2, (N, D))


def _released(X):
    """The true statistics the mechanisms add noise to, recovered as release minus the same seed's noise."""
    acc = ZCDPAccountant(1.0, 1e-6)
    g = np.random.default_rng(0)
    ex, _, _, _ = clipping_excess(X, np.zeros(D), np.ones(D), STRETCH, acc, 0.5, g)
    acc_b = ZCDPAccountant(1.0, 1e-6)
    exb, _, _, _ = ball_excess(X, np.zeros(D), 1.0, STRETCH, acc_b, 0.5, np.random.default_rng(0))
    return ex, exb


def test_box_counts_and_ball_parts_move_by_their_sensitivities():
    X = _data()
    lo, hi = np.full(D, -STRETCH), np.full(D, STRETCH)
    base_counts = beyond_box(X, lo, hi)
    base_ball = beyond_ball(X, np.zeros(D), STRETCH)
    worst_c = worst_b = 0.0
    for i in range(N):
        for row in (np.full(D, 50.0), np.zeros(D), np.array([50.0, 0.0, 0.0])):
            Y = X.copy()
            Y[i] = row
            c = beyond_box(Y, lo, hi)
            b = beyond_ball(Y, np.zeros(D), STRETCH)
            assert np.max(np.abs(c - base_counts)) <= 1 and abs(b - base_ball) <= 1
            worst_c = max(worst_c, float(np.linalg.norm(c - base_counts)))
            worst_b = max(worst_b, float(abs(b - base_ball)))
    assert worst_c == pytest.approx(np.sqrt(D)) and worst_b == 1.0


def test_the_ball_excess_moves_by_at_most_its_sensitivity_and_is_charged_at_it():
    X = _data()
    _, exb = _released(X)
    sens = 2.0 * (STRETCH - 1.0) * 1.0 / N
    worst = 0.0
    for i in range(N):
        for row in (np.full(D, 50.0), np.full(D, -50.0), np.zeros(D)):
            Y = X.copy()
            Y[i] = row
            _, exb2 = _released(Y)
            step = float(np.linalg.norm(exb2 - exb))
            assert step <= sens * (1 + 1e-9)
            worst = max(worst, step)
    assert worst > 0.75 * sens  # close to attained: a halved sensitivity would not cover it
    acc = ZCDPAccountant(1.0, 1e-6)
    _, sig, _, _ = ball_excess(X, np.zeros(D), 1.0, STRETCH, acc, 0.5, np.random.default_rng(0))
    costs = {e[0]: e[1] for e in acc.ledger}
    excess_share, count_share = (1.0 - BEYOND_SHARE) * 0.5, BEYOND_SHARE * 0.5
    assert costs["clipping excess (stretched ball)"] == pytest.approx(excess_share * acc.rho, rel=1e-12)
    assert costs["rows beyond the stretched ball"] == pytest.approx(count_share * acc.rho, rel=1e-12)
    assert sig == pytest.approx(sens / np.sqrt(2.0 * excess_share * acc.rho), rel=1e-12)


def test_only_the_privately_ranged_columns_are_measured_and_charged():
    """A column with public bounds takes no allowance: its excess and count are not released, and the others'
    sensitivities are those of d' = 2 measured columns (the count of one column moves by at most 1)."""
    X = _data()
    ranged = np.array([True, False, True])
    acc = ZCDPAccountant(1.0, 1e-6)
    ex, sig, far, rows = clipping_excess(X, np.zeros(D), np.ones(D), STRETCH, acc, 0.5, np.random.default_rng(0),
                                         kstar=2.0, ranged=ranged)
    spends = {e.mechanism: e for e in acc.ledger}
    assert spends["rows beyond the stretched box"].sensitivity == pytest.approx(np.sqrt(2.0), rel=1e-12)
    assert spends["clipping excess (stretched box)"].sensitivity == pytest.approx(2.0 * np.sqrt(2.0) / N, rel=1e-12)
    assert sig == pytest.approx(2.0 * np.sqrt(2.0) / N / np.sqrt(2.0 * (1.0 - BEYOND_SHARE) * 0.5 * acc.rho), rel=1e-12)
    assert ex[1] == 0.0 and not far[1] and rows[1] == 2.0 and ex[0] != 0.0
    # on the two measured columns, the release is the one of those columns alone
    acc2 = ZCDPAccountant(1.0, 1e-6)
    ex2, _, _, rows2 = clipping_excess(X[:, ranged], np.zeros(2), np.ones(2), STRETCH, acc2, 0.5,
                                       np.random.default_rng(0), kstar=2.0)
    assert np.array_equal(ex[ranged], ex2) and np.array_equal(rows[ranged], rows2)
    # nothing to measure: nothing released, nothing charged
    acc3 = ZCDPAccountant(1.0, 1e-6)
    ex3, _, far3, rows3 = clipping_excess(X, np.zeros(D), np.ones(D), STRETCH, acc3, 0.5, np.random.default_rng(0),
                                          kstar=2.0, ranged=np.zeros(D, bool))
    assert not list(acc3.ledger) and not ex3.any() and not far3.any() and np.all(rows3 == 2.0)
