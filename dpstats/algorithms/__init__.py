"""The private algorithms: the registry, the contract, the roster's configurations.

Every module in this package (one algorithm or family per file) registers its
classes with :func:`register`. Linear-regression algorithms are also
registered for the single-coefficient task through :func:`coefficient_of`.
Third-party algorithms come from ``module:object`` strings or the entry-point
group ``dpstats.algorithms``. The registry itself lives in
:mod:`dpstats.algorithms.registry` (imported by the algorithm modules) and
holds classes only; this package re-exports it and the roster of
:mod:`dpstats.algorithms.configurations`: every registered algorithm at its
defaults and the named configurations, data that run a registered algorithm
with other hyperparameters (the API's default configurations
``<algo>[api]``, the accepted tuned configurations of
``dpstats/tuned/*.json``, ``<algo>_tuned_eps<E>``).

Examples
--------
>>> from dpstats.algorithms import get, list_algorithms, list_configurations
>>> sorted({a.task for a in list_algorithms()})
['linreg', 'mean', 'sce']
>>> [c.name for c in list_configurations("sce", named=True)]
['fwl_score[api]', 'fwl_score_tuned_eps10']
"""

from __future__ import annotations

import dpstats.algorithms.registry as _registry
from dpstats.algorithms.base import INTERPRETATIONS, TASKS, Algorithm, Decline, Param, Release, TaskData
from dpstats.algorithms.configurations import Configuration, get_configuration, list_configurations

# _REGISTRY (the registry's table itself, not a copy) and _load_builtin are private names that the
# benchmark's tuning and the tests use
from dpstats.algorithms.registry import _REGISTRY as _REGISTRY
from dpstats.algorithms.registry import _load_builtin as _load_builtin
from dpstats.algorithms.registry import (
    coefficient_of,
    get,
    list_algorithms,
    load_plugin,
    register,
)

__all__ = [
    "Algorithm",
    "Decline",
    "Param",
    "Release",
    "TaskData",
    "TASKS",
    "INTERPRETATIONS",
    "register",
    "coefficient_of",
    "get",
    "list_algorithms",
    "load_plugin",
    "Configuration",
    "list_configurations",
    "get_configuration",
]

#: The modules of the built-in algorithms, one per algorithm or family, imported on first use
#: (:data:`dpstats.algorithms.registry.BUILTIN_MODULES`). A new algorithm's module is added there
#: (``tests/algorithms/test_contract.py`` checks that every module of ``sce/``, ``linreg/`` and ``mean/``
#: is listed).
BUILTIN_MODULES: tuple[str, ...] = _registry.BUILTIN_MODULES
