"""The benchmark runner: every algorithm, every instance, every privacy level, every seed.

``dpstats bench`` (or :func:`run_bench`) plans the trials of a corpus, skips
those already in the results file, runs the others in worker processes under
the protocol's limits (60 s and 4 GB per trial; see :mod:`dpstats.bench.sandbox`) on
this machine or on a Dask cluster, and stores each result as it finishes (see
:mod:`dpstats.bench.store`).

Plan
----
For each selected task, algorithm of that task, instance of that task,
epsilon and seed ``0..N-1`` there is one trial, identified by ``(algorithm,
task, instance, epsilon, delta, seed)``. Defaults: all tasks, the whole roster
(:func:`dpstats.algorithms.list_configurations`: the registered algorithms,
``standard`` and the comparison classes, built-in and from the
``dpstats.algorithms`` entry-point group, and the named configurations such
as ``fwl_score[api]``; a tuned configuration runs only at the epsilon it was
tuned for), epsilon in {0.3, 1, 3, 10},
delta = 1e-6 and ``N = corpus.default_trials`` (10 for the public corpus, 30
otherwise). Trials of one algorithm on one instance at one epsilon form a
*job*, which a worker runs seed after seed with the instance loaded once.

Order
-----
The jobs are handed to the workers longest first (:func:`~dpstats.bench.schedule.order_jobs`), so that
a run ends with short jobs and no worker waits long for the last one. A job's
expected seconds come from the results file (:class:`~dpstats.bench.schedule.CostModel`): the mean
stored ``seconds`` of its algorithm on its instance at its epsilon (else at
the other epsilons), else the instance's ``n * d`` times the algorithm's
median seconds per unit of ``n * d`` on the instances it ran on. A job with
no estimate (an instance no earlier run loaded) goes first, in plan order; a
results file without earlier trials leaves the plan order (instance, then
algorithm, then epsilon) unless ``BenchConfig.costs_from`` (``--costs-from``)
names an earlier run's file, whose times then fill in. Each worker still prefers jobs of the instance it
has loaded (:class:`~dpstats.bench.sandbox.WorkerPool`), taken in this order.
The order changes when trials run, never which trials run or what is stored.

Presets
-------
``full``
    The protocol, as above (also what no preset means).
``quick``
    A smaller run for a first look (the README's main job): the first
    instance of each task of each study, epsilon in {1, 10}, 3 trials, every
    algorithm. Options given explicitly override a preset's values.

Secure mode
-----------
``--secure`` (``BenchConfig.secure``) draws every trial's Gaussian and Laplace
noise with OpenDP's samplers (:class:`~dpstats.privacy.randomness.SecureGenerator`) instead
of ``numpy.random.default_rng(seed)``: the seed then only numbers the trial,
and the trials are not reproducible bit for bit. The flag is stored with the
run (``runs.config``) and with the results file (``meta``), and a file holds
secure trials or ordinary ones, never both.

Coverage benchmark
------------------
``--inference`` (``BenchConfig.inference``) runs the coverage design of
:mod:`dpstats.bench.inference` instead of point trials: each trial draws a
resample of the instance, runs the method and records its 95 % interval and
the non-private interval of the study's SE type on the same draw, in the
``intervals`` table of the results file. Without ``--algorithm`` it runs the
roster entries that declare ``intervals = True``; a named one is run
as asked, and a release without an interval is stored as a marked failure
(``error``: ``no interval: ...``). Its jobs carry their kind of trial
(:attr:`dpstats.bench.sandbox.Job.kind`), so they run on local workers or on
Dask like point trials and store the same rows.

Examples
--------
Run the protocol on the public corpus with 2 local workers, then resume it
after an interruption with the same command::

    dpstats bench --workers 2 --results results/bench.sqlite

Benchmark your own algorithm on your own corpus::

    dpstats bench --corpus ~/my_corpus --algorithm mypkg.algos:MyMean --task mean
"""

from __future__ import annotations

import logging
import math
import os
import signal
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dpstats.bench.execution import run_dask, run_local
from dpstats.bench.model import STATUSES, AlgorithmRef, TrialResult
from dpstats.bench.progress import Progress, format_seconds
from dpstats.bench.sandbox import (
    DEFAULT_MEMORY_MB,
    DEFAULT_TIME_LIMIT,
    Job,
    Limits,
)
from dpstats.bench.schedule import CostModel, order_jobs
from dpstats.bench.store import Store
from dpstats.data.corpus import Corpus, InstanceSpec, public_corpus_path
from dpstats.data.manifest import TASKS
from dpstats.privacy.accounting import validate_budget

if TYPE_CHECKING:
    from dpstats.algorithms.configurations import Configuration

__all__ = [
    "DEFAULT_EPSILONS",
    "DEFAULT_DELTA",
    "DEFAULT_RESULTS",
    "PRESETS",
    "Preset",
    "BenchConfig",
    "Plan",
    "BenchSummary",
    "select_algorithms",
    "select_instances",
    "make_plan",
    "CostModel",
    "order_jobs",
    "run_bench",
]

#: where run_bench reports when it is given no ``log`` callback and no ``out`` file
LOGGER = logging.getLogger("dpstats.bench")

DEFAULT_EPSILONS = (0.3, 1.0, 3.0, 10.0)
DEFAULT_DELTA = 1e-6
DEFAULT_RESULTS = "results/bench.sqlite"
#: longest time a finished trial waits in an open transaction before it is committed
COMMIT_INTERVAL = 0.1


@dataclass(frozen=True)
class Preset:
    """Default values of a named run (explicit options override them).

    Attributes
    ----------
    name, description : str
    epsilons : tuple of float
    trials : int or None
        None: the corpus's ``default_trials``.
    per_study_task : int or None
        Keep the first this many instances of each task of each study (None: all).
    """

    name: str
    description: str
    epsilons: tuple[float, ...] = DEFAULT_EPSILONS
    trials: int | None = None
    per_study_task: int | None = None


PRESETS: dict[str, Preset] = {
    "full": Preset("full", "the protocol: every instance, epsilon in {0.3, 1, 3, 10}, the corpus's trials"),
    "quick": Preset("quick", "first instance per task per study, epsilon in {1, 10}, 3 trials",
                    epsilons=(1.0, 10.0), trials=3, per_study_task=1),
}


@dataclass
class BenchConfig:
    """What to run; ``None`` means the preset's (or the protocol's) default.

    Attributes
    ----------
    corpus : str or None
        Corpus folder (default: the public corpus).
    tasks : sequence of str or None
    epsilons : sequence of float or None
    delta : float or None
    algorithms : sequence of str or None
        Registry names (run for each selected task that has one) or
        ``module:object`` plugins.
    instances : sequence of str or None
        Instance ids (default: all of the selected tasks).
    trials : int or None
        Seeds ``0..trials-1``.
    results : str
        The results file.
    workers : int or None
        Local worker processes (default: the CPUs available).
    dask : str or None
        A Dask scheduler address, or ``local:N`` for a local cluster of N
        worker processes.
    preset : str or None
        ``quick`` or ``full``.
    time_limit, memory_mb : float or None
        Per-trial limits (default 60 s and 4096 MB).
    progress : bool or None
        Progress bar (default: when stderr is a terminal).
    secure : bool
        Draw the noise with OpenDP's samplers (see :mod:`dpstats.privacy.randomness`).
    inference : bool
        Run the coverage benchmark (:mod:`dpstats.bench.inference`) instead of point trials.
    costs_from : str or None
        A results file of an earlier run whose stored trial times order the
        jobs longest first where the run's own results file has none (a
        fresh run); read only.
    """

    corpus: str | None = None
    tasks: Sequence[str] | None = None
    epsilons: Sequence[float] | None = None
    delta: float | None = None
    algorithms: Sequence[str] | None = None
    instances: Sequence[str] | None = None
    trials: int | None = None
    results: str = DEFAULT_RESULTS
    workers: int | None = None
    dask: str | None = None
    preset: str | None = None
    time_limit: float | None = None
    memory_mb: float | None = None
    progress: bool | None = None
    secure: bool = False
    inference: bool = False
    costs_from: str | None = None


@dataclass(frozen=True)
class Selected:
    """A selected roster entry: its reference, its configuration and origin (builtin, plugin or entry-point)."""

    ref: AlgorithmRef
    config: Configuration
    source: str

    @property
    def cls(self) -> type:
        """The algorithm class the entry runs."""
        return self.config.cls


@dataclass
class Plan:
    """The trials of a run.

    Attributes
    ----------
    corpus : Corpus
    algorithms : list of Selected
    instances : list of InstanceSpec
    epsilons : tuple of float
    delta : float
    trials : int
    jobs : list of Job
        The trials still to run (stored ones removed).
    planned : int
        All trials of the plan.
    skipped : int
        Trials already stored.
    """

    corpus: Corpus
    algorithms: list[Selected]
    instances: list[InstanceSpec]
    epsilons: tuple[float, ...]
    delta: float
    trials: int
    jobs: list[Job]
    planned: int
    skipped: int

    @property
    def to_run(self) -> int:
        return sum(len(j) for j in self.jobs)


@dataclass
class BenchSummary:
    """What a run did.

    Attributes
    ----------
    results : Path
    run_id : int
    planned, skipped, ran : int
        Trials in the plan, already stored, and stored by this run.
    counts : dict of str to int
        Trials stored by this run, by status.
    wall_seconds : float
        Wall time of the trial phase.
    trial_seconds : float
        Sum of the trials' own ``seconds``.
    workers : int
    status : str
        ``complete``, ``interrupted`` or ``failed``.
    """

    results: Path
    run_id: int
    planned: int
    skipped: int
    ran: int
    counts: dict[str, int]
    wall_seconds: float
    trial_seconds: float
    workers: int
    status: str

    def line(self) -> str:
        by = ", ".join(f"{s} {self.counts.get(s, 0)}" for s in STATUSES)
        return (f"dpstats bench: {self.status}: {self.ran} trials in {format_seconds(self.wall_seconds)} ({by}); "
                f"{self.skipped} were already stored; results in {self.results}")


# --------------------------------------------------------------------------
# Selection and planning
# --------------------------------------------------------------------------


def _source_of(cls: type, ref: str) -> str:
    if ":" in ref:
        return "plugin"
    if cls.__module__.startswith("dpstats.algorithms"):
        return "builtin"
    return "entry-point"


def gives_intervals(entry: Any) -> bool:
    """Whether an algorithm class or roster configuration declares that its releases carry intervals."""
    return bool(entry.intervals)


def select_algorithms(names: Sequence[str] | None, tasks: Sequence[str], inference: bool = False) -> list[Selected]:
    """Resolve roster names and plugins for the given tasks.

    Parameters
    ----------
    names : sequence of str or None
        Roster names (registered algorithms and named configurations, such as
        ``fwl_score[api]``; taken in every listed task that has them) or
        ``module:object`` plugins (run on their own task if it is listed).
        None: the roster of the tasks (:func:`dpstats.algorithms.list_configurations`;
        with ``inference``: the entries that declare intervals, :func:`gives_intervals`).
    tasks : sequence of str
    inference : bool
        Selection for the coverage benchmark.

    Raises
    ------
    ValueError
        A name that no selected task has, or nothing left to run.
    """
    from dpstats.algorithms import Configuration, get_configuration, list_configurations, load_plugin

    out: list[Selected] = []
    seen: set[tuple[str, str]] = set()

    def add(config: Configuration) -> None:
        if (config.task, config.name) not in seen:
            seen.add((config.task, config.name))
            out.append(Selected(AlgorithmRef.of_configuration(config), config,
                                _source_of(config.cls, config.algorithm)))

    if not names:
        for task in tasks:
            for config in list_configurations(task):
                if not inference or gives_intervals(config):
                    add(config)
        if inference and not out:
            raise ValueError(f"--inference: no registered algorithm of task(s) {list(tasks)} gives intervals")
        return out
    for name in names:
        if ":" in name:
            cls = load_plugin(name)
            if cls.task in tasks:  # a plugin of a task not selected is left out
                add(Configuration.of(cls, name))
            continue
        found = False
        for task in tasks:
            try:
                config = get_configuration(task, name)
            except ValueError:
                continue
            add(config)
            found = True
        if not found:
            known = sorted({c.name for t in tasks for c in list_configurations(t)})
            raise ValueError(f"no algorithm {name!r} for task(s) {list(tasks)}; known: {', '.join(known) or 'none'}")
    if not out:
        raise ValueError(f"none of the algorithms {list(names)} is for the task(s) {list(tasks)}")
    return out


def select_instances(corpus: Corpus, tasks: Sequence[str], ids: Sequence[str] | None = None,
                     per_study_task: int | None = None) -> list[InstanceSpec]:
    """Instances of the tasks in corpus order, optionally only ``ids`` or the first few per study and task.

    Raises
    ------
    KeyError
        An id not in the corpus.
    """
    specs = [s for s in corpus.specs() if s.task in tasks]
    if ids:
        for i in ids:
            corpus.spec(i)  # raises KeyError for an unknown id
        wanted = set(ids)
        specs = [s for s in specs if s.id in wanted]
    if per_study_task is not None:
        kept: list[InstanceSpec] = []
        count: Counter[tuple[str, str]] = Counter()
        for s in specs:
            if count[(s.study, s.task)] < per_study_task:
                count[(s.study, s.task)] += 1
                kept.append(s)
        specs = kept
    return specs


def make_plan(corpus: Corpus, algorithms: Sequence[Selected], instances: Sequence[InstanceSpec],
              epsilons: Sequence[float], delta: float, trials: int,
              stored: set[tuple[str, str, str, float, float, int]] | None = None, secure: bool = False,
              inference: bool = False, costs: CostModel | None = None) -> Plan:
    """All trials, grouped into jobs, minus the stored ones.

    Jobs are ordered by instance (corpus order), then algorithm, then epsilon,
    and with ``costs`` then by expected seconds, longest first
    (:func:`order_jobs`; ties keep that order);
    ``secure`` marks every job secure (:attr:`dpstats.bench.sandbox.Job.secure`),
    ``inference`` makes them coverage jobs (:attr:`dpstats.bench.sandbox.Job.kind` is
    :data:`dpstats.bench.inference.COVERAGE_TRIAL`).
    """
    kind = None
    if inference:
        from dpstats.bench.inference import COVERAGE_TRIAL

        kind = COVERAGE_TRIAL
    stored = stored or set()
    root = str(corpus.root.resolve())
    jobs: list[Job] = []
    planned = skipped = 0
    for spec in instances:
        for sel in algorithms:
            if sel.ref.task != spec.task:
                continue
            tuned_eps = sel.config.epsilon
            for eps in epsilons:
                # a tuned configuration runs only at the privacy level it was tuned for
                if tuned_eps is not None and not math.isclose(float(eps), float(tuned_eps), rel_tol=1e-12):
                    continue
                todo = []
                for seed in range(trials):
                    planned += 1
                    if (sel.ref.name, spec.task, spec.id, float(eps), float(delta), seed) in stored:
                        skipped += 1
                    else:
                        todo.append((float(eps), float(delta), seed))
                if todo:
                    jobs.append(Job(sel.ref, root, spec.id, tuple(todo), secure=bool(secure), kind=kind))
    if costs is not None:
        jobs = order_jobs(jobs, costs)
    return Plan(corpus, list(algorithms), list(instances), tuple(float(e) for e in epsilons), float(delta), trials,
                jobs, planned, skipped)


def _resolve(config: BenchConfig) -> tuple[Corpus, list[str], tuple[float, ...], float, int, int | None, Limits,
                                           Preset]:
    preset = PRESETS[config.preset or "full"]
    corpus = Corpus(config.corpus) if config.corpus else Corpus(public_corpus_path())
    tasks = list(dict.fromkeys(config.tasks)) if config.tasks else list(TASKS)
    for t in tasks:
        if t not in TASKS:
            raise ValueError(f"unknown task {t!r}; choose from {TASKS}")
    eps = tuple(dict.fromkeys(float(e) for e in (config.epsilons or preset.epsilons)))
    delta = DEFAULT_DELTA if config.delta is None else float(config.delta)
    for e in eps:
        validate_budget(e, delta)
    trials = config.trials if config.trials is not None else (preset.trials or corpus.default_trials)
    if int(trials) < 1:
        raise ValueError("trials must be at least 1")
    limits = Limits(time=DEFAULT_TIME_LIMIT if config.time_limit is None else config.time_limit,
                    memory_mb=DEFAULT_MEMORY_MB if config.memory_mb is None else config.memory_mb)
    return corpus, tasks, eps, delta, int(trials), preset.per_study_task, limits, preset


def _costs(config: BenchConfig, store: Store | None) -> CostModel | None:
    """The job costs: the results file's own times, then those of ``config.costs_from``."""
    own = None if store is None else CostModel.from_store(store, config.inference)
    if not config.costs_from:
        return own
    if not Path(config.costs_from).is_file():
        raise ValueError(f"--costs-from: no results file {config.costs_from}; give the results file of an "
                         "earlier run (its trial times order this run's jobs), or leave the option out")
    other = CostModel.from_file(config.costs_from, config.inference)
    return other if own is None else own.merged(other)


def plan_bench(config: BenchConfig, store: Store | None = None) -> Plan:
    """The plan of a configuration (against a store's stored trials, if given)."""
    corpus, tasks, eps, delta, trials, per_study, _, _ = _resolve(config)
    algos = select_algorithms(config.algorithms, tasks, config.inference)
    specs = select_instances(corpus, tasks, config.instances, per_study)
    stored = None if store is None else (store.stored_interval_keys() if config.inference else store.stored_keys())
    return make_plan(corpus, algos, specs, eps, delta, trials, stored, secure=config.secure,
                     inference=config.inference, costs=_costs(config, store))


def run_bench(config: BenchConfig, out: Any = None, log: Callable[[str], None] | None = None) -> BenchSummary:
    """Run (or resume) a benchmark.

    The runner prints nothing itself: it reports the plan, progress at 25, 50
    and 75 % and an interruption as lines to ``log`` (the command line
    prints them).

    Parameters
    ----------
    config : BenchConfig
    out : file, optional
        Where the progress bar is drawn (default: stderr); when ``log`` is not
        given, the lines are written to ``out`` too.
    log : callable, optional
        Receives each line (default: written to ``out`` if given, else the
        logger ``dpstats.bench`` at level INFO).

    Returns
    -------
    BenchSummary

    Raises
    ------
    CorpusError, ValueError, KeyError
        Invalid corpus, options, or a results file of another corpus
        (:class:`~dpstats.bench.store.StoreMismatch`).
    KeyboardInterrupt
        After stopping the workers and marking the run ``interrupted``; a
        rerun resumes it.
    """
    if log is None:
        log = (lambda line: print(line, file=out, flush=True)) if out is not None else LOGGER.info
    corpus, tasks, eps, delta, trials, per_study, limits, preset = _resolve(config)
    algos = select_algorithms(config.algorithms, tasks, config.inference)
    specs = select_instances(corpus, tasks, config.instances, per_study)
    if config.inference:
        for sel in algos:
            if not gives_intervals(sel.config):
                log(f"dpstats bench: --inference: {sel.ref.task} algorithm {sel.ref.name!r} does not declare "
                    "intervals; its trials are stored as 'no interval' failures unless its releases carry one")
    workers = config.workers if config.workers is not None else (
        len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
    if workers < 1:
        raise ValueError("workers must be at least 1")
    root = str(corpus.root.resolve())
    if config.secure:
        from dpstats.privacy.randomness import require_opendp

        require_opendp()  # fail here, not in every trial
    store = Store(config.results)
    try:
        store.bind_corpus(corpus.name, root, corpus.is_public)
        store.bind_secure(config.secure)
        for sel in algos:
            store.add_algorithm(sel.config.metadata(), sel.config.ref, sel.source)
        plan = make_plan(corpus, algos, specs, eps, delta, trials,
                         store.stored_interval_keys() if config.inference else store.stored_keys(),
                         secure=config.secure, inference=config.inference, costs=_costs(config, store))
        rng_desc = ("dpstats.privacy.randomness.SecureGenerator() (OpenDP noise, fresh entropy; the seed numbers the trial)"
                    if config.secure else "numpy.random.default_rng(seed)")
        run_config = {
            "preset": preset.name, "tasks": tasks, "epsilons": list(eps), "delta": delta, "trials": trials,
            "seeds": f"0..{trials - 1}", "rng": rng_desc, "secure": bool(config.secure),
            "algorithms": [f"{s.ref.task}:{s.ref.name}" for s in algos], "algorithm_refs": [s.config.ref for s in algos],
            "instances": [s.id for s in specs], "time_limit": limits.time, "memory_mb": limits.memory_mb,
            "workers": None if config.dask else workers, "dask": config.dask, "argv": sys.argv,
            "inference": bool(config.inference),
        }
        run_id = store.start_run(corpus.name, root, corpus.is_public, run_config, plan.planned, plan.skipped)
        total = plan.to_run
        where = f"Dask at {config.dask}" if config.dask else f"{workers} local worker{'s' if workers > 1 else ''}"
        log(f"dpstats bench: {total} trials to run, {plan.skipped} of {plan.planned} already stored; "
            f"{len(algos)} algorithms, {len(specs)} instances of corpus {corpus.name!r}, epsilon "
            f"{', '.join(f'{e:g}' for e in eps)}, {trials} trials; {where}; limits {limits.time:g} s, "
            f"{limits.memory_mb:g} MB{'; secure noise (OpenDP)' if config.secure else ''}"
            f"{'; coverage trials (--inference)' if config.inference else ''}")
        bar_out = out if out is not None else sys.stderr
        bar = config.progress if config.progress is not None else bool(getattr(bar_out, "isatty", lambda: False)())
        progress = Progress(total, bar, log, bar_out)
        counts: Counter[str] = Counter()
        ran = 0
        trial_seconds = 0.0

        last_commit = time.monotonic()

        def tick() -> None:
            nonlocal last_commit
            if time.monotonic() - last_commit >= COMMIT_INTERVAL:
                store.commit()
                last_commit = time.monotonic()

        add = store.add_interval if config.inference else store.add_trial

        def on_result(r: TrialResult) -> None:
            nonlocal ran, trial_seconds
            if add(r, run_id, commit=False):
                ran += 1
                counts[r.status] += 1
                trial_seconds += r.seconds
            progress.update(r)
            tick()

        t0 = time.monotonic()
        status = "failed"
        old_term = _raise_on_sigterm()
        try:
            if plan.jobs:
                if config.dask:
                    workers = run_dask(plan.jobs, config.dask, limits, on_result, store.add_instance,
                                        store.commit) or workers
                else:
                    run_local(plan.jobs, workers, limits, on_result, store.add_instance, tick,
                              lambda ages: progress.running(ages, limits.time, workers))
            status = "complete"
        except KeyboardInterrupt:
            status = "interrupted"
            raise
        finally:
            store.commit()
            _restore_sigterm(old_term)
            progress.close()
            wall = time.monotonic() - t0
            store.finish_run(run_id, status, ran, wall)
            if status == "interrupted":
                log(f"dpstats bench: interrupted after {ran} trials; run the same command again to resume")
        return BenchSummary(Path(config.results), run_id, plan.planned, plan.skipped, ran, dict(counts), wall,
                            trial_seconds, workers, status)
    finally:
        store.close()


def _raise_on_sigterm() -> Any:
    """Turn SIGTERM into KeyboardInterrupt (so the run is marked interrupted); main thread only."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        return None

    def handler(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    return signal.signal(signal.SIGTERM, handler)


def _restore_sigterm(old: Any) -> None:
    if old is not None:
        signal.signal(signal.SIGTERM, old)
