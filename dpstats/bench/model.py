"""The benchmark's data model: what a trial runs on and what it gives, shared by every bench module.

This module holds the plain descriptions that the in-process trial
(:mod:`dpstats.bench.trial`), the process sandbox
(:mod:`dpstats.bench.sandbox`), the coverage design
(:mod:`dpstats.bench.inference`), the summaries
(:mod:`dpstats.bench.evaluation`), the store and the runner all use, so that
none of them imports another only for a name:

- :data:`STATUSES`, the five statuses of a trial, and :data:`MAX_MESSAGE`,
  the longest error message kept;
- :func:`describe_exception`, how a failure is written into a result;
- :class:`AlgorithmRef`, how a worker finds an algorithm and its hyperparameters;
- :class:`Problem`, an instance ready for trials, loaded once per process by
  :func:`load_problem` (its corpus opened once per process by
  :func:`open_corpus`);
- :class:`TrialResult`, one scored trial (a row of the results store);
- :class:`TrialKind`, a kind of trial other than the point trial (the
  coverage trial of :mod:`dpstats.bench.inference`), which a job hands to the
  workers of :class:`~dpstats.bench.sandbox.WorkerPool`.

It imports nothing else of :mod:`dpstats.bench` (the benchmark's layer
contract in ``pyproject.toml`` puts it at the bottom).
"""

from __future__ import annotations

import os
import traceback
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from dpstats.algorithms.base import Algorithm
    from dpstats.algorithms.release import AlgorithmSpec

__all__ = [
    "STATUSES",
    "MAX_MESSAGE",
    "describe_exception",
    "AlgorithmRef",
    "Problem",
    "TrialResult",
    "TrialKind",
    "open_corpus",
    "load_problem",
    "cache_problem",
    "trial_generator",
]

#: the statuses of a trial (see :mod:`dpstats.bench.trial`); every one but ``ok`` is a failure
STATUSES = ("ok", "declined", "error", "timeout", "memory")

#: longest error message kept
MAX_MESSAGE = 2000


def describe_exception(exc: BaseException) -> str:
    """``Type: message (at file:line in function)`` for the innermost frame, cut to :data:`MAX_MESSAGE`.

    Parameters
    ----------
    exc : BaseException
        A caught exception (its traceback gives the frame).

    Returns
    -------
    str
        What a result keeps of the failure (``TrialResult.error``).
    """
    msg = f"{type(exc).__name__}: {exc}".strip()
    tb = traceback.extract_tb(exc.__traceback__)
    if tb:
        fr = tb[-1]
        msg += f" (at {Path(fr.filename).name}:{fr.lineno} in {fr.name})"
    return msg[:MAX_MESSAGE]


def trial_generator(seed: int, secure: bool = False) -> np.random.Generator:
    """The only randomness of a benchmark trial (point or coverage), fresh for each trial.

    Parameters
    ----------
    seed : int
        ``numpy.random.default_rng(seed)``: the same release for the same
        algorithm, data, budget and seed, in any process.
    secure : bool
        A fresh :class:`~dpstats.privacy.randomness.SecureGenerator` instead
        (OpenDP's samplers, fresh entropy; the seed only numbers the trial).
    """
    if secure:
        from dpstats.privacy.randomness import SecureGenerator

        return SecureGenerator()
    return np.random.default_rng(seed)


@dataclass(frozen=True)
class AlgorithmRef:
    """How a worker finds an algorithm and the hyperparameters it runs with.

    Attributes
    ----------
    name : str
        The name stored with results: the algorithm's registry name
        (``cls.name``), a roster configuration's name (``fwl_score[api]``,
        ``coinpress_tuned_eps1``), or for a labelled configuration
        ``<cls.name>[<label>]`` (e.g. a tuning candidate, ``coinpress[tune 3]``).
    task : str
    ref : str
        What :func:`dpstats.algorithms.get` resolves: the registry name of the
        algorithm that runs, or a ``module:object`` plugin path.
    interpretation : str
    params : tuple of (str, object) pairs
        Hyperparameters overriding the class's defaults (none: the defaults),
        as plain data so that a job pickles to its worker.
    """

    name: str
    task: str
    ref: str
    interpretation: str
    params: tuple[tuple[str, Any], ...] = ()

    @classmethod
    def of(cls, algo_cls: type[Algorithm], ref: str | None = None, params: Mapping[str, Any] | None = None,
           label: str | None = None) -> AlgorithmRef:
        """The reference of a registered class (``ref`` defaults to its name).

        ``params`` configure it; ``label`` then names the configuration in the
        results (``<name>[<label>]``).
        """
        name = algo_cls.name if label is None else f"{algo_cls.name}[{label}]"
        return cls(name=name, task=algo_cls.task, ref=ref or algo_cls.name,
                   interpretation=algo_cls.interpretation, params=tuple((params or {}).items()))

    @classmethod
    def of_configuration(cls, config: Any) -> AlgorithmRef:
        """The reference of a roster entry (:class:`~dpstats.algorithms.configurations.Configuration`).

        Its name is stored with results; its algorithm and params are what a
        worker releases with, so a worker needs no roster of its own. A class
        the registry does not hold (``config.base``) is found by its
        ``module:object`` path.
        """
        base = config.base
        ref = config.algorithm if base is None else f"{base.__module__}:{base.__qualname__}"
        return cls(name=config.name, task=config.task, ref=ref, interpretation=config.interpretation,
                   params=tuple(config.params.items()))

    def load(self) -> type[Algorithm]:
        """Import and return the class (checking that it is the algorithm :attr:`name` says)."""
        from dpstats.algorithms import get
        from dpstats.algorithms.configurations import names_configuration_of

        algo_cls = get(self.task, self.ref)
        if not names_configuration_of(self.name, algo_cls.name):
            raise ValueError(f"{self.ref!r} resolves to algorithm {algo_cls.name!r}, expected {self.name!r}")
        return algo_cls

    def spec(self) -> AlgorithmSpec:
        """The :class:`~dpstats.algorithms.release.AlgorithmSpec` to release with (checked by :meth:`load`)."""
        from dpstats.algorithms.release import AlgorithmSpec

        self.load()
        return AlgorithmSpec(self.task, self.ref, dict(self.params))


@dataclass(frozen=True, eq=False)
class Problem:
    """An instance ready for trials: read-only private data, public facts and the baseline.

    Use :meth:`from_instance`; workers build problems with :func:`load_problem`.
    """

    instance: str
    study: str
    task: str
    n: int
    d: int
    data: Any  # TaskData
    facts: Any  # PublicFacts
    baseline: Any  # Baseline

    @classmethod
    def from_instance(cls, instance: Any, baseline: Any = None) -> Problem:
        """Wrap an :class:`~dpstats.data.instance.Instance` (computing its baseline unless given)."""
        from dpstats.algorithms.base import TaskData
        from dpstats.ols.baseline import compute_baseline

        if baseline is None:
            baseline = compute_baseline(instance)
        td = instance.task_data()
        X = np.array(td.X, dtype=float, copy=True)
        X.flags.writeable = False
        y = None
        if td.y is not None:
            y = np.array(td.y, dtype=float, copy=True)
            y.flags.writeable = False
        clusters = None
        if td.clusters is not None:
            clusters = np.array(td.clusters, copy=True)
            clusters.flags.writeable = False
        data = TaskData(X, y, clusters=clusters)
        return cls(instance=instance.id, study=instance.spec.study, task=instance.task, n=instance.n,
                   d=instance.d, data=data, facts=instance.facts, baseline=baseline)

    @property
    def expected_size(self) -> int:
        """Length of a valid estimate: 1 (sce) or d."""
        return 1 if self.task == "sce" else self.d

    def info(self) -> dict[str, Any]:
        """The instance's description stored with the results."""
        b = self.baseline.to_dict()
        return {
            "instance": self.instance, "study": self.study, "task": self.task, "n": int(self.n), "d": int(self.d),
            "baseline": float(self.baseline.baseline), "se_type": b.get("se_type"), "estimate": b.get("estimate"),
            "facts": self.facts.to_dict(),
        }


@dataclass(frozen=True)
class TrialResult:
    """One scored trial (a row of the results store)."""

    algorithm: str
    interpretation: str
    instance: str
    study: str
    task: str
    epsilon: float
    delta: float
    seed: int
    status: str
    error: str | None
    estimate: tuple[float, ...] | None
    error_value: float
    baseline: float
    ratio: float
    seconds: float
    peak_mb: float
    n: int
    d: int
    #: why the release is a fallback (its ``details["fallback"]``); None for an estimate and every failure
    fallback: str | None = None
    #: a coverage trial's interval record (:func:`dpstats.bench.inference.run_inference_trial`); None otherwise
    interval: dict[str, Any] | None = None

    @property
    def key(self) -> tuple[str, str, str, float, float, int]:
        """``(algorithm, task, instance, epsilon, delta, seed)``: unique in a store."""
        return (self.algorithm, self.task, self.instance, self.epsilon, self.delta, self.seed)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class TrialKind:
    """A kind of trial other than the point trial, run by the benchmark's workers.

    A :class:`~dpstats.bench.sandbox.Job` whose ``kind`` is set has its worker
    call ``load`` once for the job's instance and ``run`` for each of its
    trials, under the same limits, batching and recovery as point trials. The
    job carries the kind to the worker (pickled by reference), so the
    sandbox never imports the module that defines it: the dependency points
    from the kind's module to this one. The coverage trial of
    :mod:`dpstats.bench.inference` (``COVERAGE_TRIAL``) is one.

    Attributes
    ----------
    name : str
        What the trials are, for messages.
    load : callable
        ``load(corpus, instance) -> problem``: the instance ready for trials,
        loaded once per process; ``problem.info()`` is the instance's
        description stored with the results. A module-level function.
    run : callable
        ``run(spec, problem, algorithm, epsilon, delta, seed, secure) ->
        TrialResult``: one trial in the worker, scored (its ``peak_mb`` is
        set by the worker), where ``spec`` is the job's
        :class:`~dpstats.algorithms.release.AlgorithmSpec` (:meth:`AlgorithmRef.spec`).
        A module-level function.
    """

    name: str
    load: Callable[[str, str], Any]
    run: Callable[[Any, Any, AlgorithmRef, float, float, int, bool], TrialResult]


# --------------------------------------------------------------------------
# Problems, loaded once per process (cached by corpus folder and instance id)
# --------------------------------------------------------------------------

_CORPORA: dict[str, Any] = {}
_PROBLEMS: dict[tuple[str, str], Problem] = {}


def open_corpus(root: str) -> Any:
    """The :class:`~dpstats.data.corpus.Corpus` of a resolved folder, opened once per process.

    Parameters
    ----------
    root : str
        The corpus folder, already resolved (``str(Path(corpus).resolve())``).

    Returns
    -------
    Corpus
    """
    from dpstats.data.corpus import Corpus

    if root not in _CORPORA:
        _CORPORA[root] = Corpus(root)
    return _CORPORA[root]


def load_problem(corpus: str | os.PathLike[str], instance: str) -> Problem:
    """Load an instance and its baseline once per process (cached by corpus folder and instance id)."""
    root = str(Path(corpus).resolve())
    key = (root, instance)
    if key not in _PROBLEMS:
        _PROBLEMS[key] = Problem.from_instance(open_corpus(root).instance(instance))
    return _PROBLEMS[key]


def cache_problem(corpus: str | os.PathLike[str], problem: Problem) -> None:
    """Make :func:`load_problem` of ``(corpus, problem.instance)`` return ``problem`` in this process.

    Forked workers inherit the cache, so a problem built in the supervising
    process (by :func:`dpstats.bench.sandbox.run_trial` or the tuning) is not
    loaded again.
    """
    _PROBLEMS[(str(Path(corpus).resolve()), problem.instance)] = problem
