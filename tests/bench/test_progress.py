"""The progress estimate counts the running trials against their limit, and says when the run waits on one."""

from __future__ import annotations

import math

import pytest

from dpstats.bench import runner as R
from dpstats.bench.progress import seconds_left

P = "tests.plugins_hostile:"


def test_seconds_left_counts_a_slow_running_trial_to_its_limit():
    # 90 trials in 90 s on 2 workers: 2 s a trial. Two run: one 1 s old (1 s to go), one 40 s old,
    # slow, so up to 60 - 40 = 20 s to go; 8 queued. Spread: (8 * 2 + 1 + 20) / 2 = 18.5; the slow one: 20.
    assert seconds_left(90.0, 90, 100, [1.0, 40.0], 60.0, 2) == pytest.approx(20.0)
    # the rate alone said 10 s: 90 s for 90 trials, 10 to go
    assert seconds_left(90.0, 90, 100, [], 60.0, 2) == pytest.approx(8.0 * 10 / 8)
    # young running trials only: the work spread over the workers
    assert seconds_left(90.0, 90, 100, [0.5, 1.5], 60.0, 2) == pytest.approx((8 * 2 + 1.5 + 0.5) / 2)
    assert math.isinf(seconds_left(5.0, 0, 10, [5.0], 60.0, 2))


def test_the_run_says_when_it_waits_on_a_slow_trial(mroz_corpus, tmp_path):
    lines: list[str] = []
    cfg = R.BenchConfig(corpus=str(mroz_corpus), results=str(tmp_path / "r.sqlite"),
                        algorithms=[P + "NoisyMean", P + "SleepForever"], epsilons=[1.0], trials=1, workers=2,
                        time_limit=4.0, progress=False)
    summary = R.run_bench(cfg, log=lines.append)
    assert summary.status == "complete"
    waits = [ln for ln in lines if "waiting on" in ln]
    assert len(waits) == 1, lines
    assert "of the 4 s limit" in waits[0] and "running trial" in waits[0]
