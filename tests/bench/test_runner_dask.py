"""A Dask cluster runs the same trials with the same results as local workers, limits included."""

from __future__ import annotations

import io

import pytest

from dpstats.bench import runner as R
from dpstats.bench.store import read_trials

P = "tests.plugins_hostile:"


pytestmark = pytest.mark.usefixtures("restore_registry")  # plugins register themselves


def test_dask_local_cluster_gives_the_local_results(mroz_corpus, tmp_path):
    distributed = pytest.importorskip("distributed")
    runs = [  # well-behaved algorithms on every task, then limits and crashes (which cost a worker restart)
        dict(algorithms=[P + "NoisyMean", P + "NoisyOLS", P + "NoisyCoef"], epsilons=[0.3, 10.0], trials=3),
        dict(algorithms=[P + "SleepForever", P + "Aborts", P + "Raises"], epsilons=[1.0], trials=1),
    ]

    def run_all(results, **where):
        for kw in runs:
            s = R.run_bench(R.BenchConfig(corpus=str(mroz_corpus), results=str(results), time_limit=2.0, **kw,
                                          **where), out=io.StringIO())
            assert s.status == "complete" and s.ran == s.planned
        return s

    run_all(tmp_path / "local.sqlite", workers=2)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cl:
        summary = run_all(tmp_path / "dask.sqlite", dask=cl.scheduler_address)
        assert summary.workers == 2
    a, b = read_trials(tmp_path / "local.sqlite"), read_trials(tmp_path / "dask.sqlite")
    assert len(a) == 3 * 2 * 3 + 3
    cols = [c for c in a.columns if c not in ("seconds", "peak_mb")]
    assert a[cols].equals(b[cols])
    by = b.groupby("algorithm").status.agg(set).to_dict()
    assert by["test_sleep_forever"] == {"timeout"} and by["test_aborts"] == {"error"}
    assert by["test_raises"] == {"error"} and by["test_noisy_mean"] == {"ok"}
    assert b[b.algorithm == "test_aborts"].error.str.contains("SIGABRT) (at plugins_hostile.py", regex=False).all()
