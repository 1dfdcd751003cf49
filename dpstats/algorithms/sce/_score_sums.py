"""fwl_score's row-level score sums released as one Gaussian mechanism, and their joint sensitivity.

Stage 2 releases ``S = sum clip(u) clip(v)``, ``T = sum clip(u)^2`` and, with
an interval, ``Q = sum clip(u)^2 clip(v)^2``. Given the released stage 1 a
replaced row moves ``(clip(u_i), clip(v_i))`` anywhere in the box
``[-C_u, C_u] x [-C_v, C_v]``. Released one at a time, the three would be
charged for their separate worst cases (``2 C_u C_v``, ``C_u^2``,
``C_u^2 C_v^2``); but the row that moves ``S`` most (the sign of ``clip(u)
clip(v)`` flipped at the corner) leaves ``T`` and ``Q`` where they were. As one
mechanism (:meth:`~dpstats.privacy.accounting.Accountant.gaussian_joint`) the
three cost the supremum of their changes *together*, in units of their noise
(:func:`score_sums_sens2`), which is that of ``S`` alone while ``T`` and ``Q``
hold less than about a third of the budget. :func:`joint_score_scales` turns
budget shares into the noise scales of that one mechanism. See
``docs/algorithms/sce/fwl_score.md`` (*Privacy argument*).
"""

from __future__ import annotations

import math

__all__ = ["joint_score_scales", "score_sums_sens2"]


def score_sums_sens2(w_S: float, W: float) -> float:
    """Supremum over a replaced row of ``w_S (ab - a'b')^2 + w_T (a^2 - a'^2)^2 + w_Q (a^2 b^2 - a'^2 b'^2)^2``.

    ``a, b`` (``a', b'``) are the row's ``clip(u) / C_u`` and ``clip(v) / C_v``
    before (after) the replacement, all in ``[-1, 1]``; ``w_S = (C_u C_v /
    sigma_S)^2``, ``w_T = (C_u^2 / sigma_T)^2``, ``w_Q = (C_u^2 C_v^2 /
    sigma_Q)^2`` and ``W = w_T + w_Q`` (``w_Q = 0`` without ``Q``). So the value
    is the squared L2 sensitivity of ``(S / sigma_S, T / sigma_T, Q / sigma_Q)``.

    With ``s = |ab|`` and ``t = |a'b'|`` (by symmetry ``s >= t``):
    ``(ab - a'b')^2 <= (s + t)^2``; ``a^2`` lies in ``[s^2, 1]`` and ``a'^2`` in
    ``[t^2, 1]``, so ``(a^2 - a'^2)^2 <= (1 - min(s, t)^2)^2``; and ``(a^2 b^2 -
    a'^2 b'^2)^2 = (s^2 - t^2)^2``. The bound grows with ``s``, so it is at
    most ``h(t) = w_S (1 + t)^2 + W (1 - t^2)^2`` over ``t`` in
    ``[0, 1]``, which the row ``a = b = 1`` replaced by ``a' = -t``, ``b' = 1``
    attains. ``h'(t) = 2 (1 + t) (w_S - 2 W t (1 - t))`` vanishes inside
    ``[0, 1]`` only at ``t = (1 +- sqrt(1 - 2 w_S / W)) / 2`` (when ``2 w_S <=
    W``), so the supremum is the largest of ``h`` at those points and at 0
    and 1.
    """
    if w_S < 0 or W < 0:
        raise ValueError(f"score_sums_sens2: weights must be >= 0, got {w_S!r}, {W!r}")

    def h(t: float) -> float:
        return w_S * (1.0 + t) ** 2 + W * (1.0 - t * t) ** 2

    cands = [0.0, 1.0]
    if W > 0 and 2.0 * w_S <= W:
        r = math.sqrt(1.0 - 2.0 * w_S / W)
        cands += [0.5 * (1.0 - r), 0.5 * (1.0 + r)]
    return max(h(t) for t in cands)


def joint_score_scales(
    C_u: float, C_v: float, rho_S: float, rho_T: float, rho_Q: float = 0.0,
) -> tuple[float, float, float, float]:
    """Noise scales of ``S``, ``T`` (and ``Q``) released as one Gaussian mechanism costing ``rho_S + rho_T + rho_Q``.

    Each scale is first set as if its sum were released alone at its share
    (``2 C_u C_v / sqrt(2 rho_S)``, ``C_u^2 / sqrt(2 rho_T)``, ``C_u^2 C_v^2 /
    sqrt(2 rho_Q)``); the joint mechanism costs ``sens2 / 2`` in zCDP
    (:func:`score_sums_sens2`), at most the sum of the shares, so every scale
    is then multiplied by the same factor ``sqrt((sens2 / 2) / (rho_S + rho_T +
    rho_Q))`` (at most 1), at which the mechanism costs the shares' sum
    exactly. Returns ``(sigma_S, sigma_T, sigma_Q, sens2)`` with ``sens2`` at
    the returned scales (``sigma_Q`` is ``inf`` without ``rho_Q``).
    """
    if not (rho_S > 0 and rho_T > 0 and rho_Q >= 0):
        raise ValueError(f"joint_score_scales: need rho_S, rho_T > 0 and rho_Q >= 0, got {rho_S}, {rho_T}, {rho_Q}")
    # at the separate scales, w_S = rho_S / 2, w_T = 2 rho_T and w_Q = 2 rho_Q whatever the clips
    sens2 = score_sums_sens2(0.5 * rho_S, 2.0 * (rho_T + rho_Q))
    k = math.sqrt(0.5 * sens2 / (rho_S + rho_T + rho_Q))
    sig_S = k * 2.0 * C_u * C_v / math.sqrt(2.0 * rho_S)
    sig_T = k * C_u**2 / math.sqrt(2.0 * rho_T)
    sig_Q = k * (C_u * C_v) ** 2 / math.sqrt(2.0 * rho_Q) if rho_Q > 0 else math.inf
    return sig_S, sig_T, sig_Q, sens2 / (k * k)
