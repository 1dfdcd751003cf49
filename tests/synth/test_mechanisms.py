"""MST, AIM, MWEM-PGM and PrivBayes on a seeded sample of Bank (real data).

Each mechanism runs once at epsilon = 10 with a RecordingGenerator (cached
per module), then the tests check: the ledger spends exactly the budget, the
ledger's scales are the docs pages' calibration, the noise actually drawn has
those scales, the output lies in the domain, the 2-way TVD beats the
Independent baseline's, and a second run with the same seed is identical.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpstats.privacy.accounting import zcdp_rho
from dpstats.synth import get_synthesizer
from dpstats.synth.discretize import EqualWidth, encode
from dpstats.synth.mechanisms.privbayes import mi_sensitivity, mutual_information
from dpstats.bench.synth.metrics import two_way_score
from tests.noise_spy import RecordingGenerator

EPS, DELTA, SEED = 10.0, 1e-6, 7
COLS = ["age", "job", "marital", "housing", "duration", "y"]
PARAMS = {"mst": {}, "aim": {"rounds": 12, "label": "y"}, "mwem_pgm": {"label": "y"},
          "privbayes": {}}
MECHANISMS = list(PARAMS)


@pytest.fixture(scope="module")
def data(bank):
    df, schema = bank
    schema = schema.select(COLS)
    df = df[COLS]
    return encode(df, schema, EqualWidth(bins=8).edges(df, schema, None, np.random.default_rng(0)))


_RUNS: dict[str, tuple] = {}


def run(name, data):
    if name not in _RUNS:
        rng = RecordingGenerator(SEED)
        res = get_synthesizer(name)(**PARAMS[name]).synthesize(data, EPS, DELTA, rng)
        _RUNS[name] = (res, rng)
    return _RUNS[name]


def gaussian_scales(res, prefix):
    return [s.scale for s in res.ledger if s.kind == "gaussian" and s.mechanism.startswith(prefix)]


@pytest.mark.parametrize("name", MECHANISMS)
def test_spends_exactly_its_budget_and_draws_the_ledgers_scales(name, data):
    res, rng = run(name, data)
    spent = sum(s.cost for s in res.ledger)
    if name == "privbayes":
        assert {s.unit for s in res.ledger} == {"epsilon"} and math.isclose(spent, EPS, rel_tol=1e-9)
        assert res.delta == 0.0
        laplace = [s.scale for s in res.ledger if s.kind == "laplace"]
        assert [d.scale for d in rng.of("laplace")] == pytest.approx(laplace, rel=1e-12)
    else:
        assert math.isclose(spent, zcdp_rho(EPS, DELTA), rel_tol=1e-9)
        assert math.isclose(res.epsilon, EPS, rel_tol=1e-6)
        gauss = [s.scale for s in res.ledger if s.kind == "gaussian"]
        assert [d.scale for d in rng.of("normal")] == pytest.approx(gauss, rel=1e-12)
    assert all(s.kind in ("gaussian", "laplace", "exponential") for s in res.ledger)


def test_mst_calibration(data):
    res, _ = run("mst", data)
    rho, d = zcdp_rho(EPS, DELTA), len(COLS)
    assert gaussian_scales(res, "mst:1way") == pytest.approx([math.sqrt(3 * d / rho)] * d)
    assert gaussian_scales(res, "mst:2way") == pytest.approx([math.sqrt(3 * (d - 1) / rho)] * (d - 1))
    em = [s for s in res.ledger if s.kind == "exponential"]
    assert len(em) == d - 1 and all(s.sensitivity == 2.0 for s in em)
    assert [s.scale for s in em] == pytest.approx([math.sqrt(8 * rho / 3 / (d - 1))] * (d - 1))
    assert all(s.sensitivity == pytest.approx(math.sqrt(2)) for s in res.ledger if s.kind == "gaussian")
    assert len(res.details["tree"]) == d - 1          # a spanning tree


def test_mwem_pgm_calibration(data):
    res, _ = run("mwem_pgm", data)
    rho, T, alpha = zcdp_rho(EPS, DELTA), len(COLS), 0.9
    assert gaussian_scales(res, "mwem_pgm") == pytest.approx([math.sqrt(T / (alpha * rho))] * T)
    em = [s for s in res.ledger if s.kind == "exponential"]
    assert [s.scale for s in em] == pytest.approx([math.sqrt(8 * (1 - alpha) * rho / T)] * T)
    assert all(s.sensitivity == 2.0 for s in em)


def test_aim_calibration_and_annealing(data):
    res, _ = run("aim", data)
    rho, T, d = zcdp_rho(EPS, DELTA), 12, len(COLS)
    sigma0, eps0 = math.sqrt(T / (0.9 * rho)), math.sqrt(0.8 * rho / T)
    assert gaussian_scales(res, "aim:1way") == pytest.approx([sigma0] * d)
    sel = [s for s in res.ledger if s.kind == "exponential"]
    meas = gaussian_scales(res, "aim:measure")
    assert len(sel) == len(meas) >= 1
    # every round before the last uses sigma0 / 2^j and eps0 * 2^j (annealing only halves sigma)
    for s, e in zip(meas[:-1], sel[:-1]):
        j = round(math.log2(sigma0 / s))
        assert s == pytest.approx(sigma0 / 2**j) and e.scale == pytest.approx(eps0 * 2**j)
    # the last round splits what remained 0.9 / 0.1
    last_cost = 1 / meas[-1] ** 2 + sel[-1].scale ** 2 / 8
    assert (1 / meas[-1] ** 2) / last_cost == pytest.approx(0.9)


def test_privbayes_calibration(data):
    res, _ = run("privbayes", data)
    d, beta = len(COLS), 0.3
    lap = [s for s in res.ledger if s.kind == "laplace"]
    assert len(lap) == d and all(s.scale == pytest.approx(2 * d / ((1 - beta) * EPS)) for s in lap)
    assert all(s.sensitivity == 2.0 for s in lap)
    em = [s for s in res.ledger if s.kind == "exponential"]
    assert [s.scale for s in em] == pytest.approx([beta * EPS / (d - 1)] * (d - 1))
    assert {s.sensitivity for s in em} <= {mi_sensitivity(data.n, True), mi_sensitivity(data.n, False)}


def test_mutual_information_and_its_sensitivity():
    # independent table: 0; identical binary columns: log 2
    assert mutual_information(np.outer([1, 3], [2, 2]).astype(float)) == pytest.approx(0.0, abs=1e-12)
    assert mutual_information(np.diag([5.0, 5.0])) == pytest.approx(math.log(2))
    # Lemma 4.1 bound holds on a worst-case replace-one pair (n = 10, one row moves to a new cell)
    a = np.diag([5.0, 5.0])
    b = a.copy()
    b[0, 0] -= 1
    b[0, 1] += 1
    assert abs(mutual_information(a) - mutual_information(b)) <= mi_sensitivity(10, True)


@pytest.mark.parametrize("name", MECHANISMS)
def test_output_in_domain_and_better_than_independent(name, data):
    res, _ = run(name, data)
    syn = res.data
    assert syn.domain == data.domain and syn.n == data.n and syn.codings == data.codings
    assert syn.codes.min() >= 0 and np.all(syn.codes.max(axis=0) < np.asarray(data.domain.shape))
    ind = get_synthesizer("independent")().synthesize(data, EPS, DELTA, np.random.default_rng(SEED)).data
    sizes = data.domain.shape
    ours, base = two_way_score(data.codes, syn.codes, sizes), two_way_score(data.codes, ind.codes, sizes)
    assert ours > base + 0.01


@pytest.mark.parametrize("name", MECHANISMS)
def test_deterministic_given_the_seed(name, data):
    res, _ = run(name, data)
    again = get_synthesizer(name)(**PARAMS[name]).synthesize(data, EPS, DELTA, np.random.default_rng(SEED))
    np.testing.assert_array_equal(again.data.codes, res.data.codes)
    assert [s.scale for s in again.ledger] == [s.scale for s in res.ledger]


def test_registry_lists_them_without_jax():
    import subprocess
    import sys

    code = ("import sys; from dpstats.synth import list_synthesizers; "
            "print(sorted(m['name'] for m in list_synthesizers() if m['family'] == 'marginal'), "
            "[m for m in ('jax', 'mbi') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['aim', 'mst', 'mwem_pgm', 'privbayes'] []"
