"""Reliability: algorithms that hang, exhaust memory, crash the interpreter, raise or return garbage.

Each must get its status and message, and the run must complete with every
other trial intact.
"""

from __future__ import annotations

import io
import math

import pytest

from dpstats.bench import runner as R
from dpstats.bench.store import read_runs, read_trials

from tests.plugins_hostile import HOSTILE

P = "tests.plugins_hostile:"


pytestmark = pytest.mark.usefixtures("restore_registry")  # plugins register themselves


def test_hostile_algorithms_get_their_status_and_the_run_completes(mroz_corpus, tmp_path):
    results = tmp_path / "r.sqlite"
    algos = list(HOSTILE) + [P + "NoisyMean", P + "NoisyCoef"]
    cfg = R.BenchConfig(corpus=str(mroz_corpus), results=str(results), algorithms=algos, tasks=["mean", "sce"],
                        epsilons=[1.0], trials=2, workers=2, time_limit=2.0)  # memory: the protocol's 4096 MB
    summary = R.run_bench(cfg, out=io.StringIO())
    assert summary.status == "complete" and summary.ran == summary.planned == 2 * len(algos)
    df = read_trials(results)
    assert len(df) == summary.planned and not df.duplicated(["algorithm", "instance", "epsilon", "seed"]).any()
    for spec, (status, fragment) in HOSTILE.items():
        name = spec.split(":")[1]
        from dpstats.algorithms import load_plugin

        rows = df[df.algorithm == load_plugin(spec).name]
        assert sorted(rows.seed) == [0, 1], name
        assert (rows.status == status).all(), (name, rows.status.tolist(), rows.error.tolist())
        assert rows.error.str.contains(fragment, regex=False).all(), (name, rows.error.tolist())
        assert rows.ratio.map(math.isinf).all() and rows.error_value.map(math.isinf).all()
    hang = df[df.algorithm == "test_sleep_forever"]
    assert (hang.seconds >= 2.0).all() and (hang.seconds < 10).all()
    # the well-behaved algorithms are unaffected by their neighbours
    good = df[df.algorithm.isin(["test_noisy_mean", "test_noisy_coef"])]
    assert (good.status == "ok").all() and good.ratio.map(math.isfinite).all()
    assert read_runs(results).status.tolist() == ["complete"]


def test_gradual_allocation_is_stopped_at_the_memory_limit(mroz_corpus, tmp_path):
    results = tmp_path / "r.sqlite"
    cfg = R.BenchConfig(corpus=str(mroz_corpus), results=str(results),
                        algorithms=[P + "GradualHog", P + "NoisyMean"], epsilons=[1.0], trials=1, workers=1,
                        time_limit=60.0, memory_mb=128)
    R.run_bench(cfg, out=io.StringIO())
    df = read_trials(results).set_index("algorithm")
    hog = df.loc["test_gradual_hog"]
    assert hog.status == "memory", hog.error
    # caught by the resident-memory watch (grew past 128 MB) or by the address-space limit (MemoryError)
    assert "memory limit of 128 MB" in hog.error or "MemoryError" in hog.error
    assert hog.seconds < 30
    assert df.loc["test_noisy_mean"].status == "ok" and df.loc["test_noisy_mean"].peak_mb < 128


def test_a_failure_among_fast_trials_is_pinned_on_its_seed(mroz_corpus, tmp_path):
    """Fast trials travel in batches; a crash or a hang mid-job fails exactly its own trial."""
    results = tmp_path / "r.sqlite"
    cfg = R.BenchConfig(corpus=str(mroz_corpus), results=str(results),
                        algorithms=[P + "AbortsOnSeed3", P + "HangsOnSeed3", P + "NoisyMean"], epsilons=[1.0, 3.0],
                        trials=10, workers=2, time_limit=1.5)
    R.run_bench(cfg, out=io.StringIO())
    df = read_trials(results)
    assert len(df) == 3 * 2 * 10 and not df.duplicated(["algorithm", "epsilon", "seed"]).any()
    ref = df[df.algorithm == "test_noisy_mean"].set_index(["epsilon", "seed"])
    for name, status in (("test_aborts_on_seed_3", "error"), ("test_hangs_on_seed_3", "timeout")):
        rows = df[df.algorithm == name].set_index(["epsilon", "seed"])
        bad = rows[rows.status != "ok"]
        assert sorted(bad.index) == [(1.0, 3), (3.0, 3)], (name, bad)
        assert (bad.status == status).all()
        good = rows[rows.status == "ok"]
        # the other trials are those of the well-behaved parent class, seed for seed
        assert good.estimate.equals(ref.loc[good.index].estimate)
