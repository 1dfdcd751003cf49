"""The count of rows far beyond fwl_score's clips, which makes its interval infinite when clipping bias may be large."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dpstats.privacy.accounting import ZCDPAccountant

__all__ = ["TailCount", "tail_count"]


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
