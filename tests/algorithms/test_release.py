"""The one release path: Budget, AlgorithmSpec and release() on real algorithms and public corpus data."""

from __future__ import annotations

import math
import pickle
import warnings

import numpy as np
import pytest

from dpstats.algorithms import get
from dpstats.algorithms.base import Decline, Release
from dpstats.algorithms.release import AlgorithmSpec, Budget, InvalidOutcome, check_outcome, expected_size, release
from dpstats.data.corpus import Corpus
from tests import plugins_hostile as hostile


@pytest.fixture(scope="module")
def corpus() -> Corpus:
    return Corpus.public()


def _hex(a) -> list[str]:
    return [float(v).hex() for v in np.asarray(a, dtype=float).ravel()]


# --------------------------------------------------------------------------
# Budget
# --------------------------------------------------------------------------


def test_a_budget_holds_floats() -> None:
    b = Budget(1, np.float64(1e-6))
    assert (b.epsilon, b.delta) == (1.0, 1e-6)
    assert type(b.epsilon) is float and type(b.delta) is float
    assert Budget(2.0, 0) == Budget(2, 0.0)
    with pytest.raises(AttributeError):
        b.epsilon = 3.0  # type: ignore[misc]


@pytest.mark.parametrize("epsilon", [0, -1.0, math.inf, math.nan])
def test_an_epsilon_out_of_range_is_named(epsilon) -> None:
    with pytest.raises(ValueError, match=r"^epsilon must be a positive finite number, got "):
        Budget(epsilon, 1e-6)


@pytest.mark.parametrize("delta", [-1e-9, 1.0, 2.0, math.nan])
def test_a_delta_out_of_range_is_named(delta) -> None:
    with pytest.raises(ValueError, match=r"^delta must "):
        Budget(1.0, delta)


@pytest.mark.parametrize("epsilon, delta, word", [("1", 1e-6, "epsilon"), (True, 1e-6, "epsilon"),
                                                  (None, 1e-6, "epsilon"), (1.0, "0", "delta"),
                                                  (1.0, False, "delta")])
def test_a_budget_that_is_no_number_is_a_type_error(epsilon, delta, word) -> None:
    with pytest.raises(TypeError, match=f"^{word} must be"):
        Budget(epsilon, delta)


def test_the_api_reports_the_budget_as_budget_does() -> None:
    """The API's budget errors are Budget's (the one check)."""
    import pandas as pd

    from dpstats.api import private_mean

    df = pd.DataFrame({"x": np.linspace(0.0, 1.0, 200)})
    for eps, dlt, exc in ((0.0, 1e-6, ValueError), (1.0, 1.0, ValueError), ("1", 1e-6, TypeError)):
        with pytest.raises(exc) as ours:
            Budget(eps, dlt)
        with pytest.raises(exc) as api:
            private_mean(df, ["x"], bounds={"x": (0, 1)}, epsilon=eps, delta=dlt)
        assert str(api.value) == str(ours.value)


# --------------------------------------------------------------------------
# AlgorithmSpec
# --------------------------------------------------------------------------


def test_a_spec_resolves_through_the_registry_and_builds_a_configured_instance() -> None:
    spec = AlgorithmSpec("linreg", "adassp", {"rho_fail": 0.2})
    assert spec.cls is get("linreg", "adassp")
    algo = spec.build()
    assert isinstance(algo, spec.cls) and algo.params["rho_fail"] == 0.2
    assert spec.build() is not algo  # a fresh instance each time
    assert AlgorithmSpec("linreg", "adassp").build().params == get("linreg", "adassp")().params


def test_a_spec_is_read_only_data() -> None:
    params = {"rho_fail": 0.2}
    spec = AlgorithmSpec("linreg", "adassp", params)
    params["rho_fail"] = 0.5  # the caller's dict is copied
    assert spec.params == {"rho_fail": 0.2}
    with pytest.raises(TypeError):
        spec.params["rho_fail"] = 0.3  # type: ignore[index]
    with pytest.raises(AttributeError):
        spec.name = "ssp"  # type: ignore[misc]
    same = AlgorithmSpec("linreg", "adassp", {"rho_fail": 0.2})
    assert spec == same and hash(spec) == hash(same)
    assert spec != AlgorithmSpec("linreg", "adassp")
    assert spec.with_params(rho_fail=0.3).params == {"rho_fail": 0.3} and spec.params == {"rho_fail": 0.2}


def test_a_spec_pickles_to_workers() -> None:
    spec = AlgorithmSpec("sce", "fwl_score", {"absorb": 5})
    back = pickle.loads(pickle.dumps(spec))
    assert back == spec and back.cls is spec.cls and dict(back.params) == {"absorb": 5}
    carried = AlgorithmSpec.of(hostile.NoisyMean, {})
    back = pickle.loads(pickle.dumps(carried))
    assert back.cls is hostile.NoisyMean  # a carried class travels by reference


def test_with_intervals_puts_the_interval_params_under_the_spec_own() -> None:
    cls = get("sce", "fwl_score")
    assert cls.intervals and cls.interval_params
    spec = AlgorithmSpec("sce", "fwl_score").with_intervals()
    assert dict(spec.params) == dict(cls.interval_params)
    k, v = next(iter(cls.interval_params.items()))
    mine = AlgorithmSpec("sce", "fwl_score", {k: v}).with_params(absorb=3).with_intervals()
    assert mine.params["absorb"] == 3 and mine.params[k] == v


def test_of_names_a_registered_class_and_carries_another() -> None:
    cls = get("mean", "adaptive_whiten")
    spec = AlgorithmSpec.of(cls, {"beta": 1})
    assert spec == AlgorithmSpec("mean", "adaptive_whiten", {"beta": 1}) and spec.algorithm is None
    carried = AlgorithmSpec.of(hostile.NoisyMean)
    assert carried.algorithm is hostile.NoisyMean and carried.cls is hostile.NoisyMean
    from dpstats.algorithms import _REGISTRY

    assert ("mean", hostile.NoisyMean.name) not in _REGISTRY  # nothing registered


def test_unknown_names_and_hyperparameters_fail_as_the_registry_and_class_say() -> None:
    with pytest.raises(ValueError, match="unknown algorithm 'no_such'"):
        AlgorithmSpec("sce", "no_such").cls
    with pytest.raises(TypeError, match="unknown hyperparameter"):
        AlgorithmSpec("linreg", "adassp", {"no_such": 1}).build()


# --------------------------------------------------------------------------
# release()
# --------------------------------------------------------------------------


@pytest.mark.parametrize("task, name, instance", [("sce", "fwl_score", "engel_food"),
                                                  ("linreg", "dpnewton", "engel_food_linreg"),
                                                  ("mean", "adaptive_whiten", "mean_engel_food"),
                                                  ("sce", "adassp", "engel_food")])
def test_release_is_the_algorithm_run_bit_for_bit(corpus: Corpus, task: str, name: str, instance: str) -> None:
    inst = corpus.instance(instance)
    spec = AlgorithmSpec(task, name).with_intervals()
    for seed in (0, 1):
        out = release(spec, inst.task_data(), inst.facts, Budget(1.0, 1e-6), np.random.default_rng(seed))
        direct = get(task, name)(**spec.params).run(inst.task_data(), inst.facts, 1.0, 1e-6,
                                                    np.random.default_rng(seed))
        assert type(out) is type(direct)
        if isinstance(out, Release):
            assert _hex(out.estimate) == _hex(direct.estimate)
            assert out.estimate.shape == (expected_size(task, inst.task_data()),)
            assert out.ledger == direct.ledger and (out.epsilon, out.delta) == (direct.epsilon, direct.delta)
            if out.std_error is not None:
                assert _hex(out.std_error) == _hex(direct.std_error)
        else:
            assert out.reason == direct.reason


def test_a_carried_class_releases_and_a_decline_passes_the_check(corpus: Corpus) -> None:
    inst = corpus.instance("mean_engel_food")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the test algorithm is not standard
        out = release(AlgorithmSpec.of(hostile.NoisyMean), inst.task_data(), inst.facts, Budget(1.0, 1e-6),
                      np.random.default_rng(0))
    assert isinstance(out, Release) and np.all(np.isfinite(out.estimate))
    decline = Decline(reason="too few rows")
    assert check_outcome(decline, 3) is decline


@pytest.mark.parametrize("cls, instance, message", [
    (hostile.ReturnsNaN, "mean_engel_food", "non-finite estimate"),
    (hostile.WrongShapeRun, "engel_food", "estimate has shape (3,), expected (1,)"),
    (hostile.ReturnsNone, "mean_engel_food", "algorithm returned NoneType, not Release or Decline"),
])
def test_an_invalid_outcome_raises_with_the_outcome(corpus: Corpus, cls, instance: str, message: str) -> None:
    inst = corpus.instance(instance)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the test algorithms are not standard
        with pytest.raises(InvalidOutcome, match=message.replace("(", r"\(").replace(")", r"\)")) as info:
            release(AlgorithmSpec.of(cls), inst.task_data(), inst.facts, Budget(1.0, 1e-6),
                    np.random.default_rng(0))
    exc = info.value
    if cls is hostile.ReturnsNaN:
        assert exc.estimate is not None and exc.estimate.shape == (inst.d,) and np.isnan(exc.estimate).all()
        assert isinstance(exc.outcome, Release)
    else:
        assert exc.estimate is None
    if cls is hostile.ReturnsNone:
        assert exc.outcome is None


def test_a_column_vector_passes_flattened() -> None:
    out = check_outcome(Release(estimate=np.zeros((3, 1)), epsilon=1.0, delta=0.0), 3)
    assert out.estimate.shape == (3,)
    with pytest.raises(InvalidOutcome, match="expected"):
        check_outcome(Release(estimate=np.zeros((3, 3)), epsilon=1.0, delta=0.0), 9)
    with pytest.raises(InvalidOutcome, match="not numeric"):
        check_outcome(Release(estimate=np.array(["a"], dtype=object), epsilon=1.0, delta=0.0), 1)
