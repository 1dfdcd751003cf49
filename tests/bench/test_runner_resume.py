"""Resuming: a run killed with SIGKILL (and one stopped with SIGTERM) ends, once rerun, with exactly
the rows of an uninterrupted run, none twice."""

from __future__ import annotations

import io
import os
import signal
import sqlite3
import subprocess
import sys
import time

import psutil
import pytest

from dpstats.bench import runner as R
from dpstats.bench.store import read_runs, read_trials

from tests.conftest import REPO

P = "tests.plugins_hostile:"
ARGS = ["--algorithm", P + "SlowMean", P + "NoisyOLS", "--task", "mean", "linreg", "--epsilon", "0.3", "1", "3",
        "10", "--trials", "12", "--workers", "2"]
TOTAL = 2 * 4 * 12


pytestmark = pytest.mark.usefixtures("restore_registry")  # plugins register themselves


def start(corpus, results):
    env = dict(os.environ, PYTHONPATH=str(REPO))
    code = "import sys; from dpstats.cli import main; sys.exit(main())"
    return subprocess.Popen([sys.executable, "-c", code, "bench", "--corpus", str(corpus), "--results", str(results),
                             *ARGS], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def stored(results) -> int:
    try:
        con = sqlite3.connect(f"file:{results}?mode=ro", uri=True, timeout=5)
        try:
            return con.execute("SELECT COUNT(*) FROM trials").fetchone()[0]
        finally:
            con.close()
    except sqlite3.OperationalError:  # not created yet
        return 0


def wait_for_rows(proc, results, at_least, timeout=120.0):
    deadline = time.monotonic() + timeout
    while stored(results) < at_least:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the run did not store trials in time"
        time.sleep(0.01)


def test_killed_and_stopped_runs_resume_to_the_uninterrupted_result(mroz_corpus, tmp_path):
    results = tmp_path / "resumed.sqlite"

    # 1. SIGKILL the runner mid-run: its workers die with it (no orphan keeps computing)
    proc = start(mroz_corpus, results)
    wait_for_rows(proc, results, 10)
    workers = psutil.Process(proc.pid).children(recursive=True)
    assert workers, "the runner has worker processes"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    _, alive = psutil.wait_procs(workers, timeout=10)
    assert not alive, f"orphaned workers {alive}"
    after_kill = stored(results)
    assert 10 <= after_kill < TOTAL, after_kill

    # 2. resume, then stop it with SIGTERM: exit status 130, the run is marked interrupted
    proc = start(mroz_corpus, results)
    wait_for_rows(proc, results, after_kill + 10)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "run the same command again to resume" in err
    after_term = stored(results)
    assert after_kill + 10 <= after_term < TOTAL, after_term

    # 3. resume to the end (in this process)
    argv = dict(corpus=str(mroz_corpus), algorithms=[P + "SlowMean", P + "NoisyOLS"], tasks=["mean", "linreg"],
                epsilons=[0.3, 1.0, 3.0, 10.0], trials=12, workers=2)
    summary = R.run_bench(R.BenchConfig(results=str(results), **argv), out=io.StringIO())
    assert (summary.skipped, summary.ran, summary.status) == (after_term, TOTAL - after_term, "complete")

    runs = read_runs(results)
    assert runs.status.tolist() == ["running", "interrupted", "complete"]  # the killed run never finished
    assert runs.skipped.tolist() == [0, after_kill, after_term]

    # the uninterrupted run
    straight = tmp_path / "straight.sqlite"
    R.run_bench(R.BenchConfig(results=str(straight), **argv), out=io.StringIO())
    a, b = read_trials(results), read_trials(straight)
    assert len(a) == len(b) == TOTAL
    assert not a.duplicated(["algorithm", "task", "instance", "epsilon", "delta", "seed"]).any()
    cols = [c for c in a.columns if c not in ("seconds", "peak_mb")]
    assert a[cols].equals(b[cols])
