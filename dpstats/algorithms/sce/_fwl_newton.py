"""A noisy Newton step for fwl_score's nuisance, preconditioned by the released Gram.

The noisy Gram gives the projections ``gamma`` (of ``x``) and ``delta`` (of
``y``) on the controls by sufficient-statistics perturbation: their error is
``H^-1 (e - E gamma)``, where ``E`` is the Gram's noise on the controls' block
and ``e`` on the cross products, whatever the size of the residuals. One
Newton step from there releases the gradients of the two least-squares
problems at ``gamma``, ``delta``,

    g = sum_i z_i clip(x_i - z_i' gamma, C_x),   h = sum_i z_i clip(y_i - z_i' delta, C_y),

with Gaussian noise scaled to the residuals' clips, and moves
``gamma += H^-1 g``, ``delta += H^-1 h`` with the released Gram's block
``H`` (eigenvalues floored as in the nuisance) as the preconditioner only.
The step's error is ``H^-1 E (gamma - gamma*)`` (the Gram's noise acts on the
first step's *error*, not on ``gamma``) plus ``H^-1`` times noise of size
``C_x``, which is small where the controls explain ``x`` well: the case in
which the Gram's nuisance dilutes the partialled regressor. Not the default:
at equal budget the gradients' noise is about ``2 C_x / B`` times the Gram's
on the same entry, and on the public corpus the step freed no interval
(``docs/algorithms/sce/fwl_score.md``, *A noisy Newton step for the nuisance*).

Privacy (replace-one, zCDP): the rows ``z_i = (1, controls)`` enter with the
controls as the Gram saw them (clipped to ``+-col_clip``) and scaled to norm
at most the released row bound ``B``, so ``||z_i||^2 <= 1 + B^2`` (``B^2``
without a constant). The released vector is ``(g / C_x, h / C_y)``, each
row's term of norm at most ``sqrt(2 (1 + B^2))``; replacing a row moves it
by at most twice that, the sensitivity charged. ``C_x`` and ``C_y`` are
post-processing of the released Gram (its partialled variances), ``gamma``
and ``delta`` of the released Gram: the mechanism's only data access is the
clipped sums.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import cast

import numpy as np

from dpstats.privacy.accounting import ZCDPAccountant

__all__ = ["NewtonStep", "newton_sensitivity", "newton_step", "precondition", "residual_clip", "simulate_newton"]


def newton_sensitivity(B: float, const: bool) -> float:
    """L2 sensitivity of ``(g / C_x, h / C_y)`` under replace-one: twice the largest row term's norm."""
    return 2.0 * math.sqrt(2.0 * ((1.0 if const else 0.0) + B * B))


def precondition(H: np.ndarray, floor_ev: float) -> np.ndarray:
    """Inverse of the symmetric part of ``H`` (a stack ``(k, m, m)`` or one ``(m, m)``) with eigenvalues floored."""
    ev, V = np.linalg.eigh(0.5 * (H + np.swapaxes(H, -1, -2)))
    ev = np.maximum(ev, floor_ev)
    return cast(np.ndarray, (V / ev[..., None, :]) @ np.swapaxes(V, -1, -2))


@dataclass(frozen=True)
class NewtonStep:
    """What the step released, for the nuisance simulation (all released or public).

    ``sigma`` is the noise sd of each entry of ``(g / C_x, h / C_y)``; ``C_x``
    and ``C_y`` the residual clips.
    """

    sigma: float
    C_x: float
    C_y: float


def residual_clip(D: float, n: int, floor: float, c: float) -> float:
    """A residual clip ``c`` partialled standard deviations wide, from a partialled sum of squares ``D`` (released)."""
    return c * math.sqrt(max(D, floor) / n)


def newton_step(
    Zs: np.ndarray, rx: np.ndarray, ry: np.ndarray, B: float, const: bool, H_inv: np.ndarray,
    C_x: float, C_y: float, acc: ZCDPAccountant, rho: float, rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray, NewtonStep]:
    """Release the clipped gradients at the current projections and return the steps ``H^-1 g``, ``H^-1 h``.

    ``Zs`` are the nuisance design's rows (a leading constant when ``const``,
    then the controls clipped as the Gram saw them); ``rx``, ``ry`` the
    residuals of ``x`` and ``y`` at the current projections. The controls are
    scaled to norm at most ``B`` for the sensitivity. One Gaussian mechanism
    charged ``rho``.
    """
    Zb = Zs.copy()
    ctl = Zb[:, 1:] if const else Zb
    norms = np.linalg.norm(ctl, axis=1)
    ctl *= np.minimum(1.0, B / np.maximum(norms, 1e-300))[:, None]
    gx = Zb.T @ np.clip(rx, -C_x, C_x) / C_x
    gy = Zb.T @ np.clip(ry, -C_y, C_y) / C_y
    sens = newton_sensitivity(B, const)
    sigma = sens / math.sqrt(2.0 * rho)
    out = acc.gaussian("Gaussian gradients of the nuisance regressions", np.concatenate([gx, gy]),
                       sensitivity=sens, sigma=sigma, rng=rng,
                       note=f"row norm bound {B:.4g}; residual clips {C_x:.4g}, {C_y:.4g}")
    k = Zs.shape[1]
    return H_inv @ (out[:k] * C_x), H_inv @ (out[k:] * C_y), NewtonStep(sigma=float(sigma), C_x=C_x, C_y=C_y)


def simulate_newton(A: np.ndarray, H_inv_s: np.ndarray, start: np.ndarray, truth: np.ndarray,
                    noise: np.ndarray) -> np.ndarray:
    """Simulated Newton estimates of ``x``'s and ``y``'s projections (post-processing; shape ``(r, k, 2)``).

    ``A`` stands for the rows' Gram of the nuisance design (the released
    block), ``H_inv_s`` the simulated preconditioners ``(r, k, k)``, ``start``
    the simulated first-step projections ``(r, k, 2)``, ``truth`` the
    projections of the simulated world ``(k, 2)``, ``noise`` ``(r, k, 2)``
    draws of the gradients' noise at the released scales
    (``NewtonStep.sigma`` times ``C_x`` and ``C_y``).
    """
    grad = np.einsum("ij,rjc->ric", A, truth[None] - start) + noise
    return cast(np.ndarray, start + H_inv_s @ grad)
