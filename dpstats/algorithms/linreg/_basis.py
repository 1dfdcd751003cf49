"""The public structure of a regression design and its privately standardised basis.

Nothing here is registered; every function states the neighbouring relation
(always *replace one row*, ``n`` public) and the sensitivity it relies on.

Contents
--------
* :class:`Structure`: what the public facts say about the design (intercept,
  one-hot dummy groups, public ranges) and :func:`enforce_structure`, which
  maps every row into the set the facts describe, so that sensitivities hold
  for *any* input.
* :class:`Basis` and :func:`private_basis`: a privately standardised basis
  (centre and half-width per column) and the map of coefficients back to the
  raw columns. Because the linear-regression error metric depends only on the
  fitted values ``X beta``, any invertible reparametrisation of the columns is
  free to use: only the noise it leads to changes.
* :func:`standardised_problem`: structure, basis and the clipped rows, as
  shared by ``adassp_std``, ``ssp_std`` and ``dpgd_std``.
* :func:`raw_bounds` and :func:`raw_problem`: the raw columns clipped to
  bounds from the public facts or private norm quantiles, as shared by
  ``adassp``, ``ssp``, ``dpgd`` and ``ssp_bootstrap``.

Accounting
----------
The private centres and half-widths are drawn by
:func:`~dpstats.algorithms.linreg._private_ranges.private_center_halfwidth`,
the private norm bounds of the raw columns by
:func:`~dpstats.algorithms.linreg._private_ranges.private_norm_bound`
(grid exponential mechanisms, charged to the accountant at their
bounded-range cost; see :mod:`dpstats.algorithms.linreg._private_ranges`).
Nothing else here touches the data privately.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np

from dpstats.algorithms.linreg._private_ranges import (
    _halfwidth_factor,
    private_center_halfwidth,
    private_norm_bound,
    scale_quantile,
)
from dpstats.privacy.accounting import ZCDPAccountant, em_epsilon

__all__ = [
    "standardised_problem",
    "raw_problem",
    "raw_bounds",
    "RAW_BOUNDS_DETAILS",
    "BASIS_DETAILS",
    "Structure",
    "enforce_structure",
    "Basis",
    "private_basis",
]


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
    def from_facts(cls, facts: Any, d: int, use_groups: bool = True) -> Structure:
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
    details: dict[str, Any] = field(default_factory=dict)

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
        return cast(np.ndarray, Z / self.half)

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
        beta: np.ndarray = self.y_half * theta / self.half
        if self.intercept is not None:
            j = self.intercept
            others = np.arange(self.d) != j
            beta[j] = self.y_half * theta[j] + self.y_center - float(np.sum(self.center[others] * beta[others]))
        return beta

    def raw_to_coef(self, beta: np.ndarray) -> np.ndarray:
        """Inverse of :meth:`coef_to_raw`."""
        beta = np.asarray(beta, dtype=float)
        theta: np.ndarray = beta * self.half / self.y_half
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

# --------------------------------------------------------------------------
# Raw columns: bounds from the public facts, or private quantiles
# --------------------------------------------------------------------------


#: the keys of :func:`raw_bounds`'s details and why each is public
RAW_BOUNDS_DETAILS = {
    "bound_quantile": "public fact: quantile level of the private bounds (a hyperparameter, or from n and the budget)",
    "B_x": "paid statistic: `bound on ||x_free||` with the public bounds of the other columns (public when every "
           "column is bounded)",
    "B_y": "paid statistic: `bound on |y|` (the public bound of y when the facts give one)",
}


def raw_bounds(
    X: np.ndarray,
    y: np.ndarray,
    S: Structure,
    acc: ZCDPAccountant,
    rho: float,
    q: float | None,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray, float, float, dict[str, Any]]:
    """Clip raw rows to bounds from the public facts, or private quantiles where there are none.

    The public part of the row (intercept, one-hot groups, bounded columns)
    has ``||x_pub||^2 <= 1 + #groups + sum max(lo^2, hi^2)``; the columns
    without a public range are clipped as a block to a private ``q``-quantile
    of their norm; ``y`` to its public range or a private quantile of
    ``|y|``. Each private quantile is one exponential mechanism; together
    they cost ``rho`` (nothing is charged when everything is public).
    ``q=None`` picks the level from ``n`` and the mechanism's epsilon
    (:func:`~dpstats.algorithms.linreg._private_ranges.scale_quantile`, at most 0.95).

    Returns
    -------
    Xc, yc : ndarray
        Clipped design and outcome.
    B2 : float
        ``sup ||x||^2``.
    By : float
    details : dict
    """
    Xc = enforce_structure(X, S)
    pub = 0.0
    if S.intercept is not None:
        pub += 1.0
    pub += float(S.n_groups)
    if S.bounded.size:
        pub += float(np.sum(np.maximum(S.lo[S.bounded] ** 2, S.hi[S.bounded] ** 2)))
    need_y = S.y_bounds is None
    k = int(S.free.size > 0) + int(need_y)
    eps = em_epsilon(rho / k, bound="bounded_range") if k else 0.0
    if q is None:
        q = scale_quantile(X.shape[0], eps, sensitivity=1.0, hi=0.95) if k else 0.95
    details: dict[str, Any] = {"bound_quantile": q}
    Bf = 0.0
    if S.free.size:
        norms = np.linalg.norm(Xc[:, S.free], axis=1)
        Bf = private_norm_bound(norms, q, acc, "bound on ||x_free||", eps, rng)
        f = np.minimum(1.0, Bf / np.maximum(norms, 1e-300))
        Xc[:, S.free] *= f[:, None]
    if need_y:
        By = private_norm_bound(np.abs(y), q, acc, "bound on |y|", eps, rng)
    else:
        a, b = S.y_bounds  # type: ignore[misc]
        By = max(abs(a), abs(b))
    yc = np.clip(y, -By, By) if need_y else np.clip(y, *S.y_bounds)  # type: ignore[misc]
    details["B_x"] = math.sqrt(pub + Bf**2)
    details["B_y"] = By
    return Xc, yc, pub + Bf**2, By, details


def raw_problem(
    X: np.ndarray,
    y: np.ndarray,
    facts: Any,
    acc: ZCDPAccountant,
    rng: np.random.Generator,
    bounds_fraction: float,
    bound_quantile: float | None,
) -> tuple[np.ndarray, np.ndarray, float, float, dict[str, Any], bool]:
    """The raw-column problem shared by ``adassp``, ``ssp``, ``dpgd`` and ``ssp_bootstrap``.

    Public structure from the facts, and the rows clipped by
    :func:`raw_bounds`, which spends ``bounds_fraction`` of rho on private
    bounds when some column has no public range or ``y`` no public bound
    (nothing otherwise).

    Returns
    -------
    Xc, yc, B2, By, details
        As :func:`raw_bounds` (``details`` keyed as :data:`RAW_BOUNDS_DETAILS`).
    private : bool
        Some column or ``y`` lacks a public bound, so :func:`raw_bounds`
        chose one privately (a public fact: which ranges the facts give).
    """
    S = Structure.from_facts(facts, X.shape[1])
    need = S.free.size > 0 or S.y_bounds is None
    rho_b = bounds_fraction * acc.rho if need else 0.0
    Xc, yc, B2, By, details = raw_bounds(X, y, S, acc, rho_b, bound_quantile, rng)
    return Xc, yc, B2, By, details, need
