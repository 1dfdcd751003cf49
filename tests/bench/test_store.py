"""Tests of dpstats.bench.store: the SQLite results file, its constraints and read_trials' contract."""

from __future__ import annotations

import math
import sqlite3

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dpstats.bench import store as S
from dpstats.bench.model import TrialResult

CONTRACT = [
    "algorithm", "interpretation", "instance", "study", "task", "epsilon", "delta", "seed", "status", "error",
    "baseline", "ratio", "seconds", "peak_mb", "n", "d",
]


def result(algorithm="a", instance="i1", epsilon=1.0, seed=0, status="ok", ratio=0.5, estimate=(1.0, 2.0),
           task="mean", error=None):
    failed = status != "ok"
    return TrialResult(
        algorithm=algorithm, interpretation="standard", instance=instance, study="s1", task=task, epsilon=epsilon,
        delta=1e-6, seed=seed, status=status, error=error if error is not None or not failed else "why",
        estimate=None if failed else estimate, error_value=math.inf if failed else ratio * 2.0, baseline=2.0,
        ratio=math.inf if failed else ratio, seconds=0.01, peak_mb=1.5, n=100, d=2,
    )


def test_read_trials_contract_and_roundtrip(tmp_path):
    path = tmp_path / "r.sqlite"
    with S.Store(path) as st_:
        st_.bind_corpus("toy", str(tmp_path), public=True)
        assert st_.add_trial(result(seed=1, ratio=0.25))
        assert st_.add_trial(result(seed=0, status="timeout", error="exceeded the time limit of 60 s"))
        assert st_.add_trial(result(algorithm="b", task="sce", estimate=(3.0,), ratio=0.0))
    df = S.read_trials(path)
    assert list(df.columns) == CONTRACT + ["error_value", "estimate", "fallback", "corpus"]
    assert list(S.TRIAL_COLUMNS) == CONTRACT
    # sorted by task, algorithm, instance, epsilon, delta, seed
    assert list(zip(df.task, df.algorithm, df.seed)) == [("mean", "a", 0), ("mean", "a", 1), ("sce", "b", 0)]
    t = df.iloc[0]
    assert t.status == "timeout" and t.error == "exceeded the time limit of 60 s"
    assert math.isinf(t.ratio) and math.isinf(t.error_value) and pd.isna(t.estimate)
    ok = df.iloc[1]
    assert ok.ratio == 0.25 and ok.error_value == 0.5 and ok.estimate == "[1.0, 2.0]" and pd.isna(ok.error)
    assert df.iloc[2].ratio == 0.0
    assert (df.corpus == "toy").all()
    assert df.seed.dtype == "int64" and df.n.dtype == "int64" and df.ratio.dtype == "float64"


def test_empty_file_reads_as_empty_frame_with_the_columns(tmp_path):
    S.Store(tmp_path / "e.sqlite").close()
    df = S.read_trials(tmp_path / "e.sqlite")
    assert df.empty and list(df.columns) == CONTRACT + list(S.EXTRA_COLUMNS)
    with pytest.raises(FileNotFoundError):
        S.read_trials(tmp_path / "missing.sqlite")


def test_unique_key_and_wal(tmp_path):
    path = tmp_path / "r.sqlite"
    st_ = S.Store(path)
    assert st_.add_trial(result())
    assert not st_.add_trial(result(ratio=9.0))  # same key: ignored, the first row stays
    assert st_.add_trial(result(epsilon=0.3))
    assert st_.count() == 2
    assert st_.stored_keys() == {("a", "mean", "i1", 1.0, 1e-6, 0), ("a", "mean", "i1", 0.3, 1e-6, 0)}
    assert st_.con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    # the constraint is in the file itself, not only in add_trial
    with pytest.raises(sqlite3.IntegrityError):
        st_.con.execute("INSERT INTO trials (algorithm, interpretation, instance, study, task, epsilon, delta, seed,"
                        " status) VALUES ('a', 'standard', 'i1', 's1', 'mean', 1.0, 1e-6, 0, 'ok')")
    with pytest.raises(sqlite3.IntegrityError):
        st_.con.execute("INSERT INTO trials (algorithm, interpretation, instance, study, task, epsilon, delta, seed,"
                        " status) VALUES ('a', 'standard', 'i1', 's1', 'mean', 1.0, 1e-6, 5, 'crashed')")
    st_.con.rollback()
    st_.close()
    assert S.read_trials(path).ratio.tolist() == [0.5, 0.5]


def test_a_reader_sees_committed_trials_while_the_writer_is_open(tmp_path):
    path = tmp_path / "r.sqlite"
    st_ = S.Store(path)
    st_.add_trial(result(seed=0))
    assert len(S.read_trials(path)) == 1
    st_.add_trial(result(seed=1))
    assert len(S.read_trials(path)) == 2
    st_.close()


def test_refuses_another_corpus_a_changed_instance_or_interpretation(tmp_path):
    path = tmp_path / "r.sqlite"
    with S.Store(path) as st_:
        st_.bind_corpus("public", "/x", public=True)
        st_.bind_corpus("public", "/elsewhere", public=True)  # same corpus moved: fine
        with pytest.raises(S.StoreMismatch, match="holds results of corpus 'public'"):
            st_.bind_corpus("withheld", "/y", public=False)
        info = {"instance": "i1", "study": "s1", "task": "mean", "n": 100, "d": 2, "baseline": 0.1,
                "se_type": None, "estimate": [1.0, 2.0], "facts": {"n": 100}}
        st_.add_instance(info)
        st_.add_instance(dict(info))
        with pytest.raises(S.StoreMismatch, match="corpus now gives"):
            st_.add_instance({**info, "baseline": 0.2})
        meta = {"name": "a", "task": "mean", "interpretation": "standard", "citation": "c", "summary": ""}
        st_.add_algorithm(meta, "a", "builtin")
        with pytest.raises(S.StoreMismatch, match="interpretation"):
            st_.add_algorithm({**meta, "interpretation": "data-bounds"}, "a", "builtin")
    assert S.read_meta(path)["corpus_name"] == "public"
    inst = S.read_instances(path)
    assert inst.estimate.tolist() == [[1.0, 2.0]] and inst.facts.tolist() == [{"n": 100}]
    assert S.read_algorithms(path).metadata.tolist()[0]["citation"] == "c"


def test_runs_are_recorded(tmp_path):
    path = tmp_path / "r.sqlite"
    with S.Store(path) as st_:
        rid = st_.start_run("toy", "/x", True, {"epsilons": [1.0]}, planned=4, skipped=1)
        st_.finish_run(rid, "complete", 3, 1.5)
    runs = S.read_runs(path)
    assert runs.status.tolist() == ["complete"] and runs.config.tolist() == [{"epsilons": [1.0]}]
    assert runs.planned.tolist() == [4] and runs.skipped.tolist() == [1] and runs.dpstats_version.notna().all()


keys = st.tuples(st.sampled_from(["a", "b"]), st.sampled_from(["i1", "i2"]), st.sampled_from([0.3, 1.0, 10.0]),
                 st.integers(0, 3))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(keys, st.floats(0, 10)), max_size=30))
def test_any_insertion_order_with_repeats_keeps_the_first_row_per_key(tmp_path_factory, rows):
    path = tmp_path_factory.mktemp("h") / "r.sqlite"
    first: dict = {}
    with S.Store(path) as st_:
        for (alg, inst, eps, seed), ratio in rows:
            inserted = st_.add_trial(result(algorithm=alg, instance=inst, epsilon=eps, seed=seed, ratio=ratio))
            assert inserted == ((alg, inst, eps, seed) not in first)
            first.setdefault((alg, inst, eps, seed), ratio)
    df = S.read_trials(path)
    got = {(a, i, e, s): r for a, i, e, s, r in zip(df.algorithm, df.instance, df.epsilon, df.seed, df.ratio)}
    assert got == first and len(df) == len(first)
