"""Helpers shared by the linear-regression algorithms (``linreg_*.py``).

Nothing here is registered; every function states the neighbouring relation
(always *replace one row*, ``n`` public) and the sensitivity it relies on.

Contents
--------
* :class:`Structure`: what the public facts say about the design (intercept,
  one-hot dummy groups, public ranges) and :func:`enforce_structure`, which
  maps every row into the set the facts describe, so that sensitivities hold
  for *any* input.
* Private ranges: :func:`private_center_halfwidth` (median and a quantile of
  absolute deviations by the tie-robust grid exponential mechanism) and
  :func:`private_norm_bound`.
* :class:`Basis` and :func:`private_basis`: a privately standardised basis
  (centre and half-width per column) and the map of coefficients back to the
  raw columns. Because the linear-regression error metric depends only on the
  fitted values ``X beta``, any invertible reparametrisation of the columns is
  free to use: only the noise it leads to changes.
* Sufficient statistics: :func:`gram_pattern` (which entries of ``X'X`` are
  not structurally zero), :func:`ssp_calibration` (the exact joint
  sensitivity of ``(X'X, X'y)`` under replace-one) and :func:`release_ssp`.

Accounting
----------
Every private value is drawn by a charging call of the accountant
(:meth:`~dpstats.privacy.accounting.Accountant.gaussian`,
:meth:`~dpstats.privacy.accounting.Accountant.gaussian_joint`,
:meth:`~dpstats.privacy.accounting.Accountant.exponential`), so the ledger
records exactly the scale or epsilon drawn. The exponential mechanism
``P(i) ~ exp(eps u_i / (2 Delta))`` is ``eps``-DP and moreover
``eps``-bounded-range (Durfee and Rogers 2019), which implies
``eps^2/8``-zCDP (Cesar and Rogers 2021, Lemma 3.2): the grid mechanisms here
are charged with ``bound="bounded_range"``
(:func:`~dpstats.privacy.accounting.em_rho`), and a zCDP share is turned into
their epsilon by :func:`~dpstats.privacy.accounting.em_epsilon`. The tie-robust
grid scores are :func:`~dpstats.privacy.mechanisms.grid_quantile_scores`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import linalg, special

from dpstats.privacy.accounting import Accountant, ZCDPAccountant, em_epsilon
from dpstats.privacy.mechanisms import grid_quantile_scores, log_grid

__all__ = [
    "standardised_problem",
    "BR_NOTE",
    "BASIS_DETAILS",
    "Structure",
    "enforce_structure",
    "POSITIVE_GRID",
    "SIGNED_GRID",
    "private_center_halfwidth",
    "private_nonzero_quantile",
    "private_median_midpoint",
    "private_median_cell",
    "private_norm_bound",
    "scale_quantile",
    "Basis",
    "private_basis",
    "gram_pattern",
    "upper_to_sym",
    "SSPCalibration",
    "ssp_calibration",
    "release_ssp",
    "solve_floor",
    "ols",
    "block_ols",
]

BR_NOTE = "exponential mechanism: eps-bounded-range, so eps^2/8-zCDP (Cesar & Rogers 2021, Lemma 3.2)"

#: public grid of magnitudes for private scales and bounds: 2^-20 (1e-6) to 2^36 (7e10), 4 points per octave
POSITIVE_GRID = log_grid(2.0**-20, 2.0**36, per_octave=4)
#: public signed grid for private centres, 32 points per octave (relative spacing 2.2%)
_FINE = log_grid(2.0**-20, 2.0**36, per_octave=32)
SIGNED_GRID = np.concatenate([-_FINE[::-1], [0.0], _FINE])


def grid_em(
    acc: ZCDPAccountant, mechanism: str, scores: np.ndarray, epsilon: float, rng: np.random.Generator, note: str = ""
) -> int:
    """Run a grid exponential mechanism (score sensitivity 1) through the accountant: draw and charge ``epsilon^2/8``.

    The ledger entry carries ``note`` followed by :data:`BR_NOTE`.
    """
    return acc.exponential(
        mechanism, scores, sensitivity=1.0, epsilon=epsilon, rng=rng, bound="bounded_range",
        note=(note + "; " if note else "") + BR_NOTE,
    )


# --------------------------------------------------------------------------
# Public structure of the design
# --------------------------------------------------------------------------


def _group_key(name: str) -> str:
    """Term of a patsy dummy column: the name without its ``[level]`` parts."""
    return re.sub(r"\[[^\]]*\]", "", name)


@dataclass(frozen=True)
class Structure:
    """What the public facts say about the columns of a regression design.

    Attributes
    ----------
    d : int
    intercept : int or None
        Index of the intercept column (public bound ``[1, 1]``), if any.
    groups : tuple of ndarray
        Dummy columns of categorical terms, grouped by term. By construction of
        the design each row has at most one 1 in a group (treatment coding),
        so a group contributes at most 1 to ``||x||^2``.
    bounded : ndarray
        Other columns with a finite public range ``[lo, hi]``.
    free : ndarray
        Columns without a public range.
    lo, hi : ndarray
        Public ranges (``-inf``/``inf`` where unknown).
    y_bounds : tuple of float or None
        Public range of the outcome.
    """

    d: int
    intercept: int | None
    groups: tuple[np.ndarray, ...]
    bounded: np.ndarray
    free: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    y_bounds: tuple[float, float] | None

    @classmethod
    def from_facts(cls, facts: Any, d: int, use_groups: bool = True) -> "Structure":
        """Read the structure from :class:`~dpstats.data.instance.PublicFacts`.

        Parameters
        ----------
        facts : PublicFacts
        d : int
            Number of columns of the data (checked against ``facts.d``).
        use_groups : bool
            Group the dummy columns of a categorical term (one-hot); when False
            every dummy is an ordinary column with range ``[0, 1]``.
        """
        if getattr(facts, "d", d) != d:
            raise ValueError(f"facts.d = {facts.d} but the data have {d} columns")
        if getattr(facts, "weighted", False):
            # rows are scaled by sqrt(weight): the public ranges describe the unweighted
            # variables, so nothing about the weighted rows is known
            inf = np.full(d, np.inf)
            return cls(d=d, intercept=None, groups=(), bounded=np.zeros(0, dtype=int),
                       free=np.arange(d), lo=-inf, hi=inf, y_bounds=None)
        cols = tuple(getattr(facts, "columns", ()) or tuple(f"x{j}" for j in range(d)))
        bounds = dict(getattr(facts, "bounds", {}) or {})
        lo = np.array([bounds.get(c, (-np.inf, np.inf))[0] for c in cols], dtype=float)
        hi = np.array([bounds.get(c, (-np.inf, np.inf))[1] for c in cols], dtype=float)
        intercept = None
        for j, c in enumerate(cols):
            if c == "Intercept" and lo[j] == 1.0 and hi[j] == 1.0:
                intercept = j
                break
        dummies = set(getattr(facts, "dummies", ()) or ())
        groups: dict[str, list[int]] = {}
        in_group = np.zeros(d, dtype=bool)
        if use_groups:
            for j, c in enumerate(cols):
                if c in dummies and lo[j] == 0.0 and hi[j] == 1.0:
                    groups.setdefault(_group_key(c), []).append(j)
            for idx in groups.values():
                in_group[idx] = True
        other = np.array([j for j in range(d) if j != intercept and not in_group[j]], dtype=int)
        finite = np.isfinite(lo) & np.isfinite(hi)
        bounded = other[finite[other]] if other.size else other
        free = other[~finite[other]] if other.size else other
        yb = None
        outcome = getattr(facts, "outcome", None)
        if outcome is not None and outcome in bounds:
            a, b = bounds[outcome]
            if math.isfinite(a) and math.isfinite(b) and a <= b:
                yb = (float(a), float(b))
        return cls(
            d=d, intercept=intercept, groups=tuple(np.array(v, dtype=int) for v in groups.values()),
            bounded=bounded, free=free, lo=lo, hi=hi, y_bounds=yb,
        )

    @property
    def n_groups(self) -> int:
        return len(self.groups)


def enforce_structure(X: np.ndarray, S: Structure) -> np.ndarray:
    """Map every row into the set the public facts describe (post-processing of one row).

    * the intercept column is set to 1;
    * bounded columns are clipped to their public range;
    * within a dummy group, a row whose entries are not all 0/1 with at most
      one 1 has the group set to 0 (the base level).

    Rows that already satisfy the facts are unchanged. Because the map acts on
    each row separately, sensitivities computed for rows in the described set
    hold for arbitrary input.
    """
    X = np.array(X, dtype=float, copy=True)
    if S.intercept is not None:
        X[:, S.intercept] = 1.0
    if S.bounded.size:
        X[:, S.bounded] = np.clip(X[:, S.bounded], S.lo[S.bounded], S.hi[S.bounded])
    for g in S.groups:
        G = X[:, g]
        ok = np.all((G == 0.0) | (G == 1.0), axis=1) & (G.sum(axis=1) <= 1.0)
        if not ok.all():
            G[~ok] = 0.0
            X[:, g] = G
    return X


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
    ``acc`` as ``mechanism`` (:func:`grid_em`).
    """
    grid = np.asarray(grid, dtype=float)
    j = grid_em(acc, mechanism, grid_quantile_scores(x, grid, q=0.5), epsilon, rng, note)
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
    ``mechanism`` (:func:`grid_em`).
    """
    grid = np.asarray(grid, dtype=float)
    z = np.asarray(v, dtype=float).reshape(-1)
    j = grid_em(acc, mechanism, grid_quantile_scores(z[z > 0], grid, q=q), epsilon, rng, note)
    return float(grid[j])


def private_norm_bound(
    norms: np.ndarray, q: float, acc: ZCDPAccountant, mechanism: str, epsilon: float, rng: np.random.Generator,
    note: str = "",
) -> float:
    """Private ``q``-quantile of non-negative values (row norms, ``|y|``) on :data:`POSITIVE_GRID`.

    ``epsilon``-DP (tie-robust grid exponential mechanism,
    :func:`~dpstats.privacy.mechanisms.grid_quantile_scores`, replace-one
    sensitivity 1), drawn and charged to ``acc`` as ``mechanism`` (:func:`grid_em`).
    """
    scores = grid_quantile_scores(np.asarray(norms, dtype=float), POSITIVE_GRID, q=q)
    return float(POSITIVE_GRID[grid_em(acc, mechanism, scores, epsilon, rng, note)])


# --------------------------------------------------------------------------
# Standardised basis
# --------------------------------------------------------------------------


@dataclass
class Basis:
    """A reparametrisation ``z_j = (x_j - c_j x_int) / h_j`` of the design and ``u = (y - c_y) / h_y``.

    The intercept column is left as is and dummy columns are not centred
    (``c_j = 0``, ``h_j = 1``), so one-hot groups stay one-hot. Without an
    intercept nothing is centred. After :meth:`clip`, every non-group
    coordinate lies in ``[-1, 1]`` and every group has at most one 1.

    Attributes
    ----------
    center, half : ndarray, shape (d,)
    intercept : int or None
    y_center, y_half : float
    details : dict
    """

    center: np.ndarray
    half: np.ndarray
    intercept: int | None
    groups: tuple[np.ndarray, ...]
    y_center: float = 0.0
    y_half: float = 1.0
    details: dict = field(default_factory=dict)

    @property
    def d(self) -> int:
        return int(self.center.size)

    def box_columns(self) -> np.ndarray:
        """Columns clipped to ``[-1, 1]`` (all but the intercept and the dummy groups)."""
        mask = np.ones(self.d, dtype=bool)
        if self.intercept is not None:
            mask[self.intercept] = False
        for g in self.groups:
            mask[g] = False
        return np.flatnonzero(mask)

    def transform(self, X: np.ndarray) -> np.ndarray:
        """``Z`` (not clipped)."""
        Z = np.array(X, dtype=float, copy=True)
        if self.intercept is not None:
            Z -= np.outer(X[:, self.intercept], self.center)
        return Z / self.half

    def transform_y(self, y: np.ndarray) -> np.ndarray:
        return (np.asarray(y, dtype=float) - self.y_center) / self.y_half

    def clip(self, Z: np.ndarray) -> np.ndarray:
        """Clip the box columns to ``[-1, 1]`` (groups and intercept are left to :func:`enforce_structure`)."""
        Z = np.array(Z, copy=True)
        b = self.box_columns()
        Z[:, b] = np.clip(Z[:, b], -1.0, 1.0)
        return Z

    def norm2_bound(self) -> float:
        """``sup ||z||^2`` over clipped rows: 1 per box column, 1 per group, 1 for the intercept."""
        return float(self.box_columns().size + len(self.groups) + (1 if self.intercept is not None else 0))

    def coef_to_raw(self, theta: np.ndarray) -> np.ndarray:
        """Coefficients of the raw columns from coefficients ``theta`` of ``u`` on ``z``."""
        theta = np.asarray(theta, dtype=float)
        beta = self.y_half * theta / self.half
        if self.intercept is not None:
            j = self.intercept
            others = np.arange(self.d) != j
            beta[j] = self.y_half * theta[j] + self.y_center - float(np.sum(self.center[others] * beta[others]))
        return beta

    def raw_to_coef(self, beta: np.ndarray) -> np.ndarray:
        """Inverse of :meth:`coef_to_raw`."""
        beta = np.asarray(beta, dtype=float)
        theta = beta * self.half / self.y_half
        if self.intercept is not None:
            j = self.intercept
            others = np.arange(self.d) != j
            theta[j] = (beta[j] - self.y_center + float(np.sum(self.center[others] * beta[others]))) / self.y_half
        return theta


#: the keys of a :class:`Basis`'s details (from :func:`private_basis`) and why each is public
BASIS_DETAILS = {
    "private_columns": "public fact: the columns (and y) without public bounds, whose ranges cost budget",
    "scale_q": "public fact: quantile level of the private scales, a function of n and the budget",
    "range_epsilon": "public fact: epsilons of the range mechanisms, from the budget and the number of private columns",
}


def private_basis(
    X: np.ndarray,
    y: np.ndarray | None,
    S: Structure,
    acc: ZCDPAccountant | None,
    rho: float,
    rng: np.random.Generator,
    k_sd: float = 3.0,
    data_bounds: bool = False,
) -> Basis:
    """Standardise the columns: public ranges where the facts give them, private ones otherwise.

    Parameters
    ----------
    X : ndarray
        Design after :func:`enforce_structure`.
    y : ndarray or None
        Outcome (standardised as well when given).
    S : Structure
    acc : ZCDPAccountant or None
        Charged ``rho`` in total: two exponential mechanisms per column
        without a public range (and for ``y`` without one); each column gets
        an equal share, split 1:4 between its median and its scale.
        ``None`` only with ``data_bounds=True``.
    rho : float
        zCDP budget for the ranges (unused when nothing needs a private range,
        in which case nothing is charged).
    rng : Generator
    k_sd : float
        Half-widths are about ``k_sd`` normal standard deviations.
    data_bounds : bool
        Read centre (median) and half-width from the data without privacy
        (for the ``data-bounds`` comparison entries; not DP).

    Returns
    -------
    Basis
        ``details["private_columns"]`` lists the columns whose range cost
        budget and ``details["scale_q"]`` the quantile level used.

    Notes
    -----
    Centres are only used when the design has an intercept (otherwise
    centring would change the model). Bounded columns use the midpoint and
    half of their public range; dummy groups and the intercept are unchanged.
    """
    n, d = X.shape
    center = np.zeros(d)
    half = np.ones(d)
    if S.bounded.size:
        lo, hi = S.lo[S.bounded], S.hi[S.bounded]
        if S.intercept is not None:
            w = (hi - lo) / 2.0
            center[S.bounded] = (hi + lo) / 2.0
            half[S.bounded] = np.where(w > 0, w, np.maximum(np.abs(hi), 1.0))
        else:
            half[S.bounded] = np.maximum(np.maximum(np.abs(lo), np.abs(hi)), 1e-300)
    need_y = y is not None and S.y_bounds is None
    n_private = int(S.free.size) + int(need_y)
    details: dict[str, Any] = {"private_columns": [int(j) for j in S.free] + (["y"] if need_y else [])}
    if n_private and not data_bounds:
        if acc is None or rho <= 0:
            raise ValueError("private ranges need an accountant and rho > 0")
        # per column: 1/5 of its share to the median, 4/5 to the scale: the
        # median has n/2 rows of margin on either side, the scale quantile fewer
        eps_c = em_epsilon(rho / n_private / 5.0, bound="bounded_range")
        eps = em_epsilon(rho / n_private * 4.0 / 5.0, bound="bounded_range")
    else:
        eps_c = eps = float("inf")
    q = scale_quantile(n, eps) if math.isfinite(eps) else 0.95
    details["scale_q"] = q
    details["range_epsilon"] = (eps_c, eps)

    def one(v: np.ndarray, label: str) -> tuple[float, float]:
        if data_bounds:
            c = float(np.median(v))
            dev = np.abs(v - c)
            dev = dev[dev > 0]
            s = float(np.quantile(dev, q)) if dev.size else 1.0
            return c, s * _halfwidth_factor(q, k_sd)
        return private_center_halfwidth(v, acc, label, eps_c, eps, rng, q, k_sd)  # type: ignore[arg-type]

    for j in S.free:
        c, h = one(X[:, j], f"column {j}")
        if S.intercept is None:
            # no centring without an intercept: half-width covers |x| up to |c| + h
            center[j], half[j] = 0.0, abs(c) + h
        else:
            center[j], half[j] = c, h
    yc, yh = 0.0, 1.0
    if y is not None:
        if S.y_bounds is not None:
            a, b = S.y_bounds
            if S.intercept is not None and b > a:
                yc, yh = (a + b) / 2.0, (b - a) / 2.0
            else:
                yc, yh = 0.0, max(abs(a), abs(b), 1e-300)
        else:
            c, h = one(np.asarray(y, dtype=float), "y")
            yc, yh = (c, h) if S.intercept is not None else (0.0, abs(c) + h)
    half = np.where(half > 0, half, 1.0)
    return Basis(center=center, half=half, intercept=S.intercept, groups=S.groups, y_center=float(yc),
                 y_half=float(yh if yh > 0 else 1.0), details=details)


# --------------------------------------------------------------------------
# Sufficient statistics
# --------------------------------------------------------------------------


def gram_pattern(d: int, groups: tuple[np.ndarray, ...] = ()) -> np.ndarray:
    """Boolean ``(d, d)`` mask of the upper-triangle entries of ``X'X`` that are released.

    Off-diagonal entries inside a one-hot group are structurally zero (a row
    has at most one 1 in a group) and are not released.
    """
    mask = np.triu(np.ones((d, d), dtype=bool))
    for g in groups:
        sub = np.zeros((d, d), dtype=bool)
        sub[np.ix_(g, g)] = True
        mask &= ~sub | np.eye(d, dtype=bool)
    return mask


def upper_to_sym(values: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Symmetric matrix with the released upper-triangle ``values`` at ``mask`` (zeros elsewhere)."""
    d = mask.shape[0]
    M = np.zeros((d, d))
    M[mask] = values
    return M + np.triu(M, 1).T


@dataclass(frozen=True)
class SSPCalibration:
    """Noise scales of a joint release of ``X'X`` (upper triangle) and ``X'y``.

    Attributes
    ----------
    sigma_xx, sigma_xy : float
        Gaussian noise scales.
    sens2 : float
        ``sup ||(Delta_XX / sigma_xx, Delta_Xy / sigma_xy)||^2`` over
        replace-one neighbours: the release is ``sqrt(sens2)``-GDP and
        ``sens2/2``-zCDP.
    """

    sigma_xx: float
    sigma_xy: float
    sens2: float


def ssp_joint_sens2(B2: float, q4: float, By: float, sigma_xx: float, sigma_xy: float | None) -> float:
    """``sup ||Delta_XX||^2/sigma_xx^2 + ||Delta_Xy||^2/sigma_xy^2`` under replace-one.

    Rows satisfy ``||x||^2 <= B2``, ``sum_j x_j^4 <= q4`` and ``|y| <= By``.
    For the upper triangle ``U`` (diagonal included) of ``x x'``,
    ``||U(xx')||^2 = (||x||^4 + sum x_j^4)/2`` and
    ``<U(xx'), U(x'x'')> = ((x'x'')^2 + sum x_j^2 x''_j^2)/2 >= (x'x'')^2/2``,
    so with ``p = x'x''``::

        ||Delta_XX||^2 <= (B2^2 + q4) - p^2
        ||Delta_Xy||^2 <= By^2 (2 B2 + 2 |p|)

    and the supremum over ``|p| <= B2`` of the weighted sum is attained at
    ``|p| = min(K, B2)`` with ``K = By^2 sigma_xx^2 / sigma_xy^2``. Entries
    that are structurally zero for every admissible row (inside one-hot
    groups) may be left out without changing these bounds. With
    ``sigma_xy=None`` only ``X'X`` is released.
    """
    if sigma_xy is None:
        # release of X'X alone: p^2 >= 0 dropped
        return (B2**2 + q4) / sigma_xx**2
    K = By**2 * sigma_xx**2 / sigma_xy**2
    p = min(K, B2)
    return (B2**2 + q4 - p**2) / sigma_xx**2 + By**2 * (2.0 * B2 + 2.0 * p) / sigma_xy**2


def ssp_calibration(B2: float, q4: float, By: float, ratio: float | None, rho: float) -> SSPCalibration:
    """Noise scales for a joint ``(X'X, X'y)`` release that costs exactly ``rho`` zCDP.

    Parameters
    ----------
    B2, q4, By : float
        Row bounds as in :func:`ssp_joint_sens2`.
    ratio : float or None
        ``sigma_xy / sigma_xx``; ``None`` releases ``X'X`` only.
    rho : float
        zCDP cost of the release (``sens2 / 2``); a GDP budget ``mu`` is
        ``rho = mu^2 / 2``.
    """
    if rho <= 0:
        raise ValueError("rho must be > 0")
    # sens2 scales as 1/sigma_xx^2 for a fixed ratio
    g = ssp_joint_sens2(B2, q4, By, 1.0, None if ratio is None else ratio)
    sigma_xx = math.sqrt(g / (2.0 * rho))
    sigma_xy = float("nan") if ratio is None else ratio * sigma_xx
    return SSPCalibration(sigma_xx, sigma_xy, 2.0 * rho)


def release_ssp(
    Z: np.ndarray, u: np.ndarray | None, mask: np.ndarray, cal: SSPCalibration, acc: Accountant, mechanism: str,
    rng: np.random.Generator, note: str = "replace-one joint sensitivity, ssp_joint_sens2",
) -> tuple[np.ndarray, np.ndarray | None]:
    """Noisy ``Z'Z`` (symmetric, released entries at ``mask``) and ``Z'u``: one joint Gaussian mechanism.

    Drawn and charged in one call
    (:meth:`~dpstats.privacy.accounting.Accountant.gaussian_joint`): scales
    ``cal.sigma_xx`` and ``cal.sigma_xy``, cost from the joint ``cal.sens2``
    (``sens2/2`` in zCDP). The caller must have clipped the rows to the bounds
    ``cal`` was computed for.
    """
    G = Z.T @ Z
    if u is None:
        (vals,) = acc.gaussian_joint(mechanism, [G[mask]], sigmas=[cal.sigma_xx], sens2=cal.sens2, rng=rng, note=note)
        return upper_to_sym(vals, mask), None
    vals, b = acc.gaussian_joint(mechanism, [G[mask], Z.T @ u], sigmas=[cal.sigma_xx, cal.sigma_xy], sens2=cal.sens2,
                                 rng=rng, note=note)
    return upper_to_sym(vals, mask), b


def solve_floor(H: np.ndarray, b: np.ndarray, floor: float) -> np.ndarray:
    """Solve ``H beta = b`` after raising the eigenvalues of symmetric ``H`` to at least ``floor`` (> 0)."""
    lam, V = linalg.eigh((H + H.T) / 2.0)
    lam = np.maximum(lam, floor)
    return V @ ((V.T @ b) / lam)


def ols(X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Least squares (minimum-norm when rank deficient)."""
    return np.linalg.lstsq(X, y, rcond=None)[0]


def block_ols(X: np.ndarray, y: np.ndarray, blocks: np.ndarray, rtol: float = 1e-11) -> tuple[np.ndarray, np.ndarray]:
    """Minimum-norm least squares on each block of rows, and which coefficients each block identifies.

    Parameters
    ----------
    X, y : ndarray
    blocks : ndarray of int, shape (m, b)
        Row indices of each block (equal sizes).
    rtol : float
        Eigenvalues of a block's ``X'X`` below ``rtol`` times its largest are
        treated as zero.

    Returns
    -------
    coef : ndarray, shape (m, d)
        Minimum-norm solutions (as ``numpy.linalg.lstsq``).
    unidentified : ndarray of bool, shape (m, d)
        True where the block's null space has a non-negligible entry at the
        coordinate (the coefficient is not identified in that block).

    Notes
    -----
    Computed from each block's Gram matrix with ``eigh`` rather than with a
    per-block ``lstsq``: many small multithreaded LAPACK calls are very slow
    on a loaded machine, one batched product and small symmetric
    eigendecompositions are not.
    """
    Xb = X[blocks]
    G = np.matmul(Xb.transpose(0, 2, 1), Xb)
    r = np.matmul(Xb.transpose(0, 2, 1), y[blocks][:, :, None])[:, :, 0]
    m, d = r.shape
    coef = np.empty((m, d))
    unident = np.zeros((m, d), dtype=bool)
    for i in range(m):
        w, V = linalg.eigh(G[i])
        keep = w > rtol * max(w[-1], 1e-300)
        coef[i] = V[:, keep] @ ((V[:, keep].T @ r[i]) / w[keep])
        if not keep.all():
            unident[i] = np.linalg.norm(V[:, ~keep], axis=1) > 1e-6
    return coef, unident


def standardised_problem(
    X: np.ndarray,
    y: np.ndarray,
    facts: Any,
    acc: ZCDPAccountant,
    rng: np.random.Generator,
    range_fraction: float,
    k_sd: float,
) -> tuple[Structure, Basis, np.ndarray, np.ndarray]:
    """The privately standardised problem shared by ``adassp_std``, ``ssp_std`` and ``dpgd_std``.

    Public structure from the facts, rows forced onto it, a private basis that
    spends ``range_fraction`` of rho when some range is not public (nothing
    otherwise), and the rows and outcome clipped into it.

    Returns
    -------
    S : Structure
    basis : Basis
    Z : ndarray
        The design in the basis, clipped.
    u : ndarray
        The outcome in the basis, clipped to ``[-1, 1]``.
    """
    S = Structure.from_facts(facts, X.shape[1])
    Xe = enforce_structure(X, S)
    need = S.free.size > 0 or S.y_bounds is None
    rho_r = range_fraction * acc.rho if need else 0.0
    basis = private_basis(Xe, y, S, acc, rho_r, rng, k_sd=k_sd)
    Z = basis.clip(basis.transform(Xe))
    u = np.clip(basis.transform_y(y), -1.0, 1.0)
    return S, basis, Z, u
