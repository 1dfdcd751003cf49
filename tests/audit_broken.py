"""Deliberately broken variants of real algorithms, as ``module:object`` plugins for the audit tests.

Each wraps or subclasses a registry algorithm without editing it:

* :class:`SSPNoiseDiv10` -- ``ssp`` with every Gaussian draw divided by 10;
* :class:`SSPHalfSigma` -- ``ssp`` with sigma halved (a forgotten factor 2);
* :class:`SSPMissingTerm` -- ``ssp`` calibrated without the ``X'y`` term of its joint sensitivity
  (noise x 0.78 on this data, true epsilon about 1.06 on the worst pair: too small a violation to catch, kept for the docs);
* :class:`ClipNoiseDiv10`, :class:`ClipHalfSigma` -- ``adaptive_clip`` with sigma / 10, sigma / 2;
* :class:`ClipMissingTerm` -- ``adaptive_clip`` whose L2 sensitivity keeps one of its ``d`` terms;
* :class:`LedgerOvercharge` -- a ledger that charges twice the budget;
* :class:`ClipDataBounds` -- ``adaptive_clip`` with the clipping box read from the data;
* :class:`DeclineOnOutlier` -- ``adaptive_clip`` that declines when the raw data hold a value near the bounds;
* :class:`DeclineOnRelativeOutlier` -- ``adaptive_clip`` that declines when a row lies more than 20 median
  absolute deviations from the median (an outlier relative to the data, not to the public bounds: the
  generated designs with rows spread over half the box never trigger it; the concentrated one does);
* :class:`FallbackOnOutlier` -- ``adaptive_clip`` that releases its prior centre, flagged as a fallback, when the
  raw data hold a value near the bounds (a fallback decided on unpaid data);
* :class:`FallbackOnRelease` -- the honest counterpart: a fallback decided on the released value (post-processing);
* :class:`BranchOnUnpaidCount` -- ``adaptive_clip`` that switches to a tighter clipping box (each branch DP on
  its own, the ledger honest) when an unpaid count of rows near the bounds is zero;
* :class:`DeclineOnUnpaidClusterCount` -- ``adaptive_clip`` that declines when the raw data hold more clusters
  than a threshold (an unpaid count of cluster labels: ``audit --clusters``);
* :class:`StdErrorOnOutlier` -- ``adaptive_clip`` whose released standard error doubles when the raw data hold a
  value near the bounds (the estimate is honest: a leak through the interval only, ``audit --score interval``);
* :class:`CrashSometimes` -- ``adaptive_clip`` that raises in some runs (seeded), for the error report;
* :class:`AbortSometimes` -- ``adaptive_clip`` that kills its worker process (``SIGABRT``) in some runs;
* :class:`SlowOnCanary` -- ``adaptive_clip`` that runs past any time limit when the raw data hold a value
  near the bounds (a time-out caused by the canary).

All charge the honest ledger, so the audit must find the mismatch between the
noise drawn and the noise charged from the releases alone.
"""

from __future__ import annotations

import math
import os
import resource
import time
from dataclasses import replace
from unittest import mock

import numpy as np

from dpstats.algorithms.linreg import ssp as linreg_ssp
from dpstats.algorithms.linreg._ssp import ssp_calibration
from dpstats.algorithms.mean._utils import clipped_mean, prior_box
from dpstats.algorithms.base import Decline
from dpstats.algorithms.linreg.ssp import SSP
from dpstats.algorithms.mean.adaptive import AdaptiveClip
from dpstats.privacy.accounting import ZCDPAccountant


class ScaledNoise(np.random.Generator):
    """The caller's generator (same bit stream) with every ``normal`` scale multiplied by ``factor``."""

    def __init__(self, rng: np.random.Generator, factor: float) -> None:
        super().__init__(rng.bit_generator)
        self.factor = float(factor)

    def normal(self, loc=0.0, scale=1.0, size=None):  # noqa: D102
        return super().normal(loc, np.asarray(scale) * self.factor, size)


class SSPNoiseDiv10(SSP):
    name = "audit_broken_ssp_noise_div10"

    def _run(self, data, facts, epsilon, delta, rng):
        return super()._run(data, facts, epsilon, delta, ScaledNoise(rng, 0.1))


class SSPHalfSigma(SSP):
    name = "audit_broken_ssp_half_sigma"

    def _run(self, data, facts, epsilon, delta, rng):
        return super()._run(data, facts, epsilon, delta, ScaledNoise(rng, 0.5))


def _calibration_without_xy(B2, q4, By, ratio, rho):
    # the joint sensitivity with its X'y term left out (By = 0 in the sensitivity only)
    return ssp_calibration(B2, q4, 0.0, ratio, rho)


class SSPMissingTerm(SSP):
    name = "audit_broken_ssp_missing_term"

    def _run(self, data, facts, epsilon, delta, rng):
        with mock.patch.object(linreg_ssp, "ssp_calibration", _calibration_without_xy):
            return super()._run(data, facts, epsilon, delta, rng)


class ClipDataBounds(AdaptiveClip):
    name = "audit_broken_clip_databounds"

    def _run(self, data, facts, epsilon, delta, rng):
        X = data.X
        b = {c: (float(X[:, j].min()), float(X[:, j].max())) for j, c in enumerate(facts.columns)}
        return super()._run(data, replace(facts, bounds=b), epsilon, delta, rng)


class DeclineOnOutlier(AdaptiveClip):
    name = "audit_broken_decline_on_outlier"

    def _run(self, data, facts, epsilon, delta, rng):
        if np.abs(data.X).max() > 0.9:
            return Decline("a value near the bounds (checked on the raw data)")
        return super()._run(data, facts, epsilon, delta, rng)


class DeclineOnRelativeOutlier(AdaptiveClip):
    name = "audit_broken_decline_on_relative_outlier"

    def _run(self, data, facts, epsilon, delta, rng):
        X = data.X
        med = np.median(X, axis=0)
        mad = np.median(np.abs(X - med), axis=0)
        if np.any(np.abs(X - med) > 20.0 * np.maximum(mad, 1e-12)):
            return Decline("a row far from the others (checked on the raw data)")
        return super()._run(data, facts, epsilon, delta, rng)


def _prior_centre(out, reason: str):
    """The release replaced by the prior centre (0), marked as a fallback."""
    return replace(out, estimate=np.zeros_like(out.estimate), details={**out.details, "fallback": reason})


class FallbackOnOutlier(AdaptiveClip):
    name = "audit_broken_fallback_on_outlier"

    def _run(self, data, facts, epsilon, delta, rng):
        out = super()._run(data, facts, epsilon, delta, rng)
        return _prior_centre(out, "prior centre: a value near the bounds (raw data)") if np.abs(data.X).max() > 0.9 else out


class FallbackOnRelease(AdaptiveClip):
    name = "audit_honest_fallback_on_release"

    def _run(self, data, facts, epsilon, delta, rng):
        out = super()._run(data, facts, epsilon, delta, rng)
        # decided on the release (about half of them): post-processing
        return _prior_centre(out, "prior centre: the release lies far out") if float(np.max(out.estimate)) > 0.015 else out


class BranchOnUnpaidCount(AdaptiveClip):
    """Two honest branches chosen on an unpaid count: the choice leaks whether a row lies near the bounds.

    With no row beyond 0.9 in absolute value (counted on the raw data, not
    paid for), the clipping box is shrunk to half the public bounds, which
    halves the noise at the same charge; otherwise the public box is used.
    """

    name = "audit_broken_branch_on_unpaid_count"

    def _run(self, data, facts, epsilon, delta, rng):
        if int((np.abs(data.X) > 0.9).any(axis=1).sum()) == 0:
            facts = replace(facts, bounds={c: (lo / 2.0, hi / 2.0) for c, (lo, hi) in facts.bounds.items()})
        return super()._run(data, facts, epsilon, delta, rng)


class DeclineOnUnpaidClusterCount(AdaptiveClip):
    """Declines when the data hold more than 50 cluster labels, counted on the raw labels (not paid for)."""

    name = "audit_broken_decline_on_unpaid_cluster_count"

    def _run(self, data, facts, epsilon, delta, rng):
        if data.clusters is not None and len(set(data.clusters.tolist())) > 50:
            return Decline("more than 50 clusters (counted on the raw labels)")
        return super()._run(data, facts, epsilon, delta, rng)


class StdErrorOnOutlier(AdaptiveClip):
    """An honest estimate with a standard error chosen on the raw data: the leak is in the interval alone."""

    name = "audit_broken_std_error_on_outlier"
    intervals = True  # it releases a standard error: the search then also scores the interval

    def _run(self, data, facts, epsilon, delta, rng):
        out = super()._run(data, facts, epsilon, delta, rng)
        se = 0.02 if np.abs(data.X).max() > 0.9 else 0.01
        return replace(out, std_error=np.full_like(np.asarray(out.estimate, dtype=float), se), df=math.inf)


class CrashSometimes(AdaptiveClip):
    name = "audit_broken_crash_sometimes"

    def _run(self, data, facts, epsilon, delta, rng):
        if rng.random() < 0.1:
            raise RuntimeError("simulated crash")
        return super()._run(data, facts, epsilon, delta, rng)


class AbortSometimes(AdaptiveClip):
    """Kills the interpreter it runs in (``SIGABRT``) in about one run in ten: only ever run it in a worker pool."""

    name = "audit_broken_abort_sometimes"

    def _run(self, data, facts, epsilon, delta, rng):
        if rng.random() < 0.1:
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # no core file
            os.abort()
        return super()._run(data, facts, epsilon, delta, rng)


class SlowOnCanary(AdaptiveClip):
    """Sleeps for a minute when the raw data hold a value near the bounds: its time-outs reveal the canary."""

    name = "audit_broken_slow_on_canary"

    def _run(self, data, facts, epsilon, delta, rng):
        if np.abs(data.X).max() > 0.9:
            time.sleep(60.0)
        return super()._run(data, facts, epsilon, delta, rng)


class CrashAlways(AdaptiveClip):
    name = "audit_broken_crash_always"

    def _run(self, data, facts, epsilon, delta, rng):
        raise RuntimeError("always broken")


class ClipNoiseDiv10(AdaptiveClip):
    name = "audit_broken_clip_noise_div10"

    def _run(self, data, facts, epsilon, delta, rng):
        return super()._run(data, facts, epsilon, delta, ScaledNoise(rng, 0.1))


class ClipHalfSigma(AdaptiveClip):
    name = "audit_broken_clip_half_sigma"

    def _run(self, data, facts, epsilon, delta, rng):
        return super()._run(data, facts, epsilon, delta, ScaledNoise(rng, 0.5))


class ClipMissingTerm(AdaptiveClip):
    """``adaptive_clip`` on public bounds whose L2 sensitivity keeps one coordinate's term: ``2/n``, not ``2 sqrt(d)/n``."""

    name = "audit_broken_clip_missing_term"

    def _run(self, data, facts, epsilon, delta, rng):
        X = data.X
        n, d = X.shape
        acc = ZCDPAccountant(epsilon, delta)
        lo, hi = prior_box(facts, float(self.params["default_range"]))
        center, half = (lo + hi) / 2.0, (hi - lo) / 2.0
        Z = (X - center) / half
        sens = 2.0 / n  # should be sqrt(sum_j (2/n)^2) = 2 sqrt(d) / n
        sigma = acc.gaussian_sigma(sens, fraction=1.0)
        est = center + half * acc.gaussian("clipped mean (box)", clipped_mean(Z, -np.ones(d), np.ones(d)),
                                           sensitivity=sens, sigma=sigma, rng=rng,
                                           note="box [-1,1]^d: sensitivity 2/n (one term)")
        return self.release(est, acc)


class LedgerOvercharge(AdaptiveClip):
    """Spends twice its budget: the release claims the requested epsilon but the ledger charges more."""

    name = "audit_broken_ledger_overcharge"

    def _run(self, data, facts, epsilon, delta, rng):
        out = super()._run(data, facts, epsilon, delta, rng)
        (entry,) = out.ledger
        return replace(out, ledger=(entry._replace(cost=2.0 * entry.cost),))
