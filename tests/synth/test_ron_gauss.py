"""RON-GAUSS on a seeded sample of Bank (real data): calibration, sensitivities, domain, bad arguments.

The calibration test runs the synthesizer with a RecordingGenerator and
compares every Gaussian scale drawn with the docs page's formulas
(``docs/synth/ron_gauss.md``), recomputed here from ``rho`` and the shares;
the sensitivity test replaces one row of real data by another and measures
how far the released statistics move.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpstats.privacy.accounting import zcdp_rho
from dpstats.synth import get_synthesizer
from dpstats.synth.discretize import EqualWidth, encode, one_hot
from dpstats.synth.mechanisms.ron_gauss import RONGauss, random_orthonormal, sym_to_vec, vec_to_sym
from tests.noise_spy import RecordingGenerator

EPS, DELTA, SEED = 2.0, 1e-6, 3
COLS = ["age", "job", "marital", "housing", "duration", "y"]


@pytest.fixture(scope="module")
def data(bank):
    df, schema = bank
    schema = schema.select(COLS)
    df = df[COLS]
    return encode(df, schema, EqualWidth(bins=8).edges(df, schema, None, np.random.default_rng(0)))


def _normal_scales(rng):
    return [d.scale for d in rng.of("normal")]


def test_registered():
    assert get_synthesizer("ron_gauss") is RONGauss
    assert RONGauss.family == "other" and RONGauss.interpretation == "standard"


def test_unsupervised_calibration(data):
    rng = RecordingGenerator(SEED)
    res = RONGauss().synthesize(data, EPS, DELTA, rng)
    rho = zcdp_rho(EPS, DELTA)
    assert [s.mechanism for s in res.ledger] == ["ron_gauss:sum", "ron_gauss:scatter"]
    # equal halves: sum (L2 sensitivity 2) and scatter (Frobenius sensitivity sqrt 2)
    assert [s.sensitivity for s in res.ledger] == pytest.approx([2.0, math.sqrt(2.0)], rel=1e-12)
    want = [2.0 / math.sqrt(rho), math.sqrt(2.0) / math.sqrt(rho)]
    assert [s.scale for s in res.ledger] == pytest.approx(want, rel=1e-9)
    assert _normal_scales(rng) == pytest.approx(want, rel=1e-9)        # the noise drawn has those scales
    assert sum(s.cost for s in res.ledger) == pytest.approx(rho, rel=1e-9)
    assert res.epsilon == pytest.approx(EPS, rel=1e-6)


def test_mixture_calibration(data):
    rng = RecordingGenerator(SEED)
    res = RONGauss(label="y").synthesize(data, EPS, DELTA, rng)
    rho = zcdp_rho(EPS, DELTA)
    names = [s.mechanism for s in res.ledger]
    assert names == ["ron_gauss:class_counts", "ron_gauss:class_sums", "ron_gauss:class_scatter"]
    sens = [math.sqrt(2.0), 2.0, math.sqrt(2.0)]
    want = [s / math.sqrt(2 * share * rho) for s, share in zip(sens, (0.1, 0.45, 0.45))]
    assert [s.sensitivity for s in res.ledger] == pytest.approx(sens, rel=1e-12)
    assert [s.scale for s in res.ledger] == pytest.approx(want, rel=1e-9)
    assert _normal_scales(rng) == pytest.approx(want, rel=1e-9)
    assert sum(s.cost for s in res.ledger) == pytest.approx(rho, rel=1e-9)


def _released_statistics(x1h, classes, k, means, w):
    """The statistics RON-GAUSS releases, recomputed: class counts, sums of unit rows, scatter vectors."""
    x = x1h / math.sqrt(x1h.sum(axis=1)[0])
    sums = np.zeros((k, x.shape[1]))
    np.add.at(sums, classes, x)
    c = x - means[classes]
    c = c / np.linalg.norm(c, axis=1, keepdims=True)
    xt = c @ w.T
    scat = np.concatenate([sym_to_vec(xt[classes == j].T @ xt[classes == j]) for j in range(k)])
    return np.bincount(classes, minlength=k).astype(float), sums.ravel(), scat


def test_sensitivities_hold_on_replace_one_neighbours(data):
    rng = np.random.default_rng(0)
    feats = [c for c in data.domain.names if c != "y"]
    x1h = one_hot(data.project(feats))
    classes = data.column("y")
    k = data.domain["y"]
    w = random_orthonormal(10, x1h.shape[1], rng)
    means = rng.normal(0, 0.1, size=(k, x1h.shape[1]))     # any released means
    base = _released_statistics(x1h, classes, k, means, w)
    worst = np.zeros(3)
    for _ in range(200):
        i, j = rng.integers(0, data.n, size=2)
        x2, c2 = x1h.copy(), classes.copy()
        x2[i], c2[i] = x1h[j], 1 - classes[j] if rng.random() < 0.5 else classes[j]
        other = _released_statistics(x2, c2, k, means, w)
        worst = np.maximum(worst, [np.linalg.norm(a - b) for a, b in zip(base, other)])
    assert np.all(worst <= np.array([math.sqrt(2), 2.0, math.sqrt(2)]) + 1e-9)
    assert worst[2] > 0.5           # the bound is not vacuous on real rows


def test_sym_vec_round_trip_and_norm():
    s = np.random.default_rng(1).normal(size=(4, 4))
    s = s + s.T
    v = sym_to_vec(s)
    assert np.linalg.norm(v) == pytest.approx(np.linalg.norm(s))
    np.testing.assert_allclose(vec_to_sym(v, 4), s)
    w = random_orthonormal(3, 6, np.random.default_rng(2))
    np.testing.assert_allclose(w @ w.T, np.eye(3), atol=1e-12)


@pytest.mark.parametrize("label", [None, "y"])
def test_output_in_domain_and_keeps_label_shares(data, label):
    res = RONGauss(label=label).synthesize(data, 10.0, DELTA, np.random.default_rng(SEED))
    syn = res.data
    assert syn.domain == data.domain and syn.n == data.n and syn.codings == data.codings
    assert syn.codes.min() >= 0 and np.all(syn.codes.max(axis=0) < np.asarray(data.domain.shape))
    if label:
        p = data.marginal(["y"]) / data.n
        q = syn.marginal(["y"]) / syn.n
        assert 0.5 * np.abs(p - q).sum() < 0.03
    again = RONGauss(label=label).synthesize(data, 10.0, DELTA, np.random.default_rng(SEED))
    np.testing.assert_array_equal(again.data.codes, syn.codes)


@pytest.mark.parametrize("kw, msg", [
    ({"dimension": 0}, "dimension"), ({"dimension": 1.5}, "dimension"), ({"dimension": "3"}, "dimension"),
    ({"budget_split": (0.1, 0.0, 0.9)}, "budget_split"), ({"budget_split": (1, 2)}, "budget_split"),
    ({"nonsense": 1}, "unknown hyperparameter"),
])
def test_bad_arguments(kw, msg):
    with pytest.raises((ValueError, TypeError), match=msg):
        RONGauss(**kw)


def test_bad_label_and_dimension_name_the_problem(data):
    with pytest.raises(KeyError, match="income"):
        RONGauss(label="income").synthesize(data, 1.0, DELTA, np.random.default_rng(0))
    with pytest.raises(ValueError, match="exceeds the one-hot width"):
        RONGauss(dimension=10_000).synthesize(data, 1.0, DELTA, np.random.default_rng(0))
