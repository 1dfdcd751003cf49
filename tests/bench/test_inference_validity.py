"""Per-instance validity of the coverage benchmark: instance_coverage, the confident-miss rule, the report.

The real-results tests run ``dpstats bench --inference`` on three public
``sce`` instances of three SE types (classical, HC1, clustered with nested
fixed effects) and one ``mean`` instance, and recount every per-instance
figure from the ``intervals`` table of the results file with sqlite3; the
non-private SEs the confident-miss rule uses are checked against the
non-private fit on the same draws.
"""

from __future__ import annotations

import html.parser
import json
import math
import sqlite3

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from dpstats.bench import inference as I
from dpstats.bench.report import load_intervals
from dpstats.bench.store import read_intervals
from dpstats.cli import main
from dpstats.data.corpus import Corpus

SCE = ("mroz87_lwage", "fair78_affairs", "kr14_organ")  # classical, HC1, cluster:State (nested state effects)
MEAN = "mean_mroz87_lwage"
T = 3


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    path = tmp_path_factory.mktemp("validity") / "r.sqlite"
    assert main(["bench", "--inference", "--preset", "quick", "--algorithm", "fwl_score", "adaptive_whiten",
                 "--epsilon", "1", "--trials", str(T), "--instance", *SCE, MEAN, "--results", str(path),
                 "--workers", "1", "--no-progress"]) == 0
    return path


def _recount(path) -> pd.DataFrame:
    """Per (task, algorithm, epsilon, instance) from the stored rows alone (sqlite3, JSON, numpy)."""
    con = sqlite3.connect(path)
    rows = con.execute("SELECT task, algorithm, epsilon, instance, status, covered, np_covered, width_ratio, low, "
                       "high, truth FROM intervals").fetchall()
    con.close()
    out = {}
    for task, algo, eps, inst, status, cov, np_cov, wr, low, high, truth in rows:
        o = out.setdefault((task, algo, float(eps), inst), {"trials": 0, "covered": [], "np": [], "wr": [],
                                                            "all": [], "infinite": 0})
        o["trials"] += 1
        o["covered"].append(cov)
        o["np"].append(np_cov)
        o["wr"].append(math.inf if wr is None else wr)
        lo, hi, tr = (np.array(json.loads(v), dtype=float) for v in (low, high, truth))
        o["all"].append(float(np.all((lo <= tr) & (tr <= hi))))
        o["infinite"] += int(status in ("ok", "declined") and not np.all(np.isfinite(hi - lo)))
    return pd.DataFrame([{"task": k[0], "algorithm": k[1], "epsilon": k[2], "instance": k[3], **v}
                         for k, v in out.items()])


def test_instance_coverage_agrees_with_a_recount_of_the_intervals_table(results):
    per = I.instance_coverage(load_intervals(results))
    assert list(per.columns) == list(I.INSTANCE_COLUMNS)
    rc = _recount(results)
    assert len(per) == len(rc) == len(SCE) + 1
    key = ["task", "algorithm", "epsilon", "instance"]
    m = per.merge(rc, on=key, validate="one_to_one")
    for r in m.itertuples(index=False):
        c = float(np.mean(r.covered))
        assert r.trials_x == r.trials_y == T
        assert r.coverage == pytest.approx(c) and r.coverage_se == pytest.approx(math.sqrt(c * (1 - c) / T))
        assert r.reference == pytest.approx(np.mean(r.np))
        assert r.coverage_all == pytest.approx(np.mean(r.all))
        assert r.infinite_x == pytest.approx(r.infinite_y / T)
        assert r.median_width_ratio == sorted(r.wr)[(T - 1) // 2]  # the lower median, T odd: the median
        assert r.failed == 0.0 and r.se_exact
    # sorted by coverage within the task and epsilon
    for _, g in per.groupby(["task", "epsilon"]):
        assert g["coverage"].is_monotonic_increasing


def test_the_nonprivate_se_is_recovered_exactly_from_the_stored_interval(results):
    """(np_high - np_low) / (2 q) is the SE of the non-private fit on the same draw, for every SE type."""
    from dpstats.ols.baseline import compute_baseline

    corpus = Corpus.public()
    v = I.trial_validity(load_intervals(results))
    assert v["se_exact"].all()
    checked = set()
    for r in v.drop_duplicates(["instance", "seed"]).itertuples(index=False):
        inst = corpus.instance(r.instance)
        draw = I.resample(inst, int(r.seed))
        lo, hi = np.array(json.loads(r.np_low)), np.array(json.loads(r.np_high))
        se = (hi - lo) / (2 * r.np_quantile)
        if r.task == "sce":
            want = np.array([compute_baseline(draw).se])
        else:
            want = draw.X.std(axis=0, ddof=1) / math.sqrt(draw.X.shape[0])
        np.testing.assert_allclose(se, want, rtol=1e-9)
        checked.add(r.se_type if r.task == "sce" else "mean")
    assert checked == {"classical", "HC1", "cluster:State", "mean"}
    # the clustered instance's quantile is t(G - 1) with the population's G, the study interval's own
    g = len(np.unique(corpus.instance("kr14_organ").clusters))
    q = v.loc[v["instance"] == "kr14_organ", "np_quantile"]
    assert np.allclose(q, stats.t.ppf(0.975, g - 1), rtol=1e-12)
    # without the instance table (read_intervals alone) it falls back to the normal quantile, marked inexact
    raw = I.trial_validity(read_intervals(results))
    k = raw["instance"] == "kr14_organ"
    assert not raw.loc[k, "se_exact"].any() and np.allclose(raw.loc[k, "np_quantile"], stats.norm.ppf(0.975))
    assert raw.loc[~k, "se_exact"].all() and np.allclose(raw.loc[~k, "np_quantile"], v.loc[~k, "np_quantile"])
    assert not I.instance_coverage(read_intervals(results)).set_index("instance").loc["kr14_organ", "se_exact"]


def test_coverage_table_carries_the_worst_instance_and_the_counts(results):
    iv = load_intervals(results)
    cov = I.coverage_table(iv)
    per = I.instance_coverage(iv)
    assert list(cov.columns) == list(I.COVERAGE_COLUMNS) + ["corpus"]
    row = cov[(cov["slice"] == "all") & (cov["algorithm"] == "fwl_score")].iloc[0]
    p = per[per["algorithm"] == "fwl_score"]
    assert row["worst_coverage"] == p["coverage"].min()
    assert row["worst_instance"] in set(p.loc[p["coverage"] == p["coverage"].min(), "instance"])
    assert row["below_85"] == pytest.approx(float(np.mean(p["coverage"] < 0.85)))
    assert row["confident_misses"] == p["confident_misses"].sum()
    ref = cov[(cov["slice"] == "all") & (cov["algorithm"] == "non-private") & (cov["task"] == "sce")].iloc[0]
    assert ref["worst_coverage"] == pytest.approx(p["reference"].min())  # one method: its trials are every draw


class _Cells(html.parser.HTMLParser):
    """Table id -> rows of {header: cell text}."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[dict[str, str]]] = {}
        self._id: str | None = None
        self._head: list[str] = []
        self._row: list[str] | None = None
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self._id, self._head = dict(attrs).get("id") or "", []
            self.tables[self._id] = []
        elif tag == "tr":
            self._row = []
        elif tag in ("td", "th"):
            self._cell = []

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._row is not None and self._cell is not None:
            self._row.append("".join(self._cell).strip())
            self._cell = None
        elif tag == "tr" and self._row is not None and self._id is not None:
            if not self._head:
                self._head = self._row
            else:
                self.tables[self._id].append(dict(zip(self._head, self._row)))
            self._row = None
        elif tag == "table":
            self._id = None


def _tables(text: str) -> dict[str, list[dict[str, str]]]:
    p = _Cells()
    p.feed(text)
    return p.tables


def test_report_writes_the_instance_table_and_figure(results, tmp_path):
    out = tmp_path / "site"
    assert main(["report", "--results", str(results), "--out", str(out)]) == 0
    csv = pd.read_csv(out / "coverage_instances.csv")
    per = I.instance_coverage(load_intervals(results))
    assert list(csv.columns) == list(I.INSTANCE_COLUMNS) and len(csv) == len(per)
    np.testing.assert_allclose(csv["coverage"], per["coverage"])
    assert (csv["instance"] == per["instance"]).all()
    assert "study_se" in pd.read_csv(out / "intervals.csv").columns  # so that the CSV alone gives exact SEs
    # rerunning the summaries on the written intervals.csv gives the same table
    again = I.instance_coverage(pd.read_csv(out / "intervals.csv"))
    np.testing.assert_allclose(again["coverage"], per["coverage"])
    assert again["se_exact"].all()
    cov = pd.read_csv(out / "coverage.csv")
    assert {"worst_coverage", "worst_instance", "below_85", "confident_misses"} <= set(cov.columns)
    for task in ("sce", "mean"):
        page = (out / f"inference-{task}.html").read_text()
        assert "Per-instance validity" in page and "Confident misses" in page
        stem = f"img/coverage-instances-dpstats_public_corpus-{task}"
        assert f'src="{stem}.png"' in page
        assert (out / f"{stem}.png").stat().st_size > 1000 and (out / f"{stem}.svg").is_file()
        tables = _tables(page)
        tid = "inst-dpstats_public_corpus-eps1"
        rows = tables[tid]
        assert len(rows) == len(per[per["task"] == task])
        shown = [float(r["Coverage % ± SE"].split(" ± ")[0]) for r in rows]
        assert shown == sorted(shown)
        assert ("All coordinates %" in rows[0]) == (task == "mean")
        first = tables["cov-dpstats_public_corpus-eps1-all"]
        assert {"Worst instance %", "Confident misses (by chance)"} <= set(first[0])
        # the count, then the number expected by chance: "k (x)"
        r = per[(per["task"] == task) & (per["epsilon"] == 1.0)].iloc[0]
        shown = {row["Instance"]: row["Confident misses (by chance)"] for row in rows}
        assert shown[r["instance"]].startswith(f"{int(r['confident_misses'])} (")


# --------------------------------------------------------------------------
# the confident-miss rule on a hand-built table
# --------------------------------------------------------------------------


def _row(instance, task, truth, low, high, np_low, np_high, status="ok", se_type="classical", n_draw=102, d=2,
         seed=0):
    def js(v):
        return None if v is None else json.dumps(list(map(float, v)))

    tr = np.asarray(truth, dtype=float)
    lo = None if low is None else np.asarray(low, dtype=float)
    hi = None if high is None else np.asarray(high, dtype=float)
    nlo, nhi = np.asarray(np_low, dtype=float), np.asarray(np_high, dtype=float)
    covered = 0.0 if lo is None or hi is None else float(np.mean((lo <= tr) & (tr <= hi)))
    ratio = math.inf if lo is None or hi is None else float(np.median((hi - lo) / (nhi - nlo)))
    return {"algorithm": "m", "interpretation": "standard", "instance": instance, "study": "s_" + instance,
            "task": task, "epsilon": 1.0, "delta": 1e-6, "seed": seed, "status": status,
            "error": None if status == "ok" else "boom", "level": 0.95, "se_type": se_type, "n": n_draw, "d": d,
            "n_draw": n_draw, "truth": js(tr), "low": js(lo), "high": js(hi), "np_low": js(nlo), "np_high": js(nhi),
            "covered": covered, "np_covered": float(np.mean((nlo <= tr) & (tr <= nhi))),
            "width_ratio": ratio, "corpus": "c"}


def test_the_confident_miss_rule():
    """11 SEs away counts, 9 does not, an infinite (or half-infinite) interval or a failure never."""
    q = stats.t.ppf(0.975, 100)  # classical, n_draw - d = 100: SE 1 when the half-width is q
    np_lo, np_hi = [-q], [q]
    rows = [
        _row("a", "sce", [0.0], [11.0], [12.0], np_lo, np_hi, seed=0),    # 11 SEs below: a confident miss
        _row("a", "sce", [0.0], [9.0], [10.0], np_lo, np_hi, seed=1),     # 9 SEs: a miss, not confident
        _row("a", "sce", [0.0], [-12.0], [-11.0], np_lo, np_hi, seed=2),  # 11 SEs above: confident
        _row("a", "sce", [0.0], [-1.0], [1.0], np_lo, np_hi, seed=3),     # covers
        _row("b", "sce", [0.0], [-math.inf], [math.inf], np_lo, np_hi, seed=0),
        _row("b", "sce", [0.0], [11.0], [math.inf], np_lo, np_hi, seed=1),  # half-infinite: not finite, never
        _row("b", "sce", [0.0], None, None, np_lo, np_hi, status="error", seed=2),
        # vectors: a trial counts when any coordinate is a confident miss; the SE is per coordinate
        _row("c", "linreg", [0.0, 0.0], [-1.0, 22.0], [1.0, 23.0], [-q, -2 * q], [q, 2 * q], seed=0),  # 11 SEs of 2
        _row("c", "linreg", [0.0, 0.0], [-1.0, 18.0], [1.0, 19.0], [-q, -2 * q], [q, 2 * q], seed=1),  # 9 SEs of 2
        _row("c", "linreg", [0.0, 0.0], [11.0, -math.inf], [12.0, math.inf], [-q, -q], [q, q], seed=2),
    ]
    qm = stats.t.ppf(0.975, 49)  # mean: t(n_draw - 1)
    rows += [_row("d", "mean", [0.0, 0.0], [-1.0, 11.0 * 3], [1.0, 12.0 * 3], [-qm, -3 * qm], [qm, 3 * qm],
                  se_type=None, n_draw=50, seed=0),
             _row("d", "mean", [0.0, 0.0], [-1.0, 9.0 * 3], [1.0, 10.0 * 3], [-qm, -3 * qm], [qm, 3 * qm],
                  se_type=None, n_draw=50, seed=1)]
    df = pd.DataFrame(rows)
    v = I.trial_validity(df)
    assert v["confident_miss"].tolist() == [True, False, True, False, False, False, False, True, False, True, True,
                                            False]
    np.testing.assert_allclose(v["miss_se"].iloc[:4], [11.0, 9.0, 11.0, 0.0])
    assert v["miss_se"].iloc[4:7].isna().all()  # no finite interval: not judged
    np.testing.assert_allclose(v["miss_se"].iloc[7:], [11.0, 9.0, 11.0, 11.0, 9.0])
    assert not v["np_confident_miss"].any()
    assert v["covered_all"].tolist() == [0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0]
    per = I.instance_coverage(df).set_index("instance")
    assert per["confident_misses"].to_dict() == {"a": 2, "b": 0, "c": 2, "d": 1}
    np.testing.assert_allclose(per.loc["a", "max_miss_se"], 11.0)
    assert per.loc["b", "infinite"] == pytest.approx(2 / 3) and per.loc["b", "failed"] == pytest.approx(1 / 3)
    assert per.loc["c", "coverage"] == pytest.approx(0.5) and per.loc["c", "coverage_all"] == 0.0
    # the least-covered coordinate: c's second (1 of 3 trials) hides behind the instance's 0.5
    assert per.loc["c", "worst_coordinate"] == 1 and per.loc["c", "coordinate_coverage"] == pytest.approx(1 / 3)
    assert per.loc["d", "worst_coordinate"] == 1 and per.loc["d", "coordinate_coverage"] == 0.0
    # a scalar's is the instance's; a failed trial (no interval) covers no coordinate
    assert per.loc["a", "coordinate_coverage"] == pytest.approx(0.25)
    assert per.loc["b", "coordinate_coverage"] == pytest.approx(1 / 3)
    assert list(per.index) == ["c", "d", "a", "b"]  # by task, then coverage: linreg; mean; sce 1/4, 1/3
    assert per.loc["a", "coverage_se"] == pytest.approx(math.sqrt(0.25 * 0.75 / 4))
    # the threshold is a parameter
    assert I.instance_coverage(df, threshold=8.0).set_index("instance")["confident_misses"]["a"] == 3
    cov = I.coverage_table(df)
    sce = cov[(cov["task"] == "sce") & (cov["slice"] == "all") & (cov["algorithm"] == "m")].iloc[0]
    assert sce["worst_instance"] == "a" and sce["worst_coverage"] == pytest.approx(0.25)
    assert sce["below_85"] == pytest.approx(1.0) and sce["confident_misses"] == 2
    lin = cov[(cov["task"] == "linreg") & (cov["slice"] == "all") & (cov["algorithm"] == "m")].iloc[0]
    assert lin["below_85"] == lin["coordinates_below_85"] == pytest.approx(1.0)
    assert math.isnan(cov[(cov["task"] == "linreg") & (cov["algorithm"] == "non-private")]
                      ["coordinates_below_85"].iloc[0])


def test_the_narrow_miss_rule():
    """A finite interval narrower than the non-private one that misses by more than 3 SEs; a wider one, a miss by
    less, an infinite interval never; per coordinate, with that coordinate's width and SE."""
    q = stats.t.ppf(0.975, 100)  # SE 1: the non-private interval is [-q, q], width 2q
    np_lo, np_hi = [-q], [q]
    rows = [
        _row("a", "sce", [0.0], [3.5], [3.6], np_lo, np_hi, seed=0),        # narrow, 3.5 SEs off: counted
        _row("a", "sce", [0.0], [2.5], [2.6], np_lo, np_hi, seed=1),        # narrow, 2.5 SEs: not
        _row("a", "sce", [0.0], [3.5], [3.5 + 2.5 * q], np_lo, np_hi, seed=2),  # wider than non-private: not
        _row("a", "sce", [0.0], [-math.inf], [math.inf], np_lo, np_hi, seed=3),
        # the collapsed-box draw of rouse98_voucher's choiceyrs: 9.6 SEs off in an interval a tenth as wide
        _row("b", "mean", [0.0, 0.686], [-1.0, -0.008], [1.0, 0.0214], [-1.0, 0.686 - 0.1358],
             [1.0, 0.686 + 0.1358], se_type=None, n_draw=328, seed=0),
        _row("b", "mean", [0.0, 0.0], [-1.0, 6.0], [1.0, 6.0 + 10.0], [-1.0, -1.0], [1.0, 1.0], se_type=None,
             n_draw=328, seed=1),  # the second coordinate misses by far but is wider: a confident miss only
    ]
    v = I.trial_validity(pd.DataFrame(rows))
    assert v["narrow_miss"].tolist() == [True, False, False, False, True, False]
    assert v["confident_miss"].tolist() == [False, False, False, False, False, True]
    per = I.instance_coverage(pd.DataFrame(rows)).set_index("instance")
    assert per["narrow_misses"].to_dict() == {"a": 1, "b": 1}
    cov = I.coverage_table(pd.DataFrame(rows))
    all_rows = cov[cov["slice"] == "all"].set_index(["task", "algorithm"])
    assert all_rows.loc[("sce", "m"), "narrow_misses"] == 1 and all_rows.loc[("mean", "m"), "narrow_misses"] == 1
    assert pd.isna(all_rows.loc[("sce", "non-private"), "narrow_misses"])


def test_a_clustered_instance_without_the_study_se_gets_a_lower_bound():
    """The normal quantile is below every t quantile: the SE is overstated, the miss understated, never counted
    wrongly; with the study's SE the quantile is the study interval's own."""
    g = 10
    q = stats.t.ppf(0.975, g - 1)
    row = _row("k", "sce", [0.0], [10.5 * 1.0], [11.0], [-q], [q], se_type="cluster:g", n_draw=300, d=3)
    row.update(study_low=json.dumps([-2 * q]), study_high=json.dumps([2 * q]))  # study SE 2
    df = pd.DataFrame([row])
    rough = I.trial_validity(df)
    assert not rough["se_exact"].iloc[0] and rough["miss_se"].iloc[0] < 10.5
    exact = I.trial_validity(df.assign(study_se=2.0))
    assert exact["se_exact"].iloc[0] and exact["np_quantile"].iloc[0] == pytest.approx(q)
    assert exact["miss_se"].iloc[0] == pytest.approx(10.5) and exact["confident_miss"].iloc[0]
    inst = pd.DataFrame([{"instance": "k", "task": "sce", "baseline": 2.0}])
    assert I.attach_study_se(df, inst)["study_se"].iloc[0] == 2.0


def test_confident_misses_expected_by_chance():
    """An exact interval 20 SEs wide (sd) misses by more than 10 SEs with probability 2 (1 - Phi(z + 0.5)); the
    figure matches a simulation of such intervals, sums over trials, follows the threshold, ignores infinite ones."""
    q = stats.t.ppf(0.975, 100)  # SE 1
    z = stats.norm.ppf(0.975)
    sd = 20.0
    p = 2.0 * stats.norm.sf(z + 10.0 / sd)
    rng = np.random.default_rng(0)
    est = rng.normal(0.0, sd, 200_000)  # exact intervals est +- z sd around the truth 0
    gap = np.maximum(np.abs(est) - z * sd, 0.0)
    assert np.mean(gap > 10.0) == pytest.approx(p, abs=0.002)
    rows = [
        _row("a", "sce", [0.0], [-z * sd], [z * sd], [-q], [q], seed=0),
        _row("a", "sce", [0.0], [100.0 - z * sd], [100.0 + z * sd], [-q], [q], seed=1),  # where it lies: no matter
        _row("a", "sce", [0.0], [-z], [z], [-q], [q], seed=2),  # sd 1 SE: 2 (1 - Phi(z + 10)), about 0
        _row("a", "sce", [0.0], [-math.inf], [math.inf], [-q], [q], seed=3),
        _row("b", "linreg", [0.0, 0.0], [-z * sd, -z * sd], [z * sd, z * sd], [-q, -q], [q, q], seed=0),
    ]
    v = I.trial_validity(pd.DataFrame(rows))
    np.testing.assert_allclose(v["confident_chance"].iloc[:3], [p, p, 2.0 * stats.norm.sf(z + 10.0)], rtol=1e-9)
    assert math.isnan(v["confident_chance"].iloc[3])
    assert v["confident_chance"].iloc[4] == pytest.approx(1.0 - (1.0 - p) ** 2)
    per = I.instance_coverage(pd.DataFrame(rows)).set_index("instance")
    assert per.loc["a", "confident_expected"] == pytest.approx(2 * p, rel=1e-6)
    assert per.loc["a", "confident_misses"] == 1  # the interval around 100 misses by 100 - z sd - 0 = 60.8 SEs
    p8 = 2.0 * stats.norm.sf(z + 8.0 / sd)
    assert I.instance_coverage(pd.DataFrame(rows), threshold=8.0).set_index("instance").loc[
        "a", "confident_expected"] == pytest.approx(2 * p8, rel=1e-6)
    cov = I.coverage_table(pd.DataFrame(rows))
    sce = cov[(cov["task"] == "sce") & (cov["slice"] == "all")].set_index("algorithm")
    assert sce.loc["m", "confident_expected"] == pytest.approx(2 * p, rel=1e-6)
    assert math.isnan(sce.loc["non-private", "confident_expected"])
