"""The rows beyond fwl_score's clips: their count, which makes the interval infinite when clipping bias may be
large, and the excess of clipping u, which bounds how far the one-step estimate overshoots."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dpstats.privacy.accounting import ZCDPAccountant

__all__ = ["ClipExcess", "TailCount", "clip_excess", "tail_count"]


@dataclass(frozen=True)
class TailCount:
    """Noisy count of rows far beyond the clips (:func:`tail_count`) and its noise sd."""

    count: float
    sigma: float


def tail_count(u: np.ndarray, v: np.ndarray, C_u: float, C_v: float, k_u: float, k_v: float,
               over_clip: np.ndarray | None, acc: ZCDPAccountant, rho: float, rng: np.random.Generator) -> TailCount:
    """Noisy count of the rows far beyond a clip: ``|u| > k_u C_u``, ``|v| > k_v C_v`` or ``over_clip``.

    ``over_clip`` marks the rows with a standardised column beyond
    ``col_clip`` in stage 1 (:attr:`Partialled.over_clip`).

    The score clips ``u`` at ``C_u`` and ``v`` at ``C_v``. The estimate
    ``theta0 + S / T`` then carries the bias ``(theta - theta0) (r - 1)`` with
    ``r = sum clip(u) u / sum clip(u)^2`` (from clipping ``u``) plus
    ``sum clip(u) (v - clip(v)) / T`` (from clipping ``v``); neither is in
    the sandwich, and both grow with the rows far beyond the clips. Many such
    rows mean a failed private scale (a sparse column whose scale came out
    orders of magnitude too small, so that most of its non-zero values are
    clipped) or tails too heavy for the clip: the interval is then infinite.
    The same holds for the Gram of stage 1: its projections are those of the
    columns clipped at ``col_clip``, and they do not apply to the unclipped
    residuals when many rows were clipped there.

    Privacy: given the released quantities (the scales, the Gram, ``C_u``,
    ``C_v``), whether row ``i`` is counted depends on row ``i`` alone, so
    replacing one row changes the count by at most 1: Gaussian noise
    ``sigma = 1 / sqrt(2 rho)``, charged ``rho`` in zCDP.
    """
    far = (np.abs(u) > k_u * C_u) | (np.abs(v) > k_v * C_v) | np.asarray(over_clip, bool)
    sigma = 1.0 / math.sqrt(2.0 * rho)
    noisy = acc.gaussian("Gaussian count far beyond the clips", float(np.sum(far)), sensitivity=1.0, sigma=sigma,
                         rng=rng, note=f"rows with |u| > {k_u:g} C_u, |v| > {k_v:g} C_v or clipped in the Gram")
    return TailCount(count=float(noisy), sigma=float(sigma))


@dataclass(frozen=True)
class ClipExcess:
    """Noisy sum of ``clip(u) (clip(u, k C_u) - clip(u))`` (:func:`clip_excess`) and its noise sd."""

    value: float
    sigma: float

    def overshoot_share(self, T: float, sigma_T: float) -> float:
        """An upper bound of ``1 - 1 / r``, the share of the step ``S / T`` that overshoots (post-processing).

        ``r = sum clip(u) u / sum clip(u)^2 >= 1``; its part from the rows up to
        ``k C_u`` is ``1 + excess / T``. The upper confidence bound of ``r``
        takes the excess plus two of its noise sd over the released ``T``
        minus two of its noise sd ``sigma_T`` (at least one). The rows beyond
        ``k C_u`` are the tail count's (:func:`tail_count`).
        """
        r_up = 1.0 + max(self.value + 2.0 * self.sigma, 0.0) / max(T - 2.0 * sigma_T, sigma_T)
        return 1.0 - 1.0 / r_up


def clip_excess(u: np.ndarray, C_u: float, k: float, acc: ZCDPAccountant, rho: float,
                rng: np.random.Generator) -> ClipExcess:
    """Noisy ``sum clip(u) (clip(u, k C_u) - clip(u))``: how far the rows beyond the clip ``C_u`` reach, up to ``k C_u``.

    The one-step estimate ``theta0 + S / T`` with ``S = sum clip(u) v`` and
    ``T = sum clip(u)^2`` overshoots: in the linear model ``v = (theta -
    theta0) u + e``, ``S / T`` estimates ``(theta - theta0) r`` with ``r = sum
    clip(u) u / sum clip(u)^2 >= 1`` (``|clip(u)| <= |u|``, same sign), so the
    truth lies between the pilot and the estimate, at the share ``1 / r`` of
    the step. ``r - 1`` is ``sum clip(u) (u - clip(u)) / T``; this sum counts
    its rows up to ``k C_u``, each term ``C_u (min(|u|, k C_u) - C_u)`` in
    ``[0, (k - 1) C_u^2]``.

    Privacy: given the released ``C_u`` and the stage-1 quantities each term
    depends on its own row only and lies in ``[0, (k - 1) C_u^2]``, so
    replacing one row moves the sum by at most ``(k - 1) C_u^2``: Gaussian
    noise ``sigma = (k - 1) C_u^2 / sqrt(2 rho)``, charged ``rho`` in zCDP.
    """
    uc = np.clip(u, -C_u, C_u)
    uk = np.clip(u, -k * C_u, k * C_u)
    sens = (k - 1.0) * C_u**2
    sigma = sens / math.sqrt(2.0 * rho)
    noisy = acc.gaussian("Gaussian sum of clip(u) (clip(u, k C_u) - clip(u))", float(np.sum(uc * (uk - uc))),
                         sensitivity=sens, sigma=sigma, rng=rng,
                         note=f"k = {k:g}: each term in [0, (k - 1) C_u^2]")
    return ClipExcess(value=float(noisy), sigma=float(sigma))
