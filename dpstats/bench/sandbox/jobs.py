"""Descriptions of the work a worker pool runs: jobs of trials, generic call jobs and their results.

A :class:`Job` is the trials of one algorithm on one instance, which one
worker runs one after the other; a :class:`CallJob` is any module-level
function run on a sequence of items under the same limits, whose outcomes are
:class:`CallResult`. They are plain, picklable values: the supervisor sends
them to its workers (:mod:`dpstats.bench.sandbox.pool`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from dpstats.bench.model import AlgorithmRef, TrialKind


@dataclass(frozen=True)
class Job:
    """Trials of one algorithm on one instance, run one after the other by a worker.

    Attributes
    ----------
    algorithm : AlgorithmRef
    corpus : str
        Corpus folder (absolute), where the worker loads the instance from.
    instance : str
    trials : tuple of tuple
        The trials, as ``(epsilon, delta, seed)`` triples.
    secure : bool
        Draw each trial's noise with a :class:`~dpstats.privacy.randomness.SecureGenerator`
        (OpenDP's samplers, fresh entropy) instead of ``default_rng(seed)``;
        ``seed`` then only numbers the trial.
    kind : TrialKind or None
        None for point trials; otherwise the kind of trial whose ``load`` and
        ``run`` the worker calls instead of :func:`~dpstats.bench.model.load_problem` and
        :func:`~dpstats.bench.trial.execute_release` (the coverage trials of
        :mod:`dpstats.bench.inference`, ``COVERAGE_TRIAL``: each trial runs on
        a resample of the instance's rows and records its interval). The kind
        travels with the job (pickled by reference: unpickling it imports its
        module in the worker), so this module never imports the kind's module.
    """

    algorithm: AlgorithmRef
    corpus: str
    instance: str
    trials: tuple[tuple[float, float, int], ...]
    secure: bool = False
    kind: TrialKind | None = None

    @property
    def inference(self) -> bool:
        """Whether the job's trials are of another kind than point trials (coverage trials)."""
        return self.kind is not None

    def tail(self, start: int) -> Job:
        """The job from trial ``start`` on."""
        return replace(self, trials=self.trials[start:])

    def __len__(self) -> int:
        return len(self.trials)


@dataclass(frozen=True)
class CallJob:
    """A generic job for the worker pool: ``fn(context, item)`` for each item, under the trials' limits.

    The pool runs the calls of a call job exactly as it runs the trials of a
    :class:`Job`: one after the other in a worker, each under the time and
    memory limits, a call that exceeds a limit or kills its worker recorded
    with its status and the others run again (so ``fn`` must be deterministic
    in ``item``). The results reach ``on_result`` as :class:`CallResult`.

    Attributes
    ----------
    fn : callable
        ``fn(context, item) -> value``; a module-level function (it is pickled
        by reference to reach the worker). An exception it raises makes the
        call's status ``error`` (``memory`` for a ``MemoryError``).
    context : object
        Passed to every call; pickled with the job (once per job).
    trials : tuple
        The items, one call each.
    name : str
        What the calls are, for messages.
    instance : str
        Groups jobs for the scheduler (jobs with the same ``instance`` prefer
        the same worker, as jobs of one corpus instance do).
    """

    fn: Callable[[Any, Any], Any]
    context: Any
    trials: tuple[Any, ...]
    name: str = "call"
    instance: str = "call"
    corpus: str = "<call>"
    secure: bool = False

    @property
    def algorithm(self) -> AlgorithmRef:
        """A stand-in reference naming the job in the pool's messages (nothing is loaded)."""
        return AlgorithmRef(name=self.name, task="call", ref="", interpretation="")

    def __len__(self) -> int:
        return len(self.trials)


@dataclass(frozen=True)
class CallResult:
    """The outcome of one call of a :class:`CallJob`.

    ``status`` is ``ok`` (``value`` is what ``fn`` returned), ``error`` (an
    exception, or the worker died: ``message`` says which), ``timeout`` or
    ``memory`` (a limit was exceeded; the worker was killed). ``seconds`` is
    the call's wall time (for a timeout: until the kill); ``peak_mb`` its peak
    resident memory above the start.
    """

    item: Any
    status: str
    value: Any
    message: str | None
    seconds: float
    peak_mb: float

