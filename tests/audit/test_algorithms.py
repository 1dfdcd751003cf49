"""Auditing algorithms: honest originals are not flagged, broken variants (tests/audit_broken.py) are.

Every audit is seeded (``seed=0`` unless stated) and small (a few thousand
releases on a generated data set with n = 1000), so that the file runs in
about a minute on two cores.
"""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

from dpstats.audit import power as audit_power_mod
from dpstats.audit.attack import DECLINED, ERROR, RELEASED, Runs, fit_statistic
from dpstats.audit.neighbours import generated
from dpstats.audit.power import min_trials
from dpstats.audit.run import audit
from tests import audit_broken as broken


def _flagged(r):
    return r.violation and r.epsilon_lower > r.epsilon_claimed or any("ledger" in x for x in r.reasons)


# --------------------------------------------------------------------------
# neighbours and statistics
# --------------------------------------------------------------------------


def test_generated_neighbours_differ_in_one_row_at_the_bounds():
    for design in ("mirror", "inside"):
        nb = generated("sce", n=300, design=design)
        diff = np.flatnonzero(np.any(nb.base.X != nb.neighbour.X, axis=1) | (nb.base.y != nb.neighbour.y))
        assert diff.tolist() == [nb.row]
        x = nb.neighbour.X[nb.row]
        assert x[0] == 1.0 and np.all(np.abs(x[1:]) == 1.0) and abs(nb.neighbour.y[nb.row]) == 1.0
        others = np.delete(nb.base.X, nb.row, axis=0)
        assert np.all(np.abs(others[:, 1:]) <= 0.5)  # the data fill only the middle of the public box
        if design == "mirror":
            assert np.array_equal(nb.base.X[nb.row][1:], -x[1:]) and nb.base.y[nb.row] == -nb.neighbour.y[nb.row]
    beyond = generated("mean", n=100, mode="beyond")
    assert np.all(np.abs(beyond.canary_x) == 2.0)
    with pytest.raises(ValueError, match="design"):
        generated("mean", design="corner")


def test_generated_on_a_grid_has_few_distinct_rows():
    nb = generated("mean", n=5000, columns=1, levels=5, design="inside")
    assert set(np.unique(np.delete(nb.base.X, nb.row, axis=0))) <= set(np.linspace(-0.5, 0.5, 5))
    assert np.unique(nb.neighbour.X, axis=0).shape[0] <= 6 and abs(nb.neighbour.X[nb.row, 0]) == 1.0
    lin = generated("linreg", n=2000, levels=3)
    assert np.unique(np.column_stack([lin.base.X, lin.base.y]), axis=0).shape[0] <= 3 * 3 * 3 + 1
    with pytest.raises(ValueError, match="levels"):
        generated("mean", levels=1)


def test_generated_clusters_give_the_canary_a_cluster_of_its_own():
    plain = generated("sce", n=400, design="inside")
    nb = generated("sce", n=400, design="inside", clusters=40)
    assert nb.facts.cluster == "g" and plain.facts.cluster is None and plain.base.clusters is None
    # the rows are those of the same design without clusters
    assert np.array_equal(nb.base.X, plain.base.X) and np.array_equal(nb.neighbour.y, plain.neighbour.y)
    assert set(nb.base.clusters.tolist()) <= set(range(40))
    assert np.flatnonzero(nb.base.clusters != nb.neighbour.clusters).tolist() == [nb.row]
    assert nb.neighbour.clusters[nb.row] == nb.base.clusters.max() + 1
    mirror = generated("mean", n=400, clusters=40)
    assert np.flatnonzero(mirror.base.clusters != mirror.neighbour.clusters).tolist() == [mirror.row]
    with pytest.raises(ValueError, match="clusters"):
        generated("sce", n=400, clusters=401)


def test_declines_are_outputs_of_the_statistic():
    rng = np.random.default_rng(0)
    v_in, v_out = rng.normal(size=(200, 2)), rng.normal(size=(200, 2))
    k_in = np.where(np.arange(200) < 50, DECLINED, RELEASED).astype(np.int8)  # only the canary side declines
    k_out = np.full(200, RELEASED, dtype=np.int8)
    v_in[k_in == DECLINED] = np.nan
    st = fit_statistic(Runs(v_in, k_in), Runs(v_out, k_out), "lda")
    s = st.score(Runs(np.full((2, 2), np.nan), np.array([DECLINED, ERROR], dtype=np.int8)))
    assert s[0] == np.inf and np.isfinite(s[1])


def test_min_trials():
    need = min_trials(1.0, 1e-6, 0.95)
    assert audit_power_mod._perfect_cp(need // 4, 0.05 / 4, 1e-6) > 1.0
    assert audit_power_mod._perfect_cp((need - 8) // 4, 0.05 / 4, 1e-6) <= 1.0
    assert min_trials(5.0, 1e-6, 0.95) > need


# --------------------------------------------------------------------------
# honest originals
# --------------------------------------------------------------------------


@pytest.mark.parametrize("name,task,trials", [("ssp", "linreg", 2000), ("adaptive_clip", "mean", 3000)])
def test_honest_originals_are_not_flagged(name, task, trials):
    r = audit(name, task=task, trials=trials, workers=2)
    assert not r.violation, r.reasons
    assert r.epsilon_lower <= r.epsilon_claimed
    assert r.ledger["units"] and "rho" in r.ledger["units"]
    assert r.ledger["epsilon"] == pytest.approx(1.0, rel=1e-6)
    assert r.errors["count"] == 0
    d = r.to_dict()
    for key in ("algorithm", "epsilon_claimed", "epsilon_lower", "confidence", "trials", "violation"):
        assert key in d
    json.dumps(d, default=float)


# --------------------------------------------------------------------------
# broken variants
# --------------------------------------------------------------------------


@pytest.mark.parametrize("cls,trials,kw", [
    (broken.SSPNoiseDiv10, 2000, {}),                 # noise divided by 10 (linreg, post-processed by a solve)
    (broken.ClipNoiseDiv10, 1000, {}),                # noise divided by 10 (mean)
    (broken.ClipMissingTerm, 4000, {"columns": 12}),  # sensitivity keeps 1 of its 12 terms
    (broken.ClipDataBounds, 2000, {}),                # clipping box read from the data
    (broken.DeclineOnOutlier, 1000, {}),              # declines depending on the raw data
    (broken.FallbackOnOutlier, 1000, {}),             # a fallback decided on the raw data
    (broken.DeclineOnRelativeOutlier, 2500, {}),      # declines on a row far from the others (raw data)
    (broken.BranchOnUnpaidCount, 2500, {}),           # a branch on an unpaid count
    (broken.DeclineOnUnpaidClusterCount, 1000, {}),  # declines on an unpaid count of clusters
    (broken.StdErrorOnOutlier, 2500, {}),             # a standard error chosen on the raw data
])
def test_broken_variants_are_flagged(cls, trials, kw):
    """Each is flagged at epsilon = 1 with the default design search."""
    r = audit(cls, trials=trials, workers=2, **kw)
    assert r.violation, r.summary()
    assert r.epsilon_lower > r.epsilon_claimed
    # the honest ledger is charged: the violation comes from the releases, not from the ledger check
    assert not any("ledger charges" in x for x in r.reasons)


def test_the_cluster_robust_path_of_fwl_score_is_audited():
    """fwl_score's API configuration on clustered rows takes the group jackknife and is not flagged."""
    from dpstats.algorithms import get

    cls = get("sce", "fwl_score")
    nb = generated("sce", n=1000, clusters=200, design="concentrated")
    out = cls(**cls.interval_params).run(nb.neighbour, nb.facts, 1.0, 1e-6, np.random.default_rng(0))
    assert "jackknife over 8 groups of the clusters (g)" in out.details["sampling_error"]
    r = audit("fwl_score[api]", task="sce", trials=1500, clusters=200, workers=2)
    assert not r.violation, r.reasons
    assert r.errors["count"] == 0


def test_a_leak_through_the_standard_error_is_seen_only_when_the_interval_is_scored():
    est_only = audit(broken.StdErrorOnOutlier, trials=1000, design="inside", workers=2)
    assert not est_only.violation
    scored = audit(broken.StdErrorOnOutlier, trials=1000, design="inside", workers=2, score="interval")
    assert scored.violation and scored.epsilon_lower > 1.0, scored.summary()
    assert any("log standard error" in n for n in scored.notes)
    honest = audit("adaptive_whiten[api]", task="mean", trials=1500, workers=2, score="interval")
    assert not honest.violation, honest.reasons


def test_a_fallback_is_an_outcome_and_an_honest_one_is_not_flagged():
    """A fallback decided on the raw data is flagged through its frequency; one decided on the release is not."""
    r = audit(broken.FallbackOnOutlier, trials=1000, workers=2)
    assert r.errors["fallback"] > 0 and "raw data" in next(iter(r.errors["fallbacks"]))
    assert "fallbacks:" in r.summary()
    honest = audit(broken.FallbackOnRelease, trials=3000, workers=2)
    # measured: a fallback on both data sets in a share of the runs; no violation
    assert 0 < honest.errors["fallback"] < 3000
    assert not honest.violation, honest.summary()


def test_the_design_search_finds_a_decline_on_a_relative_outlier():
    """Rows spread over half the box never trigger it (so 'both' cannot see it); the concentrated design does."""
    fixed = audit(broken.DeclineOnRelativeOutlier, trials=2000, design="both", workers=2)
    assert not fixed.violation and fixed.errors["declined"] == 0
    found = audit(broken.DeclineOnRelativeOutlier, trials=2500, design="search", workers=2)
    assert found.violation, found.summary()
    assert found.data["source"] == "generated-concentrated"
    assert [x["design"] for x in found.data["search"]] == ["generated-mirror", "generated", "generated-concentrated",
                                                          "generated-heavy", "generated-mirror, 50 clusters"]
    assert [x["scored"] for x in found.data["search"]] == ["estimate"] * 5  # it declares no intervals
    assert found.trials_pilot == 5 * (625 // 5) and found.trials == 2500 - found.trials_pilot
    assert "design chosen by a search" in found.summary()


def test_the_design_search_leaves_an_honest_algorithm_alone():
    r = audit("adaptive_clip", task="mean", trials=2500, design="search", workers=2)
    assert not r.violation, r.summary()
    assert r.epsilon_lower <= r.epsilon_claimed and len(r.data["search"]) == 5


def test_forgotten_factor_two_in_sigma_is_flagged_at_epsilon_3():
    r = audit(broken.ClipHalfSigma, epsilon=3.0, trials=4000, design="mirror", workers=2)
    assert r.violation and r.epsilon_lower > 3.0, r.summary()
    honest = audit("adaptive_clip", epsilon=3.0, trials=4000, design="mirror", workers=2)
    assert not honest.violation, honest.summary()


@pytest.mark.slow
def test_forgotten_factor_two_in_sigma_is_flagged_at_epsilon_1():
    r = audit(broken.ClipHalfSigma, epsilon=1.0, trials=20000, design="mirror", workers=2)
    assert r.violation and r.epsilon_lower > 1.0, r.summary()


def test_ledger_that_charges_more_than_the_budget_is_a_violation():
    r = audit(broken.LedgerOvercharge, trials=200, workers=1)
    assert r.violation and any("ledger charges" in x for x in r.reasons)
    assert r.ledger["epsilon"] > 1.0


def test_crashes_in_some_runs_are_counted():
    r = audit(broken.CrashSometimes, trials=600, design="both", workers=2)
    assert 0.05 * 600 < r.errors["count"] < 0.15 * 600
    assert "simulated crash" in r.errors["messages"][0]
    assert "raised" in r.summary()
    n_err = sum(o["error"] for design in r.outcomes.values() for o in design.values())
    assert n_err == r.errors["count"]


def test_releases_run_in_the_benchmark_worker_pool_under_its_limits():
    # the same releases in the pool as in this process (the seeds are per release), and the limits reported
    pooled = audit("adaptive_clip", trials=400, design="mirror", workers=2)
    local = audit("adaptive_clip", trials=400, design="mirror", isolate=False)
    assert [b["epsilon"] for b in pooled.bounds] == [b["epsilon"] for b in local.bounds]
    assert pooled.exposure["median"] == local.exposure["median"]
    assert pooled.errors["limits"] == {"time": 60.0, "memory_mb": 4096.0} and local.errors["limits"] is None
    for key in ("timeouts", "memory", "worker_deaths", "declined"):
        assert pooled.errors[key] == 0


def test_a_timeout_caused_by_the_canary_is_an_output_and_is_flagged():
    # only D' (inside design) reaches the bounds: its runs exceed the time limit and are killed
    r = audit(broken.SlowOnCanary, trials=120, design="inside", workers=2, time_limit=0.25)
    with_canary = r.outcomes["with_canary"]
    assert with_canary["timeout"] == sum(with_canary.values()) and r.outcomes["without"]["timeout"] == 0
    assert r.errors["timeouts"] == with_canary["timeout"] and "time limit of 0.25 s" in r.errors["limit_messages"][0]
    assert r.violation and r.epsilon_lower > 1.0, r.summary()
    assert "time-outs" in r.summary()
    json.dumps(r.to_dict(), default=float)


def test_worker_deaths_in_some_runs_are_counted_not_hidden():
    r = audit(broken.AbortSometimes, trials=300, design="mirror", workers=2)
    assert 0.04 * 300 < r.errors["worker_deaths"] == r.errors["count"] < 0.2 * 300
    assert "SIGABRT" in r.errors["limit_messages"][0]
    n_err = sum(o["error"] for o in r.outcomes.values())
    assert n_err == r.errors["count"] and "worker deaths" in r.summary()


def test_plugin_string_and_cli_json(capsys):
    from dpstats import cli

    code = cli.main(["audit", "tests.audit_broken:DeclineOnOutlier", "--trials", "1000", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 1
    assert out["violation"] is True and out["epsilon_lower"] > out["epsilon_claimed"] == 1.0
    for key in ("algorithm", "epsilon_claimed", "epsilon_lower", "confidence", "trials", "violation"):
        assert key in out
    code = cli.main(["audit", "adaptive_clip", "--trials", "1000", "--seed", "3"])
    text = capsys.readouterr().out
    assert code == 0 and "no violation found" in text and "random guessing" in text


# --------------------------------------------------------------------------
# bad input: one message naming the argument, exit status 2, no traceback
# --------------------------------------------------------------------------


@pytest.fixture
def raising_plugin(tmp_path, monkeypatch):
    (tmp_path / "h7_raising_plugin.py").write_text("raise RuntimeError('plugin exploded on import')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "h7_raising_plugin:Algo"
    sys.modules.pop("h7_raising_plugin", None)


@pytest.mark.parametrize("argv,needle", [
    (["audit", "no_such_algorithm"], "algorithm: unknown algorithm 'no_such_algorithm'"),
    (["audit", "no_such_module_h7:Thing"], "algorithm: cannot import plugin module"),
    (["audit", "adassp"], "--task: algorithm 'adassp' exists for tasks"),
    (["audit", "adaptive_clip", "--task", "linreg"], "--task: algorithm 'adaptive_clip' has no task 'linreg'"),
    (["audit", "tests.audit_broken:ClipHalfSigma", "--task", "sce"], "--task"),
    (["audit", "adaptive_clip", "--clusters", "1"], "--clusters must be an integer of at least 2"),
    (["audit", "adaptive_clip", "--n", "100", "--clusters", "200"], "--clusters must be at most --n = 100"),
    (["audit", "adaptive_clip", "--confidence", "1.5"], "--confidence must lie in (0, 1)"),
    (["audit", "adaptive_clip", "--confidence", "0"], "--confidence must lie in (0, 1)"),
    (["audit", "adaptive_clip", "--trials", "20"], "--trials: 20 releases cannot give any bound"),
    (["audit", "tests.audit_broken:CrashAlways", "--trials", "200"], "raised (or gave no finite estimate) in every one"),
    (["audit", "adaptive_clip", "--instance", "no_such_instance"], "--instance: no instance 'no_such_instance'"),
    (["audit", "tests.audit_broken:NoSuchClass"], "algorithm: plugin module 'tests.audit_broken' has no attribute"),
    (["audit", "adaptive_clip", "--workers", "0"], "--workers must be at least 1"),
    (["audit", "adaptive_clip", "--time-limit", "0"], "--time-limit must be a positive number"),
    (["audit", "adaptive_clip", "--memory-limit", "-1"], "--memory-limit must be a positive number"),
    (["audit", "adaptive_clip", "--levels", "1"], "--levels must be an integer of at least 2"),
    (["audit", "adaptive_clip", "--n", "5"], "--n must be an integer of at least 10"),
    (["audit", "adaptive_clip", "--delta", "1"], "--delta must lie in [0, 1)"),
    (["audit", "adaptive_clip", "--epsilon", "0"], "--epsilon must be a positive finite number"),
])
def test_bad_input(argv, needle, capsys):
    from dpstats import cli

    code = cli.main(argv)
    err = capsys.readouterr().err
    assert code == 2
    assert needle in err
    assert "Traceback" not in err


def test_plugin_that_raises_on_import(raising_plugin, capsys):
    from dpstats import cli

    code = cli.main(["audit", raising_plugin])
    err = capsys.readouterr().err
    assert code == 2 and "algorithm: plugin" in err and "plugin exploded on import" in err and "Traceback" not in err
