"""The in-process trial: one algorithm on one instance at one (epsilon, delta, seed), released and scored.

A *trial* releases once (:func:`dpstats.algorithms.release.release`) and
scores the release against the instance's non-private baseline
(:func:`dpstats.bench.scoring.score`). :func:`execute_release` runs one trial
in the current process, without limits; the benchmark calls it inside the
worker processes of its sandbox (:mod:`dpstats.bench.sandbox`), so that a
trial that hangs, exhausts memory or crashes the interpreter costs one trial,
not the run.

Statuses
--------
``ok``
    A release with a finite estimate of the right shape; ``ratio`` is
    ``error / baseline`` (for ``mean`` it may be ``inf``: an estimate outside
    the sample's affine span has infinite error, and the release still counts
    as ``ok``).
``declined``
    The algorithm returned a :class:`~dpstats.algorithms.Decline`; the reason
    is kept in ``error``.
``error``
    An exception (its type, message and the innermost frame are kept), a
    non-finite estimate (NaN or inf), an estimate of the wrong shape, a value
    that is neither a release nor a decline, or a worker process that died
    (the signal or exit status is kept, e.g. ``SIGABRT`` or ``SIGSEGV``).
``timeout``
    The trial ran longer than the time limit (wall clock, default 60 s); the
    worker is killed.
``memory``
    The trial grew the worker's resident memory by more than the memory limit
    (default 4096 MB), or an allocation failed under the address-space limit
    (``MemoryError``), or the kernel's out-of-memory killer ended the worker.

Every status other than ``ok`` has ``ratio = inf`` and ``error_value = inf``:
a trial that did not release a usable estimate fails at every threshold.

Fallback flags
--------------
A release whose ``details`` carry ``"fallback"`` (a string saying why: an
intercept-only model, an estimate shrunk to exactly zero, the prior centre, a
failed standardisation released as 0) is a *fallback*: a number that is not
an estimate. It is scored like any release (status ``ok``) and the reason is
kept in ``TrialResult.fallback`` (``None`` for every other trial); the
leaderboard reports each entry's share of fallbacks.

Randomness
----------
The only randomness of a trial is ``rng = numpy.random.default_rng(seed)``,
created fresh for every trial (with a fresh algorithm object). Same algorithm,
data, budget and seed give the same release, whichever worker, process or
machine runs it, and in whatever order. This is the convention of the public
``private_*`` functions as well, so a benchmark trial can be reproduced by
hand. (Every algorithm sees the same seeds 0..N-1: common random numbers,
which is harmless for comparisons between algorithms.)

A *secure* job (``Job.secure``, ``dpstats bench --secure``) gives each trial a
fresh :class:`~dpstats.privacy.randomness.SecureGenerator` instead: its Gaussian and
Laplace noise comes from OpenDP's samplers and everything else from fresh
operating-system entropy, so the seed only numbers the trial and secure
trials are not reproducible bit for bit (a trial run again after a worker
crash gives another, equally distributed release).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import numpy as np

from dpstats.bench.model import MAX_MESSAGE, Problem, describe_exception, trial_generator

if TYPE_CHECKING:
    from dpstats.algorithms.release import AlgorithmSpec

__all__ = ["execute", "execute_release"]



def execute(spec: AlgorithmSpec, problem: Problem, epsilon: float, delta: float, seed: int, secure: bool = False
            ) -> tuple[str, str | None, np.ndarray | None, float]:
    """Run one trial in this process, without limits.

    The first four values of :func:`execute_release` (which also returns the
    release's fallback reason).

    Parameters
    ----------
    spec : AlgorithmSpec
        The algorithm and its hyperparameters (:class:`~dpstats.algorithms.release.AlgorithmSpec`).
    problem : Problem
    epsilon, delta : float
    seed : int
        ``rng = numpy.random.default_rng(seed)``.
    secure : bool
        ``rng = dpstats.privacy.randomness.SecureGenerator()`` instead (the seed is not used).

    Returns
    -------
    kind : {"released", "declined", "error", "memory"}
    message : str or None
        The decline reason or the error.
    estimate : ndarray or None
        The released estimate (also for a non-finite one).
    seconds : float
        Wall time of construction, ``run`` and the outcome check.
    """
    return execute_release(spec, problem, epsilon, delta, seed, secure)[:4]


def execute_release(spec: AlgorithmSpec, problem: Problem, epsilon: float, delta: float, seed: int,
                    secure: bool = False) -> tuple[str, str | None, np.ndarray | None, float, str | None]:
    """:func:`execute`, and the release's ``details["fallback"]`` (None when absent or not released).

    The release goes through :func:`dpstats.algorithms.release.release`, whose
    outcome check makes a non-release, a non-numeric, mis-shaped or non-finite
    estimate an ``error`` (keeping a non-finite estimate).
    """
    from dpstats.algorithms.base import Decline
    from dpstats.algorithms.release import Budget, InvalidOutcome, release

    rng = trial_generator(seed, secure)
    t0 = time.perf_counter()
    try:
        out = release(spec, problem.data, problem.facts, Budget(epsilon, delta), rng)
    except InvalidOutcome as exc:
        return "error", str(exc), exc.estimate, time.perf_counter() - t0, None
    except MemoryError as exc:
        return "memory", describe_exception(exc), None, time.perf_counter() - t0, None
    except BaseException as exc:  # noqa: BLE001 - any failure of the algorithm is a result
        return "error", describe_exception(exc), None, time.perf_counter() - t0, None
    seconds = time.perf_counter() - t0
    if isinstance(out, Decline):
        return "declined", str(out.reason)[:MAX_MESSAGE], None, seconds, None
    fb = (out.details or {}).get("fallback")
    fallback = None if fb is None or fb is False or fb == "" else str(fb)[:MAX_MESSAGE]
    return "released", None, out.estimate, seconds, fallback
