"""The sce roster: accounting, noise calibration, determinism, accuracy trends, declines, real data.

Sensitivities of the building blocks are checked by brute force in
``test_alg_sce_mechanisms.py``; here every algorithm is run end to end and its
ledger is checked against the budget and against the noise it actually added.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from dpstats.algorithms import Decline, Release, TaskData, get
from dpstats.algorithms.sce._score_sums import score_sums_sens2
from dpstats.algorithms.sce._utils import gram_sensitivity
from dpstats.data.instance import PublicFacts
from dpstats.privacy.accounting import PrivacyLeakWarning, zcdp_epsilon, zcdp_rho

STANDARD = ["sa_coef_median", "sa_coef_winsorized", "blb_coinpress", "fwl_blocks", "fwl_score", "noisystats_fwl", "theilsen_fwl"]
SIMPLE = ["noisystats", "theilsen_match", "theilsen_wide"]
DATA_BOUNDS = ["noisystats_databounds", "theilsen_databounds", "blb_coinpress_databounds"]
DELTA = 1e-6


def _facts(d: int, n: int, bounds=None, weighted=False) -> PublicFacts:
    cols = ("Intercept", "x", "z1", "z2", "z3")[:d]
    b = {"Intercept": (1.0, 1.0)}
    if d >= 4:
        b["z2"] = (0.0, 1.0)
    b.update(bounds or {})
    f = PublicFacts(
        instance="sim", study="sim", task="sce", n=n, d=d, columns=cols, outcome="y", coefficient="x",
        coef_index=1, bounds=b, dummies=(), intercept=True,
    )
    if weighted:
        object.__setattr__(f, "weighted", True)
    return f


def _sim(n: int, d: int, seed: int = 0, theta: float = 0.5):
    rng = np.random.default_rng(seed)
    z1 = rng.normal(2.0, 3.0, n)
    x = 0.6 * z1 + rng.normal(10.0, 2.0, n)
    cols = [np.ones(n), x, z1, rng.integers(0, 2, n).astype(float), rng.exponential(1.0, n)][:d]
    X = np.column_stack(cols)
    beta = np.array([1.0, theta, -0.3, 2.0, 0.7])[:d]
    y = X @ beta + rng.normal(0.0, 4.0, n)
    return TaskData(X, y), _facts(d, n)


def _ols(data: TaskData) -> tuple[float, float]:
    X, y = data.X, data.y
    beta, *_ = np.linalg.lstsq(X, y, rcond=None)
    res = y - X @ beta
    s2 = res @ res / (X.shape[0] - X.shape[1])
    se = math.sqrt(s2 * np.linalg.inv(X.T @ X)[1, 1])
    return float(beta[1]), se


@pytest.fixture(scope="module")
def sim4():
    return _sim(4000, 4)


@pytest.fixture(scope="module")
def sim2():
    return _sim(4000, 2)


def _run(name, data, facts, eps, seed=0, **params):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        return get("sce", name)(**params).run(data, facts, eps, DELTA, np.random.default_rng(seed))


# --------------------------------------------------------------------------
# registry and metadata
# --------------------------------------------------------------------------


@pytest.mark.parametrize("name", STANDARD + SIMPLE + DATA_BOUNDS)
def test_metadata(name):
    cls = get("sce", name)
    assert cls.task == "sce" and cls.citation and cls.summary
    assert cls.interpretation == ("data-bounds" if name in DATA_BOUNDS else "standard")
    for p in cls.defaults.values():
        assert isinstance(p.source, str) and p.source
    assert cls.iterative is False


# --------------------------------------------------------------------------
# accounting: the ledger spends exactly the budget and converts back to it
# --------------------------------------------------------------------------


def _check_ledger(out, eps):
    assert isinstance(out, Release)
    assert (out.epsilon, out.delta) == (eps, DELTA)
    units = {e.unit for e in out.ledger}
    assert len(units) == 1
    total = sum(e.cost for e in out.ledger)
    if units == {"rho"}:
        assert total == pytest.approx(zcdp_rho(eps, DELTA), rel=1e-9)
        assert zcdp_epsilon(total, DELTA) == pytest.approx(eps, rel=1e-6)
    else:
        assert units == {"epsilon"}
        assert total == pytest.approx(eps, rel=1e-9)


@pytest.mark.parametrize("eps", [0.3, 10.0])
@pytest.mark.parametrize("name", STANDARD)
def test_ledger_exhausts_budget(name, eps, sim4):
    data, facts = sim4
    _check_ledger(_run(name, data, facts, eps), eps)


@pytest.mark.parametrize("name", SIMPLE)
def test_ledger_exhausts_budget_simple(name, sim2):
    data, facts = sim2
    _check_ledger(_run(name, data, facts, 1.0), 1.0)
    # with public bounds on x and y no range is bought: the statistics get the whole epsilon
    f = _facts(2, data.n, bounds={"x": (-20.0, 50.0), "y": (-100.0, 100.0)})
    out = _run(name, data, f, 1.0)
    _check_ledger(out, 1.0)
    assert not any("range" in m for m, *_ in out.ledger)


def _entry(out, prefix):
    hits = [e.cost for e in out.ledger if e.mechanism.startswith(prefix)]
    assert len(hits) == 1, (prefix, out.ledger)
    return hits[0]


def test_fwl_score_noise_matches_ledger(sim4):
    data, facts = sim4
    out = _run("fwl_score", data, facts, 1.0)
    d = out.details
    assert _entry(out, "Gaussian Gram") == pytest.approx(gram_sensitivity(d["row_bound"]) ** 2 / (2 * d["sigma_gram"] ** 2))
    # S and T as one mechanism: half the joint worst case of the pair in units of their noise
    w_S, w_T = (d["C_u"] * d["C_v"] / d["sigma_S"]) ** 2, (d["C_u"] ** 2 / d["sigma_T"]) ** 2
    assert _entry(out, "Gaussian sums of clip(u) clip(v), clip(u)^2") == pytest.approx(score_sums_sens2(w_S, w_T) / 2)
    assert score_sums_sens2(w_S, w_T) < 4 * w_S + w_T  # below the sum of the separate worst cases


def test_fwl_blocks_noise_matches_ledger(sim4):
    data, facts = sim4
    out = _run("fwl_blocks", data, facts, 3.0)
    d = out.details
    assert d["laplace_R"] == pytest.approx(2 * d["C_R"] / _entry(out, "Laplace sum of clipped R_b"))
    assert d["laplace_D"] == pytest.approx(d["C_D"] / _entry(out, "Laplace sum of clipped D_b"))


def test_sa_winsorized_noise_matches_ledger(sim4):
    data, facts = sim4
    out = _run("sa_coef_winsorized", data, facts, 2.0)
    lo, hi = out.details["range"]
    assert out.details["laplace_scale"] == pytest.approx((hi - lo) / _entry(out, "Laplace winsorised sum"))


def test_noisystats_noise_matches_ledger(sim2):
    data, facts = sim2
    out = _run("noisystats", data, facts, 1.0)
    eps_stat = _entry(out, "Laplace nvar")
    assert out.details["laplace_scale"] == pytest.approx((1 - 1 / data.n) / eps_stat)
    assert _entry(out, "Laplace ncov") == pytest.approx(eps_stat)


def test_noisystats_fwl_noise_matches_ledger(sim4):
    data, facts = sim4
    out = _run("noisystats_fwl", data, facts, 1.0)
    cost = _entry(out, "Laplace nvar")  # an eps-DP Laplace mechanism costs eps^2/2 in zCDP
    assert out.details["laplace_scale"] == pytest.approx((1 - 1 / data.n) / math.sqrt(2 * cost))
    assert _entry(out, "Gaussian Gram") == pytest.approx(
        gram_sensitivity(out.details["row_bound"]) ** 2 / (2 * out.details["sigma_gram"] ** 2))


def test_noisystats_decline_records_spend():
    # x constant: nvar = 0, so the noisy variance is <= 0 about half of the time
    n = 200
    X = np.column_stack([np.ones(n), np.full(n, 0.5)])
    data = TaskData(X, np.random.default_rng(0).uniform(size=n))
    f = _facts(2, n, bounds={"x": (0.0, 1.0), "y": (0.0, 1.0)})
    outs = [_run("noisystats", data, f, 1.0, seed=s) for s in range(20)]
    declines = [o for o in outs if isinstance(o, Decline)]
    assert 0 < len(declines) < 20
    assert all(o.epsilon == pytest.approx(1.0) for o in declines)


# --------------------------------------------------------------------------
# determinism, accuracy trends
# --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def big3():
    return _sim(30000, 3, seed=3)


@pytest.mark.parametrize("name", STANDARD)
def test_error_shrinks_with_epsilon(name, big3):
    data, facts = big3
    theta, se = _ols(data)

    def med_err(eps):
        errs = [abs(_run(name, data, facts, eps, seed=s).estimate[0] - theta) / se for s in range(5)]
        return float(np.median(errs))

    lo, hi = med_err(0.3), med_err(10.0)
    assert hi < lo
    assert hi < 3.0  # at epsilon = 10 on 30000 rows every standard entry is within 3 standard errors


def test_fwl_score_error_shrinks_with_n():
    errs = {}
    for n in (1000, 40000):
        data, facts = _sim(n, 4, seed=11)
        theta, se = _ols(data)
        e = [abs(_run("fwl_score", data, facts, 1.0, seed=s).estimate[0] - theta) for s in range(5)]
        errs[n] = np.median(e)
    assert errs[40000] < errs[1000] / 3


@pytest.mark.parametrize("name", SIMPLE + ["noisystats_databounds", "theilsen_databounds"])
def test_simple_regression_recovers_slope(name):
    rng = np.random.default_rng(5)
    n = 4000
    x = rng.uniform(0, 10, n)
    y = 3.0 + 2.0 * x + rng.normal(0, 0.5, n)
    data = TaskData(np.column_stack([np.ones(n), x]), y)
    f = _facts(2, n, bounds={"x": (0.0, 10.0), "y": (-10.0, 40.0)})
    est = [_run(name, data, f, 10.0, seed=s).estimate[0] for s in range(3)]
    assert abs(np.median(est) - 2.0) < 0.1


# --------------------------------------------------------------------------
# declines and warnings
# --------------------------------------------------------------------------


@pytest.mark.parametrize("name", SIMPLE + ["noisystats_databounds", "theilsen_databounds"])
def test_simple_regression_declines_other_designs(name, sim4, sim2):
    data, facts = sim4
    out = _run(name, data, facts, 1.0)
    assert isinstance(out, Decline) and "d = 2" in out.reason
    assert out.epsilon == 0.0 and out.ledger == ()
    # a weighted design is not a simple regression either (the intercept column holds sqrt(weight))
    d2, f2 = sim2
    out = _run(name, d2, _facts(2, d2.n, weighted=True), 1.0)
    assert isinstance(out, Decline)


def test_blb_declines_without_two_subsets():
    data, facts = _sim(30, 4)
    out = _run("blb_coinpress", data, facts, 1.0)
    assert isinstance(out, Decline) and out.epsilon == 0.0


def test_blb_subset_estimates_match_one_draw_per_subset():
    """Batched resampling draws the numbers of one multinomial call per subset, in subset order."""
    from dpstats.algorithms.sce._utils import block_fwl
    from dpstats.algorithms.sce.blb_coinpress import blb_subset_estimates

    rng = np.random.default_rng(5)
    n, d, j, r = 467, 4, 1, 6
    X = np.column_stack([np.ones(n), rng.standard_normal((n, d - 1))])
    X[:, 3] = rng.integers(0, 2, n)
    y = X @ np.arange(1.0, d + 1.0) + rng.standard_normal(n)
    # subsets of five sizes, not in size order
    perm = rng.permutation(n)
    blocks = np.split(perm, [40, 80, 121, 161, 201, 240, 280, 321, 400])
    mean, var = blb_subset_estimates(X, y, j, blocks, r, np.random.default_rng(11))
    ref_rng = np.random.default_rng(11)
    est = np.full((r, len(blocks)), np.nan)
    for s in range(r):
        w = np.zeros(n)
        for idx in blocks:
            w[idx] = ref_rng.multinomial(n, np.full(idx.size, 1.0 / idx.size))
        bs = block_fwl(X, y, j, blocks, weights=w)
        est[s, bs.valid] = bs.N[bs.valid] / bs.D[bs.valid]
    assert np.isfinite(est).all()
    assert np.array_equal(mean, np.nanmean(est, axis=0)) and np.array_equal(var, np.nanvar(est, axis=0, ddof=1))


# --------------------------------------------------------------------------
# real corpus instances
# --------------------------------------------------------------------------


@pytest.mark.parametrize("name", STANDARD + SIMPLE)
def test_runs_on_real_instances(name, public_corpus):
    from dpstats.ols.baseline import compute_baseline
    from dpstats.bench.metrics import ratio

    for iid in ("mroz87_lwage", "bm04_call"):
        inst = public_corpus.instance(iid)
        out = _run(name, inst.task_data(), inst.facts, 10.0)
        if name in SIMPLE and inst.facts.d != 2:
            assert isinstance(out, Decline)
            continue
        assert isinstance(out, Release) and np.isfinite(out.estimate[0])
        _check_ledger(out, 10.0)
        if name == "fwl_score":
            # our main entry is within a few standard errors at epsilon = 10 on these
            assert ratio(out.estimate, compute_baseline(inst)) < 5.0


def test_clip_widening_leaves_the_stated_share_beyond_on_gaussian_residuals():
    """A clip at the q quantile of |u|, widened, leaves about ``beyond`` of Gaussian rows above it; never narrows."""
    from dpstats.algorithms.sce._fwl_interval import clip_widening

    u = np.abs(np.random.default_rng(3).standard_normal(200_000))
    for q in (0.6, 0.8, 0.9):
        C = np.quantile(u, q) * clip_widening(q, 0.05)
        assert abs(np.mean(u > C) - 0.05) < 0.003
    assert clip_widening(0.97, 0.05) == 1.0  # already fewer than 5 % beyond
    assert clip_widening(0.8, 0.0) == 1.0
    assert clip_widening(0.5, 0.05) > clip_widening(0.8, 0.05) > 1.0


def test_the_interval_configuration_shrinks_an_estimate_whose_interval_is_infinite():
    """With an infinite interval ("cannot tell") the estimate shown is shrunk as the point release's is; a finite
    interval keeps the estimate it is built around. hb94_beauty at epsilon 1: the interval is infinite by regression
    dilution on seeds 0 and 5 (0.117 with noise sd 0.187 shrunk to 0; 0.276 with 0.208 to 0.119)."""
    from dpstats.algorithms.release import AlgorithmSpec, Budget, release
    from dpstats.data.corpus import Corpus

    corpus = Corpus.public()
    spec = AlgorithmSpec("sce", "fwl_score", {}).with_intervals()
    assert spec.params["shrink"] == 0.0 and spec.params["shrink_uninformative"] == 1.0
    inst = corpus.instance("hb94_beauty")
    seen = set()
    for seed in (0, 5):
        out = release(spec, inst.task_data(), inst.facts, Budget(1.0, 1e-6), np.random.default_rng(seed))
        d = out.details
        assert math.isinf(out.std_error[0]) and d["interval_check"] == "regression dilution"
        raw, sd = d["unshrunk"], d["noise_sd"]
        assert out.estimate[0] == pytest.approx(raw * max(0.0, 1.0 - sd**2 / raw**2), rel=1e-12)
        seen.add(out.estimate[0] == 0.0)
        assert (d.get("fallback") or "").startswith("shrunk to 0") == (out.estimate[0] == 0.0)
        # without the rule the same release keeps its unshrunk estimate
        off = release(AlgorithmSpec("sce", "fwl_score", {**spec.params, "shrink_uninformative": 0.0}),
                      inst.task_data(), inst.facts, Budget(1.0, 1e-6), np.random.default_rng(seed))
        assert off.estimate[0] == raw and "fallback" not in off.details
    assert seen == {True, False}
    finite = corpus.instance("bn92_wage2")
    out = release(spec, finite.task_data(), finite.facts, Budget(1.0, 1e-6), np.random.default_rng(1))
    assert math.isfinite(out.std_error[0]) and out.estimate[0] == out.details["unshrunk"]
