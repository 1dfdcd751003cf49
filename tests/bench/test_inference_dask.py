"""The coverage benchmark (``dpstats bench --inference``) on a Dask cluster stores the intervals of local workers."""

from __future__ import annotations

import io
import json

import pytest

from dpstats.bench import runner as R
from dpstats.bench.store import read_intervals
from dpstats.cli import main

#: one interval method of each task with intervals, on small public instances
RUN = dict(algorithms=["fwl_score", "adaptive_whiten"], tasks=["sce", "mean"],
           instances=["mroz87_lwage", "mean_mroz87_lwage"], epsilons=[1.0], inference=True)


pytestmark = pytest.mark.usefixtures("restore_registry")  # plugins register themselves


def _rows(path):
    """The stored interval rows without the timings (repr: a NaN equals itself)."""
    iv = read_intervals(path)
    return iv, [repr(r) for r in iv.drop(columns=["seconds", "peak_mb"]).itertuples(index=False)]


def test_dask_local_cluster_stores_the_local_intervals_and_resumes(tmp_path):
    distributed = pytest.importorskip("distributed")

    def run(results, trials, **where):
        return R.run_bench(R.BenchConfig(results=str(results), trials=trials, **RUN, **where), out=io.StringIO())

    local = run(tmp_path / "local.sqlite", 2, workers=2)
    assert local.status == "complete" and local.ran == local.planned == 4
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cl:
        first = run(tmp_path / "dask.sqlite", 1, dask=cl.scheduler_address)
        assert first.status == "complete" and first.ran == 2 and first.workers == 2
        # a rerun with more seeds resumes: only seed 1 of each job runs
        again = run(tmp_path / "dask.sqlite", 2, dask=cl.scheduler_address)
        assert again.status == "complete" and (again.planned, again.skipped, again.ran) == (4, 2, 2)
    a, rows_a = _rows(tmp_path / "local.sqlite")
    b, rows_b = _rows(tmp_path / "dask.sqlite")
    assert len(rows_a) == 4 and rows_a == rows_b
    assert set(b.algorithm) == {"fwl_score", "adaptive_whiten"} and (b.status == "ok").all()
    for c in ("estimate", "low", "high"):  # the intervals themselves, not only their verdicts
        assert all(json.loads(x) for x in b[c])
    assert b[["covered", "width_ratio"]].equals(a[["covered", "width_ratio"]])


def test_bench_inference_runs_on_dask_from_the_command_line(tmp_path, capsys):
    pytest.importorskip("distributed")
    results = tmp_path / "r.sqlite"
    args = ["bench", "--inference", "--task", "sce", "--instance", "mroz87_lwage", "--algorithm", "fwl_score",
            "--epsilon", "1", "--trials", "1", "--results", str(results)]
    assert main(args + ["--dask", "local:1"]) == 0
    assert "Dask at local:1" in capsys.readouterr().err
    iv = read_intervals(results)
    assert len(iv) == 1 and iv.status.tolist() == ["ok"]
    # stored as coverage trials: a local rerun of the same command has nothing left to run
    assert main(args + ["--workers", "1"]) == 0
    assert "0 trials to run, 1 of 1 already stored" in capsys.readouterr().err
