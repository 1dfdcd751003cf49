"""From a table of values to :class:`~dpstats.synth.base.DiscreteData` and back.

Categorical columns are coded by their public levels. Numeric columns are cut
into cells over their public bounds, by

* :class:`EqualWidth` -- ``bins`` equal cells over ``[lo, hi]`` (one cell
  per integer when an integer column has fewer values than ``bins``); uses
  no data, costs nothing;
* :class:`PrivTree` -- the adaptive binary tree of Zhang, Xiao and Xie
  (2016), private, paid with its own share of the budget.

Decoding (:meth:`DiscreteData.decode`) draws uniformly within a cell.
:func:`one_hot` encodes for mechanisms that want numbers.

PrivTree's privacy argument
---------------------------
PrivTree on one numeric column with fan-out ``beta = 2``: a node ``v`` at
depth ``dep(v)`` has count ``c(v)`` and biased count ``b(v) = max(c(v) -
dep(v) delta, theta - delta)``; it is split when ``b(v) + Lap(lambda) >
theta``. With ``lambda = (2 beta - 1) / ((beta - 1) epsilon)`` and ``delta =
lambda ln beta`` the tree is ``epsilon``-DP when one row is *added or
removed* (Zhang, Xiao, Xie 2016, Theorem 3.2), whatever the data. Replacing
a row is a removal then an addition, so the tree run with ``epsilon / 2`` is
``epsilon``-DP under replace-one neighbours (group privacy). The trees of the
``m`` numeric columns compose; each is charged as pure ``epsilon_j``-DP to the
accountant (``epsilon_j^2 / 2``-zCDP under zCDP accounting). Stopping at a
public maximum depth, or not splitting a cell that holds a single integer of
an integer column, prunes the tree deterministically: post-processing. An
integer column's tree covers ``[lo - 1/2, hi + 1/2]`` (public) and splits a
cell at the half-integer nearest its middle (at or below it), so that every
cell holds whole integers and a cell of width one exactly one (a 0/1 column
gets the cells ``{0}`` and ``{1}``; a value held by many rows stays one
value after decoding). The theorem does not need equal halves: it holds for
any decomposition in which a node's children partition it and depend only
on the node's (public) range, never on the data; the split points are such
a rule, so the noise, the threshold and the charge are the same as for
midpoint splits. The depth cap of an integer column is raised to
``ceil(log2(hi - lo + 1))`` when that is deeper, so that every integer can
get a cell of its own (a public cap, hence still post-processing).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from dpstats.privacy.accounting import Accountant, PureAccountant, ZCDPAccountant
from dpstats.synth.base import Coding, DiscreteData, Domain
from dpstats.synth.schema import Column, Schema, SchemaError, level_key, level_keys

__all__ = ["EqualWidth", "PrivTree", "DISCRETIZERS", "encode", "codings_for", "one_hot", "from_one_hot",
           "privtree_edges", "privtree_scale"]


def _equal_width(col: Column, bins: int) -> np.ndarray:
    assert col.bounds is not None
    lo, hi = col.bounds
    if col.integer and math.floor(hi) - math.ceil(lo) + 1 <= bins:
        vals = np.arange(math.ceil(lo), math.floor(hi) + 1, dtype=float)
        return np.concatenate([vals - 0.5, [vals[-1] + 0.5]])
    if hi == lo:
        return np.array([lo, hi])
    return np.linspace(lo, hi, bins + 1)


@dataclass(frozen=True)
class EqualWidth:
    """``bins`` equal-width cells over each numeric column's public bounds (no budget)."""

    bins: int = 20
    name = "equal_width"

    def edges(self, df: pd.DataFrame, schema: Schema, accountant: Accountant | None,
              rng: np.random.Generator) -> dict[str, np.ndarray]:
        return {c.name: _equal_width(c, self.bins) for c in schema if not c.categorical}


def privtree_scale(epsilon: float, beta: int = 2) -> float:
    """Laplace scale of PrivTree's noisy counts for a replace-one ``epsilon``-DP tree.

    ``lambda = (2 beta - 1) / ((beta - 1) eps_ar)`` with the add/remove epsilon
    ``eps_ar = epsilon / 2`` (a replaced row is one removal and one addition;
    Zhang, Xiao and Xie 2016, with fan-out ``beta``).
    """
    eps_ar = epsilon / 2.0
    return (2 * beta - 1) / ((beta - 1) * eps_ar)


def privtree_edges(x: np.ndarray, lo: float, hi: float, epsilon: float, rng: np.random.Generator, *,
                   theta: float = 0.0, max_depth: int = 16, min_width: float = 0.0,
                   integer: bool = False) -> np.ndarray:
    """The leaves of a 1-D PrivTree over ``[lo, hi]``: ``epsilon``-DP under replace-one neighbours.

    Parameters
    ----------
    x : ndarray
        The column's values, all within ``[lo, hi]``.
    epsilon : float
        The tree's budget under replace-one neighbours (the tree is run with
        ``epsilon / 2``, see the module docstring).
    theta : float
        Split threshold (Zhang et al. use 0).
    max_depth : int
        Public depth cap (post-processing); with ``integer`` raised to
        ``ceil(log2(hi - lo))``, the depth at which every cell can hold a
        single integer.
    min_width : float
        Cells narrower than this are not split (post-processing).
    integer : bool
        ``lo`` and ``hi`` are half-integers (an integer column's range
        widened by 1/2): cells are split at half-integers, and a cell holding
        one integer is not split (post-processing), so every cell holds
        whole integers.

    Returns
    -------
    ndarray
        Increasing cell edges from ``lo`` to ``hi``.
    """
    if not (epsilon > 0 and math.isfinite(epsilon)):
        raise ValueError(f"epsilon must be positive, got {epsilon!r}")
    beta = 2
    lam = privtree_scale(epsilon, beta)
    dlt = lam * math.log(beta)
    if integer and not ((float(lo) - 0.5).is_integer() and (float(hi) - 0.5).is_integer()):
        raise ValueError(f"integer PrivTree: lo and hi must be half-integers, got {lo!r}, {hi!r}")
    if integer and hi - lo > 1:
        # a value held by many rows can get a cell of its own however wide the range
        max_depth = max(max_depth, math.ceil(math.log2(hi - lo)))
    x = np.sort(np.asarray(x, dtype=float))
    leaves: list[tuple[float, float]] = []
    stack = [(lo, hi, 0)]
    while stack:
        a, b, depth = stack.pop()
        last = b >= hi
        c = (np.searchsorted(x, b, side="right") if last else np.searchsorted(x, b, side="left")) \
            - np.searchsorted(x, a, side="left")
        biased = max(c - depth * dlt, theta - dlt)
        noisy = biased + rng.laplace(0.0, lam)
        if integer:
            # the half-integer at or below the middle: both children hold whole integers
            mid = a + math.floor((b - a) / 2.0)
            splittable = b - a >= 2.0
        else:
            mid = (a + b) / 2.0
            splittable = (b - a) / 2.0 >= min_width
        if noisy > theta and depth < max_depth and splittable and a < mid < b:
            stack.append((mid, b, depth + 1))
            stack.append((a, mid, depth + 1))
        else:
            leaves.append((a, b))
    leaves.sort()
    return np.array([leaves[0][0]] + [b for _, b in leaves])


@dataclass(frozen=True)
class PrivTree:
    """PrivTree cells for each numeric column, paid with ``share`` of the budget.

    ``share`` is a fraction of the accountant's capacity (rho under zCDP,
    epsilon under pure DP), split equally among the numeric columns.
    """

    share: float = 0.1
    theta: float = 0.0
    max_depth: int = 16
    name = "privtree"

    def column_epsilon(self, accountant: Accountant, m: int) -> float:
        """The pure epsilon of each of the ``m`` trees."""
        if not (0 < self.share < 1):
            raise ValueError(f"PrivTree share must lie in (0, 1), got {self.share!r}")
        if isinstance(accountant, ZCDPAccountant):
            return math.sqrt(2.0 * self.share * accountant.capacity / m)
        if isinstance(accountant, PureAccountant):
            return self.share * accountant.capacity / m
        raise TypeError(f"PrivTree: unsupported accountant {type(accountant).__name__}")

    def edges(self, df: pd.DataFrame, schema: Schema, accountant: Accountant | None,
              rng: np.random.Generator) -> dict[str, np.ndarray]:
        numeric = [c for c in schema if not c.categorical]
        if not numeric:
            return {}
        if accountant is None:
            raise ValueError("PrivTree is private: give the accountant it spends from")
        eps_j = self.column_epsilon(accountant, len(numeric))
        out = {}
        for c in numeric:
            assert c.bounds is not None
            lo, hi = c.bounds
            tree: Callable[[np.random.Generator], np.ndarray]
            if hi == lo:
                def tree(_r: np.random.Generator, lo: float = lo, hi: float = hi) -> np.ndarray:
                    return np.array([lo, hi])  # one cell: nothing to draw (still charged)
            else:
                x = pd.to_numeric(df[c.name]).to_numpy(dtype=float)
                if c.integer:
                    # integer columns: cells over [lo - 1/2, hi + 1/2], cut at half-integers
                    lo, hi = math.ceil(lo) - 0.5, math.floor(hi) + 0.5

                def tree(r: np.random.Generator, x: np.ndarray = x, lo: float = lo, hi: float = hi,
                         integer: bool = c.integer) -> np.ndarray:
                    return privtree_edges(x, lo, hi, eps_j, r, theta=self.theta, max_depth=self.max_depth,
                                          integer=integer)
            # the whole tree is eps_j-DP (Zhang, Xiao, Xie 2016; replace-one: twice the add/remove
            # epsilon used inside privtree_edges); its Laplace draws happen inside this call
            out[c.name] = accountant.measurement(
                f"privtree:{c.name}", tree, epsilon=eps_j, rng=rng, sensitivity=1.0,
                scale=privtree_scale(eps_j), note="PrivTree cells, replace-one",
            )
        return out


DISCRETIZERS = {"equal_width": EqualWidth, "privtree": PrivTree}


def codings_for(schema: Schema, edges: Mapping[str, np.ndarray]) -> tuple[Coding, ...]:
    """One :class:`Coding` per schema column: levels, or the given numeric edges."""
    out = []
    for c in schema:
        if c.categorical:
            out.append(Coding(c.name, levels=tuple(c.levels or ())))
        else:
            out.append(Coding(c.name, edges=tuple(float(e) for e in edges[c.name]), integer=c.integer))
    return tuple(out)


def encode(df: pd.DataFrame, schema: Schema, edges: Mapping[str, np.ndarray] | None = None, *,
           file: str | None = None) -> DiscreteData:
    """Code ``df`` (already checked by :meth:`Schema.validate`) as :class:`DiscreteData`.

    Numeric values go to the cell ``[e_i, e_{i+1})`` that holds them (the last
    cell closed; values outside are put in the nearest cell).
    """
    edges = dict(edges or {})
    codings = codings_for(schema, edges)
    cols = []
    for c, cod in zip(schema, codings, strict=True):
        s = df[c.name]
        if c.categorical:
            lookup = {level_key(v): i for i, v in enumerate(c.levels or ())}
            inverse, keys = level_keys(s)
            codes = np.array([lookup.get(k, -1) for k in keys], dtype=np.int64)[inverse]
            if np.any(codes < 0):
                raise SchemaError("value not among the schema's levels", file=file, column=c.name)
        else:
            e = np.asarray(cod.edges, dtype=float)
            x = pd.to_numeric(s).to_numpy(dtype=float)
            codes = np.clip(np.searchsorted(e, x, side="right") - 1, 0, len(e) - 2)
        cols.append(codes)
    codes_arr = np.column_stack(cols) if cols else np.zeros((len(df), 0), dtype=np.int64)
    return DiscreteData(codes_arr, Domain(schema.names, tuple(cd.size for cd in codings)), codings)


def one_hot(data: DiscreteData) -> np.ndarray:
    """One-hot encode every column (blocks of ``k_j`` columns, in domain order): shape ``(n, sum k_j)``."""
    offsets = np.concatenate([[0], np.cumsum(data.domain.shape)[:-1]]).astype(np.int64)
    out = np.zeros((data.n, int(sum(data.domain.shape))), dtype=np.float64)
    rows = np.arange(data.n)
    for j in range(len(data.domain)):
        out[rows, offsets[j] + data.codes[:, j]] = 1.0
    return out


def from_one_hot(x: np.ndarray, domain: Domain) -> np.ndarray:
    """Codes from (soft) one-hot rows: the arg-max of each block (inverse of :func:`one_hot`)."""
    x = np.asarray(x, dtype=float)
    if x.ndim != 2 or x.shape[1] != sum(domain.shape):
        raise ValueError(f"from_one_hot: expected {sum(domain.shape)} columns, got {x.shape}")
    out = np.empty((x.shape[0], len(domain)), dtype=np.int64)
    start = 0
    for j, k in enumerate(domain.shape):
        out[:, j] = np.argmax(x[:, start:start + k], axis=1)
        start += k
    return out
