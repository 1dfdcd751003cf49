"""The joint sensitivity of fwl_score's score sums S, T and Q (``_score_sums``) against neighbouring data sets."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from dpstats.algorithms.sce._score_sums import joint_score_scales, score_sums_sens2

C_U, C_V = 1.7, 0.6


def _sums(uc: np.ndarray, vc: np.ndarray) -> np.ndarray:
    """S, T and Q of clipped residuals, as stage 2 releases them."""
    return np.array([np.sum(uc * vc), np.sum(uc * uc), np.sum((uc * vc) ** 2)])


def _moved(sig: np.ndarray, a: float, b: float, a2: float, b2: float) -> float:
    """Squared change of (S, T, Q) in units of ``sig`` when one row (a, b) of a data set is replaced by (a2, b2)
    (in units of the clips), the other rows fixed."""
    rng = np.random.default_rng(0)
    uc = np.clip(rng.normal(size=20), -C_U, C_U)
    vc = np.clip(rng.normal(size=20), -C_V, C_V)
    before = _sums(np.append(uc, a * C_U), np.append(vc, b * C_V))
    after = _sums(np.append(uc, a2 * C_U), np.append(vc, b2 * C_V))
    return float(np.sum(((before - after) / sig) ** 2))


def _weights(sig: np.ndarray) -> tuple[float, float]:
    return (C_U * C_V / sig[0]) ** 2, (C_U**2 / sig[1]) ** 2 + ((C_U * C_V) ** 2 / sig[2]) ** 2


# noise scales (S, T, Q): T and Q noisy, an endpoint maximum; T and Q precise, an interior maximum (2 w_S <= W)
SCALES = [np.array([2.0, 8.0, 3.0]), np.array([1.0, 2.0436, 0.9826]), np.array([1.0, 1.0, 1.0])]


@pytest.mark.parametrize("sig", SCALES)
def test_no_replaced_row_moves_the_sums_further_than_the_bound(sig):
    """Every replacement on a grid of the box moves (S, T, Q) by at most the bound, in units of the noise: the
    sums of a data set whose last row is each grid point (a, b), compared pairwise."""
    grid = np.linspace(-1.0, 1.0, 21)
    bound = score_sums_sens2(*_weights(sig))
    rng = np.random.default_rng(0)
    uc = np.clip(rng.normal(size=20), -C_U, C_U)
    vc = np.clip(rng.normal(size=20), -C_V, C_V)
    rows = np.array(list(itertools.product(grid, repeat=2)))
    sums = np.array([_sums(np.append(uc, a * C_U), np.append(vc, b * C_V)) for a, b in rows]) / sig
    worst = max(float(np.max(np.sum((sums - s) ** 2, axis=1))) for s in sums)
    assert worst <= bound * (1 + 1e-12)
    assert worst > 0.99 * bound  # the grid reaches the worst case (measured 0.997 or more)


@pytest.mark.parametrize("sig", SCALES)
def test_the_bound_is_attained_by_a_replaced_row(sig):
    """The row a = b = 1 replaced by a' = -t, b' = 1 reaches the bound at the maximising t (found here by a
    fine scan), so a halved sensitivity would be exceeded."""
    bound = score_sums_sens2(*_weights(sig))
    best = max(_moved(sig, 1.0, 1.0, -t, 1.0) for t in np.linspace(0.0, 1.0, 2001))
    assert best == pytest.approx(bound, rel=1e-5)
    # the sums' separate worst cases add to more whenever more than one of them is released
    separate = (2 * C_U * C_V / sig[0]) ** 2 + (C_U**2 / sig[1]) ** 2 + ((C_U * C_V) ** 2 / sig[2]) ** 2
    assert bound < separate


def test_the_bound_covers_the_interior_maximum():
    """With precise T and Q the worst t lies inside (0, 1) and exceeds both ends."""
    w_S, W = _weights(SCALES[1])
    assert 2 * w_S <= W
    bound = score_sums_sens2(w_S, W)
    ends = max(w_S + W, 4 * w_S)
    assert bound > ends * 1.03  # W = 3 w_S: about 5 % above


@pytest.mark.parametrize("shares", [(0.765, 0.135, 0.1), (0.85, 0.15, 0.0), (0.4, 0.3, 0.3)])
def test_joint_scales_cost_the_shares_exactly(shares):
    rho_S, rho_T, rho_Q = (0.01 * s for s in shares)
    sig_S, sig_T, sig_Q, sens2 = joint_score_scales(C_U, C_V, rho_S, rho_T, rho_Q)
    sig = np.array([sig_S, sig_T, sig_Q if rho_Q else math.inf])
    assert sens2 / 2 == pytest.approx(rho_S + rho_T + rho_Q, rel=1e-12)
    # the returned sens2 is the bound at the returned scales, and is reached by a replaced row
    assert sens2 == pytest.approx(score_sums_sens2(*_weights(sig)), rel=1e-12)
    best = max(_moved(sig, 1.0, 1.0, -t, 1.0) for t in np.linspace(0.0, 1.0, 2001))
    assert best == pytest.approx(sens2, rel=1e-5)
    # never noisier than the sums released one at a time at their shares
    assert sig_S <= 2 * C_U * C_V / math.sqrt(2 * rho_S) and sig_T <= C_U**2 / math.sqrt(2 * rho_T)


def test_the_interval_shares_leave_s_the_whole_budget():
    """At fwl_score's interval shares (S 76.5 %, T 13.5 %, Q 10 % of stage 2) the worst case is S's alone, so S's
    noise is that of S released alone at all of stage 2's budget: 12.5 % below its share's."""
    sig_S, sig_T, _, _ = joint_score_scales(C_U, C_V, 0.765, 0.135, 0.1)
    assert sig_S == pytest.approx(2 * C_U * C_V / math.sqrt(2 * 1.0), rel=1e-12)
    assert sig_T == pytest.approx(math.sqrt(0.765) * C_U**2 / math.sqrt(2 * 0.135), rel=1e-12)


def test_bad_weights_are_refused():
    with pytest.raises(ValueError, match="weights"):
        score_sums_sens2(-1.0, 1.0)
    with pytest.raises(ValueError, match="rho_S"):
        joint_score_scales(1.0, 1.0, 0.0, 0.1)
