"""The registry of private algorithms: register, look up, list, load plug-ins.

Every module of :data:`BUILTIN_MODULES` (one algorithm or family per file)
registers its classes with :func:`register` when the registry first loads them
(by name, on the first :func:`get` or :func:`list_algorithms`). Linear-regression
algorithms are also registered for the single-coefficient task through
:func:`coefficient_of`. Third-party algorithms come from ``module:object``
strings or the entry-point group ``dpstats.algorithms``. The registry holds
classes only: the roster's named configurations of registered algorithms
(``<algorithm>[api]``, ``<algorithm>_tuned_eps<E>``) are data, kept by
:mod:`dpstats.algorithms.configurations`.

The names are re-exported by :mod:`dpstats.algorithms`, the place to import them from.
"""

from __future__ import annotations

import importlib
from dataclasses import replace
from importlib import metadata as _md
from typing import Any

import numpy as np

from dpstats.algorithms.base import INTERPRETATIONS, TASKS, Algorithm, Outcome, PublicFacts, Release, TaskData

__all__ = [
    "register",
    "coefficient_of",
    "get",
    "list_algorithms",
    "load_plugin",
    "BUILTIN_MODULES",
]

_REGISTRY: dict[tuple[str, str], type[Algorithm]] = {}
_LOADED = False


def register(cls: type[Algorithm]) -> type[Algorithm]:
    """Class decorator: add an algorithm to the registry (name unique within its task)."""
    if cls.task not in TASKS:
        raise ValueError(f"{cls.__name__}: task must be one of {TASKS}, got {cls.task!r}")
    if cls.interpretation not in INTERPRETATIONS:
        raise ValueError(f"{cls.__name__}: unknown interpretation {cls.interpretation!r}")
    if not cls.name:
        raise ValueError(f"{cls.__name__}: empty name")
    key = (cls.task, cls.name)
    if key in _REGISTRY and _REGISTRY[key] is not cls:
        raise ValueError(f"algorithm {cls.name!r} already registered for task {cls.task!r}")
    _REGISTRY[key] = cls
    return cls


def coefficient_of(linreg_cls: type[Algorithm], name: str | None = None) -> type[Algorithm]:
    """Register the single-coefficient version of a linear-regression algorithm.

    The sce algorithm runs the regression algorithm with the same budget and
    releases the coordinate ``facts.coef_index`` (post-processing, so the privacy
    argument is the regression algorithm's).
    """
    if linreg_cls.task != "linreg":
        raise ValueError("coefficient_of takes a linreg algorithm")

    def _run(self: Algorithm, data: TaskData, facts: PublicFacts, epsilon: float, delta: float,
             rng: np.random.Generator) -> Outcome:
        inner = linreg_cls(**self.params)
        out = inner._run(data, facts, epsilon, delta, rng)
        if isinstance(out, Release):
            j = facts.coef_index

            def pick(a: Any) -> Any:
                return None if a is None else np.array([np.asarray(a, dtype=float).reshape(-1)[j]])

            return replace(out, estimate=pick(out.estimate), std_error=pick(out.std_error),
                           bias_bound=pick(out.bias_bound))
        return out

    cls = type(
        f"{linreg_cls.__name__}Coef",
        (Algorithm,),
        {
            "name": name or linreg_cls.name,
            "task": "sce",
            "citation": linreg_cls.citation,
            "interpretation": linreg_cls.interpretation,
            "summary": f"coefficient of interest from {linreg_cls.name} (linreg)",
            "defaults": dict(linreg_cls.defaults),
            "iterative": linreg_cls.iterative,
            "public_details": dict(linreg_cls.public_details),  # the same details pass through
            "_run": _run,
            "__module__": linreg_cls.__module__,
            "__doc__": f"Single coefficient from :class:`{linreg_cls.__module__}.{linreg_cls.__name__}`.",
            "wraps": linreg_cls,
            "intervals": linreg_cls.intervals,
            "interval_params": dict(linreg_cls.interval_params),
        },
    )
    return register(cls)


#: The modules of the built-in algorithms, one per algorithm or family, imported on first use.
#: A new algorithm's module is added here (``tests/algorithms/test_contract.py`` checks that
#: every module of ``sce/``, ``linreg/`` and ``mean/`` is listed).
BUILTIN_MODULES: tuple[str, ...] = (
    "dpstats.algorithms.linreg.adassp",
    "dpstats.algorithms.linreg.dpgd",
    "dpstats.algorithms.linreg.dpnewton",
    "dpstats.algorithms.linreg.fwl_each",
    "dpstats.algorithms.linreg.sa_median",
    "dpstats.algorithms.linreg.ssp",
    "dpstats.algorithms.linreg.ssp_bootstrap",
    "dpstats.algorithms.linreg.synth",
    "dpstats.algorithms.linreg.tukeyem",
    "dpstats.algorithms.mean.adaptive",
    "dpstats.algorithms.mean.bhs_affine",
    "dpstats.algorithms.mean.clip_data_bounds",
    "dpstats.algorithms.mean.coinpress",
    "dpstats.algorithms.mean.kv_clip",
    "dpstats.algorithms.mean.kv_interval",
    "dpstats.algorithms.mean.synth",
    "dpstats.algorithms.sce.blb_coinpress",
    "dpstats.algorithms.sce.fwl_blocks",
    "dpstats.algorithms.sce.fwl_preprocessed",
    "dpstats.algorithms.sce.fwl_score",
    "dpstats.algorithms.sce.sa_coef",
    "dpstats.algorithms.sce.sa_interval",
    "dpstats.algorithms.sce.simple_regression",
)


def _load_builtin() -> None:
    global _LOADED
    if _LOADED:
        return
    _LOADED = True
    for mod in BUILTIN_MODULES:
        importlib.import_module(mod)
    for ep in _md.entry_points(group="dpstats.algorithms"):
        obj = ep.load()
        for cls in obj if isinstance(obj, (list, tuple)) else [obj]:
            register(cls)


def list_algorithms(task: str | None = None, interpretation: str | None = None, *,
                    opt_in: bool = False) -> list[type[Algorithm]]:
    """Registered algorithms, sorted by task then name.

    Parameters
    ----------
    task : str, optional
        Keep only this task.
    interpretation : str, optional
        Keep only this interpretation class (e.g. ``"standard"``).
    opt_in : bool
        Also list the opt-in algorithms (class attribute ``opt_in = True``:
        the synthesize-then-estimate algorithms of synthesizers that compile
        JAX or torch code, seconds per run; run by name, e.g. ``dpstats bench
        --algorithm synth_mst``, and always found by :func:`get`).
    """
    _load_builtin()
    if task is not None and task not in TASKS:
        raise ValueError(f"unknown task {task!r}; choose one of {TASKS}")
    out = [c for (t, _), c in _REGISTRY.items() if task is None or t == task]
    if interpretation is not None:
        out = [c for c in out if c.interpretation == interpretation]
    if not opt_in:
        out = [c for c in out if not c.opt_in]
    return sorted(out, key=lambda c: (TASKS.index(c.task), c.name))


def get(task: str, name: str) -> type[Algorithm]:
    """Look up an algorithm class by task and name (or a ``module:object`` plugin)."""
    _load_builtin()
    if ":" in name:
        cls = load_plugin(name)
        if cls.task != task:
            raise ValueError(f"plugin {name!r} is for task {cls.task!r}, not {task!r}")
        return cls
    try:
        return _REGISTRY[(task, name)]
    except KeyError:
        known = ", ".join(sorted(n for (t, n) in _REGISTRY if t == task))
        raise ValueError(f"unknown algorithm {name!r} for task {task!r}; known: {known}") from None


def load_plugin(spec: str) -> type[Algorithm]:
    """Import ``module:object`` and return the algorithm class it names (registered)."""
    mod_name, _, attr = spec.partition(":")
    if not mod_name or not attr:
        raise ValueError(f"plugin must be 'module:object', got {spec!r}")
    try:
        mod = importlib.import_module(mod_name)
    except ImportError as exc:
        raise ValueError(f"cannot import plugin module {mod_name!r}: {exc}") from exc
    obj: Any = mod
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"plugin module {mod_name!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if not (isinstance(obj, type) and issubclass(obj, Algorithm)):
        raise ValueError(f"plugin {spec!r} is not a dpstats Algorithm subclass")
    _load_builtin()
    key = (obj.task, obj.name)
    if _REGISTRY.get(key) not in (None, obj):
        raise ValueError(f"plugin {spec!r} uses the name {obj.name!r}, taken by a built-in {obj.task} algorithm")
    return register(obj)


