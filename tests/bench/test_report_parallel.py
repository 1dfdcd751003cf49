"""The report drawn by several processes gives the same files as one."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from dpstats.bench.report.pool import JobRunner, resolve_workers
from dpstats.cli import main

pytestmark = pytest.mark.usefixtures("restore_registry")  # the oracle plugin registers itself

P = "tests.bench.test_inference:"


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    """A tiny benchmark of sce and mean instances at two ε, with coverage trials of the sce ones."""
    path = tmp_path_factory.mktemp("parallel") / "r.sqlite"
    common = ["--results", str(path), "--workers", "1", "--no-progress"]
    assert main(["bench", "--task", "sce", "mean", "--instance", "mroz87_lwage", "bn92_wage2", "mean_mroz87_lwage",
                 "--epsilon", "1", "10", "--trials", "2", "--algorithm", P + "OracleExact", "kv_clip", *common]) == 0
    assert main(["bench", "--inference", "--task", "sce", "--instance", "mroz87_lwage", "bn92_wage2", "--epsilon",
                 "1", "--trials", "3", "--algorithm", P + "OracleExact", *common]) == 0
    return path


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_two_workers_write_the_same_files_as_one(results: Path, tmp_path: Path, capsys) -> None:
    outs = {}
    for w in (1, 2):
        outs[w] = tmp_path / f"w{w}"
        assert main(["report", "--results", str(results), "--out", str(outs[w]), "--workers", str(w)]) == 0
    one, two = _files(outs[1]), _files(outs[2])
    # every kind of page and figure is there: leaderboards, coverage, instances (with forest plots), algorithms
    names = set(one)
    assert {"leaderboard-sce-eps1.html", "leaderboard-mean-eps10.html", "inference-sce.html", "explore.html",
            "explore/instance-mroz87_lwage.html", "explore/img/forest-mroz87_lwage.png",
            "explore/algorithm-mean-kv_clip.html", "explore/img/algorithm-sce-test_oracle_exact.svg"} <= names
    assert sorted(one) == sorted(two)
    assert [n for n in one if one[n] != two[n]] == []
    out = capsys.readouterr().out.splitlines()
    assert out[0].replace(str(outs[1]), str(outs[2])) == out[1]  # the same summary, files counted alike


def test_report_workers_must_be_positive(results: Path, tmp_path: Path, capsys) -> None:
    assert main(["report", "--results", str(results), "--out", str(tmp_path / "x"), "--workers", "0"]) != 0
    assert "--workers must be at least 1" in capsys.readouterr().err


def _fails(x: int) -> int:
    raise RuntimeError(f"job {x}")


@pytest.mark.parametrize("workers", [1, 2])
def test_job_runner_keeps_the_submission_order(workers: int) -> None:
    with JobRunner(workers) as run:
        run.submit(pow, 2, 10)
        run.add("here")
        run.submit(math.factorial, 5)
        assert run.results() == [1024, "here", 120]
        with pytest.raises(RuntimeError, match="job 7"):  # from submit with one worker, from results with a pool
            run.submit(_fails, 7)
            run.results()
    assert resolve_workers(None) >= 1
    with pytest.raises(ValueError):
        resolve_workers(0)
