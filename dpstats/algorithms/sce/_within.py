"""Within-group statistics as pair U-statistics, for absorbing a fixed effect privately.

The within-group scatter of rows ``r_i`` in groups ``g`` is a U-statistic of
pair differences:

    sum_g sum_{i in g} (r_i - rbar_g)(r_i - rbar_g)' = sum_g (1 / n_g) sum_{i < j in g} (r_i - r_j)(r_i - r_j)'.

Clipping the *pair differences* (rather than the rows) bounds every term at
the within-group scale, and the weights ``1 / n_g`` bound what one row can
change. Under replace-one neighbours, where the replaced row may also change
its group, for any pair function ``f`` with values in a set of norm ``<= F``:

* removing a row from a group of ``m`` drops its ``m - 1`` pairs (weight
  ``1/m`` each: at most ``F`` in all) and raises the weight of the other
  ``(m - 1)(m - 2) / 2`` pairs from ``1/m`` to ``1/(m - 1)`` (at most
  ``F / 2`` in all); adding a row to a group is the mirror image. A
  replacement across groups therefore moves ``sum_g (1/n_g) sum f`` by at
  most ``3 F``, one within a group by at most ``2 F`` (its own ``m - 1``
  pairs, on both sides).
* For terms in an interval ``[a, a + F]`` that contains 0 (squares and
  indicator counts in ``[0, F]``; the quantile scores' ``1[v <= g] - q`` in
  ``[-q, 1 - q]``) the dropped pairs and the re-weighted ones move the sum in
  opposite directions: removal moves it within
  ``[-(a + F) + a / 2, -a + (a + F) / 2]``, addition within
  ``[a - (a + F) / 2, (a + F) - a / 2]``, so a replacement by at most
  ``1.5 F``, whatever ``a``. A pair left out of a count (a zero difference)
  is a term 0, inside the interval.
* For positive semi-definite terms ``D D'`` with ``||D|| <= B`` (the scatter),
  a replacement changes the sum by ``P - Q`` with ``P`` (the re-weighted pairs
  of the old group and the new pairs) and ``Q`` (the dropped pairs and the
  down-weighted pairs of the new group) positive semi-definite of Frobenius
  norm at most ``1.5 B^2`` each; ``||P - Q||_F^2 <= ||P||_F^2 + ||Q||_F^2``
  (their inner product is non-negative), so at most ``(3 / sqrt 2) B^2``.

Large groups are split into public random *cells* (group, key mod ``K``)
with ``K`` a function of public counts, so the number of pairs stays of order
``n m_cell / 2``; a row keeps its key, so a replacement moves it from one
cell to another and the bounds above hold with cells for groups.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dpstats.privacy.accounting import Accountant, EMBound

__all__ = [
    "WithinCells",
    "AbsDiff",
    "ClippedDiffNorm",
    "ClippedDiffProducts",
    "group_ids",
    "within_cells",
    "PAIR_SUM_SENSITIVITY",
    "PAIR_SQUARE_SENSITIVITY",
    "pair_scatter_sensitivity",
    "PAIR_QUANTILE_SENSITIVITY",
    "pair_quantile_scores",
    "private_pair_quantile",
]

#: a replacement moves sum_g (1/n_g) sum f by at most this times sup |f| (terms of any sign)
PAIR_SUM_SENSITIVITY = 3.0
#: ... and by at most this times sup f for terms in [0, sup f] (squares, counts)
PAIR_SQUARE_SENSITIVITY = 1.5


def pair_scatter_sensitivity(B: float) -> float:
    """L2 sensitivity of the upper triangle of the pair scatter with differences clipped to norm ``B``: ``3 B^2 / sqrt 2``."""
    return float(3.0 / math.sqrt(2.0) * B * B)


#: sensitivity of :func:`pair_quantile_scores` at any level ``q``: each score is ``-max(0, A, B)`` with ``A``, ``B``
#: weighted pair sums of terms in an interval of width 1 that contains 0 (see the module docstring)
PAIR_QUANTILE_SENSITIVITY = PAIR_SQUARE_SENSITIVITY


def group_ids(D: np.ndarray) -> np.ndarray:
    """Row labels ``0..k`` from a treatment-coded dummy block ``D`` (n, k): 0 for the reference level."""
    D = np.asarray(D)
    return np.where(D.any(axis=1), np.argmax(D, axis=1) + 1, 0)


class AbsDiff:
    """The pair function ``|x_i - x_j|`` of a vector ``x``, callable on row indices ``(i, j)``.

    :class:`WithinCells` evaluates it on a copy of ``x`` in cell order, so
    that its gathers read neighbouring memory; the values are the same.
    """

    def __init__(self, x: np.ndarray) -> None:
        self.x = x

    def __call__(self, i: np.ndarray, j: np.ndarray) -> np.ndarray:
        return np.asarray(np.abs(self.x[i] - self.x[j]))

    def in_cell_order(self, rows: np.ndarray) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
        """The same function of positions in ``rows`` (rows ``rows[a]``, ``rows[b]``)."""
        xs = self.x[rows]
        return lambda a, b: np.abs(xs[a] - xs[b])


class ClippedDiffNorm:
    """The pair function ``||clip(r_i - r_j, +-col_clip)||`` of the rows of ``R``, callable on row indices ``(i, j)``."""

    def __init__(self, R: np.ndarray, col_clip: float = math.inf) -> None:
        self.R = R
        self.col_clip = col_clip

    def __call__(self, i: np.ndarray, j: np.ndarray) -> np.ndarray:
        return np.asarray(np.linalg.norm(np.clip(self.R[i] - self.R[j], -self.col_clip, self.col_clip), axis=1))


class ClippedDiffProducts:
    """The pair function ``(du dv, du^2, dv^2)`` with ``du = clip(u_i - u_j, +-C_u)``, ``dv = clip(v_i - v_j, +-C_v)``.

    Callable on row indices ``(i, j)``; returns an array of shape ``(3, pairs)``.
    """

    def __init__(self, u: np.ndarray, v: np.ndarray, C_u: float, C_v: float) -> None:
        self.u, self.v, self.C_u, self.C_v = u, v, C_u, C_v

    def __call__(self, i: np.ndarray, j: np.ndarray) -> np.ndarray:
        du = np.clip(self.u[i] - self.u[j], -self.C_u, self.C_u)
        dv = np.clip(self.v[i] - self.v[j], -self.C_v, self.C_v)
        return np.vstack([du * dv, du * du, dv * dv])

    def in_cell_order(self, rows: np.ndarray) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
        """The same function of positions in ``rows``, writing its three rows straight into one array."""
        us, vs = self.u[rows], self.v[rows]
        C_u, C_v = self.C_u, self.C_v

        def f(a: np.ndarray, b: np.ndarray) -> np.ndarray:
            out = np.empty((3, a.size))
            du = np.subtract(us[a], us[b])
            np.clip(du, -C_u, C_u, out=du)
            dv = np.subtract(vs[a], vs[b])
            np.clip(dv, -C_v, C_v, out=dv)
            np.multiply(du, dv, out=out[0])
            np.multiply(du, du, out=out[1])
            np.multiply(dv, dv, out=out[2])
            return out

        return f


@dataclass(frozen=True)
class WithinCells:
    """Rows by cell (only cells with two rows or more) and the public split factor ``K``."""

    cells: tuple[np.ndarray, ...]
    K: int
    levels: int
    n: int  #: public: rows of the design
    #: the absorbed level (0 .. levels - 1, as :func:`group_ids`) of each cell (private: which rows it holds)
    cell_levels: tuple[int, ...] = ()
    #: the rows of all cells in cell order, and the chunk plans of :meth:`_pair_positions` by chunk size
    _memo: dict[Any, Any] = field(default_factory=dict, init=False, compare=False, repr=False)

    def by_level_group(self, J: int) -> list[WithinCells]:
        """The cells split into ``J`` groups of levels, level ``l`` in group ``l mod J`` (a public rule on levels).

        Every pair of a cell lies within one level, so the weighted pair sums of
        the groups add up to the whole; a row moves between at most two of them.
        """
        return [WithinCells(cells=tuple(c for c, lv in zip(self.cells, self.cell_levels, strict=False) if lv % J == g),
                            K=self.K, levels=self.levels, n=self.n,
                            cell_levels=tuple(lv for lv in self.cell_levels if lv % J == g)) for g in range(J)]

    @property
    def rows(self) -> np.ndarray:
        """The rows of all cells, cell after cell (the positions of :meth:`_pair_positions` index it)."""
        if "rows" not in self._memo:
            self._memo["rows"] = np.concatenate(self.cells) if self.cells else np.zeros(0, dtype=np.int64)
        rows: np.ndarray = self._memo["rows"]
        return rows

    def _plan(self, chunk: int) -> list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
        """The chunks of :meth:`pairs` as pieces ``(offset, m, r0, r1)``: rows ``r0 .. r1 - 1`` of the cell of ``m``
        rows starting at ``offset`` in :attr:`rows`, each paired with the cell's later rows.

        A chunk closes once it holds ``chunk`` pairs or more; a cell's rows are taken ``max(1, chunk // m)`` at a
        time, so a chunk holds fewer than about ``2 chunk`` pairs.
        """
        if chunk not in self._memo:
            plan: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
            cur: list[tuple[int, int, int, int]] = []
            size = 0
            off = 0
            for rows in self.cells:
                m = rows.size
                step = max(1, chunk // m)
                for r0 in range(0, m - 1, step):
                    r1 = min(r0 + step, m - 1)
                    cur.append((off, m, r0, r1))
                    # pairs of rows r0 .. r1 - 1: the sum of m - 1 - a over them
                    size += (r1 - r0) * (m - 1) - (r0 + r1 - 1) * (r1 - r0) // 2
                    if size >= chunk:
                        plan.append(_columns(cur))
                        cur, size = [], 0
                off += m
            if size:
                plan.append(_columns(cur))
            self._memo[chunk] = plan
        out: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = self._memo[chunk]
        return out

    def _pair_positions(self, chunk: int = 1 << 20) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Chunks ``(a, b, w)`` of all within-cell pairs as positions in :attr:`rows` and their weights ``1 / n_cell``.

        The pairs of :meth:`pairs`, in the same order and chunks.
        """
        for off, m, r0, r1 in self._plan(chunk):
            na = r1 - r0
            piece = np.repeat(np.arange(na.size), na)
            a = r0[piece] + (np.arange(piece.size) - np.repeat(np.cumsum(na) - na, na))
            ms = m[piece]
            lens = ms - 1 - a
            pos = off[piece] + a
            # pair t of the chunk, the k-th of row pos, pairs it with pos + 1 + k, where k = t - (pairs of the
            # earlier rows): one offset per row, repeated, plus t
            shift = pos + 1 - (np.cumsum(lens) - lens)
            yield np.repeat(pos, lens), np.arange(int(lens.sum())) + np.repeat(shift, lens), np.repeat(1.0 / ms, lens)

    def pairs(self, chunk: int = 1 << 20) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Chunks ``(i, j, w)`` of all within-cell pairs ``i < j`` and their weights ``1 / n_cell``."""
        rows = self.rows
        for a, b, w in self._pair_positions(chunk):
            yield rows[a], rows[b], w

    def _values(self, f: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Chunks ``(f(i, j), w)`` over all pairs; a pair function of this module is evaluated in cell order."""
        if isinstance(f, ClippedDiffNorm):
            for _, nrm, w in self._clipped_diffs(f.R, f.col_clip):
                yield nrm, w
        elif isinstance(f, (AbsDiff, ClippedDiffProducts)):
            g = f.in_cell_order(self.rows)
            for a, b, w in self._pair_positions():
                yield g(a, b), w
        else:
            for i, j, w in self.pairs():
                yield f(i, j), w

    def _clipped_diffs(self, R: np.ndarray, col_clip: float) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Chunks ``(D, ||D||, w)`` of the clipped pair differences ``D = clip(r_i - r_j, +-col_clip)`` (pairs by rows).

        ``D`` and the norms are views of buffers that the next chunk overwrites (``take`` in mode ``clip`` writes
        straight into them; the positions are in range). The norms are those of :func:`numpy.linalg.norm`: the row
        sums of ``D * D`` as ``np.add.reduce`` adds them (:func:`_sum_rows`), then the square root.
        """
        Rs = np.ascontiguousarray(R[self.rows], dtype=float)
        p = Rs.shape[1]
        D_buf = sq_buf = nrm_buf = np.zeros(0)
        for a, b, w in self._pair_positions():
            N = a.size
            if D_buf.size < N * p:
                D_buf, sq_buf, nrm_buf = np.empty(N * p), np.empty(N * p), np.empty(N)
            D = D_buf[:N * p].reshape(N, p)
            sq = sq_buf[:N * p].reshape(N, p)
            nrm = nrm_buf[:N]
            np.take(Rs, a, axis=0, out=D, mode="clip")
            np.take(Rs, b, axis=0, out=sq, mode="clip")
            np.subtract(D, sq, out=D)
            np.clip(D, -col_clip, col_clip, out=D)
            np.multiply(D, D, out=sq)
            _sum_rows(sq, nrm)
            np.sqrt(nrm, out=nrm)
            yield D, nrm, w

    def weighted_sum(self, f: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> float:
        """``sum_cells (1 / n_cell) sum_{i < j} f(i, j)`` for a vectorised pair function ``f``."""
        return float(self.weighted_sums(lambda i, j: f(i, j)[None, :])[0])

    def weighted_sums(self, f: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> np.ndarray:
        """Several weighted pair sums in one pass: ``f(i, j)`` returns an array of shape ``(k, pairs)``."""
        total: np.ndarray | None = None
        for v, w in self._values(f):
            part = np.asarray(v) @ w
            total = part if total is None else total + part
        return np.zeros(0) if total is None else total

    def scatter(self, R: np.ndarray, B: float = math.inf, col_clip: float = math.inf) -> np.ndarray:
        """``sum_cells (1 / n_cell) sum_{i < j} D D'`` for ``D = r_i - r_j``, clipped to ``+-col_clip``, then to norm ``B``.

        Unclipped, this is the within-cell scatter (the Gram matrix of the
        cell-demeaned rows).
        """
        p = R.shape[1]
        M = np.zeros((p, p))
        Dw_buf = np.zeros(0)
        for D, nrm, w in self._clipped_diffs(R, col_clip):
            N = w.size
            if math.isfinite(B):
                np.multiply(D, np.minimum(1.0, B / np.maximum(nrm, 1e-300))[:, None], out=D)
            if Dw_buf.size < N * p:
                Dw_buf = np.empty(N * p)
            Dw = Dw_buf[:N * p].reshape(N, p)
            np.multiply(D, w[:, None], out=Dw)
            M += Dw.T @ D
        return M

    def weighted_counts(self, f: Callable[[np.ndarray, np.ndarray], np.ndarray], grid: np.ndarray,
                        nonzero: bool) -> tuple[np.ndarray, float]:
        """Weighted counts ``c(g_k) = sum w 1[v <= g_k]`` over pair values ``v = f(i, j) >= 0``, and their total weight.

        With ``nonzero``, pairs with ``v = 0`` are left out of both.
        """
        hist = np.zeros(grid.size + 1)
        total = 0.0
        for v, w in self._values(f):
            if nonzero:
                keep = v > 0
                v, w = v[keep], w[keep]
            hist += np.bincount(np.searchsorted(grid, v, side="left"), weights=w, minlength=grid.size + 1)
            total += float(w.sum())
        return np.cumsum(hist)[:-1], total

    @property
    def public_weight(self) -> float:
        """A public stand-in for the total pair weight ``sum (n_cell - 1) / 2``: ``(n - levels K) / 2`` (for quantile levels)."""
        return max(0.5 * (self.n - self.levels * self.K), 1.0)


#: rows per block of :func:`_sum_rows` (a block of a few columns stays in cache)
_ROW_BLOCK = 4096


def _sum_rows(A: np.ndarray, out: np.ndarray) -> np.ndarray:
    """``np.add.reduce(A, axis=1, out=out)`` for a C-contiguous ``A`` (N, p), bit for bit.

    numpy sums a contiguous run of fewer than 8 values in order (its pairwise
    summation pairs from 8 values on) but calls its inner loop once per row,
    which dominates for short rows; for ``p < 8`` the same additions,
    ``((a_0 + a_1) + a_2) + ...``, run here one column at a time over blocks
    of rows.
    """
    N, p = A.shape
    if not 2 <= p < 8:
        np.add.reduce(A, axis=1, out=out)
        return out
    for r0 in range(0, N, _ROW_BLOCK):
        blk, o = A[r0:r0 + _ROW_BLOCK], out[r0:r0 + _ROW_BLOCK]
        np.add(blk[:, 0], blk[:, 1], out=o)
        for c in range(2, p):
            np.add(o, blk[:, c], out=o)
    return out


def _columns(pieces: list[tuple[int, int, int, int]]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The four columns of a list of pieces ``(offset, m, r0, r1)`` as integer arrays."""
    a = np.array(pieces, dtype=np.int64).T
    return a[0], a[1], a[2], a[3]


def within_cells(groups: np.ndarray, levels: int, rng: np.random.Generator, m_cell: int) -> WithinCells:
    """Cells (group, key mod ``K``) with ``K = max(1, ceil(n / (levels m_cell)))`` (public) and keys drawn from ``rng``.

    The keys are a data-independent random label per row position; for
    ``K = 1`` no key is drawn and the cells are the groups.
    """
    n = groups.size
    K = max(1, math.ceil(n / (levels * max(m_cell, 2))))
    cell = groups.astype(np.int64)
    if K > 1:
        cell = cell * K + rng.integers(0, K, size=n)
    order = np.argsort(cell, kind="stable")
    bounds = np.flatnonzero(np.diff(cell[order])) + 1
    cells = tuple(c for c in np.split(order, bounds) if c.size >= 2)
    return WithinCells(cells=cells, K=K, levels=levels, n=n,
                       cell_levels=tuple(int(groups[c[0]]) for c in cells))


def private_pair_quantile(
    cells: WithinCells, f: Callable[[np.ndarray, np.ndarray], np.ndarray], q: float, grid: np.ndarray,
    epsilon: float, rng: np.random.Generator, *, acc: Accountant, mechanism: str, bound: EMBound,
    nonzero: bool = True, note: str = "",
) -> float:
    """Upper edge of the grid cell holding the weighted ``q``-quantile of pair values ``f(i, j) >= 0``; ``epsilon``-DP.

    The scores of :func:`pair_quantile_scores` (sensitivity
    :data:`PAIR_QUANTILE_SENSITIVITY`), drawn and charged to ``acc`` as
    ``mechanism``.
    """
    scores = pair_quantile_scores(cells, f, q, grid, nonzero)
    k = acc.exponential(mechanism, scores, sensitivity=PAIR_QUANTILE_SENSITIVITY, epsilon=epsilon, rng=rng,
                        bound=bound, note=note)
    return float(grid[k])


def pair_quantile_scores(cells: WithinCells, f: Callable[[np.ndarray, np.ndarray], np.ndarray], q: float,
                         grid: np.ndarray, nonzero: bool = True) -> np.ndarray:
    """Tie-robust scores of the grid for the weighted ``q``-quantile of pair values ``f(i, j) >= 0``.

    As :func:`~dpstats.privacy.mechanisms.grid_quantile_scores`, on weighted
    counts: ``-max(0, c(g_{k-1}) - q W, q W - c(g_k))`` with ``W`` the total
    weight (of the non-zero values with ``nonzero``). Both ``c(g) - q W`` and
    ``q W - c(g)`` are weighted pair sums of ``+-(1[v <= g] - q)``, terms in
    an interval of width 1 that contains 0 (0 for a pair left out), so a
    replaced row moves every score by at most
    :data:`PAIR_QUANTILE_SENSITIVITY` = 1.5 at every ``q``.
    """
    c, W = cells.weighted_counts(f, grid, nonzero)
    r = q * W
    c_prev = np.concatenate([[0.0], c[:-1]])
    scores: np.ndarray = -np.maximum.reduce([np.zeros_like(c), c_prev - r, r - c])
    return scores
