"""The supervisor: a pool of worker processes that runs jobs under per-trial limits.

:class:`WorkerPool` starts workers (:mod:`dpstats.bench.sandbox.worker`),
hands them jobs, checks every running trial against the limits, kills a
worker that exceeds them and replaces a worker that dies, recording the
trial that was running with its status and running the job's unreported
trials again. :func:`run_trial` (one trial, isolated or not) and
:func:`run_job_isolated` (a job in a persistent spawned worker, on Dask
workers) are its entry points for a single trial or job.
"""

from __future__ import annotations

import math
import sys
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from multiprocessing.connection import wait
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dpstats.bench.model import MAX_MESSAGE, AlgorithmRef, Problem, TrialResult, cache_problem
from dpstats.bench.sandbox.jobs import CallJob, CallResult, Job
from dpstats.bench.sandbox.limits import _MB, Limits, _rss_of
from dpstats.bench.sandbox.worker import _Worker
from dpstats.bench.scoring import score
from dpstats.bench.trial import execute_release

if TYPE_CHECKING:
    from dpstats.algorithms.base import Algorithm


def _failure(info: Mapping[str, Any], algorithm: AlgorithmRef, trial: tuple[float, float, int], status: str,
             message: str, seconds: float, peak_mb: float) -> TrialResult:
    eps, dlt, seed = trial
    return TrialResult(
        algorithm=algorithm.name, interpretation=algorithm.interpretation, instance=info["instance"],
        study=info["study"], task=info["task"], epsilon=float(eps), delta=float(dlt), seed=int(seed), status=status,
        error=message[:MAX_MESSAGE], estimate=None, error_value=math.inf, baseline=float(info["baseline"]),
        ratio=math.inf, seconds=float(seconds), peak_mb=float(max(peak_mb, 0.0)), n=int(info["n"]),
        d=int(info["d"]),
    )


def _preimport() -> None:
    """Import what workers need, so that forked workers start with it imported."""
    from dpstats.algorithms import list_algorithms
    from dpstats.bench import metrics  # noqa: F401
    from dpstats.ols import baseline  # noqa: F401

    list_algorithms()


class FatalJobError(RuntimeError):
    """A job could not start: its instance or its algorithm cannot be loaded."""


class _JobQueue:
    """Pending jobs in order, with a count per instance for the choice of the next job."""

    def __init__(self, jobs: Iterable[Job | CallJob]) -> None:
        self.q: deque[Job | CallJob] = deque(j for j in jobs if len(j))
        self.count: Counter[tuple[str, str]] = Counter((j.corpus, j.instance) for j in self.q)

    def __len__(self) -> int:
        return len(self.q)

    def appendleft(self, job: Job | CallJob) -> None:
        self.q.appendleft(job)
        self.count[(job.corpus, job.instance)] += 1

    def take(self, prefer: set[tuple[str, str]], avoid: set[tuple[str, str]]) -> Job | CallJob:
        """The first job of an instance in ``prefer``, else of one not in ``avoid``, else the first."""
        wanted = {k for k in prefer if self.count[k] > 0}
        if wanted:
            pick = next(i for i, j in enumerate(self.q) if (j.corpus, j.instance) in wanted)
        else:
            pick = next((i for i, j in enumerate(self.q) if (j.corpus, j.instance) not in avoid), 0)
        job = self.q[pick]
        del self.q[pick]
        self.count[(job.corpus, job.instance)] -= 1
        return job


class WorkerPool:
    """Worker processes that run jobs trial by trial under per-trial limits.

    Parameters
    ----------
    workers : int
        Number of worker processes (trials running at once).
    limits : Limits
    method : {"fork", "spawn"}
        ``fork`` (default on Linux) starts workers as copies of this process:
        fast, and plugins imported here are imported there. ``spawn`` starts a
        fresh interpreter (safe in multi-threaded processes such as Dask
        workers; about as slow to start as importing dpstats).

    Notes
    -----
    Workers publish the running trial in shared memory and send finished
    trials in batches (at least every ``FLUSH_INTERVAL`` s), so a fast trial
    costs no message of its own. A worker killed for a limit or dead from a
    crash is replaced; the trial that was running gets its status, and the
    job's other trials without a result go back to the front of the queue
    (trials are deterministic, so a trial finished but not yet reported is
    simply run again). Jobs go to idle workers preferring one that already
    loaded the job's instance, then an instance no other worker has loaded,
    so that each instance is loaded by as few workers as possible. Workers
    stay alive between calls of :meth:`run` (with their loaded instances)
    until :meth:`close`.
    """

    def __init__(self, workers: int = 1, limits: Limits | None = None, method: str | None = None) -> None:
        if int(workers) < 1:
            raise ValueError("workers must be at least 1")
        self.size = int(workers)
        self.limits = limits or Limits()
        self.method = method or ("fork" if sys.platform.startswith("linux") else "spawn")
        self.workers: list[_Worker] = []
        self.started = 0  #: worker processes started so far (replacements included)
        self._jobs = 0

    def _ensure(self) -> None:
        self.workers = [w for w in self.workers if w.state != "dead"]
        if self.method == "fork" and len(self.workers) < self.size:
            _preimport()
        while len(self.workers) < self.size:
            fds = [w.conn.fileno() for w in self.workers]
            self.workers.append(_Worker(self.method, fds))
            self.started += 1

    def close(self) -> None:
        """Stop every worker."""
        for w in self.workers:
            if w.state == "idle":
                w.stop()
            elif w.state != "dead":
                w.kill()
                w.close()
        self.workers = []

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def run(self, jobs: Iterable[Job | CallJob], on_result: Callable[[Any], None],
            on_ready: Callable[[dict[str, Any]], None] | None = None, limits: Limits | None = None,
            on_tick: Callable[[], None] | None = None) -> None:
        """Run jobs until each of their trials has a result.

        Parameters
        ----------
        jobs : iterable of Job or CallJob
        on_result : callable
            Called with each :class:`TrialResult` (of a :class:`Job`) or
            :class:`CallResult` (of a :class:`CallJob`) as soon as it reaches
            this process.
        on_ready : callable, optional
            Called with an instance's description (:meth:`Problem.info`) each
            time a worker has loaded it for a job.
        limits : Limits, optional
            Overrides the pool's limits for this call.
        on_tick : callable, optional
            Called at every turn of the supervision loop (at least every
            ``limits.poll`` seconds).

        Raises
        ------
        FatalJobError
            A job's instance or algorithm could not be loaded.
        """
        limits = limits or self.limits
        pending = _JobQueue(jobs)
        failures: dict[tuple[str, str, str], int] = {}
        try:
            while True:
                self._ensure()
                self._dispatch(pending, limits)
                busy = [w for w in self.workers if w.state in ("loading", "running")]
                if not busy:
                    if not pending:
                        return
                    continue
                wait([w.conn for w in busy], timeout=limits.poll)
                for w in busy:
                    self._service(w, limits, pending, on_result, on_ready, failures)
                if on_tick is not None:
                    on_tick()
        except BaseException:
            for w in self.workers:
                if w.state in ("loading", "running"):
                    w.kill()
                    w.close()
            raise

    def running_seconds(self) -> list[float]:
        """Seconds each running trial has run so far (one entry per worker running a trial)."""
        now = time.monotonic()
        out = []
        for w in self.workers:
            if w.state == "running":
                trial = w.running_trial()
                if trial is not None:
                    out.append(now - trial[1])
        return out

    # -- scheduling
    def _dispatch(self, pending: _JobQueue, limits: Limits) -> None:
        for w in self.workers:
            if not pending:
                return
            if w.state != "idle":
                continue
            others: set[tuple[str, str]] = set()
            for o in self.workers:
                if o is not w:
                    others |= o.loaded
                    if o.job is not None:
                        others.add((o.job.corpus, o.job.instance))
            job = pending.take(w.loaded, others)
            self._jobs += 1
            w.submit(job, limits, self._jobs)

    def _handle(self, w: _Worker, msg: tuple[Any, ...], on_result: Callable[[Any], None],
                on_ready: Callable[[dict[str, Any]], None] | None) -> None:
        job = w.job
        assert job is not None
        kind = msg[0]
        if kind == "ready":
            w.info = msg[1]
            w.loaded.add((job.corpus, job.instance))
            w.state = "running"
            if on_ready is not None:
                on_ready(msg[1])
        elif kind == "done":
            if msg[2]:  # the job's last trial: the worker waits for the next job
                w.state, w.job = "idle", None
            w.confirmed += len(msg[1])
            for r in msg[1]:
                on_result(r)
        elif kind == "job_error":
            w.state, w.job = "idle", None
            raise FatalJobError(f"cannot run {job.algorithm.name!r} on instance {job.instance!r}: {msg[1]}")
        else:
            raise RuntimeError(f"unexpected message from a worker: {msg!r}")

    def _drain(self, w: _Worker, on_result: Callable[[Any], None],
               on_ready: Callable[[dict[str, Any]], None] | None) -> bool:
        """Handle the messages waiting; False when the channel has closed."""
        try:
            while w.state in ("loading", "running") and w.conn.poll():
                self._handle(w, w.conn.recv(), on_result, on_ready)
        except (EOFError, OSError):
            return False
        return True

    def _service(self, w: _Worker, limits: Limits, pending: _JobQueue, on_result: Callable[[Any], None],
                 on_ready: Callable[[dict[str, Any]], None] | None,
                 failures: dict[tuple[str, str, str], int]) -> None:
        open_ = self._drain(w, on_result, on_ready)
        if w.state == "idle":
            return
        now = time.monotonic()
        if open_ and now - w.last_check < limits.poll:
            return  # the process and its limits are checked every `poll` seconds, not at every message
        w.last_check = now
        end = w.reap(block=False)
        if end is None and open_:
            self._check_limits(w, now, limits, pending, on_result, on_ready)
            return
        if end is None:  # the channel closed but the process lives on: it cannot be served any more
            deadline = now + 1.0
            while end is None and time.monotonic() < deadline:
                time.sleep(0.005)
                end = w.reap(block=False)
            if end is None:
                end = w.kill() or (0, 0)
        self._drain(w, on_result, on_ready)  # what it sent before it ended
        if w.state == "idle":
            w.close()
            return
        status, message = w.describe_end(end)
        self._settle(w, status, message, None, pending, on_result, failures)

    def _settle(self, w: _Worker, status: str, message: str, expected: tuple[int, float, int] | None,
                pending: _JobQueue, on_result: Callable[[Any], None],
                failures: dict[tuple[str, str, str], int]) -> None:
        """Record the running trial of a dead worker as failed and requeue the job's other unreported trials.

        ``expected`` is the running trial that triggered a kill: if the worker
        had moved on to another trial when it died, nothing is recorded and
        every unreported trial is run again.
        """
        job = w.job
        assert job is not None
        final = w.running_trial()
        state = w.state
        w.close()
        if state == "loading":
            key = (job.corpus, job.instance, job.algorithm.name)
            failures[key] = failures.get(key, 0) + 1
            if failures[key] >= 3:
                raise FatalJobError(f"worker processes died loading instance {job.instance!r} ({message})")
            pending.appendleft(job)
            return
        failed = None
        if final is not None and (expected is None or final[:2] == expected[:2]):
            failed = final[0]
            assert w.info is not None
            peak = w.peak if w.seen is not None and w.seen[1:] == final[:2] else 0
            if isinstance(job, CallJob):
                on_result(CallResult(job.trials[failed], status, None, message[:MAX_MESSAGE],
                                     time.monotonic() - final[1], peak / _MB))
            else:
                on_result(_failure(w.info, job.algorithm, job.trials[failed], status, message,
                                   time.monotonic() - final[1], peak / _MB))
        elif expected is None:  # died outside an algorithm (in the harness): run the rest again, up to 3 times
            key = (job.corpus, job.instance, job.algorithm.name)
            failures[key] = failures.get(key, 0) + 1
            if failures[key] >= 3:
                raise FatalJobError(f"worker processes running {job.algorithm.name!r} on {job.instance!r} "
                                    f"died outside a trial ({message})")
        rest = tuple(t for i, t in enumerate(job.trials) if i >= w.confirmed and i != failed)
        if rest:
            pending.appendleft(replace(job, trials=rest))

    def _check_limits(self, w: _Worker, now: float, limits: Limits, pending: _JobQueue,
                      on_result: Callable[[Any], None],
                      on_ready: Callable[[dict[str, Any]], None] | None) -> None:
        trial = w.running_trial()
        if trial is None:
            return
        index, start, rss0 = trial
        if w.seen != (w.job_no, index, start):
            w.seen, w.peak = (w.job_no, index, start), 0
        rss = _rss_of(w.pid)
        if rss is not None:
            w.peak = max(w.peak, rss - rss0)
        elapsed = now - start
        if elapsed > limits.time:
            status, message = "timeout", f"exceeded the time limit of {limits.time:g} s"
        elif rss is not None and rss - rss0 > limits.memory_bytes:
            status = "memory"
            message = (f"exceeded the memory limit of {limits.memory_mb:g} MB "
                       f"(resident memory grew by {(rss - rss0) / _MB:.0f} MB)")
        else:
            return
        w.kill()
        self._drain(w, on_result, on_ready)  # trials it finished before
        if w.state == "idle":  # pragma: no cover - it finished the job just before the kill
            w.close()
            return
        self._settle(w, status, message, trial, pending, on_result, {})


# --------------------------------------------------------------------------
# Entry points for one job or one trial
# --------------------------------------------------------------------------

_THREAD = threading.local()


def run_job_isolated(job: Job, limits: Limits) -> tuple[dict[str, Any] | None, list[TrialResult]]:
    """Run one job in this thread's persistent spawned worker (used on Dask workers).

    The worker is a fresh interpreter started on first use and kept for the
    next jobs of the same thread (replaced when a limit kills it), so that
    instances are loaded once per worker.

    Returns
    -------
    info : dict or None
        The instance's description.
    results : list of TrialResult
    """
    pool = getattr(_THREAD, "pool", None)
    if pool is None:
        pool = WorkerPool(1, limits, method="spawn")
        _THREAD.pool = pool
    results: list[TrialResult] = []
    infos: list[dict[str, Any]] = []
    pool.run([job], results.append, infos.append, limits=limits)
    return (infos[0] if infos else None), results


def run_trial(algorithm: str | type[Algorithm], problem: Problem, epsilon: float, delta: float, seed: int,
              limits: Limits | None = None, isolate: bool = True, secure: bool = False) -> TrialResult:
    """Run and score one trial.

    Parameters
    ----------
    algorithm : str or Algorithm subclass
        A roster name (for ``problem.task``: a registered algorithm or a named
        configuration such as ``fwl_score[api]``), a ``module:object`` plugin, or a class.
    problem : Problem
    epsilon, delta : float
    seed : int
    limits : Limits, optional
        Default: the protocol's 60 s and 4096 MB.
    isolate : bool
        Run in a forked worker process under the limits (default). ``False``
        runs in this process without limits (for debugging).
    secure : bool
        Draw the noise with a :class:`~dpstats.privacy.randomness.SecureGenerator` (the
        seed then only numbers the trial).

    Returns
    -------
    TrialResult
    """
    from dpstats.algorithms import get_configuration, register

    if isinstance(algorithm, str):
        ref = AlgorithmRef.of_configuration(get_configuration(problem.task, algorithm))
    else:
        algo_cls = algorithm
        if algo_cls.task != problem.task:
            raise ValueError(f"algorithm {algo_cls.name!r} is for task {algo_cls.task!r}, not {problem.task!r}")
        register(algo_cls)
        ref = AlgorithmRef.of(algo_cls)
    if not isolate:
        kind, message, est, seconds, fallback = execute_release(ref.spec(), problem, epsilon, delta, seed, secure)
        return score(problem, ref, epsilon, delta, seed, kind, message, est, seconds, 0.0, fallback)
    key = "<memory>"
    cache_problem(key, problem)
    job = Job(algorithm=ref, corpus=str(Path(key).resolve()), instance=problem.instance,
              trials=((float(epsilon), float(delta), int(seed)),), secure=bool(secure))
    out: list[TrialResult] = []
    with WorkerPool(1, limits or Limits(), method="fork") as pool:
        pool.run([job], out.append)
    return out[0]
