"""The audit driver: run an algorithm many times on neighbouring data sets and bound its epsilon from below.

Design
------
``trials`` runs in total, each with its own seed (``default_rng([seed, i])``):

* runs ``0 .. T/4``: *fitting* runs, alternately on ``D`` and ``D'``; the
  distinguishing statistics (:mod:`dpstats.audit.attack`) are fitted on them;
* runs ``T/4 .. T/2``: *selection* runs, alternately on ``D`` and ``D'``; for
  each estimator the statistic, its orientation and the threshold that give the
  best bound here are chosen;
* runs ``T/2 .. T``: *evaluation* runs, each on ``D'`` or ``D`` by an
  independent fair coin (as the one-run theorem needs); every bound is
  computed on these runs only, at the thresholds chosen before, so no
  correction for the search is needed.

Running
-------
Each release is one call (:func:`~dpstats.audit.releases.release_once`) of a
:class:`~dpstats.bench.sandbox.CallJob` in the benchmark's
:class:`~dpstats.bench.sandbox.WorkerPool`, under its per-release limits
(:class:`~dpstats.bench.sandbox.Limits`: 60 s, 4096 MB by default). A release
that exceeds a limit is a ``timeout`` or ``memory`` outcome and a worker that
dies an ``error``; like a decline, each is scored as a category by the
statistics (:mod:`dpstats.audit.attack`) and counted in the result.

Estimators and what they refute
-------------------------------
``clopper_pearson`` and ``one_run`` refute the bare ``(epsilon, delta)``
claim. ``zcdp`` refutes the algorithm's own ledger when it accounts in zCDP
(unit ``rho``): a lower bound on ``rho`` above the ``rho`` charged. ``gdp``
refutes a ledger in Gaussian DP (unit ``mu^2``): a lower bound on ``mu`` above
the ``mu`` charged; for other ledgers its epsilon rests on a Gaussian trade-off
curve and is shown for information only. The estimators that count split
``alpha = 1 - confidence`` equally (Bonferroni), so the reported
``epsilon_lower`` (their maximum) holds with probability ``confidence``.

The audit also reads the ledger of every run: a ledger that charges more than
the budget, or a release that reports more, is a violation by itself; and a
ledger that charges the budget for noise that was not drawn shows up through
the ``zcdp`` / ``gdp`` estimators, whose claim is the ledger's.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

import numpy as np
from numpy.typing import ArrayLike
from scipy import special

from dpstats.algorithms.release import AlgorithmSpec, Budget
from dpstats.audit import bounds as B
from dpstats.audit.attack import (
    DECLINED,
    ERROR,
    FALLBACK,
    KIND_NAMES,
    KINDS,
    MEMORY,
    RELEASED,
    STATISTICS,
    TIMEOUT,
    Runs,
    fit_statistic,
)
from dpstats.audit.exposure import exposure, summarize_exposure
from dpstats.audit.neighbours import CANARY_MODES, DESIGNS, Neighbours, from_instance, generated
from dpstats.audit.power import audit_power, min_trials
from dpstats.audit.releases import POOL_STATUS, SCORES, run_releases
from dpstats.audit.resolve import resolve_algorithm, resolve_configuration
from dpstats.audit.result import AuditResult
from dpstats.bench.sandbox import DEFAULT_MEMORY_MB, DEFAULT_TIME_LIMIT, Limits
from dpstats.privacy.accounting import zcdp_epsilon

if TYPE_CHECKING:
    from dpstats.algorithms import Algorithm

__all__ = ["AuditResult", "audit", "resolve_algorithm", "resolve_configuration", "ESTIMATORS"]

ESTIMATORS = ("clopper_pearson", "one_run", "zcdp", "gdp")
#: clusters of the clustered mirror design the search adds (at most n / 2): with the canary in a cluster of its
#: own, D and D' differ in their count of clusters, so a branch on that count can show
SEARCH_CLUSTERS = 50
_MAX_THRESHOLDS = 300
_MAX_MESSAGES = 3


# --------------------------------------------------------------------------
# Input checks
# --------------------------------------------------------------------------


def _limits_dict(limits: Limits | None) -> dict[str, float] | None:
    return None if limits is None else {"time": limits.time, "memory_mb": limits.memory_mb}


def _limits_text(limits: Limits | None) -> str:
    return "none (not isolated)" if limits is None else f"{limits.time:g} s, {limits.memory_mb:g} MB per release"


# --------------------------------------------------------------------------
# Bounds on the evaluation runs
# --------------------------------------------------------------------------


def _grid(s_in: np.ndarray, s_out: np.ndarray) -> np.ndarray:
    allv = np.unique(np.concatenate([s_in, s_out]))
    if allv.size > _MAX_THRESHOLDS:
        allv = np.unique(np.quantile(allv, np.linspace(0, 1, _MAX_THRESHOLDS), method="inverted_cdf"))
    return np.unique(np.concatenate([allv, [np.inf]]))


def _counts(s_in: np.ndarray, s_out: np.ndarray, t: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    tp = s_in.size - np.searchsorted(np.sort(s_in), t, side="left")
    fp = s_out.size - np.searchsorted(np.sort(s_out), t, side="left")
    return tp, fp


def _zcdp_values(tp: ArrayLike, n_in: int, fp: ArrayLike, n_out: int, a: float) -> np.ndarray:
    p = B.clopper_pearson_lower(tp, n_in, a)
    q = B.clopper_pearson_upper(fp, n_out, a)
    return np.array([B.zcdp_rho_lower_bound(pi, qi)
                     for pi, qi in zip(np.atleast_1d(p), np.atleast_1d(q), strict=False)])


def _value(est: str, tp: ArrayLike, n_in: int, fp: ArrayLike, n_out: int, alpha_k: float, delta: float,
           m_total: int | None = None) -> np.ndarray:
    tp, fp = np.asarray(tp), np.asarray(fp)
    if est == "clopper_pearson":
        return B._cp_values(tp, n_in, fp, n_out, alpha_k / 2.0, delta)
    if est == "gdp":
        return B._gdp_values(tp, n_in, fp, n_out, alpha_k / 2.0, delta)
    if est == "zcdp":
        return _zcdp_values(tp, n_in, fp, n_out, alpha_k / 2.0)
    # one run: guesses = runs at or above the threshold (m = all runs)
    m = m_total or (n_in + n_out)
    r = tp + fp
    prec = np.where(r > 0, tp / np.maximum(r, 1), 0.0)
    vals = np.zeros(tp.size)
    best = 0.0
    for i in np.argsort(-prec, kind="stable"):
        if r[i] == 0 or prec[i] <= special.expit(best):
            continue
        vals[i] = B.epsilon_one_run(m, int(r[i]), int(tp[i]), delta, 1.0 - alpha_k).epsilon
        best = max(best, vals[i])
    return vals


def audit(algorithm: str | type, task: str | None = None, epsilon: float = 1.0, delta: float = 1e-6,
          trials: int = 20000, confidence: float = 0.95, seed: int = 0, workers: int | None = None,
          instance: str | None = None, corpus: str | None = None, n: int = 1000, regressors: int = 2, columns: int = 3,
          canary: str = "at", design: str = "search", params: dict[str, Any] | None = None,
          neighbours: Neighbours | None = None, levels: int | None = None, clusters: int | None = None,
          time_limit: float = DEFAULT_TIME_LIMIT,
          memory_mb: float = DEFAULT_MEMORY_MB, isolate: bool = True, search_share: float = 0.25,
          score: str | None = None,
          log: Callable[[str], None] | None = None) -> AuditResult:
    """Audit one algorithm at one privacy level.

    Parameters
    ----------
    algorithm : str or Algorithm subclass
        Roster name (a registered algorithm, or a named configuration such as
        ``fwl_score[api]``, run with its params) or ``module:object`` plugin.
    task : str, optional
        Needed when the name exists for several tasks.
    epsilon, delta : float
        The claim audited (the budget the algorithm is run with).
    trials : int
        Releases in total (a quarter to fit the statistics, a quarter to choose
        thresholds, half to evaluate).
    confidence : float in (0, 1)
    seed : int
    workers : int, optional
        Worker processes of the benchmark's :class:`~dpstats.bench.sandbox.WorkerPool`
        (default: the number of CPUs, at most 2).
    instance, corpus : str, optional
        Use this corpus instance as ``D`` (default: a generated data set).
    n, regressors, columns : int
        Size of the generated data set, its regressors (sce, linreg) and its columns (mean).
    canary : {"at", "beyond"}
        Canary at the public bounds or beyond them.
    design : {"both", "search", "mirror", "inside", "concentrated", "heavy"}
        Generated data sets (:func:`~dpstats.audit.neighbours.generated`):
        ``"both"`` audits mirror and inside, each with half the trials and
        half of ``alpha``; ``"search"`` runs a pilot of every design on
        ``search_share`` of the trials (its own seeds), keeps the design whose
        pilot separates ``D`` from ``D'`` best, and runs the counted audit on
        it with the other trials and all of ``alpha`` (the choice is made on
        releases that the bound does not use; the default, since a guard,
        decline or branch that reacts to a row far from the others is seen
        only on the concentrated design); ignored with ``instance``. Without
        ``clusters`` the search also tries the mirror design sampled in
        :data:`SEARCH_CLUSTERS` clusters (a behaviour that depends on the
        count of clusters), and without ``score``, for a method that declares
        intervals, each design scored on the estimate and on the interval.
    params : dict, optional
        Hyperparameters of the algorithm (over a named configuration's).
    neighbours : Neighbours, optional
        A ready pair (overrides ``instance`` and the generated data).
    levels : int, optional
        Generated data on a grid of this many values per column (see
        :func:`~dpstats.audit.neighbours.generated`).
    clusters : int, optional
        Generated data sampled in this many clusters, named in the facts, so
        that a method's cluster-robust path runs; the canary joins a new
        cluster (see :func:`~dpstats.audit.neighbours.generated`).
    time_limit, memory_mb : float
        Per-release limits of the worker pool (the benchmark's protocol: 60 s,
        4096 MB). A release that exceeds one is killed and counted as a
        ``timeout`` or ``memory`` outcome, scored like a decline.
    isolate : bool
        Run the releases in the worker pool under the limits (default);
        ``False`` runs them in this process without limits (for debugging).
    search_share : float in (0, 1)
        With ``design="search"``, the share of the trials spent on the pilots.
    score : {"estimate", "interval"}, optional
        What of a release the statistics see besides its outcome category:
        the estimate, or also its standard error, degrees of freedom and bias
        bound (:func:`scored_values`), which carry what an interval method
        releases beyond the estimate. Default: the estimate, except that the
        search chooses between the two for a method that declares intervals
        (``intervals``).

    Returns
    -------
    AuditResult
    """
    t_start = time.perf_counter()
    from dpstats.audit.bounds import check_confidence

    if score is not None and score not in SCORES:
        raise ValueError(f"--score must be one of {', '.join(SCORES)}, got {score!r}")

    try:
        conf = check_confidence(confidence)
    except ValueError:
        raise ValueError(f"--confidence must lie in (0, 1), got {confidence!r}") from None
    try:
        eps = float(epsilon)
        dlt = float(delta)
    except (TypeError, ValueError):
        raise ValueError(f"--epsilon / --delta must be numbers, got {epsilon!r}, {delta!r}") from None
    if not (math.isfinite(eps) and eps > 0):
        raise ValueError(f"--epsilon must be a positive finite number, got {epsilon!r}")
    if not (0.0 <= dlt < 1.0):
        raise ValueError(f"--delta must lie in [0, 1), got {delta!r}")
    if canary not in CANARY_MODES:
        raise ValueError(f"--canary must be one of {CANARY_MODES}, got {canary!r}")
    if design not in DESIGNS + ("both", "search"):
        raise ValueError(f"--design must be one of {DESIGNS + ('both', 'search')}, got {design!r}")
    if not (isinstance(search_share, (int, float)) and 0.0 < search_share < 1.0):
        raise ValueError(f"--search-share must lie in (0, 1), got {search_share!r}")
    config = resolve_configuration(algorithm, task)
    cls, name, task = config.cls, config.name, config.task
    generated_data = neighbours is None and instance is None
    k_designs = 2 if (design == "both" and generated_data) else 1
    need = k_designs * min_trials(eps, dlt, 1.0 - (1.0 - conf) / k_designs)
    if design == "search" and generated_data:
        need = int(math.ceil(need / (1.0 - search_share)))
    if int(trials) != trials or trials < need:
        raise ValueError(f"--trials: {trials!r} releases cannot give any bound above the claimed epsilon = {eps:g} "
                         f"at confidence {conf:g}; at least {need} are needed")
    trials = int(trials)
    params = {**config.params, **dict(params or {})}  # a named configuration's params, under the caller's
    try:
        cls(**params)
    except Exception as exc:  # noqa: BLE001
        raise ValueError(f"algorithm: constructing {cls.__name__} raised {type(exc).__name__}: {exc}") from None
    if workers is None:
        workers = max(1, min(2, os.cpu_count() or 1))
    if int(workers) != workers or workers < 1:
        raise ValueError(f"--workers must be at least 1, got {workers!r}")
    for arg, v in (("--time-limit", time_limit), ("--memory-limit", memory_mb)):
        if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
            raise ValueError(f"{arg} must be a positive number (seconds, MB per release), got {v!r}")
    lim = Limits(time=float(time_limit), memory_mb=float(memory_mb)) if isolate else None
    for arg, iv, lo in (("--n", n, 10), ("--columns", columns, 1), ("--levels", levels, 2),
                        ("--clusters", clusters, 2)):
        if iv is not None and (isinstance(iv, bool) or not isinstance(iv, (int, np.integer)) or iv < lo):
            raise ValueError(f"{arg} must be an integer of at least {lo}, got {iv!r}")
    if clusters is not None and clusters > n:
        raise ValueError(f"--clusters must be at most --n = {n}, got {clusters!r}")
    if neighbours is None and instance is not None:
        from dpstats.data.corpus import Corpus, CorpusError

        try:
            inst = (Corpus(corpus) if corpus else Corpus.public()).instance(instance)
        except (CorpusError, KeyError, ValueError) as exc:
            raise ValueError(f"--instance: {exc.args[0] if exc.args else exc}") from None
        if inst.task != task and not (inst.task == "sce" and task == "linreg"):
            raise ValueError(f"--instance: {instance!r} is a {inst.task} instance; algorithm {name!r} is {task}")
        neighbours = from_instance(inst, canary)
        if neighbours.facts.task != task:
            from dpstats.audit.neighbours import with_task

            neighbours = with_task(neighbours, task)
    used, search = 0, None  # releases spent on a design search's pilots, and their scores
    if neighbours is not None:
        pairs = [neighbours]
    elif design == "search":
        designs = [(d, clusters) for d in DESIGNS]
        if clusters is None:
            designs.append(("mirror", min(SEARCH_CLUSTERS, n // 2)))
        cands = [generated(task, n=n, seed=seed, mode=canary, regressors=regressors, columns=columns, design=d,
                           levels=levels, clusters=k) for d, k in designs]
        scores = (score,) if score is not None else ("estimate", "interval") if cls.intervals else ("estimate",)
        pilot = int(search_share * trials) // (len(cands) * len(scores))
        chosen, score, search = _search_design(cls, cands, scores, eps, dlt, conf, pilot, seed, workers, params,
                                               log, lim, name)
        pairs, used = [chosen], pilot * len(cands) * len(scores)
    elif design == "both":
        pairs = [generated(task, n=n, seed=seed, mode=canary, regressors=regressors, columns=columns, design=d,
                           levels=levels, clusters=clusters) for d in ("mirror", "inside")]
    else:
        pairs = [generated(task, n=n, seed=seed, mode=canary, regressors=regressors, columns=columns, design=design,
                           levels=levels, clusters=clusters)]
    score = score or "estimate"
    if len(pairs) == 1:
        res = _audit_pair(cls, pairs[0], eps, dlt, conf, trials - used, seed, workers, params, log, t_start, lim,
                          name, score=score)
    else:
        conf_each = 1.0 - (1.0 - conf) / len(pairs)
        parts = [_audit_pair(cls, nb, eps, dlt, conf_each, trials // len(pairs), seed + k, workers, params, log,
                             time.perf_counter(), lim, name, score=score) for k, nb in enumerate(pairs)]
        res = _merge(parts, conf, time.perf_counter() - t_start)
    if search is not None:
        res.data = {**res.data, "search": search}
        tried = ", ".join(f"{x['design']}{' (interval)' if x['scored'] == 'interval' else ''} {x['score']:.3g}"
                          for x in search)
        what = "designs" if len(search) == len({x["design"] for x in search}) else "designs and scores"
        res.notes.append(f"design chosen by a search: pilots of {used // len(search)} releases on each of "
                         f"{len(search)} {what} (pilot bounds: {tried}); the bound comes from {trials - used} "
                         f"other releases on {_label(pairs[0])}")
        res.trials_pilot = used
    if score == "interval":
        res.notes.append("scored: each release's estimate, log standard error, degrees of freedom and bias bound "
                         "(score='interval')")
    res.power = audit_power(eps, dlt, trials - used, conf, res.bounds, len(pairs))
    return res


def _search_design(cls: type[Algorithm], cands: list[Neighbours], scores: tuple[str, ...], eps: float, dlt: float,
                   conf: float, pilot: int, seed: int, workers: int, params: dict[str, Any],
                   log: Callable[[str], None] | None, limits: Limits | None, name: str | None = None,
                   ) -> tuple[Neighbours, str, list[dict[str, Any]]]:
    """The candidate pair and score whose pilot audit separates best, and every pilot's score.

    Each pilot is a small audit on its own seeds (``seed + 7919 (k + 1)``, one ``k`` per pair and score), so the
    counted audit that follows reuses none of its releases. The score is the pilot's counted lower bound; ties
    (typically all 0 with few releases) go to the largest bound of any estimator, then to the exposure of the
    canary runs, then to the first candidate (the first design, scored on the estimate).
    """
    rows: list[dict[str, Any]] = []
    for k, (nb, sc) in enumerate((nb, sc) for nb in cands for sc in scores):
        r = _audit_pair(cls, nb, eps, dlt, conf, pilot, seed + 7919 * (k + 1), workers, params, log,
                        time.perf_counter(), limits, name, score=sc)
        info = max((b["epsilon"] for b in r.bounds if math.isfinite(b["epsilon"])), default=0.0)
        if any(math.isinf(b["epsilon"]) for b in r.bounds):
            info = math.inf
        rows.append({"design": _label(nb), "scored": sc, "score": float(r.epsilon_lower), "any_bound": float(info),
                     "exposure": float(r.exposure.get("median_bound", 0.0) or 0.0), "trials": pilot, "k": k})
    best = max(rows, key=lambda x: (x["score"], x["any_bound"], x["exposure"], -x["k"]))
    nb, sc = cands[best["k"] // len(scores)], scores[best["k"] % len(scores)]
    return nb, sc, [{k: v for k, v in x.items() if k != "k"} for x in rows]


def _label(nb: Neighbours) -> str:
    """A generated pair's design, with its count of clusters when its rows are clustered."""
    k = None if nb.base.clusters is None else len(np.unique(np.asarray(nb.base.clusters)))
    return nb.source if k is None else f"{nb.source}, {k} clusters"


def _merge(parts: list[AuditResult], conf: float, seconds: float) -> AuditResult:
    """One result from audits of several designs (each at its share of alpha)."""
    first = parts[0]
    bounds_all, reasons, notes = [], [], []
    for p in parts:
        src = p.data["source"]
        bounds_all += [{**b, "design": src} for b in p.bounds]
        reasons += [f"[{src}] {r}" for r in p.reasons]
        notes += [f"[{src}] {n}" for n in p.notes]
    best = max(parts, key=lambda p: p.epsilon_lower)
    outcomes = {p.data["source"]: p.outcomes for p in parts}
    errors = {"count": sum(p.errors["count"] for p in parts),
              "messages": [m for p in parts for m in p.errors["messages"]][:_MAX_MESSAGES],
              "declines": {k: v for p in parts for k, v in p.errors["declines"].items()},
              "fallbacks": {k: v for p in parts for k, v in p.errors["fallbacks"].items()},
              **{k: sum(p.errors[k] for p in parts) for k in ("declined", "timeouts", "memory", "worker_deaths",
                                                               "fallback")},
              "limit_messages": [m for p in parts for m in p.errors["limit_messages"]][:_MAX_MESSAGES],
              "limits": first.errors["limits"]}
    trials = sum(p.trials for p in parts)
    return AuditResult(
        algorithm=first.algorithm, task=first.task, interpretation=first.interpretation,
        epsilon_claimed=first.epsilon_claimed, delta=first.delta, epsilon_lower=best.epsilon_lower, confidence=conf,
        trials=trials, violation=any(p.violation for p in parts), reasons=reasons, bounds=bounds_all,
        ledger=best.ledger, exposure={**best.exposure, "design": best.data["source"]}, outcomes=outcomes,
        errors=errors, data={**best.data, "designs": [p.data for p in parts]}, seconds=seconds,
        seconds_per_release=sum(p.seconds_per_release * p.trials for p in parts) / trials, workers=first.workers,
        seed=first.seed, notes=notes,
    )


def _audit_pair(cls: type[Algorithm], nb: Neighbours, eps: float, dlt: float, conf: float, trials: int, seed: int,
                workers: int, params: dict[str, Any], log: Callable[[str], None] | None,
                t_start: float, limits: Limits | None, name: str | None = None, *,
                score: str = "estimate") -> AuditResult:
    """Audit ``cls`` with ``params`` on one pair of neighbours (the module docstring's design).

    ``name`` is the roster name reported (default: the class's).
    """
    task = cls.task
    name = name or cls.name
    dim = 1 if task == "sce" else nb.facts.d
    if score == "interval":
        dim = 3 * dim + 1

    # the design: fitting, selection (alternating) and evaluation (fair coins) runs
    q = trials // 4
    idx = np.arange(trials)
    sides = np.zeros(trials, dtype=np.int8)
    sides[: 2 * q] = idx[: 2 * q] % 2
    coin = np.random.default_rng(np.random.SeedSequence([int(seed), 0xC01]))
    sides[2 * q:] = coin.integers(0, 2, size=trials - 2 * q)
    payload = {"spec": AlgorithmSpec.of(cls, params), "neighbours": nb, "budget": Budget(eps, dlt), "seed": seed,
               "score": score}
    if log:
        log(f"auditing {name} ({task}) at epsilon = {eps:g}: {trials} releases on {workers} worker(s)")
    calls = run_releases(payload, idx, sides, workers, limits, log)

    values = np.full((trials, dim), np.nan)
    kind = np.zeros(trials, dtype=np.int8)
    units: dict[str, float] = {}
    reported = reported_delta = 0.0
    empty = mixed = deaths = 0
    messages: list[str] = []
    limit_messages: list[str] = []
    declines: dict[str, int] = {}
    fallbacks: dict[str, int] = {}
    run_seconds = 0.0
    for c in calls:
        i = int(c.item[0])
        run_seconds += c.seconds
        if c.status != "ok":  # the pool's verdict: a time-out, a memory overrun or a worker that died
            kind[i] = POOL_STATUS.get(c.status, ERROR)
            deaths += c.status == "error"
            if len(limit_messages) < _MAX_MESSAGES:
                limit_messages.append(str(c.message)[:300])
            continue
        k, est, tot, rep_eps, rep_dlt, msg = c.value
        kind[i] = k
        if k == RELEASED:
            values[i] = est
        elif k == DECLINED:
            declines[str(msg)] = declines.get(str(msg), 0) + 1
        elif k == FALLBACK:
            fallbacks[str(msg)] = fallbacks.get(str(msg), 0) + 1
        elif len(messages) < _MAX_MESSAGES:
            messages.append(str(msg))
        if tot is None:  # the run raised: no output, no ledger
            continue
        empty += not tot
        mixed += len(tot) > 1
        for u, v in tot.items():
            units[u] = max(units.get(u, 0.0), v)
        reported = max(reported, rep_eps)
        reported_delta = max(reported_delta, rep_dlt)
    if len(calls) != trials or len({int(c.item[0]) for c in calls}) != trials:  # pragma: no cover - a pool bug
        raise RuntimeError(f"the worker pool returned {len(calls)} results for {trials} releases")
    n_err = int(np.sum(kind == ERROR))
    n_timeout = int(np.sum(kind == TIMEOUT))
    n_memory = int(np.sum(kind == MEMORY))
    if n_err == trials:
        raise ValueError(f"algorithm: {name!r} raised (or gave no finite estimate) in every one of the {trials} "
                         f"runs; first: {(messages + limit_messages)[:1]}")
    if n_err + n_timeout + n_memory == trials:
        raise ValueError(f"algorithm: {name!r} exceeded the per-run limits or failed in every one of the {trials} "
                         f"runs ({n_timeout} time-outs, {n_memory} memory overruns, {n_err} errors; limits "
                         f"{_limits_text(limits)}); first: {(limit_messages + messages)[:1]}")
    outcomes = {side: {KIND_NAMES[k]: int(np.sum((sides == s) & (kind == k))) for k in KINDS}
                for side, s in (("with_canary", 1), ("without", 0))}
    notes: list[str] = []
    if np.all(kind == DECLINED):
        notes.append("the algorithm declined in every run on both data sets: nothing to distinguish; "
                     "a data set it releases on (--n, --instance) is needed for a meaningful audit")
    if nb.mode == "beyond":
        notes.append("canary beyond the public bounds: outside the DP claim; a bound above epsilon shows missing "
                     "clipping, not by itself a violation of the stated guarantee")

    # the ledger
    reasons: list[str] = []
    rel_tol = 1e-6
    led_eps = None
    unit: str | None
    if not units:
        led_summary = "empty (no ledger reported): only the (epsilon, delta) claim is audited"
    elif mixed or len(units) > 1:
        led_summary = f"mixed units {sorted(units)}: only the (epsilon, delta) claim is audited"
    else:
        (unit, total), = units.items()
        if unit == "rho":
            led_eps = zcdp_epsilon(total, dlt) if total > 0 else 0.0
        elif unit == "mu^2":
            led_eps = B.epsilon_from_gdp(math.sqrt(total), dlt)
        elif unit == "epsilon":
            led_eps = total
        led_summary = f"{unit} = {total:.6g} charged" + ("" if led_eps is None else f" (epsilon {led_eps:.6g} at delta {dlt:g})")
    if led_eps is not None and led_eps > eps * (1 + rel_tol) + 1e-12:
        reasons.append(f"the ledger charges epsilon {led_eps:.6g} > the budget {eps:g}")
    if reported > eps * (1 + rel_tol) + 1e-12:
        reasons.append(f"a release reports epsilon {reported:.6g} > the budget {eps:g}")
    if reported_delta > dlt * (1 + rel_tol) + 1e-300:
        reasons.append(f"a release reports delta {reported_delta:.3g} > the budget {dlt:g}")
    ledger = {"units": units, "epsilon": led_eps, "reported_epsilon": reported, "reported_delta": reported_delta,
              "empty_ledgers": empty, "mixed_ledgers": mixed, "summary": led_summary}

    unit = next(iter(units)) if len(units) == 1 and not mixed else None
    counted = ["clopper_pearson", "one_run"] + (["zcdp"] if unit == "rho" else []) + (["gdp"] if unit == "mu^2" else [])
    alpha_k = (1.0 - conf) / len(counted)
    claims = {"clopper_pearson": eps, "one_run": eps,
              "zcdp": zcdp_epsilon(units["rho"], dlt) if unit == "rho" and units["rho"] > 0 else eps,
              "gdp": B.epsilon_from_gdp(math.sqrt(units["mu^2"]), dlt) if unit == "mu^2" else eps}

    # fit the statistics; choose per estimator on the selection runs; evaluate on the evaluation runs
    runs = Runs(values, kind)
    fit = np.arange(0, q)
    sel = np.arange(q, 2 * q)
    ev = np.arange(2 * q, trials)
    stats_ = {}
    for sk in STATISTICS:
        st = fit_statistic(runs.take(fit[sides[fit] == 1]), runs.take(fit[sides[fit] == 0]), sk)
        stats_[sk] = st
    cand = {}
    for sk, st in stats_.items():
        s_sel = st.score(runs.take(sel))
        s_ev = st.score(runs.take(ev))
        for sign in (1.0, -1.0):
            cand[(sk, sign)] = (sign * s_sel, sign * s_ev)
    in_sel, in_ev = sides[sel] == 1, sides[ev] == 1
    bounds_out: list[dict[str, Any]] = []
    best_cp_key: tuple[str, float] | None = None
    for est in ESTIMATORS:
        best: tuple[float, tuple[str, float] | None, float | None] = (-1.0, None, None)
        for key, (ssel, _) in cand.items():
            a_in, a_out = ssel[in_sel], ssel[~in_sel]
            t = _grid(a_in, a_out)
            tps, fps = _counts(a_in, a_out, t)
            vals = _value(est, tps, a_in.size, fps, a_out.size, alpha_k, dlt)
            i = int(np.argmax(vals))
            if vals[i] > best[0]:
                best = (float(vals[i]), key, float(t[i]))
        # the values are >= 0 > -1, so a statistic and a threshold were chosen
        _, key, thr = cast(tuple[float, tuple[str, float], float], best)
        if est == "clopper_pearson":
            best_cp_key = key
        sev = cand[key][1]
        b_in, b_out = sev[in_ev], sev[~in_ev]
        tp, fp = (int(v[0]) for v in _counts(b_in, b_out, np.array([thr])))
        ni, no = b_in.size, b_out.size
        rec: dict[str, Any] = {"estimator": est, "statistic": f"{key[0]}{'+' if key[1] > 0 else '-'}",
                               "threshold": thr, "tp": tp, "n_in": ni, "fp": fp, "n_out": no,
                               "confidence_each": 1.0 - alpha_k, "counts": est in counted}
        if est == "clopper_pearson":
            b = B.epsilon_lower_bound(tp, ni, fp, no, dlt, 1.0 - alpha_k, split=True, two_sided=False)
            rec.update(epsilon=b.epsilon, tpr_lower=b.details["tpr_lower"], fpr_upper=b.details["fpr_upper"])
        elif est == "one_run":
            b = B.epsilon_one_run(ni + no, tp + fp, tp, dlt, 1.0 - alpha_k)
            rec.update(epsilon=b.epsilon, m=ni + no, guesses=tp + fp, correct=tp)
        elif est == "zcdp":
            p = B.clopper_pearson_lower(tp, ni, alpha_k / 2.0)
            qq = B.clopper_pearson_upper(fp, no, alpha_k / 2.0)
            rho = B.zcdp_rho_lower_bound(p, qq)
            rec.update(epsilon=zcdp_epsilon(rho, dlt) if rho > 0 and dlt > 0 else (0.0 if rho == 0 else math.inf),
                       rho_lower=rho, rho_charged=units.get("rho") if unit == "rho" else None)
            if unit != "rho":
                rec["note"] = "refutes a zCDP ledger only; this ledger is not in rho"
        else:
            fpr_hi = float(B.clopper_pearson_upper(fp, no, alpha_k / 2.0))
            fnr_hi = float(B.clopper_pearson_upper(ni - tp, ni, alpha_k / 2.0))
            mu = B.gdp_mu_lower_bound(fpr_hi, fnr_hi) if max(fpr_hi, fnr_hi) < 1.0 - dlt else 0.0
            rec.update(epsilon=B.epsilon_from_gdp(mu, dlt), mu_lower=mu,
                       mu_charged=math.sqrt(units["mu^2"]) if unit == "mu^2" else None)
            if unit != "mu^2":
                rec["note"] = "assumes a Gaussian trade-off curve (ledger not in mu^2): information only"
        rec["claim_epsilon"] = claims[est]
        rec["exceeds_claim"] = bool(rec["epsilon"] > claims[est] * (1 + 1e-9))
        bounds_out.append(rec)
    for rec in bounds_out:
        if rec["counts"] and rec["exceeds_claim"]:
            reasons.append(f"{rec['estimator']} lower bound {rec['epsilon']:.4f} > claim {rec['claim_epsilon']:.4f}")
    eps_lower = max(r["epsilon"] for r in bounds_out if r["counts"])

    # exposure of the canary runs among the runs without it (the Clopper-Pearson statistic)
    cp_key = cast(tuple[str, float], best_cp_key)  # set in the loop ("clopper_pearson" is an estimator)
    sev = cand[cp_key][1]
    can_loss, ref_loss = -sev[in_ev], -sev[~in_ev]
    exp_summary: dict[str, Any] = {}
    if can_loss.size and ref_loss.size:
        ex = exposure(can_loss, ref_loss, ties="average")
        exp_summary = summarize_exposure(ex, ref_loss.size).to_dict()
        mb = B.exposure_epsilon_bound(can_loss, ref_loss, 0.5, dlt, conf)
        lb = B.exposure_epsilon_bound(can_loss, ref_loss, 0.1, dlt, conf)
        exp_summary.update(median_bound=mb.epsilon, p10_bound=lb.epsilon,
                           statistic=f"{cp_key[0]}{'+' if cp_key[1] > 0 else '-'}")

    total = time.perf_counter() - t_start
    return AuditResult(
        algorithm=name, task=task, interpretation=cls.interpretation, epsilon_claimed=eps, delta=dlt,
        epsilon_lower=float(eps_lower), confidence=conf, trials=trials, violation=bool(reasons), reasons=reasons,
        bounds=bounds_out, ledger=ledger, exposure=exp_summary, outcomes=outcomes,
        errors={"count": n_err, "messages": messages, "declines": dict(sorted(declines.items(), key=lambda kv: -kv[1])[:3]),
                "declined": int(np.sum(kind == DECLINED)), "timeouts": n_timeout, "memory": n_memory,
                "fallback": int(np.sum(kind == FALLBACK)),
                "fallbacks": dict(sorted(fallbacks.items(), key=lambda kv: -kv[1])[:3]),
                "worker_deaths": int(deaths), "limit_messages": limit_messages, "limits": _limits_dict(limits)},
        data=nb.describe(), seconds=total, seconds_per_release=run_seconds / trials, workers=int(workers),
        seed=int(seed), notes=notes,
    )
