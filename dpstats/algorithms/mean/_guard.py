"""The point guard of ``adaptive_whiten``: post-processing that flags a column whose private range failed.

It reads the released estimate, the released box, the public prior and public facts only (no budget);
the rules and their measurements are on ``docs/algorithms/mean/adaptive_whiten.md``.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from dpstats.algorithms.base import Release

__all__ = ["point_guard"]


def point_guard(out: Release, center: np.ndarray, half: np.ndarray, find: np.ndarray, prior: np.ndarray,
                hopeless: bool, noise_z: np.ndarray | float | None = None,
                at_prior_end: np.ndarray | None = None) -> Release:
    """The point guard of ``adaptive_whiten`` (post-processing of released values and public facts only).

    1. **Clamp.** Each coordinate of the release is clamped to its released
       box ``center +- half``. The clipped mean lies in the box, so the clamp
       never moves the release away from it (in any coordinate), and the
       interval around the clamped value covers the clipped mean whenever the
       unclamped one did.
    2. **Edge.** A privately ranged column whose release sits, after
       clamping, at the end of its box that faces the prior centre (``z`` at
       that end within ``noise_z``: two standard deviations of the final
       noise in ``z`` units, capped at 0.5, when given), while the box lies
       wholly on one side of the prior centre and is narrower than its
       distance to it (``|center - prior| > 2 half``): the rows were clipped
       to that end of a range drawn far beyond where they are, between the
       box and the prior centre or past it. Its release is the prior centre
       (the centre of its public prior, 0 without bounds), a public value.
       At the other end (rows beyond the box, away from the prior centre)
       the clamped end is already the nearest released value.
    3. **Hopeless.** When ``hopeless`` (a public rule on ``n`` and the
       per-draw range budget: the range draws cannot beat chance), every
       privately ranged column is released as its prior centre.
    3b. **Prior end.** A privately ranged column marked in ``at_prior_end``
       (its released range reaches an end of its public prior, the range
       assumed for a column without declared bounds: ``+-default_range``)
       is released as its prior centre: its rows may lie beyond that end,
       where they were clipped by an amount no released value bounds (a
       column in dollars whose values exceed the assumed million). A
       comparison of released ranges with public values.
    4. **Null.** Otherwise, a privately ranged column whose clamped release
       lies within one standard deviation of its own final noise
       (``noise_z / 2``) of the prior centre is released as the prior centre:
       the release cannot tell its mean from it (a hard threshold, as
       fwl_score's shrinkage towards 0). This catches ranges drawn far too
       wide around the data, where the noise, scaled by the half-width, is
       larger than the data's distance from 0. Its standard error is kept,
       and the shift is added to its bias allowance, so the interval still
       holds the unguarded one's centre. Applied to point releases only: a
       release with an interval keeps its estimate, so that its interval is
       centred on a value the method estimated.

    Returns
    -------
    out : Release
        With the guarded estimate, the details ``guard`` (which columns were
        replaced: a function of released values and public facts), and, when
        the release carries a standard error, an infinite one for every
        column replaced by rules 2, 3 and 3b (the release says nothing about
        those columns) and the shift of rule 4 added to ``bias_bound``.
    """
    est = np.asarray(out.estimate, dtype=float).copy()
    live = half > 0
    z = np.zeros_like(est)
    z[live] = np.clip((est[live] - center[live]) / half[live], -1.0, 1.0)
    est[live] = center[live] + half[live] * z[live]
    fired = np.zeros(est.size, bool)
    if hopeless:
        fired = find.copy()
    else:
        margin = np.zeros(est.size) if noise_z is None else np.minimum(np.asarray(noise_z, float), 0.5)
        far = np.abs(center - prior) > 2.0 * half
        toward = -np.sign(center - prior) * z  # +1: pinned at the end that faces the prior centre
        fired = find & live & far & (toward >= 1.0 - margin)
    edge = np.zeros(est.size, bool) if at_prior_end is None else find & np.asarray(at_prior_end, bool) & ~fired
    fired = fired | edge
    null = np.zeros(est.size, bool)
    # with an interval the estimate is kept: its interval, not the prior centre, says the mean is near it
    if noise_z is not None and not hopeless and out.std_error is None:
        null = find & live & ~fired & (np.abs(est - prior) < 0.5 * half * np.asarray(noise_z, float))
    shift = np.where(null, np.abs(est - prior), 0.0)
    est = np.where(fired | null, prior, est)
    details = {**out.details, "guard": fired | null}
    if np.any(fired | null):
        parts = []
        if np.any((fired | null) & ~edge):
            parts.append("the private range of the column failed or cannot beat chance")
        if np.any(edge):
            parts.append(f"the private range of {int(np.sum(edge))} reached the end of the range assumed for a column "
                         "without declared bounds, so its values may lie beyond it")
        why = "; ".join(parts)
        details["fallback"] = (f"prior centre released for {int(np.sum(fired | null))} of {est.size} column(s) "
                               f"(the point guard: {why})")
    se, bias = out.std_error, out.bias_bound
    if se is not None:
        se = np.where(fired, np.inf, se)
        bias = shift if bias is None else np.asarray(bias, float) + shift
    return replace(out, estimate=est, details=details, std_error=se, bias_bound=bias)
