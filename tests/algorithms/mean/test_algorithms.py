"""Behaviour of the mean-estimation roster: calibration, determinism, accuracy, declines, warnings, real data."""

from __future__ import annotations

import math
import warnings
from dataclasses import replace

import numpy as np
import pytest

from dpstats.algorithms import get, list_algorithms
from dpstats.algorithms.base import Decline, Release, TaskData
from dpstats.algorithms.mean.bhs_affine import bhs_k, default_lambda0, stable_covariance, stable_mean
from dpstats.algorithms.mean.coinpress import coinpress_schedule
from dpstats.algorithms.mean._utils import gaussian_tailbound
from dpstats.data.instance import PublicFacts
from dpstats.bench.metrics import mahalanobis_error
from dpstats.privacy.accounting import PrivacyLeakWarning, gdp_mu, zcdp_epsilon, zcdp_rho

DELTA = 1e-6
STANDARD = ["adaptive_clip", "adaptive_whiten", "bhs_affine", "coinpress", "coinpress_scaled", "kv_clip"]
ALL = STANDARD + ["clip_data_bounds"]


def facts_for(X: np.ndarray, bounds: dict | None = None, names: tuple | None = None) -> PublicFacts:
    n, d = X.shape
    cols = names or tuple(f"x{j}" for j in range(d))
    return PublicFacts("sim", "sim", "mean", n, d, cols, bounds=bounds or {})


def simulate(n: int, rng: np.random.Generator) -> tuple[np.ndarray, PublicFacts]:
    """Economics-like columns: a bounded dummy, a score, a skewed income, an integer count."""
    dummy = (rng.random(n) < 0.3).astype(float)
    score = rng.normal(900, 70, n) + 20 * dummy
    income = np.exp(rng.normal(9.5, 0.6, n))
    count = rng.poisson(2.0, n).astype(float)
    X = np.column_stack([dummy, score, income, count])
    return X, facts_for(X, {"x0": (0.0, 1.0)})


def ratio_to_baseline(est: np.ndarray, X: np.ndarray) -> float:
    S = np.atleast_2d(np.cov(X, rowvar=False))
    n, d = X.shape
    return mahalanobis_error(est - X.mean(axis=0), S) / math.sqrt(d / n)


def run(name, X, facts, eps, seed, **params):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        return get("mean", name)(**params).run(TaskData(X), facts, eps, DELTA, np.random.default_rng(seed))


def test_roster_registered_with_metadata():
    names = {c.name: c for c in list_algorithms("mean")}
    for name in ALL:
        cls = names[name]
        assert cls.task == "mean" and cls.citation and cls.summary
        for p in cls.defaults.values():
            assert p.source
    assert names["clip_data_bounds"].interpretation == "data-bounds"
    assert all(names[n].interpretation == "standard" for n in STANDARD)


# --------------------------------------------------------------------------
# ledger: exactly the budget, converted back to (epsilon, delta)
# --------------------------------------------------------------------------


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("eps", [0.3, 3.0])
def test_ledger_spends_exactly_the_budget(name, eps):
    rng = np.random.default_rng(11)
    X, f = simulate(3000, rng)
    out = run(name, X, f, eps, 0)
    if name == "bhs_affine":
        assert isinstance(out, Decline) and out.ledger == ()  # n far below 20 k lambda_0: nothing spent
        return
    assert isinstance(out, Release)
    units = {e[2] for e in out.ledger}
    total = sum(e[1] for e in out.ledger)
    assert len(units) == 1
    unit = units.pop()
    if unit == "rho":
        assert total == pytest.approx(zcdp_rho(eps, DELTA), rel=1e-9)
        assert zcdp_epsilon(total, DELTA) == pytest.approx(eps, rel=1e-6)
    else:
        assert unit == "mu^2" and total == pytest.approx(gdp_mu(eps, DELTA) ** 2, rel=1e-9)
    assert (out.epsilon, out.delta) == (eps, DELTA)


def test_bhs_ledger_when_it_runs():
    rng = np.random.default_rng(12)
    X = rng.normal(size=(20000, 2))
    out = run("bhs_affine", X, facts_for(X), 10.0, 0)
    assert out.ledger[0][1:3] == (10.0, "epsilon")
    assert isinstance(out, Release) and out.epsilon == 10.0 and out.delta == DELTA


# --------------------------------------------------------------------------
# noise scale implied by the budget (empirical, where the noise is the only randomness)
# --------------------------------------------------------------------------


def _spread(name, X, f, eps, reps=1500, **params):
    ests = np.array([run(name, X, f, eps, s, **params).estimate for s in range(reps)])
    return ests.mean(axis=0), ests.std(axis=0, ddof=1)


def test_box_noise_scale_all_bounded():
    """With every column bounded, adaptive_clip/whiten release the box mean with sigma = 2 sqrt(d) / (n sqrt(2 rho))."""
    rng = np.random.default_rng(13)
    n, eps = 500, 1.0
    X = np.column_stack([(rng.random(n) < 0.2).astype(float), rng.uniform(0, 10, n)])
    f = facts_for(X, {"x0": (0.0, 1.0), "x1": (-5.0, 15.0)})
    sigma_z = 2 * math.sqrt(2) / (n * math.sqrt(2 * zcdp_rho(eps, DELTA)))
    half = np.array([0.5, 10.0])
    for name in ("adaptive_clip", "adaptive_whiten"):
        mean, sd = _spread(name, X, f, eps, reps=1200)
        assert np.allclose(sd, sigma_z * half, rtol=0.07)
        assert np.allclose(mean, X.mean(axis=0), atol=4 * sigma_z * half.max() / math.sqrt(1200))


def test_clip_data_bounds_noise_scale():
    rng = np.random.default_rng(14)
    X = rng.normal(size=(300, 3)) * [1, 5, 20]
    mean, sd = _spread("clip_data_bounds", X, facts_for(X), 1.0, reps=1200)
    sigma = np.linalg.norm(X.max(0) - X.min(0)) / (300 * gdp_mu(1.0, DELTA))
    assert np.allclose(sd, sigma, rtol=0.07)


def test_coinpress_single_step_noise_scale():
    """t = 1, data inside the prior ball: mean + N(0, sigma^2), sigma = 2 C / (n sqrt(2 rho)), C = min(sqrt(r^2+6r+g^2), r+g)."""
    rng = np.random.default_rng(15)
    n, d, eps = 400, 2, 1.0
    X = rng.uniform(-1, 1, size=(n, d))
    f = facts_for(X, {"x0": (-1.0, 1.0), "x1": (-1.0, 1.0)})
    r, g = math.sqrt(2.0), gaussian_tailbound(d, 0.01)
    C = min(math.sqrt(r * r + 6 * r + g * g), r + g)
    sigma = 2 * C / (n * math.sqrt(2 * zcdp_rho(eps, DELTA)))
    mean, sd = _spread("coinpress", X, f, eps, reps=1200, t=1)
    assert np.allclose(sd, sigma, rtol=0.07)
    assert np.allclose(mean, X.mean(axis=0), atol=4 * sigma / math.sqrt(1200))


def test_coinpress_schedule_matches_reference():
    assert coinpress_schedule(2).tolist() == [0.25, 0.75]
    assert np.allclose(coinpress_schedule(4), [1 / 12, 1 / 12, 1 / 12, 0.75])
    assert np.allclose(coinpress_schedule(10), [1 / 36] * 9 + [0.75])


def test_kv_final_noise_matches_released_box():
    rng = np.random.default_rng(16)
    X = rng.normal(50, 5, size=(2000, 2))
    out = run("kv_clip", X, facts_for(X), 1.0, 3)
    a, b = out.details["lower"], out.details["upper"]
    assert np.all(a <= X.mean(0)) and np.all(X.mean(0) <= b)
    entry = [e for e in out.ledger if e[0] == "clipped mean"][0]
    sens = np.linalg.norm(b - a) / 2000
    rho_mean = zcdp_rho(1.0, DELTA) * 0.5
    assert entry[1] == pytest.approx(rho_mean, rel=1e-9)
    # the implied sigma: sens / sqrt(2 rho_mean); the ledger cost is sens^2 / (2 sigma^2)
    assert sens / math.sqrt(2 * rho_mean) > 0


# --------------------------------------------------------------------------
# BHS: scores, propose-test-release, fast sets equal the pseudocode's
# --------------------------------------------------------------------------


def test_bhs_ptr_test_is_private_and_fails_unstable_data():
    """PASS iff z + Lap(6/eps) < T: the bit is eps/3-DP for a sensitivity-2 score and passes w.p. <= delta/6 at z >= k - 3."""
    for eps in (1.0, 3.0, 10.0):
        k = bhs_k(eps, DELTA)
        et, dt = eps / 6, DELTA / 6  # et = eps/3 per unit of sensitivity 2
        T = (k - 3) - math.log(1 / (2 * dt)) / et

        def p_pass(z):  # P(z + Lap(1/et) < T)
            x = T - z
            return 1 - 0.5 * math.exp(-et * x) if x >= 0 else 0.5 * math.exp(et * x)

        def p_fail(z):
            x = T - z
            return 0.5 * math.exp(-et * x) if x >= 0 else 1 - 0.5 * math.exp(et * x)

        tol = 1 + 1e-9
        for z in range(0, k + 1):
            for w in (z - 2, z - 1, z + 1, z + 2):
                if 0 <= w <= k:
                    assert p_pass(z) <= math.exp(2 * et) * p_pass(w) * tol
                    assert p_fail(z) <= math.exp(2 * et) * p_fail(w) * tol
        assert p_pass(k - 3) <= dt * (1 + 1e-9)
        assert p_pass(0) > 0.75


def test_bhs_scores_move_by_at_most_two_on_neighbours():
    rng = np.random.default_rng(17)
    k, lam0 = 3, 6.0
    X = rng.normal(size=(40, 2))
    R = np.arange(12)
    m = 20
    Y = (X[:m] - X[m:]) / math.sqrt(2)
    S, s1, _ = stable_covariance(Y, lam0, k)
    _, s2, _ = stable_mean(X, S, lam0, k, R)
    for i in (0, 13, 25, 39):
        for row in ([30.0, -30.0], [0.0, 0.0], [3.0, 3.0]):
            X2 = X.copy()
            X2[i] = row
            Y2 = (X2[:m] - X2[m:]) / math.sqrt(2)
            S2, t1, _ = stable_covariance(Y2, lam0, k)
            assert abs(t1 - s1) <= 2  # 2 is attained: test_constants_tukey_bhs.py
            _, t2, _ = stable_mean(X2, S, lam0, k, R)  # same covariance: the mean score alone
            assert abs(t2 - s2) <= 2


def test_bhs_fast_sets_equal_pseudocode():
    """The nested-set computations equal a literal loop over levels (LargestGoodSubset, LargestCore)."""
    rng = np.random.default_rng(18)
    k, lam0 = 4, 5.0
    X = rng.standard_t(3, size=(120, 2))
    Y = (X[:60] - X[60:]) / math.sqrt(2)
    S, score, sizes = stable_covariance(Y, lam0, k)
    for ell in range(2 * k + 1):
        lam = lam0 / (1 - ell / (10 * k))
        active = np.arange(60)
        while active.size >= 2:
            G = Y[active].T @ Y[active]
            lev = 60 * np.einsum("ij,jk,ik->i", Y[active], np.linalg.inv(G), Y[active])
            if np.all(lev <= lam):
                break
            active = active[lev <= lam]
        if active.size < 2:  # rank deficient (d = 2): the empty set
            active = active[:0]
        assert sizes[ell] == active.size
    R = rng.choice(120, 30, replace=False)
    mu, s2, levels = stable_mean(X, S, lam0, k, R)
    Sinv = np.linalg.inv(S)
    gamma = (50 / 9) * lam0 / 120
    for ell in range(2 * k + 1):
        Lam = lam0 * (1 - gamma) ** (-ell)
        D = np.einsum("irk,kl,irl->ir", X[:, None] - X[R][None], Sinv, X[:, None] - X[R][None])
        inside = np.sum(D <= Lam, axis=1) >= len(R) - ell
        assert np.array_equal(inside, levels <= ell)


def test_bhs_declines_small_n_without_spending():
    rng = np.random.default_rng(19)
    X = rng.normal(size=(5000, 3))
    out = run("bhs_affine", X, facts_for(X), 1.0, 0)
    assert isinstance(out, Decline) and "20 k lambda_0" in out.reason
    assert out.epsilon == 0 and out.ledger == ()
    lam = default_lambda0(5000, 3)
    assert out.details["lambda0"] == pytest.approx(lam)


def test_bhs_declines_when_stability_test_fails():
    """A data set whose points are far apart in every direction fails the stability test (budget spent)."""
    rng = np.random.default_rng(20)
    X = rng.standard_cauchy(size=(20000, 2)) ** 3
    out = run("bhs_affine", X, facts_for(X), 10.0, 0)
    assert isinstance(out, Decline) and "propose-test-release" in out.reason
    assert out.epsilon == 10.0 and out.delta == DELTA


# --------------------------------------------------------------------------
# determinism, accuracy, warnings
# --------------------------------------------------------------------------


@pytest.mark.parametrize("name", [n for n in ALL if n != "bhs_affine"])
def test_determinism_by_seed(name):
    rng = np.random.default_rng(21)
    X, f = simulate(800, rng)
    a = run(name, X, f, 1.0, 5).estimate
    b = run(name, X, f, 1.0, 5).estimate
    c = run(name, X, f, 1.0, 6).estimate
    assert np.array_equal(a, b) and not np.array_equal(a, c)


def test_bhs_determinism_by_seed():
    rng = np.random.default_rng(22)
    X = rng.normal(size=(20000, 2))
    a, b = run("bhs_affine", X, facts_for(X), 10.0, 1), run("bhs_affine", X, facts_for(X), 10.0, 1)
    assert np.array_equal(a.estimate, b.estimate)


def _median_ratio(name, X, f, eps, seeds=range(9), **params):
    return float(np.median([ratio_to_baseline(run(name, X, f, eps, s, **params).estimate, X) for s in seeds]))


@pytest.mark.parametrize("name", ["adaptive_clip", "adaptive_whiten", "coinpress_scaled", "kv_clip", "clip_data_bounds"])
def test_error_shrinks_with_epsilon_and_n(name):
    rng = np.random.default_rng(23)
    X, f = simulate(2000, rng)
    Xbig, fbig = simulate(20000, rng)
    r_small_eps = _median_ratio(name, X, f, 0.5)
    r_big_eps = _median_ratio(name, X, f, 10.0)
    r_big_n = _median_ratio(name, Xbig, fbig, 0.5)
    assert r_big_eps < r_small_eps / 2
    # the error ratio is relative to the sampling error, so it falls like 1/sqrt(n) for a fixed clip
    assert r_big_n < r_small_eps / 1.5


def test_coinpress_error_shrinks_on_its_model():
    """CoinPress assumes identity covariance: there its error falls with epsilon and n."""
    rng = np.random.default_rng(24)
    X = rng.normal(3.0, 1.0, size=(2000, 3))
    Xbig = rng.normal(3.0, 1.0, size=(20000, 3))
    small = _median_ratio("coinpress", X, facts_for(X), 0.5)
    assert _median_ratio("coinpress", X, facts_for(X), 10.0) < small / 2
    assert _median_ratio("coinpress", Xbig, facts_for(Xbig), 0.5) < small / 1.5


def test_bhs_error_shrinks_with_epsilon_and_n():
    rng = np.random.default_rng(25)
    X = rng.normal(size=(24000, 2)) @ np.array([[3.0, 0.0], [2.9, 0.5]])  # strongly correlated
    X2 = rng.normal(size=(60000, 2)) @ np.array([[3.0, 0.0], [2.9, 0.5]])
    r10 = _median_ratio("bhs_affine", X, facts_for(X), 10.0, seeds=range(2))
    r3 = _median_ratio("bhs_affine", X2, facts_for(X2), 3.0, seeds=range(2))
    r10_big = _median_ratio("bhs_affine", X2, facts_for(X2), 10.0, seeds=range(2))
    assert r10 < 2.0 and r10_big < r3  # affine invariant: correlation does not hurt
    assert r10_big < r10


def test_adaptive_whiten_helps_on_correlated_columns():
    """Near-collinear columns (as state aggregates): the whitened ball beats the box."""
    rng = np.random.default_rng(26)
    common = rng.normal(0, 1, 5000)
    X = np.column_stack([100 + 20 * common, 40 + 8 * common + 0.8 * rng.normal(0, 1, 5000)])  # correlation 0.995
    f = facts_for(X)
    assert _median_ratio("adaptive_whiten", X, f, 3.0) < 0.7 * _median_ratio("adaptive_clip", X, f, 3.0)


def test_rare_dummy_is_not_clipped_away():
    """A 2% dummy with public bounds keeps its ones (the bounds are used, not a private scale of 0)."""
    rng = np.random.default_rng(27)
    n = 4000
    X = np.column_stack([(rng.random(n) < 0.02).astype(float), rng.normal(10, 2, n)])
    f = facts_for(X, {"x0": (0.0, 1.0)})
    for name in ("adaptive_clip", "adaptive_whiten"):
        ests = np.array([run(name, X, f, 10.0, s).estimate[0] for s in range(9)])
        assert abs(np.median(ests) - X[:, 0].mean()) < 0.005


def test_warnings_only_for_non_standard():
    rng = np.random.default_rng(28)
    X, f = simulate(500, rng)
    with pytest.warns(PrivacyLeakWarning):
        get("mean", "clip_data_bounds")().run(TaskData(X), f, 1.0, DELTA, np.random.default_rng(0))
    for name in STANDARD:
        with warnings.catch_warnings():
            warnings.simplefilter("error", PrivacyLeakWarning)
            get("mean", name)().run(TaskData(X), f, 1.0, DELTA, np.random.default_rng(0))


def test_unknown_hyperparameter_rejected():
    with pytest.raises(TypeError, match="unknown hyperparameter"):
        get("mean", "adaptive_whiten")(nope=1)


# --------------------------------------------------------------------------
# real data
# --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mroz(public_corpus):
    from dpstats.ols.baseline import compute_baseline

    inst = public_corpus.instance("mean_mroz87_lwage")
    return inst, compute_baseline(inst)


@pytest.mark.parametrize("name", ALL)
def test_runs_on_corpus_instance(name, mroz):
    from dpstats.bench.metrics import ratio

    inst, base = mroz
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        out = get("mean", name)().run(inst.task_data(), inst.facts, 3.0, DELTA, np.random.default_rng(0))
    if name == "bhs_affine":
        assert isinstance(out, Decline)  # n = 428 is far below 20 k lambda_0
        return
    assert out.estimate.shape == (inst.d,) and np.all(np.isfinite(out.estimate))
    r = ratio(out.estimate, base)
    if name in ("adaptive_clip", "adaptive_whiten"):
        assert r < 5.0  # a few sampling errors at epsilon = 3 on n = 428
    assert math.isfinite(r)


def test_adaptive_whiten_on_a_large_corpus_instance(public_corpus):
    from dpstats.ols.baseline import compute_baseline
    from dpstats.bench.metrics import ratio

    inst = public_corpus.instance("mean_lmb04_fullpoly")
    base = compute_baseline(inst)
    rs = [ratio(run("adaptive_whiten", inst.task_data().X, inst.facts, 1.0, s).estimate, base) for s in range(5)]
    assert np.median(rs) < 1.0


# --------------------------------------------------------------------------
# review: details hold nothing unpaid for; every final noise scale is pinned
# --------------------------------------------------------------------------


def test_bhs_details_hold_no_raw_stability_scores():
    """The scores s1, s2 are read from the data without noise (only the Laplace test is private): no release or decline reports them."""
    rng = np.random.default_rng(40)
    X = rng.normal(size=(20000, 2))
    Xbad = rng.standard_cauchy(size=(20000, 2)) ** 3
    ok, bad = run("bhs_affine", X, facts_for(X), 10.0, 0), run("bhs_affine", Xbad, facts_for(Xbad), 10.0, 0)
    assert isinstance(ok, Release) and isinstance(bad, Decline)
    for out in (ok, bad):
        assert set(out.details) <= {"k", "lambda0", "ptr_threshold"}, sorted(out.details)


@pytest.mark.parametrize("name", ["coinpress", "coinpress_scaled"])
def test_coinpress_trace_holds_no_clip_counts(name):
    """The number of rows outside a clipping ball is a count of the data that no mechanism paid for."""
    rng = np.random.default_rng(41)
    X, f = simulate(500, rng)
    for step in run(name, X, f, 1.0, 0).details["trace"]:
        assert set(step) <= {"radius", "clip", "sigma"}, sorted(step)


def test_kv_final_noise_scale_given_released_box():
    """est - (mean clipped to the released box) is N(0, sigma^2 I), sigma = ||b - a|| / (n sqrt(2 rho (1 - range_share)))."""
    rng = np.random.default_rng(42)
    n, eps = 1000, 1.0
    X = rng.normal(50, 5, size=(n, 2)) * [1.0, 30.0]
    f = facts_for(X)
    rho_mean = 0.5 * zcdp_rho(eps, DELTA)
    z = []
    for s in range(600):
        out = run("kv_clip", X, f, eps, s)
        a, b = out.details["lower"], out.details["upper"]
        sigma = np.linalg.norm(b - a) / (n * math.sqrt(2 * rho_mean))
        z.append((out.estimate - np.clip(X, a, b).mean(axis=0)) / sigma)
    z = np.concatenate(z)
    assert np.std(z, ddof=1) == pytest.approx(1.0, rel=0.06)
    assert abs(z.mean()) < 4 / math.sqrt(z.size)


def test_adaptive_whiten_covariance_and_ball_noise_scales(monkeypatch):
    """On the ball path: sigma_M = sqrt(2)(C^2+1)/(n sqrt(2 cov_share rho)) and sigma = 2R/(n sqrt(2 rho_final)), R the radius used."""
    from dpstats.algorithms.mean import adaptive as A

    seen = {"sigma": [], "tail": [], "ball": []}
    noise, tail, ball = A.ZCDPAccountant.gaussian, A.tail_scale, A.ball_mean

    def rec_noise(self, mechanism, value, **kwargs):  # the charging call that draws the Gaussian noise
        seen["sigma"].append(kwargs["sigma"])
        return noise(self, mechanism, value, **kwargs)

    def rec_tail(*args, **kwargs):
        seen["tail"].append(tail(*args, **kwargs))
        return seen["tail"][-1]

    def rec_ball(Z, c, r):
        seen["ball"].append(r)
        return ball(Z, c, r)

    monkeypatch.setattr(A.ZCDPAccountant, "gaussian", rec_noise)
    monkeypatch.setattr(A, "tail_scale", rec_tail)
    monkeypatch.setattr(A, "ball_mean", rec_ball)
    rng = np.random.default_rng(43)
    n, d, eps = 5000, 2, 3.0
    common = rng.normal(0, 1, n)
    X = np.column_stack([100 + 20 * common, 40 + 8 * common + 0.8 * rng.normal(0, 1, n)])
    out = run("adaptive_whiten", X, facts_for(X), eps, 0)
    assert out.details["final"] == "ball"
    p = {k: v.value for k, v in A.AdaptiveWhiten.defaults.items()}
    rho = zcdp_rho(eps, DELTA)
    # tail draws: lower and upper scale of each column, then C, then R
    assert len(seen["tail"]) == 2 * d + 2 and len(seen["sigma"]) == 2
    C = max(seen["tail"][2 * d], math.sqrt(d) * 1e-3)
    sig_m = math.sqrt(2) * (C * C + 1) / n / math.sqrt(2 * p["cov_share"] * rho)
    assert seen["sigma"][0] == pytest.approx(sig_m, rel=1e-9)
    R = out.details["radius"]
    assert seen["ball"] == [R]
    rho_final = rho * (1 - p["range_share"] - p["cov_share"] - p["radius_share"])
    assert seen["sigma"][1] == pytest.approx(2 * R / n / math.sqrt(2 * rho_final), rel=1e-9)


def _bhs_with_scores(monkeypatch, score, Sigma, mu):
    from dpstats.algorithms.mean import bhs_affine as B

    monkeypatch.setattr(B, "stable_covariance", lambda Y, lam, k: (Sigma, score, None))
    monkeypatch.setattr(B, "stable_mean", lambda X, S, lam, k, R: (mu, score, None))


def test_bhs_noise_is_c2_sigma(monkeypatch):
    """Given (mu, Sigma) and a passing score, the release is mu + N(0, c2 Sigma), c2 = 810 lambda_0 log(12/delta) / (eps n)^2."""
    Sigma, mu = np.array([[2.0, 0.6], [0.6, 0.5]]), np.array([1.0, -2.0])
    _bhs_with_scores(monkeypatch, 0, Sigma, mu)
    n, eps, lam0 = 2000, 10.0, 1.0
    X = np.zeros((n, 2))
    c2 = 810 * lam0 * math.log(12 / DELTA) / (eps * n) ** 2
    outs = [run("bhs_affine", X, facts_for(X), eps, s, lambda0=lam0) for s in range(1600)]
    est = np.array([o.estimate for o in outs if o.released])  # score 0 passes w.p. 0.98
    w = (est - mu) @ np.linalg.inv(np.linalg.cholesky(Sigma)).T / math.sqrt(c2)
    assert np.allclose(w.std(axis=0, ddof=1), 1.0, rtol=0.07)
    assert abs(np.corrcoef(w, rowvar=False)[0, 1]) < 0.1


def test_bhs_test_passes_with_the_laplace_probabilities(monkeypatch):
    """P(PASS | z) = P(z + Lap(6/eps) < T), T = k - 3 - 6 log(3/delta)/eps (score sensitivity 2); k - 3 never passes in practice."""
    n, eps, lam0 = 2000, 10.0, 1.0
    X = np.zeros((n, 2))
    k = bhs_k(eps, DELTA)
    T = (k - 3) - 6 * math.log(3 / DELTA) / eps
    b = 6 / eps
    for z in (math.floor(T), math.floor(T) + 1, k - 3):
        _bhs_with_scores(monkeypatch, z, np.eye(2), np.zeros(2))
        passed = np.mean([run("bhs_affine", X, facts_for(X), eps, s, lambda0=lam0).released for s in range(2000)])
        x = T - z
        p = 1 - 0.5 * math.exp(-x / b) if x >= 0 else 0.5 * math.exp(x / b)
        assert abs(passed - p) < 4 * math.sqrt(p * (1 - p) / 2000) + 1e-12, (z, passed, p)


# --------------------------------------------------------------------------
# adaptive_whiten's point guard (post-processing: docs/algorithms/mean/adaptive_whiten.md)
# --------------------------------------------------------------------------


def _corpus_runs(public_corpus, iid, eps, seeds, **params):
    from dpstats.bench.metrics import ratio
    from dpstats.ols.baseline import compute_baseline

    inst = public_corpus.instance(iid)
    base = compute_baseline(inst)
    outs = [run("adaptive_whiten", inst.task_data().X, inst.facts, eps, s, **params) for s in seeds]
    return outs, [ratio(o.estimate, base) for o in outs]


def test_point_guard_fires_on_the_48_states(public_corpus):
    """cd09_mlda (n = 48, no bounds) at eps 1: n eps_0 = 4.3 < 16, every column is its prior centre, the interval infinite."""
    from dpstats.algorithms.mean.adaptive import AdaptiveWhiten

    outs, rs = _corpus_runs(public_corpus, "mean_cd09_mlda", 1.0, range(4))
    _, raw = _corpus_runs(public_corpus, "mean_cd09_mlda", 1.0, range(4), guard=False)
    for o in outs:
        assert o.details["guard"].all() and np.array_equal(o.estimate, np.zeros(4))
    assert max(rs) < 110 and min(raw) > 1000  # bounded (the prior centre's error) instead of 1e3 to 1e6
    for o in _corpus_runs(public_corpus, "mean_cd09_mlda", 1.0, range(2), **AdaptiveWhiten.interval_params)[0]:
        assert o.details["guard"].all() and np.all(np.isinf(o.std_error))
    # ledger untouched: the guard is post-processing
    assert [e[:2] for e in outs[0].ledger] == [e[:2] for e in run("adaptive_whiten", *_cd09(public_corpus), 1.0, 0,
                                                                     guard=False).ledger]


def _cd09(public_corpus):
    inst = public_corpus.instance("mean_cd09_mlda")
    return inst.task_data().X, inst.facts


def test_point_guard_edge_rule_on_grunfeld(public_corpus):
    """Grunfeld (n = 200) at eps 1, seed 7: the first column's range was drawn at 46466 +- 66 for data near 146; the
    release is pinned at its lower end (facing 0), so it becomes 0; the other columns keep their releases."""
    from dpstats.algorithms.mean.adaptive import AdaptiveWhiten

    (o,), (r,) = _corpus_runs(public_corpus, "mean_grunfeld_fe", 1.0, [7])
    (o0,), (r0,) = _corpus_runs(public_corpus, "mean_grunfeld_fe", 1.0, [7], guard=False)
    assert o.details["guard"].tolist() == [True, False, False]
    assert o.estimate[0] == 0.0 and np.array_equal(o.estimate[1:], np.clip(o0.estimate[1:], *_box(o0)[:, 1:]))
    assert r < 20 and r0 > 1000
    # the interval release draws other noise (its budget split differs): at seed 19 the rule fires there too
    (oi,), _ = _corpus_runs(public_corpus, "mean_grunfeld_fe", 1.0, [19], **AdaptiveWhiten.interval_params)
    assert oi.details["guard"][0] and np.isinf(oi.std_error[0])


def _box(out):
    c, h = np.asarray(out.details["center"]), np.asarray(out.details["half"])
    return np.array([c - h, c + h])


def test_point_guard_quiet_on_a_large_easy_instance(public_corpus):
    """lmb04_fullpoly (n = 13588) at eps 1: the guard never fires and the release is bit-identical without it."""
    from dpstats.algorithms.mean.adaptive import AdaptiveWhiten

    for params in ({}, AdaptiveWhiten.interval_params):
        outs, _ = _corpus_runs(public_corpus, "mean_lmb04_fullpoly", 1.0, range(4), **params)
        raws, _ = _corpus_runs(public_corpus, "mean_lmb04_fullpoly", 1.0, range(4), guard=False, **params)
        for o, r in zip(outs, raws):
            assert not o.details["guard"].any()
            assert np.array_equal(o.estimate, r.estimate)
            if params:
                assert np.array_equal(o.std_error, r.std_error)


def test_point_guard_min_is_a_public_threshold(public_corpus):
    """The hopeless rule reads n, the budget and the bounds only: cd09 at eps 10 (n eps_0 = 34) is not hopeless."""
    outs, _ = _corpus_runs(public_corpus, "mean_cd09_mlda", 10.0, range(4))
    assert not all(o.details["guard"].all() for o in outs)
    X, f = _cd09(public_corpus)
    rng = np.random.default_rng(3)
    for Y in (X[rng.permutation(48)] * 100.0, rng.normal(size=X.shape)):  # other data, same public facts
        assert run("adaptive_whiten", Y, f, 1.0, 0).details["guard"].all()


def test_point_guard_clamp_never_moves_away_from_the_clipped_mean():
    """Clamping to the released box is a projection onto a box that holds the clipped mean: no coordinate moves away."""
    from dpstats.algorithms.mean._guard import point_guard

    rng = np.random.default_rng(44)
    center, half = np.array([0.0, 10.0, 5.0]), np.array([1.0, 2.0, 0.0])
    prior, find = np.zeros(3), np.array([True, True, False])
    for _ in range(200):
        est = center + half * rng.normal(0, 2, 3)
        out = Release(estimate=est, epsilon=1.0, delta=DELTA, ledger=(), details={}, std_error=np.ones(3))
        g = point_guard(out, center, half, find, prior, hopeless=False, noise_z=np.full(3, 0.1))
        cm = center + half * rng.uniform(-1, 1, 3)  # any clipped mean: inside the box
        fired = g.details["guard"]
        assert np.all((np.abs(g.estimate - cm) <= np.abs(est - cm) + 1e-12) | fired)
        assert np.all(g.estimate[fired] == 0.0) and np.all(np.isinf(g.std_error[fired][1:]))
        # the second column's box [8, 12] lies beyond 2 half-widths of 0: pinned at 8 it fires, pinned at 12 not
        z1 = (min(max(est[1], 8.0), 12.0) - 10.0) / 2.0
        assert fired[1] == (z1 <= -0.9)
        # [-1, 1] holds the prior centre: only the null rule could fire, and it is for point releases only (a
        # release with an interval keeps its estimate); a public constant never fires
        assert not fired[0] and not fired[2]
        p = point_guard(replace(out, std_error=None), center, half, find, prior, hopeless=False,
                        noise_z=np.full(3, 0.1))
        # the point release: the null rule (within one noise sd, 0.05, of the prior centre)
        assert p.details["guard"][0] == (abs(np.clip(est[0], -1.0, 1.0)) < 0.05) and not p.details["guard"][2]
        assert np.array_equal(p.details["guard"][1:], fired[1:])


def test_point_guard_null_rule_on_graddy(public_corpus):
    """graddy97 (n = 386) at eps 1, seed 4: a range of 387704 +- 536871 for a column near 1.3, released at -9975 with a
    noise sd near 5e4; within one noise sd of the prior centre, the release is 0 (and its interval widened to hold the
    unguarded one)."""
    from dpstats.algorithms.mean.adaptive import AdaptiveWhiten

    (o,), (r,) = _corpus_runs(public_corpus, "mean_graddy97_discrim", 1.0, [4])
    (o0,), (r0,) = _corpus_runs(public_corpus, "mean_graddy97_discrim", 1.0, [4], guard=False)
    assert o.details["guard"].tolist() == [False, False, True, False, False] and o.estimate[2] == 0.0
    assert r < 30 and r0 > 1e4
    (oi,), _ = _corpus_runs(public_corpus, "mean_graddy97_discrim", 1.0, [4], **AdaptiveWhiten.interval_params)
    (oi0,), _ = _corpus_runs(public_corpus, "mean_graddy97_discrim", 1.0, [4], guard=False,
                             **AdaptiveWhiten.interval_params)
    j = 2
    if oi.details["guard"][j] and np.isfinite(oi.std_error[j]):
        lo, hi = oi.estimate[j] - oi.bias_bound[j], oi.estimate[j] + oi.bias_bound[j]
        assert lo <= min(oi0.estimate[j], 0.0) and hi >= max(oi0.estimate[j], 0.0)
