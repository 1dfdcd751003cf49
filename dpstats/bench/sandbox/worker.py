"""The worker process: it runs the trials of a job one after the other under the limits.

A worker is started by fork (a copy of the supervising process) or by spawn
(a fresh interpreter entering :func:`_spawn_entry`), receives jobs over a
socket, publishes the running trial in a small shared-memory block
(:class:`_SharedState`) and sends finished trials in batches. :class:`_Worker`
is the supervisor's handle of one worker process: starting it, reading its
state, reaping it and describing how it ended.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import replace
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from dpstats.bench.model import TrialResult, describe_exception, load_problem
from dpstats.bench.sandbox.jobs import CallJob, CallResult, Job
from dpstats.bench.sandbox.limits import (
    _MB,
    AS_FACTOR,
    Limits,
    _limit_blas_threads,
    _peak_self,
    _reset_peak,
    _self_memory,
    _SelfStats,
    _set_as_limit,
    _set_pdeathsig,
    _signal_name,
)
from dpstats.bench.scoring import score
from dpstats.bench.trial import execute_release

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
        with contextlib.suppress(OSError, ValueError):
            self.map.close()


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


def _serve_calls(conn: Connection, state: _SharedState, job: CallJob, limit: int, job_no: int,
                 begin: Callable[[], tuple[int, int]], stats: _SelfStats | None) -> None:
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
        self.job: Job | CallJob | None = None
        self.job_no = 0
        self.confirmed = 0
        self.seen: tuple[int, int, float] | None = None
        self.peak = 0
        self.last_check = 0.0
        self.info: dict[str, Any] | None = None
        self.loaded: set[tuple[str, str]] = set()
        self.popen: subprocess.Popen[Any] | None = None
        # files without a name (nothing to clean up, however the processes end)
        self.stderr_file: Any = None
        self.crash_file = tempfile.TemporaryFile(prefix="dpstats-crash-")  # noqa: SIM115 (closed by close())
        self.state_file = tempfile.TemporaryFile(prefix="dpstats-state-")  # noqa: SIM115 (closed by close())
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
                    with contextlib.suppress(OSError):
                        os.close(fd)
                os.setpgid(0, 0)
                conn = Connection(b.detach())
                _worker_setup(parent, self.crash_file.fileno())
                _worker_loop(conn, self.shared)  # the mapping is shared with the supervisor
            finally:
                os._exit(0)
        b.close()
        with contextlib.suppress(OSError):
            os.setpgid(pid, pid)
        self.pid = pid
        self.conn = Connection(a.detach())

    def _start_spawn(self) -> None:
        a, b = socket.socketpair()
        env = dict(os.environ)
        env.update(BLAS_ENV)
        pkg_root = str(Path(__file__).resolve().parents[3])
        env["PYTHONPATH"] = os.pathsep.join([pkg_root] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
        fd = b.fileno()
        crash_fd, state_fd = self.crash_file.fileno(), self.state_file.fileno()
        self.stderr_file = tempfile.TemporaryFile(prefix="dpstats-worker-")  # noqa: SIM115 (closed by close())
        code = ("import sys; from dpstats.bench.sandbox.worker import _spawn_entry; "
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
    def submit(self, job: Job | CallJob, limits: Limits, job_no: int) -> None:
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
            with contextlib.suppress(OSError):
                os.kill(self.pid, signal.SIGKILL)
        return self.reap(block=True)

    def close(self) -> None:
        self.state = "dead"
        conn = getattr(self, "conn", None)
        if conn is not None:
            with contextlib.suppress(OSError):
                conn.close()
        self.shared.close()
        for f in (self.stderr_file, self.crash_file, self.state_file):
            if f is not None:
                f.close()

    def stop(self) -> None:
        """Ask an idle worker to exit; kill it if it does not within 2 s."""
        if self.state == "dead":
            return
        with contextlib.suppress(OSError):
            self.conn.send(("stop",))
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            if self.reap(block=False) is not None:
                self.close()
                return
            time.sleep(0.005)
        self.kill()
        self.close()
