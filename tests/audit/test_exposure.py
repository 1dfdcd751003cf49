"""Canary exposure: definition, ties, extrapolation, random-guessing baselines (checked by simulation)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpstats.audit.exposure import (
    ASYMPTOTIC_BASELINES,
    exposure,
    extrapolated_exposure,
    random_guessing_baseline,
    ranks,
    summarize_exposure,
)


def test_exposure_definition():
    refs = np.arange(1.0, 9.0)  # N = 8
    e = exposure([0.0, 4.5, 100.0], refs)
    # rank 1 -> log2 8 = 3; 4 references below 4.5 -> rank 5; all below -> rank 9
    assert e.tolist() == pytest.approx([3.0, 3 - math.log2(5), 3 - math.log2(9)])


def test_ties_conventions_are_ordered_and_documented():
    refs = np.array([1.0, 2.0, 2.0, 2.0, 3.0])
    r = {t: ranks([2.0], refs, ties=t, rng=np.random.default_rng(0))[0] for t in ("min", "average", "max", "random")}
    assert r["min"] == 2.0 and r["max"] == 5.0 and r["average"] == 3.5
    assert r["min"] <= r["random"] <= r["max"]
    with pytest.raises(ValueError, match="ties"):
        ranks([1.0], refs, ties="dense")
    with pytest.raises(ValueError, match="rng"):
        ranks([1.0], refs, ties="random")


def test_constant_scores_look_like_random_guessing():
    # an uninformative (constant) loss: mid-rank gives exposure ~ 1, random tie-breaking the uniform rank
    N = 4096
    e = exposure(np.zeros(2000), np.zeros(N), ties="average")
    assert np.allclose(e, math.log2(N) - math.log2(1 + N / 2))
    er = exposure(np.zeros(20000), np.zeros(N), ties="random", rng=np.random.default_rng(1))
    assert abs(er.mean() - random_guessing_baseline(N, "mean")) < 0.03
    assert abs(np.median(er) - 1.0) < 0.05


@pytest.mark.parametrize("N", [1, 7, 100, 2**20])
def test_exact_mean_matches_the_sum(N):
    i = np.arange(1, N + 2)
    direct = np.mean(math.log2(N) - np.log2(i))
    assert random_guessing_baseline(N, "mean") == pytest.approx(direct, rel=1e-9, abs=1e-9)


def test_asymptotic_baselines():
    assert ASYMPTOTIC_BASELINES["mean"] == pytest.approx(1 / math.log(2))
    N = 2**24
    assert random_guessing_baseline(N, "mean") == pytest.approx(1 / math.log(2), abs=1e-5)
    assert random_guessing_baseline(N, "median") == pytest.approx(1.0, abs=1e-5)
    assert random_guessing_baseline(N, "p75") == pytest.approx(2.0, abs=1e-5)
    # finite m converges too
    assert random_guessing_baseline(2**18, "median", n_canaries=4001) == pytest.approx(1.0, abs=2e-3)
    assert random_guessing_baseline(2**18, "p75", n_canaries=4000) == pytest.approx(2.0, abs=3e-3)


@pytest.mark.parametrize("N,m", [(50, 20), (200, 31)])
def test_exact_finite_baselines_by_simulation(N, m):
    rng = np.random.default_rng(2026 + N)
    reps = 2000
    shared = np.empty((reps, 3))
    indep = np.empty((reps, 2))
    for k in range(reps):
        e = exposure(rng.random(m), rng.random(N))  # canaries ranked against the same references
        shared[k] = e.mean(), np.median(e), np.quantile(e, 0.75)
        r = rng.integers(1, N + 2, size=m)  # independent uniform ranks
        ei = math.log2(N) - np.log2(r)
        indep[k] = np.median(ei), np.quantile(ei, 0.75)
    se = shared.std(axis=0) / math.sqrt(reps)
    exact = [random_guessing_baseline(N, "mean"), random_guessing_baseline(N, "median", m),
             random_guessing_baseline(N, "p75", m)]
    assert np.all(np.abs(shared.mean(axis=0) - exact) < 4 * se)
    se_i = indep.std(axis=0) / math.sqrt(reps)
    exact_i = [random_guessing_baseline(N, "median", m, shared_references=False),
               random_guessing_baseline(N, "p75", m, shared_references=False)]
    assert np.all(np.abs(indep.mean(axis=0) - exact_i) < 4 * se_i)
    if N == 50:  # the two models differ measurably at small N (so the test can tell them apart)
        assert abs(exact[1] - exact_i[0]) > 0.01


def test_summary_reports_baselines_beside_aggregates():
    rng = np.random.default_rng(3)
    e = exposure(rng.random(101), rng.random(1000))
    s = summarize_exposure(e, 1000)
    assert s.n_canaries == 101 and s.median == pytest.approx(np.median(e))
    assert s.baseline_mean == pytest.approx(random_guessing_baseline(1000, "mean"))
    assert 0.9 < s.baseline_median < 1.1 and 1.8 < s.baseline_p75 < 2.1


def test_extrapolated_exposure_is_model_based():
    rng = np.random.default_rng(4)
    refs = rng.normal(size=5000)
    # a canary 6 sd below the mean: beyond what 5000 references can rank (log2 5000 ~ 12.3)
    e = extrapolated_exposure([-6.0], refs)[0]
    assert e > math.log2(5000)
    assert e == pytest.approx(-math.log2(0.5 * math.erfc(6 / math.sqrt(2))), rel=0.05)
    assert extrapolated_exposure([-6.0], refs, distribution="skewnorm")[0] > 20
    with pytest.raises(ValueError, match="distribution"):
        extrapolated_exposure([0.0], refs, distribution="t")
    with pytest.raises(ValueError, match="not all equal"):
        extrapolated_exposure([0.0], np.zeros(10))


def test_bad_input():
    with pytest.raises(ValueError, match="empty"):
        exposure([], [1.0])
    with pytest.raises(ValueError, match="NaN"):
        exposure([np.nan], [1.0])
    with pytest.raises(ValueError, match="statistic"):
        random_guessing_baseline(10, "mode")
    with pytest.raises(ValueError, match="n_references"):
        random_guessing_baseline(0)
