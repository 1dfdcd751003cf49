import numpy as np
import pandas as pd

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
    s = summarize(pd.DataFrame(rows)).set_index(["group", "mechanism"])
    assert s.loc[("Ind", "A"), "optimal_rate"] == 0.5 and s.loc[("Ind", "B"), "optimal_rate"] == 0.5
    assert s.loc[("Ind", "A"), "average_rank"] == 1.5 and s.loc[("Ind", "C"), "average_rank"] == 3.0
    # a mechanism with no result in a combination ranks last there
    assert s.loc[("F1", "C"), "average_rank"] == 1.0 and s.loc[("F1", "A"), "average_rank"] == 3.0
    assert s.loc[("GT", "C"), "combinations"] == 3
    assert np.isclose(s.loc[("GT", "A"), "average_rank"], (1 + 2 + 3) / 3)


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
