"""Hyperparameter tuning on the public corpus, separately at each privacy level.

``dpstats tune ALGORITHM --epsilon E`` tunes one algorithm at one privacy
level:

1. **Split by study.** The public-corpus studies that have instances of the
   task are shuffled with ``--seed``; optionally only the first
   ``--max-studies`` are kept (the seeded subset); the first half (rounded
   up) are the *training* studies, the rest the *held-out* studies. All
   instances of a study fall on the same side.
2. **Grid.** If the algorithm class declares ``grid`` (a mapping from
   hyperparameter names to lists of values), the candidates are the
   Cartesian product of those lists (the default configuration is always a
   candidate). Otherwise the *scaling rule* applies: each numeric
   hyperparameter in turn (the others at their defaults) takes its default
   times 0.5 and times 2; a default in (0, 1) -- a share, probability or
   quantile -- has its odds ``v / (1 - v)`` scaled instead, so that it stays
   in (0, 1); integers are rounded (at least 1); booleans, strings, zero and
   negative values are left alone. At most :data:`MAX_CONFIGS` candidates.
3. **Train.** Every candidate runs ``--trials`` trials per training
   instance through the benchmark's trial execution
   (:mod:`dpstats.bench.sandbox`): supervised worker processes, the per-trial
   time and memory limits, the benchmark's statuses and score, and trial
   ``t`` with ``numpy.random.default_rng(t)`` for ``t = 0 .. trials - 1``,
   exactly as in ``dpstats bench``, so tuned and benchmark scores are
   comparable; candidates are ordered by the leaderboard's rule (tau@50, then the
   infinity rule) with ties going to the default, then to the earlier
   candidate.
4. **Held-out check.** The best candidate and the default run on the
   held-out studies; the tuned configuration is *accepted* only if its held-out
   rank key is strictly better than the default's (a smaller finite tau@50,
   or under the infinity rule a higher reached rate, then a smaller threshold)
   and, with ``--min-improvement F``, its finite tau@50 is at least a share
   ``F`` below the default's.

The outcome, accepted or not, is written as JSON (default: the package's
``dpstats/tuned/`` folder) with the split, the grid, every score and the
decision. :func:`register_tuned` adds each accepted configuration to the
roster as a :class:`~dpstats.algorithms.configurations.Configuration` named
``<algorithm>_tuned_eps<E>`` (e.g. ``coinpress_tuned_eps1``): the base
algorithm run with the tuned values as params, with the base algorithm's
privacy class and the attribute ``epsilon`` (the level it was tuned for, the
only one the benchmark runs it at).

Tuning uses public data only, so a tuned configuration keeps the privacy argument
of its base algorithm: its hyperparameters are fixed before it sees the data
it is scored on (the withheld corpus).
"""

from __future__ import annotations

import itertools
import json
import math
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, cast

import numpy as np
import pandas as pd

from dpstats.algorithms.configurations import TUNED_DIR, load_tuned, register_tuned, tuned_name
from dpstats.bench import evaluation as ev
from dpstats.bench import leaderboard as lbd
from dpstats.bench.model import _PROBLEMS, AlgorithmRef, Problem, TrialResult, cache_problem
from dpstats.bench.sandbox import DEFAULT_MEMORY_MB, DEFAULT_TIME_LIMIT, Job, Limits, WorkerPool

if TYPE_CHECKING:
    from dpstats.algorithms.base import Algorithm

__all__ = [
    "TUNED_DIR",
    "SCALE_FACTORS",
    "MAX_CONFIGS",
    "tuned_name",
    "scaled_values",
    "grid_for",
    "split_studies",
    "candidate_params",
    "candidate_ref",
    "run_configs",
    "run_config",
    "tune",
    "TuningResult",
    "write_tuned",
    "load_tuned",
    "register_tuned",
]

#: multipliers of the scaling rule
SCALE_FACTORS = (0.5, 2.0)
#: most candidates a grid may have
MAX_CONFIGS = 64
FORMAT = 1




# --------------------------------------------------------------------------
# Grids
# --------------------------------------------------------------------------


def scaled_values(value: Any) -> list[Any]:
    """The scaling rule's alternatives to a default value (empty when it is not tuned).

    Examples
    --------
    >>> scaled_values(10), scaled_values(4.0), scaled_values("auto"), scaled_values(True)
    ([5, 20], [2.0, 8.0], [], [])
    >>> [round(v, 4) for v in scaled_values(0.2)]  # odds 1/4 halved and doubled: 1/8 and 1/2
    [0.1111, 0.3333]
    """
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        return []
    v = float(value)
    if not math.isfinite(v) or v <= 0:
        return []
    out: list[Any] = []
    for c in SCALE_FACTORS:
        if isinstance(value, (int, np.integer)):
            w: Any = max(1, int(round(v * c)))
        elif v < 1:
            w = c * v / (1 - v + c * v)
        else:
            w = v * c
        if w != value and w not in out:
            out.append(w)
    return out


def _jsonable(x: Any) -> bool:
    try:
        json.dumps(x)
    except (TypeError, ValueError):
        return False
    return True


def grid_for(cls: type[Algorithm]) -> dict[str, Any]:
    """The candidate configurations of an algorithm class.

    Returns
    -------
    dict
        ``rule`` ("declared" or "scaled"), ``axes`` (name -> values tried)
        and ``configs`` (a list of overrides of the defaults; the first, ``{}``,
        is the default configuration).

    Raises
    ------
    ValueError
        A declared grid that names unknown hyperparameters, has values that
        cannot be written to JSON, or has more than :data:`MAX_CONFIGS`
        candidates.
    """
    defaults = {k: p.value for k, p in cls.defaults.items()}
    declared = cls.grid
    if declared:
        unknown = sorted(set(declared) - set(defaults))
        if unknown:
            raise ValueError(f"{cls.__name__}.grid names unknown hyperparameter(s) {unknown}")
        axes = {k: list(dict.fromkeys(list(v))) for k, v in declared.items()}
        for k, vals in axes.items():
            if not vals or not all(_jsonable(v) for v in vals):
                raise ValueError(f"{cls.__name__}.grid[{k!r}] must be a non-empty list of JSON values")
        n = math.prod(len(v) for v in axes.values())
        if n > MAX_CONFIGS:
            raise ValueError(f"{cls.__name__}.grid has {n} candidates; at most {MAX_CONFIGS}")
        configs: list[dict[str, Any]] = [{}]
        for combo in itertools.product(*axes.values()):
            over = {k: v for k, v in zip(axes, combo, strict=True) if v != defaults[k]}
            if over and over not in configs:
                configs.append(over)
        return {"rule": "declared", "axes": axes, "configs": configs}
    axes = {}
    configs = [{}]
    for k, v in defaults.items():
        alts = scaled_values(v)
        if alts:
            axes[k] = [v] + alts
            configs.extend({k: a} for a in alts)
    if len(configs) > MAX_CONFIGS:
        raise ValueError(f"{cls.__name__}: the scaling rule gives {len(configs)} candidates; declare a grid")
    return {"rule": "scaled", "axes": axes, "configs": configs}


# --------------------------------------------------------------------------
# Split and trials
# --------------------------------------------------------------------------


def split_studies(corpus: Any, task: str, seed: int, max_studies: int | None = None) -> dict[str, Any]:
    """Seeded train/held-out split of the studies of a task (all of a study's instances on one side).

    Raises
    ------
    ValueError
        Fewer than two studies have instances of the task.
    """
    studies = sorted({s.study for s in corpus.specs(task)})
    if max_studies is not None and max_studies < 2:
        raise ValueError("max_studies must be at least 2")
    rng = np.random.default_rng(seed)
    order = [studies[i] for i in rng.permutation(len(studies))]
    if max_studies is not None:
        order = order[:max_studies]
    if len(order) < 2:
        raise ValueError(f"tuning needs at least two studies with {task} instances; the corpus has {len(order)}")
    k = (len(order) + 1) // 2
    train, held = sorted(order[:k]), sorted(order[k:])
    return {
        "seed": int(seed), "max_studies": max_studies, "corpus": getattr(corpus, "name", None),
        "train_studies": train, "heldout_studies": held,
        "train_instances": [s.id for s in corpus.specs(task) if s.study in train],
        "heldout_instances": [s.id for s in corpus.specs(task) if s.study in held],
    }


def _problems(corpus: Any, ids: Sequence[str]) -> tuple[list[Problem], list[str]]:
    """Build the problems (data, facts, baseline) of the instances, leaving out and reporting those that fail."""
    out, skipped = [], []
    for iid in ids:
        try:
            problem = Problem.from_instance(corpus.instance(iid))
        except Exception as exc:  # noqa: BLE001 - an instance that cannot be built is left out and reported
            skipped.append(f"{iid}: {type(exc).__name__}: {exc}")
            continue
        out.append(problem)
    return out, skipped


def candidate_params(cls: type[Algorithm], params: Mapping[str, Any]) -> dict[str, Any]:
    """The hyperparameters one candidate configuration overrides: those of ``params`` that differ from the defaults.

    Raises
    ------
    ValueError
        ``params`` names a hyperparameter the class does not have.
    """
    unknown = sorted(set(params) - set(cls.defaults))
    if unknown:
        raise ValueError(f"hyperparameter(s) {unknown} are not among {cls.name}'s")
    return {k: v for k, v in params.items() if cls.defaults[k].value != v}


def candidate_ref(cls: type[Algorithm], params: Mapping[str, Any], index: int) -> AlgorithmRef:
    """The reference a worker runs one candidate configuration by: ``cls`` with ``params`` as data.

    Named ``<algorithm>[tune <index>]`` so that :func:`run_configs` can tell
    the candidates' trials apart (it stores them under the base algorithm's
    name). A class the registry does not hold under its name is found by
    its ``module:object`` path (imported by the worker), so nothing is
    registered here.
    """
    from dpstats.algorithms import get

    try:
        registered = get(cls.task, cls.name) is cls
    except ValueError:
        registered = False
    ref = cls.name if registered else f"{cls.__module__}:{cls.__qualname__}"
    return AlgorithmRef.of(cls, ref, params=candidate_params(cls, params), label=f"tune {index}")


def run_configs(cls: type[Algorithm], configs: Sequence[Mapping[str, Any]], problems: Sequence[Problem], epsilon: float,
                delta: float, trials: int, limits: Limits | None = None, workers: int = 1,
                pool: WorkerPool | None = None) -> list[pd.DataFrame]:
    """Run ``trials`` trials of each configuration on each problem through the benchmark's trial execution.

    Every trial runs as in ``dpstats bench`` (:mod:`dpstats.bench.sandbox`): in
    a supervised worker process under the time and memory limits, with
    ``rng = numpy.random.default_rng(seed)`` for seeds ``0 .. trials - 1``, and
    it gets the benchmark's statuses (``ok``, ``declined``, ``error``,
    ``timeout``, ``memory``) and score.

    Parameters
    ----------
    cls : type
        The algorithm class.
    configs : sequence of mapping
        Overrides of the defaults, one per candidate (``{}``: the defaults).
    problems : sequence of Problem
        Built in this process (:meth:`Problem.from_instance`); forked workers
        inherit them.
    epsilon, delta : float
    trials : int
    limits : Limits, optional
        Default: the protocol's 60 s and 4096 MB per trial.
    workers : int
        Worker processes (when ``pool`` is not given).
    pool : WorkerPool, optional
        A pool to use; it must be a ``fork`` pool whose workers are started
        after this call caches the problems (e.g. a fresh one).

    Returns
    -------
    list of DataFrame
        One trials table per configuration (see :mod:`dpstats.bench.evaluation`),
        with the base algorithm's name.
    """
    refs = [candidate_ref(cls, over, k) for k, over in enumerate(configs)]
    corpus = str(Path(f"<tuning {uuid.uuid4().hex}>").resolve())  # a cache key, not a folder
    for p in problems:
        cache_problem(corpus, p)  # forked workers find the problems loaded
    trial_list = tuple((float(epsilon), float(delta), t) for t in range(int(trials)))
    jobs = [Job(ref, corpus, p.instance, trial_list) for ref in refs for p in problems]
    by_name: dict[str, list[dict[str, Any]]] = {ref.name: [] for ref in refs}

    def on_result(r: TrialResult) -> None:
        row = r.to_dict()
        row.pop("estimate", None)
        row["fallback"] = bool(r.fallback)  # the trials table's flag (read_trials' reading of the stored reason)
        by_name[r.algorithm].append(row)

    try:
        if pool is not None:
            pool.run(jobs, on_result, limits=limits)
        else:
            with WorkerPool(workers, limits or Limits(), method="fork") as own:
                own.run(jobs, on_result)
    finally:
        for p in problems:
            _PROBLEMS.pop((corpus, p.instance), None)
    out = []
    for ref in refs:
        df = pd.DataFrame(by_name[ref.name])
        df["algorithm"] = cls.name
        out.append(df.sort_values(["instance", "seed"], kind="stable").reset_index(drop=True))
    return out


def run_config(cls: type[Algorithm], params: Mapping[str, Any], problems: Sequence[Problem], epsilon: float, delta: float,
               trials: int, limits: Limits | None = None, workers: int = 1) -> pd.DataFrame:
    """Trials of one configuration (overrides ``params`` of the defaults); see :func:`run_configs`."""
    return run_configs(cls, [dict(params)], problems, epsilon, delta, trials, limits, workers)[0]


def _score(df: pd.DataFrame, problems: Sequence[Problem]) -> dict[str, Any]:
    inst = pd.DataFrame({"instance": [p.instance for p in problems], "study": [p.study for p in problems]})
    prep = ev.prepare(df)
    p = ev.step_profile(prep, inst)
    reach = float(p.reach)
    key = lbd.rank_key(p.tau50, reach, p.reach_tau)
    counts = prep["status"].value_counts()
    return {"tau50": p.tau50, "reaches": reach, "reach_tau": p.reach_tau, "key": key,
            "statuses": {k: int(v) for k, v in counts.items()}}


# --------------------------------------------------------------------------
# Tuning
# --------------------------------------------------------------------------


@dataclass
class TuningResult:
    """What :func:`tune` found, and why (see :meth:`to_json`)."""

    algorithm: str
    task: str
    epsilon: float
    delta: float
    name: str
    accepted: bool
    params: dict[str, Any]
    default_params: dict[str, Any]
    grid: dict[str, Any]
    split: dict[str, Any]
    trials: int
    train_scores: list[dict[str, Any]]
    heldout: dict[str, Any]
    decision: str
    skipped_instances: list[str] = field(default_factory=list)
    min_improvement: float = 0.0
    limits: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready description (infinite numbers as the string ``"inf"``)."""
        from dpstats import __version__

        def clean(x: Any) -> Any:
            if isinstance(x, float) and not math.isfinite(x):
                return "inf" if x > 0 else ("-inf" if x < 0 else None)
            if isinstance(x, dict):
                return {str(k): clean(v) for k, v in x.items() if k != "key"}
            if isinstance(x, (list, tuple)):
                return [clean(v) for v in x]
            if isinstance(x, (np.integer,)):
                return int(x)
            if isinstance(x, (np.floating,)):
                return clean(float(x))
            return x

        return cast(dict[str, Any], clean({
            "format": FORMAT, "name": self.name, "algorithm": self.algorithm, "task": self.task,
            "epsilon": self.epsilon, "delta": self.delta, "accepted": self.accepted, "params": self.params,
            "default_params": self.default_params, "grid": self.grid, "split": self.split, "trials": self.trials,
            "trial_seeds": "numpy.random.default_rng(t) for t = 0 .. trials-1 (as dpstats bench)",
            "limits": self.limits,
            "scores": {"train": self.train_scores, "heldout": self.heldout}, "decision": self.decision,
            "skipped_instances": self.skipped_instances, "min_improvement": self.min_improvement,
            "dpstats_version": __version__,
            "created": datetime.now(UTC).strftime("%Y-%m-%d"),
        }))


def _resolve(algorithm: str | type[Algorithm], task: str | None) -> type[Algorithm]:
    from dpstats.algorithms import get, list_algorithms

    if not isinstance(algorithm, str):
        if task is not None and algorithm.task != task:
            raise ValueError(f"algorithm {algorithm.name!r} is for task {algorithm.task!r}, not {task!r}")
        return algorithm
    if ":" in algorithm:
        from dpstats.algorithms import load_plugin

        cls = load_plugin(algorithm)
        return _resolve(cls, task)
    if task is not None:
        return get(task, algorithm)
    tasks = [c.task for c in list_algorithms() if c.name == algorithm]
    if not tasks:
        return _unknown(algorithm)
    if len(tasks) > 1:
        raise ValueError(f"algorithm {algorithm!r} exists for tasks {tasks}; choose one with --task")
    return get(tasks[0], algorithm)


def _unknown(name: str) -> NoReturn:
    from dpstats.algorithms import list_algorithms

    known = ", ".join(sorted({c.name for c in list_algorithms()}))
    raise ValueError(f"unknown algorithm {name!r}; known: {known}")


def tune(algorithm: str | type[Algorithm], epsilon: float, task: str | None = None, trials: int = 10, seed: int = 0,
         corpus: Any = None, delta: float = 1e-6, max_studies: int | None = None,
         time_limit: float = DEFAULT_TIME_LIMIT, min_improvement: float = 0.0,
         log: Callable[[str], None] | None = None, memory_mb: float = DEFAULT_MEMORY_MB,
         workers: int = 1) -> TuningResult:
    """Tune an algorithm's hyperparameters at one privacy level.

    Parameters
    ----------
    algorithm : str or Algorithm subclass
        A registry name (``task`` picks among tasks that share it) or a class.
    epsilon : float
    task : str, optional
    trials : int
        Trials per instance and candidate.
    seed : int
        Seeds the split (the trials use seeds ``0 .. trials - 1``, as in the benchmark).
    corpus : Corpus, optional
        Default: the public corpus.
    delta : float
    max_studies : int, optional
        Use only this many studies (a seeded subset) to save time.
    time_limit : float
        Wall-clock seconds a trial may run before its worker is killed (``timeout``).
    min_improvement : float
        When both held-out tau@50 are finite, the tuned one must be at most
        ``(1 - min_improvement)`` times the default's (0: any strict
        improvement, the protocol's rule).
    log : callable, optional
        Receives progress lines.
    memory_mb : float
        Memory a trial may use (``memory`` beyond it).
    workers : int
        Worker processes running trials at once.

    Returns
    -------
    TuningResult
    """
    from dpstats.data.corpus import Corpus, public_corpus_path
    from dpstats.privacy.accounting import validate_budget

    validate_budget(epsilon, delta)
    if trials < 1:
        raise ValueError("trials must be at least 1")
    cls = _resolve(algorithm, task)
    limits = Limits(time=float(time_limit), memory_mb=float(memory_mb))
    corpus = corpus if corpus is not None else Corpus(public_corpus_path())
    say = log or (lambda _msg: None)
    grid = grid_for(cls)
    split = split_studies(corpus, cls.task, seed, max_studies)
    defaults = {k: p.value for k, p in cls.defaults.items()}
    train, skipped = _problems(corpus, split["train_instances"])
    held, skipped2 = _problems(corpus, split["heldout_instances"])
    name = tuned_name(cls.name, epsilon)
    base: dict[str, Any] = dict(algorithm=cls.name, task=cls.task, epsilon=float(epsilon), delta=float(delta), name=name,
                default_params=defaults, grid=grid, split=split, trials=int(trials),
                skipped_instances=skipped + skipped2,
                limits={"time": limits.time, "memory_mb": limits.memory_mb})
    if not train or not held:
        raise ValueError("no instance of the training or held-out studies could be built")
    if len(grid["configs"]) == 1:
        return TuningResult(**base, accepted=False, params={}, train_scores=[], heldout={},
                            decision="no hyperparameter to tune (no grid and no numeric default)")
    scores = []
    tables = run_configs(cls, grid["configs"], train, epsilon, delta, trials, limits, workers)
    for k, (over, table) in enumerate(zip(grid["configs"], tables, strict=True)):
        sc = _score(table, train)
        scores.append({"params": over, **sc})
        say(f"  [{k + 1}/{len(grid['configs'])}] {over or 'defaults'}: train tau@50 = "
            f"{lbd.format_tau50(sc['tau50'], sc['reaches'])}")
    best = min(range(len(scores)), key=lambda i: (scores[i]["key"], i))
    best_over = grid["configs"][best]
    if not best_over:
        return TuningResult(**base, accepted=False, params={}, train_scores=scores, heldout={},
                            decision="the defaults are best on the training studies")
    d_tab, t_tab = run_configs(cls, [{}, best_over], held, epsilon, delta, trials, limits, workers)
    d_sc, t_sc = _score(d_tab, held), _score(t_tab, held)
    accepted = t_sc["key"] < d_sc["key"]
    if accepted and math.isfinite(d_sc["tau50"]):
        accepted = t_sc["tau50"] <= (1.0 - min_improvement) * d_sc["tau50"]

    def fmt(sc: Mapping[str, Any]) -> str:
        return f"{sc['tau50']:.6g}" if math.isfinite(sc["tau50"]) else lbd.format_tau50(sc["tau50"], sc["reaches"])

    need = f" by at least {min_improvement:.0%}" if min_improvement > 0 else ""
    decision = (f"held-out tau@50 {fmt(t_sc)} (tuned) vs {fmt(d_sc)} (default): "
                + ("tuned variant accepted" if accepted else f"not better{need}, rejected"))
    say("  " + decision)
    base["min_improvement"] = float(min_improvement)
    return TuningResult(**base, accepted=bool(accepted), params=dict(best_over), train_scores=scores,
                        heldout={"default": {"params": {}, **d_sc}, "tuned": {"params": best_over, **t_sc}},
                        decision=decision)


def write_tuned(result: TuningResult, directory: str | Path | None = None) -> Path:
    """Write a result as ``<task>_<algorithm>_eps<E>.json`` (replacing an earlier one)."""
    d = Path(directory) if directory is not None else TUNED_DIR
    d.mkdir(parents=True, exist_ok=True)
    path = d / f"{result.task}_{result.algorithm}_eps{result.epsilon:g}.json"
    path.write_text(json.dumps(result.to_json(), indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return path
