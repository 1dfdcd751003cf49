"""Privacy constants of TukeyEM and BHS pinned to their lemmas by running the algorithms' own functions.

TukeyEM: the safety test ``V_{t-k-1} / V_{t+k+g+1} e^{-eps_2 g / 2} <= delta / (8 e^{eps_2})``
(Brown et al. 2021, as used by Amin et al. 2023), with ``g`` allowed to reach the deepest
region ``V_top``; the restricted mechanism is checked exactly (hockey-stick divergence on a
1-D grid) on safe model sets.  BHS: leverage threshold ``lambda_l`` (the interpolation
``|S_{l+1}(Y')| >= |S_l(Y)| - 1`` at ``m = 10 k lambda_0``), score sensitivity 2 and the
Laplace test calibrated to it.
"""

from __future__ import annotations

import math

import numpy as np

from dpstats.algorithms import TaskData, get
from dpstats.algorithms.base import Decline
from dpstats.algorithms.linreg.tukeyem import distance_lower_bound, log_depth_volumes
from dpstats.algorithms.mean.bhs_affine import bhs_k, stable_covariance
from dpstats.data.instance import PublicFacts
from tests.noise_spy import RecordingGenerator

DELTA = 1e-6


# --------------------------------------------------------------------------
# TukeyEM
# --------------------------------------------------------------------------


def _brute_k_hat(logv: np.ndarray, t: int, eps2: float, delta: float) -> int:
    """The lemma's definition read literally: largest k in [0, t-2] with some g >= 1, t+k+g+1 <= top."""
    top = logv.size
    thr = math.log(delta / (8 * math.exp(eps2)))
    best = -1
    for k in range(0, t - 1):
        ok = any(
            logv[t - k - 2] - logv[t + k + g] - eps2 * g / 2 <= thr
            for g in range(1, top - t - k)  # index t+k+g <-> V_{t+k+g+1} <= V_top
        )
        if ok:
            best = k
    return best


def _pinned_logv(top: int, t: int, eps2: float, delta: float, gstar: int, shift: float) -> np.ndarray:
    """log V whose k = 0 test quantity is threshold + shift + 2.5 |g - g*| (minimum at g*); nonincreasing.

    The k = 1 quantity is then eps2/2 + (k = 0 quantity at g + 1) > threshold, so k_hat is 0 or -1.
    """
    thr = math.log(delta / (8 * math.exp(eps2)))
    C = 50.0
    logv = np.full(top, C)  # V_1 .. V_{t+1} = e^C
    for g in range(1, top - t):  # index t+g <-> V_{t+g+1}
        logv[t + g] = C - eps2 * g / 2 - (thr + shift + 2.5 * abs(g - gstar))
    assert np.all(np.diff(logv) <= 1e-12) and logv[t + 1] <= C
    return logv


def test_tukey_safety_threshold_is_delta_over_8_e_eps2():
    """Just below the threshold log(delta / (8 e^eps2)) k_hat = 0, just above it -1."""
    top, t, eps2, delta = 30, 6, 6.0, 0.01
    for gstar in (6, 12):
        below = _pinned_logv(top, t, eps2, delta, gstar, -1e-7)
        above = _pinned_logv(top, t, eps2, delta, gstar, +1e-7)
        assert distance_lower_bound(below, t, eps2, delta) == 0
        assert distance_lower_bound(above, t, eps2, delta) == -1
        # a threshold of delta / (4 e^eps2) (or delta / 8) would accept `above`
        assert distance_lower_bound(above, t, eps2, 2 * delta) == 0


def test_tukey_g_may_reach_the_deepest_region():
    """Only g with t+k+g+1 = top satisfies the test: dpstats accepts (the lemma allows every g >= 1)."""
    top, t, eps2, delta = 30, 6, 6.0, 0.01
    gstar = top - t - 1  # V_{t+g*+1} = V_top
    logv = _pinned_logv(top, t, eps2, delta, gstar, -1e-7)
    assert distance_lower_bound(logv, t, eps2, delta) == 0
    assert _brute_k_hat(logv, t, eps2, delta) == 0
    # the reference code's range stops at V_{top-1}: it would decline here
    assert _brute_k_hat(logv[:-1], t, eps2, delta) == -1


def test_tukey_distance_bound_equals_brute_force_definition():
    rng = np.random.default_rng(81)
    for _ in range(200):
        m = int(rng.integers(40, 120))
        models = rng.standard_t(int(rng.integers(1, 5)), size=(m, 2))
        proj = np.sort(models.T, axis=1)
        logv = log_depth_volumes(proj)
        t = m // 4
        eps2 = float(rng.choice([0.5, 2.0, 6.0]))
        delta = float(rng.choice([1e-6, 1e-2, 0.2]))
        assert distance_lower_bound(logv, t, eps2, delta) == _brute_k_hat(logv, t, eps2, delta)


def _depth_1d(vals: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.minimum((vals[None, :] <= y[:, None]).sum(1), (vals[None, :] >= y[:, None]).sum(1))


def _restricted_em_density(vals: np.ndarray, grid: np.ndarray, t: int, eps2: float, c: float) -> np.ndarray:
    """Cell probabilities of the restricted mechanism (weight e^{c eps2 depth} on depth >= t) on a 1-D grid."""
    mid = (grid[:-1] + grid[1:]) / 2
    w = np.diff(grid)
    dep = _depth_1d(vals, mid)
    logw = np.where(dep >= t, np.log(w) + c * eps2 * dep, -np.inf)
    p = np.exp(logw - logw.max())
    return p / p.sum()


def _hockey(p: np.ndarray, q: np.ndarray, eps: float) -> float:
    return float(np.maximum(p - math.exp(eps) * q, 0.0).sum())


def test_tukey_restricted_mechanism_is_private_on_safe_models():
    """k_hat >= 0 implies (eps2, delta)-indistinguishability from every neighbour (exact, d = 1).

    The sampler's normaliser equals sum_i (V_i - V_{i+1}) e^{eps2 i / 2} from log_depth_volumes.
    With the reference code's exponent eps2 depth (c = 1) the same test admits a larger loss.
    """
    rng = np.random.default_rng(82)
    m, eps2, delta = 40, 4.0, 0.05
    t = m // 4
    checked, worst_ref = 0, 0.0
    for trial in range(60):
        vals = np.sort(rng.normal(size=m) * rng.choice([0.3, 1.0, 3.0]))
        logv = log_depth_volumes(vals[None, :])
        # normaliser of the mechanism from the volumes (the sampler's weights) vs the grid integral
        top = logv.size
        V = np.append(np.exp(logv), 0.0)
        Z_vol = sum((V[i - 1] - V[i]) * math.exp(eps2 * i / 2) for i in range(t, top + 1))
        mid = (vals[:-1] + vals[1:]) / 2
        dep = _depth_1d(vals, mid)
        Z_grid = float(np.sum(np.where(dep >= t, np.diff(vals) * np.exp(eps2 * dep / 2), 0.0)))
        assert Z_vol == np.float64(Z_vol) and abs(Z_vol - Z_grid) <= 1e-9 * Z_grid
        if distance_lower_bound(logv, t, eps2, delta) < 0:
            continue
        for new in (-50.0, vals[0], vals[m // 2] + 1e-3, vals[-1] + 1e-3, 50.0):
            for i in (0, m // 2, m - 1):
                v2 = np.sort(np.append(np.delete(vals, i), new))
                grid = np.unique(np.concatenate([vals, v2]))
                p, q = (_restricted_em_density(vals, grid, t, eps2, 0.5), _restricted_em_density(v2, grid, t, eps2, 0.5))
                assert _hockey(p, q, eps2) <= delta / 4 and _hockey(q, p, eps2) <= delta / 4
                pr, qr = (_restricted_em_density(vals, grid, t, eps2, 1.0), _restricted_em_density(v2, grid, t, eps2, 1.0))
                worst_ref = max(worst_ref, _hockey(pr, qr, eps2), _hockey(qr, pr, eps2))
                checked += 1
    assert checked >= 50
    assert worst_ref > delta  # the check has teeth: exp(eps2 depth) is not (eps2, delta)


# --------------------------------------------------------------------------
# BHS
# --------------------------------------------------------------------------


def _rows(v: float) -> np.ndarray:
    """38 rows equal to 1 and two of magnitude sqrt(v) (d = 1, m = 40)."""
    return np.concatenate([np.ones(38), [math.sqrt(v), -math.sqrt(v)]])[:, None]


def test_bhs_leverage_interpolation_holds_at_the_size_check():
    """m = 10 k lambda_0: removing a row may only shift membership by one level (lambda_l, not 2 lambda_l).

    With the pseudocode file's 2 lambda_l the two large rows (rescaled leverage 3.97 <= 4 = 2 lambda_0)
    are kept in Y, and after one of them is replaced by an outlier the other (4.40 > 2 lambda_1 = 4.21)
    leaves S_1(Y'): |S_1(Y')| = 38 < |S_0(Y)| - 1.
    """
    k, lam0 = 2, 2.0  # m = 40 = 10 k lambda_0
    rng = np.random.default_rng(83)
    cases = [_rows(4.7), _rows(2.1)] + [rng.standard_t(3, size=(40, 1)) for _ in range(30)]
    cases += [rng.normal(size=(40, 2)) * [1, 3] for _ in range(10)]
    for Y in cases:
        m, d = Y.shape
        lam = 2.0 if d == 1 else 4.0  # keep m = 10 k lambda_0
        sizes = stable_covariance(Y, lam, k)[2]
        for i in (0, m - 2, m - 1):
            for row in (1e4, 0.0, 1.0, -3.0):
                Y2 = Y.copy()
                Y2[i] = row
                sizes2 = stable_covariance(Y2, lam, k)[2]
                for ell in range(2 * k):
                    assert sizes2[ell + 1] >= sizes[ell] - 1, (ell, sizes, sizes2)
                    assert sizes[ell + 1] >= sizes2[ell] - 1, (ell, sizes, sizes2)
    # the rows of rescaled leverage 3.97 lie above lambda_0 = 2: they are removed at every level l <= 2k
    assert stable_covariance(_rows(4.7), lam0, k)[2].tolist() == [38] * (2 * k + 1)


def test_bhs_covariance_score_moves_by_two_on_neighbours():
    """Replace-one sensitivity of the score is 2 (attained), so the test's Laplace noise is calibrated to 2."""
    k, lam0 = 2, 2.0
    Y = _rows(2.1)  # rescaled leverage 1.99 <= lambda_0: everything kept, score 0
    Y2 = Y.copy()
    Y2[38] = 1e4  # the outlier leaves; the other large row now has leverage 2.09 in (lambda_0, lambda_1]
    s, s2 = stable_covariance(Y, lam0, k)[1], stable_covariance(Y2, lam0, k)[1]
    assert (s, s2) == (0, 2)


def _facts(X: np.ndarray) -> PublicFacts:
    n, d = X.shape
    return PublicFacts("sim", "sim", "mean", n, d, tuple(f"x{j}" for j in range(d)), bounds={})


def test_bhs_ptr_laplace_scale_and_threshold_cover_sensitivity_two():
    """The algorithm draws Laplace(6/eps) and applies T = k - 3 - 6 log(3/delta)/eps; the PASS bit is
    eps/3-DP for scores two apart and a score >= k - 3 passes with probability <= delta/6."""
    rng = np.random.default_rng(84)
    for eps in (3.0, 10.0):
        k = bhs_k(eps, DELTA)
        X = rng.normal(size=(60000, 2))
        r = RecordingGenerator(5)
        out = get("mean", "bhs_affine")().run(TaskData(X), _facts(X), eps, DELTA, r)
        (lap,) = r.of("laplace")
        b = lap.scale
        T = out.details["ptr_threshold"]
        assert b == 2 / (eps / 3)
        assert T == (k - 3) - 2 * math.log(1 / (2 * DELTA / 6)) / (eps / 3)

        def p_pass(z):
            x = T - z
            return 1 - 0.5 * math.exp(-x / b) if x >= 0 else 0.5 * math.exp(x / b)

        for z in range(0, k + 1):
            for w in (z - 2, z - 1, z + 1, z + 2):
                if 0 <= w <= k:
                    assert p_pass(z) <= math.exp(eps / 3) * p_pass(w) * (1 + 1e-9)
                    assert 1 - p_pass(z) <= math.exp(eps / 3) * (1 - p_pass(w)) * (1 + 1e-9)
        assert p_pass(k - 3) <= DELTA / 6 * (1 + 1e-9)
        # a sensitivity-1 calibration (scale 3/eps) fails the ratio for scores two apart
        b1 = 1 / (eps / 3)
        assert math.exp(2 / b1) > math.exp(eps / 3) * 1.01


def test_bhs_declines_when_half_n_is_below_10_k_lambda0():
    """n >= 20 k lambda_0 but floor(n/2) < 10 k lambda_0: the leverage interpolation is not covered."""
    eps = 10.0
    k = bhs_k(eps, DELTA)
    lam0 = (1000 + 0.25) / (10 * k)  # 10 k lambda_0 = 1000.25, 20 k lambda_0 = 2000.5
    X = np.random.default_rng(85).normal(size=(2001, 2))
    out = get("mean", "bhs_affine")(lambda0=lam0).run(TaskData(X), _facts(X), eps, DELTA, np.random.default_rng(0))
    assert isinstance(out, Decline) and out.epsilon == 0 and out.ledger == ()
    X2 = np.random.default_rng(85).normal(size=(2002, 2))
    out2 = get("mean", "bhs_affine")(lambda0=lam0).run(TaskData(X2), _facts(X2), eps, DELTA, np.random.default_rng(0))
    assert out2.epsilon == eps  # 1001 >= 1000.25: it runs (and spends)
