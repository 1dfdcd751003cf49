"""The interval parts of the three API defaults: noise scales and charges pinned by running each algorithm.

Each test runs the registered algorithm with the API's ``interval_params`` on
a public corpus instance with a :class:`~tests.noise_spy.RecordingGenerator`
and recomputes, independently, what the algorithm's docs page says the
interval part releases (docs/algorithms/sce/fwl_score.md,
docs/algorithms/linreg/dpnewton.md, docs/algorithms/mean/adaptive_whiten.md):

* ``fwl_score``: ``Q = sum clip(u)^2 clip(v)^2`` with sensitivity
  ``C_u^2 C_v^2`` and ``se_share`` of the stage-2 budget (the rest split as
  before: ``t_share`` of it for ``T``);
* ``dpnewton``: the counts of rows at the box edge and of clipped gradients
  (sensitivity ``sqrt(k)``, ``edge_share`` of the interval's ``se_share`` of
  rho) and the meat ``sum g g'`` (upper triangle, sensitivity ``sqrt(2) C^2``,
  the rest of it), the Newton steps equal shares of what is left;
* ``adaptive_whiten``: the clipping excess (sensitivity ``2 sqrt(d_l)/n``)
  with the counts of rows beyond the stretched box (``sqrt(d_l)``), on the
  ball path the ball's excess (``2 (stretch - 1) R / n``) and count (1),
  and, on the box paths without a released covariance, the clipped second
  moment (sensitivity ``sqrt(d_l)/n``), in the documented shares of the
  budget left before the final step.

Halving a sensitivity, changing a share or dropping a charge fails one of
the comparisons (rtol 1e-9). The simulation draws of ``fwl_score``'s
nuisance allowance are ``standard_normal`` (post-processing, no charge).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from dpstats.algorithms import get
from dpstats.data.corpus import Corpus
from dpstats.privacy.accounting import zcdp_rho
from tests.noise_spy import RecordingGenerator

DELTA = 1e-6
RTOL = 1e-9


@pytest.fixture(scope="module")
def corpus():
    return Corpus.public()


def _run(corpus, task, name, iid, eps, seed):
    inst = corpus.instance(iid)
    cls = get(task, name)
    algo = cls(**cls.interval_params)
    rng = RecordingGenerator(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = algo.run(inst.task_data(), inst.facts, eps, DELTA, rng)
    assert out.released and out.std_error is not None
    costs = {e[0]: e[1] for e in out.ledger}
    assert len(costs) == len(out.ledger), "one ledger entry per mechanism"
    assert sum(costs.values()) == pytest.approx(zcdp_rho(eps, DELTA), rel=RTOL)
    return inst, algo, out, rng, costs


#: the excess of the u clip's mechanism (released when u has a private clip: not for a public 0/1 treatment)
EXCESS = "Gaussian sum of clip(u) (clip(u, k C_u) - clip(u))"


@pytest.mark.parametrize("iid,eps,seed,clipped", [("mroz87_lwage", 1.0, 0, True), ("mroz87_lwage", 5.0, 1, True),
                                                  ("nsw_exp", 2.0, 2, False), ("bm04_call", 1.0, 3, False)])
def test_fwl_score_sandwich_release(corpus, iid, eps, seed, clipped):
    inst, algo, out, rng, costs = _run(corpus, "sce", "fwl_score", iid, eps, seed)
    rho_2, N = (costs[k] for k in ("Gaussian sums of clip(u) clip(v), clip(u)^2, clip(u)^2 clip(v)^2",
                                   "Gaussian count far beyond the clips"))
    assert (EXCESS in costs) == clipped
    E = costs.get(EXCESS, 0.0)
    # tail_share of what stage 2 had goes to the counts, as much (excess_share) to the excess of the u clip
    # when u has a private clip; S, T and Q are one mechanism costing the rest, split into shares as for the
    # point release with se_share for Q
    assert N == pytest.approx(0.05 * (rho_2 + N + E), rel=RTOL)
    assert E == pytest.approx(N if clipped else 0.0, rel=RTOL)
    Q = 0.1 * rho_2
    T = 0.15 * (rho_2 - Q)
    S = rho_2 - Q - T
    d_S, d_T, d_Q, d_N, d_E = rng.of("normal")[-5:] if clipped else (*rng.of("normal")[-4:], None)
    C_u, C_v = out.details["C_u"], out.details["C_v"]
    # docs: at the scales of the shares, a replaced row moves (S, T, Q) by at most sqrt(max_t (S/2) (1 + t)^2 +
    # 2 (T + Q) (1 - t^2)^2) noise units (rows a = b = 1 and a' = -t, b' = 1 in units of the clips); every scale
    # shrinks by one factor until half its square, the cost, is rho_2
    t = np.linspace(0.0, 1.0, 100001)
    k = math.sqrt(0.5 * float(np.max(0.5 * S * (1 + t) ** 2 + 2.0 * (T + Q) * (1 - t * t) ** 2)) / rho_2)
    assert d_S.scale == pytest.approx(k * 2.0 * C_u * C_v / math.sqrt(2.0 * S), rel=RTOL)
    assert d_T.scale == pytest.approx(k * C_u**2 / math.sqrt(2.0 * T), rel=RTOL)
    assert d_Q.scale == pytest.approx(k * (C_u * C_v) ** 2 / math.sqrt(2.0 * Q), rel=RTOL)
    assert out.details["sigma_Q"] == pytest.approx(d_Q.scale, rel=RTOL)
    # one count of rows (|u| or |v| far beyond its clip, or clipped in the Gram): sensitivity 1
    assert d_N.count == 1
    assert d_N.scale == pytest.approx(1.0 / math.sqrt(2.0 * N), rel=RTOL)
    # the excess of the u clip: each row's term in [0, (tail_u - 1) C_u^2]
    if clipped:
        assert d_E.scale == pytest.approx(3.0 * C_u**2 / math.sqrt(2.0 * E), rel=RTOL)
    # the simulation of the nuisance error draws standard normals only after every charged draw
    assert rng.draws[-1].method == "standard_normal"
    assert out.std_error[0] > 0 and out.bias_bound[0] >= 0


def test_fwl_score_point_release_unchanged_without_se_share(corpus):
    """se_share = 0 (the registered default, inference=False) is the point release: no Q, no std_error."""
    inst = corpus.instance("mroz87_lwage")
    a = get("sce", "fwl_score")().run(inst.task_data(), inst.facts, 1.0, DELTA, np.random.default_rng(5))
    assert a.std_error is None and not any("clip(v)^2" in e[0] for e in a.ledger)


@pytest.mark.parametrize("iid,eps,seed", [("ab91_empluk_linreg", 1.0, 2), ("bh90_sleep_linreg", 10.0, 3),
                                          ("abadie03_401k_linreg", 3.0, 4)])
def test_dpnewton_meat_release(corpus, iid, eps, seed):
    inst, algo, out, rng, costs = _run(corpus, "linreg", "dpnewton", iid, eps, seed)
    rho = zcdp_rho(eps, DELTA)
    d = inst.facts.d
    assert costs["rows at the box edge"] == pytest.approx(0.2 * 0.1 * rho, rel=RTOL)
    assert costs["meat of the Newton step"] == pytest.approx(0.8 * 0.1 * rho, rel=RTOL)
    steps = [costs[f"Newton step {t + 1}"] for t in range(3)]
    assert steps == pytest.approx([steps[0]] * 3, rel=RTOL)
    *_, d_step, d_edge, d_meat = rng.of("normal")
    C = out.details["clip"]
    assert d_step.scale == pytest.approx(2.0 * C / math.sqrt(2.0 * steps[-1]), rel=RTOL)
    # one count per privately scaled column, y when unbounded, and the clipped gradients: sensitivity sqrt(k)
    k = len(out.details["private_columns"]) + 1
    assert d_edge.count == k
    assert d_edge.scale == pytest.approx(math.sqrt(k) / math.sqrt(2.0 * 0.02 * rho), rel=RTOL)
    assert d_meat.count == d * (d + 1) // 2
    assert d_meat.scale == pytest.approx(math.sqrt(2.0) * C * C / math.sqrt(2.0 * 0.08 * rho), rel=RTOL)
    assert out.std_error.shape == (d,)


@pytest.mark.parametrize("iid,eps,seed,path", [("mean_mroz87_lwage", 0.3, 0, "low signal"),
                                               ("mean_grogger91", 3.0, 0, "box chosen"),
                                               ("mean_abadie03_401k", 3.0, 1, "ball"),
                                               ("mean_bn92_wage2", 10.0, 2, "ball")])
def test_adaptive_whiten_interval_releases(corpus, iid, eps, seed, path):
    inst, algo, out, rng, costs = _run(corpus, "mean", "adaptive_whiten", iid, eps, seed)
    assert out.details.get("path", out.details["final"]) == path
    n = inst.facts.n
    live = np.asarray(out.details["half"]) > 0
    dl = int(np.sum(live))
    # the clipping excess and the counts beyond the stretched box: the privately ranged columns only
    dr = int(np.sum(live & np.array([c not in inst.facts.bounds for c in inst.facts.columns])))
    share = 0.45
    ball = path == "ball"
    final = "clipped mean (whitened ball)" if ball else "clipped mean (box)"
    ex = costs["clipping excess (stretched box)"]
    cnt = costs["rows beyond the stretched box"]
    ex_b = costs.get("clipping excess (stretched ball)", 0.0)
    cnt_b = costs.get("rows beyond the stretched ball", 0.0)
    second = costs.get("clipped second moment (box)", 0.0)
    before = ex + cnt + ex_b + cnt_b + second + costs[final]  # the budget left before the interval part
    # of each clipping part, 65 % counts the rows beyond the stretched box (ball), 35 % releases the excess
    assert cnt == pytest.approx(ex * 0.65 / 0.35, rel=RTOL)
    if path == "low signal":  # no covariance released: 2/3 of the share for the excess, 1/3 for second moments
        assert ex + cnt == pytest.approx(share * 2 / 3 * before, rel=RTOL)
        assert second == pytest.approx(share / 3 * before, rel=RTOL)
    elif ball:  # the released covariance gives the variances: half the share for the box, half for the ball
        assert second == 0.0 and ex + cnt == pytest.approx(share / 2 * before, rel=RTOL)
        assert ex_b + cnt_b == pytest.approx(share / 2 * before, rel=RTOL)
        assert cnt_b == pytest.approx(ex_b * 0.65 / 0.35, rel=RTOL)
    else:
        assert second == 0.0 and ex_b == 0.0 and ex + cnt == pytest.approx(share * before, rel=RTOL)
    normals = rng.of("normal")
    k = -1 - (1 if second else 0) - (2 if ball else 0)  # the draws after the box's: second moments, ball parts
    d_ex, d_cnt = normals[k - 2], normals[k - 1]
    assert d_ex.scale == pytest.approx(2.0 * math.sqrt(dr) / n / math.sqrt(2.0 * ex), rel=RTOL)
    assert d_cnt.count == dr and d_cnt.scale == pytest.approx(math.sqrt(dr) / math.sqrt(2.0 * cnt), rel=RTOL)
    if second:
        assert normals[-2].scale == pytest.approx(math.sqrt(dl) / n / math.sqrt(2.0 * second), rel=RTOL)
    if ball:
        R = out.details["radius"]
        d_exb, d_cntb = normals[-3], normals[-2]
        s = algo.params["stretch"]
        assert d_exb.scale == pytest.approx(2.0 * (s - 1.0) * R / n / math.sqrt(2.0 * ex_b), rel=RTOL)
        assert d_cntb.count == 1 and d_cntb.scale == pytest.approx(1.0 / math.sqrt(2.0 * cnt_b), rel=RTOL)
    assert out.std_error.shape == (inst.facts.d,)


@pytest.mark.parametrize("iid,eps,seed", [("card95_ols_basic", 10.0, 0), ("bm04_call", 1.0, 1), ("htv03", 3.0, 2)])
def test_sa_coef_interval_laplace_releases(corpus, iid, eps, seed):
    """sa_coef_interval (docs/algorithms/sce/sa_coef_interval.md): three Laplace releases given the private range."""
    inst = corpus.instance(iid)
    algo = get("sce", "sa_coef_interval")()
    rng = RecordingGenerator(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = algo.run(inst.task_data(), inst.facts, eps, DELTA, rng)
    costs = {e[0]: e[1] for e in out.ledger}
    assert sum(costs.values()) == pytest.approx(eps, rel=RTOL)  # pure DP, basic composition
    e_cnt, e_var = 0.05 * eps, 0.15 * eps
    e_mean = eps - 0.3 * eps - e_cnt - e_var
    assert costs["Laplace count of invalid or winsorised blocks"] == pytest.approx(e_cnt, rel=RTOL)
    assert costs["Laplace winsorised sum of squares"] == pytest.approx(e_var, rel=RTOL)
    assert costs["Laplace winsorised sum"] == pytest.approx(e_mean, rel=RTOL)
    lo, hi = out.details["range"]
    h = (hi - lo) / 2
    d_cnt, d_sq, d_sum = rng.of("laplace")[-3:]
    assert d_cnt.scale == pytest.approx(1.0 / e_cnt, rel=RTOL)
    assert d_sq.scale == pytest.approx(h * h / e_var, rel=RTOL)
    assert d_sum.scale == pytest.approx((hi - lo) / e_mean, rel=RTOL)
    assert out.df == out.details["k"] - 1


@pytest.mark.parametrize("iid,eps,seed", [("card95_ols_basic", 1.0, 0), ("nsw_cps_raw", 10.0, 1)])
def test_blb_coinpress_interval_guard(corpus, iid, eps, seed):
    """blb_coinpress with the API's interval_params: one count of invalid subsets, sensitivity 1, 2 % of rho."""
    inst, algo, out, rng, costs = _run(corpus, "sce", "blb_coinpress", iid, eps, seed)
    rho = zcdp_rho(eps, DELTA)
    assert costs["count of invalid subsets"] == pytest.approx(0.02 * rho, rel=RTOL)
    ix = [e[0] for e in out.ledger].index("count of invalid subsets")
    # the count is the first Gaussian draw after the prior balls' exponential mechanisms
    d_cnt = rng.of("normal")[0]
    assert ix >= 3 and d_cnt.count == 1
    assert d_cnt.scale == pytest.approx(1.0 / math.sqrt(2.0 * 0.02 * rho), rel=RTOL)
    if iid == "nsw_cps_raw":  # most subsets have no treated unit: the interval must be infinite
        assert not np.isfinite(out.std_error[0])


@pytest.mark.parametrize("iid", ["mroz87_lwage", "bm04_call", "caschools_str"])
def test_fwl_score_interval_check_names_the_infinite_interval(corpus, iid):
    """``interval_check`` says which released-value check made the interval infinite, and "ok" iff it is finite.

    At epsilon 1 the small instances (mroz87_lwage, n = 428, four columns scaled privately; caschools_str)
    mostly fail the private standardisation; bm04_call (n = 4870, public dummies) mostly passes. Every
    seed must give a consistent pair (check, std_error), and the failed standardisation must also set the
    estimate to 0 (gram_guard).
    """
    cls = get("sce", "fwl_score")
    inst = corpus.instance(iid)
    checks = []
    for seed in range(6):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = cls(**cls.interval_params).run(inst.task_data(), inst.facts, 1.0, DELTA, np.random.default_rng(seed))
        c = out.details["interval_check"]
        checks.append(c)
        assert (c == "ok") == bool(np.isfinite(out.std_error[0])), (seed, c, out.std_error)
        if c.startswith("failed standardisation"):
            assert out.estimate[0] == 0.0
    expect_ok = {"mroz87_lwage": False, "bm04_call": True, "caschools_str": False}[iid]
    assert (checks.count("ok") >= 4) == expect_ok, checks


@pytest.mark.parametrize("iid,eps,fires", [("cigar_panel", 10.0, True), ("guns_fe", 10.0, True),
                                           ("card95_ols_full", 10.0, False), ("bm04_call", 3.0, False)])
def test_fwl_score_unresolved_controls_make_the_interval_infinite(corpus, iid, eps, fires):
    """Fixed-effect designs: the noisy Gram floors dozens of control directions, whose bias the interval cannot see.

    On cigar_panel (46 state dummies and 31 year dummies, n = 1380) and guns_fe the public-corpus coverage
    of the finite interval was 0-20 % with widths below the non-private ones; the interval must now be
    infinite ("unresolved controls") while the point release and the ledger stay exactly as with the check
    off. On card95_ols_full and bm04_call (few controls) the check stays quiet. The check belongs to the
    row-level path, run here with ``absorb=0``: by default the state effects of cigar_panel and guns_fe are
    absorbed (tests/algorithms/sce/test_calibration_fwl_absorb.py). With ``shrink_uninformative`` (the interval
    configuration's 1) an estimate whose interval the check made infinite is then shrunk, a function of that
    same release; the comparison runs with it off.
    """
    cls = get("sce", "fwl_score")
    inst = corpus.instance(iid)
    outs = {}
    for mf in (cls.defaults["max_floored"].value, 0):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            # the count of rows beyond the clips off, so that this check alone decides
            outs[mf] = cls(**{**cls.interval_params, "tail_share": 0.0, "shrink_uninformative": 0.0},
                           max_floored=mf, absorb=0).run(inst.task_data(), inst.facts, eps, DELTA,
                                                         np.random.default_rng(3))
    on, off = outs[cls.defaults["max_floored"].value], outs[0]
    assert on.estimate[0] == off.estimate[0]
    assert [e[:3] for e in on.ledger] == [e[:3] for e in off.ledger]
    floored = on.details["floored_directions"]
    assert (floored >= cls.defaults["max_floored"].value) == fires, floored
    if fires:
        assert on.details["interval_check"] == "unresolved controls"
        assert not np.isfinite(on.std_error[0]) and np.isfinite(off.std_error[0])
    else:
        assert on.details["interval_check"] == off.details["interval_check"]
        assert on.std_error[0] == off.std_error[0]
