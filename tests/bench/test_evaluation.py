"""Tests of dpstats.bench.evaluation and dpstats.bench.leaderboard: success rates, tau@50, ranking, slices."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dpstats.bench import evaluation as ev
from dpstats.bench import leaderboard as lbd

INF = math.inf


def make_trials(spec, algorithm="a", interpretation="standard", task="sce", epsilon=1.0):
    """spec: list of (study, instance, n, d, [(status, ratio), ...])."""
    rows = []
    for study, inst, n, d, trials in spec:
        for seed, (status, ratio) in enumerate(trials):
            rows.append({
                "algorithm": algorithm, "interpretation": interpretation, "instance": inst, "study": study,
                "task": task, "epsilon": epsilon, "delta": 1e-6, "seed": seed, "status": status, "error": "",
                "baseline": 1.0, "ratio": ratio, "seconds": 0.01, "peak_mb": 1.0, "n": n, "d": d,
            })
    return pd.DataFrame(rows)


def ref_rate(df: pd.DataFrame, tau: float) -> Fraction:
    """S(tau) straight from the definition, in exact arithmetic."""
    inst = df[["instance", "study"]].drop_duplicates()
    k = inst["study"].nunique()
    m = inst.groupby("study").size()
    total = Fraction(0)
    for i, s in inst.itertuples(index=False):
        t = df[df.instance == i]
        hits = sum(
            1 for st_, r in zip(t.status, t.ratio)
            if st_ == "ok" and r is not None and not (isinstance(r, float) and math.isnan(r)) and math.isfinite(r) and r <= tau
        )
        total += Fraction(hits, len(t) * k * int(m[s]))
    return total


# --------------------------------------------------------------------------
# hand-computed cases
# --------------------------------------------------------------------------


def test_study_weighting_not_instance_weighting():
    # study s1 has two instances that always succeed at 1, study s2 one that never does
    spec = [
        ("s1", "i1", 100, 2, [("ok", 1.0)] * 4),
        ("s1", "i2", 100, 2, [("ok", 1.0)] * 4),
        ("s2", "i3", 100, 2, [("error", INF)] * 4),
    ]
    df = make_trials(spec)
    lb = lbd.leaderboard(df)
    row = lb[lb.slice == "all"].iloc[0]
    # instance weighting would give 2/3 and tau50 = 1; study weighting gives exactly 1/2
    assert row.reaches == 0.5
    assert row.tau50 == 1.0
    assert row.instances == 3 and row.studies == 2


def test_exact_half_is_reached_despite_float_sums():
    # 3 studies x 1 instance x 10 trials: each trial weighs 1/30; 15 successes = 1/2 exactly,
    # which adding 1/30 fifteen times in floating point misses
    assert sum([1 / 30] * 15) < 0.5
    ratios = iter(np.linspace(0.1, 3.0, 30))
    spec = [(f"s{j}", f"i{j}", 1000, 3, [("ok", float(next(ratios))) for _ in range(10)]) for j in range(3)]
    df = make_trials(spec)
    tau50 = lbd.leaderboard(df).query("slice == 'all'").tau50.iloc[0]
    assert tau50 == float(np.linspace(0.1, 3.0, 30)[14])


def test_infinite_tau50_and_its_display():
    # 1/3 of the weight finite: never reaches 50 %
    spec = [
        ("s1", "i1", 100, 2, [("ok", 0.5), ("ok", 2.0)]),
        ("s2", "i2", 100, 2, [("declined", INF), ("timeout", INF)]),
        ("s3", "i3", 100, 2, [("memory", INF), ("ok", float("nan"))]),
    ]
    lb = lbd.leaderboard(make_trials(spec)).query("slice == 'all'")
    row = lb.iloc[0]
    assert math.isinf(row.tau50)
    assert row.reaches == pytest.approx(1 / 3)
    assert lbd.format_tau50(row.tau50, row.reaches) == "∞ (reaches 33%)"
    assert lbd.format_tau50(0.123456, 1.0) == "0.123"
    assert lbd.format_rate(0.4999) == "49%"  # never rounds up to the 50 % it did not reach


def test_failures_fail_at_every_tau_even_with_a_small_ratio():
    spec = [("s1", "i1", 100, 2, [("error", 0.0), ("declined", 0.1), ("ok", 0.2), ("ok", INF)])]
    p = ev.profile(make_trials(spec), "sce", 1.0, "all")
    assert p.tau.tolist() == [0.2]
    assert p.rate.tolist() == [0.25]


def test_ranking_rules_with_infinity():
    def algo(name, trials, interp="standard"):
        return make_trials([("s1", "i1", 100, 2, trials)], algorithm=name, interpretation=interp)

    df = pd.concat([
        algo("fin_small", [("ok", 0.5)] * 4),
        algo("fin_big", [("ok", 2.0)] * 4),
        algo("fin_tie", [("ok", 2.0)] * 4),
        algo("inf_40_fast", [("ok", 1.0)] * 2 + [("error", INF)] * 3),
        algo("inf_40_slow", [("ok", 5.0)] * 2 + [("error", INF)] * 3),
        algo("inf_20", [("ok", 0.01)] + [("error", INF)] * 4),
        algo("inf_0", [("error", INF)] * 4),
        algo("comparison", [("ok", 0.01)] * 4, interp="data-bounds"),
    ])
    lb = lbd.leaderboard(df).query("slice == 'all'")
    ranks = dict(zip(lb.algorithm, lb["rank"]))
    assert ranks["fin_small"] == 1
    assert ranks["fin_big"] == ranks["fin_tie"] == 2
    assert ranks["inf_40_fast"] == 4
    assert ranks["inf_40_slow"] == 5
    assert ranks["inf_20"] == 6
    assert ranks["inf_0"] == 7
    assert pd.isna(ranks["comparison"])
    # ranked algorithms come first, in rank order; the comparison last
    assert lb.algorithm.tolist()[-1] == "comparison"
    assert lb["rank"].dropna().tolist() == sorted(lb["rank"].dropna().tolist())


def test_slices_counts_and_mean_slices():
    spec = [
        ("s1", "i_small", 500, 2, [("ok", 1.0)] * 3),      # d<=10, n/d>100
        ("s1", "i_wide", 1500, 15, [("ok", 3.0)] * 3),     # d>10, n/d=100 (<=100)
        ("s2", "i_tall", 5000, 20, [("ok", 0.5)] * 3),     # d>10, n/d>100
    ]
    lb = lbd.leaderboard(make_trials(spec))
    got = {r.slice: (r.instances, r.studies, r.tau50) for r in lb.itertuples()}
    assert got["all"][:2] == (3, 2)
    assert got["d<=10"] == (1, 1, 1.0)
    assert got["d>10"][:2] == (2, 2)
    # in slice d>10 the studies s1 (i_wide, 3.0) and s2 (i_tall, 0.5) weigh 1/2 each
    assert got["d>10"][2] == 0.5
    assert got["n/d<=100"] == (1, 1, 3.0)
    assert got["n/d>100"][:2] == (2, 2)
    mean = lbd.leaderboard(make_trials(spec, task="mean"))
    assert list(mean.slice) == ["all", "n/d<=100", "n/d>100"]
    assert ev.slices_for("mean") == ("all", "n/d<=100", "n/d>100")


def test_empty_slice_is_left_out():
    spec = [("s1", "i1", 50, 2, [("ok", 1.0)])]
    lb = lbd.leaderboard(make_trials(spec))
    assert "d>10" not in set(lb.slice)
    assert "n/d>100" not in set(lb.slice)


def test_missing_instance_counts_as_failure():
    a = make_trials([("s1", "i1", 100, 2, [("ok", 1.0)]), ("s2", "i2", 100, 2, [("ok", 1.0)])], algorithm="a")
    b = make_trials([("s1", "i1", 100, 2, [("ok", 1.0)])], algorithm="b")
    lb = lbd.leaderboard(pd.concat([a, b])).query("slice == 'all'").set_index("algorithm")
    assert lb.loc["a", "reaches"] == 1.0
    assert lb.loc["b", "reaches"] == 0.5


def test_separate_per_task_epsilon_and_corpus():
    a = make_trials([("s1", "i1", 100, 2, [("ok", 1.0)])], epsilon=1.0)
    b = make_trials([("s1", "i1", 100, 2, [("ok", 4.0)])], epsilon=3.0)
    lb = lbd.leaderboard(pd.concat([a, b])).query("slice == 'all'")
    assert dict(zip(lb.epsilon, lb.tau50)) == {1.0: 1.0, 3.0: 4.0}
    c = pd.concat([a.assign(corpus="public"), a.assign(corpus="withheld", ratio=2.0)])
    lbc = lbd.leaderboard(c).query("slice == 'all'")
    assert list(lbc.columns) == list(lbd.LEADERBOARD_COLUMNS) + ["corpus"]
    assert dict(zip(lbc.corpus, lbc.tau50)) == {"public": 1.0, "withheld": 2.0}
    with pytest.raises(ValueError, match="several corpora"):
        ev.profile(c, "sce", 1.0)
    assert ev.profile(c, "sce", 1.0, corpus="withheld").tau.tolist() == [2.0]
    # an instance id may mean different data in two corpora, never within one
    lbd.leaderboard(pd.concat([a.assign(corpus="x"), a.assign(corpus="y", n=5000)]))
    with pytest.raises(ValueError, match="several values of 'n'"):
        lbd.leaderboard(pd.concat([a.assign(corpus="x"), a.assign(corpus="x", n=5000)]))


def test_input_validation():
    df = make_trials([("s1", "i1", 100, 2, [("ok", 1.0)])])
    with pytest.raises(ValueError, match="status"):
        lbd.leaderboard(df.assign(status="crashed"))
    with pytest.raises(ValueError, match="lacks column"):
        lbd.leaderboard(df.drop(columns="study"))
    with pytest.raises(ValueError, match="non-negative"):
        lbd.leaderboard(df.assign(ratio=-1.0))
    two = pd.concat([df, df.assign(study="other")])
    with pytest.raises(ValueError, match="study"):
        lbd.leaderboard(two)
    with pytest.raises(ValueError, match="slice"):
        ev.profile(make_trials([("s1", "i1", 100, 2, [("ok", 1.0)])], task="mean"), "mean", 1.0, "d<=10")


def test_verify_leaderboard_roundtrip_and_tampering(tmp_path):
    spec = [
        ("s1", "i1", 100, 2, [("ok", 0.3), ("ok", 1.7), ("error", INF)]),
        ("s2", "i2", 5000, 20, [("ok", 0.9), ("declined", INF), ("ok", 2.5)]),
    ]
    df = pd.concat([make_trials(spec, algorithm="a"),
                    make_trials(spec, algorithm="b", interpretation="data-bounds").assign(ratio=lambda x: x.ratio * 2),
                    make_trials([(s, i, n, d, [("error", INF)] * 3) for s, i, n, d, _ in spec], algorithm="c")])
    tp, lp = tmp_path / "trials.csv", tmp_path / "leaderboard.csv"
    df.to_csv(tp, index=False)
    lbd.leaderboard(df).to_csv(lp, index=False)
    text = lp.read_text()
    assert ",inf," in text  # algorithm c
    assert lbd.verify_leaderboard(tp, lp) == []
    bad = lbd.read_leaderboard(lp)
    bad.loc[0, "tau50"] = bad.loc[0, "tau50"] * 1.01
    bad.loc[1, "rank"] = pd.NA
    problems = lbd.verify_leaderboard(tp, bad)
    assert len(problems) == 2
    assert lbd.verify_leaderboard(tp, bad.iloc[1:]) != []


def test_tail_columns_by_hand(tmp_path):
    # K = 2 studies; s1 has i1 (4 trials) and i2 (2 trials), s2 has i3 (2 trials), so a trial of
    # i1 weighs 1/16, of i2 1/8 and of i3 1/4. A ratio of exactly 10 (100) is not above 10 (100);
    # failures are above every threshold.
    spec = [
        ("s1", "i1", 100, 2, [("ok", 0.5), ("ok", 20.0), ("ok", 200.0), ("error", INF)]),
        ("s1", "i2", 100, 2, [("ok", 10.0), ("ok", 50.0)]),
        ("s2", "i3", 100, 2, [("ok", 100.0), ("timeout", INF)]),
    ]
    df = pd.concat([make_trials(spec), make_trials(spec, algorithm="b").assign(ratio=0.1, status="ok")])
    lb = lbd.leaderboard(df).set_index(["slice", "algorithm"])
    # > 10: i1 {20, 200, error} 3/16, i2 {50} 1/8, i3 {100, timeout} 1/2 -> 13/16
    assert lb.loc[("all", "a"), "tail10"] == 13 / 16
    # > 100: i1 {200, error} 2/16, i2 none, i3 {timeout} 1/4 -> 3/8
    assert lb.loc[("all", "a"), "tail100"] == 3 / 8
    assert lb.loc[("all", "b"), ["tail10", "tail100"]].tolist() == [0.0, 0.0]
    assert list(lbd.leaderboard(df).columns) == list(lbd.LEADERBOARD_COLUMNS)
    assert lbd.LEADERBOARD_COLUMNS[-3:] == ("tail10", "tail100", "fallback")
    # the tails are 1 - S(10) and 1 - S(100) of the exact profile
    rates = ev.success_rates(df, [10, 100], "sce", 1.0)
    assert rates.loc["a"].tolist() == [3 / 16, 5 / 8]
    # verify_leaderboard checks them
    tp = tmp_path / "trials.csv"
    df.to_csv(tp, index=False)
    board = lbd.leaderboard(df)
    assert lbd.verify_leaderboard(tp, board) == []
    board.loc[board.algorithm == "a", "tail100"] = 0.25
    problems = lbd.verify_leaderboard(tp, board)
    assert problems and all("tail100" in p for p in problems)
    assert "columns differ" in lbd.verify_leaderboard(tp, board.drop(columns="tail10"))[0]


def test_format_tail_rounds_up():
    assert lbd.format_tail(0.0) == "0%"
    assert lbd.format_tail(0.001) == "1%"
    assert lbd.format_tail(13 / 16) == "82%"
    assert lbd.format_tail(0.5) == "50%"
    assert lbd.format_tail(1.0) == "100%"


def test_success_rates_and_instance_success():
    spec = [("s1", "i1", 100, 2, [("ok", 0.5), ("ok", 1.5)]), ("s2", "i2", 100, 2, [("ok", 1.0), ("error", INF)])]
    df = make_trials(spec)
    sr = ev.success_rates(df, [0.1, 0.5, 1.0, 2.0, INF], "sce", 1.0)
    assert sr.loc["a"].tolist() == [0.0, 0.25, 0.5, 0.75, 0.75]
    inst = ev.instance_success(df, 1.0).set_index("instance")
    assert inst.loc["i1", "success"] == 0.5 and inst.loc["i2", "trials"] == 2
    assert ev.tau_at(df, 0.75, "sce", 1.0)["a"] == 1.5
    assert ev.tau_at(df, 0.25, "sce", 1.0)["a"] == 0.5
    assert ev.tau_at(df, 0.3, "sce", 1.0)["a"] == 1.0
    assert math.isinf(ev.tau_at(df, 0.8, "sce", 1.0)["a"])


# --------------------------------------------------------------------------
# properties
# --------------------------------------------------------------------------

RATIOS = st.one_of(st.sampled_from([0.0, 0.5, 1.0, 2.0, INF, float("nan")]), st.floats(0, 50, allow_nan=False))
TRIAL = st.tuples(st.sampled_from(["ok", "ok", "ok", "declined", "error", "timeout", "memory"]), RATIOS)


@st.composite
def corpora(draw, max_algorithms=3):
    n_studies = draw(st.integers(1, 4))
    spec = []
    for s in range(n_studies):
        for j in range(draw(st.integers(1, 3))):
            n = draw(st.sampled_from([50, 500, 1000, 5000]))
            d = draw(st.sampled_from([1, 5, 10, 11, 40]))
            spec.append((f"s{s}", f"s{s}_i{j}", n, d))
    frames = []
    for a in range(draw(st.integers(1, max_algorithms))):
        rows = [(s, i, n, d, draw(st.lists(TRIAL, min_size=1, max_size=6))) for s, i, n, d in spec]
        interp = draw(st.sampled_from(["standard", "standard", "data-bounds"]))
        frames.append(make_trials(rows, algorithm=f"alg{a}", interpretation=interp))
    return pd.concat(frames, ignore_index=True)


SETTINGS = settings(max_examples=40, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@SETTINGS
@given(corpora(max_algorithms=1), st.floats(0, 60, allow_nan=False))
def test_profile_matches_the_definition(df, tau):
    prep = ev.prepare(df)
    p = ev.step_profile(prep, ev._instance_set(prep))
    assert p.rate(tau) == ref_rate(df, tau)
    for t in p.taus:
        assert p.rate(float(t)) == ref_rate(df, float(t))
    assert p.reach == ref_rate(df, INF)
    # a step function: non-decreasing, in [0, 1], jumps only at observed finite ratios
    rates = p.rates
    assert np.all(np.diff(rates) > 0)
    assert 0 <= rates.min(initial=0) and rates.max(initial=0) <= 1
    finite = prep.loc[np.isfinite(prep.score), "score"]
    assert set(p.taus) == set(finite)


@SETTINGS
@given(corpora(max_algorithms=1))
def test_tau50_is_the_smallest_tau_reaching_half(df):
    lb = lbd.leaderboard(df).query("slice == 'all'")
    tau50 = lb.tau50.iloc[0]
    if math.isinf(tau50):
        assert ref_rate(df, INF) < Fraction(1, 2)
        assert lb.reaches.iloc[0] == float(ref_rate(df, INF))
    else:
        assert ref_rate(df, tau50) >= Fraction(1, 2)
        below = [r for r in ev.prepare(df).score if r < tau50]
        if below:
            assert ref_rate(df, max(below)) < Fraction(1, 2)
        # tau50 is an observed ratio of a successful trial
        assert tau50 in set(ev.prepare(df).score)


@SETTINGS
@given(corpora(max_algorithms=1), st.integers(2, 3))
def test_replicating_trials_or_instances_changes_nothing(df, k):
    base = lbd.leaderboard(df)
    # every trial k times: the instance success rates are unchanged
    rep = lbd.leaderboard(pd.concat([df] * k, ignore_index=True))
    pd.testing.assert_frame_equal(base[["tau50", "reaches"]], rep[["tau50", "reaches"]])
    # a study whose instances are all copied keeps its weight
    copy = df.assign(instance=df.instance + "_copy")
    both = lbd.leaderboard(pd.concat([df, copy], ignore_index=True))
    pd.testing.assert_frame_equal(base[["tau50", "reaches"]], both[["tau50", "reaches"]], check_exact=True)
    assert (both.instances == 2 * base.instances).all()


@SETTINGS
@given(corpora(max_algorithms=1), st.data())
def test_worse_trials_never_improve_tau50(df, data):
    i = data.draw(st.integers(0, len(df) - 1))
    worse = df.copy()
    if df.loc[i, "status"] == "ok" and data.draw(st.booleans()):
        worse.loc[i, "ratio"] = float(df.loc[i, "ratio"]) * 2 + 1   # a larger error
    else:
        worse.loc[i, "status"] = data.draw(st.sampled_from(ev.FAILURE_STATUSES))
    a = lbd.leaderboard(df).query("slice == 'all'").iloc[0]
    b = lbd.leaderboard(worse).query("slice == 'all'").iloc[0]
    assert b.tau50 >= a.tau50
    assert b.reaches <= a.reaches


@SETTINGS
@given(corpora(max_algorithms=4))
def test_ranking_follows_the_rules(df):
    lb = lbd.leaderboard(df)
    prep = ev.prepare(df)
    for (task, eps, sl), g in lb.groupby(["task", "epsilon", "slice"], sort=False):
        std = g[g.interpretation == "standard"]
        assert g[g.interpretation != "standard"]["rank"].isna().all()
        assert std["rank"].notna().all()
        if std.empty:
            continue
        assert std["rank"].min() == 1
        sub = prep[ev.slice_mask(prep.n, prep.d, sl)]
        keys = {}
        for r in std.itertuples():
            p = ev.step_profile(sub[sub.algorithm == r.algorithm], ev._instance_set(sub))
            keys[r.algorithm] = lbd.rank_key(r.tau50, r.reaches, p.reach_tau)
        for a in std.itertuples():
            for b in std.itertuples():
                ka, kb = keys[a.algorithm], keys[b.algorithm]
                # finite tau50 always ahead of infinite
                if math.isfinite(a.tau50) and math.isinf(b.tau50):
                    assert a.rank < b.rank
                if math.isinf(a.tau50) and math.isinf(b.tau50) and a.reaches > b.reaches:
                    assert a.rank < b.rank
                if math.isfinite(a.tau50) and math.isfinite(b.tau50) and a.tau50 < b.tau50:
                    assert a.rank < b.rank
                assert (a.rank < b.rank) == (ka < kb)
                assert (a.rank == b.rank) == (ka == kb)


@settings(max_examples=100, deadline=None, derandomize=True)
@given(st.lists(st.tuples(st.sampled_from([0.5, 1.0, 2.0, INF]), st.sampled_from([0.0, 0.2, 0.4, 0.6]),
                          st.sampled_from([0.3, 1.0, 7.0, INF])), min_size=1, max_size=8))
def test_competition_ranks(entries):
    keys = [lbd.rank_key(t, r, rt) for t, r, rt in entries]
    ranks = lbd.competition_ranks(keys)
    perm = list(reversed(range(len(keys))))
    assert [ranks[i] for i in perm] == lbd.competition_ranks([keys[i] for i in perm])
    for i, ki in enumerate(keys):
        assert ranks[i] == 1 + sum(kj < ki for kj in keys)
        for j, kj in enumerate(keys):
            if math.isfinite(entries[i][0]) and math.isinf(entries[j][0]):
                assert ranks[i] < ranks[j]
            if math.isinf(entries[i][0]) and math.isinf(entries[j][0]) and entries[i][1] > entries[j][1]:
                assert ranks[i] < ranks[j]
