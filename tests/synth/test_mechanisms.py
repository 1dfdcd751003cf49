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
# fewer mirror-descent iterations than the defaults (10000 / 1000 per round) to keep the module fast
PARAMS = {"mst": {"iters": 2000}, "aim": {"rounds": 12, "label": "y", "iters": 300}, "mwem_pgm": {"label": "y"},
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


# --- Private-PGM estimation (dpstats.synth.mechanisms._pgm) against mbi itself ------------------------------


def _bank_measurements(data, cliques, sigma, seed):
    rng = np.random.default_rng(seed)
    return [(cl, data.marginal(list(cl)).ravel() + rng.normal(0, sigma, data.domain.size(cl)), sigma)
            for cl in cliques]


def test_numpy_mirror_descent_takes_mbis_steps(data):
    """The NumPy loop, given repeated and non-canonical cliques, ends where mbi's compiled MirrorDescent ends."""
    from dpstats.synth.mechanisms import _pgm

    mbi = _pgm.load_mbi()
    import jax.numpy as jnp

    cliques = [(c,) for c in COLS] + [("y", "age"), ("job", "marital", "y"), ("y", "age"), ("housing", "duration")]
    ms = _bank_measurements(data, cliques, 20.0, 1)
    ms[-1] = (ms[-1][0], ms[-1][1], 35.0)          # unequal scales, pooled with precision weights
    ms.append((("y", "age"), ms[-4][1][::-1].copy(), 50.0))
    ours = _pgm.estimate(data.domain, ms, data.n, 150, backend="numpy")
    # mbi's estimator on the raw (unpooled) measurements
    ref = _pgm._fast_mirror_descent().estimate(
        _pgm.mbi_domain(data.domain), [mbi.LinearMeasurement(jnp.asarray(y), cl, stddev=s) for cl, y, s in ms],
        known_total=float(data.n), iters=150)
    a, b = _pgm.ModelMarginals(ours), _pgm.ModelMarginals(_pgm.Model.from_mbi(ref, data.domain))
    for cl in cliques + [("age", "job", "duration")]:
        np.testing.assert_allclose(a.counts(cl), b.counts(cl), rtol=1e-7, atol=1e-6)
    # a warm start continues from the given model (same distribution as mbi's CliqueVector.expand)
    more = ms + _bank_measurements(data, [("marital", "housing", "y")], 20.0, 2)
    warm_np = _pgm.estimate(data.domain, more, data.n, 50, warm_start=ours, backend="numpy")
    warm_jax = _pgm.estimate(data.domain, more, data.n, 50, warm_start=ours, backend="jax")
    a, b = _pgm.ModelMarginals(warm_np), _pgm.ModelMarginals(warm_jax)
    for cl in [("marital", "housing", "y"), ("age", "y"), ("job",)]:
        np.testing.assert_allclose(a.counts(cl), b.counts(cl), rtol=1e-7, atol=1e-6)
    cold = _pgm.ModelMarginals(_pgm.estimate(data.domain, more, data.n, 50, backend="numpy"))
    assert np.abs(cold.counts(("age", "y")) - a.counts(("age", "y"))).max() > 1e-3   # the warm start mattered


def test_model_marginals_equal_mbis_variable_elimination():
    from dpstats.synth.base import Domain
    from dpstats.synth.mechanisms import _pgm

    mbi = _pgm.load_mbi()
    import jax.numpy as jnp

    rng = np.random.default_rng(3)
    dom = Domain(tuple("abcdefg"), (2, 3, 4, 2, 3, 2, 3))
    md = _pgm.mbi_domain(dom)
    # a loop (triangulated), a separate component, and an attribute ("g") in no clique
    cliques = [("b", "a"), ("b", "c"), ("c", "a", "d"), ("e", "f")]
    pots = {c: rng.normal(size=md.project(c).shape) for c in cliques}
    cv = mbi.CliqueVector(md, cliques, {c: mbi.Factor(md.project(c), jnp.asarray(v)) for c, v in pots.items()})
    model = _pgm.Model.from_mbi(mbi.MarkovRandomField(potentials=cv, marginals=cv, total=500.0), dom)
    mm = _pgm.ModelMarginals(model)
    for q in [("a",), ("d", "b"), ("a", "e"), ("g", "c"), ("d", "f", "b"), ("b", "c", "d", "e")]:
        ref = np.asarray(mbi.marginal_oracles.variable_elimination(cv, q, 500.0).datavector(flatten=True))
        np.testing.assert_allclose(mm.counts(q), ref, rtol=1e-9, atol=1e-9)


def test_model_size_equals_mbis_hypothetical_model_size():
    from dpstats.synth.base import Domain
    from dpstats.synth.mechanisms import _pgm

    mbi = _pgm.load_mbi()
    rng = np.random.default_rng(4)
    dom = Domain(tuple("abcdefgh"), tuple(int(k) for k in rng.integers(2, 6, size=8)))
    md = _pgm.mbi_domain(dom)
    for _ in range(150):
        cl = [tuple(rng.choice(dom.names, size=int(rng.integers(1, 4)), replace=False))
              for _ in range(int(rng.integers(1, 9)))]
        assert _pgm.model_size_mb(dom, cl) == pytest.approx(mbi.junction_tree.hypothetical_model_size(md, cl))
    chain = [(a, b) for a, b in zip(dom.names, dom.names[1:])]                      # a tree: mbi's other branch
    assert _pgm.model_size_mb(dom, chain) == pytest.approx(mbi.junction_tree.hypothetical_model_size(md, chain))


def test_aim_and_mwem_pgm_compile_nothing_on_small_models(data):
    """Regression: a JAX compilation per round (the model's cliques change every round) made AIM miss 60 s on Adult."""
    import jax

    compiles = []

    def listener(event, duration, **kw):
        if event == "/jax/core/compile/backend_compile_duration":
            compiles.append(duration)

    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        for name in ("aim", "mwem_pgm"):
            get_synthesizer(name)(**{**PARAMS[name], "iters": 50, "final_iters": 50}).synthesize(
                data, 1.0, DELTA, np.random.default_rng(SEED))
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)
    assert compiles == []


def test_mirror_descent_convergence_stop(data):
    """tol > 0 stops a converged fit at a block of 50 and ends near the full fit; tol = 0 runs every iteration."""
    from dpstats.synth.mechanisms import _pgm

    cliques = [(c,) for c in COLS] + [("age", "y"), ("job", "marital", "y"), ("housing", "duration")]
    ms = _bank_measurements(data, cliques, 20.0, 3)
    full = _pgm.estimate(data.domain, ms, data.n, 3000, backend="numpy")
    assert full.iterations == 3000
    stopped = _pgm.estimate(data.domain, ms, data.n, 3000, backend="numpy", tol=1e-4)
    assert 50 <= stopped.iterations < 3000 and stopped.iterations % 50 == 0
    a, b = _pgm.ModelMarginals(full), _pgm.ModelMarginals(stopped)
    for cl in cliques:
        assert np.abs(a.counts(cl) - b.counts(cl)).sum() < 0.002 * data.n      # L1 within 0.2 % of n
    # the stop is what changed the result: without it, the same iterations end at the full fit's model
    again = _pgm.estimate(data.domain, ms, data.n, stopped.iterations, backend="numpy")
    assert all(np.array_equal(again.potentials[c], stopped.potentials[c]) for c in stopped.potentials)
    # a warm start at a converged model stops after the first block
    assert _pgm.estimate(data.domain, ms, data.n, 3000, warm_start=full, backend="numpy", tol=1e-4).iterations == 50


def test_aim_round_tol(data):
    """The default (0) runs the reference's fixed iterations in every round; round_tol > 0 stops some rounds early."""
    kw = {**PARAMS["aim"], "iters": 1000}
    fixed = get_synthesizer("aim")(**kw)
    fixed.synthesize(data, 1.0, DELTA, np.random.default_rng(SEED))
    assert set(fixed.details["fit_iterations"]) == {1000}
    tol = get_synthesizer("aim")(**kw, round_tol=1e-4)
    tol.synthesize(data, 1.0, DELTA, np.random.default_rng(SEED))
    its = tol.details["fit_iterations"]
    assert its[-1] == 1000 and min(its[:-1]) < 1000          # the last fit keeps final_iters in full
    with pytest.raises(ValueError, match="round_tol"):
        get_synthesizer("aim")(round_tol=-1.0).synthesize(data, 1.0, DELTA, np.random.default_rng(SEED))


# --- Sampling from the model: i.i.d. rows or rounded counts (MST's reference) --------------------------------


def test_rounded_counts_sum_and_expectation():
    from dpstats.synth.mechanisms._pgm_sample import rounded_counts

    p = np.array([0.05, 0.0, 0.333, 0.617])
    rng = np.random.default_rng(3)
    draws = np.array([rounded_counts(p, 10, rng) for _ in range(4000)])
    assert (draws.sum(axis=1) == 10).all() and (draws[:, 1] == 0).all()
    # each cell is floor(10 p) or one more, and right on average (4000 draws: sd of a mean below 0.008)
    assert ((draws == np.floor(10 * p)) | (draws == np.floor(10 * p) + 1)).all()
    np.testing.assert_allclose(draws.mean(axis=0), 10 * p, atol=0.03)
    # fractional parts that lose their last unit to rounding error still give the total
    assert rounded_counts(np.array([1 / 3] * 3), 1, rng).sum() == 1


def test_rounding_follows_the_model_closer_than_iid_draws(data):
    """MST samples with rounded counts: each synthetic 2-way marginal on the tree follows the model's."""
    from dpstats.synth.mechanisms import _pgm, _pgm_sample

    cliques = [(c,) for c in COLS] + [("age", "y"), ("job", "y"), ("marital", "job"), ("housing", "y"),
                                       ("duration", "y")]
    model = _pgm.estimate(data.domain, _bank_measurements(data, cliques, 5.0, 4), data.n, 200)
    mm = _pgm.ModelMarginals(model)
    gaps = {}
    for rounding in (False, True):
        rows = _pgm_sample.sample(model, data.domain, data.n, np.random.default_rng(5), rounding=rounding)
        pos = {c: j for j, c in enumerate(data.domain.names)}
        err = []
        for cl in cliques:
            idx = np.ravel_multi_index(tuple(rows[:, pos[c]] for c in cl), tuple(data.domain[c] for c in cl))
            syn = np.bincount(idx, minlength=int(np.prod([data.domain[c] for c in cl])))
            err.append(np.abs(syn - mm.counts(cl).ravel()).max())
        gaps[rounding] = max(err)
    # rounded counts: the root column within one row of the model's count per cell, every marginal within a few;
    # i.i.d. draws: multinomial noise of tens of rows on 3,000
    assert gaps[True] <= 0.25 * gaps[False], gaps
    assert gaps[False] > 10, gaps


def test_mst_samples_by_rounding_by_default():
    assert get_synthesizer("mst").defaults["rounding"].value is True
