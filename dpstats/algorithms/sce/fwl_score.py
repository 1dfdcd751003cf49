"""Private Frisch-Waugh score: noisy nuisance from a Gram matrix, then a clipped orthogonal score.

Our design (see ``docs/algorithms/sce/fwl_score.md``). This module holds
stage 2, the release of both stages and the algorithm; stage 1 is
:mod:`dpstats.algorithms.sce._fwl_nuisance`.

Stage 1 (nuisance, :func:`~dpstats.algorithms.sce._fwl_nuisance.partial_out`).
A private standardisation and a noisy Gram matrix of ``(1, controls, x, y)``
give the projection coefficients ``gamma`` of ``x`` and ``delta`` of ``y`` on
the controls and a pilot ``theta0``.

Stage 2 (score). With the now public ``gamma``, ``delta``, ``theta0`` each
row gives ``u_i = x_i - z_i' gamma`` and ``v_i = y_i - z_i' delta - theta0 u_i``
(standardised units; ``x`` and ``y`` unclipped, the controls ``z`` clipped as
the Gram saw them). With private clipping scales
``C_u``, ``C_v``, release ``S = sum clip(u_i) clip(v_i)`` and
``T = sum clip(u_i)^2`` with Gaussian noise and output ``theta0 + S / T``
(then shrunk towards 0 by its noise z-score, and 0 when the standardisation
visibly failed). The estimating equation ``sum u_i (w_i - theta u_i) = 0``
is Neyman-orthogonal: the error left by imperfect ``gamma`` and ``delta`` is
their *product*, ``(gamma - gamma*)' Z'Z (delta - delta* - theta (gamma - gamma*))``,
so a rough private nuisance costs little.

Fixed effects (``absorb``, default 10 levels). The largest treatment-coded
categorical term with that many levels is absorbed: its dummies and the
intercept leave the design and both stages work on within-level pair
differences (:mod:`dpstats.algorithms.sce._within`): a noisy pair scatter in
stage 1, pair U-statistics for ``S`` and ``T`` in stage 2, and a classical
within interval.

Accounting is zCDP (exponential mechanisms ``eps^2/8``; Gaussian
``Delta^2/(2 sigma^2)``); replace-one neighbours.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, cast

import numpy as np

from dpstats.algorithms.base import Algorithm, Outcome, Param, PublicFacts, TaskData
from dpstats.algorithms.registry import register
from dpstats.algorithms.sce._cluster_groups import cluster_groups as label_groups_of
from dpstats.algorithms.sce._cluster_groups import group_jackknife, groups_for_count, noisy_cluster_count
from dpstats.algorithms.sce._fwl_details import FWL_SCORE_DETAILS
from dpstats.algorithms.sce._fwl_interval import clip_widening, clustered_on, sampling_error, score_std_error, shrunk
from dpstats.algorithms.sce._fwl_nuisance import (
    _design_columns,
    _floor_sensitivity,
    absorbed_block,
    nuisance_spread,
    partial_out,
)
from dpstats.algorithms.sce._fwl_standardise import Standardised, gram_share_for
from dpstats.algorithms.sce._score_sums import joint_score_scales
from dpstats.algorithms.sce._tails import clip_excess, tail_count
from dpstats.algorithms.sce._utils import (
    EM_BOUND,
    adaptive_quantile,
    positive_grid,
)
from dpstats.algorithms.sce._within import (
    PAIR_QUANTILE_SENSITIVITY,
    PAIR_SQUARE_SENSITIVITY,
    PAIR_SUM_SENSITIVITY,
    AbsDiff,
    ClippedDiffProducts,
    private_pair_quantile,
)
from dpstats.privacy.accounting import ZCDPAccountant, em_epsilon, zcdp_epsilon
from dpstats.privacy.quantiles import private_grid_cell

__all__ = ["FWLScore", "fwl_score_release"]


def fwl_score_release(
    X: np.ndarray,
    y: np.ndarray,
    facts: Any,
    acc: ZCDPAccountant,
    rng: np.random.Generator,
    *,
    scale_share: float,
    gram_share: float,
    q_share: float,
    t_share: float,
    scale_factor: float,
    col_clip: float,
    kappa: float,
    q_row_max: float,
    c_u: float,
    c_v: float,
    ridge: float,
    shrink: float,
    use_bounds: bool,
    plaus_lo: float,
    plaus_hi: float,
    gram_full_d: float,
    se_share: float = 0.0,
    tail_share: float = 0.0,
    tail_u: float = 4.0,
    tail_v: float = 2.0,
    tail_frac: float = 0.01,
    min_reliability: float = 0.5,
    floor_bias_rows: bool = False,
    gram_guard: bool = False,
    max_floored: int = 0,
    absorb: int = 0,
    m_cell: int = 100,
    absorb_sole: int = 0,
    clip_free_max: float = math.inf,
    cluster_groups: int = 0,
    u_beyond: float = 0.0,
    scale_weight: float = 1.0,
    proj_margin: float = math.inf,
    plaus_grid: bool = False,
    count_share: float = 0.02,
    clusters_per_group: float = 8.0,
    singleton_rows: float = 1.1,
    nonzero_share: float = 0.0,
    excess_share: float = 0.0,
    u_clip_growth: float = 0.0,
    newton_share: float = 0.0,
    newton_clip: float = 4.0,
    clusters: np.ndarray | None = None,
    partialled: list[Any] | None = None,
    stage1: Standardised | None = None,
    release_rho: float | None = None,
) -> tuple[float, dict[str, Any]]:
    """Run both stages, spending the accountant's whole budget.

    With ``se_share > 0`` that share of the stage-2 budget releases
    ``Q = sum clip(u)^2 clip(v)^2`` (Gaussian, sensitivity ``C_u^2 C_v^2``)
    for a sandwich standard error (see :func:`score_std_error`), or, with an
    absorbed fixed effect, the pair residual sum of squares ``R`` (sensitivity
    ``1.5 C_v^2``) for the classical within one; with 0 the release is the
    point estimate alone, bit-identical to earlier versions.

    With ``se_share > 0`` and clustered sampling (``facts.cluster``) the
    interval is a delete-a-group jackknife over ``cluster_groups`` groups:
    of the absorbed levels when the clusters are those levels, otherwise of
    the clusters themselves, whose labels (``clusters``, private like the
    rows) are mapped to groups by a public function of each label
    (:func:`~dpstats.algorithms.sce._cluster_groups.cluster_groups`). The
    stage-2 sums are then released per group; with an absorbed fixed effect
    the within cells are formed inside each group of clusters.

    ``partialled``, when given, receives stage 1's ``Partialled`` (for a
    caller's post-processing of its released quantities). ``stage1``, when
    given, is a standardisation and Gram already released for several
    targets (:func:`~dpstats.algorithms.sce._fwl_nuisance.standardise`):
    stage 1 is then post-processing of it, and ``acc`` pays for stage 2 only
    (its shares ``q_share`` etc. are then shares of ``acc``'s budget).
    ``release_rho`` is the zCDP budget of the coefficient's whole release,
    which the growth of the ``|u|`` clip reads (``u_clip_growth``; default
    ``acc.rho``; with ``stage1``, stage 1's cost plus ``acc``'s budget).

    Returns
    -------
    estimate : float
        In the units of the data.
    details : dict
        With ``se_share > 0`` also ``std_error`` and ``bias_bound``.
    """
    n = X.shape[0]
    rho = acc.rho
    controls, icpt = _design_columns(facts, X.shape[1])
    block = absorbed_block(facts, controls, absorb, absorb_sole) if icpt is not None else []
    n_absorbed = len(block)
    d_eff = X.shape[1] - n_absorbed  # public: the design's columns
    # few controls: the nuisance has few parameters and needs less of the budget (public rule on d)
    g_share = gram_share_for(gram_share, gram_full_d, d_eff)
    # clustered sampling whose clusters are not the absorbed levels: groups of the clusters' own labels (which
    # path applies depends on public names and on whether the data hold the labels)
    on_levels = bool(se_share > 0 and block and clustered_on(facts, block))
    groups, J_lab, count, singletons = None, 0, None, False
    if se_share > 0 and not on_levels and getattr(facts, "cluster", None) and clusters is not None:
        # as many groups as a noisy count of the clusters can fill (at least three, or no interval); clusters of
        # about one row each are independent rows, whose row-level interval is already cluster-robust
        count, sig_count = noisy_cluster_count(clusters, acc, count_share * rho, rng)
        singletons = count >= n / singleton_rows
        J_lab = 0 if singletons else groups_for_count(count, sig_count, int(cluster_groups), clusters_per_group)
        if J_lab >= 3:
            groups = label_groups_of(clusters, J_lab)
    P = partial_out(
        X, y, facts, acc, rng, scale_share=scale_share, gram_share=g_share, scale_factor=scale_factor,
        col_clip=col_clip, kappa=kappa, q_row_max=q_row_max, ridge=ridge, use_bounds=use_bounds, absorb=absorb,
        m_cell=m_cell, absorb_sole=absorb_sole, scale_weight=scale_weight, proj_margin=proj_margin,
        cluster_groups=None if groups is None else (groups, J_lab), stage1=stage1, nonzero_share=nonzero_share,
        newton_share=newton_share, newton_clip=newton_clip,
    )
    if partialled is not None:
        partialled.append(P)
    cells = P.cells
    within = cells is not None
    # sensitivities of the stage-2 sums: row-level (2 C_u C_v, C_u^2), or as weighted pair U-statistics within
    # the absorbed cells (3 C_u C_v, 1.5 C_u^2: see dpstats.algorithms.sce._within)
    k_S, k_T = (PAIR_SUM_SENSITIVITY, PAIR_SQUARE_SENSITIVITY) if within else (2.0, 1.0)
    theta0, u = P.theta0, P.u
    v = P.w - theta0 * u
    B_u, B_v = P.B_u, P.B_w + abs(theta0) * P.B_u
    # ---- stage 2. A public 0/1 column whose residual has a public bound of unit order (at most
    # clip_free_max standardised units) is not clipped (its rare values carry the information); otherwise a
    # private high quantile sets the clip, capped by the bound (of |u|, or of the within pair differences
    # |u_i - u_j| when a fixed effect is absorbed). A wide bound, from wide declared ranges of the controls,
    # would make the clip and the noise as wide as the worst case. Which case applies depends on public facts
    # and released values only (the bounds are post-processing of the released scales and nuisance).
    need = [not (P.public_x and np.isfinite(B_u) and B_u <= clip_free_max),
            not (P.public_y and np.isfinite(B_v) and B_v <= clip_free_max)]
    C_u, C_v = B_u, B_v
    # a clip outside [plaus_lo, plaus_hi] fails the standardisation checks (or, for |v| below it, clips
    # nothing that matters), so with plaus_grid the quantiles are located on that public range only
    clip_grid = positive_grid(plaus_lo, plaus_hi) if plaus_grid else positive_grid()
    if any(need):
        e_q = em_epsilon(q_share * rho / sum(need), bound=EM_BOUND)
        if within:
            assert cells is not None
            q_uv = adaptive_quantile(int(cells.public_weight), e_q / PAIR_QUANTILE_SENSITIVITY, kappa)
            for k, (vec, mult, cap, lab) in enumerate([(u, c_u, B_u, "u"), (v, c_v, B_v, "v")]):
                if need[k]:
                    qk = private_pair_quantile(cells, AbsDiff(vec), q_uv, clip_grid, e_q, rng, acc=acc,
                                               mechanism=f"grid quantile |{lab}_i - {lab}_j| within",
                                               bound=EM_BOUND, nonzero=False, note=f"q={q_uv:.4g}")
                    if k == 0:
                        C_u = min(mult * qk, cap)
                    else:
                        C_v = min(mult * qk, cap)
        else:
            q_uv = adaptive_quantile(n, e_q, kappa)
            if need[0]:
                _, qu = private_grid_cell(np.abs(u), clip_grid, e_q, rng, acc=acc, mechanism="grid quantile |u|",
                                          q=q_uv)
                # where the located clip leaves many rows above it and the privacy noise is small against the
                # sampling error (sqrt(rho n) large; both public) the clip reaches further into the tail, since
                # a clipped regressor's estimand is not OLS's when the conditional mean is not linear, and
                # that bias is outside the interval
                widen = clip_widening(q_uv, u_beyond)
                grow = _growth(rho if release_rho is None else release_rho, n, u_clip_growth) if widen > 1.0 else 1.0
                C_u = min(c_u * grow * widen * qu, B_u)
            if need[1]:
                _, qv = private_grid_cell(np.abs(v), clip_grid, e_q, rng, acc=acc, mechanism="grid quantile |v|",
                                          q=q_uv)
                C_v = min(c_v * qv, B_v)
    rho_N = tail_share * acc.remaining if se_share > 0 and not within else 0.0
    # the excess of the u clip: with an interval, on the row path, when u has a private clip (public facts)
    rho_E = excess_share * acc.remaining if se_share > 0 and not within and need[0] else 0.0
    rho_2 = acc.remaining - rho_N - rho_E
    rho_Q = se_share * rho_2
    rho_T = t_share * (rho_2 - rho_Q)
    rho_S = rho_2 - rho_Q - rho_T
    # clustered sampling on the absorbed fixed effect (public: names): the interval is a delete-a-group
    # jackknife over J groups of levels (each non-empty: J <= levels, public), from the stage-2 sums released
    # per group; R is not needed, so its budget goes to S (see group_jackknife)
    J = min(int(cluster_groups), n_absorbed + 1) if (within and on_levels) else 0
    # groups of clusters by label (public: facts.cluster and the labels' presence): J groups, some possibly empty
    J = J_lab if groups is not None else J
    group_kind = "levels" if on_levels else "clusters"
    if J:
        rho_S, rho_Q = rho_S + rho_Q, 0.0
    if J and not within:
        # per-group sums at row level: a replaced row leaves one group and may join another, so the vector of
        # sums of terms in [0, C_u^2] moves by at most sqrt(2) C_u^2 in L2 (the scalar by C_u^2); terms of
        # either sign, in [-C_u C_v, C_u C_v], by at most 2 C_u C_v as before
        k_T = math.sqrt(2.0)
    sig_S = k_S * C_u * C_v / math.sqrt(2.0 * rho_S)
    sig_T = k_T * C_u**2 / math.sqrt(2.0 * rho_T)
    S_k = T_k = None
    if within:
        # the pair terms (clip(du) clip(dv), clip(du)^2, clip(dv)^2) of S, T and R
        _sums = ClippedDiffProducts(u, v, C_u, C_v)

    if within and J:
        assert cells is not None
        # a replacement moves at most two groups' sums (its old and its new cell), by at most 1.5 F each
        # (F the bound on a term) or one group's by 2 F: the vector's L2 change is within the scalar's bound
        parts = np.array([g.weighted_sums(_sums) if g.cells else np.zeros(3) for g in cells.by_level_group(J)])
        rule = f"level mod {J}" if on_levels else f"a public hash of the cluster label mod {J}"
        S_k = acc.gaussian(f"Gaussian sum of clip(u) clip(v), per group of {group_kind}", parts[:, 0],
                           sensitivity=k_S * C_u * C_v, sigma=sig_S, rng=rng,
                           note=f"within pairs, {J} groups of {group_kind} ({rule})")
        T_k = acc.gaussian(f"Gaussian sum of clip(u)^2, per group of {group_kind}", parts[:, 1],
                           sensitivity=k_T * C_u**2, sigma=sig_T, rng=rng,
                           note=f"within pairs, {J} groups of {group_kind} ({rule})")
        S, T_raw = float(np.sum(S_k)), float(np.sum(T_k))
        # the noise of the totals (post-processing: J independent draws)
        sig_S, sig_T = sig_S * math.sqrt(J), sig_T * math.sqrt(J)
    elif J:
        assert groups is not None
        uc = np.clip(u, -C_u, C_u)
        vc = np.clip(v, -C_v, C_v)
        parts = np.array([[float(np.sum(uc[m] * vc[m])), float(np.sum(uc[m] * uc[m]))]
                          for m in (groups == g for g in range(J))])
        rule = f"a public hash of the cluster label mod {J}"
        S_k = acc.gaussian("Gaussian sum of clip(u) clip(v), per group of clusters", parts[:, 0],
                           sensitivity=k_S * C_u * C_v, sigma=sig_S, rng=rng, note=f"{J} groups of clusters ({rule})")
        T_k = acc.gaussian("Gaussian sum of clip(u)^2, per group of clusters", parts[:, 1],
                           sensitivity=k_T * C_u**2, sigma=sig_T, rng=rng,
                           note=f"{J} groups of clusters ({rule}): a row leaves one group and joins another")
        S, T_raw = float(np.sum(S_k)), float(np.sum(T_k))
        sig_S, sig_T = sig_S * math.sqrt(J), sig_T * math.sqrt(J)
    elif within:
        assert cells is not None
        # one pass over the pairs for S, T and the residual sum of squares R (released below, with the interval)
        S_val, T_val, R_val = cells.weighted_sums(_sums)
        S = acc.gaussian("Gaussian sum of clip(u) clip(v)", float(S_val), sensitivity=k_S * C_u * C_v, sigma=sig_S,
                         rng=rng, note="within pairs: sum_cells (1/n_c) sum_{i<j} clip(u_i - u_j) clip(v_i - v_j)")
        T_raw = acc.gaussian("Gaussian sum of clip(u)^2", float(T_val), sensitivity=k_T * C_u**2, sigma=sig_T, rng=rng,
                             note="within pairs: sum_cells (1/n_c) sum_{i<j} clip(u_i - u_j)^2")
    else:
        uc = np.clip(u, -C_u, C_u)
        vc = np.clip(v, -C_v, C_v)
        # S, T and (with an interval) Q as one Gaussian mechanism, charged for their joint worst case
        sig_S, sig_T, sig_Q, sens2 = joint_score_scales(C_u, C_v, rho_S, rho_T, rho_Q)
        joint = "one row moves them together (_score_sums.score_sums_sens2)"
        if rho_Q > 0:
            S_a, T_a, Q_a = acc.gaussian_joint(
                "Gaussian sums of clip(u) clip(v), clip(u)^2, clip(u)^2 clip(v)^2",
                [np.sum(uc * vc), np.sum(uc * uc), np.sum((uc * vc) ** 2)], sigmas=[sig_S, sig_T, sig_Q],
                sens2=sens2, rng=rng, note=joint)
            Q = float(Q_a)
        else:
            S_a, T_a = acc.gaussian_joint("Gaussian sums of clip(u) clip(v), clip(u)^2",
                                          [np.sum(uc * vc), np.sum(uc * uc)], sigmas=[sig_S, sig_T], sens2=sens2,
                                          rng=rng, note=joint)
        S, T_raw = float(S_a), float(T_a)
    T = max(T_raw, 0.25 * P.Dx, sig_T)
    unit = P.unit
    est = (theta0 + S / T) * unit
    # positive-part shrinkage towards 0 by the estimate's own privacy-noise z-score (post-processing):
    # when the noise swamps the signal, 0 is a better guess than a noisy ratio
    noise_sd = math.sqrt(sig_S**2 + (S / T) ** 2 * sig_T**2) / T * abs(unit)
    raw = est
    if shrink > 0 and est != 0:
        est = shrunk(est, noise_sd, shrink)
    # when the private standardisation failed (too little budget for the column scales), the
    # standardised rows or residuals are orders of magnitude off unit size and the unit
    # conversion is meaningless: release 0 rather than a number of arbitrary magnitude
    scales_ok = P.scales_plausible(C_u, plaus_lo, plaus_hi, C_v)
    gram_failed = P.standardisation_visible_failure(n)
    fallback = None
    if not scales_ok or (gram_guard and gram_failed):
        est = 0.0
        fallback = "0 released: the private standardisation failed (" + ("scales" if not scales_ok else "Gram") + ")"
    elif P.unsure:
        # a sparse column (released count of non-zero pair differences) whose scale's median saw too few of
        # them: the unit conversion can be off by orders of magnitude where the Gram cannot show it
        est = 0.0
        fallback = ("0 released: the private standardisation failed (sparse column " + ", ".join(P.unsure)
                    + ": too few non-zero values to locate its scale; declare its bounds)")
    elif raw != 0.0 and est == 0.0:
        fallback = SHRUNK_TO_0
    extra: dict[str, Any] = {}
    if rho_Q > 0 or J:
        Tr = max(T_raw, sig_T)
        interval_df = None
        if J:
            assert S_k is not None and T_k is not None
            V_J = group_jackknife(theta0, S_k, T_k, sig_T / math.sqrt(J))
            interval_df = float(J - 1)
        elif within:
            assert cells is not None
            # the classical within variance needs the residual sum of squares only: R, the pair U-statistic
            # of clip(v_i - v_j)^2 (sensitivity 1.5 C_v^2, as T), and sigma^2 = (R - S^2 / T) / df
            sig_Q = PAIR_SQUARE_SENSITIVITY * C_v**2 / math.sqrt(2.0 * rho_Q)
            R = acc.gaussian("Gaussian sum of clip(v)^2", float(R_val), sensitivity=PAIR_SQUARE_SENSITIVITY * C_v**2,
                             sigma=sig_Q, rng=rng, note="within pairs: sum_cells (1/n_c) sum_{i<j} clip(v_i - v_j)^2")
            df = max(n - P.absorbed_levels * cells.K - (P.p - 1), 1)  # public: cells, controls and x
            resid = max(R + sig_Q - S * S / Tr, sig_Q)  # errs wide by one noise sd
            Q, sig_Q_eff = resid / df * Tr, 0.0
            interval_df = float(df)
        # charged before the nuisance simulation, whose draws are post-processing
        far = tail_count(u, v, C_u, C_v, tail_u, tail_v, P.over_clip, acc, rho_N, rng) if rho_N > 0 else None
        # the one-step estimate overshoots by the share 1 - 1/r of its step when u is clipped (_tails.clip_excess)
        over = clip_excess(u, C_u, tail_u, acc, rho_E, rng).overshoot_share(T_raw, sig_T) if rho_E > 0 else 0.0
        theta_r = theta0 + S / Tr
        nuis, dil = nuisance_spread(P, theta_r, Tr, rng)
        noise_r = math.sqrt(sig_S**2 + (S / Tr) ** 2 * sig_T**2) / Tr * abs(unit)
        if J:
            # the jackknife's spread holds the sampling error between clusters and the privacy noise of
            # the group sums; the nuisance error is common to the groups and is added
            se = math.hypot(math.sqrt(V_J), nuis) * abs(unit)
            sig_Q = 0.0
            check = "ok" if math.isfinite(se) else "denominator is noise"
        else:
            se = score_std_error(Q, sig_Q if not within else sig_Q_eff, T_raw, T_raw, sig_T,
                                 math.hypot(noise_r, nuis * abs(unit)), unit)
            check = "ok" if math.isfinite(se) else "denominator is noise"
        # regression dilution: sum u^2 holds the nuisance error dgamma' Z'Z dgamma besides the partialled
        # x, which attenuates S / T by R = (T - dilution) / T; the interval spans the attenuated and the
        # corrected estimate, and is infinite when R cannot be told from 0
        reliab = (T_raw - dil) / Tr
        if not (reliab >= min_reliability) or T_raw - dil <= 3.0 * sig_T:
            se = math.inf
            reliab = 1.0
            check = "regression dilution" if check == "ok" else check
        se = se / reliab
        raw_lo, raw_hi = theta_r * unit, theta_r * unit / reliab
        floored = P.floored
        if max_floored > 0 and floored >= max_floored:
            se = math.inf
            check = "unresolved controls" if check == "ok" else check
        floor_bias = 0.0
        if (within or floor_bias_rows) and floored > 0:
            # with few controls the floor's shrinkage of a floored direction is a bias the nuisance simulation
            # cannot see (papke05_mathpnl: the year effects within districts, 17-20 at epsilon = 100 for a
            # population 0.31): bound it by the pilot's move under the floor at one noise unit, and give up
            # when a direction lies below even that (post-processing of the released scatter). On the row
            # path with floor_bias_rows: a regressor collinear with floored controls (a squared term beside
            # its linear one) keeps their share of x and y in u and v
            fb = _floor_sensitivity(P)
            if not math.isfinite(fb):
                se = math.inf
                check = "unresolved controls" if check == "ok" else check
            else:
                floor_bias = fb * abs(unit)
        if far is not None and far.count > tail_frac * n + 3.0 * far.sigma:
            se = math.inf
            check = "far beyond the clips" if check == "ok" else check
        if count is not None and groups is None and not singletons:
            # clustered sampling, but the noisy count leaves fewer than three groups of clusters
            se = math.inf
            check = "too few clusters" if check == "ok" else check
        if P.unsure:
            # a sparse column whose scale's median saw too few non-zero differences (its released count)
            se = math.inf
            check = "failed standardisation (sparse column)"
        if P.range_scales > plaus_hi:
            # a bounded column whose public range spans more than plaus_hi private scales: its scale failed
            # (a failed scale or Gram check below overrides the label)
            se = math.inf
            check = "failed standardisation (range)"
        if not scales_ok or gram_failed:
            se = math.inf
            check = "failed standardisation (scales)" if not scales_ok else "failed standardisation (Gram)"
        # the interval also holds the point that far back towards the pilot
        toward_pilot = (theta_r - over * S / Tr) * unit
        extra = {"std_error": se, "bias_bound": max(abs(raw_lo - est), abs(raw_hi - est),
                                                    abs(toward_pilot - est)) + floor_bias,
                 "sigma_Q": sig_Q,
                 "reliability": reliab, "interval_check": check, "floored_directions": floored,
                 "sampling_error": sampling_error(facts, within, J, group_kind, count is not None, singletons)}
        if count is not None:
            extra["cluster_count"] = count
        if interval_df is not None:
            extra["interval_df"] = interval_df
    if fallback is not None:
        extra["fallback"] = fallback
    return float(est), {**extra,
        "theta0": float(theta0 * unit), "unshrunk": float(raw), "scales_ok": bool(scales_ok),
        "noise_sd": float(noise_sd), "row_bound": P.row_bound, "sigma_gram": P.sigma_gram, "C_u": C_u, "C_v": C_v,
        "B_u": B_u, "B_v": B_v, "sigma_S": sig_S, "sigma_T": sig_T, "private_columns": P.n_private,
        "absorbed_levels": P.absorbed_levels,
    }


def _growth(rho: float, n: int, scale: float) -> float:
    """The |u| clip's multiplier ``min(2, max(1, sqrt(rho n) / scale))`` (1 when ``scale`` is 0; public)."""
    return 1.0 if scale <= 0 else min(2.0, max(1.0, math.sqrt(rho * n) / scale))


#: the fallback reason of an estimate that the shrinkage took to 0
SHRUNK_TO_0 = "shrunk to 0: the estimate is within one privacy-noise standard deviation of 0"


def fwl_score_coefficient(
    data: TaskData, facts: Any, acc: ZCDPAccountant, rng: np.random.Generator, params: Mapping[str, Any],
    partialled: list[Any] | None = None, stage1: Standardised | None = None, release_rho: float | None = None,
) -> tuple[float, float | None, float | None, float | None, dict[str, Any]]:
    """``fwl_score``'s release of the coefficient ``facts.coef_index``, spending ``acc``'s whole budget.

    Runs :func:`fwl_score_release` with the algorithm's hyperparameters
    ``params`` and post-processes it as the algorithm does: a lower
    eigenvalue floor when ``acc``'s budget is above epsilon 1
    (``ridge_above_1``; the epsilon of ``acc.rho`` at ``acc.delta``, public)
    and, with
    ``shrink_uninformative``, the shrinkage of an estimate whose interval is
    infinite. ``partialled``, when given, receives stage 1's
    :class:`~dpstats.algorithms.sce._fwl_nuisance.Partialled`; ``stage1`` and
    ``release_rho`` are :func:`fwl_score_release`'s.

    Returns
    -------
    estimate, std_error, bias_bound, df, details
        ``std_error``, ``bias_bound`` and ``df`` are ``None`` for a point
        release (``se_share`` 0).
    """
    p = dict(params)
    # a lower eigenvalue floor above epsilon 1 (public: the budget, read back from rho to rounding): see
    # ridge_above_1
    above = p.pop("ridge_above_1")
    if zcdp_epsilon(acc.rho, acc.delta) > 1.0 + 1e-9 and above > 0.0:
        p["ridge"] = above
    shrink_inf = float(p.pop("shrink_uninformative"))
    est, det = fwl_score_release(data.X, cast(np.ndarray, data.y), facts, acc, rng,
                                 clusters=getattr(data, "clusters", None), partialled=partialled, stage1=stage1,
                                 release_rho=release_rho, **p)
    se, bias = det.pop("std_error", None), det.pop("bias_bound", None)
    if se is not None and not math.isfinite(se) and shrink_inf > 0 and "fallback" not in det and est != 0.0:
        # an infinite interval says "cannot tell"; the estimate shown with it is then shrunk towards 0 as
        # the point release's is (post-processing of the released estimate and its noise sd), since no
        # interval is built around it
        est = shrunk(est, det["noise_sd"], shrink_inf)
        if est == 0.0:
            det["fallback"] = SHRUNK_TO_0
    idf = det.pop("interval_df", None)
    if se is None:
        return est, None, None, None, det
    df = float(max(data.X.shape[0] - data.X.shape[1], 1)) if idf is None else idf
    return est, se, bias, df, det


@register
class FWLScore(Algorithm):
    """Private Frisch-Waugh score with a noisy-Gram nuisance (our design).

    See the module docstring and ``docs/algorithms/sce/fwl_score.md`` for the
    privacy argument (zCDP; exponential mechanisms, a Gaussian Gram matrix
    and a Gaussian release of two clipped sums, all at row level).
    """

    name = "fwl_score"
    task = "sce"
    citation = "dpstats (this package): orthogonal-score refinement after sufficient-statistics perturbation"
    interpretation = "standard"
    summary = "noisy Gram for the nuisance, then noisy clipped Frisch-Waugh score sums at row level"
    defaults = {
        "scale_share": Param(0.25, "share of rho for column locations/scales and the row bound (tuned on the public corpus)"),
        "gram_share": Param(0.4, "share of rho for the noisy Gram matrix (tuned on the public corpus)"),
        "q_share": Param(0.05, "share of rho for the stage-2 clipping medians (our choice)"),
        "t_share": Param(0.15, "share of the remaining rho for the denominator sum (our choice)"),
        "scale_weight": Param(1.0, "ours: a column's scale gets this many times the zCDP budget of its location "
                                   "(its median sees about half as many values; see private_location_scale)"),
        "scale_factor": Param(1.0, "column scale = scale_factor * private median of non-zero pair differences (our choice)"),
        "col_clip": Param(10.0, "standardised columns are clipped to +-col_clip in the Gram (our choice)"),
        "kappa": Param(20.0, "clipping quantiles q = 1 - kappa / (epsilon_em n): about kappa/epsilon_em rows lie above (our choice)"),
        "c_u": Param(1.0, "multiplier of the |u| quantile (our choice)"),
        "c_v": Param(1.0, "multiplier of the |v| quantile (our choice)"),
        "ridge": Param(4.0, "eigenvalue floor of the noisy control Gram in units of sigma sqrt(p+1) (tuned: 0.5-8 tried)"),
        "ridge_above_1": Param(0.0, "ours: the eigenvalue floor at epsilon above 1 (0: ridge). The floor shrinks the "
                                    "projections of floored control directions, a bias outside the interval that "
                                    "grows against the interval's width as epsilon grows; the interval "
                                    "configuration lowers it to 2 there (see the page)"),
        "use_bounds": Param(False, "scale bounded columns by their public range instead of privately (worse on the public corpus)"),
        "plaus_lo": Param(1e-3, "release 0 when the row bound / sqrt(p) or the |u| clip falls below this (failed scales; our choice)"),
        "plaus_hi": Param(1e3, "... or above this (the |v| clip too); also an infinite interval when a bounded column's public range "
                                 "spans more than this many private scales (our choice)"),
        "gram_full_d": Param(4.0, "the Gram share is scaled by min(1, (d - 1) / gram_full_d): small d needs less (tuned)"),
        "shrink": Param(1.0, "positive-part shrinkage of the estimate towards 0 by its noise z-score (our choice)"),
        "shrink_uninformative": Param(0.0, "ours: the same shrinkage applied when the interval is infinite (the "
                                           "interval configuration, which does not shrink an estimate it builds an "
                                           "interval around)"),
        "q_row_max": Param(0.9, "the Gram row bound is at most the 0.9 quantile of row norms (our choice)"),
        "se_share": Param(0.0, "share of the stage-2 budget for the sandwich standard error (0: point release "
                               "only; the API's intervals use interval_params)"),
        "gram_guard": Param(True, "ours: also release 0 when the released Gram shows a failed standardisation "
                                   "(Partialled.standardisation_visible_failure)"),
        "max_floored": Param(20, "ours: an infinite interval when the noisy Gram floors at least this many "
                                 "directions of the controls (fixed-effect designs: the floored directions' "
                                 "between-group bias is not in the interval; public-corpus coverage there was "
                                 "0-40 % with intervals narrower than the non-private ones); 0 turns it off"),
        "m_cell": Param(100, "ours: with absorb, absorbed levels are split into public random cells of about this "
                             "many rows (pairs grow as n m_cell / 2)"),
        "absorb": Param(10, "ours: absorb the largest treatment-coded categorical term with at least this many "
                           "levels by within-group pair differences (fixed effects; exact by Frisch-Waugh-Lovell) "
                           "instead of entering its dummies in the noisy Gram, where clipping at the raw scale "
                           "drowns the within variation of panels whose variance is mostly between groups (see "
                           "the page); 0 never"),
        "absorb_sole": Param(3, "ours: absorb the design's only treatment-coded categorical term from this many "
                                "levels (year effects of a pooled panel: a few large levels whose dummies the "
                                "noisy Gram floors, leaving their between-level variation as a bias outside the "
                                "interval; see the page); 0: the absorb bar alone"),
        "tail_share": Param(0.0, "ours: share of the stage-2 budget for the count of rows far beyond the clips "
                                 "(interval path only; 0: no check, the point release)"),
        "clip_free_max": Param(math.inf, "ours: a public 0/1 regressor or outcome is left unclipped only when its "
                                    "residual's public bound is at most this many standardised units; a wider one "
                                    "(wide declared ranges of the controls) gets a private clip, capped by it"),
        "cluster_groups": Param(8, "ours: with clustered sampling (facts.cluster) the interval is a delete-a-group "
                                   "jackknife over at most this many groups, t(J - 1): of the absorbed levels "
                                   "(level mod J) when the clusters are those levels, otherwise of the clusters "
                                   "(a public hash of the label mod J, when the data hold the labels); interval "
                                   "path only"),
        "count_share": Param(0.02, "ours: share of rho for the noisy count of clusters that sets the number of "
                                   "groups of the cluster-robust jackknife (clustered sampling whose clusters are "
                                   "not the absorbed levels; interval path only)"),
        "clusters_per_group": Param(8.0, "ours: the jackknife takes min(cluster_groups, (noisy count - 3 sd) / "
                                         "clusters_per_group) groups of clusters, so that a group is rarely empty; "
                                         "fewer than three: an infinite interval ('too few clusters')"),
        "excess_share": Param(0.0, "ours: share of the stage-2 budget for the sum of clip(u) (clip(u, tail_u C_u) "
                                   "- clip(u)), whose upper confidence bound bounds the one-step estimate's "
                                   "overshoot from clipping u (interval path, a privately clipped u; 0: none)"),
        "nonzero_share": Param(0.0, "ours: share of rho for each privately scaled column's count of non-zero "
                                    "pair differences (row path; 0: none): a sparse column whose scale's median "
                                    "saw too few of them gives an infinite interval and the estimate 0 "
                                    "('failed standardisation (sparse column)'; LocationScale.scale_unsure)"),
        "singleton_rows": Param(1.1, "ours: clusters of at most this many rows on average (n over the noisy "
                                     "count) are taken as independent rows, and the row-level interval as "
                                     "cluster-robust"),
        "u_beyond": Param(0.0, "ours: the |u| clip is pushed out, assuming Gaussian tails, to leave this share of "
                                "rows above it (clip_widening; 0: the located quantile as it is)"),
        "proj_margin": Param(math.inf, "ours: the projection of a public 0/1 regressor or outcome on the controls is "
                                       "clipped to [-proj_margin, 1 + proj_margin], so its residual is bounded by "
                                       "1 + proj_margin whatever the noisy nuisance (inf: no clip; row path only)"),
        "plaus_grid": Param(False, "ours: locate the |u| and |v| clip quantiles on a grid over [plaus_lo, plaus_hi] "
                                   "instead of [1e-10, 1e10]: a clip outside it fails the plausibility checks "
                                   "anyway, and the cells beyond it take most of the exponential mechanism's "
                                   "mass at small epsilon n"),
        "u_clip_growth": Param(0.0, "ours: where the located |u| clip leaves more than u_beyond of the rows above "
                                    "it (clip_widening > 1), it is also multiplied by min(2, max(1, sqrt(rho n) / "
                                    "u_clip_growth)) (0: by 1): where the privacy noise is small against the "
                                    "sampling error the clip reaches further into the tail, since a clipped "
                                    "regressor's estimand differs from OLS's when the model is not linear, a "
                                    "bias outside the interval (row path)"),
        "newton_share": Param(0.0, "ours: share of rho for one noisy Newton step of the nuisance regressions from "
                                   "the Gram's projections, the Gram as preconditioner only (row path; 0: the "
                                   "Gram's projections; see _fwl_newton)"),
        "newton_clip": Param(4.0, "ours: the Newton step clips the residuals at this many partialled standard "
                                  "deviations (from the released Gram)"),
        "tail_u": Param(4.0, "ours: a row is far beyond the clip of u when |u| > tail_u C_u"),
        "tail_v": Param(2.0, "ours: ... of v when |v| > tail_v C_v"),
        "tail_frac": Param(0.01, "ours: an infinite interval when the noisy count of rows far beyond a clip exceeds "
                                 "tail_frac n plus three noise sd"),
        "floor_bias_rows": Param(False, "ours: also on the row path, bound the bias of the eigenvalue floor's "
                                        "shrinkage of floored control directions by the pilot's move under a floor "
                                        "of one noise unit, and give an infinite interval ('unresolved controls') "
                                        "when a direction lies below that (fwl_each's interval configuration; the "
                                        "within path always does)"),
        "min_reliability": Param(0.5, "ours: an infinite interval when less than half of sum clip(u)^2 is the "
                                      "partialled regressor rather than nuisance noise (see nuisance_spread)"),
    }
    #: the method gives a standard error and an interval with these hyperparameters (the API's default)
    intervals = True
    cluster_intervals = True
    interval_params = {"se_share": 0.1, "shrink": 0.0, "shrink_uninformative": 1.0, "c_v": 2.0, "tail_share": 0.05, "clip_free_max": 2.0,
                       "u_beyond": 0.05, "ridge_above_1": 2.0, "scale_weight": 2.0, "proj_margin": 0.25,
                       "plaus_grid": True, "nonzero_share": 0.01, "excess_share": 0.05, "u_clip_growth": 9.0}
    public_details = {
        **FWL_SCORE_DETAILS,
        "reliability": "paid statistic: from `Gaussian sums of clip(u) clip(v), clip(u)^2` and the `Gaussian Gram of "
                       "(1, controls, x, y)` "
                       "(simulated nuisance error, post-processing)",
        "sigma_Q": "paid statistic: C_u^2 C_v^2 / sqrt(2 rho_Q) times the joint factor (1.5 C_v^2 / sqrt(2 rho_Q) for "
                   "the residual sum "
                   "of squares with an absorbed fixed effect), from `grid quantile |u`, `grid quantile |v` (or the bounds)",
        "floored_directions": "paid statistic: eigenvalues of the controls' block of the `Gaussian Gram of (1, "
                              "controls, x, y)` (or the `Gaussian within pair scatter of (controls, x, y)`) below "
                              "the public floor ridge * sigma_gram * sqrt(p + 1)",
        "sampling_error": "public fact: the kind of sampling error the interval accounts for (HC0, classical "
                          "within the absorbed groups, or cluster-robust by a group jackknife), set by the design's "
                          "column names, facts.cluster and the hyperparameters",
        "fallback": "paid statistic: why the release is 0 rather than an estimate (a failed standardisation, from "
                    "`grid quantile (row norm)`, `grid quantile |u|` and the `Gaussian Gram of (1, controls, x, y)`, "
                    "or a sparse column from its `Gaussian count of non-zero pair differences`; "
                    "or shrinkage of theta0 + S / T from `Gaussian sums of clip(u) clip(v), clip(u)^2` or, within "
                    "pairs, `Gaussian sum of clip(u) clip(v)`, `Gaussian sum of clip(u)^2`)",
        "interval_check": "paid statistic: which check made the interval infinite ('ok' when none did), a "
                          "function of `Gaussian sums of clip(u) clip(v), clip(u)^2` (within pairs `Gaussian sum of "
                          "clip(u)^2`), the `Gaussian Gram of (1, controls, x, y)`, "
                          "`grid quantile (row norm)`, `grid quantile |u|`, the `Gaussian count far beyond the clips` "
                          "and the private scales (`grid median of non-zero pair differences`) against public bounds; "
                          "with `nonzero_share`, the `Gaussian count of non-zero pair differences` of each "
                          "privately scaled column",
    }

    def _run(
        self, data: TaskData, facts: PublicFacts, epsilon: float, delta: float, rng: np.random.Generator,
    ) -> Outcome:
        acc = ZCDPAccountant(epsilon, delta)
        est, se, bias, df, det = fwl_score_coefficient(data, facts, acc, rng, self.params)
        if se is None:
            return self.release(est, acc, **det)
        return self.release(est, acc, std_error=se, df=df, bias_bound=bias, **det)

    # what the interval covers, in the API's words: HC0 by default, the classical within variance with an
    # absorbed fixed effect, the delete-a-group jackknife with cluster=
    interval_covers = ("sampling error of independent rows (heteroskedasticity-robust, HC0 sandwich), the privacy "
                       "noise and the overshoot from clipping the regressor; not clustered sampling error, nor "
                       "other clipping bias")
    interval_covers_within = ("sampling error of independent rows within the absorbed fixed-effect levels "
                              "(classical, homoskedastic within variance) and the privacy noise; not "
                              "heteroskedasticity-robust or clustered sampling error, nor clipping bias")
    interval_covers_cluster = ("cluster-robust sampling error (a delete-a-group jackknife over groups of the "
                               "clusters, t quantile), the privacy noise and the overshoot from clipping the "
                               "regressor; not other clipping bias")
    interval_robust = True
    # judged per instance on the public corpus (docs/benchmark/inference.md, per-instance validity)
    interval_validated = True
