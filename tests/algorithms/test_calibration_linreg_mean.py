"""Noise scales and exponential mechanisms of the linreg and mean algorithms, pinned on real corpus instances.

Every test runs the registered algorithm itself on a corpus instance with a
:class:`~tests.noise_spy.RecordingGenerator` as its ``rng`` and with
pass-through spies on the exponential mechanisms (the spies record the call
and then call the real function). It then recomputes, *independently* of the
algorithm's calibration helpers, what the algorithm's docs page
(``docs/algorithms/<task>/<name>.md``) says it does:

* every Gaussian (or Laplace) draw has scale ``sensitivity / sqrt(2 rho_i)``
  (zCDP) with the sensitivity derived on the docs page from the public facts,
  the hyperparameters and values released earlier in the same run (a private
  bound or clip level is read off the grid point the exponential mechanism
  drew), and ``rho_i`` the share the docs page assigns;
* every exponential mechanism runs with score sensitivity 1 at the epsilon
  the docs page assigns, and the ledger charges it ``eps^2 / 8``
  (bounded range, Cesar and Rogers 2021) -- so the number of exponential
  mechanisms run equals the number of exponential-mechanism ledger entries;
* the ledger has exactly one entry per mechanism, with the expected cost, and
  sums to ``zcdp_rho(epsilon, delta)``;
* the release itself is recomputed from the data clipped to the documented
  bounds (or box, ball, basis) and the recorded noise, replayed on a fresh
  ``default_rng(seed)``: the rows are clipped to the geometry the
  sensitivities were computed for, and the noise drawn is the noise added.

Halving a sensitivity, doubling an epsilon share or dropping a charge in any
of these algorithms makes one of these comparisons fail (rtol 1e-9).

What cannot be pinned this way (and how it is covered instead)
--------------------------------------------------------------
* AdaSSP's ``lambda_min`` draw (recorded at scale ``sigma_lambda`` since it
  goes through ``acc.gaussian``) is also pinned through the ledger cost of
  that entry (``B_x^2 / (2 sigma_lambda^2)`` must be a third of the rest), the
  released ``sigma_lambda`` detail and, on an instance whose columns all have
  public ranges (mvd95), by recomputing the released ridge from
  ``lambda_min(X'X)`` and the replayed draw.
* BHS's noise is ``standard_normal(d)`` shaped by ``sqrt(c2 Sigma)``
  afterwards; it is pinned by replaying the recorded draws on a fresh
  generator (the RecordingGenerator draws exactly what ``default_rng`` does)
  and checking ``estimate = mu + V sqrt(c2 Lambda) z`` with ``mu, Sigma`` from
  pass-through spies on ``stable_mean`` / ``stable_covariance``. Its constants
  are those of the docs page after the review of its stability argument
  (score sensitivity 2: ``Lap(6/eps)``, ``T = k - 3 - 6 log(3/delta)/eps``;
  ``c2 = 810 lambda_0 log(12/delta) / (eps n)^2``).
* The temperature *inside* an exponential mechanism (``eps / (2 Delta)``) is
  not visible in the Gumbel draws alone; the spies replay the Gumbel values
  and check that the drawn index is the argmax at the documented temperature.
  This is a consistency check only: when one score dominates, a wrong
  temperature draws the same index.
* TukeyEM's restricted mechanism and its safety test are checked through the
  arguments ``sample_depth_region`` receives (``eps/2``, exponent halved) and a
  replay of its Gumbel draw at exponent ``eps_2 depth / 2``.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass

import numpy as np
import pytest
from scipy import stats

import dpstats.algorithms.linreg._private_ranges as lu
import dpstats.algorithms.mean._utils as mu_mod
import dpstats.algorithms.linreg.tukeyem as lt
import dpstats.algorithms.mean.bhs_affine as bhs_mod
import dpstats.algorithms.mean.kv_clip as kv_mod
import dpstats.privacy.accounting as acc_mod
import dpstats.privacy.mechanisms as mech
from dpstats.algorithms import get
from dpstats.privacy.accounting import zcdp_rho
from tests.noise_spy import RecordingGenerator

DELTA = 1e-6
RTOL = 1e-9

#: public grids the algorithms draw private bounds from (public constants, not calibration)
POSITIVE_GRID = lu.POSITIVE_GRID


# --------------------------------------------------------------------------
# instances and spies
# --------------------------------------------------------------------------


@functools.cache
def instance(iid: str):
    from dpstats.data.corpus import Corpus

    inst = Corpus.public().instance(iid)
    return inst.task_data(), inst.facts


@dataclass
class EMCall:
    epsilon: float
    sensitivity: float
    monotone: bool
    size: int
    index: int
    consistent: bool  # the drawn index is the argmax at the documented temperature (Gumbel replay)


def _gumbels_ahead(rng: np.random.Generator, size: int) -> np.ndarray:
    """The next ``size`` Gumbel values ``rng`` will draw, without advancing it."""
    g = np.random.Generator(type(rng.bit_generator)())
    g.bit_generator.state = rng.bit_generator.state
    return g.gumbel(size=size)


class Spies:
    """Pass-through spies on every exponential mechanism the linreg and mean algorithms can reach."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.em: list[EMCall] = []
        self.kv: list[tuple[float, bool]] = []  # (epsilon, consistent)
        self.tukey: list[tuple[float, bool, bool]] = []  # (eps2, halve, consistent)
        self.bhs: dict[str, tuple] = {}
        real_em = mech.exponential_mechanism

        def em(scores, epsilon, sensitivity, rng, log_base=None, monotone=False):
            s = np.asarray(scores, dtype=float)
            g = _gumbels_ahead(rng, s.size)
            j = real_em(scores, epsilon, sensitivity, rng, log_base=log_base, monotone=monotone)
            logits = epsilon / (2.0 * sensitivity) * s + (0.0 if log_base is None else np.asarray(log_base, float))
            logits = np.where(np.isfinite(logits), logits, -np.inf)
            self.em.append(EMCall(float(epsilon), float(sensitivity), bool(monotone), int(s.size), int(j),
                                  int(np.argmax(logits + g)) == j))
            return j

        for mod in (mech, acc_mod):  # acc_mod: the accountant's charging call acc.exponential
            monkeypatch.setattr(mod, "exponential_mechanism", em)

        real_nmb = mu_mod.noisy_max_bin

        def nmb(acc, mechanism, bins, n_bins, epsilon, rng):
            ids, counts = np.unique(np.asarray(bins, dtype=np.int64), return_counts=True)
            logits = epsilon / 2.0 * counts.astype(float)  # exp(eps c / 2): counts have sensitivity 1
            if n_bins > ids.size:
                logits = np.append(logits, math.log(n_bins - ids.size))
            k = int(np.argmax(logits + _gumbels_ahead(rng, logits.size)))
            out = real_nmb(acc, mechanism, bins, n_bins, epsilon, rng)
            ok = (out == ids[k]) if k < ids.size else (out not in set(ids.tolist()))
            self.kv.append((float(epsilon), bool(ok)))
            return out

        monkeypatch.setattr(kv_mod, "noisy_max_bin", nmb)

        real_sdr = lt.sample_depth_region

        def sdr(sorted_proj, t, eps2, rng, halve=True):
            logv = lt.log_depth_volumes(sorted_proj)
            top = logv.size
            depths = np.arange(t, top + 1)
            nxt = np.append(logv[t:], -np.inf)
            with np.errstate(invalid="ignore", divide="ignore"):
                logw = np.log(np.maximum(np.exp(logv[t - 1:] - logv[t - 1:].max()) - np.exp(nxt - logv[t - 1:].max()), 0))
            logw = logw + 0.5 * eps2 * depths  # exp(eps_2 depth / 2), the exponent the safety test assumes
            g = _gumbels_ahead(rng, depths.size)
            expect = int(depths[int(np.argmax(np.where(np.isfinite(logw), logw + g, -np.inf)))])
            point, depth = real_sdr(sorted_proj, t, eps2, rng, halve=halve)
            self.tukey.append((float(eps2), bool(halve), depth == expect))
            return point, depth

        monkeypatch.setattr(lt, "sample_depth_region", sdr)

        real_dlb = lt.distance_lower_bound

        def dlb(logv, t, eps2, delta, halve=True):
            out = real_dlb(logv, t, eps2, delta, halve=halve)
            self.ptr.append((np.array(logv), t, float(eps2), float(delta), bool(halve), out))
            return out

        self.ptr: list[tuple] = []
        monkeypatch.setattr(lt, "distance_lower_bound", dlb)

        real_cov, real_mean = bhs_mod.stable_covariance, bhs_mod.stable_mean

        def cov(*a, **k):
            out = real_cov(*a, **k)
            self.bhs["cov"] = out
            return out

        def mean(*a, **k):
            out = real_mean(*a, **k)
            self.bhs["mean"] = out
            return out

        monkeypatch.setattr(bhs_mod, "stable_covariance", cov)
        monkeypatch.setattr(bhs_mod, "stable_mean", mean)


@pytest.fixture
def spies(monkeypatch):
    return Spies(monkeypatch)


def run(task, name, iid, eps, seed, spies, **params):
    data, facts = instance(iid)
    rng = RecordingGenerator(seed)
    out = get(task, name)(**params).run(data, facts, eps, DELTA, rng)
    return out, rng, data, facts


def is_em(entry) -> bool:
    return "exponential mechanism" in entry[3]


def check_ems(out, spies, expected_eps):
    """EM calls: score sensitivity 1, documented epsilons in order, one ledger entry of eps^2/8 each."""
    calls = spies.em
    assert len(calls) == len(expected_eps), (len(calls), len(expected_eps))
    for c, e in zip(calls, expected_eps):
        assert c.sensitivity == 1.0 and not c.monotone
        assert c.epsilon == pytest.approx(e, rel=RTOL)
        assert c.consistent
    ems = [row for row in out.ledger if is_em(row)]
    assert len(ems) == len(calls)
    for row, c in zip(ems, calls):
        assert row[1] == pytest.approx(c.epsilon**2 / 8.0, rel=RTOL)


def check_ledger(out, expected_costs, capacity):
    """One entry per mechanism with the expected cost, summing to the budget."""
    costs = [row[1] for row in out.ledger]
    assert len(costs) == len(expected_costs), ([row[0] for row in out.ledger], len(expected_costs))
    assert costs == pytest.approx(expected_costs, rel=RTOL)
    assert sum(costs) == pytest.approx(capacity, rel=1e-9)


def check_draws(rng, expected):
    """Gaussian/Laplace draws: ``[(method, scale, count)]`` in order."""
    got = rng.noise()
    assert len(got) == len(expected), ([(d.method, d.scale, d.count) for d in got], expected)
    for d, (method, scale, count) in zip(got, expected):
        assert d.method == method and d.count == count
        if scale is not None:  # None: checked by the caller
            assert d.scale == pytest.approx(scale, rel=RTOL)


# --------------------------------------------------------------------------
# the public structure of a regression design (linreg index page)
# --------------------------------------------------------------------------


@dataclass
class Design:
    d: int
    intercept: bool
    n_grouped: int  # dummy columns inside one-hot groups
    groups: list  # sizes
    bounded: list  # (lo, hi) of other columns with a public range
    n_free: int
    y_bounds: tuple | None

    @property
    def pub2(self) -> float:
        """``1 + #groups + sum max(lo^2, hi^2)``: the public part of ``||x||^2`` (adassp page)."""
        return float(self.intercept) + len(self.groups) + sum(max(a * a, b * b) for a, b in self.bounded)

    @property
    def D(self) -> float:
        """Box columns + groups + intercept (adassp_std page)."""
        return float(self.d - int(self.intercept) - self.n_grouped + len(self.groups) + int(self.intercept))

    def n_released(self) -> int:
        """Upper-triangle entries of Z'Z without the structural zeros inside one-hot groups."""
        return self.d * (self.d + 1) // 2 - sum(g * (g - 1) // 2 for g in self.groups)


def design(facts) -> Design:
    cols, b = facts.columns, facts.bounds
    intercept = "Intercept" in cols and tuple(b.get("Intercept", ())) == (1.0, 1.0)
    groups: dict[str, int] = {}
    grouped = set()
    for c in cols:
        if c in set(facts.dummies) and tuple(b.get(c, ())) == (0.0, 1.0):
            groups[re.sub(r"\[[^\]]*\]", "", c)] = groups.get(re.sub(r"\[[^\]]*\]", "", c), 0) + 1
            grouped.add(c)
    others = [c for c in cols if c not in grouped and not (c == "Intercept" and intercept)]
    bounded = [tuple(map(float, b[c])) for c in others if c in b]
    yb = tuple(map(float, b[facts.outcome])) if facts.outcome in b else None
    return Design(len(cols), intercept, len(grouped), list(groups.values()), bounded,
                  len(others) - len(bounded), yb)


def range_eps(k: int, rho_r: float) -> list[float]:
    """Private ranges (adassp_std page): per column 1/5 of its share to the median, 4/5 to the scale."""
    e_c, e_s = math.sqrt(8 * rho_r / k / 5), math.sqrt(8 * rho_r / k * 4 / 5)
    return [e_c, e_s] * k


def gauss_sigma(sens: float, rho_share: float) -> float:
    """zCDP Gaussian mechanism: cost sens^2 / (2 sigma^2) = rho_share."""
    return sens / math.sqrt(2.0 * rho_share)


def joint_sigmas(B2: float, q4: float, By: float, ratio: float, rho: float) -> tuple[float, float]:
    """ssp page: sup over p of (B2^2 + q4 - p^2)/s_xx^2 + By^2 (2 B2 + 2p)/s_xy^2 equals 2 rho."""
    p = min(By**2 / ratio**2, B2)  # at s_xx = 1
    g = (B2**2 + q4 - p**2) + By**2 * (2 * B2 + 2 * p) / ratio**2
    s_xx = math.sqrt(g / (2.0 * rho))
    return s_xx, ratio * s_xx


# --------------------------------------------------------------------------
# linreg: bounds from public facts / private quantiles (adassp, ssp, dpgd)
# --------------------------------------------------------------------------

#: ab91: intercept, a one-hot year group, 10 free columns, y unbounded; bh90: bounded columns, y bounded
RAW_CASES = [("ab91_empluk_linreg", 1.0, 0), ("bh90_sleep_linreg", 3.0, 1)]


def raw_bounds_expected(des: Design, rho: float, spies):
    """adassp page step 1: one grid EM for the free block's norm, one for |y|; 0.1 of rho together."""
    k = int(des.n_free > 0) + int(des.y_bounds is None)
    if not k:
        return [], des.pub2, max(abs(v) for v in des.y_bounds), 0.0
    eps = math.sqrt(8 * 0.1 * rho / k)
    i = 0
    Bf2 = 0.0
    if des.n_free:
        assert spies.em[i].size == POSITIVE_GRID.size
        Bf2 = POSITIVE_GRID[spies.em[i].index] ** 2
        i += 1
    if des.y_bounds is None:
        assert spies.em[i].size == POSITIVE_GRID.size
        By = float(POSITIVE_GRID[spies.em[i].index])
    else:
        By = max(abs(v) for v in des.y_bounds)
    return [eps] * k, des.pub2 + Bf2, By, 0.1 * rho


def raw_rows(data, facts, spies):
    """adassp page, step 1, from the facts and the released bounds: intercept 1, public ranges clipped,
    the free block scaled to norm <= B_f, y clipped to its range or to [-B_y, B_y]."""
    X, y = data.X.copy(), data.y.copy()
    b, dummies, free = facts.bounds, set(facts.dummies), []
    for j, c in enumerate(facts.columns):
        if c == "Intercept" and tuple(b.get(c, ())) == (1.0, 1.0):
            X[:, j] = 1.0
        elif c in dummies and tuple(b.get(c, ())) == (0.0, 1.0):
            assert np.all((X[:, j] == 0) | (X[:, j] == 1))  # real one-hot data: enforce_structure leaves it
        elif c in b:
            X[:, j] = np.clip(X[:, j], *b[c])
        else:
            free.append(j)
    i = 0
    if free:
        Bf = float(POSITIVE_GRID[spies.em[0].index])
        nrm = np.linalg.norm(X[:, free], axis=1)
        X[:, free] *= np.minimum(1.0, Bf / np.maximum(nrm, 1e-300))[:, None]
        i = 1
    if facts.outcome in b:
        y = np.clip(y, *b[facts.outcome])
    else:
        By = float(POSITIVE_GRID[spies.em[i].index])
        y = np.clip(y, -By, By)
    return X, y


def sym_upper(G, vals):
    """Symmetric matrix from noisy upper-triangle (row-major) values."""
    M = np.zeros_like(G)
    M[np.triu_indices(G.shape[0])] = vals
    return M + np.triu(M, 1).T


@pytest.mark.parametrize("iid,eps,seed", RAW_CASES)
def test_adassp_scales(iid, eps, seed, spies):
    out, rng, data, facts = run("linreg", "adassp", iid, eps, seed, spies)
    des, rho = design(facts), zcdp_rho(eps, DELTA)
    em_eps, B2, By, spent = raw_bounds_expected(des, rho, spies)
    check_ems(out, spies, em_eps)
    share = (rho - spent) / 3.0  # three equal zCDP shares of what the bounds leave
    d = des.d
    s_l = gauss_sigma(B2, share)  # lambda_min: sensitivity B_x^2 (Weyl)
    s_xx = gauss_sigma(math.sqrt(2.0) * B2, share)  # upper triangle of X'X: sqrt(2) B_x^2
    s_xy = gauss_sigma(2.0 * math.sqrt(B2) * By, share)  # X'y: 2 B_x B_y
    check_draws(rng, [("normal", s_l, 1), ("normal", s_xx, d * (d + 1) // 2), ("normal", s_xy, d)])
    assert out.details["sigma_lambda"] == pytest.approx(s_l, rel=RTOL)
    check_ledger(out, [e * e / 8 for e in em_eps] + [share] * 3, rho)
    # the lambda_min draw has scale sigma_lambda: its charge B_x^4 / (2 sigma_lambda^2) must be the share
    lam_row = [row for row in out.ledger if row[0].startswith("lambda_min")]
    assert len(lam_row) == 1 and lam_row[0][1] == pytest.approx(B2**2 / (2 * s_l**2), rel=RTOL)
    # the released statistics are those of the rows clipped to the bounds the sensitivities assume
    Xc, yc = raw_rows(data, facts, spies)
    _, e_xx, e_xy = noise_values(seed, rng)
    G = Xc.T @ Xc
    H = sym_upper(G, G[np.triu_indices(d)] + e_xx) + out.details["lambda"] * np.eye(d)
    assert np.allclose(out.estimate, np.linalg.solve(H, Xc.T @ yc + e_xy), rtol=1e-6, atol=0)


def replay(seed: int, rng: RecordingGenerator) -> list:
    """The values of every recorded draw, drawn again from ``default_rng(seed)`` with the same calls."""
    g = np.random.default_rng(seed)
    return [getattr(g, dr.method)(**dr.args) for dr in rng.draws]


def noise_values(seed: int, rng: RecordingGenerator) -> list[np.ndarray]:
    """The values of the Gaussian/Laplace draws, in order."""
    vals = replay(seed, rng)
    return [np.asarray(vals[i], dtype=float) for i, dr in enumerate(rng.draws) if dr.method in ("normal", "standard_normal", "laplace")]


def test_adassp_lambda_min_noise_scale(spies):
    """The lambda_min draw has scale sigma_lambda: pin sigma_lambda also through the released ridge.

    mvd95 has public ranges for every column (rows are unchanged by the clipping), so ``lambda_min(X'X)`` is
    known; at epsilon = 0.7 both clamps of the adassp page are inactive and the ridge
    ``lambda = sigma_XX sqrt(d log(2 d^2 / rho)) - (lambda_min + sigma_lambda Z - sigma_lambda sqrt(log(6/delta)))``
    depends on sigma_lambda = B_x^2 / sqrt(2 rho_share).
    """
    eps, seed = 0.7, 8
    out, rng, data, facts = run("linreg", "adassp", "mvd95_did_linreg", eps, seed, spies)
    des, rho = design(facts), zcdp_rho(eps, DELTA)
    em_eps, B2, _By, spent = raw_bounds_expected(des, rho, spies)
    assert des.n_free == 0 and B2 == 4.0 and len(em_eps) == 1
    lo, hi = prior_box_linreg(facts)
    assert np.all((data.X >= lo) & (data.X <= hi))
    lam_min = float(np.linalg.eigvalsh(data.X.T @ data.X)[0])
    share, d = (rho - spent) / 3.0, des.d
    s_l, s_xx = gauss_sigma(B2, share), gauss_sigma(math.sqrt(2.0) * B2, share)
    draws = rng.noise()
    assert draws[0].method == "normal" and draws[0].count == 1
    assert draws[0].scale == pytest.approx(s_l, rel=RTOL)
    e = float(replay(seed, rng)[next(i for i, dr in enumerate(rng.draws) if dr is draws[0])])  # the noise added
    lam_t = lam_min + e - s_l * math.sqrt(math.log(6.0 / DELTA))
    lam = s_xx * math.sqrt(d * math.log(2.0 * d * d / 0.05)) - lam_t
    assert lam_t > 0 and lam > 0  # neither clamp active: the check below is not vacuous
    assert out.details["lambda"] == pytest.approx(lam, rel=1e-8)


def prior_box_linreg(facts):
    lo = np.array([facts.bounds.get(c, (-np.inf, np.inf))[0] for c in facts.columns], dtype=float)
    hi = np.array([facts.bounds.get(c, (-np.inf, np.inf))[1] for c in facts.columns], dtype=float)
    return lo, hi


@pytest.mark.parametrize("iid,eps,seed", RAW_CASES)
def test_ssp_scales(iid, eps, seed, spies):
    out, rng, data, facts = run("linreg", "ssp", iid, eps, seed, spies)
    des, rho = design(facts), zcdp_rho(eps, DELTA)
    em_eps, B2, By, spent = raw_bounds_expected(des, rho, spies)
    check_ems(out, spies, em_eps)
    s_xx, s_xy = joint_sigmas(B2, B2**2, By, math.sqrt(2.0) * By / math.sqrt(B2), rho - spent)
    d = des.d
    check_draws(rng, [("normal", s_xx, d * (d + 1) // 2), ("normal", s_xy, d)])
    check_ledger(out, [e * e / 8 for e in em_eps] + [rho - spent], rho)
    Xc, yc = raw_rows(data, facts, spies)
    e_xx, e_xy = noise_values(seed, rng)
    G = Xc.T @ Xc
    w, V = np.linalg.eigh(sym_upper(G, G[np.triu_indices(d)] + e_xx))
    theta = V @ ((V.T @ (Xc.T @ yc + e_xy)) / np.maximum(w, s_xx))  # eigenvalues raised to sigma_XX
    assert np.allclose(out.estimate, theta, rtol=1e-6, atol=0)


@pytest.mark.parametrize("iid,eps,seed", RAW_CASES)
def test_dpgd_every_step(iid, eps, seed, spies):
    out, rng, data, facts = run("linreg", "dpgd", iid, eps, seed, spies)
    des, rho = design(facts), zcdp_rho(eps, DELTA)
    em_eps, B2, By, spent = raw_bounds_expected(des, rho, spies)
    check_ems(out, spies, em_eps)
    T, C = 25, 1.0  # rows scaled to ||z|| <= 1, |u| <= 1; clip C = 1
    sigma = gauss_sigma(2.0 * C, (rho - spent) / T)  # replace-one sensitivity 2C, T equal shares
    check_draws(rng, [("normal", sigma, des.d)] * T)
    check_ledger(out, [e * e / 8 for e in em_eps] + [(rho - spent) / T] * T, rho)
    # every step: the clipped gradient sum of the rows scaled into the unit ball, plus its noise
    Xc, yc = raw_rows(data, facts, spies)
    Bx = math.sqrt(B2)
    Z, u, theta, n = Xc / Bx, yc / By, np.zeros(des.d), data.n
    assert np.all(np.linalg.norm(Z, axis=1) <= 1 + 1e-12) and np.all(np.abs(u) <= 1)
    for e in noise_values(seed, rng):
        G = Z * (Z @ theta - u)[:, None]
        g = G.T @ np.minimum(1.0, C / np.maximum(np.linalg.norm(G, axis=1), 1e-300)) + e
        theta = theta - g / n
    assert np.allclose(out.estimate, theta * By / Bx, rtol=1e-6, atol=0)


# --------------------------------------------------------------------------
# linreg: the privately standardised basis (adassp_std, ssp_std, dpgd_std, sa_median, dpnewton)
# --------------------------------------------------------------------------

STD_CASES = [("ab91_empluk_linreg", 1.0, 2), ("bh90_sleep_linreg", 10.0, 3)]


def basis_expected(des: Design, rho_r: float):
    k = des.n_free + int(des.y_bounds is None)
    return (range_eps(k, rho_r), rho_r) if k else ([], 0.0)


@dataclass
class StdBasis:
    Z: np.ndarray
    u: np.ndarray
    center: np.ndarray
    half: np.ndarray
    yc: float
    yh: float
    icpt: int | None
    mask: np.ndarray  # released upper-triangle entries of Z'Z

    def to_raw(self, theta):
        beta = self.yh * theta / self.half
        if self.icpt is not None:
            j, others = self.icpt, np.arange(theta.size) != self.icpt
            beta[j] = self.yh * theta[j] + self.yc - float(np.sum(self.center[others] * beta[others]))
        return beta


def _cell(j: int) -> tuple[float, float]:
    g = lu.SIGNED_GRID
    return (float(g[j - 1]) if j > 0 else -math.inf), float(g[j])


def _cell_center(a: float, b: float) -> float:
    return b if (not math.isfinite(a) or b == 0.0) else 0.5 * (a + b)


def std_basis(data, facts, spies, q: float, k_sd: float = 3.0) -> StdBasis:
    """adassp_std page, step 1-2, from the facts and the released ranges (median cell, deviation quantile)."""
    from scipy.special import ndtri

    X, y = data.X.copy(), data.y
    _n, d = X.shape
    b, dummies = facts.bounds, set(facts.dummies)
    icpt = next((j for j, c in enumerate(facts.columns) if c == "Intercept" and tuple(b.get(c, ())) == (1.0, 1.0)), None)
    center, half = np.zeros(d), np.ones(d)
    groups: dict[str, list[int]] = {}
    box, free = [], []
    for j, c in enumerate(facts.columns):
        if j == icpt:
            X[:, j] = 1.0
        elif c in dummies and tuple(b.get(c, ())) == (0.0, 1.0):
            groups.setdefault(re.sub(r"\[[^\]]*\]", "", c), []).append(j)
        elif c in b:
            lo, hi = map(float, b[c])
            X[:, j] = np.clip(X[:, j], lo, hi)
            box.append(j)
            if icpt is not None:
                center[j], half[j] = (hi + lo) / 2, ((hi - lo) / 2 if hi > lo else max(abs(hi), 1.0))
            else:
                half[j] = max(abs(lo), abs(hi))
        else:
            free.append(j)
            box.append(j)
    factor = k_sd / float(ndtri((1 + q) / 2))
    calls = iter(spies.em)

    def private_range():
        med, sc = next(calls), next(calls)
        assert med.size == lu.SIGNED_GRID.size and sc.size == POSITIVE_GRID.size
        c = _cell_center(*_cell(med.index))
        h = float(POSITIVE_GRID[sc.index]) * factor
        return (c, h) if icpt is not None else (0.0, abs(c) + h)

    for j in free:
        center[j], half[j] = private_range()
    if facts.outcome in b:
        lo, hi = map(float, b[facts.outcome])
        yc, yh = ((lo + hi) / 2, (hi - lo) / 2) if (icpt is not None and hi > lo) else (0.0, max(abs(lo), abs(hi)))
    else:
        yc, yh = private_range()
    half = np.where(half > 0, half, 1.0)
    Z = X.copy()
    if icpt is not None:
        Z -= np.outer(X[:, icpt], center)
    Z /= half
    Z[:, box] = np.clip(Z[:, box], -1.0, 1.0)
    for g in groups.values():
        assert np.all((Z[:, g] == 0) | (Z[:, g] == 1)) and np.all(Z[:, g].sum(axis=1) <= 1)
    mask = np.triu(np.ones((d, d), dtype=bool))
    for g in groups.values():
        mask[np.ix_(g, g)] &= np.eye(len(g), dtype=bool)
    return StdBasis(Z, np.clip((y - yc) / yh, -1.0, 1.0), center, half, yc, yh if yh > 0 else 1.0, icpt, mask)


def sym_masked(G, mask, vals):
    M = np.zeros_like(G)
    M[mask] = vals
    return M + np.triu(M, 1).T


@pytest.mark.parametrize("iid,eps,seed", STD_CASES)
def test_adassp_std_scales(iid, eps, seed, spies):
    out, rng, data, facts = run("linreg", "adassp_std", iid, eps, seed, spies)
    des, rho = design(facts), zcdp_rho(eps, DELTA)
    em_eps, spent = basis_expected(des, 0.1 * rho)
    check_ems(out, spies, em_eps)
    D, share = des.D, (rho - spent) / 3.0
    s_l = gauss_sigma(D, share)  # lambda_min(Z'Z): D
    s_xx = gauss_sigma(math.sqrt(D * D + D), share)  # U(Z'Z) without structural zeros: sqrt(D^2 + D)
    s_xy = gauss_sigma(2.0 * math.sqrt(D), share)  # Z'u: 2 sqrt(D)
    check_draws(rng, [("normal", s_l, 1), ("normal", s_xx, des.n_released()), ("normal", s_xy, des.d)])
    assert out.details["sigma_lambda"] == pytest.approx(s_l, rel=RTOL)
    check_ledger(out, [e * e / 8 for e in em_eps] + [share] * 3, rho)
    lam_row = [row for row in out.ledger if row[0].startswith("lambda_min")]
    assert len(lam_row) == 1 and lam_row[0][1] == pytest.approx(D**2 / (2 * s_l**2), rel=RTOL)
    B = std_basis(data, facts, spies, out.details["scale_q"])
    assert np.all(np.sum(B.Z**2, axis=1) <= D + 1e-9)  # the geometry the sensitivities assume
    _, e_xx, e_xy = noise_values(seed, rng)
    G = B.Z.T @ B.Z
    H = sym_masked(G, B.mask, G[B.mask] + e_xx) + out.details["lambda"] * np.eye(des.d)
    theta = np.linalg.solve(H, B.Z.T @ B.u + e_xy)
    assert np.allclose(out.estimate, B.to_raw(theta), rtol=1e-6, atol=0)


@pytest.mark.parametrize("iid,eps,seed", STD_CASES)
def test_ssp_std_scales(iid, eps, seed, spies):
    out, rng, data, facts = run("linreg", "ssp_std", iid, eps, seed, spies)
    des, rho = design(facts), zcdp_rho(eps, DELTA)
    em_eps, spent = basis_expected(des, 0.1 * rho)
    check_ems(out, spies, em_eps)
    D = des.D
    s_xx, s_xy = joint_sigmas(D, D, 1.0, math.sqrt(2.0) / math.sqrt(D), rho - spent)
    check_draws(rng, [("normal", s_xx, des.n_released()), ("normal", s_xy, des.d)])
    check_ledger(out, [e * e / 8 for e in em_eps] + [rho - spent], rho)
    B = std_basis(data, facts, spies, out.details["scale_q"])
    e_xx, e_xy = noise_values(seed, rng)
    G = B.Z.T @ B.Z
    w, V = np.linalg.eigh(sym_masked(G, B.mask, G[B.mask] + e_xx))
    theta = V @ ((V.T @ (B.Z.T @ B.u + e_xy)) / np.maximum(w, s_xx))
    assert np.allclose(out.estimate, B.to_raw(theta), rtol=1e-6, atol=0)


@pytest.mark.parametrize("iid,eps,seed", STD_CASES)
def test_dpgd_std_every_step(iid, eps, seed, spies):
    out, rng, data, facts = run("linreg", "dpgd_std", iid, eps, seed, spies)
    des, rho = design(facts), zcdp_rho(eps, DELTA)
    em_eps, spent = basis_expected(des, 0.1 * rho)
    check_ems(out, spies, em_eps)
    T = 25
    sigma = gauss_sigma(2.0, (rho - spent) / T)
    check_draws(rng, [("normal", sigma, des.d)] * T)
    check_ledger(out, [e * e / 8 for e in em_eps] + [(rho - spent) / T] * T, rho)
    B = std_basis(data, facts, spies, out.details["scale_q"])
    rD = math.sqrt(des.D)
    Z, theta = B.Z / rD, np.zeros(des.d)
    assert np.all(np.linalg.norm(Z, axis=1) <= 1 + 1e-12)
    for e in noise_values(seed, rng):
        Gr = Z * (Z @ theta - B.u)[:, None]
        theta = theta - (Gr.T @ np.minimum(1.0, 1.0 / np.maximum(np.linalg.norm(Gr, axis=1), 1e-300)) + e) / data.n
    assert np.allclose(out.estimate, B.to_raw(theta / rD), rtol=1e-6, atol=0)


@pytest.mark.parametrize("iid,eps,seed", STD_CASES)
def test_sa_median_every_coordinate(iid, eps, seed, spies):
    out, rng, data, facts = run("linreg", "sa_median", iid, eps, seed, spies)
    des, rho = design(facts), zcdp_rho(eps, DELTA)
    em_eps, spent = basis_expected(des, 0.1 * rho)
    d = des.d
    med = [math.sqrt(8 * (rho - spent) / d)] * d  # each coordinate 1/d of what the ranges leave
    check_ems(out, spies, em_eps + med)
    assert all(c.size == lu.SIGNED_GRID.size for c in spies.em[len(em_eps):])
    check_draws(rng, [])
    check_ledger(out, [e * e / 8 for e in em_eps + med], rho)
    # the release is the middle of each drawn median cell, mapped back to the raw columns
    B = std_basis(data, facts, spies, out.details["scale_q"])
    theta = np.array([_cell_center(*_cell(c.index)) for c in spies.em[len(em_eps):]])
    assert np.allclose(out.estimate, B.to_raw(theta), rtol=1e-9, atol=0)


@pytest.mark.parametrize("iid,eps,seed", STD_CASES + [("abadie03_401k_linreg", 3.0, 4)])
def test_dpnewton_every_stage(iid, eps, seed, spies):
    out, rng, data, facts = run("linreg", "dpnewton", iid, eps, seed, spies)
    des, rho = design(facts), zcdp_rho(eps, DELTA)
    k = des.n_free + int(des.y_bounds is None)
    rho_r = min(0.4, max(0.1, 0.07 * k)) * rho if k else 0.0
    em_eps, spent = basis_expected(des, rho_r)
    eps_c = math.sqrt(8 * 0.05 * rho)  # gradient clip quantile
    check_ems(out, spies, em_eps + [eps_c])
    D, d, T = des.D, des.d, 3
    s_xx, s_xy = joint_sigmas(D, D, 1.0, 1.0, 0.4 * rho)  # preconditioner, ratio 1
    assert s_xy == s_xx
    C = float(POSITIVE_GRID[spies.em[-1].index])  # the released clip level
    assert out.details["guard"] == []  # the point guard does not fire on these instances
    # the point guard's two counts of y's rows (away from the centre, above it): 0.1 rho (at most a third of what
    # is left for the steps), sensitivity sqrt(2)
    rho_g = min(0.1 * rho, (rho - spent - 0.4 * rho - eps_c**2 / 8) / 3) if des.y_bounds is None else 0.0
    guard = [("normal", gauss_sigma(math.sqrt(2.0), rho_g), 2)] if rho_g else []
    rest = rho - spent - 0.4 * rho - rho_g - eps_c**2 / 8
    check_draws(rng, [("normal", s_xx, des.n_released()), ("normal", s_xx, d)] + guard
                + [("normal", None, d)] * T)
    check_ledger(out, [e * e / 8 for e in em_eps] + [0.4 * rho] + ([rho_g] if rho_g else []) + [eps_c**2 / 8]
                 + [rest / T] * T, rho)
    # replay (dpnewton page, steps 2-6): the Gram and the Newton steps use the box-clipped rows, the steps clip at C
    from scipy import linalg

    B = std_basis(data, facts, spies, out.details["scale_q"], k_sd=out.details["k_sd"])
    assert np.all(np.sum(B.Z**2, axis=1) <= D + 1e-9)
    e_xx, e_xy, *steps = noise_values(seed, rng)
    steps = steps[1:] if rho_g else steps
    G = B.Z.T @ B.Z
    lam = s_xx * math.sqrt(d)
    assert out.details["ridge"] == pytest.approx(lam, rel=RTOL)
    w, V = linalg.eigh(sym_masked(G, B.mask, G[B.mask] + e_xx))
    w = np.maximum(w, 0.0) + lam
    theta = V @ ((V.T @ (B.Z.T @ B.u + e_xy)) / w)
    L = linalg.cholesky((V * w) @ V.T, lower=True)
    W = linalg.solve_triangular(L, B.Z.T, lower=True).T
    wn = np.linalg.norm(W, axis=1)
    draws = rng.noise()[-T:]
    for e, dr in zip(steps, draws):
        # the clip is capped by its public bound sqrt(D / lambda_min(P)) (1 + sqrt(D) ||theta||) (post-processing)
        Ct = min(C, math.sqrt(D / float(np.min(w))) * (1.0 + math.sqrt(D) * float(np.linalg.norm(theta))))
        sigma = gauss_sigma(2.0 * Ct, rest / T)  # Newton steps: sensitivity 2 C_t, T equal shares
        assert dr.scale == pytest.approx(sigma, rel=RTOL)
        r = B.u - B.Z @ theta
        g = W.T @ (r * np.minimum(1.0, Ct / np.maximum(wn * np.abs(r), 1e-300))) + e
        theta = theta + linalg.solve_triangular(L.T, g, lower=False)
    assert out.details["clip"] == Ct
    if d >= 3:
        v = L.T @ theta
        theta = theta * max(0.0, 1.0 - (d - 2) * sigma**2 / float(v @ v))
    assert np.allclose(out.estimate, B.to_raw(theta), rtol=1e-6, atol=0)


def test_structure_of_the_test_instances():
    """The instances cover what the sensitivities depend on: groups, free and bounded columns, y with and without a range."""
    a, b = design(instance("ab91_empluk_linreg")[1]), design(instance("bh90_sleep_linreg")[1])
    assert a.groups == [6] and a.n_free == 10 and a.y_bounds is None and a.intercept
    assert b.groups == [] and len(b.bounded) == 3 and b.n_free == 2 and b.y_bounds == (0.0, 10080.0)


# --------------------------------------------------------------------------
# TukeyEM (pure DP ledger; the docs page's eps_1 = eps_2 = eps/2)
# --------------------------------------------------------------------------


def safe_distance(logv: np.ndarray, t: int, eps2: float, delta: float) -> int:
    """tukeyem page, step 3, by brute force: the largest k with some g >= 1 and
    V_{t-k-1} / V_{t+k+g+1} e^{-eps_2 g / 2} <= delta / (8 e^{eps_2}) (-1 if none); V_i = exp(logv[i-1])."""
    top, thr, best = logv.size, math.log(delta / (8 * math.exp(eps2))), -1
    for k in range(t):
        if t - k - 1 < 1:
            break
        g = np.arange(1, top - (t + k + 1) + 1)
        if g.size == 0:
            continue
        with np.errstate(invalid="ignore"):
            if np.any(logv[t - k - 2] - logv[t + k + g] - eps2 * g / 2 <= thr):
                best = k
    return best


@pytest.mark.parametrize("eps,released", [(10.0, True), (0.3, False)])
def test_tukeyem_laplace_and_restricted_mechanism(eps, released, spies):
    out, rng, _data, _facts = run("linreg", "tukeyem", "star_k_linreg", eps, 5, spies)
    assert out.released == released
    check_draws(rng, [("laplace", 2.0 / eps, 1)])  # Lap(1/eps_1), eps_1 = eps/2
    assert out.details["threshold"] == pytest.approx(math.log(1 / (2 * DELTA)) / (eps / 2), rel=RTOL)
    # the safety test: t = m/4, eps_2 = eps/2, exponent eps_2 g / 2, and its k_hat is the docs' largest safe k
    assert len(spies.ptr) == 1
    logv, t, eps2, delta, halve, k_hat = spies.ptr[0]
    assert (t, delta, halve) == (1000 // 4, DELTA, True) and eps2 == pytest.approx(eps / 2, rel=RTOL)
    assert k_hat == safe_distance(logv, t, eps / 2, DELTA)
    assert spies.em == []
    if released:
        assert [(e, h) for e, h, _ in spies.tukey] == [(pytest.approx(eps / 2, rel=RTOL), True)]
        assert all(ok for _, _, ok in spies.tukey)
        assert [row[1] for row in out.ledger] == pytest.approx([eps / 2, eps / 2], rel=RTOL)
        assert out.epsilon == pytest.approx(eps, rel=RTOL) and out.delta == DELTA
    else:
        assert spies.tukey == []
        assert [row[1] for row in out.ledger] == pytest.approx([eps / 2], rel=RTOL)


# --------------------------------------------------------------------------
# the sce wrappers draw exactly what the linreg algorithms draw
# --------------------------------------------------------------------------

LINREG = ["adassp", "adassp_std", "ssp", "ssp_std", "dpgd", "dpgd_std", "dpnewton", "sa_median", "tukeyem"]


@pytest.mark.parametrize("name", LINREG)
def test_sce_wrapper_draws_the_linreg_scales(name, spies):
    params = {"m": 40} if name == "tukeyem" else {}
    data, facts = instance("ab91_empluk")
    outs = []
    for task in ("linreg", "sce"):
        spies.em.clear()
        rng = RecordingGenerator(6)
        out = get(task, name)(**params).run(data, facts, 3.0, DELTA, rng)
        outs.append((out, [(d.method, d.scale, d.count) for d in rng.draws], [(c.epsilon, c.sensitivity) for c in spies.em]))
    (lin, lin_draws, lin_em), (sce, sce_draws, sce_em) = outs
    assert lin_draws == sce_draws and lin_em == sce_em
    assert lin.ledger == sce.ledger
    assert len(lin_draws) > 0
    if lin.released:
        assert sce.estimate[0] == lin.estimate[facts.coef_index]


# --------------------------------------------------------------------------
# mean
# --------------------------------------------------------------------------


def prior(facts, R=1e6):
    lo = np.array([facts.bounds[c][0] if c in facts.bounds else -R for c in facts.columns], dtype=float)
    hi = np.array([facts.bounds[c][1] if c in facts.bounds else R for c in facts.columns], dtype=float)
    return lo, hi


def coinpress_expected(n, d, center, radius, rhos, beta=0.01):
    """coinpress page: C = min(sqrt(r^2 + 6r + gamma^2), r + gamma), sigma_t = 2C/(n sqrt(2 rho_t))."""
    lb = math.log(1 / beta)
    gamma = math.sqrt(d + 2 * math.sqrt(d * lb) + 2 * lb)
    r, sig = radius, []
    for rho_t in rhos:
        C = min(math.sqrt(r * r + 6 * r + gamma * gamma), r + gamma)
        s = 2 * C / (n * math.sqrt(2 * rho_t))
        sig.append(s)
        r = gamma * math.sqrt(1 / n + s * s)
    return sig


def schedule(rho):
    return [0.25 * rho / 9] * 9 + [0.75 * rho]  # t = 10: the first 9 share rho/4, the last 3 rho/4


MEAN_CASES = [("mean_mroz87_lwage", 1.0, 0), ("mean_abadie03_401k", 3.0, 1)]


@pytest.mark.parametrize("iid,eps,seed", MEAN_CASES)
def test_coinpress_every_step(iid, eps, seed, spies):
    out, rng, data, facts = run("mean", "coinpress", iid, eps, seed, spies)
    n, d = data.X.shape
    rho = zcdp_rho(eps, DELTA)
    lo, hi = prior(facts)
    sig = coinpress_expected(n, d, (lo + hi) / 2, float(np.linalg.norm((hi - lo) / 2)), schedule(rho))
    check_draws(rng, [("normal", s, d) for s in sig])
    check_ledger(out, schedule(rho), rho)
    assert spies.em == []
    # the rows are projected onto the balls the sensitivities 2C/n were computed for
    est = coinpress_replay(data.X, (lo + hi) / 2, float(np.linalg.norm((hi - lo) / 2)), schedule(rho), noise_values(seed, rng))
    assert np.allclose(out.estimate, est, rtol=1e-9, atol=0)


def coinpress_replay(Z, center, radius, rhos, noises, beta=0.01):
    """The estimate from the replayed noise: c_t = mean of rows projected onto B(c_{t-1}, C_t) + noise_t."""
    n, d = Z.shape
    lb = math.log(1 / beta)
    gamma = math.sqrt(d + 2 * math.sqrt(d * lb) + 2 * lb)
    c, r = np.asarray(center, float), radius
    for rho_t, e in zip(rhos, noises, strict=True):
        C = min(math.sqrt(r * r + 6 * r + gamma * gamma), r + gamma)
        diff = Z - c
        nrm = np.linalg.norm(diff, axis=1)
        c = (c + diff * np.minimum(1.0, C / np.maximum(nrm, 1e-300))[:, None]).mean(axis=0) + e
        r = gamma * math.sqrt(1 / n + (2 * C / (n * math.sqrt(2 * rho_t))) ** 2)
    return c


@pytest.mark.parametrize("iid,eps,seed", MEAN_CASES)
def test_coinpress_scaled_every_step(iid, eps, seed, spies):
    out, rng, data, facts = run("mean", "coinpress_scaled", iid, eps, seed, spies)
    n, d = data.X.shape
    rho = zcdp_rho(eps, DELTA)
    eps_j = math.sqrt(8 * 0.25 * rho / d)
    check_ems(out, spies, [eps_j] * d)
    lo, hi = prior(facts)
    zq = math.sqrt(2) * stats.norm.ppf((1 + 0.9) / 2)
    s = np.empty(d)
    for j, c in enumerate(spies.em):  # the scale is read off the grid point each mechanism drew
        w = hi[j] - lo[j]
        grid = mu_mod.scale_grid(w * 1e-8, w, 8)
        assert c.size == grid.size
        s[j] = grid[c.index] / zq
        if facts.columns[j] in facts.bounds:
            s[j] = min(s[j], w / 2)
        s[j] = max(s[j], w * 1e-12)
    assert np.allclose(out.details["scales"], s, rtol=RTOL)
    rhos = schedule(0.75 * rho)
    sig = coinpress_expected(n, d, (lo + hi) / 2 / s, float(np.linalg.norm((hi - lo) / 2 / s)), rhos)
    check_draws(rng, [("normal", v, d) for v in sig])
    check_ledger(out, [eps_j**2 / 8] * d + rhos, rho)
    est = coinpress_replay(data.X / s, (lo + hi) / 2 / s, float(np.linalg.norm((hi - lo) / 2 / s)), rhos,
                           noise_values(seed, rng))
    assert np.allclose(out.estimate, est * s, rtol=1e-9, atol=0)


@pytest.mark.parametrize("iid,eps,seed", MEAN_CASES)
def test_kv_clip_scales(iid, eps, seed, spies):
    out, rng, data, _facts = run("mean", "kv_clip", iid, eps, seed, spies)
    n, d = data.X.shape
    rho = zcdp_rho(eps, DELTA)
    eps0 = math.sqrt(8 * 0.5 * rho / (2 * d))  # 2d histogram draws share half of rho
    assert [e for e, _ in spies.kv] == pytest.approx([eps0] * (2 * d), rel=RTOL)
    assert all(ok for _, ok in spies.kv)
    ems = [row for row in out.ledger if is_em(row)]
    assert [row[1] for row in ems] == pytest.approx([eps0**2 / 8] * (2 * d), rel=RTOL)
    a, b = out.details["lower"], out.details["upper"]
    sigma = gauss_sigma(float(np.linalg.norm(b - a)) / n, 0.5 * rho)  # box of widths b - a: ||b - a|| / n
    check_draws(rng, [("normal", sigma, d)])
    check_ledger(out, [eps0**2 / 8] * (2 * d) + [0.5 * rho], rho)
    # the rows are clipped to the box whose widths set the sensitivity
    (e,) = noise_values(seed, rng)
    assert np.allclose(out.estimate, np.clip(data.X, a, b).mean(axis=0) + e, rtol=1e-9, atol=0)


def box_replay(X, center, half, noise):
    """adaptive_clip page: live columns scaled to [-1, 1] by the released box, clipped, averaged, noised."""
    live = half > 0
    est = np.array(center, dtype=float)
    Z = np.clip((X[:, live] - center[live]) / half[live], -1.0, 1.0)
    est[live] = center[live] + half[live] * (Z.mean(axis=0) + noise)
    return est


def whiten_guard_replay(est, facts, out):
    """adaptive_whiten page, point guard: clamp to the released box, the prior centre where ``guard`` fired."""
    center, half = np.asarray(out.details["center"]), np.asarray(out.details["half"])
    lo, hi = mu_mod.prior_box(facts)
    est = np.where(half > 0, np.clip(est, center - half, center + half), est)
    return np.where(np.asarray(out.details["guard"]), (lo + hi) / 2.0, est)


def adaptive_ranges_expected(facts, r_share, rho):
    find = [c not in facts.bounds for c in facts.columns]
    du = sum(find)
    return ([math.sqrt(8 * r_share * rho / (3 * du))] * (3 * du) if du else []), (r_share * rho if du else 0.0)


@pytest.mark.parametrize("iid,eps,seed", MEAN_CASES)
def test_adaptive_clip_scales(iid, eps, seed, spies):
    out, rng, data, facts = run("mean", "adaptive_clip", iid, eps, seed, spies)
    n, _d = data.X.shape
    rho = zcdp_rho(eps, DELTA)
    em_eps, spent = adaptive_ranges_expected(facts, 0.5, rho)
    check_ems(out, spies, em_eps)
    live = int(np.sum(np.asarray(out.details["half"]) > 0))
    sigma = gauss_sigma(2 * math.sqrt(live) / n, rho - spent)  # box [-1, 1]^d': 2 sqrt(d')/n
    check_draws(rng, [("normal", sigma, live)])
    check_ledger(out, [e * e / 8 for e in em_eps] + [rho - spent], rho)
    (e,) = noise_values(seed, rng)
    est = box_replay(data.X, np.asarray(out.details["center"]), np.asarray(out.details["half"]), e)
    assert np.allclose(out.estimate, est, rtol=1e-9, atol=0)


@pytest.mark.parametrize("iid,eps,seed,path", [("mean_mroz87_lwage", 0.3, 0, "low signal"),
                                               ("mean_grogger91", 1.0, 0, "constant column"),
                                               ("mean_grogger91", 3.0, 0, "box chosen"),
                                               ("mean_abadie03_401k", 3.0, 1, "ball"),
                                               ("mean_bn92_wage2", 10.0, 2, "ball")])
def test_adaptive_whiten_scales(iid, eps, seed, path, spies):
    """Every path of the docs page: box only (low signal, a degenerate range), box chosen, whitened ball."""
    out, rng, data, facts = run("mean", "adaptive_whiten", iid, eps, seed, spies)
    n, d = data.X.shape
    rho = zcdp_rho(eps, DELTA)
    low = n * math.sqrt(rho) < 100
    assert low == (path == "low signal")
    assert out.details.get("path", out.details["final"]) == path
    r_share = 0.5 if low else 0.35
    if path in ("low signal", "constant column"):
        # ranges, then the box mean on the live columns with everything else
        em_eps, spent = adaptive_ranges_expected(facts, r_share, rho)
        check_ems(out, spies, em_eps)
        live = int(np.sum(np.asarray(out.details["half"]) > 0))
        assert (live < d) == (path == "constant column")
        sigma = gauss_sigma(2 * math.sqrt(live) / n, rho - spent)
        check_draws(rng, [("normal", sigma, live)])
        check_ledger(out, [e * e / 8 for e in em_eps] + [rho - spent], rho)
        (e,) = noise_values(seed, rng)
        est = box_replay(data.X, np.asarray(out.details["center"]), np.asarray(out.details["half"]), e)
        assert np.allclose(out.estimate, whiten_guard_replay(est, facts, out), rtol=1e-9, atol=0)
        return
    em_eps, spent = adaptive_ranges_expected(facts, r_share, rho)
    eps_b = math.sqrt(8 * 0.05 * rho / 2)  # two radius draws share radius_share
    check_ems(out, spies, em_eps + [eps_b, eps_b])
    gz = np.concatenate([[0.0], mu_mod.scale_grid(math.sqrt(d) * 1e-3, math.sqrt(d), 16)])
    cz = spies.em[len(em_eps)]
    assert cz.size == gz.size
    C = max(gz[cz.index], gz[1])  # released radius of z
    sig_m = gauss_sigma(math.sqrt(2) * (C * C + 1) / n, 0.1 * rho)  # Frobenius sqrt(2)(C^2 + 1)/n
    rest = rho * (1 - r_share - 0.1 - 0.05)
    if path == "ball":
        sigma = gauss_sigma(2 * out.details["radius"] / n, rest)  # ball of radius R in u: 2R/n
    else:
        sigma = gauss_sigma(2 * math.sqrt(d) / n, rest)  # box in z: 2 sqrt(d)/n
    check_draws(rng, [("normal", sig_m, (d + 1) * (d + 2) // 2), ("normal", sigma, d)])
    check_ledger(out, [e * e / 8 for e in em_eps] + [eps_b**2 / 8, 0.1 * rho, eps_b**2 / 8, rest], rho)
    center, half = np.asarray(out.details["center"]), np.asarray(out.details["half"])
    e_m, e = noise_values(seed, rng)
    if path == "box chosen":
        assert np.allclose(out.estimate, whiten_guard_replay(box_replay(data.X, center, half, e), facts, out),
                           rtol=1e-9, atol=0)
        return
    # ball: rows shrunk into ||z|| <= C for the second moment, projected onto B(W m_z, R) in u for the mean
    Z = np.clip((data.X - center) / half, -1.0, 1.0)
    nz = np.linalg.norm(Z, axis=1)
    A = np.hstack([Z * np.minimum(1.0, C / np.maximum(nz, 1e-300))[:, None], np.ones((n, 1))])
    iu = np.triu_indices(d + 1)
    M = np.zeros((d + 1, d + 1))
    M[iu] = (A.T @ A / n)[iu] + e_m
    M = M + M.T - np.diag(np.diag(M))
    mz = np.clip(M[:d, d], -1.0, 1.0)
    lam, V = np.linalg.eigh(M[:d, :d] - np.outer(mz, mz))
    lam = np.maximum(lam, sig_m * math.sqrt(d) + 1e-12)
    W = (V / np.sqrt(lam)).T
    U, cu, R = Z @ W.T, W @ mz, out.details["radius"]
    du = np.linalg.norm(U - cu, axis=1)
    u_est = (cu + (U - cu) * np.minimum(1.0, R / np.maximum(du, 1e-300))[:, None]).mean(axis=0) + e
    assert np.allclose(out.estimate, whiten_guard_replay(center + half * ((V * np.sqrt(lam)) @ u_est), facts, out),
                       rtol=1e-7, atol=0)


# --------------------------------------------------------------------------
# BHS (pure-DP ledger; constants as its docs page states them)
# --------------------------------------------------------------------------


def test_bhs_declines_below_its_sample_size_without_drawing(spies):
    out, rng, _data, _facts = run("mean", "bhs_affine", "mean_abadie03_401k", 10.0, 0, spies)
    assert not out.released and out.ledger == () and rng.draws == []


def test_bhs_laplace_and_gaussian_scales(spies):
    eps, seed = 10.0, 7
    out, rng, data, _facts = run("mean", "bhs_affine", "mean_fetter13_ols", eps, seed, spies)
    n, d = data.X.shape
    ln = math.log(n)
    lam0 = 2 * (d + 2 * math.sqrt(d * ln) + 2 * ln)
    k = math.ceil(6 * math.log(6 / DELTA) / eps) + 4
    assert n >= 20 * k * lam0 and n // 2 >= 10 * k * lam0
    assert [row[1] for row in out.ledger] == pytest.approx([eps], rel=RTOL) and out.delta == DELTA
    lap = rng.of("laplace")
    # the (eps/3, delta/6) test on a score of replace-one sensitivity 2: Lap(6/eps)
    assert len(lap) == 1 and lap[0].scale == pytest.approx(6 / eps, rel=RTOL)
    # PASS iff z + Lap(6/eps) < T, T = (k - 3) - 6 log(3/delta)/eps
    assert out.details["ptr_threshold"] == pytest.approx((k - 3) - 6 * math.log(3 / DELTA) / eps, rel=RTOL)
    assert out.details["k"] == k and out.details["lambda0"] == pytest.approx(lam0, rel=RTOL)
    assert out.released, out
    normals = rng.of("standard_normal", "normal")
    assert len(normals) == 1 and normals[0].method == "standard_normal" and normals[0].count == d
    # replay the draws to recover z, then estimate = mu + V sqrt(c2 Lambda) z
    values = replay(seed, rng)
    z = values[next(i for i, dr in enumerate(rng.draws) if dr is normals[0])]
    Sigma, mu = spies.bhs["cov"][0], spies.bhs["mean"][0]
    c2 = 810 * lam0 * math.log(12 / DELTA) / (eps**2 * n**2)
    lam, V = np.linalg.eigh((Sigma + Sigma.T) / 2)
    expect = mu + V @ (np.sqrt(np.maximum(lam, 0) * c2) * z)
    assert np.allclose(out.estimate, expect, rtol=RTOL, atol=0)
    assert np.any(np.abs(out.estimate - mu) > 0)


@pytest.mark.parametrize("task,name,kw,expected", [
    # PTR Laplace at eps_1 = eps / 2 (scale 1 / eps_1; the reference code's scale eps_1), depth score sensitivity 1
    ("linreg", "tukeyem", {"n": 4000}, {"propose-test-release (Laplace)": (1.0, 0.2),
                                       "restricted Tukey-depth exponential mechanism": (1.0, None)}),
    ("linreg", "tukeyem_refcode", {"n": 4000}, {"propose-test-release (Laplace)": (1.0, 5.0),
                                               "restricted Tukey-depth exponential mechanism": (1.0, None)}),
    # the score test: sensitivity 2, Laplace scale 2 / (eps / 3)
    ("mean", "bhs_affine", {"n": 123000, "columns": 1, "levels": 5},
     {"bhs23 (PTR eps/3, delta/6; Gaussian 2eps/3, 5delta/6)": (2.0, 0.6)}),
])
def test_measurements_record_their_sensitivity_and_scale(task, name, kw, expected):
    """A measurement's ledger entry records the sensitivity and scale of its argument (at eps 10)."""
    import warnings

    from dpstats.algorithms import Release
    from dpstats.audit.neighbours import generated

    nb = generated(task, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = get(task, name)().run(nb.base, nb.facts, 10.0, 1e-6, np.random.default_rng(0))
    assert isinstance(out, Release), getattr(out, "reason", "")
    got = {e.mechanism: (e.sensitivity, e.scale) for e in out.ledger}
    for name_, (sens, scale) in expected.items():
        assert got[name_][0] == pytest.approx(sens, rel=1e-12)
        assert got[name_][1] == (None if scale is None else pytest.approx(scale, rel=1e-12))


def test_dpnewton_interval_adds_the_noise_of_the_steps_it_drew(monkeypatch):
    """The sigma that the interval's covariance (newton_meat) adds is the scale the ledger charged for the last step."""
    import warnings

    import dpstats.algorithms.linreg.dpnewton as dn
    from dpstats.data.corpus import Corpus

    seen = []
    real = dn.newton_meat

    def spy(W, r, wn, C, sigma, *args, **kw):
        seen.append(sigma)
        return real(W, r, wn, C, sigma, *args, **kw)

    monkeypatch.setattr(dn, "newton_meat", spy)
    inst = Corpus.public().instance("engel_food_linreg")
    cls = get("linreg", "dpnewton")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = cls(**cls.interval_params).run(inst.task_data(), inst.facts, 10.0, 1e-6, np.random.default_rng(0))
    steps = [e for e in out.ledger if e.mechanism.startswith("Newton step")]
    assert len(seen) == 1 and steps
    assert seen[0] == pytest.approx(steps[-1].scale, rel=1e-12)
