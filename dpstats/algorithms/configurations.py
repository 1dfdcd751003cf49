"""The roster's configurations: an algorithm with other hyperparameters, named, as data.

A roster entry is a :class:`Configuration`: a task, the name users and
stored results see, the registered algorithm it runs, the hyperparameters it
runs that algorithm with, where each of them comes from, and the descriptive
facts (summary, whether it is scored for intervals, the one privacy level it
is meant for). Every registered algorithm is the configuration of itself at
its defaults (:meth:`Configuration.of`); the named configurations are:

* ``<algorithm>[api]`` (:func:`api_configuration`): the default method of each
  task (:data:`API_DEFAULTS`) with its ``interval_params``, the budget split
  between the estimate and its interval that the economist API uses with
  ``inference=True``;
* ``<algorithm>_tuned_eps<E>`` (:func:`load_tuned`): the accepted tuned
  configurations of ``dpstats/tuned/*.json``, written by ``dpstats tune``.

A configuration releases through the one release path,
``release(configuration.spec(), data, facts, budget, rng)``
(:mod:`dpstats.algorithms.release`): a fresh instance of the registered class
built with the configuration's params. No class is made for it, so the
registry (:mod:`dpstats.algorithms.registry`) holds classes only.
Hyperparameters are public, so a configuration keeps its algorithm's privacy
argument and interpretation class.

:func:`list_configurations` lists the roster (the registered algorithms and
the named configurations), :func:`get_configuration` finds one entry by name;
the named configurations are added on the first call (the API's, then the
tuned ones of :data:`TUNED_DIR`).

Examples
--------
>>> cfg = get_configuration("sce", "fwl_score[api]")
>>> cfg.algorithm, cfg.intervals, cfg.interpretation, cfg.spec() == AlgorithmSpec("sce", "fwl_score", cfg.params)
('fwl_score', False, 'standard', True)
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from dpstats.algorithms.base import TASKS, Algorithm, Param
from dpstats.algorithms.registry import get, list_algorithms
from dpstats.algorithms.release import AlgorithmSpec

__all__ = [
    "Configuration",
    "list_configurations",
    "get_configuration",
    "add_configuration",
    "names_configuration_of",
    "API_DEFAULTS",
    "api_name",
    "api_configuration",
    "TUNED_DIR",
    "tuned_name",
    "load_tuned",
    "register_tuned",
]

#: where tuned configurations live (shipped with the package)
TUNED_DIR = Path(__file__).resolve().parents[1] / "tuned"

#: the kinds of roster entry: a registered algorithm at its defaults, the API's configuration, a tuned one
KINDS = ("algorithm", "api", "tuned")


@dataclass(frozen=True)
class Configuration:
    """A roster entry: a registered algorithm run with given hyperparameters, under a name of its own.

    Parameters
    ----------
    task : str
        ``"sce"``, ``"linreg"`` or ``"mean"``.
    name : str
        The roster name, stored with results (``fwl_score``, ``fwl_score[api]``,
        ``coinpress_tuned_eps1``).
    algorithm : str
        What :func:`dpstats.algorithms.get` resolves for ``task``: the registry
        name of the algorithm it runs, or a ``module:object`` plugin path.
    params : mapping, optional
        Hyperparameters that override the algorithm's defaults (stored read-only).
    sources : mapping, optional
        Where each of ``params`` comes from (``Param.source`` of :attr:`defaults`).
    summary : str
        One line on what it is.
    intervals : bool
        Whether the coverage benchmark runs it (``dpstats bench --inference``
        without ``--algorithm``); the algorithm's own ``intervals`` for an
        algorithm at its defaults.
    epsilon : float, optional
        The one privacy level it runs at in the benchmark (a tuned
        configuration's); None: every level.
    kind : {"algorithm", "api", "tuned"}
        A registered algorithm at its defaults, the API's configuration, a tuned one.
    file : str, optional
        The tuned configuration's JSON file name.
    base : Algorithm subclass, optional
        The class to run when the registry does not hold it under
        ``algorithm`` (a class handed over directly); not compared.

    Notes
    -----
    The interpretation class, citation and the other facts of the privacy
    argument are the algorithm's (:attr:`cls`): hyperparameters are public.
    """

    task: str
    name: str
    algorithm: str
    params: Mapping[str, Any] = field(default_factory=dict)
    sources: Mapping[str, str] = field(default_factory=dict)
    summary: str = ""
    intervals: bool = False
    epsilon: float | None = None
    kind: str = "algorithm"
    file: str | None = None
    base: type[Algorithm] | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.task not in TASKS:
            raise ValueError(f"configuration {self.name!r}: task must be one of {TASKS}, got {self.task!r}")
        if self.kind not in KINDS:
            raise ValueError(f"configuration {self.name!r}: kind must be one of {KINDS}, got {self.kind!r}")
        if not self.name:
            raise ValueError("a configuration needs a name")
        object.__setattr__(self, "params", MappingProxyType(dict(self.params)))
        object.__setattr__(self, "sources", MappingProxyType(dict(self.sources)))

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # a mapping proxy does not pickle: travel as plain dicts
        return (Configuration, (self.task, self.name, self.algorithm, dict(self.params), dict(self.sources),
                                self.summary, self.intervals, self.epsilon, self.kind, self.file, self.base))

    def __hash__(self) -> int:
        return hash((self.task, self.name, self.algorithm, tuple(sorted((k, repr(v)) for k, v in self.params.items()))))

    @classmethod
    def of(cls, algorithm: type[Algorithm], ref: str | None = None) -> Configuration:
        """A registered algorithm at its defaults, under its own name.

        ``ref`` is what resolves it (default: its name; a ``module:object``
        path for a plugin). A class the registry does not hold under its name
        is carried (:attr:`base`).
        """
        ref = ref or algorithm.name
        try:
            registered = get(algorithm.task, ref) is algorithm
        except ValueError:
            registered = False
        return cls(algorithm.task, algorithm.name, ref, summary=algorithm.summary, intervals=bool(algorithm.intervals),
                   base=None if registered else algorithm)

    @property
    def cls(self) -> type[Algorithm]:
        """The algorithm class it runs (:attr:`base`, else :func:`dpstats.algorithms.get` of :attr:`algorithm`)."""
        return self.base if self.base is not None else get(self.task, self.algorithm)

    @property
    def ref(self) -> str:
        """What :func:`get_configuration` resolves to this entry: its name, or the plugin path of a plugin."""
        return self.algorithm if self.kind == "algorithm" and ":" in self.algorithm else self.name

    @property
    def interpretation(self) -> str:
        """The algorithm's interpretation class (hyperparameters are public)."""
        return self.cls.interpretation

    @property
    def opt_in(self) -> bool:
        """Whether it is listed only on request (the algorithm's ``opt_in``)."""
        return bool(self.cls.opt_in)

    @property
    def defaults(self) -> dict[str, Param]:
        """The algorithm's defaults with :attr:`params` in place, each citing its source."""
        out = dict(self.cls.defaults)
        for k, v in self.params.items():
            out[k] = Param(v, self.sources.get(k, f"set by the configuration {self.name}"))
        return out

    def spec(self) -> AlgorithmSpec:
        """The :class:`~dpstats.algorithms.release.AlgorithmSpec` it releases with: the algorithm and :attr:`params`."""
        return AlgorithmSpec(self.task, self.algorithm, self.params, self.base)

    def metadata(self) -> dict[str, Any]:
        """Metadata for listings and the results store, as :meth:`Algorithm.metadata` gives for a class."""
        algo = self.cls
        return {
            "name": self.name,
            "task": self.task,
            "citation": algo.citation,
            "interpretation": algo.interpretation,
            "summary": self.summary,
            "iterative": algo.iterative,
            "defaults": {k: p.to_dict() for k, p in self.defaults.items()},
        }


def names_configuration_of(name: str, algorithm: str) -> bool:
    """Whether ``name`` names ``algorithm`` or a configuration of it.

    That is ``algorithm`` itself, ``<algorithm>[<label>]`` (the API's
    configuration, a tuning candidate) or ``<algorithm>_tuned_eps<E>``.
    """
    return name == algorithm or name.startswith(f"{algorithm}[") or name.startswith(f"{algorithm}_tuned_eps")


def configure(base: type[Algorithm], name: str, params: Mapping[str, Any], source: str, *, kind: str,
              summary: str, intervals: bool = False, epsilon: float | None = None,
              file: str | None = None) -> Configuration:
    """The configuration ``name`` of ``base`` with ``params`` (each citing ``source``).

    Raises
    ------
    ValueError
        ``params`` names a hyperparameter that ``base`` does not have.
    """
    unknown = sorted(set(params) - set(base.defaults))
    if unknown:
        raise ValueError(f"hyperparameter(s) {unknown} are not among {base.name}'s")
    carried = Configuration.of(base).base
    return Configuration(base.task, name, base.name, params, {k: source for k in params}, summary=summary,
                         intervals=intervals, epsilon=epsilon, kind=kind, file=file, base=carried)


# --------------------------------------------------------------------------
# The named configurations
# --------------------------------------------------------------------------

_CONFIGURATIONS: dict[tuple[str, str], Configuration] = {}
_LOADED = False


def add_configuration(cfg: Configuration) -> Configuration:
    """Add a named configuration to the roster; adding an equal one again is a no-op.

    Raises
    ------
    ValueError
        Its name is taken in its task by a registered algorithm or by another configuration.
    """
    key = (cfg.task, cfg.name)
    old = _CONFIGURATIONS.get(key)
    if old is not None and old != cfg:
        raise ValueError(f"configuration {cfg.name!r} already added for task {cfg.task!r}")
    try:
        get(cfg.task, cfg.name)
    except ValueError:
        pass
    else:
        raise ValueError(f"configuration {cfg.name!r}: the name is a registered {cfg.task} algorithm")
    _CONFIGURATIONS[key] = cfg
    return cfg


def _load() -> None:
    """Add the API's configurations, then the accepted tuned ones of :data:`TUNED_DIR` (once)."""
    global _LOADED
    if _LOADED:
        return
    _LOADED = True
    for task, name in API_DEFAULTS.items():
        add_configuration(api_configuration(get(task, name)))
    register_tuned()


def list_configurations(task: str | None = None, interpretation: str | None = None, *, opt_in: bool = False,
                        named: bool | None = None) -> list[Configuration]:
    """The roster: the registered algorithms at their defaults and the named configurations, by task then name.

    Parameters
    ----------
    task : str, optional
        Keep only this task.
    interpretation : str, optional
        Keep only this interpretation class.
    opt_in : bool
        Also list the opt-in algorithms and their configurations
        (:func:`~dpstats.algorithms.list_algorithms`).
    named : bool, optional
        True: only the named configurations; False: only the algorithms; None: both.
    """
    _load()
    algos = list_algorithms(task, interpretation, opt_in=opt_in)
    out = [] if named else [Configuration.of(c) for c in algos]
    if named is not False:
        out += [c for (t, _), c in _CONFIGURATIONS.items() if task is None or t == task]
        out = [c for c in out if c.kind == "algorithm"
               or ((interpretation is None or c.interpretation == interpretation) and (opt_in or not c.opt_in))]
    return sorted(out, key=lambda c: (TASKS.index(c.task), c.name))


def get_configuration(task: str, name: str) -> Configuration:
    """The roster entry ``name`` of ``task``: a named configuration, else the algorithm (or plugin) at its defaults.

    Raises
    ------
    ValueError
        No such entry (the message lists the task's entries).
    """
    _load()
    cfg = _CONFIGURATIONS.get((task, name))
    if cfg is not None:
        return cfg
    try:
        return Configuration.of(get(task, name), name)
    except ValueError as exc:
        if ":" in name or task not in TASKS:
            raise
        known = ", ".join(sorted(c.name for c in list_configurations(task, opt_in=True)))
        raise ValueError(f"unknown algorithm {name!r} for task {task!r}; known: {known}") from exc


# --------------------------------------------------------------------------
# The API's configurations: <algorithm>[api]
# --------------------------------------------------------------------------

#: The method the economist API runs for each task with an interval (``inference`` not False). It must equal
#: ``dpstats.api.INFERENCE_METHODS`` (the algorithms layer cannot import the API, which sits above it;
#: ``tests/bench/test_leaderboard_api.py`` checks that they agree). Each gets the roster entry
#: :func:`api_name` ``(name)``.
API_DEFAULTS: dict[str, str] = {"sce": "fwl_score", "linreg": "fwl_each", "mean": "adaptive_whiten"}


def api_name(algorithm: str) -> str:
    """``<algorithm>[api]``: the roster name of the configuration the API runs."""
    return f"{algorithm}[api]"


def api_configuration(base: type[Algorithm]) -> Configuration:
    """``base`` as the API runs it with ``inference=True``: its ``interval_params`` as params (not added).

    The release is the one ``dpstats.private_coef`` (``private_ols``,
    ``private_mean``) gives with ``method=None``: the point estimate gets
    only what the interval leaves of the budget. The configuration has
    ``intervals = False``: the coverage benchmark already runs ``base`` with
    these hyperparameters, so a second entry there would repeat it.

    Raises
    ------
    ValueError
        ``base`` declares no ``interval_params``.
    """
    params = dict(base.interval_params)
    if not base.intervals or not params:
        raise ValueError(f"{base.name!r} declares no interval_params: the API runs it with its defaults")
    return configure(
        base, api_name(base.name), params,
        f"the economist API's setting with inference=True ({base.name}.interval_params)", kind="api",
        summary=(base.summary + "; " if base.summary else "") + f"as the economist API runs it (inference=True: "
        f"{params})",
    )


# --------------------------------------------------------------------------
# The accepted tuned configurations: <algorithm>_tuned_eps<E>
# --------------------------------------------------------------------------


def tuned_name(algorithm: str, epsilon: float) -> str:
    """``<algorithm>_tuned_eps<E>`` with ``E`` printed as ``%g`` (0.3, 1, 3, 10)."""
    return f"{algorithm}_tuned_eps{float(epsilon):g}"


def _tuned(base: type[Algorithm], spec: Mapping[str, Any], path: Path) -> Configuration:
    eps = float(spec["epsilon"])
    params = dict(spec.get("params") or {})
    try:
        return configure(
            base, tuned_name(base.name, eps), params,
            f"tuned at epsilon = {eps:g} on public studies, see dpstats/tuned/{path.name}", kind="tuned",
            summary=(base.summary + "; " if base.summary else "") + f"hyperparameters tuned for epsilon = {eps:g}",
            intervals=False, epsilon=eps, file=path.name,
        )
    except ValueError as exc:
        raise ValueError(f"{path.name}: {exc}") from None


def load_tuned(directory: str | Path | None = None,
               resolve: Callable[[str, str], type[Algorithm]] | None = None) -> list[Configuration]:
    """The accepted tuned configurations of a folder (not added to the roster).

    Parameters
    ----------
    directory : path-like, optional
        Default: :data:`TUNED_DIR`. A missing or empty folder gives ``[]``.
    resolve : callable, optional
        ``(task, name) -> class`` for the base algorithms (default: the registry).

    Notes
    -----
    A file that cannot be read, or whose base algorithm is unknown, is
    skipped with a warning rather than breaking the roster.
    """
    d = Path(directory) if directory is not None else TUNED_DIR
    if not d.is_dir():
        return []
    if resolve is None:
        resolve = get
    out = []
    for path in sorted(d.glob("*.json")):
        try:
            spec = json.loads(path.read_text(encoding="utf-8"))
            if not spec.get("accepted"):
                continue
            out.append(_tuned(resolve(spec["task"], spec["algorithm"]), spec, path))
        except Exception as exc:  # noqa: BLE001 - one bad file must not break the roster
            warnings.warn(f"skipping tuned configuration {path}: {exc}", RuntimeWarning, stacklevel=2)
    return out


def register_tuned(directory: str | Path | None = None) -> list[Configuration]:
    """Add the accepted tuned configurations of a folder to the roster; idempotent; ``[]`` for an empty folder.

    A configuration whose name is already in the roster is kept as it was (the first one read wins).
    """
    return [_CONFIGURATIONS.get((cfg.task, cfg.name)) or add_configuration(cfg) for cfg in load_tuned(directory)]
