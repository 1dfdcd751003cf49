"""Noise scales and exponential mechanisms of the sce natives, pinned by running the algorithms.

Every standard sce algorithm of our own files (``algorithms/sce/*.py``) is run on real
corpus instances with a :class:`~tests.noise_spy.RecordingGenerator` as its
``rng`` and a pass-through spy on the exponential mechanism (the real
function is called; the spy only records). Then, per algorithm:

* **Counts.** The number of exponential mechanisms run equals the number of
  exponential-mechanism entries in ``Release.ledger``, the number of Gumbel
  draws equals that too (so no mechanism bypasses the spy), and the number of
  Gaussian/Laplace draws equals the number of noise entries.
* **Shares.** Every ledger cost equals the share the algorithm's docs page
  (``docs/algorithms/sce/<name>.md``) assigns it, recomputed here from the
  budget and the public hyperparameters.
* **Exponential mechanisms.** Each call's temperature
  ``epsilon / (2 sensitivity)`` (or ``epsilon / sensitivity`` if it claims
  monotone scores) equals ``eps / (2 k)`` with ``eps`` the epsilon its ledger
  entry charges (``cost`` for pure DP, ``sqrt(8 cost)`` for the zCDP
  bounded-range charge ``eps^2/8``) and ``k`` the score sensitivity the docs
  derive (1, or the number of matchings for Theil-Sen). The spy also replays
  the call's Gumbel noise from a copy of the generator state and checks that
  the real mechanism picked ``argmax(eps * score / (2 k) + log base + Gumbel)``
  at the *charged* epsilon, so the temperature inside the mechanism is pinned
  as well.
* **Scores.** Wrappers of the score-building functions (grid quantile, Smith's
  median, widened median; pass-through, the real function runs) recompute the
  scores and base measure from the function's inputs by the docs' definition;
  the mechanism must receive exactly those (a score scaled by 2 is an epsilon
  doubled).
* **Noise.** Every Gaussian/Laplace scale actually drawn equals the
  sensitivity derived on the docs page, computed here independently from the
  public facts, the hyperparameters and the *released* intermediate values
  (grid cells picked by the exponential mechanisms, recovered from the spy on
  public grids rebuilt here), divided by the charged share: Laplace
  ``b = Delta / eps``, Gaussian ``sigma = Delta / sqrt(2 rho)``.

What is not pinned independently, and why:

* ``fwl_score``: the public residual bounds ``B_u``, ``B_v`` (used as the clip
  when a public 0/1 column is not clipped privately) come from the noisy Gram
  matrix by post-processing; the Gram's noise values are not recorded, so they
  are read from ``Release.details``. The private clips ``C_u``, ``C_v`` *are*
  recomputed from the grid cells the mechanisms picked.
* ``blb_coinpress``: the mean stage's standard-deviation bound ``sqrt(k v_up)``
  depends on ``v_up``, a post-processing of the noisy variance iterates; it is
  read from ``details["variance_upper"]``. The CoinPress radius recursion, the
  variance stage and the mean ball are recomputed here.
* The sensitivities of the score functions (grid quantile, Smith's median,
  widened median) are brute-forced in ``test_alg_sce_mechanisms.py``; here the
  scores are checked against their definition, not their sensitivity. The
  widened score is checked as the code defines it, the distance of ``m/2`` to
  ``[#{z < r - w}, #{z < r + w}]``; the docs page's ``max_{|s - r| <= w} u(s)``
  is the same function except where tied values make ``#{z < s}`` jump over
  ``m/2`` inside the window (there the code's score is 0 and the literal max
  is not); the code's form is the one brute-forced to sensitivity 1.
"""

from __future__ import annotations

import importlib

import copy
import math
import warnings
from dataclasses import dataclass

import numpy as np
import pytest

import dpstats.algorithms.sce._utils as sce_utils
from dpstats.privacy import accounting, mechanisms, quantiles
from dpstats.algorithms import Decline, Release, get
from dpstats.privacy.accounting import PrivacyLeakWarning, zcdp_rho
from tests.noise_spy import RecordingGenerator

DELTA = 1e-6
RTOL = 1e-9
_REAL_EM = mechanisms.exponential_mechanism

EM_PREFIXES = ("grid quantile", "grid median", "Smith median", "exponential-mechanism median",
               "widened exponential-mechanism median")
NOISE_PREFIXES = ("Laplace", "Gaussian", "CoinPress")


# --------------------------------------------------------------------------
# public grids and tail bounds, rebuilt from their definitions
# --------------------------------------------------------------------------


def _geometric(lo: float, hi: float, per_octave: int) -> np.ndarray:
    k = math.ceil(math.log2(hi / lo) * per_octave) + 1
    return lo * 2.0 ** (np.arange(k) / per_octave)


POS_GRID = _geometric(1e-10, 1e10, 8)  # scales (positive_grid())
SYM_GRID = np.concatenate([-POS_GRID[::-1], [0.0], POS_GRID])  # locations (symmetric_grid())
ROW_GRID = _geometric(1e-3, 1e4, 8)  # fwl_score row-norm bound
BLOCK_GRID = _geometric(1e-20, 1e20, 4)  # fwl_blocks clipping scales
VAR_GRID = _geometric(1e-30, 1e30, 4)  # blb_coinpress variance ball


def _interval(j_lo: int, j_hi: int, grid: np.ndarray, widen: float) -> tuple[float, float]:
    """The widened interval from the two grid cells picked (lower edge of the first, upper of the second)."""
    lo = float(grid[j_lo - 1]) if j_lo > 0 else float(grid[0])
    hi = float(grid[j_hi])
    if hi < lo:
        lo, hi = hi, lo
    if hi - lo <= 0:
        j = int(np.searchsorted(grid, lo))
        lo, hi = float(grid[max(j - 1, 0)]), float(grid[min(j + 1, grid.size - 1)])
    w = hi - lo
    return lo - widen * w, hi + widen * w


def _tailbound(b: float) -> float:
    """Radius holding a 1-d standard Gaussian with probability 1 - b (CoinPress, d = 1)."""
    lb = math.log(1.0 / b)
    return math.sqrt(1.0 + 2.0 * math.sqrt(lb) + 2.0 * lb)


def _schedule(total: float, t: int) -> list[float]:
    return [total] if t == 1 else [total / (4.0 * (t - 1))] * (t - 1) + [0.75 * total]


# --------------------------------------------------------------------------
# the pass-through spy on the exponential mechanism
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class EMCall:
    epsilon: float
    sensitivity: float
    monotone: bool
    scores: np.ndarray
    log_base: np.ndarray | None
    gumbel: np.ndarray
    index: int
    scores_checked: bool

    @property
    def temperature(self) -> float:
        return self.epsilon / (self.sensitivity if self.monotone else 2.0 * self.sensitivity)

    def replay(self, factor: float) -> int:
        """The index ``argmax(factor * score + log base + Gumbel)`` with this call's own Gumbel noise."""
        logits = factor * self.scores
        if self.log_base is not None:
            logits = logits + self.log_base
        logits = np.where(np.isfinite(logits), logits, -np.inf)
        return int(np.argmax(logits + self.gumbel))


class EMSpy:
    """Records each exponential mechanism, then returns what the real one returns.

    The wrappers of the score-building functions push the scores (and base
    measure) the docs define, computed here from the function's inputs; the
    next mechanism call must receive exactly those.
    """

    def __init__(self) -> None:
        self.calls: list[EMCall] = []
        self.expected: list[tuple[np.ndarray, np.ndarray | None]] = []

    def __call__(self, scores, epsilon, sensitivity, rng, log_base=None, monotone=False):
        state = copy.deepcopy(rng.bit_generator.state)
        idx = _REAL_EM(scores, epsilon, sensitivity, rng, log_base=log_base, monotone=monotone)
        twin = np.random.Generator(np.random.PCG64())
        twin.bit_generator.state = state
        scores = np.array(scores, dtype=float)
        base = None if log_base is None else np.array(log_base, dtype=float)
        checked = False
        if self.expected:
            exp_scores, exp_base = self.expected.pop(0)
            np.testing.assert_array_equal(scores, exp_scores, err_msg="scores differ from the docs' definition")
            if exp_base is None:
                assert base is None
            else:
                np.testing.assert_allclose(base, exp_base, rtol=1e-12, atol=0)
            checked = True
        self.calls.append(EMCall(
            float(epsilon), float(sensitivity), bool(monotone), scores, base,
            twin.gumbel(size=scores.size), int(idx), checked,
        ))
        return idx


def _grid_scores(x, q, grid):
    """Docs: cell (g_{j-1}, g_j], r = max(1, ceil(q m)), c(g) = #{x <= g}: -max(0, c(g_{j-1}) - r + 1, r - c(g_j))."""
    x = np.asarray(x, dtype=float).reshape(-1)
    r = max(1, math.ceil(q * x.size))
    c = (x[:, None] <= np.asarray(grid)[None, :]).sum(axis=0).astype(float)
    c_prev = np.concatenate([[0.0], c[:-1]])
    return -np.maximum(0.0, np.maximum(c_prev - r + 1, r - c))


def _lengths_log(edges):
    with np.errstate(divide="ignore"):
        return np.log(np.diff(edges))


def _smith(x, lo, hi, q):
    """Docs: intervals between the sorted clipped values, score -|i - q m|, base measure their lengths."""
    z = np.sort(np.clip(np.asarray(x, dtype=float).reshape(-1), lo, hi))
    return -np.abs(np.arange(z.size + 1) - q * z.size), _lengths_log(np.concatenate([[lo], z, [hi]]))


def _widened(x, lo, hi, width):
    """Smith's score widened by ``width`` (distance of m/2 to the ranks reachable within ``width``)."""
    z = np.sort(np.clip(np.asarray(x, dtype=float).reshape(-1), lo, hi))
    edges = np.unique(np.concatenate([[lo, hi], z, np.clip(z - width, lo, hi), np.clip(z + width, lo, hi)]))
    mid = 0.5 * (edges[:-1] + edges[1:])
    a = (z[None, :] < (mid - width)[:, None]).sum(axis=1)
    b = (z[None, :] < (mid + width)[:, None]).sum(axis=1)
    half = z.size / 2.0
    dist = np.maximum(0.0, np.maximum(a - half, half - b))
    return -dist, _lengths_log(edges)


@pytest.fixture
def spy(monkeypatch):
    from dpstats import algorithms

    algorithms._load_builtin()
    s = EMSpy()
    # the sce mechanisms run through the charging call acc.exponential, which looks the mechanism up here
    monkeypatch.setattr(accounting, "exponential_mechanism", s)
    monkeypatch.setattr(mechanisms, "exponential_mechanism", s)
    real_gqi = quantiles.private_grid_index
    real_pmi = sce_utils.private_median_interval
    real_pwm = sce_utils.private_widened_median

    def gqi(x, grid, epsilon, rng, *, q=None, **charge):
        s.expected.append((_grid_scores(x, q, grid), None))
        return real_gqi(x, grid, epsilon, rng, q=q, **charge)

    def pmi(x, lo, hi, epsilon, rng, q=0.5, **charge):
        s.expected.append(_smith(x, lo, hi, q))
        return real_pmi(x, lo, hi, epsilon, rng, q=q, **charge)

    def pwm(x, lo, hi, width, epsilon, rng, **charge):
        s.expected.append(_widened(x, lo, hi, width))
        return real_pwm(x, lo, hi, width, epsilon, rng, **charge)

    # private_grid_cell looks private_grid_index up in its module; the sce modules that import the index call
    monkeypatch.setattr(quantiles, "private_grid_index", gqi)
    monkeypatch.setattr(sce_utils, "private_grid_index", gqi)
    for mod in [sce_utils] + [importlib.import_module(n) for n in algorithms.BUILTIN_MODULES if ".sce." in n]:
        for name, wrapper in (("private_median_interval", pmi), ("private_widened_median", pwm)):
            if hasattr(mod, name):
                monkeypatch.setattr(mod, name, wrapper)
    yield s
    assert not s.expected, "a score was built but no exponential mechanism ran on it"


# --------------------------------------------------------------------------
# data and runs
# --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def corpus():
    from dpstats.data.corpus import Corpus

    return Corpus.public()


_CACHE: dict = {}


def _instance(corpus, iid):
    if iid not in _CACHE:
        inst = corpus.instance(iid)
        _CACHE[iid] = (inst.task_data(), inst.facts)
    return _CACHE[iid]


def _run(name, data, facts, eps, seed, **params):
    rng = RecordingGenerator(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyLeakWarning)  # standard entries only
        out = get("sce", name)(**params).run(data, facts, eps, DELTA, rng)
    assert isinstance(out, (Release, Decline))
    _check_total(out, eps)
    return out, rng


def _split(out):
    """Ledger entries (mechanism, cost, unit, note) split into exponential mechanisms and noise."""
    ems, noise = [], []
    for row in out.ledger:
        if row[0].startswith(NOISE_PREFIXES):
            noise.append(row)
        elif row[0].startswith(EM_PREFIXES):
            ems.append(row)
        else:
            raise AssertionError(f"ledger entry of unknown kind: {row!r}")
    return ems, noise


def _cks_epsilon(rho: float, delta: float) -> float:
    """Canonne, Kamath, Steinke (2020), Prop. 12, minimised over a fine grid of alpha (independent of privacy.py)."""
    a = 1.0 + np.exp(np.linspace(-20.0, 30.0, 400001))
    vals = a * rho + np.log1p(-1.0 / a) - (math.log(delta) + np.log(a)) / (a - 1.0)
    return float(np.min(vals))


def _check_total(out, eps):
    """The ledger spends exactly the budget: epsilon (pure DP), or the rho that converts back to it (zCDP)."""
    assert (out.epsilon, out.delta) == (eps, DELTA) or isinstance(out, Decline)
    units = {row[2] for row in out.ledger}
    total = sum(row[1] for row in out.ledger)
    assert len(units) == 1, units
    if units == {"epsilon"}:
        assert total == pytest.approx(eps, rel=RTOL)
    else:
        assert units == {"rho"}
        assert _cks_epsilon(total, DELTA) == pytest.approx(eps, rel=1e-6)


def _charged_eps(row) -> float:
    """The epsilon an exponential-mechanism entry charges: its cost (pure DP) or sqrt(8 rho) (bounded range)."""
    cost, unit = row.cost, row.unit
    if unit == "epsilon":
        return cost
    assert unit == "rho", row
    return math.sqrt(8.0 * cost)


def _check_ems(out, rng, spy, em_sens=None):
    """Counts, temperatures and replayed picks of the exponential mechanisms against the ledger.

    ``em_sens[i]`` is the score sensitivity the docs derive for the i-th mechanism (default 1).
    Returns the ledger's exponential-mechanism and noise entries.
    """
    ems, noise = _split(out)
    gumbels = rng.of("gumbel")
    assert len(spy.calls) == len(ems), ([c.epsilon for c in spy.calls], ems)
    assert len(gumbels) == len(spy.calls), "an exponential mechanism bypassed the spy"
    # one draw per noise entry, one per block of a joint Gaussian mechanism
    assert len(rng.noise()) == sum(len(r.scale) if r.kind == "gaussian_joint" else 1 for r in noise), (
        rng.noise(), noise)
    # every other draw is data-independent randomness: partitions, matchings, resample counts, and the
    # uniform point inside the interval a continuous (Smith / widened) mechanism picked
    others = {d.method for d in rng.draws} - {"gumbel", "normal", "standard_normal", "laplace"}
    assert others <= {"permutation", "multinomial", "uniform"}, others
    assert len(rng.of("uniform")) == sum(c.log_base is not None for c in spy.calls)
    em_sens = em_sens or [1.0] * len(ems)
    for call, g, row, k in zip(spy.calls, gumbels, ems, em_sens):
        assert g.count == call.scores.size
        factor = _charged_eps(row) / (2.0 * k)
        assert call.temperature == pytest.approx(factor, rel=RTOL), (row, call.epsilon, call.sensitivity)
        assert call.replay(factor) == call.index, row
        assert call.scores_checked, ("scores not checked against the docs", row)
    return ems, noise


def _costs(rows):
    return [r[1] for r in rows]


# --------------------------------------------------------------------------
# subsample and aggregate (pure DP)
# --------------------------------------------------------------------------


SA_CASES = [("mroz87_lwage", 0.5, 0), ("mroz87_lwage", 3.0, 1), ("nsw_exp", 1.0, 2)]


@pytest.mark.parametrize("iid,eps,seed", SA_CASES)
def test_sa_coef_median(corpus, spy, iid, eps, seed):
    data, facts = _instance(corpus, iid)
    out, rng = _run("sa_coef_median", data, facts, eps, seed)
    ems, noise = _check_ems(out, rng, spy)
    # docs: two range quantiles at 0.15 eps each, Smith's median at 0.7 eps; no noise draw
    assert _costs(ems) == pytest.approx([0.15 * eps, 0.15 * eps, 0.7 * eps], rel=RTOL)
    assert noise == [] and rng.noise() == []
    assert [c.scores.size for c in spy.calls[:2]] == [SYM_GRID.size] * 2
    lo, hi = _interval(spy.calls[0].index, spy.calls[1].index, SYM_GRID, 1.0)
    assert out.details["range"] == pytest.approx((lo, hi), rel=RTOL)


@pytest.mark.parametrize("iid,eps,seed", SA_CASES)
def test_sa_coef_winsorized(corpus, spy, iid, eps, seed):
    data, facts = _instance(corpus, iid)
    out, rng = _run("sa_coef_winsorized", data, facts, eps, seed)
    ems, noise = _check_ems(out, rng, spy)
    assert _costs(ems) == pytest.approx([0.15 * eps, 0.15 * eps], rel=RTOL)
    assert _costs(noise) == pytest.approx([0.7 * eps], rel=RTOL)
    # docs: Laplace scale (U - L) / eps_mean on the private range [L, U]
    lo, hi = _interval(spy.calls[0].index, spy.calls[1].index, SYM_GRID, 1.0)
    (draw,) = rng.noise()
    assert draw.method == "laplace" and draw.count == 1
    assert draw.scale == pytest.approx((hi - lo) / noise[0][1], rel=RTOL)


@pytest.mark.parametrize("iid,eps,seed", SA_CASES)
def test_fwl_blocks(corpus, spy, iid, eps, seed):
    data, facts = _instance(corpus, iid)
    out, rng = _run("fwl_blocks", data, facts, eps, seed)
    ems, noise = _check_ems(out, rng, spy)
    # docs: pilot 30% (three mechanisms), scales 20% (two), the rest 75% / 25% to the two Laplace sums
    assert _costs(ems) == pytest.approx([0.1 * eps] * 5, rel=RTOL)
    assert _costs(noise) == pytest.approx([0.375 * eps, 0.125 * eps], rel=RTOL)
    assert [c.scores.size for c in spy.calls[3:5]] == [BLOCK_GRID.size] * 2
    C_R = 3.0 * BLOCK_GRID[spy.calls[3].index]
    C_D = 2.0 * BLOCK_GRID[spy.calls[4].index]
    d_R, d_D = rng.noise()
    assert d_R.method == d_D.method == "laplace" and d_R.count == d_D.count == 1
    assert d_R.scale == pytest.approx(2.0 * C_R / noise[0][1], rel=RTOL)  # sensitivity 2 C_R
    assert d_D.scale == pytest.approx(C_D / noise[1][1], rel=RTOL)  # sensitivity C_D


# --------------------------------------------------------------------------
# simple regression (pure DP, d = 2)
# --------------------------------------------------------------------------


# engel_food: no public bounds (two private ranges); nsw_exp: x bounded (one); bm04_call: both bounded
SIMPLE_CASES = [("engel_food", 1.0, 0), ("engel_food", 4.0, 1), ("nsw_exp", 1.0, 2), ("bm04_call", 0.5, 3)]


def _n_private_ranges(facts) -> int:
    out = 0
    for nm in (facts.columns[facts.coef_index], facts.outcome):
        b = facts.bounds.get(nm)
        out += not (b is not None and math.isfinite(b[0]) and math.isfinite(b[1]) and b[1] > b[0])
    return out


def _range_costs(facts, eps):
    """Docs: 20% of epsilon shared by the columns without public bounds, two quantiles each."""
    k = _n_private_ranges(facts)
    return ([0.2 * eps / (2 * k)] * (2 * k), 0.8 * eps) if k else ([], eps)


@pytest.mark.parametrize("iid,eps,seed", SIMPLE_CASES)
def test_noisystats(corpus, spy, iid, eps, seed):
    data, facts = _instance(corpus, iid)
    out, rng = _run("noisystats", data, facts, eps, seed)
    ems, noise = _check_ems(out, rng, spy)
    ranges, eps_rest = _range_costs(facts, eps)
    assert _costs(ems) == pytest.approx(ranges, rel=RTOL)
    assert _costs(noise) == pytest.approx([eps_rest / 2] * 2, rel=RTOL)
    sens = 1.0 - 1.0 / facts.n  # ncov and nvar of [0, 1] data
    draws = rng.noise()
    assert [d.method for d in draws] == ["laplace", "laplace"]
    for d, row in zip(draws, noise):
        assert d.scale == pytest.approx(sens / row[1], rel=RTOL)


@pytest.mark.parametrize("k", [1, 2])
@pytest.mark.parametrize("name", ["theilsen_match", "theilsen_wide"])
@pytest.mark.parametrize("iid,eps,seed", SIMPLE_CASES)
def test_theilsen(corpus, spy, iid, eps, seed, name, k):
    data, facts = _instance(corpus, iid)
    out, rng = _run(name, data, facts, eps, seed, matchings=k)
    ranges, eps_rest = _range_costs(facts, eps)
    # docs: one row changes at most k slopes, so the median's score has sensitivity k
    ems, noise = _check_ems(out, rng, spy, em_sens=[1.0] * len(ranges) + [float(k)])
    assert _costs(ems) == pytest.approx(ranges + [eps_rest], rel=RTOL)
    assert noise == [] and rng.noise() == []


# --------------------------------------------------------------------------
# private Frisch-Waugh (zCDP)
# --------------------------------------------------------------------------


def _binary(facts, nm) -> bool:
    b = facts.bounds.get(nm)
    return nm in facts.dummies or (b is not None and tuple(map(float, b)) == (0.0, 1.0))


def _bounded(facts, nm) -> bool:
    b = facts.bounds.get(nm)
    return b is not None and math.isfinite(b[0]) and math.isfinite(b[1])


def _stage1(facts, use_bounds=False):
    """Public facts of stage 1: the standardised columns (controls, x, y) and which are standardised privately."""
    weighted = bool(getattr(facts, "weighted", False))
    j = facts.coef_index
    icpt = None if weighted else next(
        c for c, nm in enumerate(facts.columns)
        if nm == "Intercept" or facts.bounds.get(nm) in ((1.0, 1.0), (1, 1)))
    controls = [facts.columns[c] for c in range(facts.d) if c not in (j, icpt)]
    names = controls + [facts.columns[j], facts.outcome]
    private = []
    for nm in names:
        if weighted:
            private.append(True)
        elif _binary(facts, nm):
            private.append(False)
        else:
            b = facts.bounds.get(nm)
            ranged = use_bounds and _bounded(facts, nm) and b[1] > b[0]
            private.append(not ranged)
    return weighted, controls, names, sum(private)


def _gram_checks(rho, ems, noise, spy, rng, m, n_cols, g_share):
    n1 = 2 * m + 1
    assert _costs(ems[:n1]) == pytest.approx([0.25 * rho / n1] * n1, rel=RTOL)
    # the row-norm bound B is the upper edge of the cell the last stage-1 mechanism picked
    row_call = spy.calls[n1 - 1]
    assert row_call.scores.size == ROW_GRID.size
    B = ROW_GRID[row_call.index]
    gram_row = noise[0]
    assert gram_row[0].startswith("Gaussian Gram")
    assert gram_row[1] == pytest.approx(g_share * rho, rel=RTOL)
    # docs: first row s - s' and the rest ss' - s's'' bounded together through c = s.s' (largest at c = -1)
    delta_G = math.sqrt(2.0 * B**4 + 2.0 * B**2 + 1.0) if B >= 1.0 else math.sqrt(B**4 + 4.0 * B**2)
    gram = rng.noise()[0]
    assert gram.method == "normal" and gram.count == (n_cols + 1) ** 2  # (1, controls, x, y), upper triangle used
    assert gram.scale == pytest.approx(delta_G / math.sqrt(2.0 * gram_row[1]), rel=RTOL)
    return B


# mroz87_lwage: x and y standardised privately and clipped privately; nsw_exp: x public 0/1 without
# controls (only y is clipped privately); bm04_call: x and y public 0/1 (no private clip);
# cft15_senate_rd: weighted (every column private, no constant)
FWL_CASES = [("mroz87_lwage", 1.0, 0), ("mroz87_lwage", 5.0, 1), ("nsw_exp", 2.0, 2), ("bm04_call", 1.0, 3),
             ("cft15_senate_rd", 1.0, 4)]


def _needs(facts, controls, weighted):
    x, y = facts.columns[facts.coef_index], facts.outcome
    ctrl_bounded = all(_bounded(facts, c) for c in controls)
    need_x = weighted or not (_binary(facts, x) and ctrl_bounded)
    need_y = weighted or not (_binary(facts, y) and ctrl_bounded and _bounded(facts, x))
    return need_x, need_y


@pytest.mark.parametrize("use_bounds", [False, True])
@pytest.mark.parametrize("iid,eps,seed", FWL_CASES)
def test_fwl_score(corpus, spy, iid, eps, seed, use_bounds):
    data, facts = _instance(corpus, iid)
    out, rng = _run("fwl_score", data, facts, eps, seed, use_bounds=use_bounds)
    ems, noise = _check_ems(out, rng, spy)
    rho = zcdp_rho(eps, DELTA)
    weighted, controls, names, m = _stage1(facts, use_bounds)
    # docs: the Gram's 40% is scaled by (d - 1)/4 below d = 5
    g_share = 0.4 * min(1.0, (facts.d - 1) / 4.0)
    _gram_checks(rho, ems, noise, spy, rng, m, len(names), g_share)
    # stage 2: private clips from grid quantiles sharing 5% of rho, only for what needs them
    need_x, need_y = _needs(facts, controls, weighted)
    n1, n_need = 2 * m + 1, need_x + need_y
    q_calls = spy.calls[n1:]
    assert len(q_calls) == n_need and all(c.scores.size == POS_GRID.size for c in q_calls)
    assert _costs(ems[n1:]) == pytest.approx([0.05 * rho / max(n_need, 1)] * n_need, rel=RTOL)
    det = out.details
    it = iter(q_calls)
    C_u = min(POS_GRID[next(it).index], det["B_u"]) if need_x else det["B_u"]  # c_u = 1
    C_v = min(POS_GRID[next(it).index], det["B_v"]) if need_y else det["B_v"]  # c_v = 1
    assert (det["C_u"], det["C_v"]) == pytest.approx((C_u, C_v), rel=RTOL)
    assert math.isfinite(C_u) and math.isfinite(C_v)
    rho_2 = rho * (1.0 - 0.25 - g_share - (0.05 if n_need else 0.0))
    (st_row,) = noise[1:]
    assert st_row.kind == "gaussian_joint" and st_row[1] == pytest.approx(rho_2, rel=RTOL)
    d_S, d_T = rng.noise()[1:]
    assert d_S.method == d_T.method == "normal" and d_S.count == d_T.count == 1
    assert (d_S.scale, d_T.scale) == st_row.scale
    # docs: S and T (shares 85 % and 15 % of stage 2) as one mechanism: at the scales of the shares
    # (2 C_u C_v / sqrt(2 rho_S), C_u^2 / sqrt(2 rho_T)) a replaced row moves them by at most
    # sqrt(max_t (rho_S / 2) (1 + t)^2 + 2 rho_T (1 - t^2)^2) noise units, whose half square is the cost; the
    # scales shrink by one factor until the cost is rho_2
    rho_S, rho_T = 0.85 * rho_2, 0.15 * rho_2
    t = np.linspace(0.0, 1.0, 100001)
    cost = 0.5 * float(np.max(0.5 * rho_S * (1 + t) ** 2 + 2.0 * rho_T * (1 - t * t) ** 2))
    k = math.sqrt(cost / rho_2)
    assert d_S.scale == pytest.approx(k * 2.0 * C_u * C_v / math.sqrt(2.0 * rho_S), rel=RTOL)
    assert d_T.scale == pytest.approx(k * C_u**2 / math.sqrt(2.0 * rho_T), rel=RTOL)


def _check_pairs_stage(rho, ems, spy, n1):
    """Docs: two grid quantiles (ranges of |u| and |w|) sharing 5% of rho."""
    calls = spy.calls[n1:n1 + 2]
    assert all(c.scores.size == POS_GRID.size for c in calls)
    assert _costs(ems[n1:n1 + 2]) == pytest.approx([0.025 * rho] * 2, rel=RTOL)


@pytest.mark.parametrize("iid,eps,seed", FWL_CASES)
def test_noisystats_fwl(corpus, spy, iid, eps, seed):
    data, facts = _instance(corpus, iid)
    out, rng = _run("noisystats_fwl", data, facts, eps, seed)
    ems, noise = _check_ems(out, rng, spy)
    rho = zcdp_rho(eps, DELTA)
    _, _, names, m = _stage1(facts)
    _gram_checks(rho, ems, noise, spy, rng, m, len(names), 0.4)  # docs: same shares as fwl_score, unscaled
    n1 = 2 * m + 1
    assert len(ems) == n1 + 2
    _check_pairs_stage(rho, ems, spy, n1)
    # docs: two Laplace mechanisms at eps_L (eps_L^2/2 each) share the remaining 30%
    lap = noise[1:]
    assert _costs(lap) == pytest.approx([0.15 * rho] * 2, rel=RTOL)
    sens = 1.0 - 1.0 / facts.n
    draws = rng.noise()[1:]
    assert [d.method for d in draws] == ["laplace", "laplace"]
    for d, row in zip(draws, lap):
        assert d.scale == pytest.approx(sens / math.sqrt(2.0 * row[1]), rel=RTOL)


@pytest.mark.parametrize("iid,eps,seed", [("mroz87_lwage", 1.0, 0), ("cft15_senate_rd", 1.0, 4)])
def test_fwl_score_scale_weight_splits_stage_1a(corpus, spy, iid, eps, seed):
    """docs: with scale_weight w each column's scale costs w times its location; the row bound costs one unit."""
    data, facts = _instance(corpus, iid)
    out, rng = _run("fwl_score", data, facts, eps, seed, scale_weight=2.0)
    ems, _ = _check_ems(out, rng, spy)
    rho = zcdp_rho(eps, DELTA)
    _, _, _, m = _stage1(facts)
    unit = 0.25 * rho / (3 * m + 1)
    assert _costs(ems[: 2 * m + 1]) == pytest.approx([unit, 2.0 * unit] * m + [unit], rel=RTOL)
    assert [row[0].split(" (")[0] for row in ems[:2]] == ["grid median", "grid median of non-zero pair differences"]


@pytest.mark.parametrize("iid,eps,seed", FWL_CASES)
def test_theilsen_fwl(corpus, spy, iid, eps, seed):
    data, facts = _instance(corpus, iid)
    out, rng = _run("theilsen_fwl", data, facts, eps, seed)
    ems, noise = _check_ems(out, rng, spy)
    rho = zcdp_rho(eps, DELTA)
    _, _, names, m = _stage1(facts)
    _gram_checks(rho, ems, noise, spy, rng, m, len(names), 0.4)
    n1 = 2 * m + 1
    assert len(ems) == n1 + 3 and len(noise) == 1
    _check_pairs_stage(rho, ems, spy, n1)
    # docs: Smith's median of the matched slopes (one pair per row: sensitivity 1) takes the remaining 30%
    assert ems[-1][1] == pytest.approx(0.3 * rho, rel=RTOL)


# --------------------------------------------------------------------------
# bag of little bootstraps + CoinPress (zCDP)
# --------------------------------------------------------------------------


def _coinpress_sds(r_z: float, k: int, rhos: list[float], betas: list[float]) -> list[float]:
    """Noise sds (units of the sd bound) of 1-d CoinPress: clip radius R = r + gamma_1, sensitivity 2R/k."""
    out = []
    for rho_i, beta_i in zip(rhos, betas):
        R = r_z + _tailbound(beta_i / 2.0 / k)
        out.append((2.0 * R / k) / math.sqrt(2.0 * rho_i))
        r_z = _tailbound(beta_i / 2.0) * math.sqrt(1.0 / k + 2.0 * R * R / (k * k * rho_i))
    return out


@pytest.mark.parametrize("iid,eps,seed", [("mroz87_lwage", 1.0, 0), ("mroz87_lwage", 4.0, 1), ("nsw_exp", 2.0, 2)])
def test_blb_coinpress(corpus, spy, iid, eps, seed):
    data, facts = _instance(corpus, iid)
    out, rng = _run("blb_coinpress", data, facts, eps, seed)
    ems, noise = _check_ems(out, rng, spy)
    rho = zcdp_rho(eps, DELTA)
    # defaults: subsets of >= 3 d + 10 rows; 10 resamples; t = 5 steps each; beta = 0.1 split in half; 100x
    k = facts.n // math.ceil(3 * facts.d + 10)
    t, over, r_sims = 5, 100.0, 10
    # prior balls: three grid quantiles sharing 20% of rho
    assert _costs(ems) == pytest.approx([0.2 * rho / 3] * 3, rel=RTOL)
    assert [c.scores.size for c in spy.calls] == [SYM_GRID.size, SYM_GRID.size, VAR_GRID.size]
    lo, hi = _interval(spy.calls[0].index, spy.calls[1].index, SYM_GRID, 1.0)
    mean_r = 0.5 * (hi - lo)
    assert out.details["mean_ball"] == pytest.approx((0.5 * (lo + hi), mean_r), rel=RTOL)
    # CoinPress: variance then mean, each half of the remaining 80%, on the authors' schedule
    rho_half = 0.4 * rho
    assert _costs(noise) == pytest.approx(_schedule(rho_half, t) * 2, rel=RTOL)
    assert [r[0] for r in noise] == [f"CoinPress step {i + 1} (variance)" for i in range(t)] + [
        f"CoinPress step {i + 1} (mean)" for i in range(t)]
    draws = rng.noise()
    assert all(d.method == "normal" and d.count == 1 for d in draws)
    # variance stage, in units of its sd bound sqrt(100 * 2 v^2 / (r - 1)): radius 100 v over it is public
    r_var = over / math.sqrt(over * 2.0 / (r_sims - 1))
    sds_var = _coinpress_sds(r_var, k, _costs(noise[:t]), _schedule(0.05 / 4.0, t))
    # mean stage, in units of sqrt(k v_up)
    r_mean = mean_r / math.sqrt(k * out.details["variance_upper"])
    sds_mean = _coinpress_sds(r_mean, k, _costs(noise[t:]), _schedule(0.05, t))
    assert [d.scale for d in draws] == pytest.approx(sds_var + sds_mean, rel=RTOL)


# --------------------------------------------------------------------------
# coverage of the roster
# --------------------------------------------------------------------------

COVERED = {"sa_coef_median", "sa_coef_winsorized", "fwl_blocks", "noisystats", "theilsen_match", "theilsen_wide",
           "fwl_score", "noisystats_fwl", "theilsen_fwl", "blb_coinpress",
           "sa_coef_interval"}  # pinned in tests/algorithms/test_calibration_intervals.py


def test_every_standard_sce_native_is_pinned_here():
    """A new standard sce algorithm of our own (not a wrapped linreg one) needs its calibration test here."""
    from dpstats.algorithms import list_algorithms

    natives = {a.name for a in list_algorithms("sce", interpretation="standard")
               if a.wraps is None and a.__module__.startswith("dpstats.algorithms.sce.")}
    assert natives == COVERED
