"""Private quantiles on public grids: the tie-robust exponential mechanism, drawn and charged in one call.

Every algorithm that locates a quantile, a scale or a bound on a public grid
calls :func:`private_grid_index` (or :func:`private_grid_cell` for the
cell's edges). The scores are
:func:`~dpstats.privacy.mechanisms.grid_quantile_scores` (sensitivity 1 under
replace-one, and under add/remove-one for a quantile level ``q``), and the
draw is the accountant's charging call ``acc.exponential`` at bounded range
(``epsilon^2 / 8`` in zCDP; Cesar and Rogers 2021, Lemma 3.2). The ledger
entry's note is the caller's note, the target (``q=...`` or ``rank=...``)
and :data:`BR_NOTE`, in that order.

Examples
--------
>>> import numpy as np
>>> from dpstats.privacy.accounting import ZCDPAccountant
>>> from dpstats.privacy.mechanisms import log_grid
>>> acc = ZCDPAccountant(1.0, 1e-6)
>>> eps = acc.em_epsilon(acc.rho, bound="bounded_range")  # the whole budget: eps^2 / 8 = rho
>>> x = np.random.default_rng(0).lognormal(size=5000)
>>> grid = log_grid(1e-3, 1e3, 8)
>>> j = private_grid_index(x, grid, eps, np.random.default_rng(1), acc=acc, mechanism="median", q=0.5)
>>> bool(0.8 < grid[j] < 1.25)
True
>>> acc.exhausted()
True
>>> acc.ledger[0].note
'q=0.5; exponential mechanism: eps-bounded-range, so eps^2/8-zCDP (Cesar & Rogers 2021, Lemma 3.2)'
"""

from __future__ import annotations

import numpy as np

from dpstats.privacy.accounting import Accountant
from dpstats.privacy.mechanisms import grid_quantile_scores

__all__ = ["BR_NOTE", "private_grid_index", "private_grid_cell"]

#: The end of every grid-quantile ledger note: why the entry costs ``epsilon^2 / 8``.
BR_NOTE = "exponential mechanism: eps-bounded-range, so eps^2/8-zCDP (Cesar & Rogers 2021, Lemma 3.2)"


def private_grid_index(
    x: np.ndarray, grid: np.ndarray, epsilon: float, rng: np.random.Generator, *, acc: Accountant,
    mechanism: str, q: float | None = None, rank: int | None = None, note: str = "",
) -> int:
    """Index ``j`` of the grid cell ``(g_{j-1}, g_j]`` holding the ``q`` quantile (or the ``rank``-th value).

    An ``epsilon``-DP exponential mechanism on the tie-robust grid scores
    (sensitivity 1), drawn and charged to ``acc`` as ``mechanism`` at its
    bounded-range cost. Exactly one of ``q`` and ``rank`` (which must be
    public: a function of ``n``). Values below ``grid[0]`` count in the first
    cell, values above the last point in none.

    Parameters
    ----------
    x : array_like
        The private values (flattened).
    grid : array_like
        Public increasing grid.
    epsilon : float
        The mechanism's epsilon.
    rng : Generator
        The release's generator.
    acc : Accountant
        Charged ``epsilon^2 / 8`` (zCDP) or ``epsilon`` (pure DP).
    mechanism : str
        The ledger entry's name.
    q, rank : float or int, optional
        The target: a quantile level, or a 1-based order statistic.
    note : str
        What is located; the ledger note adds the target and :data:`BR_NOTE`.
    """
    scores = grid_quantile_scores(x, grid, q=q, rank=rank)
    target = f"q={q:.4g}" if q is not None else f"rank={rank}"
    full = "; ".join(part for part in (note, target, BR_NOTE) if part)
    return acc.exponential(mechanism, scores, sensitivity=1.0, epsilon=epsilon, rng=rng, bound="bounded_range",
                           note=full)


def private_grid_cell(
    x: np.ndarray, grid: np.ndarray, epsilon: float, rng: np.random.Generator, *, acc: Accountant,
    mechanism: str, q: float | None = None, rank: int | None = None, note: str = "",
) -> tuple[float, float]:
    """The edges ``(lower, upper)`` of the cell :func:`private_grid_index` draws (same privacy and charge).

    The lower edge of the first cell is ``grid[0]``.
    """
    g = np.asarray(grid, dtype=float)
    j = private_grid_index(x, g, epsilon, rng, acc=acc, mechanism=mechanism, q=q, rank=rank, note=note)
    lo = float(g[j - 1]) if j > 0 else float(g[0])
    return lo, float(g[j])
