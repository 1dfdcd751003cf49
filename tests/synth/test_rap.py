"""RAP on a seeded sample of Bank (real data): calibration, sensitivities, the relaxed fit, domain, bad arguments.

The calibration test runs RAP with a RecordingGenerator and recomputes the
docs page's scales (``docs/synth/rap.md``) independently: per epoch ``K``
exponential mechanisms with ``epsilon = sqrt(8 (rho / 2T) / K)`` and score
sensitivity 1, and one Gaussian measurement whose L2 sensitivity
``sqrt(sum_m min(2, K_m))`` is recomputed from the cells the mechanism
selected (which marginal each belongs to) and whose scale is
``sensitivity / sqrt(2 rho / 2T)``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpstats.privacy.accounting import zcdp_rho
from dpstats.synth import get_synthesizer
from dpstats.synth.discretize import EqualWidth, encode, one_hot
from dpstats.synth.mechanisms.rap import RAP, fit_relaxed, randomized_rounding, relaxed_marginal, simplex_project_blocks
from dpstats.synth.workload import paper_workload
from tests.noise_spy import RecordingGenerator

EPS, DELTA, SEED = 1.0, 1e-6, 11
COLS = ["age", "marital", "housing", "loan", "y"]
PARAMS = {"epochs": 3, "top_q": 6, "n_prime": 200, "iterations": 200, "label": "y"}


@pytest.fixture(scope="module")
def data(bank):
    df, schema = bank
    schema = schema.select(COLS)
    df = df[COLS]
    return encode(df, schema, EqualWidth(bins=5).edges(df, schema, None, np.random.default_rng(0)))


@pytest.fixture(scope="module")
def run(data):
    rng = RecordingGenerator(SEED)
    return RAP(**PARAMS).synthesize(data, EPS, DELTA, rng), rng


def _owners(data):
    """Marginal of each query (cells of the workload's marginals, in order)."""
    wl = paper_workload(data.domain.names, "y")
    return np.concatenate([np.full(data.domain.size(q), m) for m, q in enumerate(wl)]), wl


def test_registered():
    assert get_synthesizer("rap") is RAP
    assert RAP.family == "workload" and RAP.interpretation == "standard"


def test_calibration(run, data):
    res, rng = run
    rho, T, K = zcdp_rho(EPS, DELTA), PARAMS["epochs"], PARAMS["top_q"]
    owner, _ = _owners(data)
    sel = [s for s in res.ledger if s.kind == "exponential"]
    gau = [s for s in res.ledger if s.kind == "gaussian"]
    assert len(sel) == T * K and len(gau) == T and len(res.ledger) == T * (K + 1)
    assert all(s.sensitivity == 1.0 for s in sel)
    assert [s.scale for s in sel] == pytest.approx([math.sqrt(8 * rho / (2 * T) / K)] * (T * K), rel=1e-9)
    picks = res.details["selected"]
    assert len(picks) == T and all(len(p) == K for p in picks)
    assert len({i for p in picks for i in p}) == T * K            # without replacement
    sens = [math.sqrt(np.minimum(np.bincount(owner[p]), 2).sum()) for p in picks]
    assert [s.sensitivity for s in gau] == pytest.approx(sens, rel=1e-12)
    want = [s / math.sqrt(2 * rho / (2 * T)) for s in sens]
    assert [s.scale for s in gau] == pytest.approx(want, rel=1e-9)
    assert [d.scale for d in rng.of("normal")] == pytest.approx(want, rel=1e-9)    # the noise drawn
    assert len(rng.of("gumbel")) == T * K
    assert sum(s.cost for s in res.ledger) == pytest.approx(rho, rel=1e-9)


def test_measurement_sensitivity_on_replace_one_neighbours(data):
    owner, wl = _owners(data)
    rng = np.random.default_rng(0)
    base = np.concatenate([data.marginal(list(q)).ravel() for q in wl])
    worst = 0.0
    for _ in range(60):
        picks = rng.choice(owner.size, size=8, replace=False)
        bound = math.sqrt(np.minimum(np.bincount(owner[picks]), 2).sum())
        i = rng.integers(data.n)
        codes = data.codes.copy()
        codes[i] = [rng.integers(k) for k in data.domain.shape]
        other = np.concatenate([data.with_codes(codes).marginal(list(q)).ravel() for q in wl])
        d = np.linalg.norm((other - base)[picks])
        assert d <= bound + 1e-12
        worst = max(worst, d / bound)
    assert worst > 0.4                      # some replacement comes close to the bound


def test_relaxed_pieces_agree_with_exact_answers(data):
    # on a one-hot table the relaxed answers are the exact marginals, and rounding keeps the rows
    x = one_hot(data)
    sizes = data.domain.shape
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    cs = (0, 1, 4)
    np.testing.assert_allclose(relaxed_marginal(x, offsets, sizes, cs) * data.n,
                               data.marginal([data.domain.names[c] for c in cs]).ravel())
    np.testing.assert_allclose(simplex_project_blocks(x, sizes), x)
    np.testing.assert_array_equal(randomized_rounding(x, sizes, data.n, np.random.default_rng(0)), data.codes)
    # projection: rows of every block on the simplex
    p = simplex_project_blocks(np.random.default_rng(1).normal(size=(50, sum(sizes))), sizes)
    assert p.min() >= 0
    start = 0
    for k in sizes:
        np.testing.assert_allclose(p[:, start:start + k].sum(axis=1), 1.0)
        start += k


def test_fit_projection_equals_the_row_wise_projection(data):
    """The fit's in-place projection (blocks of a transposed float32 table) gives simplex_project_blocks' values."""
    from dpstats.synth.mechanisms.rap import _project_rows

    sizes = data.domain.shape + (1, 2)
    for scale in (0.01, 1.0, 100.0):
        x = (np.random.default_rng(3).normal(size=(300, sum(sizes))) * scale).astype(np.float32)
        xt = np.ascontiguousarray(x.T)
        _project_rows(xt, sizes)
        np.testing.assert_array_equal(xt.T, simplex_project_blocks(x, sizes))


def test_fit_reduces_the_loss(data):
    sizes = data.domain.shape
    rng = np.random.default_rng(2)
    x0 = simplex_project_blocks(rng.random((100, sum(sizes))), sizes)
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    qidx = np.array([[offsets[0] + 1, offsets[4] + 1, sum(sizes)], [offsets[2], offsets[3], offsets[4]]])
    target = np.array([0.05, 0.6])

    def answers(x):
        xa = np.concatenate([x, np.ones((x.shape[0], 1))], axis=1)
        return xa[:, qidx].prod(axis=2).mean(axis=0)

    x1, steps = fit_relaxed(x0, qidx, target, sizes, 500, 1e-2, 0.0)
    assert steps >= 1
    assert np.abs(answers(x1) - target).max() < 0.5 * np.abs(answers(x0) - target).max()


def test_output_in_domain_and_deterministic(run, data):
    res, _ = run
    syn = res.data
    assert syn.domain == data.domain and syn.n == data.n and syn.codings == data.codings
    assert syn.codes.min() >= 0 and np.all(syn.codes.max(axis=0) < np.asarray(data.domain.shape))
    again = RAP(**PARAMS).synthesize(data, EPS, DELTA, np.random.default_rng(SEED))
    np.testing.assert_array_equal(again.data.codes, syn.codes)


@pytest.mark.parametrize("kw, msg", [
    ({"epochs": 0}, "epochs"), ({"top_q": 1.5}, "top_q"), ({"n_prime": -1}, "n_prime"),
    ({"learning_rate": 0.0}, "learning_rate"), ({"stopping": -1.0}, "stopping"), ({"k": 3}, "unknown hyperparameter"),
])
def test_bad_arguments(kw, msg):
    with pytest.raises((ValueError, TypeError), match=msg):
        RAP(**kw)


def test_bad_label(data):
    with pytest.raises(KeyError, match="income"):
        RAP(epochs=1, top_q=1, label="income").synthesize(data, 1.0, DELTA, np.random.default_rng(0))
