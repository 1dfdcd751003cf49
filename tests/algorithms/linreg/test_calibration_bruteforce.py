"""Privacy calibration of the linear-regression algorithms: sensitivities by brute force, noise scales, ledgers.

Neighbouring relation throughout: replace one row (n public). Each
sensitivity is checked by replacing one row of small datasets with adversarial
rows inside the public bounds (after the algorithms' own clipping).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from dpstats.algorithms.linreg._basis import Basis, Structure, enforce_structure
from dpstats.algorithms.linreg._private_ranges import (
    POSITIVE_GRID,
    SIGNED_GRID,
    _cell_deviation,
    private_nonzero_quantile,
)
from dpstats.algorithms.linreg._ssp import gram_pattern, ssp_calibration, ssp_joint_sens2, upper_to_sym
from dpstats.algorithms.linreg.tukeyem import distance_lower_bound, log_depth_volumes
from dpstats.privacy.accounting import ZCDPAccountant, zcdp_rho
from dpstats.privacy.quantiles import BR_NOTE

# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------


def _upper(G: np.ndarray, mask: np.ndarray) -> np.ndarray:
    return G[mask]


def _box_rows(n_box: int, groups: list[int], intercept: bool, rng: np.random.Generator, k: int) -> np.ndarray:
    """k random rows of the standardised geometry: box coordinates in [-1, 1], one-hot groups, intercept 1."""
    rows = []
    for _ in range(k):
        parts = [np.ones(1)] if intercept else []
        parts.append(rng.uniform(-1, 1, size=n_box))
        for g in groups:
            v = np.zeros(g)
            lvl = rng.integers(-1, g)
            if lvl >= 0:
                v[lvl] = 1.0
            parts.append(v)
        rows.append(np.concatenate(parts))
    return np.array(rows)


def _adversarial_box_rows(n_box: int, groups: list[int], intercept: bool) -> np.ndarray:
    """All corners of the box times every one-hot choice (and the base level) per group."""
    corners = list(itertools.product([-1.0, 1.0, 0.0], repeat=n_box))
    group_choices = []
    for g in groups:
        opts = [np.zeros(g)] + [np.eye(g)[i] for i in range(g)]
        group_choices.append(opts)
    rows = []
    for c in corners:
        for combo in itertools.product(*group_choices) if groups else [()]:
            parts = ([np.ones(1)] if intercept else []) + [np.array(c)] + list(combo)
            rows.append(np.concatenate(parts))
    return np.array(rows)


# --------------------------------------------------------------------------
# joint sensitivity of (X'X, X'y)
# --------------------------------------------------------------------------


@pytest.mark.parametrize("ratio", [0.3, 1.0, 3.0])
def test_ssp_joint_sensitivity_box_geometry_brute_force(ratio):
    """sup over replace-one neighbours of the weighted change of (U(Z'Z), Z'u) is below ssp_joint_sens2."""
    rng = np.random.default_rng(0)
    n_box, groups, intercept = 2, [2], True
    groups_idx = (np.array([1 + n_box, 2 + n_box]),)
    d = 1 + n_box + 2
    D = 1 + n_box + 1  # intercept + box + one group
    mask = gram_pattern(d, groups_idx)
    sigma_xx, sigma_xy = 1.0, ratio
    bound = ssp_joint_sens2(D, D, 1.0, sigma_xx, sigma_xy)
    cand = _adversarial_box_rows(n_box, groups, intercept)
    us = [-1.0, 0.0, 1.0]
    worst = 0.0
    for _ in range(3):
        Z = _box_rows(n_box, groups, intercept, rng, 5)
        u = rng.uniform(-1, 1, 5)
        base_g, base_b = _upper(Z.T @ Z, mask), Z.T @ u
        for zi, ui in itertools.product(cand, us):
            Z2, u2 = Z.copy(), u.copy()
            Z2[0], u2[0] = zi, ui
            for zj, uj in itertools.product(cand[::7], us):
                Z3, u3 = Z2.copy(), u2.copy()
                Z3[1], u3[1] = zj, uj
                # neighbours Z2 (row 1 replaced) and Z3 differ in row 1 only
                dg = _upper(Z3.T @ Z3, mask) - _upper(Z2.T @ Z2, mask)
                db = Z3.T @ u3 - Z2.T @ u2
                val = float(dg @ dg / sigma_xx**2 + db @ db / sigma_xy**2)
                worst = max(worst, val)
        assert base_g.size == int(mask.sum()) and base_b.size == d
    assert worst <= bound * (1 + 1e-12)
    # the bound is not loose by more than a factor 2 on this geometry
    assert worst >= 0.5 * bound


def test_ssp_joint_sensitivity_norm_geometry_attained():
    """With ||x|| <= B (q4 = B^4) the bound is attained by x = B e_1, x' = B e_2 (up to the X'y term)."""
    B2, By = 4.0, 1.0
    # X'X only: sup = 2 B^4 attained by orthogonal rows
    assert ssp_joint_sens2(B2, B2**2, By, 1.0, None) == pytest.approx(2 * B2**2)
    x, x2 = np.array([2.0, 0.0]), np.array([0.0, 2.0])
    mask = np.triu(np.ones((2, 2), dtype=bool))
    dg = np.outer(x, x)[mask] - np.outer(x2, x2)[mask]
    assert float(dg @ dg) == pytest.approx(2 * B2**2)
    # X'y only direction: x' = -x, y' = y gives ||Delta X'y|| = 2 B By, Delta X'X = 0
    assert ssp_joint_sens2(B2, B2**2, By, 1e9, 1.0) == pytest.approx(4 * B2 * By**2, rel=1e-6)


def test_ssp_joint_sensitivity_random_neighbours_norm_ball():
    """Random neighbours in the ball ||x|| <= B, |y| <= By never exceed the bound (replace-one)."""
    rng = np.random.default_rng(1)
    B, By, d = 1.7, 0.8, 4
    mask = np.triu(np.ones((d, d), dtype=bool))
    for ratio in [0.2, 1.0, 5.0]:
        bound = ssp_joint_sens2(B**2, B**4, By, 1.0, ratio)
        for _ in range(3000):
            x, x2 = rng.normal(size=d), rng.normal(size=d)
            x *= B / np.linalg.norm(x) * rng.uniform(0.5, 1.0) ** 0.1
            x2 *= B / np.linalg.norm(x2)
            if rng.uniform() < 0.5:  # nearly opposite rows make X'y change most
                x2 = -x + 0.1 * rng.normal(size=d)
                x2 *= B / np.linalg.norm(x2)
            y, y2 = rng.choice([-By, By]), rng.choice([-By, By])
            dg = np.outer(x, x)[mask] - np.outer(x2, x2)[mask]
            db = x * y - x2 * y2
            assert float(dg @ dg + db @ db / ratio**2) <= bound * (1 + 1e-12)


def test_ssp_calibration_spends_rho_exactly():
    """The calibrated release costs exactly the rho it was given: sens2 / 2 = rho."""
    for rho in [1e-3, 0.02, 1.5]:
        cal = ssp_calibration(9.0, 9.0, 1.0, 1.3, rho)
        assert cal.sens2 / 2 == pytest.approx(rho)
        recomputed = ssp_joint_sens2(9.0, 9.0, 1.0, cal.sigma_xx, cal.sigma_xy)
        assert recomputed / 2 == pytest.approx(rho, rel=1e-12)


def test_gram_pattern_skips_only_structural_zeros():
    groups = (np.array([2, 3, 4]),)
    mask = gram_pattern(6, groups)
    assert mask[2, 2] and mask[3, 3] and mask[0, 2] and mask[2, 5]
    assert not mask[2, 3] and not mask[3, 4] and not mask[2, 4]
    assert not mask[1, 0]  # lower triangle never released
    # rows that satisfy the one-hot structure have zeros exactly where the mask is False (upper part)
    rng = np.random.default_rng(0)
    Z = _box_rows(2, [3], True, rng, 50)
    Z = Z[:, [0, 1, 3, 4, 5, 2]]  # move a box column to the end: groups at 2..4
    G = Z.T @ Z
    upper_off = np.triu(np.ones((6, 6), dtype=bool)) & ~mask
    assert np.all(G[upper_off] == 0)
    S = upper_to_sym(G[mask], mask)
    assert np.allclose(S, G)


# --------------------------------------------------------------------------
# AdaSSP pieces
# --------------------------------------------------------------------------


def test_lambda_min_sensitivity_replace_one_brute_force():
    """|lambda_min(X'X) - lambda_min(X''X'')| <= B^2 when one row changes inside ||x|| <= B."""
    rng = np.random.default_rng(2)
    B = 1.5
    worst = 0.0
    for _ in range(400):
        X = rng.normal(size=(6, 3))
        X *= np.minimum(1, B / np.linalg.norm(X, axis=1))[:, None]
        X2 = X.copy()
        v = rng.normal(size=3)
        X2[0] = v / np.linalg.norm(v) * B
        a = np.linalg.eigvalsh(X.T @ X)[0]
        b = np.linalg.eigvalsh(X2.T @ X2)[0]
        worst = max(worst, abs(a - b))
    assert worst <= B**2 + 1e-12


# --------------------------------------------------------------------------
# private quantiles
# --------------------------------------------------------------------------


def _nonzero_scores(v, q, grid):
    z = np.sort(np.asarray(v, float))
    z = z[z > 0]
    m = z.size
    r = max(1, math.ceil(q * m))
    c = np.searchsorted(z, grid, side="right").astype(float)
    prev = np.concatenate([[0.0], c[:-1]])
    return -np.maximum.reduce([np.zeros_like(c), prev - r + 1, r - c])


def test_nonzero_quantile_score_sensitivity_one():
    """Replacing one value (zero or not) moves every grid score of the non-zero quantile by at most 1."""
    rng = np.random.default_rng(3)
    grid = POSITIVE_GRID[::8]
    worst = 0.0
    for _ in range(300):
        v = np.where(rng.uniform(size=9) < 0.4, 0.0, rng.lognormal(size=9))
        s = _nonzero_scores(v, 0.7, grid)
        for new in [0.0, 1e-7, 0.3, 1.0, 5.0, 1e12]:
            v2 = v.copy()
            v2[rng.integers(9)] = new
            worst = max(worst, float(np.max(np.abs(_nonzero_scores(v2, 0.7, grid) - s))))
    assert worst == 1.0


def test_nonzero_quantile_finds_scale_of_sparse_column():
    """A column that is 0 for 95% of rows gets the scale of its non-zero part, not 0."""
    rng = np.random.default_rng(4)
    v = np.where(rng.uniform(size=20000) < 0.95, 0.0, rng.uniform(1, 3, size=20000))
    s = private_nonzero_quantile(v, 0.5, POSITIVE_GRID, ZCDPAccountant(50.0, 1e-6), "scale", 5.0, rng)
    assert 1.5 <= s <= 2.5


def test_cell_deviation_zero_inside_median_cell():
    x = np.array([6.0, 6.0, 6.0, 5.0, 7.0, 9.0])
    a, b = 5.95, 6.1
    dev = _cell_deviation(x, a, b, 6.02)
    assert list(dev[:3]) == [0.0, 0.0, 0.0]
    assert dev[3] == pytest.approx(1.02) and dev[5] == pytest.approx(2.98)


# --------------------------------------------------------------------------
# structure enforcement and basis
# --------------------------------------------------------------------------


class _Facts:
    def __init__(self, columns, bounds, dummies=(), outcome="y"):
        self.columns = tuple(columns)
        self.d = len(columns)
        self.bounds = dict(bounds)
        self.dummies = tuple(dummies)
        self.outcome = outcome


def test_structure_and_enforcement_bound_row_norm():
    facts = _Facts(
        ["Intercept", "x", "b", "C(g)[T.a]", "C(g)[T.b]"],
        {"Intercept": (1, 1), "b": (0, 2), "C(g)[T.a]": (0, 1), "C(g)[T.b]": (0, 1), "y": (0, 1)},
        dummies=("C(g)[T.a]", "C(g)[T.b]"),
    )
    S = Structure.from_facts(facts, 5)
    assert S.intercept == 0 and list(S.free) == [1] and list(S.bounded) == [2] and len(S.groups) == 1
    assert S.y_bounds == (0.0, 1.0)
    X = np.array([[3.0, 5.0, 7.0, 1.0, 1.0], [1.0, -2.0, -1.0, 0.5, 0.0], [1.0, 0.0, 1.0, 0.0, 1.0]])
    Xe = enforce_structure(X, S)
    assert np.all(Xe[:, 0] == 1) and Xe[0, 2] == 2 and Xe[1, 2] == 0
    assert list(Xe[0, 3:]) == [0, 0] and list(Xe[1, 3:]) == [0, 0] and list(Xe[2, 3:]) == [0, 1]
    basis = Basis(center=np.array([0, 1.0, 1.0, 0, 0]), half=np.array([1, 4.0, 1.0, 1, 1]), intercept=0,
                  groups=S.groups)
    Z = basis.clip(basis.transform(Xe))
    assert np.all(np.sum(Z**2, axis=1) <= basis.norm2_bound() + 1e-12)
    assert basis.norm2_bound() == 4.0


def test_basis_round_trip_and_fitted_values():
    """coef_to_raw maps coefficients of u on z to raw coefficients with identical fitted values."""
    rng = np.random.default_rng(5)
    X = np.column_stack([np.ones(50), rng.normal(3, 2, 50), rng.normal(-1, 5, 50)])
    basis = Basis(center=np.array([0.0, 3.0, -1.0]), half=np.array([1.0, 6.0, 15.0]), intercept=0, groups=(),
                  y_center=2.0, y_half=4.0)
    theta = rng.normal(size=3)
    beta = basis.coef_to_raw(theta)
    fitted_z = basis.y_center + basis.y_half * (basis.transform(X) @ theta)
    assert np.allclose(X @ beta, fitted_z)
    assert np.allclose(basis.raw_to_coef(beta), theta)


# --------------------------------------------------------------------------
# TukeyEM: the distance lower bound has sensitivity 1
# --------------------------------------------------------------------------


def test_tukey_distance_bound_sensitivity_one():
    rng = np.random.default_rng(6)
    m, d = 60, 2
    for _ in range(40):
        models = rng.standard_t(3, size=(m, d))
        k1 = distance_lower_bound(log_depth_volumes(np.sort(models.T, axis=1)), m // 4, 2.0, 1e-3)
        for new in [np.zeros(d), np.full(d, 1e6), np.full(d, -1e6), rng.normal(size=d)]:
            m2 = models.copy()
            m2[rng.integers(m)] = new
            k2 = distance_lower_bound(log_depth_volumes(np.sort(m2.T, axis=1)), m // 4, 2.0, 1e-3)
            assert abs(k1 - k2) <= 1


# --------------------------------------------------------------------------
# ledgers: every standard algorithm spends exactly its budget
# --------------------------------------------------------------------------


def _sim(n, rng, d_free=2):
    X = np.column_stack([np.ones(n), rng.normal(10, 3, (n, d_free)), rng.integers(0, 2, n)])
    beta = np.array([1.0, 0.5, -0.2, 2.0])[: X.shape[1]]
    y = X @ beta + rng.normal(0, 1, n)
    facts = _Facts(["Intercept", "x1", "x2", "b"], {"Intercept": (1, 1), "b": (0, 1)})
    facts.n = n
    facts.coef_index = 1
    return X, y, facts


@pytest.mark.parametrize("name", ["adassp", "adassp_std", "ssp", "ssp_std", "dpgd", "dpgd_std", "sa_median",
                                  "dpnewton"])
@pytest.mark.parametrize("eps", [0.3, 3.0])
def test_ledger_converts_to_exactly_the_budget(name, eps):
    from dpstats.algorithms import TaskData, get
    from dpstats.privacy.accounting import zcdp_epsilon

    rng = np.random.default_rng(7)
    X, y, facts = _sim(3000, rng)
    out = get("linreg", name)().run(TaskData(X, y), facts, eps, 1e-6, np.random.default_rng(1))
    assert out.released
    assert out.epsilon == eps and out.delta == 1e-6
    units = {row[2] for row in out.ledger}
    assert units == {"rho"}
    spent = sum(row[1] for row in out.ledger)
    assert spent == pytest.approx(zcdp_rho(eps, 1e-6), rel=1e-9)
    assert zcdp_epsilon(spent, 1e-6) == pytest.approx(eps, rel=1e-6)


def test_adassp_noise_scales_match_budget():
    """AdaSSP's three Gaussian noise scales are sensitivity / sqrt(2 rho/3) (after the bound quantiles)."""
    from dpstats.algorithms import TaskData, get

    rng = np.random.default_rng(8)
    X, y, facts = _sim(2000, rng)
    facts.bounds = {"Intercept": (1, 1), "b": (0, 1), "x1": (0, 20), "x2": (0, 20), "y": (-50, 50)}
    facts.outcome = "y"
    out = get("linreg", "adassp")().run(TaskData(X, y), facts, 1.0, 1e-6, np.random.default_rng(0))
    rho = zcdp_rho(1.0, 1e-6)
    B2 = 1 + 1 + 400 + 400
    assert out.details["sigma_lambda"] == pytest.approx(B2 / math.sqrt(2 * rho / 3))
    assert out.details["sigma_xx"] == pytest.approx(math.sqrt(2) * B2 / math.sqrt(2 * rho / 3))
    assert out.details["sigma_xy"] == pytest.approx(2 * math.sqrt(B2) * 50 / math.sqrt(2 * rho / 3))
    assert [row[0] for row in out.ledger] == ["lambda_min(X'X)", "X'X", "X'y"]


def test_dpgd_step_sensitivity_two_c():
    """Replacing one row changes the clipped gradient sum by at most 2C."""
    rng = np.random.default_rng(9)
    C = 0.7
    for _ in range(200):
        Z = rng.uniform(-1, 1, (6, 3)) / math.sqrt(3)
        u = rng.uniform(-1, 1, 6)
        theta = rng.normal(size=3) * 3

        def gsum(Z, u):
            G = Z * (Z @ theta - u)[:, None]
            nrm = np.linalg.norm(G, axis=1)
            return (G * np.minimum(1, C / np.maximum(nrm, 1e-300))[:, None]).sum(0)

        Z2, u2 = Z.copy(), u.copy()
        Z2[0] = rng.choice([-1, 1], 3) / math.sqrt(3)
        u2[0] = rng.choice([-1, 1])
        assert np.linalg.norm(gsum(Z, u) - gsum(Z2, u2)) <= 2 * C + 1e-12


def test_grid_em_is_charged_at_its_bounded_range_cost():
    """A linreg grid mechanism is drawn and charged in one call: eps^2/8 (bounded range), a quarter of eps^2/2."""
    from dpstats.algorithms.linreg._private_ranges import private_norm_bound
    from dpstats.privacy.accounting import em_epsilon

    acc = ZCDPAccountant(1.0, 1e-6)
    eps = em_epsilon(acc.rho / 2, bound="bounded_range")
    assert eps == pytest.approx(math.sqrt(8 * acc.rho / 2), rel=1e-15)
    private_norm_bound(np.abs(np.random.default_rng(0).normal(size=500)), 0.9, acc, "q", eps, np.random.default_rng(1))
    assert acc.spent == pytest.approx(acc.rho / 2, rel=1e-12)
    (e,) = acc.ledger
    assert (e.mechanism, e.kind, e.sensitivity, e.scale) == ("q", "exponential", 1.0, eps)
    assert BR_NOTE in e.note


def test_signed_grid_is_symmetric_and_fine():
    assert SIGNED_GRID[SIGNED_GRID.size // 2] == 0.0
    pos = SIGNED_GRID[SIGNED_GRID > 0]
    assert np.allclose(pos, -SIGNED_GRID[SIGNED_GRID < 0][::-1])
    assert np.max(pos[1:] / pos[:-1]) < 1.023


# --------------------------------------------------------------------------
# details carry no unpaid data statistics
# --------------------------------------------------------------------------

#: keys a release's details may carry: public facts/parameters, or functions of privately released values
_ALLOWED_DETAILS = {
    "bound_quantile", "B_x", "B_y",  # raw_bounds: level (public) and private bounds
    "private_columns", "scale_q", "range_epsilon",  # private_basis: public
    "lambda", "sigma_xx", "sigma_xy", "sigma_lambda", "sigma",  # functions of released noisy values / bounds
    "m", "threshold",  # public
    "ridge", "clip", "clip_quantile", "k_sd",  # dpnewton: from the noisy Gram, the private clip quantile, public n, d, rho
    "guard",  # dpnewton: which checks of the point guard fired (from the noisy Gram and the paid counts of y's rows)
}


@pytest.mark.parametrize("name", ["adassp", "adassp_std", "ssp", "ssp_std", "dpgd", "dpgd_std", "sa_median",
                                  "dpnewton"])
def test_details_carry_no_unpaid_data_statistics(name):
    """Only public values or functions of paid-for releases (no clipped counts, exact depths, shares, ...)."""
    from dpstats.algorithms import TaskData, get

    rng = np.random.default_rng(7)
    X, y, facts = _sim(1500, rng)
    X[:20, 1] *= 100.0  # some rows get clipped
    out = get("linreg", name)().run(TaskData(X, y), facts, 1.0, 1e-6, np.random.default_rng(1))
    assert out.released
    assert set(out.details) <= _ALLOWED_DETAILS, set(out.details) - _ALLOWED_DETAILS


def test_tukeyem_details_and_reason_carry_no_distance_or_depth():
    """k_hat (the un-noised PTR statistic) and the sampled depth are data statistics: never reported."""
    from dpstats.algorithms import TaskData, get

    rng = np.random.default_rng(3)
    X, y, facts = _sim(4000, rng, d_free=1)
    X = X[:, :2]
    facts.columns, facts.d = ("Intercept", "x1"), 2
    alg = get("linreg", "tukeyem")(m=200)
    for eps in (0.02, 5.0):  # the first fails the test, the second releases
        out = alg.run(TaskData(X, y), facts, eps, 1e-6, np.random.default_rng(0))
        assert set(out.details) <= _ALLOWED_DETAILS, set(out.details) - _ALLOWED_DETAILS
        if not out.released:
            assert not any(ch.isdigit() for ch in out.reason.split("threshold")[0])
    outs = [alg.run(TaskData(X, y), facts, e, 1e-6, np.random.default_rng(0)).released for e in (0.02, 5.0)]
    assert outs == [False, True]


# --------------------------------------------------------------------------
# mechanisms are run at the parameters the ledger charges
# --------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["adassp", "adassp_std", "ssp", "ssp_std", "dpgd", "dpgd_std", "sa_median",
                                  "dpnewton"])
def test_exponential_mechanisms_run_at_the_charged_epsilon(name, monkeypatch):
    """Every grid exponential mechanism draws with the epsilon whose eps^2/8 the ledger records."""
    import dpstats.privacy.accounting as acc_mod
    import dpstats.privacy.mechanisms as mech
    from dpstats.algorithms import TaskData, get

    calls = []
    real = mech.exponential_mechanism

    def recording(scores, epsilon, sensitivity, rng, log_base=None, monotone=False):
        calls.append((epsilon, sensitivity, monotone))
        return real(scores, epsilon, sensitivity, rng, log_base=log_base, monotone=monotone)

    monkeypatch.setattr(mech, "exponential_mechanism", recording)
    monkeypatch.setattr(acc_mod, "exponential_mechanism", recording)  # the accountant's charging call
    X, y, facts = _sim(1500, np.random.default_rng(5))
    out = get("linreg", name)().run(TaskData(X, y), facts, 1.0, 1e-6, np.random.default_rng(2))
    charged = sorted(row[1] for row in out.ledger if BR_NOTE in row[3])
    assert calls and all(s == 1.0 and not mono for _, s, mono in calls)
    assert sorted(e**2 / 8.0 for e, _, _ in calls) == pytest.approx(charged, rel=1e-12)


class _RecordingRng:
    """Forwards to a Generator and records the Laplace scales and the restricted mechanism's exponent."""

    def __init__(self, seed):
        self._g = np.random.default_rng(seed)
        self.laplace_scales = []

    def laplace(self, loc=0.0, scale=1.0, size=None):
        self.laplace_scales.append(scale)
        return self._g.laplace(loc, scale, size)

    def __getattr__(self, item):
        return getattr(self._g, item)


def test_tukeyem_ptr_laplace_scale_and_sampler_exponent(monkeypatch):
    """Standard TukeyEM: PTR noise Laplace(1/eps_1) with eps_1 = eps/2, and sampling with exp(eps_2 depth / 2)."""
    import dpstats.algorithms.linreg.tukeyem as lt

    seen = []
    real = lt.sample_depth_region

    def recording(proj, t, eps2, rng, halve=True):
        seen.append((eps2, halve))
        return real(proj, t, eps2, rng, halve=halve)

    monkeypatch.setattr(lt, "sample_depth_region", recording)
    rng = np.random.default_rng(3)
    n = 4000
    X = np.column_stack([np.ones(n), rng.normal(size=n)])
    y = X @ np.array([1.0, 2.0]) + rng.normal(size=n)
    eps = 5.0
    for reference, scale, halve in ((False, 2.0 / eps, True), (True, eps / 2.0, False)):
        seen.clear()
        r = _RecordingRng(0)
        est, reason, acc, _ = lt._tukey(X, y, 200, eps, 1e-6, r, reference=reference)
        assert r.laplace_scales == [pytest.approx(scale)]
        assert est is not None, reason
        assert seen == [(pytest.approx(eps / 2.0), halve)]
        assert acc.spent == pytest.approx(eps)


def test_databounds_details_do_not_report_the_data_maxima():
    """adassp_databounds reads max ||x|| and max |y| without privacy; its details must not publish them too."""
    import warnings

    from dpstats.algorithms import TaskData, get

    X, y, facts = _sim(1500, np.random.default_rng(5))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = get("linreg", "adassp_databounds")().run(TaskData(X, y), facts, 1.0, 1e-6, np.random.default_rng(2))
    assert "B_x" not in out.details and "B_y" not in out.details
    assert set(out.details) <= _ALLOWED_DETAILS


def test_newton_step_sensitivity_two_c():
    """dpnewton's step: replacing one box-clipped row changes sum_i clip_C(w_i r_i) by at most 2C in L2."""
    rng = np.random.default_rng(10)
    d = 4
    for _ in range(100):
        A = rng.normal(size=(d, d))
        L = np.linalg.cholesky(A @ A.T + 0.1 * np.eye(d))
        theta = rng.normal(size=d) * 2
        Z = _box_rows(d - 1, [], True, rng, 8)
        u = rng.uniform(-1, 1, 8)
        W = np.linalg.solve(L, Z.T).T
        r = u - Z @ theta
        C = float(np.quantile(np.linalg.norm(W, axis=1) * np.abs(r), 0.5))

        def gsum(W, r):
            g = np.linalg.norm(W, axis=1) * np.abs(r)
            return W.T @ (r * np.minimum(1.0, C / np.maximum(g, 1e-300)))

        base = gsum(W, r)
        for z_new in _adversarial_box_rows(d - 1, [], True)[::3]:
            for u_new in (-1.0, 1.0):
                W2, r2 = W.copy(), r.copy()
                W2[0] = np.linalg.solve(L, z_new)
                r2[0] = u_new - z_new @ theta
                assert np.linalg.norm(gsum(W2, r2) - base) <= 2 * C * (1 + 1e-12)


def test_release_ssp_gram_only_draws_and_charges_its_joint_cost():
    """``release_ssp`` without ``u`` (X'X alone): noise N(0, sigma_xx^2) with sigma_xx^2 = (B2^2 + q4) / (2 rho), charged rho."""
    from dpstats.algorithms.linreg._ssp import release_ssp

    rng = np.random.default_rng(12)
    Z = rng.uniform(-1, 1, (40, 3)) / math.sqrt(3)  # ||z||^2 <= 1 = B2, sum z^4 <= 1 = q4
    mask = gram_pattern(3)
    acc = ZCDPAccountant(1.0, 1e-6)
    cal = ssp_calibration(1.0, 1.0, 1.0, None, acc.rho)
    H, b = release_ssp(Z, None, mask, cal, acc, "X'X", np.random.default_rng(3))
    sigma = math.sqrt(2.0 / (2.0 * acc.rho))  # independent of ssp_calibration
    G = Z.T @ Z
    expect = upper_to_sym(G[mask] + np.random.default_rng(3).normal(0.0, sigma, size=int(mask.sum())), mask)
    assert b is None
    assert np.allclose(H, expect, rtol=1e-12, atol=1e-12)
    (e,) = acc.ledger
    assert e.kind == "gaussian_joint" and e.scale == pytest.approx((sigma,), rel=1e-12)
    assert e.cost == pytest.approx(acc.rho, rel=1e-12)
