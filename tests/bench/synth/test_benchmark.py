import numpy as np
import pandas as pd
import pytest

from dpstats.synth import SYNTHESIZERS
from dpstats.synth.base import Synthesizer
from dpstats.bench.synth.benchmark import SynthTrial, run_supervised, summarize
from dpstats.synth.mechanisms.independent import Independent


def test_trial_over_the_time_limit_is_a_timeout(bank):
    df, schema = bank
    big = pd.concat([df] * 30, ignore_index=True)
    out = run_supervised(big, schema, SynthTrial("bank", "independent", 1.0, 1e-9, 0), time_limit=0.05)
    assert out.status == "timeout" and out.frame is None


class Hog(Synthesizer):
    """Allocates 400 MB and then behaves like Independent (to test the memory limit)."""

    name = "hog"

    def _synthesize(self, data, accountant, rng, n_rows):
        block = np.ones(50_000_000)            # 400 MB
        out = Independent()._synthesize(data, accountant, rng, n_rows)
        return out if block[0] else out


def test_trial_over_the_memory_limit_is_reported(bank, monkeypatch):
    df, schema = bank
    monkeypatch.setitem(SYNTHESIZERS, "hog", f"{__name__}:Hog")
    out = run_supervised(df, schema, SynthTrial("bank", "hog", 1.0, 1e-9, 0), memory_mb=100)
    assert out.status == "memory" and out.frame is None
    ok = run_supervised(df, schema, SynthTrial("bank", "hog", 1.0, 1e-9, 0), memory_mb=1000)
    assert ok.status == "ok"


def test_trial_result_is_seeded(bank):
    df, schema = bank
    t = SynthTrial("bank", "independent", 1.0, 1e-9, 7)
    a, b = run_supervised(df, schema, t), run_supervised(df, schema, t)
    assert a.status == "ok" and a.frame.equals(b.frame)


def test_summary_optimal_rate_and_average_rank():
    rows = []
    for ds in ("d1", "d2"):
        for m, v in (("A", 0.9), ("B", 0.8 if ds == "d1" else 0.95), ("C", 0.1)):
            for t in range(2):
                rows.append({"dataset": ds, "mechanism": m, "epsilon": 1.0, "trial": t, "status": "ok",
                             "metric": "ind", "value": v})
    rows.append({"dataset": "d1", "mechanism": "C", "epsilon": 1.0, "trial": 0, "status": "ok", "metric": "f1",
                 "value": 0.7})
    # B timed out on d2 (its only trial there), A failed once on d1 and still has a result there
    rows = [r for r in rows if not (r["mechanism"] == "B" and r["dataset"] == "d2")]
    rows.append({"dataset": "d2", "mechanism": "B", "epsilon": 1.0, "trial": 0, "status": "timeout",
                 "metric": "", "value": np.nan, "seconds": 60.0})
    rows.append({"dataset": "d1", "mechanism": "A", "epsilon": 1.0, "trial": 2, "status": "error",
                 "metric": "", "value": np.nan, "seconds": 0.5})
    s = summarize(pd.DataFrame(rows)).set_index(["group", "mechanism"])
    # d1: A 0.9 > B 0.8 > C 0.1; d2: A 0.9 > C 0.1, B not ranked
    assert s.loc[("Ind", "A"), "optimal_rate"] == 1.0 and s.loc[("Ind", "B"), "optimal_rate"] == 0.0
    assert s.loc[("Ind", "A"), "average_rank"] == 1.0 and s.loc[("Ind", "C"), "average_rank"] == 2.5
    b = s.loc[("Ind", "B")]
    assert (b.average_rank, b.ranked, b.missing) == (2.0, 1, 1)
    assert s.loc[("Ind", "B"), "timeouts"] == 1 and s.loc[("Ind", "A"), "failures"] == 1
    # only C has a result for f1 on d1: the others are missing there, not ranked last
    assert s.loc[("F1", "C"), "average_rank"] == 1.0 and np.isnan(s.loc[("F1", "A"), "average_rank"])
    assert (s.loc[("F1", "A"), "ranked"], s.loc[("F1", "A"), "missing"]) == (0, 1)
    assert s.loc[("GT", "C"), "combinations"] == 3
    assert np.isclose(s.loc[("GT", "A"), "average_rank"], 1.0) and s.loc[("GT", "A"), "missing"] == 1


class Sleepy(Synthesizer):
    """Sleeps past any short limit (stands in for a GAN that needs longer than the protocol gives)."""

    name = "sleepy"

    def _synthesize(self, data, accountant, rng, n_rows):
        import time

        time.sleep(30)
        return Independent()._synthesize(data, accountant, rng, n_rows)


def test_benchmark_trials_run_in_the_worker_pool_a_slow_one_is_a_timeout(bank, monkeypatch):
    from dpstats.bench.synth.benchmark import run_benchmark

    df, schema = bank
    df = df.head(500)
    monkeypatch.setitem(SYNTHESIZERS, "sleepy", f"{__name__}:Sleepy")
    seen = []
    res, frames = run_benchmark([("bank", df, schema)], ["sleepy", "independent"], [1.0], 2, time_limit=2.0,
                                progress=seen.append, keep_frames=True)
    assert len(seen) == 4
    status = res.groupby("mechanism")["status"].agg(set).to_dict()
    assert status == {"sleepy": {"timeout"}, "independent": {"ok"}}
    slow = res[res["mechanism"] == "sleepy"]
    assert len(slow) == 2 and (slow["metric"] == "").all() and (slow["seconds"] < 10).all()
    assert "exceeded 2 s" in slow["message"].iloc[0] or "time" in slow["message"].iloc[0].lower()
    # rows in plan order whatever the completion order; the figures' frame is the seed-0 one
    assert list(res["mechanism"].drop_duplicates()) == ["sleepy", "independent"]
    assert list(res[res["mechanism"] == "independent"]["trial"].drop_duplicates()) == [0, 1]
    assert set(frames) == {("bank", "independent", 1.0)}


#: hyperparameters small enough for a few seconds per mechanism on a few hundred rows
SMALL = {"aim": {"rounds": 8, "iters": 50, "final_iters": 50}, "mwem_pgm": {"iters": 50, "final_iters": 50},
         "fem": {"rounds": 3, "samples": 2}, "rap": {"epochs": 2, "top_q": 4, "n_prime": 100, "iterations": 20}}


def test_benchmark_gives_every_workload_mechanism_the_schema_label(bank):
    """A real run: each workload mechanism's own workload is the paper's, every marginal holding the label."""
    from dpstats.bench.synth.benchmark import run_benchmark
    from dpstats.synth.workload import paper_workload

    df, schema = bank
    cols = ["age", "job", "marital", "housing", "y"]
    schema = schema.select(cols)
    assert schema.label == "y"
    seen = []
    res, _ = run_benchmark([("bank", df[cols].head(400), schema)], list(SMALL), [1.0], 1, params=SMALL,
                           progress=seen.append, time_limit=120)
    assert (res["status"] == "ok").all(), res[["mechanism", "message"]]
    used = {o.trial.mechanism: o.details["workload"] for o in seen}
    assert set(used) == set(SMALL)
    for mech, workload in used.items():
        assert workload and all("y" in q for q in workload), (mech, workload)
        assert list(workload) == paper_workload(cols, "y"), mech
    details = {o.trial.mechanism: o.details for o in seen}        # the run's hyperparameters were used
    assert details["aim"]["rounds_run"] <= 8 and details["rap"]["epochs"] == 2
    assert len(details["mwem_pgm"]["selected"]) == len(cols) and details["fem"]["rounds"] == 3


def test_make_synthesizer_passes_the_label_to_every_mechanism_that_takes_one(bank):
    from dpstats.bench.synth.benchmark import make_synthesizer
    from dpstats.synth import get_synthesizer

    _, schema = bank
    takes = [m for m in SYNTHESIZERS if "label" in get_synthesizer(m).defaults]
    assert {"aim", "mwem_pgm", "fem", "rap"} <= set(takes)
    for m in takes:
        assert make_synthesizer(m, schema).params["label"] == "y"
        assert make_synthesizer(m, schema.with_label(None)).params["label"] is None


def test_hyperparameters_are_checked_naming_the_valid_ones(bank):
    from dpstats.bench.synth.benchmark import check_params, make_synthesizer

    _, schema = bank
    assert make_synthesizer("mst", schema, {"iters": 5}).params["iters"] == 5
    with pytest.raises(KeyError, match=r"unknown mechanism 'nope' .*known: independent, mst"):
        check_params({"nope": {"iters": 1}})
    with pytest.raises(KeyError, match=r"unknown hyperparameter 'itres' of mst; known: .*iters"):
        check_params({"mst": {"itres": 1}})
    with pytest.raises(KeyError, match=r"the label of aim is the schema.s"):
        check_params({"aim": {"label": "y"}})
