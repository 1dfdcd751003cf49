"""Stage 1 of the private Frisch-Waugh score: private standardisation and the noisy nuisance.

Our design (see ``docs/algorithms/sce/fwl_score.md``). Stage 2, the score,
is :mod:`dpstats.algorithms.sce.fwl_score`;
:mod:`dpstats.algorithms.sce.fwl_preprocessed` runs simple-regression
algorithms on this stage's residuals.

Stage 1 (nuisance, :func:`partial_out`). Columns are put on a common footing
by a private standardisation (0/1 columns as they are, a private median and a
private scale for the others), rows are clipped to a private norm bound, and a
noisy Gram matrix of ``(1, controls, x, y)`` is released (sufficient
statistics perturbation). From it: the projection coefficients ``gamma`` of
``x`` and ``delta`` of ``y`` on the controls and a pilot ``theta0``.

Fixed effects (``absorb``). The largest treatment-coded categorical term
with at least ``absorb`` levels (``absorb_sole`` when it is the design's only
such term) is absorbed (:func:`absorbed_block`): its dummies and the
intercept leave the design and stage 1 works on within-level pair
differences (:mod:`dpstats.algorithms.sce._within`): a noisy pair scatter in
place of the Gram (:func:`_partial_out_within`).

The nuisance's error in the score (:func:`nuisance_spread`,
:func:`_floor_sensitivity`) is post-processing of the released Gram, for
stage 2's interval.

Accounting is zCDP on replace-one neighbours: ``eps^2/8`` per exponential
mechanism, ``Delta^2/(2 sigma^2)`` for the Gaussian Gram or pair scatter.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dpstats.algorithms.sce._fwl_newton import NewtonStep, newton_step, precondition, residual_clip, simulate_newton
from dpstats.algorithms.sce._fwl_standardise import Standardised, finite_bounds, standardise
from dpstats.algorithms.sce._utils import (
    EM_BOUND,
    adaptive_quantile,
    is_binary_public,
    noisy_symmetric,
    positive_grid,
)
from dpstats.algorithms.sce._within import (
    PAIR_QUANTILE_SENSITIVITY,
    AbsDiff,
    ClippedDiffNorm,
    WithinCells,
    group_ids,
    pair_scatter_sensitivity,
    private_pair_quantile,
    within_cells,
)
from dpstats.privacy.accounting import ZCDPAccountant, em_epsilon

__all__ = ["Partialled", "STAGE1_DETAILS", "absorbed_block", "intercept_column", "nuisance_spread", "partial_out"]


def _design_columns(facts: Any, d: int) -> tuple[list[int], int | None]:
    """Control columns (excluding an intercept) and the intercept's index.

    For weighted instances the "intercept" column holds ``sqrt(weight)`` and is
    an ordinary control; there is then no constant column (``None``).
    """
    j = facts.coef_index
    icpt = intercept_column(facts)
    controls = [c for c in range(d) if c != j and c != icpt]
    return controls, icpt


def intercept_column(facts: Any) -> int | None:
    """The design's constant column (named ``Intercept`` or publicly bounded to ``[1, 1]``); ``None`` without one.

    Weighted instances have none: their "intercept" column holds ``sqrt(weight)`` and is an ordinary control.
    """
    if getattr(facts, "weighted", False):
        return None
    for c, name in enumerate(facts.columns):
        b = facts.bounds.get(name)
        if name == "Intercept" or (b is not None and float(b[0]) == 1.0 and float(b[1]) == 1.0):
            return c
    return None


def absorbed_block(facts: Any, controls: list[int], min_levels: int, sole_levels: int = 0) -> list[int]:
    """Columns of the categorical term to absorb by within-group demeaning (``[]``: none). Public: names only.

    The candidates are treatment-coded main effects of one categorical
    variable (columns ``<term>[T.<level>]`` that the design marks as dummies,
    no interaction) in a design with an intercept: the intercept and such a
    block span the indicators of the term's levels, so partialling them out is
    demeaning within those levels (Frisch-Waugh-Lovell) and the coefficient
    of interest is unchanged. A level whose column the design dropped as
    collinear merges with the reference level, which is again exactly the
    span of the columns kept. The term with the most columns is taken when it
    has at least ``min_levels - 1`` columns (``min_levels`` levels), or at
    least ``sole_levels`` levels when it is the design's only such term; weighted
    designs are left alone (their within transformation needs weighted means).

    The lower bar for a sole term is there because a few levels with many rows
    each are exactly what the noisy Gram cannot partial out: each dummy's
    eigenvalue is a share of ``n`` that the noise floor rivals, the floor
    shrinks those directions' projections, and the between-level variation of
    ``x`` and ``y`` stays in the score as a bias no interval term sees (year
    effects in a pooled panel). With a second categorical term the within path
    would meet that term's dummies in its own noisy scatter, where its floor
    check declines, so the bar stays at ``min_levels`` there.
    """
    if min_levels <= 0 or getattr(facts, "weighted", False):
        return []
    dummies = set(getattr(facts, "dummies", ()))
    blocks: dict[str, list[int]] = {}
    for c in controls:
        name = facts.columns[c]
        if name in dummies and ":" not in name and "[T." in name:
            blocks.setdefault(name.split("[T.", 1)[0], []).append(c)
    if not blocks:
        return []
    best = max(blocks.values(), key=len)
    bar = min(min_levels, sole_levels) if len(blocks) == 1 and sole_levels > 0 else min_levels
    return best if len(best) + 1 >= bar else []


def _solve_nuisance(Gs: np.ndarray, ia: list[int], gx: int, gy: int,
                    floor_ev: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Projections of x and y on the columns ``ia`` for a stack of (noisy) Gram matrices ``Gs`` (k, p1, p1).

    The eigenvalues of the controls' block are floored at ``floor_ev``. When
    ``ia`` starts with the constant (index 0), whose diagonal ``n`` is public
    and exact, the constant is partialled out exactly first (Frisch-Waugh):
    the floor then acts on the controls' block centred by the released
    column sums, ``G_zz - G_z0 G_0z / n``, and never on the constant's
    direction. Flooring the constant would shrink the centring of ``u`` and
    ``v`` towards 0 when ``n`` is small against the noise floor (small
    ``epsilon n``), a bias outside the interval.

    Returns ``(sol, floored, min_ev)``: ``sol[r, :, 0]`` and ``sol[r, :, 1]``
    are the projections of x and y (on ``ia``, in its order), ``floored[r]``
    how many eigenvalues the floor raised and ``min_ev[r]`` the smallest
    before the floor (``inf`` without controls besides the constant).
    """
    k = Gs.shape[0]
    const = bool(ia) and ia[0] == 0
    iz = list(ia[1:]) if const else list(ia)
    rhs = Gs[:, iz][:, :, [gx, gy]]
    H = Gs[:, iz][:, :, iz]
    if const:
        n = Gs[:, 0, 0]
        b0 = Gs[:, 0, [gx, gy]]
        c0 = Gs[:, iz, 0]
        H = H - c0[:, :, None] * Gs[:, 0, iz][:, None, :] / n[:, None, None]
        rhs = rhs - c0[:, :, None] * b0[:, None, :] / n[:, None, None]
    if iz:
        ev, V = np.linalg.eigh(0.5 * (H + H.transpose(0, 2, 1)))
        floored = np.sum(ev < floor_ev, axis=1)
        min_ev = ev.min(axis=1)
        ev = np.maximum(ev, floor_ev)
        sz = V @ ((V.transpose(0, 2, 1) @ rhs) / ev[:, :, None])
    else:
        floored, min_ev = np.zeros(k, dtype=int), np.full(k, math.inf)
        sz = np.zeros((k, 0, 2))
    if const:
        s0 = (b0 - np.einsum("ri,rij->rj", Gs[:, 0, iz], sz)) / n[:, None]
        sz = np.concatenate([s0[:, None, :], sz], axis=1)
    return sz, floored, min_ev


def _nuisance(G: np.ndarray, ia: list[int], gx: int, gy: int,
              floor_ev: float) -> tuple[np.ndarray, np.ndarray, int, float]:
    """Projections of x and y on the columns ``ia`` from one released Gram matrix (:func:`_solve_nuisance`).

    Also returns how many eigenvalues the floor raised (see ``Partialled.floored``) and the smallest
    eigenvalue before the floor (``inf`` without controls; see ``Partialled.min_ev``).
    """
    sol, floored, min_ev = _solve_nuisance(G[None], ia, gx, gy, floor_ev)
    return sol[0, :, 0], sol[0, :, 1], int(floored[0]), float(min_ev[0])


def _pilot(G: np.ndarray, ia: list[int], gx: int, gy: int, sig_G: float, p: int,
           ridge: float) -> tuple[float, np.ndarray, np.ndarray, int, float, float, float]:
    """Nuisance projections and the pilot from a released Gram (post-processing).

    Only directions the noise made (nearly) non-positive are repaired: the
    eigenvalues of the noisy control Gram are floored at
    ``ridge * sigma * sqrt(p + 1)``, with no shrinkage of well-determined
    directions. A pilot from a partialled variance that the noise could have
    produced on its own is no pilot (0).

    Returns ``(floor_ev, gamma, delta, floored, Dx_floored, theta0, min_ev)``.
    """
    floor_ev = ridge * sig_G * math.sqrt(p + 1)
    gam, dlt, floored, min_ev = _nuisance(G, ia, gx, gy, floor_ev)
    Dx = G[gx, gx] - gam @ G[ia, gx]
    Nxy = G[gx, gy] - gam @ G[ia, gy]
    Dx_f = max(Dx, sig_G * math.sqrt(p + 1))
    theta0 = Nxy / Dx_f if Dx > 3.0 * sig_G * math.sqrt(p + 1) else 0.0
    return floor_ev, gam, dlt, floored, float(Dx_f), float(theta0), min_ev


@dataclass(frozen=True)
class Partialled:
    """Row-level residuals after the private stage 1 (everything here is private or post-processing).

    Attributes
    ----------
    u, w : ndarray, shape (n,)
        ``x`` and ``y`` (standardised, unclipped) minus their projections on the
        controls (standardised and clipped to ``+-col_clip``, as the Gram saw
        them) with the noisy-Gram coefficients. Each entry depends on its own
        row only, given the released quantities.
    theta0 : float
        Pilot coefficient from the noisy Gram, standardised units (0 when unreliable).
    unit : float
        ``scale_y / scale_x``: multiply a standardised coefficient by it.
    B_u, B_w : float
        Largest possible ``|u|``, ``|w|`` under the public bounds (``inf`` without).
    public_x, public_y : bool
        Whether ``x`` / ``y`` are public 0/1 columns.
    Dx : float
        Partialled variance of ``x`` from the noisy Gram (floored at its noise level).
    row_bound, sigma_gram : float
    p, n_private : int
    """

    u: np.ndarray
    w: np.ndarray
    theta0: float
    unit: float
    B_u: float
    B_w: float
    public_x: bool
    public_y: bool
    Dx: float
    row_bound: float
    sigma_gram: float
    p: int
    n_private: int
    G: np.ndarray | None = None
    ia: tuple[int, ...] = ()
    floor_ev: float = 0.0
    #: eigenvalues of the released controls' Gram below ``floor_ev``. Along such a direction the nuisance
    #: projection is shrunk almost to 0, so ``u`` and ``v`` keep that direction's share of ``x`` and ``y``: the
    #: orthogonal score then carries the floored directions' product term, a bias that :func:`nuisance_spread`
    #: (which re-draws the Gram noise around the floored solution) cannot see. In fixed-effect designs
    #: (dozens to hundreds of dummies, a few rows each) those directions hold the between-group variation
    #: that the fixed effects exist to remove.
    floored: int = 0
    #: smallest eigenvalue of the released controls' block before the floor (``inf`` without controls)
    min_ev: float = math.inf
    #: widest public range of a privately scaled column, in units of its private scale (0: none bounded);
    #: post-processing of the released scales and the public bounds (see :func:`bounded_range_scales`)
    range_scales: float = 0.0
    free: tuple[int, ...] = ()
    #: the cells of the absorbed fixed effect (``None``: none absorbed). Private: used only inside the
    #: pair statistics of :mod:`~dpstats.algorithms.sce._within`, whose sensitivities let a row change its group.
    cells: WithinCells | None = None
    #: number of levels of the absorbed term (public: the design's columns)
    absorbed_levels: int = 0
    #: which rows have a standardised column beyond ``col_clip`` (private: used only inside :func:`tail_count`)
    over_clip: np.ndarray | None = None
    #: the columns' means in the units of the data as the released Gram shows them (post-processing: the
    #: private location plus the private scale times the Gram's column sum over ``n``; biased by the clips),
    #: keyed by design column, ``-1`` for the outcome; empty without a constant column or on the within path
    means: Mapping[int, float] = field(default_factory=dict)
    #: the privately scaled columns whose released count of non-zero pair differences shows a sparse column
    #: whose scale could not be located (``LocationScale.scale_unsure``; empty without the counts): the unit
    #: conversion may be off by orders of magnitude where the Gram cannot show it
    unsure: tuple[str, ...] = ()
    #: the noisy Newton step that refined ``u`` and ``w``'s projections (``None``: the Gram's projections;
    #: see :mod:`~dpstats.algorithms.sce._fwl_newton`)
    newton: NewtonStep | None = None

    def standardisation_visible_failure(self, n: int, lo: float = 0.02, hi: float = 25.0) -> bool:
        """Whether the released Gram shows a failed private scale (post-processing).

        A column standardised with a sensible scale has mean square of order 1
        in the Gram; below ``lo`` (the scale was far too large: the column is
        lost in the noise) or above ``hi`` (far too small: most values hit the
        clip, and projections from the clipped Gram do not apply to the
        unclipped residuals) the score is biased by an unknown amount. The
        thresholds allow three noise standard deviations of the diagonal.
        """
        if self.G is None:
            return False
        for c in self.free:
            m = self.G[c + 1, c + 1] / n
            slack = 3.0 * self.sigma_gram / n
            if m < lo + slack or m > hi - slack:
                return True
        return False

    def scales_plausible(self, C_u: float, lo: float, hi: float, C_v: float = 0.0) -> bool:
        """Whether the standardisation worked: row bound per column and the ``u`` clip of unit order.

        The ``v`` clip is held to the upper bar only (a residual of an outcome the controls nearly
        determine can be small): a clip located ``hi`` outcome scales out makes the noise and the
        estimate arbitrary in size, and an interval around them can still exclude 0 by chance.
        """
        return (lo <= self.row_bound / math.sqrt(self.p) <= hi) and (lo <= C_u <= hi) and C_v <= hi


def partial_out(
    X: np.ndarray,
    y: np.ndarray,
    facts: Any,
    acc: ZCDPAccountant,
    rng: np.random.Generator,
    *,
    scale_share: float,
    gram_share: float,
    scale_factor: float,
    col_clip: float,
    kappa: float,
    q_row_max: float,
    ridge: float,
    use_bounds: bool = False,
    absorb: int = 0,
    m_cell: int = 100,
    absorb_sole: int = 0,
    scale_weight: float = 1.0,
    proj_margin: float = math.inf,
    cluster_groups: tuple[np.ndarray, int] | None = None,
    stage1: Standardised | None = None,
    nonzero_share: float = 0.0,
    newton_share: float = 0.0,
    newton_clip: float = 4.0,
) -> Partialled:
    """Stage 1: private standardisation, noisy Gram, nuisance projections; spends ``scale_share + gram_share`` of rho.

    Privacy: ``2 m + 1`` exponential mechanisms (``m`` columns standardised
    privately: a grid median and a grid median of non-zero pair differences
    each, plus a grid quantile of row norms), each ``e``-DP with sensitivity
    1 and charged ``e^2/8`` in zCDP, then one Gaussian Gram matrix with
    sensitivity :func:`gram_sensitivity` of the private row bound.

    With ``absorb`` (a number of levels, 0 for never; ``absorb_sole`` for the
    design's only categorical term) the categorical term of
    :func:`absorbed_block` is absorbed instead: see :func:`_partial_out_within`.
    ``cluster_groups`` (each row's group of clusters and their number ``J``)
    then splits the within cells by group, so that every pair lies inside
    one group of clusters; the row path ignores it.

    ``nonzero_share``: with it, stage 1 also releases each privately scaled
    column's count of non-zero pair differences (:func:`standardise`; row
    path only), and :attr:`Partialled.unsure` names the sparse columns whose
    scale could not be located.

    ``stage1``: a :class:`Standardised` release of every design column and
    the outcome (:func:`standardise`), made once for several targets; the
    projections for ``facts.coef_index`` are then post-processing of it and
    nothing is spent (row path only: no term is absorbed).

    A public 0/1 ``x`` or ``y`` has its projection clipped to
    ``[-proj_margin, 1 + proj_margin]`` before the residual is taken, so the
    residual's bound is ``1 + proj_margin`` whatever the noisy projection
    coefficients (without it the bound adds ``|coefficient| * col_clip`` for
    every control). A nuisance perturbation on the rows whose projection
    leaves that range: the score stays orthogonal to it.
    """
    n, d = X.shape
    j = facts.coef_index
    controls, icpt = _design_columns(facts, d)
    block = absorbed_block(facts, controls, absorb, absorb_sole) if icpt is not None else []
    if block and stage1 is not None:
        raise ValueError("partial_out: a shared stage 1 has no absorbed term (use absorb=0, absorb_sole=0)")
    if block:
        return _partial_out_within(
            X, y, facts, acc, rng, block, [c for c in controls if c not in set(block)], scale_share=scale_share,
            gram_share=gram_share, scale_factor=scale_factor, col_clip=col_clip, kappa=kappa, q_row_max=q_row_max,
            ridge=ridge, m_cell=m_cell, cluster_groups=cluster_groups,
        )
    if stage1 is None:
        W = np.column_stack([X[:, controls], X[:, j], y])
        S = standardise(W, [facts.columns[c] for c in controls] + [facts.columns[j], facts.outcome],
                        [*controls, j, -1], facts, acc, rng, icpt is not None, scale_share=scale_share,
                        gram_share=gram_share, scale_factor=scale_factor, col_clip=col_clip, kappa=kappa,
                        q_row_max=q_row_max, use_bounds=use_bounds, scale_weight=scale_weight,
                        nonzero_share=nonzero_share)
    else:
        S = stage1.reordered([*controls, j, -1])
    W, names, public, free, loc, scale, Sc = S.W, S.names, S.public, S.free, S.loc, S.scale, S.Sc
    over_clip, B, G, sig_G, n_private, bounds = S.over_clip, S.B, S.G, S.sigma_gram, S.n_private, S.bounds
    p = W.shape[1]
    ix_c, iy_c = p - 2, p - 1  # positions of x and y among the columns of W
    # nuisance by post-processing
    const = icpt is not None
    ia = list(range(0 if const else 1, p - 1))  # (constant,) controls
    gx, gy = p - 1, p  # positions of x and y in the Gram
    floor_ev, gam, dlt, floored, Dx_f, theta0, min_ev = _pilot(G, ia, gx, gy, sig_G, p, ridge)
    S_lin = (W - loc) / scale
    Z_c = Sc[:, :ix_c]
    Zs = np.column_stack([np.ones(n), Z_c]) if const else Z_c
    step = None
    if newton_share > 0 and stage1 is None:
        # the clips: newton_clip partialled standard deviations of x and y, from the released Gram
        unit_ev = sig_G * math.sqrt(p + 1)
        C_x = residual_clip(Dx_f, n, unit_ev, newton_clip)
        C_y = residual_clip(float(G[gy, gy] - dlt @ G[ia, gy]), n, unit_ev, newton_clip)
        dg, dd, step = newton_step(Zs, S_lin[:, ix_c] - Zs @ gam, S_lin[:, iy_c] - Zs @ dlt, B, const,
                                   precondition(G[np.ix_(ia, ia)], floor_ev), C_x, C_y, acc,
                                   newton_share * acc.rho, rng)
        gam, dlt = gam + dg, dlt + dd
    # row-level residuals: x and y enter linearly (standardised, unclipped), so scores built on them
    # target OLS on the real x and y. The controls enter as the Gram saw them, clipped to +-col_clip:
    # the projections apply only where the Gram had information, and a control whose private scale came
    # out far too small (its values beyond the clip on a share of rows) is coarsened rather than
    # extrapolated to residuals hundreds of scales wide, whose clipped products bias the score
    g_c, g_z = (gam[0], gam[1:]) if const else (0.0, gam)
    d_c, d_z = (dlt[0], dlt[1:]) if const else (0.0, dlt)
    proj_x, proj_y = Zs @ gam, Zs @ dlt
    if public[ix_c]:
        proj_x = np.clip(proj_x, -proj_margin, 1.0 + proj_margin)
    if public[iy_c]:
        proj_y = np.clip(proj_y, -proj_margin, 1.0 + proj_margin)
    u = S_lin[:, ix_c] - proj_x
    w = S_lin[:, iy_c] - proj_y
    # largest |standardised value| each column can take under its public bounds (inf without)
    half = np.full(p, np.inf)
    for c in range(p):
        bnd = finite_bounds(bounds, names[c])
        if bnd is not None:
            half[c] = max(abs(bnd[0] - loc[c]), abs(bnd[1] - loc[c])) / scale[c]
    half[:ix_c] = np.minimum(half[:ix_c], col_clip)  # the controls enter clipped
    B_u = float(half[ix_c] + abs(g_c) + np.sum(np.abs(g_z) * half[:ix_c]))
    B_w = float(half[iy_c] + abs(d_c) + np.sum(np.abs(d_z) * half[:ix_c]))
    # a public 0/1 column minus a projection clipped to [-proj_margin, 1 + proj_margin]
    if public[ix_c]:
        B_u = min(B_u, 1.0 + proj_margin)
    if public[iy_c]:
        B_w = min(B_w, 1.0 + proj_margin)
    return Partialled(
        u=u, w=w, theta0=float(theta0), unit=float(scale[iy_c] / scale[ix_c]), B_u=B_u, B_w=B_w,
        public_x=bool(public[ix_c]), public_y=bool(public[iy_c]), Dx=float(Dx_f), row_bound=float(B),
        sigma_gram=float(sig_G), p=p, n_private=n_private, G=G, ia=tuple(ia), floor_ev=float(floor_ev),
        free=tuple(int(c) for c in np.flatnonzero(free)), floored=floored, min_ev=min_ev, over_clip=over_clip,
        range_scales=bounded_range_scales(names, np.flatnonzero(free), scale, bounds),
        means=_gram_means(G, loc, scale, [*controls, j, -1], n) if const else {},
        unsure=() if S.unsure is None else tuple(names[c] for c in np.flatnonzero(S.unsure)), newton=step,
    )


def _gram_means(G: np.ndarray, loc: np.ndarray, scale: np.ndarray, cols: list[int], n: int) -> dict[int, float]:
    """Each column's mean implied by the released Gram's first row (its sum over the constant), in data units."""
    return {int(c): float(loc[k] + scale[k] * G[0, 1 + k] / n) for k, c in enumerate(cols)}


def _partial_out_within(
    X: np.ndarray, y: np.ndarray, facts: Any, acc: ZCDPAccountant, rng: np.random.Generator, block: list[int],
    controls: list[int], *, scale_share: float, gram_share: float, scale_factor: float, col_clip: float,
    kappa: float, q_row_max: float, ridge: float, m_cell: int,
    cluster_groups: tuple[np.ndarray, int] | None = None,
) -> Partialled:
    """Stage 1 with a fixed effect absorbed: everything on within-group pair differences.

    The dummies of ``block`` and the intercept leave the design; the rows fall
    into cells (the absorbed levels, split publicly when large: see
    :func:`~dpstats.algorithms.sce._within.within_cells`). Differences need
    no location, so each privately standardised column costs one exponential
    mechanism: a weighted grid median of its non-zero within-cell pair
    differences (:func:`~dpstats.algorithms.sce._within.private_pair_quantile`).
    A weighted grid quantile of the pair-difference norms sets the clip ``B``
    and the released matrix is the pair scatter of the clipped differences
    (the within-group scatter when nothing is clipped), with Gaussian noise
    at sensitivity :func:`~dpstats.algorithms.sce._within.pair_scatter_sensitivity`.
    ``u`` and ``w`` are row-level (standardised, no location); stage 2 works on
    their pair differences.
    """
    n = X.shape[0]
    rho = acc.rho
    j = facts.coef_index
    levels = len(block) + 1
    g = group_ids(X[:, block])
    if cluster_groups is None:
        cells = within_cells(g, levels, rng, m_cell)
    else:
        # cells inside (level, group of clusters): cell label level * J + group, so that label mod J is the group
        # (WithinCells.by_level_group); a row's cell still depends on its own values only
        lab, J = cluster_groups
        cells = within_cells(g * J + np.asarray(lab, dtype=np.int64), levels * J, rng, m_cell)
    names = [facts.columns[c] for c in controls] + [facts.columns[j], facts.outcome]
    W = np.column_stack([X[:, controls], X[:, j], y])
    p = W.shape[1]
    ix_c, iy_c = p - 2, p - 1
    bounds = dict(facts.bounds)  # absorbed designs are unweighted (absorbed_block)
    public = np.array([is_binary_public(facts, nm) for nm in names])
    scale = np.ones(p)
    free = ~public
    n_private = int(free.sum())
    # ---- stage 1a: a within-cell scale per private column, and a bound on the pair-difference norms
    e_em = em_epsilon(scale_share * rho / (n_private + 1), bound=EM_BOUND)
    c: int | np.integer[Any]  # the column loops run over numpy indices and over range(p)
    for c in np.flatnonzero(free):
        sc = private_pair_quantile(cells, AbsDiff(W[:, c]), 0.5, positive_grid(),
                                   e_em, rng, acc=acc, mechanism=f"grid median of within pair differences ({names[c]})",
                                   bound=EM_BOUND, nonzero=True)
        scale[c] = scale_factor * sc
    Sd = W / scale
    # a quantile level the mechanism can locate, from public counts (the score sensitivity is at most 3)
    q_row = adaptive_quantile(int(cells.public_weight), e_em / PAIR_QUANTILE_SENSITIVITY, kappa, q_max=q_row_max)
    B = private_pair_quantile(
        cells, ClippedDiffNorm(Sd, col_clip), q_row,
        positive_grid(1e-3, 1e4), e_em, rng, acc=acc, mechanism="grid quantile (pair difference norm)",
        bound=EM_BOUND, nonzero=False, note=f"q={q_row:.4g}")
    # ---- stage 1b: noisy pair scatter of (controls, x, y), laid out as the Gram (index 0, the constant, unused)
    Delta_G = pair_scatter_sensitivity(B)
    sig_G = Delta_G / math.sqrt(2.0 * gram_share * rho)
    Mw = noisy_symmetric(cells.scatter(Sd, B, col_clip), sig_G, rng, acc=acc, sensitivity=Delta_G,
                         mechanism="Gaussian within pair scatter of (controls, x, y)",
                         note=f"pair difference norm bound {B:.4g}; {levels} levels absorbed, {cells.K} cells each")
    G = np.zeros((p + 1, p + 1))
    G[0, 0] = n
    G[1:, 1:] = Mw
    ia = list(range(1, p - 1))
    gx, gy = p - 1, p
    floor_ev, gam, dlt, floored, Dx_f, theta0, min_ev = _pilot(G, ia, gx, gy, sig_G, p, ridge)
    Zs = Sd[:, :ix_c]
    u = Sd[:, ix_c] - Zs @ gam
    w = Sd[:, iy_c] - Zs @ dlt
    # largest |pair difference| of each standardised column under its public bounds (inf without)
    full = np.full(p, np.inf)
    for c in range(p):
        bnd = finite_bounds(bounds, names[c])
        if bnd is not None:
            full[c] = (bnd[1] - bnd[0]) / scale[c]
    B_u = float(full[ix_c] + np.sum(np.abs(gam) * full[:ix_c]))
    B_w = float(full[iy_c] + np.sum(np.abs(dlt) * full[:ix_c]))
    return Partialled(
        u=u, w=w, theta0=float(theta0), unit=float(scale[iy_c] / scale[ix_c]), B_u=B_u, B_w=B_w,
        public_x=bool(public[ix_c]), public_y=bool(public[iy_c]), Dx=float(Dx_f), row_bound=float(B),
        sigma_gram=float(sig_G), p=p, n_private=n_private, G=G, ia=tuple(ia), floor_ev=float(floor_ev),
        free=tuple(int(c) for c in np.flatnonzero(free)), floored=floored, min_ev=min_ev, cells=cells,
        range_scales=bounded_range_scales(names, np.flatnonzero(free), scale, bounds),
        absorbed_levels=levels,
    )


def bounded_range_scales(
    names: Sequence[str], free: np.ndarray, scale: np.ndarray, bounds: Mapping[str, tuple[float, float]],
) -> float:
    """Widest public range ``hi - lo`` of a privately scaled column over its private scale (0 when none is bounded).

    Post-processing of the released scales and the public bounds. A private
    scale far below the data's spread (an exponential mechanism that landed
    in the empty cells below a sparse column's non-zero differences) puts the
    column's non-zero values beyond ``col_clip``: the Gram sees them clipped,
    the unclipped residuals do not, and with the row-norm clip the Gram's
    mean square can still look sane.
    """
    out = 0.0
    for c in free:
        b = finite_bounds(bounds, names[c])
        if b is not None and b[1] > b[0]:
            out = max(out, float((b[1] - b[0]) / scale[c]))
    return out


#: details taken from stage 1 (:func:`partial_out`) and why they are public
STAGE1_DETAILS = {
    "row_bound": "paid statistic: `grid quantile (row norm)` (with an absorbed fixed effect the `grid quantile "
                 "(pair difference norm)`)",
    "sigma_gram": "paid statistic: Gaussian noise scale of the Gram, a function of the `grid quantile (row norm)` "
                  "(or `grid quantile (pair difference norm)`) bound and the budget",
}


def _floor_sensitivity(P: Partialled) -> float:
    """How far the pilot moves when the eigenvalue floor drops to one noise unit (post-processing; standardised units).

    ``inf`` when an eigenvalue of the released controls' block lies below one
    noise unit ``sigma_gram sqrt(p + 1)``: that direction cannot be told from
    noise, and neither can its share of ``x`` and ``y``.
    """
    assert P.G is not None
    G, ia = P.G, list(P.ia)
    p1 = G.shape[0]
    gx, gy = p1 - 2, p1 - 1
    unit_ev = P.sigma_gram * math.sqrt(P.p + 1)
    if P.min_ev < unit_ev:
        return math.inf

    def pilot(floor: float) -> float:
        g, _, _, _ = _nuisance(G, ia, gx, gy, floor)
        Dx = G[gx, gx] - g @ G[ia, gx]
        return float((G[gx, gy] - g @ G[ia, gy]) / max(Dx, unit_ev))

    return abs(pilot(P.floor_ev) - pilot(unit_ev))


def nuisance_spread(P: Partialled, theta: float, T: float, rng: np.random.Generator,
                    n_sim: int = 200) -> tuple[float, float]:
    """Root-mean-square error of the score estimate caused by the noisy nuisance (post-processing).

    The Frisch-Waugh score is Neyman-orthogonal, so imperfect projections
    ``gamma``, ``delta`` move the estimate by the *product*
    ``dgamma' Z'Z (ddelta - theta dgamma) / sum u^2``; small when the Gram
    noise is small, but not when it rivals the signal. This term is not in
    the sandwich. It is simulated from the released Gram ``G`` and the public
    noise scale ``sigma_gram``: fresh symmetric noise of the same scale is
    added to ``G``, the projections are recomputed, and the product term is
    evaluated with ``G``'s control block in place of ``Z'Z``. Only released
    values and public facts enter: no budget.

    Returns
    -------
    rms : float
        Root mean square of the product term (standardised units).
    dilution : float
        A high (mean plus two standard deviations) simulated value of
        ``dgamma' Z'Z dgamma``: the part of ``sum u^2`` that is nuisance
        error rather than the partialled ``x`` (regression dilution).
    """
    if P.G is None or not P.ia:
        return 0.0, 0.0
    G, ia, p1 = P.G, list(P.ia), P.G.shape[0]
    gx, gy = p1 - 2, p1 - 1
    g0, d0, _, _ = _nuisance(G, ia, gx, gy, P.floor_ev)
    A = G[np.ix_(ia, ia)]
    iu = np.triu_indices(p1)
    E = np.zeros((n_sim, p1, p1))
    E[:, iu[0], iu[1]] = rng.standard_normal((n_sim, iu[0].size)) * P.sigma_gram
    E = E + np.triu(E, 1).transpose(0, 2, 1)
    E[:, 0, 0] = 0.0
    Gs = G[None] + E
    sol, _, _ = _solve_nuisance(Gs, ia, gx, gy, P.floor_ev)
    if P.newton is not None:
        # the Newton step from each simulated first step, with its own preconditioner and fresh gradient noise
        st = P.newton
        noise = rng.standard_normal(sol.shape) * st.sigma * np.array([st.C_x, st.C_y])
        sol = simulate_newton(A, precondition(Gs[:, ia][:, :, ia], P.floor_ev), sol, np.column_stack([g0, d0]),
                              noise)
    dg, dd = sol[:, :, 0] - g0, sol[:, :, 1] - d0
    Adg = dg @ A.T
    out = np.einsum("ri,ri->r", Adg, dd - theta * dg) / T
    dil = np.einsum("ri,ri->r", Adg, dg)
    return float(np.sqrt(np.mean(out**2))), float(np.mean(dil) + 2.0 * np.std(dil))
