"""fwl_score's opt-in ``absorb``: a fixed effect absorbed by within-group demeaning.

Three things are pinned here: the within-group primitives compute the
Frisch-Waugh-Lovell quantities (against the dummy regression on real panel
data), the sensitivities the page derives hold on adversarial neighbours and
are within a factor two of the worst case found (so a halved sensitivity
fails), and the algorithm draws its noise at exactly those sensitivities.
"""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pytest
import statsmodels.formula.api as smf

from dpstats.algorithms import get
from dpstats.algorithms.sce._utils import (
    demean_within,
    group_ids,
    within_scatter,
    within_scatter_sensitivity,
)
from dpstats.algorithms.sce.fwl_score import _design_columns, absorbed_block
from dpstats.data.corpus import Corpus
from dpstats.privacy.accounting import zcdp_rho
from tests.noise_spy import RecordingGenerator

DELTA = 1e-6


@pytest.fixture(scope="module")
def corpus():
    return Corpus.public()


def _upper(M):
    return M[np.triu_indices(M.shape[0])]


def test_absorbed_block_is_the_largest_treatment_coded_term(corpus):
    inst = corpus.instance("cigar_panel")  # 46 states and 30 years
    f = inst.facts
    controls, icpt = _design_columns(f, f.d)
    block = absorbed_block(f, controls, 10)
    assert icpt == 0 and len(block) == 45
    assert all(f.columns[c].startswith("C(state)[T.") for c in block)
    assert absorbed_block(f, controls, 47) == []  # fewer levels than asked for
    assert absorbed_block(f, controls, 0) == []
    card = corpus.instance("card95_ols_full").facts
    assert absorbed_block(card, _design_columns(card, card.d)[0], 2) == []  # no categorical term


def test_within_transformation_equals_the_dummy_regression_on_grunfeld(corpus):
    """Frisch-Waugh-Lovell on real data: demeaning by firm gives the coefficient of the C(firm) regression."""
    inst = corpus.instance("grunfeld_fe")
    f, X, y = inst.facts, inst.task_data().X, inst.task_data().y
    controls, _ = _design_columns(f, f.d)
    block = absorbed_block(f, controls, 2)
    g = group_ids(X[:, block])
    assert np.bincount(g).tolist() == [20] * 10  # ten firms, twenty years each
    keep = [c for c in range(f.d) if c not in block and c != 0]
    Z = np.column_stack([X[:, keep], y])
    M = within_scatter(Z, g)
    beta = np.linalg.solve(M[:-1, :-1], M[:-1, -1])
    ols = smf.ols("inv ~ value + capital + C(firm)", inst.frame).fit()
    j = keep.index(f.coef_index)
    np.testing.assert_allclose(beta[j], ols.params[f.coefficient], rtol=1e-8)
    # the scatter is the Gram of the demeaned rows, and demeaning leaves every group mean at 0
    Zw = demean_within(Z, g)
    np.testing.assert_allclose(M, Zw.T @ Zw, rtol=1e-12)
    np.testing.assert_allclose(np.bincount(g, weights=Zw[:, 0]), 0.0, atol=1e-8)


def _neighbours(R, g, cands, k_groups):
    """Replace row 0 or the last row by each candidate, in each group (a row may change its group)."""
    for i in (0, len(R) - 1):
        for r, h in itertools.product(cands, range(k_groups)):
            R2, g2 = R.copy(), g.copy()
            R2[i], g2[i] = r, h
            yield R2, g2


def test_within_scatter_sensitivity_holds_and_is_nearly_reached():
    rng = np.random.default_rng(20)
    B, p = 1.3, 3
    e = np.eye(p)
    # a group at +B e1 (its mean on the sphere), a group at +B e2 whose last row is at -B e2, a singleton
    R = np.vstack([np.tile(B * e[0], (6, 1)), B * e[2], np.tile(B * e[1], (5, 1)), -B * e[1]])
    g = np.array([0] * 6 + [2] + [1] * 6)
    cands = [B * e[0], -B * e[0], B * e[1], -B * e[2], np.zeros(p)]
    cands += [B * v / np.linalg.norm(v) for v in rng.normal(size=(40, p))]
    base = _upper(within_scatter(R, g))
    worst = max(float(np.linalg.norm(_upper(within_scatter(R2, g2)) - base)) for R2, g2 in _neighbours(R, g, cands, 3))
    bound = within_scatter_sensitivity(B)
    assert worst <= bound + 1e-12
    # the last row leaving the e2 group (-(5/6) (2B)^2 e2 e2') to join the e1 group as -B e1
    # (+(6/7) (2B)^2 e1 e1'): 0.85 of the bound, so a halved bound would not hold
    assert worst > 0.8 * bound


def _within_sums(s, t, g):
    a, b = demean_within(s, g), demean_within(t, g)
    return float(a @ b), float(a @ a), float(b @ b)


def test_within_sums_sensitivities_hold_and_are_nearly_reached():
    """S = sum s~ t~ (8 C_u C_v), T = sum s~^2 (4 C_u^2), R = sum t~^2 (4 C_v^2) for |s| <= C_u, |t| <= C_v."""
    rng = np.random.default_rng(21)
    Cu, Cv = 0.7, 2.0
    # group 0 at (-C_u, -C_v); group 1 at (-C_u, +C_v) with one row at (+C_u, -C_v); two mixed groups
    s = np.concatenate([np.full(8, -Cu), np.full(8, -Cu), [Cu], rng.uniform(-Cu, Cu, 5), [-Cu, Cu]])
    t = np.concatenate([np.full(8, -Cv), np.full(8, Cv), [-Cv], rng.uniform(-Cv, Cv, 5), [Cv, -Cv]])
    g = np.array([0] * 8 + [1] * 9 + [2] * 5 + [3, 3])
    base = np.array(_within_sums(s, t, g))
    cands = [(a * Cu, b * Cv) for a, b in itertools.product([-1.0, -0.3, 0.0, 0.5, 1.0], repeat=2)]
    worst = np.zeros(3)
    for i in range(len(s)):
        for (si, ti), h in itertools.product(cands, range(4)):  # 4 groups
            s2, t2, g2 = s.copy(), t.copy(), g.copy()
            s2[i], t2[i], g2[i] = si, ti, h
            worst = np.maximum(worst, np.abs(np.array(_within_sums(s2, t2, g2)) - base))
    bounds = np.array([8 * Cu * Cv, 4 * Cu**2, 4 * Cv**2])
    assert np.all(worst <= bounds + 1e-12), (worst, bounds)
    # the row at (+C_u, -C_v) leaving group 1 for group 0 as (+C_u, +C_v) moves S by about 7 C_u C_v: a
    # halved bound would not hold
    assert np.all(worst > 0.5 * bounds), (worst, bounds)


@pytest.mark.parametrize("iid,eps", [("grunfeld_fe", 3.0), ("thornton08", 1.0)])
def test_absorbed_release_draws_noise_at_the_within_sensitivities(corpus, iid, eps):
    """Run the algorithm itself: each within mechanism's drawn sigma is its sensitivity over sqrt(2 rho_m)."""
    cls = get("sce", "fwl_score")
    inst = corpus.instance(iid)
    rng = RecordingGenerator(5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = cls(**cls.interval_params, absorb=10).run(inst.task_data(), inst.facts, eps, DELTA, rng)
    d = out.details
    ent = {e.mechanism: e for e in out.ledger}
    assert "Gaussian Gram of (1, controls, x, y)" not in ent
    assert d["absorbed_levels"] == {"grunfeld_fe": 10, "thornton08": 119}[iid]
    assert d["sampling_error"] == "classical, within the absorbed groups"
    expected = {
        "Gaussian within scatter of (controls, x, y)": within_scatter_sensitivity(d["row_bound"]),
        "Gaussian sum of clip(u) clip(v)": 8 * d["C_u"] * d["C_v"],
        "Gaussian sum of clip(u)^2": 4 * d["C_u"] ** 2,
        "Gaussian sum of clip(v)^2": 4 * d["C_v"] ** 2,
    }
    drawn = [dr.scale for dr in rng.noise()]
    for mech, sens in expected.items():
        sigma = sens / math.sqrt(2 * ent[mech].cost)  # zCDP: rho = Delta^2 / (2 sigma^2)
        assert any(math.isclose(sc, sigma, rel_tol=1e-9) for sc in drawn), (mech, sigma, drawn)
    assert ent["Gaussian within scatter of (controls, x, y)"].scale == pytest.approx(d["sigma_gram"], rel=1e-12)
    assert ent["Gaussian sum of clip(u) clip(v)"].scale == pytest.approx(d["sigma_S"], rel=1e-12)
    assert sum(e.cost for e in out.ledger) == pytest.approx(zcdp_rho(eps, DELTA), rel=1e-9)


def test_absorb_off_is_the_default_and_leaves_the_release_alone(corpus):
    cls = get("sce", "fwl_score")
    assert cls.defaults["absorb"].value == 0
    inst = corpus.instance("cigar_panel")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = cls(**cls.interval_params).run(inst.task_data(), inst.facts, 3.0, DELTA, np.random.default_rng(1))
        b = cls(**cls.interval_params, absorb=10).run(inst.task_data(), inst.facts, 3.0, DELTA,
                                                      np.random.default_rng(1))
    assert a.details["absorbed_levels"] == 0 and b.details["absorbed_levels"] == 46
    assert any(e.mechanism.startswith("Gaussian Gram") for e in a.ledger)
    assert a.details["sampling_error"] == "HC0"
