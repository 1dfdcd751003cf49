"""One release path: a budget, an algorithm configuration and the call that runs it.

Every caller that releases (the economist API, the benchmark's point and
coverage trials, the audit, the tuning) does it the same way::

    out = release(AlgorithmSpec(task, name, params), data, facts, Budget(epsilon, delta), rng)

* :class:`Budget` is an ``(epsilon, delta)`` pair checked once, where it is made.
* :class:`AlgorithmSpec` names an algorithm (``task`` and registry ``name``) and
  the hyperparameters it runs with, as data: it pickles to worker processes
  and compares by value, so a configuration needs no class of its own.
* :func:`release` builds the algorithm, runs it and checks the outcome once
  (:func:`check_outcome`): a :class:`~dpstats.algorithms.base.Release` or a
  :class:`~dpstats.algorithms.base.Decline`, whose estimate is numeric, of the
  task's length and finite. An outcome that fails raises
  :class:`InvalidOutcome`, which carries the outcome for callers that report it.

The generator ``rng`` is the caller's: the API's comes from
:func:`dpstats.privacy.randomness.release_generator`, the benchmark's is
seeded per trial. Nothing here draws randomness or charges a budget.

Examples
--------
>>> import numpy as np
>>> from dpstats.data.corpus import Corpus
>>> inst = Corpus.public().instance("engel_food")
>>> spec = AlgorithmSpec("sce", "fwl_score").with_intervals()
>>> out = release(spec, inst.task_data(), inst.facts, Budget(3.0, 1e-6), np.random.default_rng(0))
>>> type(out).__name__, out.estimate.shape, out.std_error is not None
('Release', (1,), True)
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

import numpy as np

from dpstats.algorithms.base import Algorithm, Decline, Outcome, PublicFacts, Release, TaskData
from dpstats.algorithms.registry import get
from dpstats.privacy.conversions import validate_budget

__all__ = ["Budget", "AlgorithmSpec", "InvalidOutcome", "check_outcome", "expected_size", "release"]


@dataclass(frozen=True)
class Budget:
    """A privacy budget ``(epsilon, delta)``, checked when it is made.

    Parameters
    ----------
    epsilon : real number
        Finite and > 0.
    delta : real number
        In ``[0, 1)``.

    Raises
    ------
    TypeError
        ``epsilon`` or ``delta`` is not a real number (a bool is not one).
    ValueError
        ``epsilon`` or ``delta`` is out of range (the message names the argument).

    Examples
    --------
    >>> Budget(1, 1e-6)
    Budget(epsilon=1.0, delta=1e-06)
    >>> Budget(0, 1e-6)
    Traceback (most recent call last):
    ...
    ValueError: epsilon must be a positive finite number, got 0
    """

    epsilon: float
    delta: float

    def __post_init__(self) -> None:
        if isinstance(self.epsilon, bool) or not isinstance(self.epsilon, numbers.Real):
            raise TypeError(f"epsilon must be a positive finite number, got {self.epsilon!r}")
        if isinstance(self.delta, bool) or not isinstance(self.delta, numbers.Real):
            raise TypeError(f"delta must be a number in [0, 1), got {self.delta!r}")
        validate_budget(self.epsilon, self.delta)  # the ranges: the one budget check (dpstats.privacy.accounting)
        object.__setattr__(self, "epsilon", float(self.epsilon))
        object.__setattr__(self, "delta", float(self.delta))


@dataclass(frozen=True)
class AlgorithmSpec:
    """An algorithm and the hyperparameters it runs with, as data.

    Parameters
    ----------
    task : str
        ``"sce"``, ``"linreg"`` or ``"mean"``.
    name : str
        What :func:`dpstats.algorithms.get` resolves for ``task``: a registry
        name or a ``module:object`` plugin.
    params : mapping, optional
        Hyperparameters that override the class's defaults (stored read-only).
    algorithm : Algorithm subclass, optional
        The class to run when it is not the one the registry holds under
        ``name`` (a class handed over directly, e.g. to the audit). Not
        compared; pickled by reference, so it must be importable.

    Notes
    -----
    Hyperparameters are public, so a configuration keeps its algorithm's
    privacy argument. A spec pickles (to forked or spawned workers) as its
    task, name, a plain dict of its params and its class when it has one.
    """

    task: str
    name: str
    params: Mapping[str, Any] = field(default_factory=dict)
    algorithm: type[Algorithm] | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", MappingProxyType(dict(self.params)))

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # a mapping proxy does not pickle: travel as a plain dict
        return (AlgorithmSpec, (self.task, self.name, dict(self.params), self.algorithm))

    def __hash__(self) -> int:
        return hash((self.task, self.name, tuple(sorted((k, repr(v)) for k, v in self.params.items()))))

    @classmethod
    def of(cls, algorithm: type[Algorithm], params: Mapping[str, Any] | None = None) -> AlgorithmSpec:
        """The spec of a class: by name when the registry resolves its name to it, else carrying it."""
        try:
            registered = get(algorithm.task, algorithm.name) is algorithm
        except ValueError:
            registered = False
        return cls(algorithm.task, algorithm.name, params or {}, None if registered else algorithm)

    @property
    def cls(self) -> type[Algorithm]:
        """The algorithm class (:func:`dpstats.algorithms.get` of ``task`` and ``name``, unless carried)."""
        return self.algorithm if self.algorithm is not None else get(self.task, self.name)

    def build(self) -> Algorithm:
        """A fresh instance configured with :attr:`params` (the class checks their names)."""
        return self.cls(**self.params)

    def with_params(self, **params: Any) -> AlgorithmSpec:
        """This spec with ``params`` overriding its own."""
        return replace(self, params={**self.params, **params})

    def with_intervals(self) -> AlgorithmSpec:
        """The spec as run for an interval: the class's ``interval_params`` under this spec's own params."""
        return replace(self, params={**self.cls.interval_params, **self.params})


class InvalidOutcome(ValueError):
    """An outcome that failed :func:`check_outcome`.

    Attributes
    ----------
    outcome : object
        What the algorithm returned.
    estimate : ndarray or None
        The estimate as a flat float array when it was numeric and of the
        right length (a non-finite estimate), else None.
    """

    def __init__(self, message: str, outcome: Any, estimate: np.ndarray | None = None) -> None:
        super().__init__(message)
        self.outcome = outcome
        self.estimate = estimate


def expected_size(task: str, data: TaskData) -> int:
    """Length of a valid estimate: 1 for ``sce``, else the number of columns ``data.d``."""
    return 1 if task == "sce" else data.d


def check_outcome(out: Any, size: int) -> Outcome:
    """Check a run's outcome: a decline, or a release of a finite numeric estimate of length ``size``.

    Parameters
    ----------
    out : object
        What the algorithm's ``run`` returned.
    size : int
        The length of a valid estimate (:func:`expected_size`).

    Returns
    -------
    Release or Decline
        A release with its estimate as a flat float array.

    Raises
    ------
    InvalidOutcome
        Neither a release nor a decline, an estimate that is not numeric, of
        another shape than ``(size,)`` (a column or row vector of ``size``
        entries passes), or not finite.
    """
    if isinstance(out, Decline):
        return out
    if not isinstance(out, Release):
        raise InvalidOutcome(f"algorithm returned {type(out).__name__}, not Release or Decline", out)
    try:
        est = np.asarray(out.estimate, dtype=float)
    except (TypeError, ValueError) as exc:
        raise InvalidOutcome(f"estimate is not numeric: {type(exc).__name__}: {exc}", out) from None
    if est.size != size or est.ndim > 1 and max(est.shape) != est.size:
        raise InvalidOutcome(f"estimate has shape {est.shape}, expected ({size},)", out)
    est = est.reshape(-1)
    if not np.all(np.isfinite(est)):
        raise InvalidOutcome(f"non-finite estimate {np.array2string(est, threshold=8)}", out, est)
    return replace(out, estimate=est)


def release(spec: AlgorithmSpec, data: TaskData, facts: PublicFacts, budget: Budget,
            rng: np.random.Generator) -> Outcome:
    """Run the algorithm of ``spec`` once under ``budget`` and check its outcome.

    Parameters
    ----------
    spec : AlgorithmSpec
        The algorithm and its hyperparameters; a fresh instance is built.
    data : TaskData
        The private data.
    facts : PublicFacts
        The instance's public facts.
    budget : Budget
        The algorithm spends exactly this.
    rng : numpy.random.Generator
        The only source of randomness (the caller's; see the module notes).

    Returns
    -------
    Release or Decline
        Checked by :func:`check_outcome` (a release's estimate a flat float array).

    Raises
    ------
    InvalidOutcome
        The outcome failed the check.
    Exception
        Whatever building or running the algorithm raised, unchanged.
    """
    out = spec.build().run(data, facts, budget.epsilon, budget.delta, rng)
    return check_outcome(out, expected_size(spec.task, data))
