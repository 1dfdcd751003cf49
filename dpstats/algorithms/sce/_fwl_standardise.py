"""Stage 1a and 1b of fwl_score: the private standardisation of the columns and their noisy Gram.

See ``docs/algorithms/sce/fwl_score.md`` (*Algorithm*, steps 1-3, and *Privacy
argument*). :func:`standardise` releases them for given columns;
:class:`Standardised` holds the release and can reorder its columns, so that
several targets are partialled out of one release
(:func:`dpstats.algorithms.sce._fwl_nuisance.partial_out`'s ``stage1``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpstats.algorithms.sce._utils import (
    EM_BOUND,
    adaptive_quantile,
    gram_sensitivity,
    is_binary_public,
    noisy_gram,
    positive_grid,
    private_location_scale,
)
from dpstats.privacy.accounting import ZCDPAccountant, em_epsilon
from dpstats.privacy.quantiles import private_grid_cell

__all__ = ["Standardised", "finite_bounds", "gram_share_for", "standardise"]


def finite_bounds(bounds: Mapping[str, tuple[float, float]], name: str) -> tuple[float, float] | None:
    """A column's public bounds ``(lo, hi)`` when both are finite, else None (public facts only)."""
    b = bounds.get(name)
    if b is None or not (np.isfinite(b[0]) and np.isfinite(b[1])):
        return None
    return b[0], b[1]


@dataclass(frozen=True)
class Standardised:
    """Stage 1's released standardisation and Gram of the columns ``W`` (everything here is private or paid).

    ``cols`` names each column of ``W`` by its design column (``-1`` the
    outcome); :meth:`reordered` gives the same release with the columns in
    another order (the Gram's constant row stays first), so that several
    targets can be partialled out of one release (:func:`partial_out`'s
    ``stage1``).
    """

    W: np.ndarray
    names: tuple[str, ...]
    cols: tuple[int, ...]
    public: np.ndarray
    free: np.ndarray
    loc: np.ndarray
    scale: np.ndarray
    Sc: np.ndarray
    over_clip: np.ndarray
    B: float
    G: np.ndarray
    sigma_gram: float
    n_private: int
    bounds: Mapping[str, tuple[float, float]]
    #: per column, whether its released count of non-zero pair differences shows a sparse column whose private
    #: scale could not be located (:meth:`~dpstats.algorithms.sce._utils.LocationScale.scale_unsure`; all
    #: False without the counts)
    unsure: np.ndarray | None = None

    def reordered(self, cols: list[int]) -> Standardised:
        """The columns ``cols`` (design columns, ``-1`` the outcome), in that order: a permutation of ``cols``."""
        order = [self.cols.index(c) for c in cols]
        if sorted(order) != list(range(len(self.cols))):
            raise ValueError(f"reordered needs a permutation of the columns {self.cols}, got {cols}")
        gi = [0] + [1 + q for q in order]
        return Standardised(
            W=self.W[:, order], names=tuple(self.names[q] for q in order), cols=tuple(cols),
            public=self.public[order], free=self.free[order], loc=self.loc[order], scale=self.scale[order],
            Sc=self.Sc[:, order], over_clip=self.over_clip, B=self.B, G=self.G[np.ix_(gi, gi)],
            sigma_gram=self.sigma_gram, n_private=self.n_private, bounds=self.bounds,
            unsure=None if self.unsure is None else self.unsure[order],
        )


def standardise(
    W: np.ndarray, names: list[str], cols: list[int], facts: Any, acc: ZCDPAccountant, rng: np.random.Generator,
    const: bool, *, scale_share: float, gram_share: float, scale_factor: float, col_clip: float, kappa: float,
    q_row_max: float, use_bounds: bool = False, scale_weight: float = 1.0, nonzero_share: float = 0.0,
) -> Standardised:
    """Stage 1a and 1b on the columns ``W``: private locations and scales, the row bound, the noisy Gram.

    Spends ``scale_share + gram_share`` of ``acc.rho``: ``2 m + 1``
    exponential mechanisms (``m`` columns standardised privately) and one
    Gaussian Gram of ``(1, W)`` standardised, clipped to ``+-col_clip`` and
    to the private row bound (see :func:`partial_out`). ``const``: the
    design has a constant column (locations are then centred).

    With ``nonzero_share > 0`` that share of ``acc.rho``, split evenly over the
    privately scaled columns, also releases each one's count of non-zero
    pair differences (:func:`private_location_scale`), on top of the shares
    above (what follows has that much less); ``unsure`` marks the columns
    whose count shows a sparse column with too few of them for its scale.
    """
    n = W.shape[0]
    rho = acc.rho
    p = W.shape[1]
    weighted = bool(getattr(facts, "weighted", False))
    # rows of weighted instances are scaled by sqrt(weight): public bounds no longer hold
    bounds = {} if weighted else dict(facts.bounds)
    public = np.array([(not weighted) and is_binary_public(facts, nm) for nm in names])
    loc = np.zeros(p)
    scale = np.ones(p)
    # optionally, columns with a finite public range use it (free): centre = midpoint, scale = half-width
    ranged = np.zeros(p, dtype=bool)
    c: int | np.integer[Any]  # the column loops run over numpy indices and over range(p)
    if use_bounds:
        for c in np.flatnonzero(~public):
            b = finite_bounds(bounds, names[c])
            if b is not None and b[1] > b[0]:
                ranged[c] = True
                loc[c] = 0.5 * (b[0] + b[1]) if const else 0.0
                scale[c] = 0.5 * (b[1] - b[0]) if const else max(abs(b[0]), abs(b[1]))
    free = ~public & ~ranged
    n_private = int(free.sum())
    # ---- stage 1a: private location and scale of each other column, and a row-norm bound
    # each column's location and the row bound weigh 1, each column's scale scale_weight
    units = n_private * (1.0 + scale_weight) + 1.0
    e_em = em_epsilon(scale_share * rho / units, bound=EM_BOUND)
    e_sc = em_epsilon(scale_share * rho * scale_weight / units, bound=EM_BOUND)
    count_rho = nonzero_share * rho / n_private if n_private else 0.0
    unsure = np.zeros(p, dtype=bool)
    for c in np.flatnonzero(free):
        ls = private_location_scale(W[:, c], e_em, rng, bounds.get(names[c]), acc=acc, label=names[c],
                                    scale_epsilon=e_sc, count_rho=count_rho)
        loc[c], sc = ls.loc, ls.scale
        unsure[c] = ls.scale_unsure(n, e_sc)
        scale[c] = scale_factor * sc
        if not const:
            loc[c] = 0.0
    Sraw = (W - loc) / scale
    Sc = np.clip(Sraw, -col_clip, col_clip)
    # rows the column clip changes (private: enters only the paid count of tail_count)
    over_clip = np.any(np.abs(Sraw) > col_clip, axis=1)
    norms = np.linalg.norm(Sc, axis=1)
    q_row = adaptive_quantile(n, e_em, kappa, q_max=q_row_max)
    _, B = private_grid_cell(norms, positive_grid(1e-3, 1e4), e_em, rng, acc=acc,
                             mechanism="grid quantile (row norm)", q=q_row)
    Sr = Sc * np.minimum(1.0, B / np.maximum(norms, 1e-300))[:, None]
    # ---- stage 1b: noisy Gram of (1, controls, x, y)
    A = np.column_stack([np.ones(n), Sr])
    Delta_G = gram_sensitivity(B)
    sig_G = Delta_G / math.sqrt(2.0 * gram_share * rho)
    G = noisy_gram(A, sig_G, rng, acc=acc, sensitivity=Delta_G, mechanism="Gaussian Gram of (1, controls, x, y)",
                   note=f"row norm bound {B:.4g}")
    return Standardised(
        W=W, names=tuple(names), cols=tuple(cols), public=public, free=free, loc=loc, scale=scale, Sc=Sc,
        over_clip=over_clip, B=float(B), G=G, sigma_gram=float(sig_G), n_private=n_private, bounds=bounds,
        unsure=unsure,
    )


def gram_share_for(gram_share: float, gram_full_d: float, d: int) -> float:
    """The Gram's share of rho for a design of ``d`` columns: ``gram_share`` scaled by ``min(1, max(d - 1, 1) / gram_full_d)``.

    Few controls need less of the budget (a public rule on ``d``); ``gram_full_d <= 0`` turns the scaling off.
    A one-column design (a regression through the origin, or a weighted design's ``sqrt(weight)`` column
    alone) still releases its Gram, whose pilot and checks the score stage reads: it gets the share of two.
    """
    return gram_share * min(1.0, max(d - 1, 1) / gram_full_d) if gram_full_d > 0 else gram_share
