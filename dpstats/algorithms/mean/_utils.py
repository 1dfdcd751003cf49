"""Helpers shared by the mean-estimation algorithms (``mean_*.py``).

Everything here is stated for *replace-one* neighbours with ``n`` public.
The helpers that touch private data take the accountant and the name of the
ledger entry: they draw and charge in one call (``acc.exponential``), so the
ledger records exactly the epsilon drawn.

Public priors
-------------
Columns with a public range in ``facts.bounds`` use it. A column without one
is assumed to lie in ``[-DEFAULT_RANGE, DEFAULT_RANGE]`` with
``DEFAULT_RANGE = 1e6``: a loose public default, larger than every value in
the public corpus (the largest, state product in Munnell 1990, is 4.6e5).
Values outside the prior are clipped, which costs accuracy, never privacy.
"""

from __future__ import annotations

import math
from typing import cast

import numpy as np

from dpstats.algorithms.base import PublicFacts
from dpstats.privacy.accounting import ZCDPAccountant
from dpstats.privacy.quantiles import BR_NOTE

__all__ = [
    "DEFAULT_RANGE",
    "prior_box",
    "prior_ball",
    "gaussian_tailbound",
    "scale_grid",
    "noisy_max_bin",
    "tail_scale",
    "tail_scale_scores",
    "pair_differences",
    "clip_ball",
]

#: public default half-range for a column without public bounds
DEFAULT_RANGE = 1e6


def prior_box(facts: PublicFacts, default_range: float = DEFAULT_RANGE) -> tuple[np.ndarray, np.ndarray]:
    """Public per-column ranges ``(lo, hi)``: ``facts.bounds`` where given, else ``[-R, R]``.

    Parameters
    ----------
    facts : PublicFacts
        Public facts of the instance (only ``columns`` and ``bounds`` are read).
    default_range : float
        ``R`` for columns without public bounds.

    Returns
    -------
    lo, hi : ndarray
        Finite arrays with ``lo <= hi``.
    """
    lo, hi = facts.column_bounds()
    lo = np.where(np.isfinite(lo), lo, -default_range)
    hi = np.where(np.isfinite(hi), hi, default_range)
    if np.any(lo > hi):
        raise ValueError("public bounds with lo > hi")
    return lo.astype(float), hi.astype(float)


def prior_ball(facts: PublicFacts, default_radius: float = DEFAULT_RANGE) -> tuple[np.ndarray, float]:
    """Public prior ball ``B(c, r)`` that contains every row allowed by the public facts.

    Columns with bounds contribute their midpoint and half-width, the others
    centre 0 and half-width ``default_radius``, so a fully unbounded instance
    gets the loose default ``r = default_radius * sqrt(d)``.

    Returns
    -------
    center : ndarray, radius : float
    """
    lo, hi = prior_box(facts, default_radius)
    center = (lo + hi) / 2.0
    radius = float(np.linalg.norm((hi - lo) / 2.0))
    return center, max(radius, 1e-12)


def gaussian_tailbound(d: int, beta: float) -> float:
    """``sqrt(d + 2 sqrt(d log(1/beta)) + 2 log(1/beta))``: a ``1 - beta`` bound on ``||N(0, I_d)||``.

    The Laurent-Massart chi-square tail bound, as used by CoinPress (Biswas et
    al. 2020, reference code ``gaussian_tailbound``).
    """
    lb = math.log(1.0 / beta)
    return math.sqrt(d + 2.0 * math.sqrt(d * lb) + 2.0 * lb)


def scale_grid(lo: float, hi: float, per_octave: int = 8) -> np.ndarray:
    """Public geometric grid ``lo * 2^(k/per_octave)`` up to ``hi`` (both > 0), ``hi`` included."""
    if not (0 < lo < hi):
        raise ValueError("need 0 < lo < hi")
    k = int(math.ceil(math.log2(hi / lo) * per_octave)) + 1
    g = lo * 2.0 ** (np.arange(k) / per_octave)
    g = g[g < hi]
    return np.append(g, hi)


def pair_differences(x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """``|x_a - x_b|`` over ``floor(n/2)`` disjoint pairs of rows drawn by a random permutation.

    The pairing comes from ``rng`` and not from the data, so replacing one row
    changes at most one pair difference (a count over the differences has
    sensitivity 1). A random pairing matters: data files are often sorted
    (by group, by a dummy), and consecutive rows are then nearly equal. The
    differences do not depend on the location of ``x``: a scale found from
    them needs no centre.
    """
    x = np.asarray(x, dtype=float).reshape(-1)
    m = x.size // 2
    perm = rng.permutation(x.size)
    return cast(np.ndarray, np.abs(x[perm[0:m]] - x[perm[m : 2 * m]]))


def clip_ball(Z: np.ndarray, center: np.ndarray, radius: float) -> tuple[np.ndarray, int]:
    """Project every row of ``Z`` onto the ball ``B(center, radius)``; returns rows and count clipped."""
    diff = Z - center[None, :]
    norms = np.linalg.norm(diff, axis=1)
    factor = np.minimum(1.0, radius / np.maximum(norms, 1e-300))
    return center[None, :] + diff * factor[:, None], int(np.sum(norms > radius))


def noisy_max_bin(
    acc: ZCDPAccountant, mechanism: str, bins: np.ndarray, n_bins: int, epsilon: float, rng: np.random.Generator
) -> int:
    """``epsilon``-DP choice of a histogram bin by the exponential mechanism on bin counts, charged to ``acc``.

    Parameters
    ----------
    acc : ZCDPAccountant
        Charged ``epsilon^2 / 8`` (bounded range) under the name ``mechanism``.
    mechanism : str
    bins : ndarray of int
        The bin index (in ``[0, n_bins)``) of every row; the binning must be public.
    n_bins : int
        Number of bins, possibly huge: empty bins are handled in aggregate.
    epsilon : float
    rng : Generator

    Returns
    -------
    int
        Bin ``b`` drawn with probability proportional to ``exp(epsilon c_b / 2)``.
        Replacing one row moves one unit between two counts, so every count
        changes by at most 1 (sensitivity 1): the draw is ``epsilon``-DP and
        ``epsilon``-bounded-range (report-noisy-max with Gumbel noise).
    """
    bins = np.asarray(bins, dtype=np.int64).reshape(-1)
    if n_bins < 1:
        raise ValueError("need at least one bin")
    ids, counts = np.unique(bins, return_counts=True)
    n_empty = n_bins - ids.size
    scores = counts.astype(float)
    log_base = np.zeros(ids.size)
    if n_empty > 0:
        # the empty bins in aggregate: count 0, base measure their number
        scores = np.append(scores, 0.0)
        log_base = np.append(log_base, math.log(n_empty))
    k = acc.exponential(mechanism, scores, sensitivity=1.0, epsilon=epsilon, rng=rng, bound="bounded_range",
                        log_base=log_base, note=BR_NOTE)
    if k < ids.size:
        return int(ids[k])
    # a uniformly random empty bin
    taken = set(int(i) for i in ids)
    if n_bins <= 4 * ids.size + 16:
        empty = np.setdiff1d(np.arange(n_bins), ids)
        return int(empty[rng.integers(empty.size)])
    while True:
        b = int(rng.integers(n_bins))
        if b not in taken:
            return b


def tail_scale_scores(dev: np.ndarray, k: float, q: float | None, grid: np.ndarray) -> np.ndarray:
    """Tie-robust scores for a scale with about ``t`` deviations beyond it.

    ``t = k`` when ``q`` is None, else ``t = min(k, (1 - q) N)``.

    With ``U(g) = #{dev_i > g}``, ``N = #{dev_i > 0}`` and
    ``t = min(k, (1 - q) N)``, grid point ``g_j`` stands for the cell
    ``(g_{j-1}, g_j]`` and scores ``-max(0, t + 1 - U(g_{j-1}), U(g_j) - t)``
    (``U(g_{-1})`` is ``n`` when ``g_0 = 0``, else ``N``): zero for the cell
    where the count beyond crosses ``t``, so ties (integer data, a spike at
    the maximum) do not make the score flat above the largest deviation.
    With ``g_0 = 0`` in the grid some cell always scores 0 (0 itself when
    fewer than ``t`` deviations are positive), so every cell above the
    largest deviation loses at least ``t + 1`` against it.

    * For ``N >= k / (1 - q)`` this targets the ``k``-th largest deviation: a
      public number of points beyond the scale, so the cells above the largest
      deviation score at most ``-k`` whatever the data; that margin keeps the
      exponential mechanism from drawing an absurdly large scale.
    * For fewer non-zero deviations (dummies, rare events) it targets the
      ``q``-quantile of the non-zero deviations, so an atom at the median
      (the zeros of a dummy) does not make the scale 0.

    Sensitivity 1 under replace-one: ``U(g) - t`` moves by at most 1 (if
    ``U(g)`` gains a point the new row's deviation is non-zero, so ``N``
    cannot drop and ``t`` moves by at most ``1 - q`` the same way; and
    symmetrically), hence so does each term of the max.
    """
    if (q is not None and not (0.0 <= q <= 1.0)) or k < 0:
        raise ValueError("need 0 <= q <= 1 (or None) and k >= 0")
    grid = np.asarray(grid, dtype=float)
    if grid.ndim != 1 or grid.size == 0 or grid[0] < 0 or np.any(np.diff(grid) <= 0):
        raise ValueError("grid must be increasing and non-negative")
    dev = np.asarray(dev, dtype=float).reshape(-1)
    if np.any(dev < 0):
        raise ValueError("deviations must be non-negative")
    srt = np.sort(dev)
    N = float(np.sum(dev > 0))
    U = (srt.size - np.searchsorted(srt, grid, side="right")).astype(float)
    # the cell below the first grid point: (-inf, g_0] when g_0 = 0, else (0, g_0]
    U_prev = np.concatenate([[float(srt.size) if grid[0] == 0 else N], U[:-1]])
    t = float(k) if q is None else min(float(k), (1.0 - q) * N)
    return cast(np.ndarray, -np.maximum.reduce([np.zeros_like(U), t + 1.0 - U_prev, U - t]))


def tail_scale(
    acc: ZCDPAccountant,
    mechanism: str,
    dev: np.ndarray,
    k: float,
    q: float | None,
    grid: np.ndarray,
    epsilon: float,
    rng: np.random.Generator,
) -> float:
    """``epsilon``-DP draw from :func:`tail_scale_scores` (exponential mechanism, sensitivity 1), charged to ``acc``.

    ``acc.exponential`` charges the bounded-range cost ``epsilon^2 / 8``.
    """
    j = acc.exponential(mechanism, tail_scale_scores(dev, k, q, grid), sensitivity=1.0, epsilon=epsilon, rng=rng,
                        bound="bounded_range", note=BR_NOTE)
    return float(grid[j])


def clipped_mean(X: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Mean of the rows of ``X`` clipped coordinate-wise to ``[a_j, b_j]``.

    Every clipped row lies in the box, so replacing one row moves the mean by
    at most ``||b - a||_2 / n`` in L2 (replace-one sensitivity).
    """
    return cast(np.ndarray, np.clip(X, a[None, :], b[None, :]).mean(axis=0))


def ball_mean(Z: np.ndarray, center: np.ndarray, radius: float) -> np.ndarray:
    """Mean of the rows of ``Z`` projected onto the ball ``B(center, radius)``.

    Projected rows lie in a set of diameter ``2 radius``, so replacing one row
    moves the mean by at most ``2 radius / n`` in L2 (replace-one sensitivity).
    """
    return cast(np.ndarray, clip_ball(Z, np.asarray(center, dtype=float), float(radius))[0].mean(axis=0))


def augmented_second_moment(Zc: np.ndarray) -> np.ndarray:
    """Upper triangle (row-major, diagonal included) of ``(1/n) sum_i (z_i, 1)(z_i, 1)'``.

    For rows with ``||z_i|| <= C`` the replace-one L2 sensitivity of this
    vector is at most ``sqrt(2) (C^2 + 1) / n``: it is bounded by the
    Frobenius norm of ``(a a' - a'' a''')/n`` with ``||a||^2 <= C^2 + 1``, and
    the difference of two positive semi-definite rank-one matrices ``A, B``
    has ``||A - B||_F^2 = ||A||_F^2 + ||B||_F^2 - 2 <A, B> <= 2 (C^2 + 1)^2``.
    """
    n, d = Zc.shape
    A = np.hstack([Zc, np.ones((n, 1))])
    return cast(np.ndarray, (A.T @ A / n)[np.triu_indices(d + 1)])
