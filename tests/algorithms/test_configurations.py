"""The roster's configurations are data, and the registry holds classes only.

* every class in the registry is made by its module when the module is
  imported (a class statement, or a module-level factory whose result the
  module keeps): listing the roster, adding the API's configurations and
  reading tuned files add no class;
* ``fwl_score[api]`` is ``fwl_score`` with its ``interval_params``, released
  through :func:`dpstats.algorithms.release.release`;
* a tuned configuration read from a folder is found by name, selected by the
  benchmark, planned at its own epsilon only, and sent to the workers as the
  base algorithm with its params.
"""

from __future__ import annotations

import importlib
import json
import pickle
import warnings
from pathlib import Path

import numpy as np
import pytest

from dpstats.algorithms import _REGISTRY, get, get_configuration, list_algorithms, list_configurations
from dpstats.algorithms import configurations as C
from dpstats.algorithms.release import AlgorithmSpec, Budget, release
from dpstats.bench import runner as R
from dpstats.bench.model import AlgorithmRef
from dpstats.data.corpus import Corpus


def _module_level(cls: type) -> bool:
    """Whether ``cls`` is reachable from its module: by its qualified name, or in a module-level list of classes."""
    mod = importlib.import_module(cls.__module__)
    obj: object = mod
    for part in cls.__qualname__.split("."):
        obj = getattr(obj, part, None)
    if obj is cls:
        return True
    return any(isinstance(v, (list, tuple)) and any(c is cls for c in v) for v in vars(mod).values())


def test_every_registered_class_is_made_by_its_module_at_import() -> None:
    """No class in the registry is minted at run time: each is defined by the module it names.

    A class statement resolves by its qualified name. The synthesize-then-estimate classes are made by a
    factory at import and kept in their module's ``CLASSES``; an sce wrapper of :func:`coefficient_of` is
    made at import from a linreg class that is itself defined in the module (``wraps``).
    """
    list_configurations(opt_in=True)
    classes = list(_REGISTRY.values())
    assert len(classes) >= 40
    assert not [c for c in classes if c.__module__ == C.__name__]
    for cls in classes:
        made_here = _module_level(cls) or (cls.wraps is not None and _module_level(cls.wraps))
        assert made_here, (cls.task, cls.name, cls.__module__, cls.__qualname__)
        assert "_tuned_eps" not in cls.name and "[" not in cls.name, cls.name


def test_the_roster_adds_no_class(tmp_path: Path, restore_registry) -> None:
    """Listing the roster and reading a tuned folder leave the registry as the built-in modules made it."""
    list_algorithms(opt_in=True)
    before = dict(_REGISTRY)
    list_configurations(opt_in=True)
    _write_tuned(tmp_path)
    assert C.register_tuned(tmp_path)
    assert dict(_REGISTRY) == before
    named = list_configurations(named=True)
    assert {c.name for c in named} >= {"fwl_score[api]", "fwl_each[api]", "adaptive_whiten[api]",
                                         "kv_clip_tuned_eps1"}
    for cfg in named:
        assert isinstance(cfg, C.Configuration) and (cfg.task, cfg.name) not in _REGISTRY
        assert _REGISTRY[(cfg.task, cfg.algorithm)] is cfg.cls
        assert cfg.spec() == AlgorithmSpec(cfg.task, cfg.algorithm, cfg.params)
        assert pickle.loads(pickle.dumps(cfg)) == cfg
    with pytest.raises(ValueError, match="registered sce algorithm"):
        C.add_configuration(C.Configuration("sce", "fwl_score", "fwl_score", {"ridge": 1.0}, kind="api"))
    with pytest.raises(ValueError, match="unknown algorithm"):
        get("sce", "fwl_score[api]")  # the registry holds classes only


def test_fwl_score_api_releases_through_release_with_the_interval_params() -> None:
    cfg = get_configuration("sce", "fwl_score[api]")
    base = get("sce", "fwl_score")
    assert cfg.cls is base and cfg.kind == "api" and not cfg.intervals and cfg.interpretation == "standard"
    assert dict(cfg.params) == dict(base.interval_params) and cfg.params
    assert cfg.spec() == AlgorithmSpec("sce", "fwl_score", base.interval_params)
    inst = Corpus.public().instance("mroz87_lwage")
    data, facts = inst.task_data(), inst.facts
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        out = release(cfg.spec(), data, facts, Budget(3.0, 1e-6), np.random.default_rng(0))
        same = release(AlgorithmSpec("sce", "fwl_score").with_intervals(), data, facts, Budget(3.0, 1e-6),
                       np.random.default_rng(0))
    assert np.array_equal(out.estimate, same.estimate) and out.ledger == same.ledger
    assert out.std_error is not None  # the interval params: the release carries its interval
    # the benchmark sends it to a worker as fwl_score with those params, under its own name
    ref = AlgorithmRef.of_configuration(cfg)
    assert (ref.name, ref.ref, dict(ref.params)) == ("fwl_score[api]", "fwl_score", dict(base.interval_params))
    assert ref.spec() == cfg.spec() and ref.load() is base


def _write_tuned(folder: Path) -> Path:
    path = folder / "mean_kv_clip_eps1.json"
    path.write_text(json.dumps({"format": 1, "accepted": True, "task": "mean", "algorithm": "kv_clip",
                                "epsilon": 1.0, "params": {"range_share": 0.25}}), encoding="utf-8")
    return path


def test_a_tuned_configuration_from_a_folder_is_benchmarked_at_its_epsilon(tmp_path: Path,
                                                                            restore_registry) -> None:
    _write_tuned(tmp_path)
    (cfg,) = C.register_tuned(tmp_path)
    assert C.register_tuned(tmp_path) == [cfg]  # idempotent
    assert get_configuration("mean", "kv_clip_tuned_eps1") is cfg
    assert cfg.kind == "tuned" and cfg.epsilon == 1.0 and cfg.file == "mean_kv_clip_eps1.json"
    assert cfg.spec() == AlgorithmSpec("mean", "kv_clip", {"range_share": 0.25})
    assert cfg.metadata()["defaults"]["range_share"]["source"].startswith("tuned at epsilon = 1")
    (sel,) = R.select_algorithms(["kv_clip_tuned_eps1"], ["mean"])
    assert sel.config is cfg and sel.cls is get("mean", "kv_clip") and sel.source == "builtin"
    assert (sel.ref.name, sel.ref.ref, dict(sel.ref.params)) == ("kv_clip_tuned_eps1", "kv_clip", {"range_share": 0.25})
    assert cfg in [s.config for s in R.select_algorithms(None, ["mean"])]
    corpus = Corpus.public()
    specs = R.select_instances(corpus, ["mean"], ["mean_engel_food"])
    plan = R.make_plan(corpus, [sel], specs, [1.0, 3.0], 1e-6, 2)
    assert plan.planned == 2 and {t[0] for job in plan.jobs for t in job.trials} == {1.0}
    # the worker's release: kv_clip with the tuned params, bit for bit
    inst = corpus.instance("mean_engel_food")
    out = release(sel.ref.spec(), inst.task_data(), inst.facts, Budget(1.0, 1e-6), np.random.default_rng(3))
    want = get("mean", "kv_clip")(range_share=0.25).run(inst.task_data(), inst.facts, 1.0, 1e-6,
                                                        np.random.default_rng(3))
    assert np.array_equal(out.estimate, want.estimate)
