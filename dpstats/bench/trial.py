"""Trials: one algorithm on one instance at one (epsilon, delta, seed), under limits, scored.

A *trial* releases once (:func:`dpstats.algorithms.release.release`) and
scores the release against the instance's non-private baseline. The benchmark
runs trials in *worker processes* supervised by the calling process, so that a
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

Limits
------
Each worker process runs the trials of a job one after the other. Before each
trial it records its resident (RSS) and virtual (VMS) size, resets the
kernel's peak-RSS counter (``/proc/self/clear_refs``) and lowers its
address-space limit (``RLIMIT_AS``) to ``VMS + 1.25 x memory limit``, so that a
single huge allocation fails at once with ``MemoryError``; it publishes the
running trial (index, start time, starting RSS) in a small shared-memory
block. The supervising process checks the worker every ``poll`` seconds
(default 0.02) and kills its process group when the trial's wall time exceeds
the time limit or its RSS exceeds the starting RSS by more than the memory
limit. Finished trials reach the supervisor in batches (at least every
``FLUSH_INTERVAL`` = 0.05 s), so fast trials cost no message each; after a
kill or a crash the shared block says which trial was running, and the
job's trials that had finished but not yet been sent are run again (they are
deterministic). ``peak_mb`` is the
trial's peak RSS above its starting RSS (MB): the memory the algorithm itself
used, not the interpreter and cached data. ``seconds`` is the wall time of
``run`` alone (for a timeout: the time until the kill).

Workers run with one BLAS thread each (so trials on a multi-core machine do
not compete for cores and numerical results do not depend on the thread
count). The private data arrays are read-only: an algorithm that modifies its
input in place fails with ``error`` instead of corrupting later trials.

Examples
--------
>>> from dpstats.data.corpus import Corpus
>>> from dpstats.bench.trial import Limits, Problem, run_trial
>>> problem = Problem.from_instance(Corpus.public().instance("mroz87_lwage"))  # doctest: +SKIP
>>> r = run_trial("adassp", problem, epsilon=1.0, delta=1e-6, seed=0, limits=Limits(time=10))  # doctest: +SKIP
>>> r.status, r.ratio  # doctest: +SKIP
('ok', 0.83...)
"""

from __future__ import annotations

import ctypes
import math
import mmap
import os
import resource
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections import Counter, deque
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence

import numpy as np

# the data model lives in dpstats.bench.model and the scoring in dpstats.bench.scoring (below this module in
# the bench layers); their names stay importable from here, where they were first defined
from dpstats.bench.model import _CORPORA as _CORPORA
from dpstats.bench.model import _PROBLEMS as _PROBLEMS
from dpstats.bench.model import (
    MAX_MESSAGE,
    STATUSES,  # noqa: F401 - re-exported
    AlgorithmRef,
    Problem,
    TrialKind,
    TrialResult,
    cache_problem,
    describe_exception,
    load_problem,
    trial_generator,
)
from dpstats.bench.scoring import score

if TYPE_CHECKING:
    from dpstats.algorithms.release import AlgorithmSpec

#: the former private names of this module, for code that imports them from here
_describe = describe_exception
_cache_problem = cache_problem

__all__ = [
    "Limits",
    "Job",
    "WorkerPool",
    "FatalJobError",
    "execute",
    "execute_release",
    "run_trial",
    "run_job_isolated",
    "CallJob",
    "CallResult",
]

#: protocol budget per trial
DEFAULT_TIME_LIMIT = 60.0
DEFAULT_MEMORY_MB = 4096.0
#: the address-space limit is the starting virtual size plus this multiple of the memory limit
AS_FACTOR = 1.25

_MB = 1024.0 * 1024.0


# --------------------------------------------------------------------------
# Descriptions of work
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Limits:
    """Resource limits of one trial.

    Parameters
    ----------
    time : float
        Wall-clock seconds a trial may run (protocol: 60).
    memory_mb : float
        Megabytes (2**20 bytes) by which a trial may grow its worker's resident
        memory (protocol: 4096).
    poll : float
        Seconds between two checks of a running trial by the supervisor.
    """

    time: float = DEFAULT_TIME_LIMIT
    memory_mb: float = DEFAULT_MEMORY_MB
    poll: float = 0.02

    def __post_init__(self) -> None:
        for name in ("time", "memory_mb", "poll"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise ValueError(f"limit {name} must be a positive number, got {v!r}")

    @property
    def memory_bytes(self) -> int:
        return int(self.memory_mb * _MB)


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
        ``run`` the worker calls instead of :func:`load_problem` and
        :func:`execute_release` (the coverage trials of
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

    def tail(self, start: int) -> "Job":
        """The job from trial ``start`` on."""
        return replace(self, trials=self.trials[start:])

    def __len__(self) -> int:
        return len(self.trials)


@dataclass(frozen=True)
class CallJob:
    """A generic job for :class:`WorkerPool`: ``fn(context, item)`` for each item, under the trials' limits.

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
    def algorithm(self) -> "AlgorithmRef":
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


# --------------------------------------------------------------------------
# Running and scoring, in the current process
# --------------------------------------------------------------------------


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


# --------------------------------------------------------------------------
# Process-level helpers (Linux /proc, with fallbacks)
# --------------------------------------------------------------------------

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def _self_memory() -> tuple[int, int]:
    """(RSS, VMS) of this process in bytes."""
    try:
        with open("/proc/self/statm", "rb") as f:
            vms, rss = f.read().split()[:2]
        return int(rss) * _PAGE, int(vms) * _PAGE
    except OSError:
        import psutil

        m = psutil.Process().memory_info()
        return int(m.rss), int(m.vms)


def _rss_of(pid: int) -> int | None:
    """Resident bytes of another process, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, IndexError, ValueError):
        try:
            import psutil

            return int(psutil.Process(pid).memory_info().rss)
        except Exception:  # noqa: BLE001
            return None


class _SelfStats:
    """This process's memory counters through /proc files kept open (a few microseconds a read)."""

    def __init__(self) -> None:
        self.statm = os.open("/proc/self/statm", os.O_RDONLY)
        self.status = os.open("/proc/self/status", os.O_RDONLY)
        try:
            self.clear: int | None = os.open("/proc/self/clear_refs", os.O_WRONLY)
        except OSError:
            self.clear = None

    @classmethod
    def open(cls) -> "_SelfStats | None":
        try:
            return cls()
        except OSError:
            return None

    def memory(self) -> tuple[int, int]:
        vms, rss = os.pread(self.statm, 256, 0).split()[:2]
        return int(rss) * _PAGE, int(vms) * _PAGE

    def reset_peak(self) -> None:
        if self.clear is not None:
            try:
                os.write(self.clear, b"5")
            except OSError:
                self.clear = None

    def peak(self) -> int:
        data = os.pread(self.status, 8192, 0)
        i = data.find(b"VmHWM:")
        if i < 0:
            return _peak_self()
        return int(data[i + 6:data.index(b"kB", i)]) * 1024


def _reset_peak() -> bool:
    """Reset this process's peak RSS (Linux >= 4.0); False when unsupported."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _peak_self() -> int:
    """Peak RSS of this process in bytes (since the last reset)."""
    try:
        with open("/proc/self/status", "rb") as f:
            for line in f:
                if line.startswith(b"VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * (1 if sys.platform == "darwin" else 1024)


def _set_as_limit(limit: int | None) -> None:
    """Set the soft address-space limit (None: back to the hard limit)."""
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        if limit is None:
            new = hard
        else:
            new = limit if hard == resource.RLIM_INFINITY else min(limit, hard)
        resource.setrlimit(resource.RLIMIT_AS, (new, hard))
    except (ValueError, OSError, AttributeError):
        pass


def _limit_blas_threads(n: int = 1) -> None:
    """Set the thread count of every OpenBLAS library loaded in this process (Linux)."""
    try:
        with open("/proc/self/maps") as f:
            libs = {line.split()[-1] for line in f if "openblas" in line.lower()}
    except OSError:
        return
    names = ("openblas_set_num_threads", "openblas_set_num_threads64_", "scipy_openblas_set_num_threads64_",
             "scipy_openblas_set_num_threads")
    for path in sorted(libs):
        if not path.startswith("/"):
            continue
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for nm in names:
            fn = getattr(lib, nm, None)
            if fn is not None:
                fn(ctypes.c_int(n))


def _set_pdeathsig() -> None:
    """Ask the kernel to SIGKILL this process when its parent dies (Linux)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except Exception:  # noqa: BLE001
        pass


def _signal_name(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


# --------------------------------------------------------------------------
# The worker process
# --------------------------------------------------------------------------

BLAS_ENV = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
            "VECLIB_MAXIMUM_THREADS": "1", "NUMEXPR_NUM_THREADS": "1"}

#: a worker sends its finished trials at least this often (seconds) and at the end of each job
FLUSH_INTERVAL = 0.05

# seq, job number, trial index, start (time.monotonic), resident bytes at the start, running flag, seq
_STATE = struct.Struct("<qqqdqqq")


class _SharedState:
    """Which trial a worker is running, in a small file mapped by the worker and its supervisor.

    The worker writes (job number, trial index, start time, starting RSS,
    running) before each trial and clears ``running`` when the algorithm
    returns. The supervisor reads it to enforce the limits while finished
    trials travel to it in batches, and after a kill or a crash to know
    exactly which trial was running. Both processes use the same monotonic
    clock (``CLOCK_MONOTONIC``).
    """

    def __init__(self, fd: int, create: bool = False) -> None:
        if create:
            os.ftruncate(fd, _STATE.size)  # zero-filled
        self.map = mmap.mmap(fd, _STATE.size)
        self.seq = 0

    def write(self, job_no: int, index: int, start: float, rss0: int, running: bool) -> None:
        self.seq += 1
        _STATE.pack_into(self.map, 0, self.seq, job_no, index, start, rss0, int(running), self.seq)

    def read(self) -> tuple[int, int, float, int, bool] | None:
        """``(job number, index, start, rss0, running)``, or None if no consistent copy could be read."""
        for _ in range(1000):
            s1, job_no, index, start, rss0, running, s2 = _STATE.unpack_from(self.map, 0)
            if s1 == s2:
                return job_no, index, start, rss0, bool(running)
        return None

    def close(self) -> None:
        try:
            self.map.close()
        except (OSError, ValueError):
            pass


def _worker_setup(parent: int, crash_fd: int | None = None) -> None:
    _set_pdeathsig()
    if os.getppid() != parent:  # the parent died before prctl
        os._exit(1)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    # algorithms' prints and warnings would garble the progress display
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    os.close(devnull)
    warnings.resetwarnings()
    warnings.simplefilter("ignore")
    _limit_blas_threads(1)
    import faulthandler

    faulthandler.disable()  # an inherited handler may write to the supervisor's terminal
    if crash_fd is not None:
        # a fatal signal writes the Python stack here; the supervisor reports its innermost frame
        faulthandler.enable(crash_fd)


def _worker_loop(conn: Connection, state: _SharedState) -> None:
    """Serve jobs from ``conn`` until it closes or says ``stop``.

    Protocol: the supervisor sends ``("job", Job, memory_bytes, job_no)``; the
    worker answers ``("ready", info)`` once the instance is loaded (or
    ``("job_error", message)``), then ``("done", [TrialResult, ...], last)``
    with the trials finished since its previous message, at least every
    ``FLUSH_INTERVAL`` seconds and after the job's last trial (``last`` true).
    The running trial is published in ``state``.
    """
    stats = _SelfStats.open()

    def begin() -> tuple[int, int]:
        if stats is not None:
            rss, vms = stats.memory()
            stats.reset_peak()  # where unsupported, the peak is the process's lifetime peak
        else:
            rss, vms = _self_memory()
            _reset_peak()
        return rss, vms

    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg[0] == "stop":
            return
        _, job, limit, job_no = msg
        if isinstance(job, CallJob):
            _serve_calls(conn, state, job, limit, job_no, begin, stats)
            continue
        try:
            if job.kind is not None:  # e.g. coverage trials: the job carries its load and run functions
                problem: Any = job.kind.load(job.corpus, job.instance)
            else:
                problem = load_problem(job.corpus, job.instance)
            spec = job.algorithm.spec()
        except BaseException as exc:  # noqa: BLE001
            conn.send(("job_error", describe_exception(exc)))
            continue
        conn.send(("ready", problem.info()))
        pending: list[TrialResult] = []
        last_send = time.monotonic()
        last = len(job.trials) - 1
        for i, (eps, dlt, seed) in enumerate(job.trials):
            rss0, vms0 = begin()
            state.write(job_no, i, time.monotonic(), rss0, True)
            _set_as_limit(vms0 + int(AS_FACTOR * limit))
            kind_result = None
            try:
                if job.kind is not None:
                    kind_result = job.kind.run(spec, problem, job.algorithm, eps, dlt, seed, job.secure)
                else:
                    kind, message, est, seconds, fallback = execute_release(spec, problem, eps, dlt, seed,
                                                                            job.secure)
            finally:
                _set_as_limit(None)
                state.write(job_no, i, 0.0, rss0, False)
            peak_mb = max((stats.peak() if stats is not None else _peak_self()) - rss0, 0) / _MB
            if kind_result is not None:
                pending.append(replace(kind_result, peak_mb=float(peak_mb)))
            else:
                pending.append(score(problem, job.algorithm, eps, dlt, seed, kind, message, est, seconds, peak_mb,
                                     fallback))
            now = time.monotonic()
            if i == last or now - last_send >= FLUSH_INTERVAL:
                conn.send(("done", pending, i == last))
                pending = []
                last_send = now


def _serve_calls(conn: Connection, state: "_SharedState", job: CallJob, limit: int, job_no: int,
                 begin: Callable[[], tuple[int, int]], stats: "_SelfStats | None") -> None:
    """Run the calls of a :class:`CallJob` like the trials of a job (same protocol, limits and batching)."""
    conn.send(("ready", {"instance": job.instance, "corpus": job.corpus, "name": job.name}))
    pending: list[CallResult] = []
    last_send = time.monotonic()
    last = len(job.trials) - 1
    for i, item in enumerate(job.trials):
        rss0, vms0 = begin()
        state.write(job_no, i, time.monotonic(), rss0, True)
        _set_as_limit(vms0 + int(AS_FACTOR * limit))
        t0 = time.perf_counter()
        value, message, status = None, None, "ok"
        try:
            value = job.fn(job.context, item)
        except MemoryError as exc:
            status, message = "memory", describe_exception(exc)
        except BaseException as exc:  # noqa: BLE001 - a failing call is a result
            status, message = "error", describe_exception(exc)
        finally:
            _set_as_limit(None)
            state.write(job_no, i, 0.0, rss0, False)
        seconds = time.perf_counter() - t0
        peak_mb = max((stats.peak() if stats is not None else _peak_self()) - rss0, 0) / _MB
        pending.append(CallResult(item, status, value, message, seconds, peak_mb))
        now = time.monotonic()
        if i == last or now - last_send >= FLUSH_INTERVAL:
            conn.send(("done", pending, i == last))
            pending = []
            last_send = now


def _spawn_entry(fd: int, parent: int, crash_fd: int, state_fd: int) -> None:
    """Entry point of a spawned worker (``python -c``): a fresh interpreter."""
    sock = socket.socket(fileno=fd)
    conn = Connection(sock.detach())
    _worker_setup(parent, crash_fd)
    try:
        hello = conn.recv()  # ("path", sys.path of the parent)
        if hello[0] == "path":
            for p in reversed(hello[1]):
                if p not in sys.path:
                    sys.path.insert(0, p)
        conn.send(("hello", os.getpid()))
        _worker_loop(conn, _SharedState(state_fd))
    finally:
        os._exit(0)


class _Worker:
    """Supervisor-side handle of one worker process.

    ``state`` is ``idle`` (no job), ``loading`` (loading the job's instance),
    ``running`` (running the job's trials) or ``dead``. ``confirmed`` counts
    the job's trials whose results arrived.
    """

    def __init__(self, method: str, inherited: Sequence[int] = ()) -> None:
        self.method = method
        self.state = "idle"
        self.job: Job | None = None
        self.job_no = 0
        self.confirmed = 0
        self.seen: tuple[int, int, float] | None = None
        self.peak = 0
        self.last_check = 0.0
        self.info: dict[str, Any] | None = None
        self.loaded: set[tuple[str, str]] = set()
        self.popen: subprocess.Popen | None = None
        # files without a name (nothing to clean up, however the processes end)
        self.stderr_file: Any = None
        self.crash_file = tempfile.TemporaryFile(prefix="dpstats-crash-")
        self.state_file = tempfile.TemporaryFile(prefix="dpstats-state-")
        self.shared = _SharedState(self.state_file.fileno(), create=True)
        if method == "fork":
            self._start_fork(inherited)
        elif method == "spawn":
            self._start_spawn()
        else:
            self.close()
            raise ValueError(f"unknown start method {method!r}; use 'fork' or 'spawn'")

    # -- start
    def _start_fork(self, inherited: Sequence[int]) -> None:
        if not hasattr(os, "fork"):
            raise RuntimeError("fork-based workers need a POSIX system; use method='spawn'")
        a, b = socket.socketpair()
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:  # the worker
            try:
                a.close()
                for fd in inherited:  # the supervisor's ends of the other workers' channels
                    try:
                        os.close(fd)
                    except OSError:
                        pass
                os.setpgid(0, 0)
                conn = Connection(b.detach())
                _worker_setup(parent, self.crash_file.fileno())
                _worker_loop(conn, self.shared)  # the mapping is shared with the supervisor
            finally:
                os._exit(0)
        b.close()
        try:
            os.setpgid(pid, pid)
        except OSError:
            pass
        self.pid = pid
        self.conn = Connection(a.detach())

    def _start_spawn(self) -> None:
        a, b = socket.socketpair()
        env = dict(os.environ)
        env.update(BLAS_ENV)
        pkg_root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join([pkg_root] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
        fd = b.fileno()
        crash_fd, state_fd = self.crash_file.fileno(), self.state_file.fileno()
        self.stderr_file = tempfile.TemporaryFile(prefix="dpstats-worker-")
        code = ("import sys; from dpstats.bench.trial import _spawn_entry; "
                "_spawn_entry(*map(int, sys.argv[1:5]))")
        self.popen = subprocess.Popen(
            [sys.executable, "-c", code, str(fd), str(os.getpid()), str(crash_fd), str(state_fd)],
            pass_fds=(fd, crash_fd, state_fd), start_new_session=True, env=env, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=self.stderr_file,
        )
        b.close()
        self.pid = self.popen.pid
        self.conn = Connection(a.detach())
        try:
            self.conn.send(("path", list(sys.path)))
            if not self.conn.poll(300):
                raise EOFError
            msg = self.conn.recv()
        except (EOFError, OSError):
            tail = self._stderr_tail()
            self.kill()
            self.close()
            raise RuntimeError(f"a spawned dpstats worker failed to start{': ' + tail if tail else ''}") from None
        if msg[0] != "hello":
            self.kill()
            self.close()
            raise RuntimeError(f"unexpected message from a spawned worker: {msg!r}")

    @staticmethod
    def _read(f: Any) -> str:
        if f is None or f.closed:
            return ""
        try:
            return os.pread(f.fileno(), 1 << 16, 0).decode(errors="replace")
        except OSError:
            return ""

    def _stderr_tail(self) -> str:
        return self._read(self.stderr_file).strip()[-1000:]

    # -- control
    def submit(self, job: Job, limits: Limits, job_no: int) -> None:
        self.job, self.job_no, self.confirmed, self.info, self.seen = job, job_no, 0, None, None
        self.state = "loading"
        self.conn.send(("job", job, limits.memory_bytes, job_no))

    def running_trial(self) -> tuple[int, float, int] | None:
        """``(index, start, rss0)`` of the trial of the current job that is running, if any."""
        snap = self.shared.read()
        if snap is None or self.job is None:
            return None
        job_no, index, start, rss0, running = snap
        if job_no != self.job_no or not running or not (0 <= index < len(self.job.trials)):
            return None
        return index, start, rss0

    def reap(self, block: bool) -> tuple[int, int] | None:
        """``(exit code, signal)`` once the process has ended, else None."""
        if self.popen is not None:
            try:
                rc = self.popen.wait(timeout=None if block else 0)
            except subprocess.TimeoutExpired:
                return None
            return (rc, 0) if rc >= 0 else (0, -rc)
        try:
            pid, status = os.waitpid(self.pid, 0 if block else os.WNOHANG)
        except ChildProcessError:
            return (0, 0)
        if pid == 0:
            return None
        if os.WIFSIGNALED(status):
            return (0, os.WTERMSIG(status))
        return (os.WEXITSTATUS(status) if os.WIFEXITED(status) else 0, 0)

    def describe_end(self, end: tuple[int, int]) -> tuple[str, str]:
        """(status, message) for a worker that ended during a trial."""
        code, sig = end
        if sig == signal.SIGKILL:
            return "memory", "worker process killed by SIGKILL (by the out-of-memory killer, most likely)"
        if sig:
            return "error", f"worker process killed by signal {sig} ({_signal_name(sig)}){self._crash_frame()}"
        return "error", f"worker process exited with status {code}"

    def _crash_frame(self) -> str:
        """`` (at file:line in function)`` for the innermost Python frame of a fatal-signal dump."""
        for line in self._read(self.crash_file).splitlines():
            line = line.strip()
            if line.startswith("File "):
                try:
                    fname = line.split('"')[1]
                    rest = line.split('"', 2)[2]  # , line N in func
                    lineno = rest.split("line", 1)[1].split()[0]
                    func = rest.rsplit(" in ", 1)[1]
                    return f" (at {Path(fname).name}:{lineno} in {func})"
                except IndexError:
                    return ""
        return ""

    def kill(self) -> tuple[int, int] | None:
        """Kill the worker's process group and reap it (the handle stays readable until :meth:`close`)."""
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except OSError:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except OSError:
                pass
        return self.reap(block=True)

    def close(self) -> None:
        self.state = "dead"
        conn = getattr(self, "conn", None)
        if conn is not None:
            try:
                conn.close()
            except OSError:
                pass
        self.shared.close()
        for f in (self.stderr_file, self.crash_file, self.state_file):
            if f is not None:
                f.close()

    def stop(self) -> None:
        """Ask an idle worker to exit; kill it if it does not within 2 s."""
        if self.state == "dead":
            return
        try:
            self.conn.send(("stop",))
        except OSError:
            pass
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            if self.reap(block=False) is not None:
                self.close()
                return
            time.sleep(0.005)
        self.kill()
        self.close()


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

    def __init__(self, jobs: Iterable[Job]) -> None:
        self.q: deque[Job] = deque(j for j in jobs if len(j))
        self.count: Counter[tuple[str, str]] = Counter((j.corpus, j.instance) for j in self.q)

    def __len__(self) -> int:
        return len(self.q)

    def appendleft(self, job: Job) -> None:
        self.q.appendleft(job)
        self.count[(job.corpus, job.instance)] += 1

    def take(self, prefer: set[tuple[str, str]], avoid: set[tuple[str, str]]) -> Job:
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

    def __enter__(self) -> "WorkerPool":
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

    def _handle(self, w: _Worker, msg: tuple, on_result: Callable[[TrialResult], None],
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

    def _drain(self, w: _Worker, on_result: Callable[[TrialResult], None],
               on_ready: Callable[[dict[str, Any]], None] | None) -> bool:
        """Handle the messages waiting; False when the channel has closed."""
        try:
            while w.state in ("loading", "running") and w.conn.poll():
                self._handle(w, w.conn.recv(), on_result, on_ready)
        except (EOFError, OSError):
            return False
        return True

    def _service(self, w: _Worker, limits: Limits, pending: _JobQueue, on_result: Callable[[TrialResult], None],
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
                pending: _JobQueue, on_result: Callable[[TrialResult], None],
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
                      on_result: Callable[[TrialResult], None],
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
# Convenience entry points
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


def run_trial(algorithm: str | type, problem: Problem, epsilon: float, delta: float, seed: int,
              limits: Limits | None = None, isolate: bool = True, secure: bool = False) -> TrialResult:
    """Run and score one trial.

    Parameters
    ----------
    algorithm : str or Algorithm subclass
        A registered name (for ``problem.task``), a ``module:object`` plugin, or a class.
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
    from dpstats.algorithms import get, register

    if isinstance(algorithm, str):
        algo_cls = get(problem.task, algorithm)
        ref = AlgorithmRef.of(algo_cls, algorithm)
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
