"""benchmarks/bench_benchmark.py: the Markdown table of a timed benchmark run, from its results file."""

from __future__ import annotations

from pathlib import Path

import pytest

from dpstats.bench import model, store
from tests.conftest import REPO, load_script

#: algorithm, task, instance -> seconds of its trials (three seeds each)
TIMES = {
    ("slow_one", "sce", "inst_a"): [6.0, 7.0, 5.5],
    ("slow_one", "sce", "inst_b"): [0.1, 0.2, 0.3],
    ("fast_one", "sce", "inst_a"): [0.01, 0.02, 0.04],
    ("fast_one", "sce", "inst_b"): [4.0, 5.0, 9.0],  # median 5: not above the target
    ("mean_one", "mean", "inst_m"): [0.5, 0.5, 0.5],
}


@pytest.fixture(scope="module")
def bb():
    return load_script(REPO / "benchmarks" / "bench_benchmark.py")


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("bb") / "r.sqlite"
    with store.Store(path) as s:
        s.bind_corpus("public", str(path.parent), True)
        for (name, task, inst), secs in TIMES.items():
            for seed, sec in enumerate(secs):
                ok = not (name == "mean_one" and seed == 2)
                s.add_trial(model.TrialResult(
                    algorithm=name, interpretation="standard", instance=inst, study="s_" + inst, task=task,
                    epsilon=1.0, delta=1e-6, seed=seed, status="ok" if ok else "declined",
                    error=None if ok else "too few rows", estimate=None, error_value=0.1 if ok else float("inf"),
                    baseline=0.1, ratio=1.0 if ok else float("inf"), seconds=sec, peak_mb=1.0, n=500, d=3))
    return path


HOST = {"cores": 2, "available": 2, "cpu": "Test CPU", "python": "3.11.7", "load": 1.5, "memory_gb": 24.0}


def test_algorithm_times(bb, results: Path) -> None:
    times = bb.algorithm_times(store.read_trials(results)).set_index("algorithm")
    assert list(times.index) == ["slow_one", "fast_one", "mean_one"]  # by total seconds, largest first
    slow = times.loc["slow_one"]
    assert (slow["trials"], slow["total"], slow["median"], slow["instance_median"], slow["instance"], slow["max"]) == \
        (6, pytest.approx(19.1), pytest.approx(2.9), 6.0, "inst_a", 7.0)
    assert times.loc["fast_one", "instance_median"] == 5.0 and times.loc["fast_one", "instance"] == "inst_b"


def test_table_writer_on_a_small_results_file(bb, results: Path) -> None:
    text = bb.benchmark_table(results, preset="quick", bench_seconds=125.0, report_seconds=12.4, host=HOST,
                              command="python benchmarks/bench_benchmark.py --preset quick")
    lines = text.splitlines()
    assert lines[0] == bb.HEADER and lines[2] == "Command: `python benchmarks/bench_benchmark.py --preset quick`"
    assert "| preset | `quick` |" in lines
    assert "| `dpstats bench` wall time | **125 s (2.1 min)** |" in lines  # no run stored with a wall time
    assert "| trials | 15 (ok 14, declined 1) on 3 instances, 3 task-algorithm pairs |" in lines
    assert "| trial seconds, all algorithms | 39 s |" in lines
    assert "| `dpstats report` wall time | **12 s** |" in lines
    assert ("| machine | 2 cores (2 available), Test CPU, 24 GB, Python 3.11.7, load average 1.5 at the start |"
            in lines)
    assert "Above 5 s median per trial on some instance: `slow_one` (sce, 6 s on `inst_a`)." in lines
    assert "| sce | `slow_one` | 6 | 19.1 | 2.9 | 6 | `inst_a` | 7 |" in lines
    assert "| sce | `fast_one` | 6 | 18.1 | 2.02 | 5 | `inst_b` | 9 |" in lines
    assert "| mean | `mean_one` | 3 | 1.5 | 0.5 | 0.5 | `inst_m` | 0.5 |" in lines
    assert lines[-1].startswith("| mean |")


def test_table_without_slow_algorithms(bb, results: Path, tmp_path: Path) -> None:
    import shutil
    import sqlite3

    fast = tmp_path / "fast.sqlite"
    shutil.copy(results, fast)
    con = sqlite3.connect(fast)
    con.execute("UPDATE trials SET seconds = seconds / 10")
    con.commit()
    con.close()
    text = bb.benchmark_table(fast, preset="full", bench_seconds=1.0, report_seconds=1.0, host=HOST)
    assert "No algorithm has a median trial above 5 s on any instance." in text and "Command:" not in text
