"""The process sandbox: trials in worker processes, supervised under per-trial limits.

The benchmark runs trials (:mod:`dpstats.bench.trial`) in *worker processes*
supervised by the calling process, so that a trial that hangs, exhausts
memory or crashes the interpreter costs one trial, not the run. The sandbox
has four modules, each importing only those listed after it:

* :mod:`~dpstats.bench.sandbox.pool` -- the supervisor: :class:`~dpstats.bench.sandbox.pool.WorkerPool`
  (scheduling, limit checks, crash handling), :func:`~dpstats.bench.sandbox.pool.run_trial` and
  :func:`~dpstats.bench.sandbox.pool.run_job_isolated`;
* :mod:`~dpstats.bench.sandbox.worker` -- the worker process (fork or spawn
  start, its serving loop, the shared block that publishes the running
  trial) and the supervisor's handle of it;
* :mod:`~dpstats.bench.sandbox.jobs` -- the work: :class:`~dpstats.bench.sandbox.jobs.Job`,
  :class:`~dpstats.bench.sandbox.jobs.CallJob`, :class:`~dpstats.bench.sandbox.jobs.CallResult`;
* :mod:`~dpstats.bench.sandbox.limits` -- :class:`~dpstats.bench.sandbox.limits.Limits` and the
  process-level helpers that measure and bound a worker's memory.

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
>>> from dpstats.bench.model import Problem
>>> from dpstats.bench.sandbox import Limits, run_trial
>>> problem = Problem.from_instance(Corpus.public().instance("mroz87_lwage"))  # doctest: +SKIP
>>> r = run_trial("adassp", problem, epsilon=1.0, delta=1e-6, seed=0, limits=Limits(time=10))  # doctest: +SKIP
>>> r.status, r.ratio  # doctest: +SKIP
('ok', 0.83...)
"""

from dpstats.bench.sandbox.jobs import CallJob, CallResult, Job
from dpstats.bench.sandbox.limits import DEFAULT_MEMORY_MB, DEFAULT_TIME_LIMIT, Limits
from dpstats.bench.sandbox.pool import FatalJobError, WorkerPool, run_job_isolated, run_trial

__all__ = [
    "DEFAULT_MEMORY_MB",
    "DEFAULT_TIME_LIMIT",
    "Limits",
    "Job",
    "CallJob",
    "CallResult",
    "WorkerPool",
    "FatalJobError",
    "run_trial",
    "run_job_isolated",
]
