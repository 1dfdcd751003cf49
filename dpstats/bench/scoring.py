"""Scoring a trial: its outcome (a release, a decline, a failure) as a :class:`~dpstats.bench.model.TrialResult`.

Point trials (:mod:`dpstats.bench.trial`) and coverage trials
(:mod:`dpstats.bench.inference`) both end here: a release is scored by the
task's error metric (:func:`dpstats.bench.metrics.error`) over the baseline's
standard error; every other outcome fails at every threshold (``ratio =
error_value = inf``).
"""

from __future__ import annotations

import math

import numpy as np

from dpstats.bench.model import AlgorithmRef, Problem, TrialResult, describe_exception

__all__ = ["score"]


def _ratio_of(err: float, baseline: float) -> float:
    """:func:`dpstats.bench.metrics.ratio` from an error already computed (the metric runs once per trial)."""
    if math.isinf(err):
        return math.inf
    if baseline == 0:
        return 0.0 if err == 0 else math.inf
    return err / baseline


def score(problem: Problem, algorithm: AlgorithmRef, epsilon: float, delta: float, seed: int, kind: str,
          message: str | None, estimate: np.ndarray | None, seconds: float, peak_mb: float,
          fallback: str | None = None) -> TrialResult:
    """Turn a trial's outcome into a :class:`TrialResult` (error metric and ratio for releases).

    ``fallback`` (the release's fallback reason) is kept for a release that scores (status ``ok``) only.
    """
    from dpstats.bench.metrics import error as metric_error

    status = {"released": "ok", "declined": "declined", "error": "error", "memory": "memory",
              "timeout": "timeout"}[kind]
    err_v = ratio = math.inf
    if status == "ok":
        try:
            if estimate is None:
                raise ValueError("a release without an estimate")
            err_v = float(metric_error(estimate, problem.baseline))
            ratio = _ratio_of(err_v, float(problem.baseline.baseline))
        except Exception as exc:  # noqa: BLE001 - a release the metric rejects is a failed trial
            status, message, err_v, ratio = "error", f"scoring failed: {describe_exception(exc)}", math.inf, math.inf
    est = None if estimate is None else tuple(float(v) for v in np.asarray(estimate).reshape(-1))
    return TrialResult(
        algorithm=algorithm.name, interpretation=algorithm.interpretation, instance=problem.instance,
        study=problem.study, task=problem.task, epsilon=float(epsilon), delta=float(delta), seed=int(seed),
        status=status, error=message, estimate=est, error_value=err_v, baseline=float(problem.baseline.baseline),
        ratio=ratio, seconds=float(seconds), peak_mb=float(max(peak_mb, 0.0)), n=int(problem.n), d=int(problem.d),
        fallback=fallback if status == "ok" else None,
    )
