"""Behaviour of the linear-regression roster: determinism, accuracy trends, declines, warnings, real data, sce wrapper."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from dpstats.algorithms import TaskData, get, list_algorithms
from dpstats.privacy.accounting import PrivacyLeakWarning

STANDARD = ["adassp", "adassp_std", "ssp", "ssp_std", "dpgd", "dpgd_std", "sa_median", "dpnewton"]
NON_STANDARD = ["adassp_databounds", "tukeyem_refcode"]


class Facts:
    """Minimal public facts for simulated data."""

    def __init__(self, n, columns, bounds, dummies=(), outcome="y", coef_index=1):
        self.n, self.d = n, len(columns)
        self.columns, self.bounds, self.dummies = tuple(columns), dict(bounds), tuple(dummies)
        self.outcome, self.coef_index = outcome, coef_index
        self.intercept = "Intercept" in columns


def simulate(n, seed=0):
    """y = 1 + 0.5 x1 - 0.2 x2 + 2 b + 0.3 [g=a] - 0.4 [g=b] + N(0, 1); x1 ~ N(10, 3), x2 lognormal."""
    rng = np.random.default_rng(seed)
    x1 = rng.normal(10, 3, n)
    x2 = rng.lognormal(1, 0.5, n)
    b = rng.integers(0, 2, n).astype(float)
    g = rng.integers(0, 3, n)
    X = np.column_stack([np.ones(n), x1, x2, b, (g == 1).astype(float), (g == 2).astype(float)])
    y = X @ np.array([1.0, 0.5, -0.2, 2.0, 0.3, -0.4]) + rng.normal(0, 1, n)
    cols = ["Intercept", "x1", "x2", "b", "C(g)[T.a]", "C(g)[T.b]"]
    bounds = {"Intercept": (1, 1), "b": (0, 1), "C(g)[T.a]": (0, 1), "C(g)[T.b]": (0, 1)}
    return TaskData(X, y), Facts(n, cols, bounds, dummies=("C(g)[T.a]", "C(g)[T.b]"))


def simulate_centred(n, seed=0):
    """A well-conditioned design: y = 1 + x1 - 0.5 x2 + 0.5 b + N(0, 1), x1 ~ U(-1, 1) (public range), x2 ~ N(0, 1)."""
    rng = np.random.default_rng(seed)
    X = np.column_stack([np.ones(n), rng.uniform(-1, 1, n), rng.normal(0, 1, n), rng.integers(0, 2, n)])
    y = X @ np.array([1.0, 1.0, -0.5, 0.5]) + rng.normal(0, 1, n)
    cols = ["Intercept", "x1", "x2", "b"]
    return TaskData(X, y), Facts(n, cols, {"Intercept": (1, 1), "x1": (-1, 1), "b": (0, 1)})


def error(est, data):
    """Error of the linreg task: (1/sqrt(n)) ||X (beta_hat - beta_OLS)||."""
    X, y = data.X, data.y
    n = X.shape[0]
    beta = np.linalg.lstsq(X, y, rcond=None)[0]
    diff = np.asarray(est) - beta
    return math.sqrt(float(diff @ (X.T @ X / n) @ diff))


def ratio(est, data):
    """Error ratio of the linreg task: the error over the sampling-error baseline sqrt(s^2 d / n)."""
    X, y = data.X, data.y
    n, d = X.shape
    beta = np.linalg.lstsq(X, y, rcond=None)[0]
    s2 = float(np.sum((y - X @ beta) ** 2) / (n - d))
    return error(est, data) / math.sqrt(s2 * d / n)


def run(name, data, facts, eps, seed, task="linreg"):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        return get(task, name)().run(data, facts, eps, 1e-6, np.random.default_rng(seed))


def test_roster_is_registered_for_both_tasks():
    names = {c.name for c in list_algorithms("linreg")}
    for name in STANDARD + NON_STANDARD + ["tukeyem"]:
        assert name in names
        cls = get("linreg", name)
        assert cls.citation and cls.summary and cls.defaults is not None
        for p in cls.defaults.values():
            assert p.source.startswith(("paper", "reference code", "ours"))
        assert get("sce", name).wraps is cls
    assert get("linreg", "dpgd").iterative and get("linreg", "dpnewton").iterative
    assert not get("linreg", "adassp").iterative


@pytest.mark.parametrize("name", STANDARD)
def test_error_shrinks_with_epsilon_and_n(name):
    """The median error over seeds falls as epsilon grows and, at fixed epsilon, as n grows.

    (The error itself, not the ratio to the sampling error: a shrinkage bias
    such as AdaSSP's ridge stays put while the sampling error falls.)
    """
    small, facts_small = simulate_centred(2000, seed=1)
    big, facts_big = simulate_centred(40000, seed=1)

    def med(data, facts, eps):
        return float(np.median([error(run(name, data, facts, eps, s).estimate, data) for s in range(5)]))

    assert med(small, facts_small, 20.0) < med(small, facts_small, 0.5)
    assert med(big, facts_big, 2.0) < med(small, facts_small, 2.0)


def test_newton_close_to_ols_at_large_epsilon():
    """Our algorithm is within a fraction of the sampling error of OLS when the budget is generous."""
    data, facts = simulate(20000, seed=3)
    r = [ratio(run("dpnewton", data, facts, 10.0, s).estimate, data) for s in range(5)]
    assert float(np.median(r)) < 0.5


def test_tukeyem_declines_when_blocks_too_small():
    data, facts = simulate(3000)
    out = run("tukeyem", data, facts, 1.0, 0)
    assert not out.released and "m d" in out.reason
    assert out.epsilon == 0.0


def test_tukeyem_declines_when_test_fails_and_charges_the_test():
    data, facts = simulate(6000)
    out = get("linreg", "tukeyem")(m=1000).run(data, facts, 0.05, 1e-6, np.random.default_rng(0))
    assert not out.released and "propose-test-release" in out.reason
    assert out.epsilon == pytest.approx(0.025)  # the test's half of the budget is spent


def test_tukeyem_releases_on_large_data():
    data, facts = simulate(30000, seed=4)
    outs = [run("tukeyem", data, facts, 2.0, s) for s in range(3)]
    assert all(o.released for o in outs)
    assert all(ratio(o.estimate, data) < 60 for o in outs)
    assert outs[0].epsilon == 2.0 and outs[0].delta == 1e-6


@pytest.mark.parametrize("name", STANDARD + ["tukeyem", "adassp_databounds"])
def test_sce_wrapper_returns_coefficient_of_interest(name):
    data, facts = simulate(20000 if name == "tukeyem" else 3000)
    for j in (1, 3):
        facts.coef_index = j
        full = run(name, data, facts, 2.0, 5)
        one = run(name, data, facts, 2.0, 5, task="sce")
        assert one.estimate.shape == (1,)
        assert one.estimate[0] == full.estimate[j]
        assert one.ledger == full.ledger


def test_runs_on_real_corpus_instance(public_corpus):
    inst = public_corpus.instance("mroz87_lwage_linreg")
    data = inst.task_data()
    for name in STANDARD + ["tukeyem"]:
        out = run(name, data, inst.facts, 3.0, 0)
        if name == "tukeyem":
            assert not out.released  # n = 428 < 1000 d
            continue
        assert out.released and out.estimate.shape == (inst.d,)
        assert np.all(np.isfinite(out.estimate))
    # at a generous budget our algorithm is close to OLS on real data
    ols = np.linalg.lstsq(data.X, data.y, rcond=None)[0]
    est = np.median([run("dpnewton", data, inst.facts, 50.0, s).estimate for s in range(5)], axis=0)
    assert ratio(est, data) < 1.0
    assert np.sign(est[1]) == np.sign(ols[1])


def test_one_hot_violations_are_mapped_not_trusted():
    """A row that breaks the public one-hot structure is mapped to the base level, not used as given."""
    data, facts = simulate(3000)
    X = data.X.copy()
    X[0, 4:6] = [50.0, 50.0]
    bad = TaskData(X, data.y)
    a = run("ssp_std", bad, facts, 1.0, 0)
    X2 = data.X.copy()
    X2[0, 4:6] = [0.0, 0.0]
    b = run("ssp_std", TaskData(X2, data.y), facts, 1.0, 0)
    assert np.allclose(a.estimate, b.estimate)
