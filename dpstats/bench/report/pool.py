"""Worker processes for the report's independent pieces: a page with its figures.

The report draws a few hundred matplotlib figures (a performance profile per
task, ε and slice; a figure per instance and per algorithm), each on its own
and written to its own files. :class:`JobRunner` runs such pieces either in
this process, one after the other as they are submitted (``workers=1``), or
in a pool of worker processes; in both cases :meth:`JobRunner.results` hands
back the return values in the order of submission, so the caller assembles
the same list of written files either way. Each piece writes only its own
files and the figures are deterministic, so the report's files are the same
bytes whatever the number of workers.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any

__all__ = ["default_workers", "resolve_workers", "JobRunner"]


def default_workers() -> int:
    """The CPUs this process may run on (``os.sched_getaffinity`` where available)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def resolve_workers(workers: int | None) -> int:
    """``workers``, or :func:`default_workers` when None.

    Raises
    ------
    ValueError
        ``workers`` is not a positive integer.
    """
    if workers is None:
        return default_workers()
    if isinstance(workers, bool) or int(workers) != workers or workers < 1:
        raise ValueError(f"--workers must be at least 1, got {workers!r}")
    return int(workers)


class _Done:
    """The result of a call made at once, with the interface of a future the runner uses."""

    def __init__(self, value: Any) -> None:
        self._value = value

    def result(self) -> Any:
        return self._value


class JobRunner:
    """Runs functions now (one worker) or in a process pool, and returns their results in submission order.

    Parameters
    ----------
    workers : int
        1 runs every call in this process when it is submitted; more starts
        a pool of that many processes on the first submission (forked on
        Linux, so they start with this process's imports; spawned
        elsewhere). The functions and their arguments must then be
        picklable: module-level functions, frames, paths, plain values.

    Examples
    --------
    >>> with JobRunner(1) as run:
    ...     _ = run.submit(pow, 2, 3)
    ...     _ = run.submit(pow, 3, 2)
    ...     run.results()
    [8, 9]
    """

    def __init__(self, workers: int = 1) -> None:
        self.workers = resolve_workers(workers)
        self._pool: ProcessPoolExecutor | None = None
        self._pending: list[Future[Any] | _Done] = []

    def __enter__(self) -> JobRunner:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def submit(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` now (one worker) or queue it in the pool; its result joins :meth:`results`."""
        if self.workers <= 1:
            self._pending.append(_Done(fn(*args)))
            return
        if self._pool is None:
            import multiprocessing as mp

            method = "fork" if sys.platform.startswith("linux") else "spawn"
            self._pool = ProcessPoolExecutor(max_workers=self.workers, mp_context=mp.get_context(method))
        self._pending.append(self._pool.submit(fn, *args))

    @property
    def pending(self) -> int:
        """How many results :meth:`results` would return now: calls and values since its last call.

        A caller that submits pieces out of their final order notes this
        before and after each group and reorders the results by those
        positions.
        """
        return len(self._pending)

    def add(self, value: Any) -> None:
        """Add a value computed by the caller to :meth:`results`, in its place in the submission order."""
        self._pending.append(_Done(value))

    def results(self) -> list[Any]:
        """The results of every call submitted since the last call, in submission order (waits for them).

        An exception raised by a call in the pool is raised here (the first in
        submission order); with one worker, :meth:`submit` raises it.
        """
        pending, self._pending = self._pending, []
        return [p.result() for p in pending]

    def close(self) -> None:
        """Shut the pool down (waiting for its running calls); queued calls that never ran are cancelled."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        self._pending = []
