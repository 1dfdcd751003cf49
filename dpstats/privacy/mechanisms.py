"""Basic private mechanisms shared by the algorithms.

All mechanisms take a seeded :class:`numpy.random.Generator` and are stated
for *replace-one* neighbours. Each function documents its sensitivity and the
privacy it gives; the budget bookkeeping is the caller's (see
:mod:`dpstats.privacy.accounting`).

Examples
--------
>>> import numpy as np
>>> from dpstats.privacy.mechanisms import private_quantile
>>> x = np.random.default_rng(0).normal(size=2000)
>>> q = private_quantile(x, 0.5, -10, 10, epsilon=1.0, rng=np.random.default_rng(1))
>>> abs(q) < 0.2
True
"""

from __future__ import annotations

import math

import numpy as np

__all__ = [
    "exponential_mechanism",
    "private_quantile",
    "private_quantile_grid",
    "grid_quantile_rank",
    "grid_quantile_scores",
    "log_grid",
    "signed_log_grid",
    "range_grid",
]


def exponential_mechanism(
    scores: np.ndarray,
    epsilon: float,
    sensitivity: float,
    rng: np.random.Generator,
    log_base: np.ndarray | None = None,
    monotone: bool = False,
) -> int:
    """Sample an index with probability proportional to ``base * exp(epsilon * score / (2 sensitivity))``.

    Parameters
    ----------
    scores : ndarray
        Utility of each candidate; changes by at most ``sensitivity`` between
        neighbouring datasets.
    epsilon : float
        The mechanism is ``epsilon``-DP (McSherry and Talwar 2007).
    sensitivity : float
    rng : Generator
    log_base : ndarray, optional
        Data-independent log base measure (e.g. log interval lengths).
    monotone : bool
        When all scores move in the same direction between neighbours, the
        factor 2 can be dropped (``exp(epsilon * score / sensitivity)``).

    Returns
    -------
    int
        Index drawn by the Gumbel-max trick.
    """
    scores = np.asarray(scores, dtype=float)
    if scores.ndim != 1 or scores.size == 0:
        raise ValueError("scores must be a non-empty 1-d array")
    factor = epsilon / (sensitivity if monotone else 2.0 * sensitivity)
    logits = factor * scores
    if log_base is not None:
        logits = logits + np.asarray(log_base, dtype=float)
    finite = np.isfinite(logits)
    if not finite.any():
        raise ValueError("no candidate has positive probability")
    g = rng.gumbel(size=logits.size)
    logits = np.where(finite, logits, -np.inf)
    return int(np.argmax(logits + g))


def private_quantile(
    x: np.ndarray, q: float, lo: float, hi: float, epsilon: float, rng: np.random.Generator
) -> float:
    """Private ``q``-quantile on ``[lo, hi]`` by the exponential mechanism (Smith 2011).

    The data are clipped to ``[lo, hi]`` and sorted into ``lo = z_0 <= z_1 <=
    ... <= z_n <= z_{n+1} = hi``; interval ``[z_i, z_{i+1})`` has utility
    ``-|i - q n|`` (sensitivity 1 under replace-one) and base measure its
    length. An interval is drawn, then a point uniformly in it. The release is
    ``epsilon``-DP. ``lo`` and ``hi`` must be public.
    """
    if not (0.0 <= q <= 1.0):
        raise ValueError(f"q must lie in [0, 1], got {q!r}")
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise ValueError(f"need finite lo < hi, got [{lo}, {hi}]")
    z = np.sort(np.clip(np.asarray(x, dtype=float).reshape(-1), lo, hi))
    n = z.size
    edges = np.concatenate([[lo], z, [hi]])
    lengths = np.diff(edges)
    ranks = np.arange(n + 1)
    scores = -np.abs(ranks - q * n)
    with np.errstate(divide="ignore"):
        log_len = np.log(lengths)
    i = exponential_mechanism(scores, epsilon, 1.0, rng, log_base=log_len)
    return float(rng.uniform(edges[i], edges[i + 1]))


def private_quantile_grid(
    x: np.ndarray, q: float, grid: np.ndarray, epsilon: float, rng: np.random.Generator
) -> float:
    """Private ``q``-quantile over a public increasing grid, robust to ties.

    Grid point ``g_j`` stands for the cell ``(g_{j-1}, g_j]`` (the first for
    ``(-inf, g_0]``). With target rank ``r = max(1, ceil(q n))`` and
    ``c(g) = #{x <= g}``, its score is ``-max(0, c(g_{j-1}) - r + 1, r - c(g_j))``:
    zero only for the cell holding the quantile, so that ties (0/1 data, a
    spike at 52 weeks) do not make the score flat above the maximum.
    Replacing one row moves every ``c`` by at most 1, so the score has
    sensitivity 1 and the release is ``epsilon``-DP.
    """
    grid = np.asarray(grid, dtype=float)
    if grid.ndim != 1 or grid.size < 2 or np.any(np.diff(grid) <= 0):
        raise ValueError("grid must be strictly increasing with at least 2 points")
    j = exponential_mechanism(grid_quantile_scores(x, grid, q=q), epsilon, 1.0, rng)
    return float(grid[j])


def grid_quantile_rank(n: int, *, q: float | None = None, rank: int | None = None) -> int:
    """The 1-based target rank of a grid quantile: ``max(1, ceil(q n))``, or ``rank`` clamped to ``[1, max(n, 1)]``.

    Exactly one of ``q`` (a quantile level in ``[0, 1]``) and ``rank`` (an
    order statistic) is given; both must be public (functions of ``n``).
    """
    if (q is None) == (rank is None):
        raise ValueError("give exactly one of q= and rank=")
    if q is not None:
        if not (0.0 <= q <= 1.0):
            raise ValueError(f"q must lie in [0, 1], got {q!r}")
        return max(1, int(math.ceil(q * n)))
    assert rank is not None
    return int(min(max(int(rank), 1), max(int(n), 1)))


def grid_quantile_scores(
    x: np.ndarray, grid: np.ndarray, *, q: float | None = None, rank: int | None = None
) -> np.ndarray:
    """Tie-robust (cell-below) exponential-mechanism scores of a public grid for a quantile.

    Grid point ``g_j`` stands for the cell ``(g_{j-1}, g_j]`` (the first for
    ``(-inf, g_0]``). With ``c(g) = #{x <= g}`` and target rank ``r`` (from
    :func:`grid_quantile_rank`: ``max(1, ceil(q n))`` for ``q=``, the clamped
    ``rank=`` otherwise) the score is ``-max(0, c(g_{j-1}) - r + 1, r - c(g_j))``:
    zero only for the cell holding the ``r``-th order statistic, so ties (0/1
    data, a spike at 52 weeks) do not make the score flat above the maximum.

    Sensitivity 1 under replace-one: replacing one value moves every ``c`` by
    at most 1 and leaves ``n`` (hence ``r``). For ``q=`` it is also 1 under
    add/remove-one (``c`` and ``r`` then move by at most 1 each, in a way that
    moves every term of the max by at most 1).

    Parameters
    ----------
    x : array_like
        The private values (flattened).
    grid : array_like
        Public increasing grid.
    q : float, optional
        Quantile level in ``[0, 1]``.
    rank : int, optional
        1-based order statistic (exactly one of ``q`` and ``rank``).

    Returns
    -------
    ndarray
        One score per grid point.
    """
    z = np.sort(np.asarray(x, dtype=float).reshape(-1))
    r = grid_quantile_rank(z.size, q=q, rank=rank)
    c = np.searchsorted(z, np.asarray(grid, dtype=float), side="right").astype(float)
    c_prev = np.concatenate([[0.0], c[:-1]])
    scores: np.ndarray = -np.maximum.reduce([np.zeros_like(c), c_prev - r + 1, r - c])
    return scores


def log_grid(lo: float, hi: float, per_octave: int = 4) -> np.ndarray:
    """A public geometric grid from ``lo`` to ``hi`` (> 0) with ``per_octave`` points per doubling."""
    if not (0 < lo < hi):
        raise ValueError("need 0 < lo < hi")
    k = int(math.ceil(math.log2(hi / lo) * per_octave)) + 1
    return lo * 2.0 ** (np.arange(k) / per_octave)




def signed_log_grid(lo: float, hi: float, per_octave: int) -> np.ndarray:
    """Public grid ``-hi ... -lo, 0, lo ... hi``, geometric on each side (:func:`log_grid`).

    For a location of unknown scale: the magnitudes ``lo < hi`` (both > 0)
    bound the smallest and largest non-zero value considered.
    """
    pos = log_grid(lo, hi, per_octave)
    return np.concatenate([-pos[::-1], [0.0], pos])


def range_grid(lo: float, hi: float, per_octave: int = 16, resolution: float | None = None) -> np.ndarray:
    """Public grid inside a public range ``[lo, hi]``: 0, ``+-resolution 2^(k/per_octave)``, and both ends.

    Unlike :func:`signed_log_grid` (magnitudes), ``lo`` and ``hi`` are the
    ends of the range and every point lies in it. A bounded column gets a
    fine grid whatever its location; an unbounded one (``[-1e6, 1e6]``) a
    geometric grid in ``|x|`` of relative spacing ``2^(1/per_octave) - 1``.

    Parameters
    ----------
    lo, hi : float
        Public range, finite, ``lo < hi``.
    per_octave : int
        Points per doubling of ``|x|``.
    resolution : float, optional
        Smallest non-zero magnitude; default ``(hi - lo) * 1e-6``.
    """
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise ValueError(f"need finite lo < hi, got [{lo}, {hi}]")
    res = resolution if resolution is not None else (hi - lo) * 1e-6
    top = max(abs(lo), abs(hi))
    k = int(math.ceil(math.log2(max(top / res, 1.0)) * per_octave)) + 1
    mags = res * 2.0 ** (np.arange(k) / per_octave)
    g = np.concatenate([-mags[::-1], [0.0], mags, [lo, hi]])
    g = g[(g >= lo) & (g <= hi)]
    return np.unique(g)
