"""Resource limits of a trial and the process-level means of enforcing them.

:class:`Limits` holds a trial's wall-clock and memory budget (the protocol's
60 s and 4096 MB by default). The helpers below read a process's memory
(resident and virtual size, the peak since a reset) from Linux's ``/proc``
with portable fallbacks, lower the address-space limit (``RLIMIT_AS``) around
a trial, pin the BLAS libraries to one thread and tie a worker's life to its
supervisor's. The worker (:mod:`dpstats.bench.sandbox.worker`) and the
supervisor (:mod:`dpstats.bench.sandbox.pool`) use them; nothing here starts
a process.
"""

from __future__ import annotations

import ctypes
import math
import os
import resource
import signal
import sys
from dataclasses import dataclass

#: protocol budget per trial
DEFAULT_TIME_LIMIT = 60.0
DEFAULT_MEMORY_MB = 4096.0
#: the address-space limit is the starting virtual size plus this multiple of the memory limit
AS_FACTOR = 1.25

_MB = 1024.0 * 1024.0


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
    def open(cls) -> _SelfStats | None:
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
        if limit is None:  # noqa: SIM108 (a nested conditional expression would read worse)
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
