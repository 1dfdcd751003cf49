"""Synthesize, then estimate (:mod:`dpstats.algorithms._synth_estimate`) on real corpus instances.

The registry-wide contract tests run the listed entries (``synth_independent``,
``synth_privbayes``); here: the public schema, the budget
shares, that the release is exactly the statistic of the synthesizer's
release (post-processing), declines, the opt-in entries (one MST run), and a
run through the main benchmark.
"""

from __future__ import annotations

import subprocess
import sys
import warnings
from functools import cache

import numpy as np
import pytest

from dpstats.algorithms import Decline, Release, get, list_algorithms
from dpstats.algorithms._synth_estimate import LIGHT, PREFIX, Variable, _rebuild, plan_variables
from dpstats.algorithms.linreg._private_ranges import POSITIVE_GRID, private_center_halfwidth, scale_quantile
from dpstats.data.corpus import Corpus
from dpstats.privacy.accounting import PrivacyLeakWarning, ZCDPAccountant, em_epsilon, zcdp_rho
from dpstats.synth import SYNTHESIZERS, get_synthesizer

DELTA = 1e-6


@cache
def _instance(iid: str):
    inst = Corpus.public().instance(iid)
    return inst.task_data(), inst.facts


def _run(task: str, name: str, iid: str, eps: float = 1.0, seed: int = 0, **params):
    data, facts = _instance(iid)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        return get(task, name)(**params).run(data, facts, eps, DELTA, np.random.default_rng(seed))


def test_one_algorithm_per_synthesizer_and_task_light_ones_listed():
    listed = {(c.task, c.name) for c in list_algorithms()}
    everything = {(c.task, c.name) for c in list_algorithms(opt_in=True)}
    for name in SYNTHESIZERS:
        for task in ("sce", "linreg", "mean"):
            cls = get(task, PREFIX + name)
            assert cls.interpretation == get_synthesizer(name).interpretation
            assert (task, PREFIX + name) in everything
            assert ((task, PREFIX + name) in listed) == (name in LIGHT) == (not cls.opt_in)
    assert {"independent", "privbayes"} <= LIGHT and "mst" not in LIGHT


def test_listing_imports_no_heavy_dependency():
    code = ("import sys; from dpstats.algorithms import list_algorithms; list_algorithms(opt_in=True); "
            "print(sorted(m for m in ('jax', 'torch', 'mbi', 'opacus') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_schema_from_public_facts_only():
    _, facts = _instance("munnell_fe")   # Intercept, 47 state dummies, 4 numeric columns without bounds
    vs = plan_variables(facts, with_outcome=True)
    kinds = [(v.name, v.kind) for v in vs]
    assert kinds[0] == ("Intercept", "constant") and vs[0].bounds == (1.0, 1.0)
    (state,) = [v for v in vs if v.kind == "categorical"]
    assert state.name == "C(state)" and len(state.levels) == 48 and state.levels[0] == "(base)"
    assert len(state.columns) == 47 and all(facts.columns[j].startswith("C(state)[T.") for j in state.columns)
    num = [v for v in vs if v.kind == "numeric"]
    assert [v.name for v in num][-1] == facts.outcome and all(v.bounds is None for v in num)
    _, star = _instance("star_k")  # every regressor bounded; the outcome is not
    vs = plan_variables(star, with_outcome=True)
    assert [(v.kind, v.bounds) for v in vs] == [("constant", (1.0, 1.0)), ("numeric", (0.0, 1.0)),
                                                ("numeric", (0.0, 1.0)), ("numeric", None)]


def test_release_is_the_regression_on_the_synthesizers_release():
    """Re-doing the steps by hand with the same generator gives the identical ledger and estimate."""
    import pandas as pd

    from dpstats.synth.discretize import PrivTree
    from dpstats.synth.pipeline import synthesize_frame
    from dpstats.synth.schema import Column, Schema

    data, facts = _instance("star_k")
    out = _run("sce", "synth_independent", "star_k", eps=1.0, seed=3)
    assert isinstance(out, Release) and out.details["paid_ranges"] == 1
    rng = np.random.default_rng(3)
    acc = ZCDPAccountant(1.0, DELTA)
    y = data.y
    eps_em = em_epsilon(0.2 * acc.capacity / 2, bound="bounded_range")
    c, h = private_center_halfwidth(y, acc, "score" if facts.outcome == "score" else facts.outcome, eps_em, eps_em,
                                    rng, scale_quantile(facts.n, eps_em, grid_size=POSITIVE_GRID.size), k_sd=4.0)
    names = list(facts.columns[1:]) + [facts.outcome]
    df = pd.DataFrame(np.column_stack([data.X[:, 1:], np.clip(y, c - h, c + h)]), columns=names)
    schema = Schema(tuple(Column(n, "numeric", bounds=b) for n, b in
                          zip(names, [(0.0, 1.0), (0.0, 1.0), (c - h, c + h)])))
    res = synthesize_frame(df, schema, get_synthesizer("independent")(), 1.0, DELTA, rng,
                           discretizer=PrivTree(share=0.1), n_rows=facts.n, accountant=acc)
    W = np.column_stack([np.ones(facts.n), res.frame.to_numpy(float)])
    beta = np.linalg.lstsq(W[:, :-1], W[:, -1], rcond=None)[0]
    assert out.estimate[0] == beta[facts.coef_index]
    assert [e[:2] for e in out.ledger] == [(s.mechanism, s.cost) for s in acc.ledger]


def test_budget_shares_ranges_privtree_synthesizer():
    """Ranges get range_share, PrivTree privtree_share, the synthesizer the rest (each would fail if dropped)."""
    out = _run("linreg", "synth_independent", "mvd95_did_linreg", eps=1.0)
    cap = zcdp_rho(1.0, DELTA)
    cost = {"range": 0.0, "privtree": 0.0, "other": 0.0}
    for mech, c, unit, *_ in out.ledger:
        assert unit == "rho"
        cost["range" if mech.startswith("range ") else "privtree" if mech.startswith("privtree") else "other"] += c
    assert cost["range"] == pytest.approx(0.2 * cap, rel=1e-9)
    assert cost["privtree"] == pytest.approx(0.1 * cap, rel=1e-9)
    assert cost["other"] == pytest.approx(0.7 * cap, rel=1e-9)
    # two exponential mechanisms per unbounded column, equal shares
    n_range = sum(e[0].startswith("range ") for e in out.ledger)
    assert n_range == 2 * out.details["paid_ranges"]
    # equal width cells cost nothing: the synthesizer then gets 80 %
    ew = _run("linreg", "synth_independent", "mvd95_did_linreg", eps=1.0, discretizer="equal_width")
    assert sum(e.cost for e in ew.ledger if not e.mechanism.startswith("range ")) == pytest.approx(0.8 * cap, rel=1e-9)
    # pure DP synthesizer: the ledger is in epsilon
    pb = _run("mean", "synth_privbayes", "mean_engel_food", eps=1.0)
    assert {e[2] for e in pb.ledger} == {"epsilon"} and sum(e[1] for e in pb.ledger) == pytest.approx(1.0)


def test_seeded_and_declines_before_spending():
    a = _run("mean", "synth_independent", "mean_abadie03_401k", seed=5)
    b = _run("mean", "synth_independent", "mean_abadie03_401k", seed=5)
    c = _run("mean", "synth_independent", "mean_abadie03_401k", seed=6)
    assert np.array_equal(a.estimate, b.estimate) and not np.array_equal(a.estimate, c.estimate)
    d = _run("sce", "synth_independent", "mvd95_did", max_columns=2)
    assert isinstance(d, Decline) and "max_columns" in d.reason and d.ledger == () and d.epsilon == 0


def test_means_are_close_at_large_epsilon():
    data, facts = _instance("mean_abadie03_401k")
    out = _run("mean", "synth_independent", "mean_abadie03_401k", eps=10.0)
    sd = data.X.std(axis=0)
    assert np.all(np.abs(out.estimate - data.X.mean(axis=0)) < 0.25 * sd), (out.estimate, data.X.mean(axis=0))


def test_an_opt_in_entry_runs_with_its_exact_budget():
    """synth_mst (JAX, opt-in): one run on a small instance; the budget is spent exactly."""
    out = _run("sce", "synth_mst", "engel_food", eps=1.0)
    assert isinstance(out, Release) and np.isfinite(out.estimate).all() and out.estimate.shape == (1,)
    assert sum(e[1] for e in out.ledger) == pytest.approx(zcdp_rho(1.0, DELTA), rel=1e-9)
    assert any(e[0].startswith("mst") for e in out.ledger)


def test_runs_in_the_main_benchmark(tmp_path):
    """Through ``dpstats bench`` (the trial function and its workers) and onto the stored results."""
    from dpstats.bench.runner import BenchConfig, run_bench
    from dpstats.bench.store import read_trials

    res = tmp_path / "b.sqlite"
    run_bench(BenchConfig(tasks=["sce"], instances=["star_k"], epsilons=[1.0], trials=1, workers=1,
                          algorithms=["synth_independent", "synth_privbayes"], results=str(res), progress=False),
              log=lambda _line: None)
    df = read_trials(res)
    assert set(df["algorithm"]) == {"synth_independent", "synth_privbayes"}
    assert (df["status"] == "ok").all() and set(df["interpretation"]) == {"standard"}


class _Clash(get_synthesizer("independent")):
    """Independent with a hyperparameter named like one of synthesize-then-estimate's."""

    from dpstats.params import Param as _P

    name = "clash"
    defaults = {"discretizer": _P("x", "test")}


def test_new_rows_clashing_or_broken_do_not_break_the_registry(monkeypatch):
    from dpstats.algorithms import _synth_estimate as se

    monkeypatch.setitem(SYNTHESIZERS, "clash", f"{__name__}:_Clash")
    monkeypatch.setitem(SYNTHESIZERS, "gone", "dpstats.synth.mechanisms.nope:X")
    monkeypatch.setattr(se, "SKIPPED", {})
    (cls,) = [c for c in se.make_classes("mean") if c.synthesizer in ("clash", "gone")]
    assert cls.name == "synth_clash" and cls.opt_in
    assert cls.synth_params == {"clash_discretizer": "discretizer"} and cls().params["discretizer"] == "privtree"
    assert "gone" in se.SKIPPED and "ModuleNotFoundError" in se.SKIPPED["gone"]


def test_rebuild_sets_the_dummy_of_each_level():
    import pandas as pd

    levels = ("(base)", "a", "b", "c")
    v = Variable("g", "categorical", (3, 1, 4), levels=levels)
    values = ["a", "(base)", "c", "b", "c", "(base)"]
    W = _rebuild(pd.DataFrame({"g": values}), [v], 6)
    want = np.zeros((len(values), 6))
    for r, value in enumerate(values):
        if value != "(base)":
            want[r, v.columns[levels.index(value) - 1]] = 1.0
    assert np.array_equal(W, want) and W.flags.c_contiguous

