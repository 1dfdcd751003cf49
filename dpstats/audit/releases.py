"""The audit's releases: one call of the algorithm per release, in the benchmark's worker pool.

Each release is one call (:func:`release_once`) of a
:class:`~dpstats.bench.sandbox.CallJob` in the benchmark's
:class:`~dpstats.bench.sandbox.WorkerPool`, under its per-release limits;
:func:`run_releases` runs them all (in this process when no limits are
given). :func:`scored_values` is what the statistics see of a release with
``audit(score="interval")``.
"""

from __future__ import annotations

import math
import multiprocessing as mp
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from dpstats.algorithms import Release
from dpstats.algorithms.release import InvalidOutcome, release
from dpstats.audit.attack import DECLINED, ERROR, FALLBACK, MEMORY, RELEASED, TIMEOUT
from dpstats.bench.sandbox import CallJob, CallResult, Limits, WorkerPool

__all__ = ["SCORES", "POOL_STATUS", "scored_values", "release_once", "run_releases", "ledger_totals"]

#: payloads of running audits, inherited by forked workers (a job carries only the key)
_PAYLOADS: dict[int, dict[str, Any]] = {}
POOL_STATUS = {"ok": RELEASED, "error": ERROR, "timeout": TIMEOUT, "memory": MEMORY}


def ledger_totals(ledger: Any) -> dict[str, float]:
    """The costs of a release's ledger summed by unit (``malformed``: entries that are not spends)."""
    tot: dict[str, float] = {}
    for entry in ledger or ():
        # a Spend (mechanism, cost, unit, note, kind, sensitivity, scale), or a plugin's
        # (mechanism, cost, unit, note): the cost and unit are the second and third fields
        try:
            if isinstance(entry, (str, bytes)) or len(entry) < 4:
                raise ValueError("not a ledger entry")
            cost, unit = float(entry[1]), str(entry[2])
        except (TypeError, ValueError, IndexError, KeyError):
            tot["malformed"] = tot.get("malformed", 0.0) + 1.0
            continue
        tot[unit] = tot.get(unit, 0.0) + cost
    return tot


#: what the statistics see of a release (``audit(score=...)``)
SCORES = ("estimate", "interval")


def scored_values(out: Release) -> np.ndarray:
    """A release's estimate, log standard error, degrees of freedom and bias bound, as one vector.

    What an interval method releases beyond its estimate: ``log(std_error)``
    (``+inf`` for an infinite one or none), ``df`` (``+inf`` when none) and
    ``bias_bound`` (0 when none). The audit's statistics work on ranks, so
    infinite values are ordinary values there.
    """
    est = np.asarray(out.estimate, dtype=float).reshape(-1)
    k = est.size
    se = np.full(k, np.inf) if out.std_error is None else np.asarray(out.std_error, dtype=float).reshape(-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        log_se = np.log(se)
    df = np.inf if out.df is None else float(out.df)
    bias = np.zeros(k) if out.bias_bound is None else np.asarray(out.bias_bound, dtype=float).reshape(-1)
    return np.concatenate([est, np.broadcast_to(log_se, (k,)), [df], np.broadcast_to(bias, (k,))])


def release_once(context: Any, item: tuple[int, int],
                 ) -> tuple[int, Any, dict[str, float] | None, float, float, str | None]:
    """Run the algorithm once: release ``i`` on ``D'`` (``side`` 1) or ``D`` (0) with ``default_rng([seed, i])``.

    The release goes through :func:`dpstats.algorithms.release.release`; an
    outcome that fails its check (not a release or a decline, a mis-shaped or
    non-finite estimate) is an error whose ledger still counts.

    Returns ``(kind, estimate, ledger totals, reported epsilon, reported delta,
    message)``; the ledger is None for a run that raised. A ``MemoryError`` is
    left to the worker pool (status ``memory``).
    """
    s = _PAYLOADS[context] if isinstance(context, int) else context
    nb = s["neighbours"]
    i, side = item
    data = nb.neighbour if side else nb.base
    rng = np.random.default_rng([int(s["seed"]), int(i)])
    kind, est, msg = RELEASED, None, None
    try:
        out: Any = release(s["spec"], data, nb.facts, s["budget"], rng)
    except MemoryError:
        raise
    except InvalidOutcome as exc:
        out, kind, msg = exc.outcome, ERROR, str(exc)[:300]
    except Exception as exc:  # noqa: BLE001 - a run that raises is an output (kind error), counted
        return ERROR, None, None, 0.0, 0.0, f"{type(exc).__name__}: {exc}"[:300]
    if kind == RELEASED and isinstance(out, Release):
        if (out.details or {}).get("fallback"):
            # a release that says it is not an estimate is scored as a category, like a decline
            kind, msg = FALLBACK, str(out.details["fallback"])[:80]
        else:
            est = scored_values(out) if s.get("score") == "interval" else out.estimate
    elif kind == RELEASED:  # the check passes a release or a decline only
        kind, msg = DECLINED, str(out.reason)[:80]
    # the outcome may be anything when it failed the check: read its ledger and budget only if it has them
    return (kind, est, ledger_totals(getattr(out, "ledger", ())), float(getattr(out, "epsilon", 0.0) or 0.0),
            float(getattr(out, "delta", 0.0) or 0.0), msg)


def run_releases(payload: dict[str, Any], indices: np.ndarray, sides: np.ndarray, workers: int, limits: Limits | None,
             log: Callable[[str], None] | None) -> list[CallResult]:
    """Every release as a :class:`~dpstats.bench.sandbox.CallResult` (in this process when ``limits`` is None)."""
    n = indices.size
    items = list(zip(indices.tolist(), sides.tolist(), strict=True))
    if limits is None:  # no isolation, no limits (debugging)
        out: list[CallResult] = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for it in items:
                t0 = time.perf_counter()
                out.append(CallResult(it, "ok", release_once(payload, it), None, time.perf_counter() - t0, 0.0))
        return out
    chunk = int(max(20, min(500, math.ceil(n / max(workers, 1) / 10))))
    fork = "fork" in mp.get_all_start_methods()
    token = id(payload)
    _PAYLOADS[token] = payload
    context: Any = token if fork else payload  # spawned workers need the payload itself (picklable)
    name = payload["spec"].name
    jobs = [CallJob(release_once, context, tuple(items[a:a + chunk]), name=name, instance=f"audit-{token}")
            for a in range(0, n, chunk)]
    results: list[CallResult] = []
    step = max(1, n // 10)

    def on_result(r: CallResult) -> None:
        results.append(r)
        if log is not None and len(results) % step == 0:
            log(f"  {len(results)}/{n} releases")

    try:
        with WorkerPool(workers, limits, method="fork" if fork else "spawn") as pool:
            pool.run(jobs, on_result)
    finally:
        _PAYLOADS.pop(token, None)
    return results
