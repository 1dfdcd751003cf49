"""Where the benchmark's jobs run: local worker processes or a Dask cluster.

Both run each job in a sandboxed trial process under the same limits
(:mod:`dpstats.bench.sandbox`) and hand every result to the caller as it
arrives; :func:`dpstats.bench.runner.run_bench` stores them.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from dpstats.bench.model import TrialResult
from dpstats.bench.sandbox import Job, Limits, WorkerPool, run_job_isolated

__all__ = ["run_local", "run_dask"]




def _dask_job(job: Job, limits: Limits) -> tuple[dict[str, Any] | None, list[TrialResult]]:
    """A Dask task: run one job in the worker thread's persistent trial process."""
    return run_job_isolated(job, limits)


def run_local(jobs: list[Job], workers: int, limits: Limits, on_result: Callable[[TrialResult], None],
              on_ready: Callable[[dict[str, Any]], None], on_tick: Callable[[], None],
              on_running: Callable[[list[float]], None] | None = None) -> None:
    """Run ``jobs`` on ``workers`` local worker processes; ``on_running`` gets the running trials' seconds."""
    with WorkerPool(workers, limits) as pool:
        def tick() -> None:
            on_tick()
            if on_running is not None:
                on_running(pool.running_seconds())

        pool.run(jobs, on_result, on_ready, on_tick=tick)


def _dask_client(address: str) -> tuple[Any, Any]:
    from distributed import Client, LocalCluster

    if address == "local" or address.startswith("local:"):
        n = int(address.partition(":")[2] or (os.cpu_count() or 1))
        cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None)
        return Client(cluster, set_as_default=False), cluster
    return Client(address, set_as_default=False), None


def run_dask(jobs: list[Job], address: str, limits: Limits, on_result: Callable[[TrialResult], None],
             on_ready: Callable[[dict[str, Any]], None], on_batch: Callable[[], None]) -> int:
    """Run ``jobs`` on a Dask cluster (an address, or ``local[:N]``), one task per job; return its worker count."""
    from distributed import as_completed

    client, cluster = _dask_client(address)
    futures = []
    try:
        nworkers = sum(w.get("nthreads", 1) for w in client.scheduler_info().get("workers", {}).values())
        # one task per job, run roughly in submission order (the plan's: longest first)
        futures = client.map(_dask_job, jobs, [limits] * len(jobs), pure=False)
        for fut in as_completed(futures, loop=client.loop):
            info, results = fut.result()
            if info is not None:
                on_ready(info)
            for r in results:
                on_result(r)
            on_batch()
            fut.release()
        return int(nworkers)
    finally:
        if futures:
            client.cancel(futures)
        client.close()
        if cluster is not None:
            cluster.close()
