"""Tests of dpstats.bench.runner and dpstats.bench.sandbox: planning, running, determinism, plugins, the CLI."""

from __future__ import annotations

import io
import json
import math
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from dpstats.bench import runner as R
from dpstats.privacy.accounting import PrivacyLeakWarning
from dpstats.bench.store import TRIAL_COLUMNS, read_runs, read_trials
from dpstats.bench.model import Problem, load_problem
from dpstats.bench.sandbox import Limits, run_trial

from tests.conftest import MROZ, REPO, write_study

P = "tests.plugins_hostile:"
GOOD = [P + "NoisyMean", P + "NoisyOLS", P + "NoisyCoef"]


pytestmark = pytest.mark.usefixtures("restore_registry")  # plugins register themselves


def config(corpus, results, **kw):
    kw.setdefault("algorithms", GOOD)
    kw.setdefault("epsilons", [1.0, 10.0])
    kw.setdefault("trials", 3)
    kw.setdefault("workers", 2)
    return R.BenchConfig(corpus=str(corpus), results=str(results), **kw)


def comparable(df):
    """Trial rows without the timing columns, which differ between runs."""
    return df.drop(columns=["seconds", "peak_mb"]).reset_index(drop=True)


# --------------------------------------------------------------------------
# planning
# --------------------------------------------------------------------------


def test_plan_defaults_follow_the_protocol(mroz_corpus, tmp_path):
    plan = R.plan_bench(R.BenchConfig(corpus=str(mroz_corpus), algorithms=GOOD))
    # a corpus without corpus.toml is not public: 30 trials; epsilon {0.3, 1, 3, 10}; delta 1e-6
    assert plan.trials == 30 and plan.epsilons == (0.3, 1.0, 3.0, 10.0) and plan.delta == 1e-6
    assert plan.planned == plan.to_run == 3 * 4 * 30  # one instance per task, one algorithm per task
    assert {(j.algorithm.task, j.instance) for j in plan.jobs} == {("sce", "m_sce"), ("linreg", "m_lin"),
                                                                   ("mean", "m_mean")}
    assert all(len(j) == 30 and [t[2] for t in j.trials] == list(range(30)) for j in plan.jobs)
    (mroz_corpus / "corpus.toml").write_text('name = "mine"\npublic = true\n')
    assert R.plan_bench(R.BenchConfig(corpus=str(mroz_corpus), algorithms=GOOD)).trials == 10


def test_presets_and_explicit_options(mroz_corpus):
    write_study(mroz_corpus, "second", MROZ + '[[instances]]\nid = "s_mean"\ntask = "mean"\ncolumns = ["educ"]\n'
                '[[instances]]\nid = "s_mean2"\ntask = "mean"\ncolumns = ["exper"]\n')
    quick = R.plan_bench(R.BenchConfig(corpus=str(mroz_corpus), algorithms=GOOD, preset="quick"))
    assert quick.epsilons == (1.0, 10.0) and quick.trials == 3
    assert [s.id for s in quick.instances] == ["m_sce", "m_lin", "m_mean", "s_mean"]  # first per study and task
    mine = R.plan_bench(R.BenchConfig(corpus=str(mroz_corpus), algorithms=GOOD, preset="quick", trials=2,
                                      epsilons=[3.0], tasks=["mean"]))
    assert (mine.trials, mine.epsilons, [s.id for s in mine.instances]) == (2, (3.0,), ["m_mean", "s_mean"])
    full = R.plan_bench(R.BenchConfig(corpus=str(mroz_corpus), algorithms=GOOD, preset="full", tasks=["mean"]))
    assert [s.id for s in full.instances] == ["m_mean", "s_mean", "s_mean2"]


def test_algorithm_selection():
    from dpstats.algorithms import list_configurations

    # the roster: the registered algorithms and the named configurations (adaptive_whiten[api])
    sel = R.select_algorithms(None, ["mean"])
    assert [s.ref.name for s in sel] == [c.name for c in list_configurations("mean")]
    assert "adaptive_whiten[api]" in [s.ref.name for s in sel]
    sel = R.select_algorithms([P + "NoisyMean"], ["sce", "mean"])
    assert [(s.ref.name, s.ref.ref, s.source) for s in sel] == [("test_noisy_mean", P + "NoisyMean", "plugin")]
    # once loaded, a plugin is found by name in its task
    assert [s.ref.task for s in R.select_algorithms(["test_noisy_mean"], ["sce", "mean"])] == ["mean"]
    # plugins of tasks not selected are left out, but something must be left
    assert [s.ref.name for s in R.select_algorithms(GOOD, ["mean"])] == ["test_noisy_mean"]
    with pytest.raises(ValueError, match="none of the algorithms"):
        R.select_algorithms([P + "NoisyMean"], ["sce"])
    with pytest.raises(ValueError, match="no algorithm 'no_such'"):
        R.select_algorithms(["no_such"], ["sce", "mean"])
    with pytest.raises(KeyError):
        R.select_instances(R.Corpus(REPO / "replication"), ["sce"], ["no_such_instance"])


# --------------------------------------------------------------------------
# running
# --------------------------------------------------------------------------


def test_local_run_stores_every_trial_reproducibly(mroz_corpus, tmp_path):
    out = io.StringIO()
    s2 = R.run_bench(config(mroz_corpus, tmp_path / "two.sqlite"), out=out)
    assert s2.status == "complete" and s2.ran == s2.planned == 3 * 2 * 3
    df = read_trials(tmp_path / "two.sqlite")
    assert list(df.columns[:16]) == list(TRIAL_COLUMNS) and len(df) == 18
    assert set(df.status) <= {"ok", "declined"} and (df.seed.isin([0, 1, 2])).all()
    ok = df[df.status == "ok"]
    assert np.isfinite(ok.ratio).all() and (ok.ratio >= 0).all() and ok.error.isna().all()
    assert (ok.seconds >= 0).all() and (ok.peak_mb >= 0).all()
    np.testing.assert_allclose(ok.ratio, ok.error_value / ok.baseline)
    # quiet output without a terminal: a header and a few progress lines
    lines = out.getvalue().strip().splitlines()
    assert 1 <= len(lines) <= 5 and "18 trials to run" in lines[0]

    # the release is a function of (algorithm, data, epsilon, delta, seed) alone
    s1 = R.run_bench(config(mroz_corpus, tmp_path / "one.sqlite", workers=1), out=io.StringIO())
    assert s1.ran == 18
    assert comparable(read_trials(tmp_path / "one.sqlite")).equals(comparable(df))
    problem = load_problem(mroz_corpus, "m_mean")
    with pytest.warns(PrivacyLeakWarning):  # in this process the base class warns about the class
        by_hand = run_trial(P + "NoisyMean", problem, 10.0, 1e-6, 2, isolate=False)
    row = df[(df.instance == "m_mean") & (df.epsilon == 10.0) & (df.seed == 2)].iloc[0]
    assert json.loads(row.estimate) == list(by_hand.estimate) and row.ratio == by_hand.ratio
    # ... and the convention is numpy.random.default_rng(seed)
    X = problem.data.X
    rng = np.random.default_rng(2)
    expected = X.mean(axis=0) + rng.normal(size=X.shape[1]) * (X.std(axis=0) + 1e-12) / (10.0 * np.sqrt(len(X)))
    np.testing.assert_array_equal(json.loads(row.estimate), expected)

    # a second run of the same command has nothing to do
    again = R.run_bench(config(mroz_corpus, tmp_path / "two.sqlite"), out=io.StringIO())
    assert (again.ran, again.skipped) == (0, 18)
    # and a larger one runs only the new trials
    more = R.run_bench(config(mroz_corpus, tmp_path / "two.sqlite", trials=4), out=io.StringIO())
    assert (more.ran, more.skipped) == (6, 18) and len(read_trials(tmp_path / "two.sqlite")) == 24
    runs = read_runs(tmp_path / "two.sqlite")
    assert runs.status.tolist() == ["complete"] * 3 and runs.config[0]["rng"] == "numpy.random.default_rng(seed)"


def test_run_trial_isolated_matches_in_process(mroz_corpus):
    problem = Problem.from_instance(R.Corpus(mroz_corpus).instance("m_lin"))
    a = run_trial(P + "NoisyOLS", problem, 1.0, 1e-6, 7, limits=Limits(time=20))
    with pytest.warns(PrivacyLeakWarning):
        b = run_trial(P + "NoisyOLS", problem, 1.0, 1e-6, 7, isolate=False)
    assert a.status == b.status == "ok" and a.estimate == b.estimate and a.ratio == b.ratio
    assert problem.data.X.flags.writeable is False


def test_progress_bar_on_request(mroz_corpus, tmp_path):
    out = io.StringIO()
    R.run_bench(config(mroz_corpus, tmp_path / "r.sqlite", algorithms=[P + "NoisyMean"], progress=True), out=out)
    text = out.getvalue()
    assert "bench" in text and "6/6" in text


def test_cli_on_a_corpus_outside_the_repository_runs_30_trials(tmp_path, capsys):
    from dpstats.cli import main

    corpus = tmp_path / "elsewhere"
    write_study(corpus, "mroz", MROZ + '[[instances]]\nid = "x_mean"\ntask = "mean"\ncolumns = ["lwage", "educ"]\n')
    assert REPO not in corpus.resolve().parents
    results = tmp_path / "out" / "bench.sqlite"
    rc = main(["bench", "--corpus", str(corpus), "--algorithm", P + "NoisyMean", "--epsilon", "1",
               "--results", str(results), "--workers", "2"])
    assert rc == 0
    df = read_trials(results)
    assert sorted(df.seed) == list(range(30)) and (df.status == "ok").all() and (df.instance == "x_mean").all()
    assert (df.epsilon == 1.0).all() and (df.delta == 1e-6).all() and (df.corpus == "elsewhere").all()
    assert "complete: 30 trials" in capsys.readouterr().out
    rc = main(["bench", "--corpus", str(corpus), "--algorithm", P + "NoisyMean", "--results", str(results),
               "--dry-run"])
    assert rc == 0 and "90 trials to run (30 of 120 already stored)" in capsys.readouterr().out
    # invalid input exits with status 2 and runs nothing
    base = ["bench", "--corpus", str(corpus), "--results", str(results), "--algorithm", P + "NoisyMean"]
    for bad in (["--algorithm", "no_such"], ["--trials", "0"], ["--time-limit", "0"], ["--workers", "0"],
                ["--epsilon", "-1"], ["--memory-limit", "-5"], ["--delta", "1"], ["--instance", "nope"]):
        assert main(base + bad) == 2, bad
    assert len(read_trials(results)) == 30


def test_entry_point_plugins_are_benchmarked(tmp_path, mroz_corpus):
    """An installed distribution's dpstats.algorithms entry point joins the default roster."""
    site = tmp_path / "site"
    (site / "ep_algos").mkdir(parents=True)
    (site / "ep_algos" / "__init__.py").write_text(textwrap.dedent("""
        from tests.plugins_hostile import NoisyMean

        class EntryMean(NoisyMean):
            name = "test_entry_point_mean"
        """))
    dist = site / "ep_algos-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: ep-algos\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[dpstats.algorithms]\nentry_mean = ep_algos:EntryMean\n")
    results = tmp_path / "r.sqlite"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), str(REPO)]))
    code = "import sys; from dpstats.cli import main; sys.exit(main())"
    proc = subprocess.run(
        [sys.executable, "-c", code, "bench", "--corpus", str(mroz_corpus), "--task", "mean", "--trials", "2",
         "--epsilon", "1", "--instance", "m_mean", "--results", str(results), "--workers", "1"],
        env=env, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    df = read_trials(results)
    mine = df[df.algorithm == "test_entry_point_mean"]
    assert sorted(mine.seed) == [0, 1] and (mine.status == "ok").all()
    # the task's whole roster at epsilon 1 ran as well (a tuned configuration runs at its own epsilon only), as a
    # fresh process lists it (this process's registry may hold plugins that other tests registered)
    listing = subprocess.run(
        [sys.executable, "-c", "from dpstats.algorithms import list_configurations; "
         "print(' '.join(c.name for c in list_configurations('mean') if c.epsilon in (None, 1.0)))"],
        env=env, capture_output=True, text=True, timeout=120, check=True,
    )
    roster = set(listing.stdout.split())
    assert "test_entry_point_mean" in roster and "adaptive_whiten" in roster and "adaptive_whiten[api]" in roster
    assert set(df.algorithm) == roster
    assert math.isfinite(mine.ratio.max())
