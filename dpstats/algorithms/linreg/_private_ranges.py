"""Private ranges for the linear-regression algorithms: centres, scales and bounds on public grids.

Nothing here is registered; every function states the neighbouring relation
(always *replace one row*, ``n`` public) and the sensitivity it relies on.

Contents
--------
* The public grids :data:`POSITIVE_GRID` and :data:`SIGNED_GRID`, and
  :func:`~dpstats.privacy.quantiles.private_grid_index`, which draws a grid point and charges the accountant.
* Private ranges: :func:`private_center_halfwidth` (median and a quantile of
  absolute deviations by the tie-robust grid exponential mechanism),
  :func:`private_median_cell`, :func:`private_median_midpoint`,
  :func:`private_nonzero_quantile` and :func:`private_norm_bound`;
  :func:`scale_quantile` chooses their quantile level from public ``n`` and
  epsilon.

The public structure of the design and the standardised basis built on these
ranges are in :mod:`dpstats.algorithms.linreg._basis`; the sufficient
statistics in :mod:`dpstats.algorithms.linreg._ssp`.

Accounting
----------
Every private value is drawn by a charging call of the accountant
(:meth:`~dpstats.privacy.accounting.Accountant.exponential`), so the ledger
records exactly the epsilon drawn. The exponential mechanism
``P(i) ~ exp(eps u_i / (2 Delta))`` is ``eps``-DP and moreover
``eps``-bounded-range (Durfee and Rogers 2019), which implies
``eps^2/8``-zCDP (Cesar and Rogers 2021, Lemma 3.2): the grid mechanisms here
are charged with ``bound="bounded_range"``
(:func:`~dpstats.privacy.accounting.em_rho`), and a zCDP share is turned into
their epsilon by :func:`~dpstats.privacy.accounting.em_epsilon`. The tie-robust
grid scores are :func:`~dpstats.privacy.mechanisms.grid_quantile_scores`, drawn
and charged by :func:`~dpstats.privacy.quantiles.private_grid_index`.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

from dpstats.privacy.accounting import ZCDPAccountant
from dpstats.privacy.mechanisms import log_grid
from dpstats.privacy.quantiles import private_grid_index

__all__ = [
    "POSITIVE_GRID",
    "SIGNED_GRID",
    "private_center_halfwidth",
    "private_nonzero_quantile",
    "private_median_midpoint",
    "private_median_cell",
    "private_norm_bound",
    "scale_quantile",
]

#: public grid of magnitudes for private scales and bounds: 2^-20 (1e-6) to 2^36 (7e10), 4 points per octave
POSITIVE_GRID = log_grid(2.0**-20, 2.0**36, per_octave=4)
#: public signed grid for private centres, 32 points per octave (relative spacing 2.2%)
_FINE = log_grid(2.0**-20, 2.0**36, per_octave=32)
SIGNED_GRID = np.concatenate([-_FINE[::-1], [0.0], _FINE])


# --------------------------------------------------------------------------
# Private ranges
# --------------------------------------------------------------------------


def scale_quantile(n: int, epsilon: float, sensitivity: float = 1.0, lo: float = 0.5, hi: float = 0.9,
                   grid_size: int | None = None) -> float:
    """Quantile level for a private scale or bound, chosen from public ``n`` and ``epsilon``.

    The grid exponential mechanism scores every grid point above the data's
    maximum with ``-(n - r + 1)`` (``r`` the target rank), so it draws from the
    empty top of the grid unless ``epsilon (n - r) / (2 sensitivity)`` exceeds
    ``log |grid|`` by a margin. We take the highest ``q`` in ``[lo, hi]`` with
    ``n (1 - q) >= 2 sensitivity (log |grid| + 4) / epsilon``: a high quantile
    keeps rare large values inside the range, a lower one keeps the mechanism
    off the empty top of the grid.
    """
    g = POSITIVE_GRID.size if grid_size is None else grid_size
    need = 2.0 * sensitivity * (math.log(g) + 4.0) / max(epsilon, 1e-12)
    q = 1.0 - need / max(n, 1)
    return float(min(max(q, lo), hi))


def _halfwidth_factor(q: float, k: float = 3.0) -> float:
    """Multiplier turning the ``q``-quantile of ``|x - median|`` into about ``k`` normal sd."""
    return float(k / special.ndtri((1.0 + q) / 2.0))


def private_center_halfwidth(
    x: np.ndarray, acc: ZCDPAccountant, label: str, eps_center: float, eps_scale: float, rng: np.random.Generator,
    q: float, k_sd: float = 3.0,
) -> tuple[float, float]:
    """Private centre and half-width of one column (two exponential mechanisms).

    The centre is the middle of a private median cell on :data:`SIGNED_GRID`
    (``eps_center``-DP, :func:`private_median_cell`; the fine grid keeps it
    within about 1% of the median);
    the half-width is ``c(q)`` times a private ``q``-quantile of the non-zero
    deviations ``|x - centre|`` (values inside the median cell count as 0) on :data:`POSITIVE_GRID` (``eps_scale``-DP,
    :func:`private_nonzero_quantile`), with ``c(q)`` such that for normal
    data it is ``k_sd`` standard deviations. Both use the tie-robust grid
    scoring of :func:`~dpstats.privacy.mechanisms.private_quantile_grid`
    (sensitivity 1 under replace-one). Composition:
    ``eps_center + eps_scale`` (or ``(eps_center^2 + eps_scale^2)/8``-zCDP),
    charged to ``acc`` as ``"range <label>: median"`` and ``"range <label>: scale"``.
    """
    a, b = private_median_cell(x, SIGNED_GRID, acc, f"range {label}: median", eps_center, rng)
    c = _cell_center(a, b)
    s = private_nonzero_quantile(_cell_deviation(x, a, b, c), q, POSITIVE_GRID, acc, f"range {label}: scale",
                                 eps_scale, rng)
    return float(c), float(s * _halfwidth_factor(q, k_sd))


def _cell_deviation(x: np.ndarray, a: float, b: float, c: float) -> np.ndarray:
    """``|x - c|``, and 0 for values inside the median cell ``(a, b]``.

    Values in the cell count as "at the centre": with discrete data (counts,
    integer years, a median of exactly 0) the centre cannot be located more
    finely than the cell, and a tiny non-zero deviation of the many values
    equal to the median would otherwise drive the scale to nearly 0. Each
    deviation depends on its own row only (given the released cell).
    """
    x = np.asarray(x, dtype=float)
    dev = np.abs(x - c)
    dev[(x > a) & (x <= b)] = 0.0
    return dev


def private_median_cell(
    x: np.ndarray, grid: np.ndarray, acc: ZCDPAccountant, mechanism: str, epsilon: float, rng: np.random.Generator,
    note: str = "",
) -> tuple[float, float]:
    """Private median cell ``(g_{j-1}, g_j]`` of a public increasing grid (``(-inf, g_0]`` for ``j = 0``).

    The tie-robust grid exponential mechanism
    (:func:`~dpstats.privacy.mechanisms.grid_quantile_scores` with ``q = 1/2``):
    grid point ``g_j`` stands for its cell and scores
    ``-max(0, c(g_{j-1}) - r + 1, r - c(g_j))`` with ``r = ceil(n/2)``;
    sensitivity 1 under replace-one, ``epsilon``-DP, drawn and charged to
    ``acc`` as ``mechanism`` (:func:`~dpstats.privacy.quantiles.private_grid_index`).
    """
    grid = np.asarray(grid, dtype=float)
    j = private_grid_index(x, grid, epsilon, rng, acc=acc, mechanism=mechanism, q=0.5, note=note)
    return (float(grid[j - 1]) if j > 0 else -math.inf), float(grid[j])


def private_median_midpoint(
    x: np.ndarray, grid: np.ndarray, acc: ZCDPAccountant, mechanism: str, epsilon: float, rng: np.random.Generator,
    note: str = "",
) -> float:
    """Private median reported as the middle of the drawn cell of :func:`private_median_cell`.

    ``epsilon``-DP (charged to ``acc`` as ``mechanism``); the middle of the
    cell (its upper end for the first cell and for a cell ending at 0) is
    post-processing.
    """
    a, b = private_median_cell(x, grid, acc, mechanism, epsilon, rng, note)
    return _cell_center(a, b)


def _cell_center(a: float, b: float) -> float:
    if not math.isfinite(a) or b == 0.0:
        return b
    return 0.5 * (a + b)


def private_nonzero_quantile(
    v: np.ndarray, q: float, grid: np.ndarray, acc: ZCDPAccountant, mechanism: str, epsilon: float,
    rng: np.random.Generator, note: str = "",
) -> float:
    """Private ``q``-quantile of the *non-zero* values of ``v >= 0`` over a public grid.

    Sparse columns (a dummy-like regressor that is 0 for most rows, counts
    that are mostly 0) have ``|x - median| = 0`` for most rows, so an
    ordinary quantile of the deviations is 0 and a range built on it would
    clip every non-zero value away. Conditioning on the non-zero deviations
    gives the scale of the part that varies.

    With ``m = #{v_i > 0}``, target rank ``r = max(1, ceil(q m))`` and
    ``c(g) = #{0 < v_i <= g}``, grid point ``g_j`` scores
    ``-max(0, c(g_{j-1}) - r + 1, r - c(g_j))``: the scores of
    :func:`~dpstats.privacy.mechanisms.grid_quantile_scores` of the non-zero values.

    Sensitivity 1 under replace-one: replacing a non-zero value by another
    moves each ``c`` by at most 1 and leaves ``r``; turning a zero into a
    non-zero value ``v`` raises ``m`` by one, ``r`` by 0 or 1, and ``c(g)`` by
    1 exactly for ``g >= v``, so ``r - c`` and ``c_prev - r`` each move by at
    most 1 (the increments of ``r`` and ``c`` partly cancel); the reverse
    change is symmetric. The score is a maximum of such terms, so it moves by
    at most 1 and the mechanism is ``epsilon``-DP (and
    ``epsilon``-bounded-range); it is drawn and charged to ``acc`` as
    ``mechanism`` (:func:`~dpstats.privacy.quantiles.private_grid_index`).
    """
    grid = np.asarray(grid, dtype=float)
    z = np.asarray(v, dtype=float).reshape(-1)
    j = private_grid_index(z[z > 0], grid, epsilon, rng, acc=acc, mechanism=mechanism, q=q, note=note)
    return float(grid[j])


def private_norm_bound(
    norms: np.ndarray, q: float, acc: ZCDPAccountant, mechanism: str, epsilon: float, rng: np.random.Generator,
    note: str = "",
) -> float:
    """Private ``q``-quantile of non-negative values (row norms, ``|y|``) on :data:`POSITIVE_GRID`.

    ``epsilon``-DP (tie-robust grid exponential mechanism,
    :func:`~dpstats.privacy.mechanisms.grid_quantile_scores`, replace-one
    sensitivity 1), drawn and charged to ``acc`` as ``mechanism``
    (:func:`~dpstats.privacy.quantiles.private_grid_index`).
    """
    j = private_grid_index(np.asarray(norms, dtype=float), POSITIVE_GRID, epsilon, rng, acc=acc, mechanism=mechanism,
                           q=q, note=note)
    return float(POSITIVE_GRID[j])
