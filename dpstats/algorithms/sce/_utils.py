"""Shared helpers for the single-coefficient (sce) algorithms.

The functions either compute non-private intermediate statistics (block
regressions) or run a mechanism through the charging calls of the accountant
passed in (:meth:`~dpstats.privacy.accounting.Accountant.exponential`,
:meth:`~dpstats.privacy.accounting.Accountant.gaussian`), which draw the noise
and record its cost, sensitivity and scale in one step. Every sensitivity
below is stated for *replace-one* neighbours with ``n`` public.

Block statistics
----------------
The rows are split into ``k`` disjoint blocks by a random permutation drawn
from the caller's generator (the partition does not depend on the data).
Within block ``b`` the regressor of interest ``x`` is partialled on the other
columns ``Z`` (Frisch-Waugh-Lovell): ``x~ = M_Z x`` with ``M_Z`` the projection
on the orthogonal complement of the column span of ``Z`` in that block, and

* ``N_b = x~' y`` (numerator), ``D_b = x~' x~`` (denominator),
* the block OLS coefficient of interest ``theta_b = N_b / D_b``.

``theta_b`` equals the coefficient of ``x`` in the block regression of ``y`` on
all columns whenever ``x`` is not in the span of ``Z`` in the block, even when
``Z`` itself is rank-deficient there (a dummy constant within the block is
absorbed by the intercept). A block where ``x~`` vanishes (``D_b`` below a
relative tolerance of ``x' x``) is *invalid*: its coefficient is not
identified. Replacing one row changes the statistics of one block only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, NamedTuple, cast

import numpy as np

from dpstats.privacy.accounting import Accountant, EMBound
from dpstats.privacy.mechanisms import log_grid, signed_log_grid
from dpstats.privacy.quantiles import private_grid_cell, private_grid_index

__all__ = [
    "BlockBatches",
    "block_batches",
    "BlockStats",
    "random_blocks",
    "block_fwl",
    "choose_blocks",
    "symmetric_grid",
    "positive_grid",
    "EM_BOUND",
    "private_interval",
    "adaptive_quantile",
    "median_score_interval",
    "private_median_interval",
    "is_binary_public",
    "private_location_scale",
    "LocationScale",
    "SPARSE_FAIL",
    "gram_sensitivity",
    "noisy_gram",
    "noisy_symmetric",
    "widened_median_scores",
    "private_widened_median",
]

#: relative eigenvalue threshold for the pseudo-inverse of a block's control Gram matrix
EIG_RTOL = 1e-11
#: a block is invalid when D_b <= VALID_RTOL * x'x (x numerically in the span of the controls)
VALID_RTOL = 1e-9
#: how a zCDP accountant charges the exponential mechanisms here (a pure-DP one charges epsilon): every
#: one of them has a data-independent base measure (the public grid, or Lebesgue measure on a public
#: interval), so it is epsilon-bounded-range and epsilon^2/8-zCDP (Cesar and Rogers 2021, Lemma 3.2;
#: Durfee and Rogers 2019)
EM_BOUND: EMBound = "bounded_range"


@dataclass(frozen=True)
class BlockStats:
    """Per-block Frisch-Waugh statistics.

    Attributes
    ----------
    N, D : ndarray, shape (k,)
        ``x~' y`` and ``x~' x~`` (0 for invalid blocks).
    valid : ndarray of bool, shape (k,)
        Whether the coefficient of interest is identified in the block.
    sizes : ndarray of int, shape (k,)
        Rows per block.
    """

    N: np.ndarray
    D: np.ndarray
    valid: np.ndarray
    sizes: np.ndarray

    @property
    def k(self) -> int:
        return int(self.N.shape[0])

    @property
    def theta(self) -> np.ndarray:
        """Block coefficients of the valid blocks (in block order)."""
        return cast(np.ndarray, self.N[self.valid] / self.D[self.valid])


def random_blocks(n: int, k: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Split ``range(n)`` into ``k`` disjoint blocks of sizes ``floor(n/k)`` or ``ceil(n/k)``.

    The partition is a uniformly random permutation cut into consecutive
    pieces; it does not depend on the data.
    """
    if not (1 <= k <= n):
        raise ValueError(f"need 1 <= k <= n, got k={k}, n={n}")
    perm = rng.permutation(n)
    return np.array_split(perm, k)


def _drop_row_col(G: np.ndarray, j: int) -> np.ndarray:
    """A C-contiguous copy of the stack ``G`` (g, d, d) without row and column ``j`` of each matrix (by slices)."""
    g, d, _ = G.shape
    out = np.empty((g, d - 1, d - 1))
    out[:, :j, :j] = G[:, :j, :j]
    out[:, :j, j:] = G[:, :j, j + 1:]
    out[:, j:, :j] = G[:, j + 1:, :j]
    out[:, j:, j:] = G[:, j + 1:, j + 1:]
    return out


def _fwl_batch(Xb: np.ndarray, yb: np.ndarray, j: int, wb: np.ndarray | None,
               work: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """FWL statistics for a batch of equal-size blocks ``Xb`` (g, m, d), ``yb`` (g, m).

    Works from each block's cross-products ``X'X`` and ``X'y``: with ``Z`` the
    columns other than ``j`` (scaled to unit norm for conditioning; the
    projection is invariant to column scaling), ``gamma = (Z'Z)^+ Z'x``,
    ``D = x'x - gamma' Z'x`` and ``N = x'y - gamma' Z'y``. The
    pseudo-inverse drops eigenvalues below ``EIG_RTOL`` times the largest;
    a block with none to drop (once its zero columns are set aside) is
    solved by a linear solve instead of an eigendecomposition, which agrees
    with it to rounding. With weights
    ``wb`` the weighted rows go to ``work`` when given (a C-contiguous
    array of ``Xb``'s shape, overwritten).
    """
    g, m, d = Xb.shape
    if wb is not None:
        sw = np.sqrt(wb)
        Xb = Xb * sw[:, :, None] if work is None else np.multiply(Xb, sw[:, :, None], out=work)
        yb = yb * sw
    G = np.matmul(Xb.transpose(0, 2, 1), Xb)
    c = np.einsum("gmd,gm->gd", Xb, yb)
    xx = G[:, j, j]
    xy = c[:, j]
    if d == 1:
        N, D = xy, xx
    else:
        Gzz = _drop_row_col(G, j)
        norms = np.sqrt(np.maximum(np.diagonal(Gzz, axis1=1, axis2=2), 0.0))
        norms = np.where(norms > 0, norms, 1.0)
        # scaled in place: the same elementwise quotients as Gzz / (norms_a norms_b)
        np.divide(Gzz, np.multiply(norms[:, :, None], norms[:, None, :]), out=Gzz)
        bx = np.delete(G[:, :, j], j, axis=1) / norms
        by = np.delete(c, j, axis=1) / norms
        # a control that is zero in a block (a dummy whose level the block lacks) has a zero row and column
        # in Gzz and zeros in bx, by; a unit diagonal entry in its place leaves the projection as it is and
        # the largest eigenvalue too (at least 1 with a unit diagonal). Blocks whose matrix is then of full
        # rank by the eigenvalue rule are solved directly; the others by the pseudo-inverse
        gi, ki = np.nonzero(np.diagonal(Gzz, axis1=1, axis2=2) == 0)
        Gzz[gi, ki, ki] = 1.0
        lam = np.linalg.eigvalsh(Gzz)
        full = lam[:, 0] > EIG_RTOL * np.maximum(lam[:, -1], 1e-300)
        D, N = np.empty(g), np.empty(g)
        if full.any():
            sol = np.linalg.solve(Gzz[full], np.stack([bx[full], by[full]], axis=-1))
            D[full] = xx[full] - np.einsum("gq,gq->g", bx[full], sol[:, :, 0])
            N[full] = xy[full] - np.einsum("gq,gq->g", bx[full], sol[:, :, 1])
        if not full.all():
            rest = ~full
            Gzz[gi, ki, ki] = 0.0  # the pseudo-inverse of the block as it is
            w, V = np.linalg.eigh(Gzz[rest])
            wmax = np.maximum(w[:, -1:], 1e-300)
            inv = np.where(w > EIG_RTOL * wmax, 1.0 / np.where(w > 0, w, 1.0), 0.0)
            vbx = np.einsum("gpq,gp->gq", V, bx[rest])
            vby = np.einsum("gpq,gp->gq", V, by[rest])
            D[rest] = xx[rest] - np.einsum("gq,gq,gq->g", vbx, inv, vbx)
            N[rest] = xy[rest] - np.einsum("gq,gq,gq->g", vbx, inv, vby)
    valid = D > VALID_RTOL * np.maximum(xx, 1e-300)  # noqa: SIM300 (D is an array, not a constant)
    valid &= np.isfinite(N) & np.isfinite(D)
    N = np.where(valid, N, 0.0)
    D = np.where(valid, D, 0.0)
    return N, D, valid


@dataclass(frozen=True)
class BlockBatches:
    """Blocks grouped by size, each group's rows gathered once (for repeated :func:`block_fwl` calls on one split).

    ``groups`` holds ``(which, idx, X[idx], y[idx])`` per block size, in
    increasing size: the blocks ``which`` of that size and their rows
    ``idx`` (one block a row).
    """

    sizes: np.ndarray
    groups: tuple[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray], ...]
    #: per group, an array of ``X[idx]``'s shape for the weighted rows (made on first use, then overwritten)
    _work: dict[int, np.ndarray] = field(default_factory=dict, init=False, compare=False, repr=False)

    def work(self, g: int) -> np.ndarray:
        """The buffer for the weighted rows of group ``g``."""
        if g not in self._work:
            self._work[g] = np.empty(self.groups[g][2].shape)
        return self._work[g]


def block_batches(X: np.ndarray, y: np.ndarray, blocks: list[np.ndarray]) -> BlockBatches:
    """The :class:`BlockBatches` of ``blocks``."""
    sizes = np.array([len(b) for b in blocks], dtype=int)
    # rows are gathered from a row-major copy: the same values, read row by row
    Xc = np.ascontiguousarray(X)
    groups = []
    for m in np.unique(sizes):
        which = np.flatnonzero(sizes == m)
        idx = np.stack([blocks[i] for i in which])
        groups.append((which, idx, Xc[idx], y[idx]))
    return BlockBatches(sizes=sizes, groups=tuple(groups))


def block_fwl(
    X: np.ndarray, y: np.ndarray, j: int, blocks: list[np.ndarray], weights: np.ndarray | None = None,
    batches: BlockBatches | None = None, group_weights: list[np.ndarray] | None = None,
) -> BlockStats:
    """Frisch-Waugh statistics of every block.

    Parameters
    ----------
    X : ndarray, shape (n, d)
    y : ndarray, shape (n,)
    j : int
        Column of the coefficient of interest.
    blocks : list of index arrays
        Disjoint blocks (e.g. from :func:`random_blocks`).
    weights : ndarray, shape (n,), optional
        Row weights (weighted least squares within each block; used by the
        bag of little bootstraps).
    batches : BlockBatches, optional
        :func:`block_batches` of ``X``, ``y`` and ``blocks``, for calls
        that repeat one split with different weights.
    group_weights : list of ndarray, optional
        Instead of ``weights``: the weights already gathered per group of
        ``batches`` (``weights[idx]`` of each group, shape ``idx.shape``).

    Returns
    -------
    BlockStats
    """
    k = len(blocks)
    N = np.zeros(k)
    D = np.zeros(k)
    valid = np.zeros(k, dtype=bool)
    if batches is None:
        batches = block_batches(X, y, blocks)
    for g, (which, idx, Xg, yg) in enumerate(batches.groups):
        wb = group_weights[g] if group_weights is not None else None if weights is None else weights[idx]
        Nb, Db, vb = _fwl_batch(Xg, yg, j, wb, None if wb is None else batches.work(g))
        N[which], D[which], valid[which] = Nb, Db, vb
    return BlockStats(N=N, D=D, valid=valid, sizes=batches.sizes)


def choose_blocks(n: int, d: int, rows_per_param: float = 3.0, min_extra: int = 10, k_max: int | None = None) -> int:
    """Number of disjoint blocks from the public ``n`` and ``d``.

    Each block gets at least ``rows_per_param * d + min_extra`` rows so that
    block regressions have residual degrees of freedom (and rarely lose a
    dummy); the number of blocks is then as large as possible (more blocks
    means less noise per block). At least 1 block.
    """
    m = int(math.ceil(rows_per_param * d + min_extra))
    k = max(1, n // max(m, 1))
    if k_max is not None:
        k = min(k, k_max)
    return int(k)


# --------------------------------------------------------------------------
# Public grids and private quantiles
# --------------------------------------------------------------------------


def positive_grid(lo: float = 1e-10, hi: float = 1e10, per_octave: int = 8) -> np.ndarray:
    """Public geometric grid on ``[lo, hi]`` (for scales)."""
    return log_grid(lo, hi, per_octave)


def symmetric_grid(lo: float = 1e-10, hi: float = 1e10, per_octave: int = 8) -> np.ndarray:
    """Public grid ``-hi ... -lo, 0, lo ... hi`` (geometric on each side) for locations of unknown scale."""
    return signed_log_grid(lo, hi, per_octave)


def private_interval(
    x: np.ndarray,
    q_lo: float,
    q_hi: float,
    epsilon_each: float,
    rng: np.random.Generator,
    grid: np.ndarray | None = None,
    widen: float = 0.5,
    *,
    acc: Accountant,
    mechanisms: tuple[str, str],
) -> tuple[float, float]:
    """A private interval meant to hold the ``[q_lo, q_hi]`` quantile range, widened.

    Two tie-robust grid quantiles (each ``epsilon_each``-DP, charged to
    ``acc`` as ``mechanisms[0]`` and ``mechanisms[1]``) give cells; the
    interval runs from the lower edge of the ``q_lo`` cell to the upper edge
    of the ``q_hi`` cell and is widened on each side by ``widen`` times its
    width. A degenerate interval (both cells at the same grid point 0, or
    reversed picks) is repaired from the grid alone, never from the data.
    """
    grid = symmetric_grid() if grid is None else grid
    lo, _ = private_grid_cell(x, grid, epsilon_each, rng, acc=acc, mechanism=mechanisms[0], q=q_lo)
    _, hi = private_grid_cell(x, grid, epsilon_each, rng, acc=acc, mechanism=mechanisms[1], q=q_hi)
    if hi < lo:
        lo, hi = hi, lo
    if hi - lo <= 0:
        # both picks on one grid point: use the neighbouring grid points
        j = int(np.searchsorted(grid, lo))
        lo = float(grid[max(j - 1, 0)])
        hi = float(grid[min(j + 1, grid.size - 1)])
    w = hi - lo
    return float(lo - widen * w), float(hi + widen * w)


def adaptive_quantile(n: int, epsilon: float, kappa: float = 20.0, q_min: float = 0.5, q_max: float = 0.9999) -> float:
    """A high quantile an exponential mechanism can still locate: ``1 - kappa / (epsilon n)``, clamped.

    Above the ``q`` quantile of ``n`` values lie ``n (1 - q)`` of them; the
    tie-robust score of cells beyond the maximum is ``-(n (1 - q) + 1)``, so
    with ``n (1 - q) = kappa / epsilon`` those cells are down-weighted by
    ``exp(-kappa / 2)``. Computed from public quantities only.
    """
    q = 1.0 - kappa / max(epsilon * n, 1e-300)
    return float(min(max(q, q_min), q_max))


# --------------------------------------------------------------------------
# Private standardisation and noisy Gram matrices (row level)
# --------------------------------------------------------------------------


def is_binary_public(facts: Any, name: str) -> bool:
    """Whether a column is public 0/1: a categorical dummy or public bounds exactly [0, 1]."""
    if name in getattr(facts, "dummies", ()):
        return True
    b = getattr(facts, "bounds", {}).get(name)
    return b is not None and float(b[0]) == 0.0 and float(b[1]) == 1.0


#: a location is refined when the two grid cells around it span more than this many private scales
REFINE_CELLS = 2.0
#: at most this many points on the refined location's linear grid
REFINE_POINTS = 4096
#: the location is refined only when n times the scale's epsilon is at least this many logs of its grid's size
REFINE_MIN_NEPS = 32.0
#: a sparse column's scale is trusted when the chance that its median lands on a cell beyond all its non-zero pair
#: differences (orders of magnitude off) is at most this, by the bound of LocationScale.scale_unsure
SPARSE_FAIL = 0.01
#: the bar of LocationScale.scale_unsure on epsilon times the non-zero differences seen: 4 (log G - log SPARSE_FAIL),
#: G the size of the public scale grid (positive_grid())
_SPARSE_BAR = 4.0 * (math.log(positive_grid().size) - math.log(SPARSE_FAIL))


class LocationScale(NamedTuple):
    """A column's private location and scale (:func:`private_location_scale`) and its released pair count."""

    loc: float
    scale: float
    #: noisy number of non-zero pair differences the scale's median saw (NaN when not released) and its noise sd
    nonzero: float = math.nan
    nonzero_sd: float = math.nan

    def scale_unsure(self, n: int, epsilon: float) -> bool:
        """Whether the released count shows a sparse column whose scale its median could not locate (post-processing).

        A column is *sparse* when the count plus two noise sd is below
        ``n / 4``: more than half of the ``n / 2`` pairs tie (a point mass of
        about 70 % or more, as a rare 0/1 regressor). Its scale's median then
        sees only the count's ``N`` differences. A grid cell beyond all of
        them (below the smallest or above the largest: a scale orders of
        magnitude off) has the tie-robust score ``-N / 2`` or less, so the
        exponential mechanism (weights ``exp(epsilon score / 2)``, the best
        cell's at least 1) lands on one of them with probability at most
        ``G exp(-epsilon N / 4)`` over the grid's ``G`` cells. The scale is
        unsure when that bound, with ``N`` the count less two noise sd,
        exceeds :data:`SPARSE_FAIL`. A dense column's failed scale shows in the
        released Gram (its mean square far from 1, ``standardisation_visible_failure``);
        a sparse column's mean square is small by nature and a scale off by
        orders of magnitude can still look plausible there. Reads the
        released count, its noise sd and public values only.
        """
        if not math.isfinite(self.nonzero):
            return False
        sparse = self.nonzero + 2.0 * self.nonzero_sd < 0.25 * n
        seen = max(self.nonzero - 2.0 * self.nonzero_sd, 0.0)
        return bool(sparse and epsilon * seen < _SPARSE_BAR)


def private_location_scale(
    w: np.ndarray,
    epsilon: float,
    rng: np.random.Generator,
    bounds: tuple[float, float] | None = None,
    *,
    acc: Accountant,
    label: str,
    scale_epsilon: float | None = None,
    count_rho: float = 0.0,
) -> LocationScale:
    """Private location and scale of one column, robust to point masses.

    The location is a tie-robust grid median of ``w`` on the public symmetric
    grid (its grid point, so a column that is mostly 0 gets location exactly
    0). The scale is the upper edge of the tie-robust grid median of the
    *non-zero* differences ``|w_a - w_b|`` over the pairs of a random perfect
    matching (drawn from ``rng``, independent of the data). Pairs of tied
    values are left out, so a sparse or integer-valued column (mostly one
    value) gets the typical size of its other differences rather than 0; for
    Gaussian data the scale is about 0.95 standard deviations. Each step is
    ``epsilon``-DP: a row lies in one pair, so replacing it replaces, adds or
    removes one difference, and the tie-robust score has sensitivity 1 in all
    three cases. With public ``bounds`` the location is kept inside them and
    the scale is at most their width. Without any non-zero difference the
    mechanism draws from the whole grid (the column is then essentially
    constant and its scale is immaterial). The two mechanisms are charged to
    ``acc`` as ``grid median (label)`` and ``grid median of non-zero pair
    differences (label)``. When the two grid cells around the location span
    more than ``REFINE_CELLS`` scales (a column far from 0 relative to its
    spread, such as a calendar year), a third ``epsilon``-DP grid median on a
    linear grid of half-scale steps over those cells (a function of the
    released location and scale) replaces the location, charged as ``grid
    median, refined (label)`` on top of the others. The scale's mechanism runs at ``scale_epsilon``
    (default ``epsilon``): it sees about half as many values as the location's
    (one per pair, and only the non-zero ones), so the same failure rate needs
    about twice the epsilon.

    With ``count_rho > 0`` the number of non-zero differences is released
    too (Gaussian, charged ``count_rho`` in zCDP as ``Gaussian count of
    non-zero pair differences (label)``): a row lies in one pair, so
    replacing it changes the count by at most 1 (sensitivity 1). Its use is
    :meth:`LocationScale.scale_unsure`.
    """
    w = np.asarray(w, dtype=float).reshape(-1)
    grid = symmetric_grid()
    j = private_grid_index(w, grid, epsilon, rng, acc=acc, mechanism=f"grid median ({label})", q=0.5)
    loc = float(grid[j])
    perm = rng.permutation(w.size)
    diff = np.abs(w[perm[0 : w.size - 1 : 2]] - w[perm[1 : w.size : 2]])
    diff = diff[diff > 0]
    nonzero = nonzero_sd = math.nan
    if count_rho > 0:
        nonzero_sd = 1.0 / math.sqrt(2.0 * count_rho)
        nonzero = float(acc.gaussian(f"Gaussian count of non-zero pair differences ({label})", float(diff.size),
                                     sensitivity=1.0, sigma=nonzero_sd, rng=rng,
                                     note="a row lies in one pair of the matching: sensitivity 1"))
    sc_eps = epsilon if scale_epsilon is None else scale_epsilon
    sgrid = positive_grid()
    _, scale = private_grid_cell(
        diff, sgrid, sc_eps, rng, acc=acc, mechanism=f"grid median of non-zero pair differences ({label})", q=0.5,
    )
    lo_cell, hi_cell = float(grid[max(j - 1, 0)]), float(grid[min(j + 1, grid.size - 1)])
    # only where the scale's median is reliable (a public rule on n and its epsilon: about n/2 differences, at
    # least twice the log of its grid's size in units of 8 / epsilon), so that a failed scale, far too small,
    # does not send the location to a grid of the wrong step
    reliable = w.size * sc_eps >= REFINE_MIN_NEPS * math.log(sgrid.size)
    if reliable and hi_cell - lo_cell > REFINE_CELLS * scale:
        # the geometric grid's cells around the location are wider than a few scales (a column far from 0
        # relative to its spread, as a calendar year): the centred column would lie many scales from 0 and be
        # clipped whole. A second grid median on a linear grid of half-scale steps over those two cells
        # (public: the released location cell and scale) places it within a scale. Charged on top of the
        # step's share, so the stages after it have that much less.
        step = max(0.5 * scale, (hi_cell - lo_cell) / REFINE_POINTS)
        fine = np.append(np.arange(lo_cell, hi_cell, step), hi_cell)
        k = private_grid_index(w, fine, epsilon, rng, acc=acc, mechanism=f"grid median, refined ({label})", q=0.5)
        loc = float(fine[k])
    if bounds is not None:
        lo, hi = float(bounds[0]), float(bounds[1])
        if hi > lo:
            loc = float(np.clip(loc, lo, hi))
            scale = min(scale, hi - lo)
    return LocationScale(float(loc), float(scale), nonzero, nonzero_sd)


def gram_sensitivity(B: float) -> float:
    """L2 sensitivity of the upper triangle of ``A'A`` for rows ``a = (1, s)`` with ``||s|| <= B``.

    The constant entry ``n`` is public and not released. Replacing ``s`` by
    ``s'``, with ``c = s . s'`` (so ``|c| <= B^2``), changes the first row of
    ``A'A`` by ``s - s'``, of squared norm ``||s||^2 + ||s'||^2 - 2c <= 2B^2 - 2c``,
    and the rest by the upper triangle of ``M = ss' - s's''``, whose squared
    norm is ``(||M||_F^2 + sum_i M_ii^2) / 2`` with ``||M||_F^2 = ||s||^4 +
    ||s'||^4 - 2c^2`` and ``sum_i M_ii^2 = sum_i (s_i^2 - s'_i^2)^2 <= ||s||^4 +
    ||s'||^4``: at most ``2B^4 - c^2``. The total ``2B^4 + 2B^2 - 2c - c^2`` is
    largest at ``c = -1`` when ``B >= 1`` (``2B^4 + 2B^2 + 1``) and at ``c =
    -B^2`` otherwise (``B^4 + 4B^2``). Neighbours reach ``2B^4 + 2B^2 + 1/2``
    (``test_gram_sensitivity_bound``); the two parts bounded apart give
    ``sqrt(4B^2 + 2B^4)``, up to 11 % more.
    """
    b2 = B * B
    return float(math.sqrt(2.0 * b2 * b2 + 2.0 * b2 + 1.0 if b2 >= 1.0 else b2 * b2 + 4.0 * b2))


def noisy_gram(
    A: np.ndarray, sigma: float, rng: np.random.Generator, *,
    acc: Accountant, sensitivity: float, mechanism: str, note: str = "",
) -> np.ndarray:
    """``A'A`` plus symmetric Gaussian noise ``N(0, sigma^2)`` on every upper-triangle entry except ``[0, 0]``.

    ``A[:, 0]`` must be the constant 1 (its Gram entry ``n`` is public).
    ``sensitivity`` is the L2 sensitivity of the released upper triangle
    (:func:`gram_sensitivity`). The noise is drawn by ``acc.gaussian`` (one
    charge of ``mechanism`` at exactly ``sigma``) as a ``(p, p)`` matrix, of
    which the upper triangle is used and mirrored: the lower-triangle draws
    are discarded (so the draws are those of ``rng.normal(0, sigma, (p, p))``).
    """
    return noisy_symmetric(A.T @ A, sigma, rng, acc=acc, sensitivity=sensitivity, mechanism=mechanism, note=note,
                           public_corner=True)


def noisy_symmetric(
    M: np.ndarray, sigma: float, rng: np.random.Generator, *,
    acc: Accountant, sensitivity: float, mechanism: str, note: str = "", public_corner: bool = False,
) -> np.ndarray:
    """A symmetric matrix plus symmetric Gaussian noise ``N(0, sigma^2)`` on its upper triangle.

    One charge of ``mechanism`` at exactly ``sigma`` with ``sensitivity``, the
    L2 sensitivity of ``M``'s upper triangle; with ``public_corner`` the entry
    ``[0, 0]`` is left exact (a public count, as in :func:`noisy_gram`).
    """
    p = M.shape[0]
    E = acc.gaussian(mechanism, np.zeros((p, p)), sensitivity=sensitivity, sigma=sigma, rng=rng, note=note)
    E = np.triu(E)
    E = E + np.triu(E, 1).T
    if public_corner:
        E[0, 0] = 0.0
    return cast(np.ndarray, M + E)


# --------------------------------------------------------------------------
# Smith's median on an interval, with a data-dependent count
# --------------------------------------------------------------------------


def median_score_interval(z_sorted: np.ndarray, q: float = 0.5) -> np.ndarray:
    """Scores ``-|i - q n|`` of the ``n + 1`` intervals between sorted (clipped) values."""
    n = z_sorted.size
    return cast(np.ndarray, -np.abs(np.arange(n + 1) - q * n))


def private_median_interval(
    x: np.ndarray, lo: float, hi: float, epsilon: float, rng: np.random.Generator, q: float = 0.5, *,
    acc: Accountant, mechanism: str, sensitivity: float = 1.0, note: str = "",
) -> float:
    """Smith's private ``q``-quantile on the public interval ``[lo, hi]`` (``epsilon``-DP), charged to ``acc``.

    Values are clipped to ``[lo, hi]``; interval ``[z_i, z_{i+1})`` has score
    ``-|i - q n|`` and base measure its length (a continuous exponential
    mechanism with Lebesgue base measure on ``[lo, hi]``). Replacing a value
    changes ``i`` by at most 1; adding or removing one changes ``i`` by 0 or 1
    and ``q n`` by ``q``, so the score moves by at most ``max(q, 1 - q) <= 1``:
    sensitivity 1 even when the number of values depends on the data. With no
    values the output is uniform on ``[lo, hi]``. A caller whose values move
    more than one at a time (``k`` matchings of Theil-Sen) passes the score
    sensitivity ``k``.
    """
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise ValueError(f"need finite lo < hi, got [{lo}, {hi}]")
    z = np.sort(np.clip(np.asarray(x, dtype=float).reshape(-1), lo, hi))
    edges = np.concatenate([[lo], z, [hi]])
    lengths = np.diff(edges)
    with np.errstate(divide="ignore"):
        log_len = np.log(lengths)
    scores = median_score_interval(z, q)
    i = acc.exponential(
        mechanism, scores, sensitivity=sensitivity, epsilon=epsilon, rng=rng, bound=EM_BOUND, log_base=log_len, note=note
    )
    return float(rng.uniform(edges[i], edges[i + 1]))


def widened_median_scores(z: np.ndarray, lo: float, hi: float, width: float) -> tuple[np.ndarray, np.ndarray]:
    """Elementary intervals of ``[lo, hi]`` and their widened median scores.

    Smith's score at a point ``s`` is ``u(s) = -|i(s) - n/2|`` with
    ``i(s) = #{z < s}``; the widened score is ``max_{|s - r| <= width} u(s)``,
    which is ``0`` wherever a median lies within ``width`` of ``r``. A maximum
    of functions of sensitivity 1 has sensitivity 1. Returns the interval
    edges (length ``m + 1``) and the ``m`` scores.
    """
    z = np.sort(np.clip(np.asarray(z, dtype=float).reshape(-1), lo, hi))
    n = z.size
    pts = np.concatenate([[lo, hi], z, np.clip(z - width, lo, hi), np.clip(z + width, lo, hi)])
    edges = np.unique(pts)
    mids = 0.5 * (edges[:-1] + edges[1:])
    i_lo = np.searchsorted(z, mids - width, side="left")
    i_hi = np.searchsorted(z, mids + width, side="left")
    half = n / 2.0
    inside = (i_lo <= half) & (half <= i_hi)
    scores = np.where(inside, 0.0, -np.minimum(np.abs(i_lo - half), np.abs(i_hi - half)))
    return edges, scores


def private_widened_median(
    x: np.ndarray, lo: float, hi: float, width: float, epsilon: float, rng: np.random.Generator, *,
    acc: Accountant, mechanism: str, sensitivity: float = 1.0, note: str = "",
) -> float:
    """Widened exponential-mechanism median on ``[lo, hi]`` (``epsilon``-DP, charged to ``acc``; see :func:`widened_median_scores`).

    The idea follows the "widened" median of Alabi, McMillan, Sarathy, Smith
    and Vadhan (2020): points within ``width`` of the median all get the top
    score, so a median inside a tight cluster is not drawn from a tiny
    interval. The base measure is Lebesgue measure on ``[lo, hi]``.
    """
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise ValueError(f"need finite lo < hi, got [{lo}, {hi}]")
    if width < 0:
        raise ValueError("width must be >= 0")
    edges, scores = widened_median_scores(x, lo, hi, width)
    with np.errstate(divide="ignore"):
        log_len = np.log(np.diff(edges))
    i = acc.exponential(
        mechanism, scores, sensitivity=sensitivity, epsilon=epsilon, rng=rng, bound=EM_BOUND, log_base=log_len, note=note
    )
    return float(rng.uniform(edges[i], edges[i + 1]))
