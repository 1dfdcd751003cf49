"""The contract every roster entry keeps, tested over the whole roster.

One parametrised test per clause, over :func:`dpstats.algorithms.list_configurations`
(built-in algorithms, the sce wrappers of the linreg ones, entry-point
plugins, the API's configurations and accepted tuned configurations alike,
each built from its spec as :func:`dpstats.algorithms.release.release` builds
it; when the package ships no tuned configuration, one read by the loader
from a written file stands in), on small real instances of each
task from the public corpus (a d = 2 one and a larger one, so that the
one-regressor methods and the block methods both release), at epsilon 1 and
at a small epsilon where the propose-test-release methods decline:

* the outcome is a :class:`Release` or a :class:`Decline`; a release has the
  task's shape and a finite estimate, a decline a non-empty reason;
* a release reports exactly the budget, and its ledger (one unit) spends
  exactly the accountant's capacity, converting back to the budget; a
  decline reports no more than it spent and spends no more than the budget;
* the same seed gives the identical outcome, another seed another release;
* ``standard`` classes raise no :class:`PrivacyLeakWarning`, the others one
  naming their class at every run.

The ``details`` allow-list is tested over the same registry in
``test_details_allowlist.py`` (checked here to be enumerated the same way).
No name list is kept by hand: an algorithm added to the registry is tested.
"""

from __future__ import annotations

import importlib
import json
import math
import pkgutil
import tempfile
import warnings
from functools import cache

import numpy as np
import pytest

import dpstats.algorithms as registry
from dpstats.algorithms import INTERPRETATIONS, TASKS, Decline, Release, get, list_algorithms, list_configurations
from dpstats.algorithms.configurations import Configuration, load_tuned
from dpstats.data.corpus import Corpus
from dpstats.privacy.accounting import PrivacyLeakWarning, gdp_delta, gdp_mu, zcdp_epsilon, zcdp_rho

#: per task: a d = 2 instance and a larger one (n in the thousands, d = 4 or 5)
INSTANCES = {
    "sce": ("engel_food", "mvd95_did"),
    "linreg": ("engel_food_linreg", "mvd95_did_linreg"),
    "mean": ("mean_engel_food", "mean_abadie03_401k"),
}
EPSILONS = (1.0, 0.05)
DELTA = 1e-6
SEEDS = (0, 1)
TOL = 1e-9

REGISTERED = list_algorithms()
ROSTER = list_configurations()


def _tuned_example() -> list[Configuration]:
    """A tuned configuration read by the loader from a written file, when the package ships none."""
    if any(c.kind == "tuned" for c in ROSTER):
        return []
    spec = {"format": 1, "accepted": True, "task": "mean", "algorithm": "kv_clip", "epsilon": 1.0,
            "params": {"range_share": 0.25}}
    with tempfile.TemporaryDirectory() as d:
        with open(f"{d}/mean_kv_clip_eps1.json", "w", encoding="utf-8") as f:
            json.dump(spec, f)
        return load_tuned(d)


#: the roster, plus a tuned configuration when none is in it
ALGORITHMS = ROSTER + _tuned_example()
_BY_NAME = {(c.task, c.name): c for c in ALGORITHMS}


def _id(entry: Configuration) -> str:
    return f"{entry.task}-{entry.name}"


@cache
def _instance(iid: str):
    inst = Corpus.public().instance(iid)
    return inst.task_data(), inst.facts


def _run(entry: Configuration, iid: str, eps: float, seed: int):
    """The outcome and the warnings of one run (every warning recorded).

    The algorithm is built from the entry's spec, as ``release`` builds it, and run without ``release``'s
    outcome check, which the tests below make themselves.
    """
    data, facts = _instance(iid)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = entry.spec().build().run(data, facts, eps, DELTA, np.random.default_rng(seed))
    return out, [(w.category, str(w.message)) for w in caught]


@cache
def _runs(task: str, name: str):
    """``{(instance, epsilon, seed): (outcome, warnings)}``, seed 0 run twice (key ``seed = -1``: the rerun)."""
    cls = _BY_NAME[(task, name)]
    out = {}
    for iid in INSTANCES[task]:
        for eps in EPSILONS:
            for seed in SEEDS:
                out[(iid, eps, seed)] = _run(cls, iid, eps, seed)
            out[(iid, eps, -1)] = _run(cls, iid, eps, 0)
    return out


def _capacity(unit: str, eps: float, delta: float) -> float:
    return {"rho": zcdp_rho(eps, delta), "epsilon": eps, "mu^2": gdp_mu(eps, delta) ** 2}[unit]


def _ledger(out) -> tuple[set[str], float]:
    return {e[2] for e in out.ledger}, float(sum(e[1] for e in out.ledger))


def test_the_registry_is_what_is_tested():
    """Every task is present, every registered class is a distinct, resolvable entry, and so is every configuration."""
    assert {c.task for c in ALGORITHMS} == set(TASKS) == set(INSTANCES)
    assert len(_BY_NAME) == len(ALGORITHMS) >= 40
    for cls in REGISTERED:
        assert get(cls.task, cls.name) is cls
    assert [(c.task, c.name) for c in ROSTER if c.kind == "algorithm"] == [(c.task, c.name) for c in REGISTERED]
    # the API's and the tuned configurations are tested like the others
    assert {c.name for c in ALGORITHMS if c.kind == "api"} == {"fwl_score[api]", "fwl_each[api]", "adaptive_whiten[api]"}
    tuned = [c for c in ALGORITHMS if c.kind == "tuned"]
    assert tuned and all(c.name.startswith(c.algorithm + "_tuned_eps") and c.params for c in tuned)
    # the sce wrappers of the linreg algorithms are among them
    assert any(c.cls.wraps is not None for c in ALGORITHMS if c.task == "sce")


def test_every_algorithm_module_is_a_builtin_module():
    """Each module of ``sce/``, ``linreg/`` and ``mean/`` (not starting with ``_``) is in BUILTIN_MODULES."""
    found = set()
    for task in TASKS:
        pkg = importlib.import_module(f"dpstats.algorithms.{task}")
        for mod in pkgutil.iter_modules(pkg.__path__):
            if not mod.name.startswith("_"):
                found.add(f"dpstats.algorithms.{task}.{mod.name}")
    assert found, "no algorithm module found"
    assert found == set(registry.BUILTIN_MODULES), (
        sorted(found - set(registry.BUILTIN_MODULES)), sorted(set(registry.BUILTIN_MODULES) - found))
    # and each listed module defines at least one registered class
    modules = {c.__module__ for c in REGISTERED}
    assert set(registry.BUILTIN_MODULES) <= modules, sorted(set(registry.BUILTIN_MODULES) - modules)


def test_the_allow_list_test_covers_the_same_registry():
    """``details`` keys are checked by ``test_details_allowlist.py``, over this same registry and all tasks."""
    from tests.algorithms import test_details_allowlist as allow

    assert [(c.task, c.name) for c in allow.ALGORITHMS] == [(c.task, c.name) for c in REGISTERED]
    assert set(allow.INSTANCES) == set(TASKS)


@pytest.mark.parametrize("entry", ALGORITHMS, ids=_id)
def test_metadata(entry):
    assert entry.task in TASKS and entry.interpretation in INTERPRETATIONS
    assert entry.name and entry.cls.citation
    for p in entry.defaults.values():
        assert isinstance(p.source, str) and p.source, (entry.name, p)
    meta = entry.metadata()
    assert meta["name"] == entry.name and meta["task"] == entry.task


@pytest.mark.parametrize("entry", ALGORITHMS, ids=_id)
def test_outcome_shape_and_declines(entry):
    d_of = {iid: _instance(iid)[0].d for iid in INSTANCES[entry.task]}
    for (iid, eps, seed), (out, _) in _runs(entry.task, entry.name).items():
        where = (entry.name, iid, eps, seed)
        assert isinstance(out, (Release, Decline)), where
        if isinstance(out, Release):
            est = out.estimate
            assert isinstance(est, np.ndarray) and est.dtype == float, where
            assert est.shape == ((1,) if entry.task == "sce" else (d_of[iid],)), (where, est.shape)
            assert np.all(np.isfinite(est)), where
            if out.std_error is not None:
                assert np.asarray(out.std_error).shape == est.shape, where
        else:
            assert isinstance(out.reason, str) and out.reason.strip(), where


@pytest.mark.parametrize("entry", ALGORITHMS, ids=_id)
def test_budget_is_spent_exactly(entry):
    """A release reports the budget and its ledger spends exactly the capacity; a decline spends at most it."""
    for (iid, eps, seed), (out, _) in _runs(entry.task, entry.name).items():
        where = (entry.name, iid, eps, seed)
        units, total = _ledger(out)
        assert len(units) <= 1, (where, "a ledger in several units", units)
        assert all(e[1] >= 0 for e in out.ledger), where
        if isinstance(out, Release):
            assert (out.epsilon, out.delta) == (eps, DELTA), where
            assert len(units) == 1, (where, "a release with an empty ledger")
            (unit,) = units
            cap = _capacity(unit, eps, DELTA)
            assert total == pytest.approx(cap, rel=TOL), (where, unit, total, cap)
            if unit == "rho":  # converts back to the budget
                assert zcdp_epsilon(total, DELTA) == pytest.approx(eps, rel=1e-6), where
            elif unit == "mu^2":
                assert gdp_delta(math.sqrt(total), eps) == pytest.approx(DELTA, rel=1e-6), where
        else:
            assert 0 <= out.epsilon <= eps * (1 + TOL) and 0 <= out.delta <= DELTA * (1 + TOL), where
            if not units:
                assert out.epsilon == 0 and out.delta == 0, (where, "a decline reporting a spend it has no entry for")
            else:
                (unit,) = units
                assert total <= _capacity(unit, eps, DELTA) * (1 + TOL), (where, unit, total)
                assert out.epsilon > 0, (where, "a decline that spent budget reports epsilon 0")


def _same(a, b) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, Release):
        return (np.array_equal(a.estimate, b.estimate) and a.ledger == b.ledger
                and (a.std_error is None) == (b.std_error is None)
                and (a.std_error is None or np.array_equal(a.std_error, b.std_error))
                and _details(a) == _details(b))
    return a.reason == b.reason and a.ledger == b.ledger and _details(a) == _details(b)


def _details(out) -> str:
    """The released details, exactly (floats by their repr)."""
    return repr(sorted((k, repr(v)) for k, v in out.details.items()))


@pytest.mark.parametrize("entry", ALGORITHMS, ids=_id)
def test_seeded_determinism(entry):
    """Same seed: the identical outcome. Another seed: another release (the noise is drawn from ``rng``)."""
    runs = _runs(entry.task, entry.name)
    compared = 0
    for iid in INSTANCES[entry.task]:
        for eps in EPSILONS:
            first, again, other = runs[(iid, eps, 0)][0], runs[(iid, eps, -1)][0], runs[(iid, eps, 1)][0]
            assert _same(first, again), (entry.name, iid, eps)
            seed = 2
            while isinstance(first, Release) and not isinstance(other, Release) and seed < 6:
                other, seed = _run(entry, iid, eps, seed)[0], seed + 1  # a seed that releases too
            if isinstance(first, Release) and isinstance(other, Release):
                compared += 1
                # the estimate, or when it is clamped (e.g. to 0) the paid statistics released with it
                moved = not np.array_equal(first.estimate, other.estimate) or _details(first) != _details(other)
                assert moved, (entry.name, iid, eps, "seed ignored")
    released = any(isinstance(o, Release) for o, _ in runs.values())
    assert compared or not released, (entry.name, "no pair of releases to compare")


@pytest.mark.parametrize("entry", ALGORITHMS, ids=_id)
def test_warnings_follow_the_interpretation_class(entry):
    """``standard``: no PrivacyLeakWarning. Otherwise: a PrivacyLeakWarning naming the class at every run."""
    for key, (_, caught) in _runs(entry.task, entry.name).items():
        leak = [m for c, m in caught if issubclass(c, PrivacyLeakWarning)]
        if entry.interpretation == "standard":
            assert not leak, (entry.name, key, leak)
        else:
            assert leak and any(entry.interpretation in m for m in leak), (entry.name, key, caught)


def test_release_carries_the_interval():
    """``Algorithm.release`` builds a release with its interval in one call, stored as ``conf_int`` reads it."""
    from types import SimpleNamespace

    from dpstats.algorithms.base import Algorithm

    acc = SimpleNamespace(exhausted=lambda: True, epsilon=1.0, delta=1e-6, ledger=[])
    point = Algorithm.release(2.0, acc, k=3)
    assert point.std_error is None and point.df is None and point.bias_bound is None
    assert dict(point.details) == {"k": 3}
    out = Algorithm.release(2.0, acc, std_error=0.5, df=9, bias_bound=0.0, k=3)
    assert dict(out.details) == {"k": 3}  # the interval's fields are no details
    assert isinstance(out.df, float) and out.df == 9.0
    for a, want in ((out.std_error, 0.5), (out.bias_bound, 0.0)):
        assert isinstance(a, np.ndarray) and a.dtype == float and a.shape == (1,) and a[0] == want
    se = np.array([0.5, np.inf])
    vec = Algorithm.release(np.zeros(2), acc, std_error=se, bias_bound=np.ones(2))
    assert vec.std_error is se and vec.df is None  # float arrays are kept as they are
    lo, hi = out.conf_int(0.95)
    assert lo[0] < 2.0 - 0.5 * 1.96 and hi[0] > 2.0 + 0.5 * 1.96  # Student-t with 9 df: wider than normal


def test_no_details_key_is_an_interval_field():
    """``std_error``, ``df`` and ``bias_bound`` are keyword arguments of ``release``: never ``details`` keys."""
    for cls in REGISTERED:
        assert not {"std_error", "df", "bias_bound"} & set(cls.public_details), _id(cls)


def test_every_interval_says_what_it_covers():
    """A method with intervals declares ``interval_covers``; a wrapper says what the algorithm it wraps says."""
    from dpstats.algorithms.base import Algorithm

    words = Algorithm._WRAPPER_TAKES
    for cls in REGISTERED:
        assert isinstance(cls.interval_covers, str) and isinstance(cls.interval_robust, bool), _id(cls)
        if cls.intervals:
            assert cls.interval_covers, _id(cls)
        if cls.wraps is not None:
            assert all(getattr(cls, a) == getattr(cls.wraps, a) for a in words), _id(cls)
    assert get("sce", "dpnewton").interval_covers == get("linreg", "dpnewton").interval_covers != ""

    class Inner(Algorithm):
        interval_covers, interval_robust = "the inner words", True

    class Outer(Algorithm):
        wraps = Inner
        interval_covers_within = "its own words"

    assert (Outer.interval_covers, Outer.interval_robust, Outer.interval_covers_within) == (
        "the inner words", True, "its own words")


def test_no_import_cycle_in_the_algorithms_package():
    """No module of ``dpstats.algorithms`` imports one that imports it back (imports inside functions too).

    The registry loads ``BUILTIN_MODULES`` by name (importlib), which the graph does not see.
    """
    grimp = pytest.importorskip("grimp")
    graph = grimp.build_graph("dpstats", cache_dir=None)
    mods = {m for m in graph.modules if m == "dpstats.algorithms" or m.startswith("dpstats.algorithms.")}
    cycles = [
        (a, b) for a in sorted(mods) for b in sorted(graph.find_modules_directly_imported_by(a) & mods)
        if graph.chain_exists(importer=b, imported=a)
    ]
    assert not cycles, cycles
    assert graph.find_modules_directly_imported_by("dpstats.algorithms.registry") & mods == {"dpstats.algorithms.base"}
