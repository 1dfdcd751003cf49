"""fwl_score's cluster-robust interval: a delete-a-group jackknife over groups of the absorbed levels.

When the sampling clusters are the levels of the absorbed fixed effect
(``facts.cluster`` names its variable), the stage-2 sums are released per
group of levels (level mod J) and the interval is the jackknife's, with
``t(J - 1)``. Pinned here: the per-group sums keep the scalar sums'
sensitivities on adversarial neighbours (a row may change its level, hence
its group), and a halved bound would not hold; the algorithm draws their
noise at exactly those sensitivities and spends the whole budget; the
jackknife itself; which designs take the path (public names only); and, on
a clustered panel with slopes that differ between clusters, the interval
covers where the classical within one does not.
"""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pytest

from dpstats.algorithms import get
from dpstats.algorithms.sce._within import PAIR_SQUARE_SENSITIVITY, PAIR_SUM_SENSITIVITY, within_cells
from dpstats.algorithms.sce._cluster_groups import group_jackknife
from dpstats.algorithms.sce._fwl_interval import clustered_on, sampling_error
from dpstats.data.corpus import Corpus
from dpstats.data.facts import PublicFacts, TaskData
from dpstats.privacy.accounting import zcdp_rho
from tests.noise_spy import RecordingGenerator

DELTA = 1e-6
ONE_CELL = 10**9


def _group_stats(u, v, g, levels, J, Cu, Cv):
    cells = within_cells(g, levels, np.random.default_rng(0), ONE_CELL)

    def f(i, j):
        du = np.clip(u[i] - u[j], -Cu, Cu)
        dv = np.clip(v[i] - v[j], -Cv, Cv)
        return np.vstack([du * dv, du * du])

    parts = np.array([c.weighted_sums(f) if c.cells else np.zeros(2) for c in cells.by_level_group(J)])
    return parts, cells.weighted_sums(f)


def test_group_sums_keep_the_scalar_sensitivities_and_add_up():
    """The vector of per-group S (T) moves by at most 3 C_u C_v (1.5 C_u^2) in L2 when a row changes level."""
    Cu = Cv = 1.0
    L, Lp, m = 10.0, 1.0, 12
    sgn = np.tile([1.0, -1.0], m // 2)
    # the adversarial panel of test_calibration_fwl_absorb: five levels, J = 2 groups (levels 0, 2, 4 and 1, 3)
    u = np.concatenate([[L], Lp * sgn[1:], Lp * sgn, 5.0 * np.arange(6), np.zeros(6), [5 * L], np.zeros(5)])
    v = np.concatenate([[-L], Lp * sgn[1:], -Lp * sgn, -5.0 * np.arange(6), np.zeros(12)])
    g = np.array([0] * m + [1] * m + [2] * 6 + [3] * 7 + [4] * 5)
    base, total = _group_stats(u, v, g, 5, 2, Cu, Cv)
    np.testing.assert_allclose(base.sum(axis=0), total, rtol=1e-12)
    cands = [(a, b) for a in (-L, -Lp, 0.0, Lp, L, 12.5) for b in (-L, -Lp, 0.0, Lp, L)]
    worst = np.zeros(2)
    for i, (a, b), h in itertools.product(range(u.size), cands, range(5)):
        u2, v2, g2 = u.copy(), v.copy(), g.copy()
        u2[i], v2[i], g2[i] = a, b, h
        st, _ = _group_stats(u2, v2, g2, 5, 2, Cu, Cv)
        worst = np.maximum(worst, np.linalg.norm(st - base, axis=0))
    bounds = np.array([PAIR_SUM_SENSITIVITY * Cu * Cv, PAIR_SQUARE_SENSITIVITY * Cu**2])
    assert np.all(worst <= bounds + 1e-12), (worst, bounds)
    assert np.all(worst > 0.5 * bounds), (worst, bounds)  # a halved bound would not hold


def test_the_release_draws_the_group_sums_at_their_sensitivities():
    """thornton08 (clustered by village, village effects absorbed) at epsilon = 1: the ledger and the drawn noise."""
    inst = Corpus.public().instance("thornton08")
    assert inst.facts.cluster == "villnum"
    cls = get("sce", "fwl_score")
    rng = RecordingGenerator(3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = cls(**cls.interval_params).run(inst.task_data(), inst.facts, 1.0, DELTA, rng)
    d, ent = out.details, {e.mechanism: e for e in out.ledger}
    J = cls.defaults["cluster_groups"].value
    assert d["sampling_error"].startswith(f"cluster-robust: delete-a-group jackknife over {J} groups")
    # no scalar S, T or residual sum of squares: the group sums replace them
    assert not any(m in ent for m in ("Gaussian sum of clip(u) clip(v)", "Gaussian sum of clip(u)^2",
                                      "Gaussian sum of clip(v)^2"))
    expected = {"Gaussian sum of clip(u) clip(v), per group of levels": 3 * d["C_u"] * d["C_v"],
                "Gaussian sum of clip(u)^2, per group of levels": 1.5 * d["C_u"] ** 2}
    drawn = [dr for dr in rng.noise()]
    for mech, sens in expected.items():
        e = ent[mech]
        assert e.sensitivity == pytest.approx(sens, rel=1e-12)
        sigma = sens / math.sqrt(2 * e.cost)
        assert e.scale == pytest.approx(sigma, rel=1e-9)
        # one draw of J values at that scale
        assert any(math.isclose(dr.scale, sigma, rel_tol=1e-9) and dr.count == J for dr in drawn), (mech, sigma)
    # the totals' noise, reported, is sqrt(J) times the groups'
    per_group = ent["Gaussian sum of clip(u) clip(v), per group of levels"].scale
    assert d["sigma_S"] == pytest.approx(math.sqrt(J) * per_group)
    assert out.df == J - 1 and np.isfinite(out.std_error[0])  # t(J - 1)
    assert sum(e.cost for e in out.ledger) == pytest.approx(zcdp_rho(1.0, DELTA), rel=1e-9)


def test_group_jackknife():
    S_k = np.array([1.0, 2.0, 3.0, 2.0])
    T_k = np.array([10.0, 10.0, 10.0, 12.0])
    th = 0.5 + (S_k.sum() - S_k) / (T_k.sum() - T_k)
    assert group_jackknife(0.5, S_k, T_k, 0.1) == pytest.approx(3 / 4 * np.sum((th - th.mean()) ** 2), rel=1e-12)
    # fewer than three groups, or a denominator within noise of 0: no interval
    assert group_jackknife(0.0, S_k[:2], T_k[:2], 0.1) == math.inf
    assert group_jackknife(0.0, S_k, np.array([0.1, 0.1, 0.1, 40.0]), 1.0) == math.inf


def _facts(names, cluster):
    return PublicFacts(instance="syn", study="syn", task="sce", n=10, d=len(names), columns=tuple(names),
                       outcome="y", coefficient="x", coef_index=1, dummies=tuple(names[2:]), intercept=True,
                       cluster=cluster)


def test_which_designs_take_the_jackknife():
    names = ["Intercept", "x", "C(state)[T.b]", "C(state)[T.c]"]
    block = [2, 3]
    assert clustered_on(_facts(names, "state"), block)
    assert clustered_on(_facts(["Intercept", "x", "C(state, Treatment('b'))[T.a]"], "state"), [2])
    assert not clustered_on(_facts(names, "county"), block)  # clusters that are not the absorbed levels
    assert not clustered_on(_facts(names, None), block)
    assert not clustered_on(_facts(names, "state"), [])  # nothing absorbed
    # what the interval then says it covers
    assert sampling_error(_facts(names, "county"), True, 0) == ("classical, within the absorbed groups; not the "
                                                                "clustering by county")
    assert sampling_error(_facts(names, None), False, 0) == "HC0"


# --------------------------------------------------------------------------
# validity: a clustered panel whose slopes differ between clusters
# --------------------------------------------------------------------------

G, M = 60, 60  # clusters, rows per cluster


def _population():
    r = np.random.default_rng(123)
    a, b, c = r.normal(0, 1, G), r.normal(0, 0.5, G), r.normal(0, 2, G)
    g = np.repeat(np.arange(G), M)
    x = a[g] + r.normal(0, 1, G * M)
    y = (1 + b[g]) * x + c[g] + r.normal(0, 1, G * M)
    return g, x, y


def _design(x, y, cluster):
    g = np.repeat(np.arange(G), M)  # each drawn copy of a cluster is its own level
    names = ("Intercept", "x") + tuple(f"C(g)[T.{lv}]" for lv in range(1, G))
    X = np.column_stack([np.ones(g.size), x, (g[:, None] == np.arange(1, G)[None, :]).astype(float)])
    f = PublicFacts(instance="syn", study="syn", task="sce", n=g.size, d=X.shape[1], columns=names, outcome="y",
                    coefficient="x", coef_index=1,
                    bounds={"Intercept": (1.0, 1.0), **{nm: (0.0, 1.0) for nm in names[2:]}},
                    dummies=names[2:], intercept=True, cluster=cluster)
    return TaskData(X, y), f


def test_the_jackknife_covers_where_the_within_interval_does_not():
    """40 cluster draws at epsilon = 10: measured 39/40 covered with the jackknife, 25/40 without."""
    g0, x0, y0 = _population()
    xd = x0 - (np.bincount(g0, x0) / M)[g0]
    yd = y0 - (np.bincount(g0, y0) / M)[g0]
    truth = (xd @ yd) / (xd @ xd)
    cls = get("sce", "fwl_score")
    covered = {None: 0, "g": 0}
    for s in range(40):
        rows = np.concatenate([np.arange(p * M, (p + 1) * M) for p in np.random.default_rng([7, s]).integers(0, G, G)])
        for cl in covered:
            data, f = _design(x0[rows], y0[rows], cl)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                out = cls(**cls.interval_params).run(data, f, 10.0, DELTA, np.random.default_rng(s))
            lo, hi = (float(np.ravel(a)[0]) for a in out.conf_int(0.95))
            covered[cl] += int(lo <= truth <= hi)
    assert covered["g"] >= 36, covered
    assert covered[None] <= 30, covered
