"""The runner hands out jobs longest first (by the seconds an earlier run stored), and ordering them
changes neither which trials run nor what is stored: a resumed run skips the stored trials and ends
with the rows of an uninterrupted run."""

from __future__ import annotations

import statistics

from dpstats.bench import runner as R
from dpstats.bench import schedule as S
from dpstats.bench.store import Store, read_instances, read_trials

INSTANCES = ["engel_food", "mroz87_lwage", "graddy97_discrim"]
EPS = [1.0, 10.0]


def config(results, trials, algorithms=("ssp", "adassp")):
    return R.BenchConfig(results=str(results), tasks=["sce"], algorithms=list(algorithms), instances=INSTANCES,
                         epsilons=EPS, trials=trials, workers=2, progress=False)


def comparable(df):
    """Trial rows without the timing columns, in a fixed order."""
    keys = ["algorithm", "task", "instance", "epsilon", "delta", "seed"]
    return df.drop(columns=["seconds", "peak_mb"]).sort_values(keys).reset_index(drop=True)


def trial_keys(jobs):
    return [(j.algorithm.name, j.instance, eps, seed) for j in jobs for eps, _, seed in j.trials]


def test_jobs_go_longest_first_and_a_resumed_run_skips_the_stored_trials(tmp_path):
    results = tmp_path / "ordered.sqlite"
    first = R.run_bench(config(results, 1), log=lambda _: None)
    assert (first.status, first.ran) == ("complete", 2 * len(INSTANCES) * len(EPS))

    # what the first run stored: mean seconds per (algorithm, instance, epsilon) and each instance's n * d
    mean = read_trials(results).groupby(["algorithm", "instance", "epsilon"])["seconds"].mean().to_dict()
    size = {r.instance: r.n * r.d for r in read_instances(results).itertuples()}
    rate = statistics.median(sec / size[i] for (_, i, _), sec in mean.items())

    three = ("ssp", "adassp", "noisystats")  # noisystats has no stored trial: its jobs are costed by n * d
    with Store(results) as store:
        plan = R.plan_bench(config(results, 3, three), store)
    unordered = R.plan_bench(config(results, 3, three)).jobs  # no store: plan order, nothing skipped

    # the same trials as the plan without costs, minus the stored ones (seed 0 of ssp and adassp)
    stored = {(a, i, e, 0) for a in ("ssp", "adassp") for i in INSTANCES for e in EPS}
    assert sorted(trial_keys(plan.jobs)) == sorted(k for k in trial_keys(unordered) if k not in stored)
    assert (plan.planned, plan.skipped) == (3 * len(INSTANCES) * len(EPS) * 3, len(stored))

    # longest first: stored mean seconds, else n * d times the median seconds per unit of n * d
    expected = []
    for job in plan.jobs:
        a, i, e = job.algorithm.name, job.instance, job.trials[0][0]
        per = mean[(a, i, e)] if (a, i, e) in mean else size[i] * rate
        expected.append(per * len(job.trials))
    assert all(x >= y * (1 - 1e-9) for x, y in zip(expected, expected[1:])), expected
    assert [j.algorithm.name for j in plan.jobs] != [j.algorithm.name for j in unordered]

    # the resumed run runs exactly the rest, and ends with the rows of an uninterrupted run
    second = R.run_bench(config(results, 3, three), log=lambda _: None)
    assert (second.status, second.skipped, second.ran) == ("complete", len(stored), plan.to_run)
    again = R.run_bench(config(results, 3, three), log=lambda _: None)
    assert (again.skipped, again.ran) == (plan.planned, 0)

    fresh = tmp_path / "fresh.sqlite"
    R.run_bench(config(fresh, 3, three), log=lambda _: None)
    assert comparable(read_trials(results)).equals(comparable(read_trials(fresh)))


def test_the_cost_model_prefers_stored_seconds_then_other_epsilons_then_size():
    from dpstats.bench.model import AlgorithmRef
    from dpstats.bench.sandbox import Job

    def job(name, instance, eps, n_trials=2):
        ref = AlgorithmRef(name=name, task="sce", ref=name, interpretation="standard")
        return Job(ref, "/corpus", instance, tuple((eps, 1e-6, s) for s in range(n_trials)))

    costs = S.CostModel(seconds={("a", "sce", "big", 1.0): 4.0, ("a", "sce", "big", 10.0): 2.0,
                                 ("b", "sce", "big", 1.0): 1.0},
                        sizes={"big": 100, "small": 10})
    jobs = [job("a", "big", 1.0), job("a", "big", 3.0), job("a", "small", 1.0), job("b", "small", 1.0),
            job("c", "small", 1.0), job("a", "unloaded", 1.0)]
    rate_a = statistics.median([0.04, 0.02])
    rate_all = statistics.median([0.04, 0.02, 0.01])
    assert costs.job_seconds(jobs) == [8.0, 6.0, 2 * 10 * rate_a, 2 * 10 * 0.01, 2 * 10 * rate_all, float("inf")]
    ordered = S.order_jobs(jobs, costs)
    assert [(j.algorithm.name, j.instance) for j in ordered][:3] == [("a", "unloaded"), ("a", "big"), ("a", "big")]
    assert S.order_jobs(jobs, S.CostModel()) == jobs  # nothing known: every job inf, plan order kept


def test_a_fresh_run_is_ordered_by_an_earlier_runs_times(tmp_path):
    """``costs_from``: a fresh results file has no times, so another run's order the jobs (read only)."""
    earlier = tmp_path / "earlier.sqlite"
    R.run_bench(config(earlier, 1), log=lambda _: None)
    before = earlier.stat().st_mtime_ns
    mean = read_trials(earlier).groupby(["algorithm", "instance", "epsilon"])["seconds"].mean().to_dict()

    fresh = tmp_path / "fresh.sqlite"
    plan = R.plan_bench(R.BenchConfig(**{**vars(config(fresh, 2)), "costs_from": str(earlier)}))
    assert plan.skipped == 0  # nothing is stored in the fresh file; the earlier file only orders
    expected = [mean[(j.algorithm.name, j.instance, j.trials[0][0])] for j in plan.jobs]
    assert all(x >= y * (1 - 1e-9) for x, y in zip(expected, expected[1:])), expected
    assert trial_keys(plan.jobs) != trial_keys(R.plan_bench(config(fresh, 2)).jobs)  # not the plan order
    assert earlier.stat().st_mtime_ns == before

    # the file's own times come first where it has them
    own = S.CostModel(seconds={("ssp", "sce", "engel_food", 1.0): 1e6})
    merged = own.merged(S.CostModel.from_file(str(earlier)))
    assert merged.seconds[("ssp", "sce", "engel_food", 1.0)] == 1e6
    assert merged.seconds[("adassp", "sce", "engel_food", 1.0)] == mean[("adassp", "engel_food", 1.0)]


def test_costs_from_a_missing_file_is_a_clear_error(tmp_path, capsys):
    from dpstats.cli import main

    missing = tmp_path / "nope.sqlite"
    rc = main(["bench", "--task", "sce", "--algorithm", "ssp", "--instance", "engel_food", "--trials", "1",
               "--results", str(tmp_path / "r.sqlite"), "--costs-from", str(missing), "--dry-run"])
    assert rc == 2
    err = capsys.readouterr().err
    assert "--costs-from" in err and str(missing) in err and "earlier run" in err
