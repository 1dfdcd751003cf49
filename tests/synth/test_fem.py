"""FEM on a seeded sample of Bank (real data): calibration, the oracle, domain, bad arguments.

The calibration test runs FEM with a RecordingGenerator and checks every
exponential mechanism against the docs page (``docs/synth/fem.md``):
``T`` selections, score sensitivity 1, ``epsilon_0 = sqrt(8 rho / T)``, cost
``epsilon_0^2 / 8`` each, one Gumbel draw per ledger entry (no selection
outside the accountant) and no Gaussian or Laplace noise at all.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from dpstats.privacy.accounting import zcdp_rho
from dpstats.synth import get_synthesizer
from dpstats.synth.base import DiscreteData, Domain
from dpstats.synth.discretize import EqualWidth, encode
from dpstats.synth.mechanisms.fem import FEM, best_response, workload_cells
from dpstats.synth.workload import paper_workload
from tests.noise_spy import RecordingGenerator

EPS, DELTA, SEED = 1.0, 1e-6, 5
COLS = ["age", "marital", "housing", "loan", "y"]
PARAMS = {"rounds": 8, "samples": 3, "label": "y"}


@pytest.fixture(scope="module")
def data(bank):
    df, schema = bank
    schema = schema.select(COLS)
    df = df[COLS]
    return encode(df, schema, EqualWidth(bins=5).edges(df, schema, None, np.random.default_rng(0)))


@pytest.fixture(scope="module")
def run(data):
    rng = RecordingGenerator(SEED)
    return FEM(**PARAMS).synthesize(data, EPS, DELTA, rng), rng


def test_registered():
    assert get_synthesizer("fem") is FEM
    assert FEM.family == "workload" and FEM.interpretation == "standard"


def test_calibration(run):
    res, rng = run
    rho, T = zcdp_rho(EPS, DELTA), PARAMS["rounds"]
    assert all(s.kind == "exponential" and s.mechanism == "fem:select" for s in res.ledger)
    assert len(res.ledger) == T
    assert [s.sensitivity for s in res.ledger] == [1.0] * T
    assert [s.scale for s in res.ledger] == pytest.approx([math.sqrt(8 * rho / T)] * T, rel=1e-9)
    assert [s.cost for s in res.ledger] == pytest.approx([rho / T] * T, rel=1e-9)
    assert sum(s.cost for s in res.ledger) == pytest.approx(rho, rel=1e-9)
    assert len(rng.of("gumbel")) == T                 # every selection is a charged exponential mechanism
    assert not rng.of("normal", "laplace")            # FEM adds no other noise
    assert res.details["epsilon_0"] == pytest.approx(math.sqrt(8 * rho / T))


def test_score_sensitivity_is_one(data):
    # the score is +-(count_q(D) - n q(D_t)): replacing a row moves every cell count by at most 1
    wl = paper_workload(data.domain.names, "y")
    rng = np.random.default_rng(0)
    base = np.concatenate([data.marginal(list(q)).ravel() for q in wl])
    for _ in range(50):
        i, j = rng.integers(0, data.n, size=2)
        codes = data.codes.copy()
        codes[i] = [rng.integers(k) for k in data.domain.shape] if rng.random() < 0.5 else data.codes[j]
        other = np.concatenate([data.with_codes(codes).marginal(list(q)).ravel() for q in wl])
        assert np.abs(other - base).max() <= 1.0


def test_oracle_is_the_exact_best_response():
    sizes = (3, 2, 4)
    dom = Domain(("a", "b", "c"), sizes)
    cols = [(0, 1), (1, 2), (0, 1, 2)]
    cells, _ = workload_cells(sizes, cols)
    rng = np.random.default_rng(1)
    allrows = np.array(list(itertools.product(*[range(k) for k in sizes])))
    off = np.array([0, 3, 5])
    for _ in range(15):
        pos = [(cells[m][rng.integers(len(cells[m]))], float(rng.integers(1, 4))) for m in rng.integers(0, 3, 3)]
        neg = [(cells[m][rng.integers(len(cells[m]))], float(rng.integers(1, 4))) for m in rng.integers(0, 3, 2)]
        sigma = rng.exponential(2.0, size=sum(sizes))

        def value(row):
            onehot = set((off + row).tolist())
            v = sum(w for idx, w in pos if set(idx.tolist()) <= onehot)
            v += sum(w for idx, w in neg if not set(idx.tolist()) <= onehot)
            return v - sigma[off + row].sum()

        best = max(value(r) for r in allrows)
        got = best_response(sizes, pos, neg, sigma)
        assert value(got) == pytest.approx(best, abs=1e-7)
        DiscreteData(got[None, :], dom)               # a row of the domain


def test_output_in_domain_and_deterministic(run, data):
    res, _ = run
    syn = res.data
    assert syn.domain == data.domain and syn.n == data.n and syn.codings == data.codings
    assert syn.codes.min() >= 0 and np.all(syn.codes.max(axis=0) < np.asarray(data.domain.shape))
    again = FEM(**PARAMS).synthesize(data, EPS, DELTA, np.random.default_rng(SEED))
    np.testing.assert_array_equal(again.data.codes, syn.codes)


@pytest.mark.parametrize("kw, msg", [
    ({"rounds": 0}, "rounds"), ({"rounds": 2.5}, "rounds"), ({"samples": 0}, "samples"),
    ({"noise": 0.0}, "noise"), ({"noise": float("inf")}, "noise"), ({"epsilon_0": 0.1}, "unknown hyperparameter"),
])
def test_bad_arguments(kw, msg):
    with pytest.raises((ValueError, TypeError), match=msg):
        FEM(**kw)


def test_bad_label(data):
    with pytest.raises(KeyError, match="income"):
        FEM(rounds=1, samples=1, label="income").synthesize(data, 1.0, DELTA, np.random.default_rng(0))
