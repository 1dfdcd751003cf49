"""The vectorised pair loops of ``dpstats.algorithms.sce._within`` give the numbers of a plain loop over the cells.

``WithinCells`` builds each chunk of pairs in one pass over its cells and
evaluates the module's pair functions on rows in cell order, in reused
buffers. Pinned here, bit for bit against straightforward references: the
chunks of ``pairs`` (their boundaries and the order of the pairs, which
the sums' rounding depends on), the pair scatter, the weighted counts and
the weighted sums.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpstats.algorithms.sce._within import (
    AbsDiff,
    ClippedDiffNorm,
    ClippedDiffProducts,
    WithinCells,
    _sum_rows,
    within_cells,
)


def _reference_pairs(cells: WithinCells, chunk: int):
    """The pairs cell by cell, ``max(1, chunk // m)`` rows of a cell at a time; a chunk closes at ``chunk`` pairs."""
    I, J, W, size = [], [], [], 0
    for rows in cells.cells:
        m = rows.size
        step = max(1, chunk // m)
        for r0 in range(0, m - 1, step):
            for a in range(r0, min(r0 + step, m - 1)):
                b = np.arange(a + 1, m)
                I.append(np.full(b.size, rows[a]))
                J.append(rows[b])
                W.append(np.full(b.size, 1.0 / m))
                size += b.size
            if size >= chunk:
                yield np.concatenate(I), np.concatenate(J), np.concatenate(W)
                I, J, W, size = [], [], [], 0
    if size:
        yield np.concatenate(I), np.concatenate(J), np.concatenate(W)


def _reference_scatter(cells: WithinCells, R: np.ndarray, B: float, col_clip: float) -> np.ndarray:
    M = np.zeros((R.shape[1], R.shape[1]))
    for i, j, w in cells.pairs():
        D = np.clip(R[i] - R[j], -col_clip, col_clip)
        if math.isfinite(B):
            D = D * np.minimum(1.0, B / np.maximum(np.linalg.norm(D, axis=1), 1e-300))[:, None]
        M += (D * w[:, None]).T @ D
    return M


def _cells(seed: int) -> tuple[WithinCells, np.random.Generator]:
    rng = np.random.default_rng(seed)
    n, levels = int(rng.integers(2, 1500)), int(rng.integers(1, 20))
    return within_cells(rng.integers(0, levels, n), levels, rng, int(rng.integers(2, 300))), rng


@pytest.mark.parametrize("seed", range(12))
def test_pairs_come_in_the_reference_chunks_and_order(seed):
    cells, _ = _cells(seed)
    for chunk in (1, 7, 500, 1 << 20):
        got, ref = list(cells.pairs(chunk)), list(_reference_pairs(cells, chunk))
        assert len(got) == len(ref)
        for g, r in zip(got, ref, strict=True):
            for a, b in zip(g, r, strict=True):
                assert a.dtype == b.dtype and np.array_equal(a, b)


@pytest.mark.parametrize("seed", range(12))
def test_pair_statistics_are_those_of_the_plain_callables(seed):
    cells, rng = _cells(seed)
    p = int(rng.integers(1, 12))  # also past 8 columns, where numpy's row sums change their order
    R = rng.standard_normal((cells.n, p)) * np.exp(rng.uniform(-3.0, 3.0, (cells.n, p)))
    B, col_clip = float(rng.uniform(0.1, 5.0)), float(rng.choice([math.inf, 1.0, 3.0]))
    assert np.array_equal(cells.scatter(R, B, col_clip), _reference_scatter(cells, R, B, col_clip))
    assert np.array_equal(cells.scatter(R), _reference_scatter(cells, R, math.inf, math.inf))
    grid = np.sort(rng.uniform(0.0, 5.0, 30))
    u, v = R[:, 0], rng.standard_normal(cells.n)
    for f in (ClippedDiffNorm(R, col_clip), AbsDiff(u)):
        for nonzero in (False, True):
            got = cells.weighted_counts(f, grid, nonzero)
            # a lambda takes the generic path: f on row indices, chunk by chunk
            ref = cells.weighted_counts(lambda i, j, f=f: f(i, j), grid, nonzero)
            assert np.array_equal(got[0], ref[0]) and got[1] == ref[1]
    prod = ClippedDiffProducts(u, v, 0.7, 1.3)
    assert np.array_equal(cells.weighted_sums(prod), cells.weighted_sums(lambda i, j: prod(i, j)))
    for part in cells.by_level_group(3):
        if part.cells:
            assert np.array_equal(part.weighted_sums(prod), part.weighted_sums(lambda i, j: prod(i, j)))


@pytest.mark.parametrize("p", [1, 2, 3, 5, 7, 8, 9, 17])
def test_row_helpers_are_numpy_bit_for_bit(p):
    """The blocked row sums equal ``np.add.reduce`` along the rows (so the norms are ``np.linalg.norm``'s)."""
    rng = np.random.default_rng(p)
    N = 3 * 4096 + 77  # several blocks and a short one
    D = rng.standard_normal((N, p)) * np.exp(rng.uniform(-30.0, 30.0, (N, p)))
    assert np.array_equal(np.sqrt(_sum_rows(D * D, np.empty(N))), np.linalg.norm(D, axis=1))
    assert np.array_equal(_sum_rows(D, np.empty(N)), np.add.reduce(D, axis=1))
