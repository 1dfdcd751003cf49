"""Sufficient-statistics perturbation for the linear-regression algorithms, and the solves on Gram matrices.

Nothing here is registered; the calibration states the neighbouring relation
(always *replace one row*, ``n`` public) and the sensitivity it relies on.

Contents
--------
* Sufficient statistics: :func:`gram_pattern` (which entries of ``X'X`` are
  not structurally zero), :func:`ssp_calibration` (the exact joint
  sensitivity of ``(X'X, X'y)`` under replace-one, :func:`ssp_joint_sens2`)
  and :func:`release_ssp`, with :func:`upper_to_sym` to rebuild the noisy
  ``X'X``.
* Least squares: :func:`solve_floor` (a solve on a noisy Gram matrix with an
  eigenvalue floor), :func:`ols` and :func:`block_ols` (minimum-norm fits,
  the latter on blocks of rows from their Gram matrices).

Accounting
----------
:func:`release_ssp` draws and charges in one call of the accountant
(:meth:`~dpstats.privacy.accounting.Accountant.gaussian_joint`), so the ledger
records exactly the scales drawn and the joint cost. The solvers are
post-processing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import cast

import numpy as np
from scipy import linalg

from dpstats.privacy.accounting import Accountant

__all__ = [
    "gram_pattern",
    "upper_to_sym",
    "SSPCalibration",
    "ssp_calibration",
    "release_ssp",
    "solve_floor",
    "ols",
    "block_ols",
]


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
    return cast(np.ndarray, V @ ((V.T @ b) / lam))


def ols(X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Least squares (minimum-norm when rank deficient)."""
    return cast(np.ndarray, np.linalg.lstsq(X, y, rcond=None)[0])


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
    Computed from each block's Gram matrix rather than with a per-block
    ``lstsq``: many small multithreaded LAPACK calls are very slow on a
    loaded machine, one batched product and small symmetric factorisations
    are not. A column that is zero in a block (a dummy whose level the block
    lacks) has coefficient 0 in the minimum-norm solution and is not
    identified; the other columns' Gram matrix then decides by its
    eigenvalues: of full rank (every eigenvalue above the tolerance), it is
    solved by a Cholesky factorisation; otherwise the whole block is solved
    by its eigenvectors. Both give the minimum-norm solution; they differ
    only by rounding, amplified at most by the block's condition number.
    """
    Xb = X[blocks]
    G = np.matmul(Xb.transpose(0, 2, 1), Xb)
    r = np.matmul(Xb.transpose(0, 2, 1), y[blocks][:, :, None])[:, :, 0]
    m, d = r.shape
    coef = np.empty((m, d))
    unident = np.zeros((m, d), dtype=bool)
    live = np.einsum("gii->gi", G) > 0  # columns not identically zero in the block
    for i in range(m):
        nz = live[i]
        Gi = G[i] if nz.all() else G[i][np.ix_(nz, nz)]
        if Gi.size:
            w = linalg.eigvalsh(Gi, check_finite=False)
            if w[0] > rtol * max(w[-1], 1e-300):
                coef[i] = 0.0
                coef[i, nz] = linalg.cho_solve(linalg.cho_factor(Gi, check_finite=False), r[i, nz],
                                               check_finite=False)
                unident[i] = ~nz
                continue
        w, V = linalg.eigh(G[i])
        keep = w > rtol * max(w[-1], 1e-300)
        coef[i] = V[:, keep] @ ((V[:, keep].T @ r[i]) / w[keep])
        if not keep.all():
            unident[i] = np.linalg.norm(V[:, ~keep], axis=1) > 1e-6
    return coef, unident
