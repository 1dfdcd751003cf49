"""The coverage benchmark (dpstats.bench.inference, ``dpstats bench --inference``) on public corpus instances.

The two oracle methods below are test instruments, not private algorithms:
they release the non-private OLS coefficient with its classical standard
error, exact (``OracleExact``) or divided by four (``OracleNarrow``), so that
the benchmark's verdicts can be checked against a known answer.
"""

from __future__ import annotations

import json
import math
from typing import ClassVar

import numpy as np
import pandas as pd
import pytest

from dpstats.algorithms.base import Algorithm, Release
from dpstats.bench import inference as I
from dpstats.bench import runner as R
from dpstats.bench.store import read_intervals, read_trials
from dpstats.cli import main
from dpstats.data.corpus import Corpus

P = "tests.bench.test_inference:"


class _Oracle(Algorithm):
    """The non-private OLS coefficient with its classical SE times ``SCALE`` (a test instrument)."""

    task = "sce"
    interpretation = "data-bounds"
    intervals = True
    SCALE: ClassVar[float] = 1.0

    def _run(self, data, facts, epsilon, delta, rng):
        X, y = np.asarray(data.X), np.asarray(data.y)
        n, d = X.shape
        beta, *_ = np.linalg.lstsq(X, y, rcond=None)
        r = y - X @ beta
        cov = (r @ r / (n - d)) * np.linalg.inv(X.T @ X)
        j = facts.coef_index
        return Release(np.array([beta[j]]), epsilon, delta, std_error=np.array([math.sqrt(cov[j, j]) * self.SCALE]),
                       df=float(n - d))


class OracleExact(_Oracle):
    name = "test_oracle_exact"


class OracleNarrow(_Oracle):
    name = "test_oracle_narrow"
    SCALE = 0.25


pytestmark = pytest.mark.usefixtures("restore_registry")  # plugins register themselves


@pytest.fixture(scope="module")
def corpus() -> Corpus:
    return Corpus.public()


# --------------------------------------------------------------------------
# the design
# --------------------------------------------------------------------------


def test_resample_is_seeded_and_independent_of_the_noise_stream(corpus):
    inst = corpus.instance("mroz87_lwage")
    a, b, c = I.resample(inst, 3), I.resample(inst, 3), I.resample(inst, 4)
    assert np.array_equal(a.X, b.X) and np.array_equal(a.y, b.y)
    assert not np.array_equal(a.X, c.X)
    assert a.X.shape == inst.X.shape and a.facts.n == inst.n
    # rows of the population, drawn with replacement (some repeated)
    rows = {tuple(r) for r in np.c_[inst.X, inst.y]}
    drawn = [tuple(r) for r in np.c_[a.X, a.y]]
    assert set(drawn) <= rows and len(set(drawn)) < len(drawn)
    # the draw's stream is not the algorithm's default_rng(seed)
    idx = np.random.default_rng(3).integers(0, inst.n, size=inst.n)
    assert not np.array_equal(a.X, inst.X[idx])


def test_clustered_instances_draw_whole_clusters(corpus):
    spec = next(s for s in corpus.specs() if s.task == "sce" and s.se.startswith("cluster:"))
    inst = corpus.instance(spec.id)
    g = len(np.unique(inst.clusters))
    try:
        draw = I.resample(inst, 0)
    except I.ResampleError:
        pytest.skip(f"{spec.id}: fixed effects nested in the clusters; no full-rank draw")
    # as many clusters as the population, each drawn copy its own cluster, every cluster kept whole
    assert len(np.unique(draw.clusters)) == g
    sizes = pd.Series(inst.clusters).value_counts().sort_values().to_numpy()
    drawn_sizes = pd.Series(draw.clusters).value_counts().to_numpy()
    assert set(drawn_sizes) <= set(sizes)
    assert draw.facts.n == draw.X.shape[0] == int(drawn_sizes.sum())


def test_nonprivate_interval_covers_near_nominal_on_mroz(corpus):
    """The reference itself: the classical interval on Mroz's wage equation covers the population value."""
    inst = corpus.instance("mroz87_lwage")
    truth = I.population_truth(inst)
    est, lo, hi = I.nonprivate_interval(inst)
    # on all rows: the study's estimate, with its t interval
    assert est[0] == pytest.approx(truth[0]) and lo[0] < truth[0] < hi[0]
    assert (hi[0] - lo[0]) / 2 == pytest.approx(0.0141 * 1.9656, rel=0.01)
    covered = []
    for s in range(120):
        _, lo, hi = I.nonprivate_interval(I.resample(inst, s))
        covered.append(lo[0] <= truth[0] <= hi[0])
    assert 0.90 <= np.mean(covered) <= 0.99


def test_interval_outcome_counts_coordinates_and_widths():
    cov, np_cov, ratio = I.interval_outcome(np.array([0.0, 5.0]), np.array([2.0, 6.0]), np.array([1.0, 1.0]),
                                            np.array([0.5, 0.0]), np.array([1.5, 2.0]))
    assert (cov, np_cov, ratio) == (0.5, 1.0, 1.25)  # widths 2/1 and 1/2: median 1.25
    _, _, r = I.interval_outcome(np.array([-np.inf]), np.array([np.inf]), np.array([0.0]), np.array([-1.0]),
                                 np.array([1.0]))
    assert r == math.inf


# --------------------------------------------------------------------------
# through the benchmark: the worker pool, the store, the summaries
# --------------------------------------------------------------------------


T = 30  #: draws per instance in the oracle run


@pytest.fixture(scope="module")
def oracle_run(tmp_path_factory):
    """Both oracles on two public sce instances of two studies, T draws each, through ``dpstats bench --inference``."""
    tmp = tmp_path_factory.mktemp("inference")
    results = tmp / "r.sqlite"
    args = ["bench", "--inference", "--task", "sce", "--instance", "mroz87_lwage", "bn92_wage2", "--epsilon", "1",
            "--trials", str(T), "--results", str(results), "--workers", "1", "--algorithm", P + "OracleExact",
            P + "OracleNarrow"]
    assert main(args) == 0
    return results, args


def test_intervals_are_stored_apart_from_point_trials(oracle_run):
    results, args = oracle_run
    iv = read_intervals(results)
    assert read_trials(results).empty  # the point table is untouched
    assert len(iv) == 2 * 2 * T and set(iv["status"]) == {"ok"}
    assert list(iv.columns) == list(I.INTERVAL_COLUMNS) + ["corpus"]
    row = iv.iloc[0]
    assert row["level"] == 0.95 and row["se_type"] == "classical" and row["n_draw"] == row["n"]
    # the same draw for both methods at a seed: the same non-private interval
    a = iv[iv["algorithm"] == "test_oracle_exact"].set_index(["instance", "seed"])["np_low"]
    b = iv[iv["algorithm"] == "test_oracle_narrow"].set_index(["instance", "seed"])["np_low"]
    assert a.sort_index().equals(b.sort_index())
    # the exact oracle reproduces the non-private interval: width ratio 1, same verdict
    ex = iv[iv["algorithm"] == "test_oracle_exact"]
    assert np.allclose(ex["width_ratio"], 1.0) and (ex["covered"] == ex["np_covered"]).all()
    # a rerun stores nothing new
    assert main(args) == 0
    assert len(read_intervals(results)) == len(iv)


def test_a_too_narrow_interval_is_reported_under_covering(oracle_run):
    results, _ = oracle_run
    cov = I.coverage_table(read_intervals(results))
    allrows = cov[cov["slice"] == "all"].set_index("algorithm")
    ref = allrows.loc["non-private", "coverage"]
    exact, narrow = allrows.loc["test_oracle_exact"], allrows.loc["test_oracle_narrow"]
    assert 0.85 <= ref <= 1.0
    assert exact["coverage"] == pytest.approx(ref) and exact["eligible"] and exact["rank"] == 1
    assert exact["median_width_ratio"] == pytest.approx(1.0)
    assert narrow["coverage"] < ref - 0.3 and not narrow["eligible"] and pd.isna(narrow["rank"])
    assert narrow["median_width_ratio"] == pytest.approx(0.25)
    # binomial SE of a study-weighted share: two studies, T trials each, each trial weighing 1 / (2 T)
    p = exact["coverage"]
    assert exact["coverage_se"] == pytest.approx(math.sqrt(p * (1 - p) * 2 * T / (2 * T) ** 2))


def test_report_shows_coverage_and_forest_plots(oracle_run, tmp_path):
    results, _ = oracle_run
    out = tmp_path / "site"
    assert main(["report", "--results", str(results), "--out", str(out)]) == 0
    cov = pd.read_csv(out / "coverage.csv")
    assert list(cov.columns) == list(I.COVERAGE_COLUMNS) + ["corpus"]
    assert len(pd.read_csv(out / "intervals.csv")) == 4 * T
    page = (out / "inference-sce.html").read_text()
    assert 'data-algorithm="test_oracle_narrow"' in page and "Reference" in page
    assert (out / "img" / "coverage-dpstats_public_corpus-sce.png").stat().st_size > 1000
    inst = (out / "explore" / "instance-mroz87_lwage.html").read_text()
    assert "forest-mroz87_lwage.png" in inst and "Same sign" in inst
    assert (out / "explore" / "img" / "forest-mroz87_lwage.png").is_file()
    assert "inference-sce.html" in (out / "index.html").read_text()


def test_point_and_coverage_trials_in_one_file_give_one_report(oracle_run, tmp_path):
    """Point trials next to the coverage trials (as scripts/main.sh writes them): both parts of the report."""
    import shutil

    from tests.bench.test_report import CHROMIUM, PROBE, parse, run_chromium

    results = tmp_path / "both.sqlite"
    shutil.copy(oracle_run[0], results)
    assert main(["bench", "--task", "sce", "--instance", "mroz87_lwage", "--epsilon", "1", "--trials", "2",
                 "--results", str(results), "--workers", "1", "--algorithm", P + "OracleExact"]) == 0
    assert len(read_trials(results)) == 2 and len(read_intervals(results)) == 4 * T
    out = tmp_path / "site"
    assert main(["report", "--results", str(results), "--out", str(out)]) == 0
    assert (out / "leaderboard.csv").is_file() and (out / "coverage.csv").is_file()
    page = out / "explore" / "instance-mroz87_lwage.html"
    text = page.read_text()
    assert "forest-mroz87_lwage.png" in text and "instance-mroz87_lwage.png" in text
    if CHROMIUM is None:
        return
    for p in (out / "inference-sce.html", page):  # every image of the pages loads in a browser
        probe = p.with_name("_probe.html")
        probe.write_text(p.read_text().replace("</body>", PROBE + "</body>"))
        res = run_chromium(tmp_path, "--virtual-time-budget=10000", "--dump-dom", probe.as_uri())
        assert res.returncode == 0, res.stderr[-2000:]
        loaded = {a["src"]: a.get("data-loaded") for t, a in parse(res.stdout).tags if t == "img"}
        assert loaded.pop("img/no-such-image.png") == "no"
        assert loaded and set(loaded.values()) == {"yes"}, loaded


def test_forest_summary_agreement_with_the_study():
    rows = []
    for seed, (lo, hi) in enumerate([(0.1, 0.3), (-0.1, 0.3), (-0.4, -0.1), (-math.inf, math.inf)]):
        rows.append({"algorithm": "m", "instance": "i", "task": "sce", "epsilon": 1.0, "seed": seed, "status": "ok",
                     "truth": "[0.2]", "study_low": "[0.1]", "study_high": "[0.3]", "low": json.dumps([lo]),
                     "high": json.dumps([hi]), "np_low": "[0.15]", "np_high": "[0.25]"})
    f = I.forest_summary(pd.DataFrame(rows), "i").iloc[0]
    # the study's interval excludes zero, positive: draws 0 agree on both, 1 on the sign only, 2 on neither,
    # the infinite interval (3) on neither
    assert f["sign"] == 0.5 and f["excludes_zero"] == 0.25
    assert f["np_sign"] == 1.0 and f["np_excludes_zero"] == 1.0


# --------------------------------------------------------------------------
# bad input
# --------------------------------------------------------------------------


def test_a_method_without_intervals_gives_marked_rows(tmp_path):
    results = tmp_path / "r.sqlite"
    assert main(["bench", "--inference", "--task", "sce", "--instance", "mroz87_lwage", "--epsilon", "1",
                 "--trials", "2", "--results", str(results), "--workers", "1", "--algorithm", "adassp"]) == 0
    iv = read_intervals(results)
    assert set(iv["status"]) == {"error"}
    assert iv["error"].str.startswith("no interval: the release of 'adassp' carries no std_error").all()
    assert (iv["covered"] == 0).all() and np.isinf(iv["width_ratio"]).all()


def test_default_selection_takes_the_methods_that_declare_intervals():
    sel = R.select_algorithms(None, ["sce", "mean"], inference=True)
    assert sel and all(R.gives_intervals(s.cls) for s in sel)
    assert ("mean", "kv_interval") in {(s.ref.task, s.ref.name) for s in sel}
    assert "adassp" not in {s.ref.name for s in sel}


def test_coverage_table_rejects_a_table_without_the_interval_columns():
    with pytest.raises(ValueError, match="covered"):
        I.coverage_table(pd.DataFrame({"algorithm": ["a"], "interpretation": ["standard"], "instance": ["i"],
                                       "study": ["s"], "task": ["sce"], "epsilon": [1.0], "status": ["ok"],
                                       "n": [10], "d": [2]}))


def test_a_design_that_cannot_be_resampled_is_left_out_not_blamed_on_the_method(corpus):
    """cigar_panel with its state fixed effects not known to be nested in the state clusters: a cluster draw
    always misses a state, leaving its dummy all zero (the nested ones are rebuilt per drawn copy instead)."""
    from dataclasses import replace

    inst = replace(corpus.instance("cigar_panel"), nested_columns=())
    with pytest.raises(I.ResampleError, match="full-rank"):
        I.resample(inst, 0)
    ip = I.inference_problem(inst)
    from dpstats.algorithms.release import AlgorithmSpec
    from dpstats.bench.model import AlgorithmRef

    r = I.run_inference_trial(AlgorithmSpec.of(OracleExact), ip, AlgorithmRef.of(OracleExact), 1.0, 1e-6, 0)
    assert r.status == "error" and r.error.startswith(I.RESAMPLE_FAILED)
    row = {"algorithm": r.algorithm, "interpretation": r.interpretation, "instance": r.instance, "study": r.study,
           "task": r.task, "epsilon": 1.0, "seed": 0, "status": r.status, "error": r.error, "n": r.n, "d": r.d,
           **{k: r.interval[k] for k in ("covered", "np_covered", "width_ratio")}}
    assert I.coverage_table(pd.DataFrame([row])).empty


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_a_coverage_job_carries_its_trial_kind_to_forked_and_spawned_workers(corpus, method):
    """The sandbox does not import the coverage design: the job hands the worker ``COVERAGE_TRIAL`` (a spawned
    worker, a fresh interpreter as on Dask, imports dpstats.bench.inference when it unpickles the job), and the
    worker's trials are those run in this process."""
    from dataclasses import asdict

    from dpstats.bench.sandbox import Limits, WorkerPool

    sel = R.select_algorithms(["fwl_score"], ["sce"], inference=True)
    plan = R.make_plan(corpus, sel, R.select_instances(corpus, ["sce"], ["mroz87_lwage"]), [1.0], 1e-6, 2,
                       inference=True)
    (job,) = plan.jobs
    assert job.kind is I.COVERAGE_TRIAL and job.inference
    got: list = []
    with WorkerPool(1, Limits(time=60), method=method) as pool:
        pool.run([job], got.append)
    ip = I.load_inference_problem(job.corpus, job.instance)
    want = [I.run_inference_trial(job.algorithm.spec(), ip, job.algorithm, e, d, s) for e, d, s in job.trials]

    def key(r):  # repr: a NaN equals itself
        return repr({k: v for k, v in asdict(r).items() if k not in ("seconds", "peak_mb")})

    assert [key(r) for r in sorted(got, key=lambda r: r.seed)] == [key(r) for r in want]
    assert all(r.interval is not None and r.status == "ok" for r in got)
