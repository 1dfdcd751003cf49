"""Noisy clipped full-batch gradient descent (DP-GD) for least squares, accounted in zCDP.

The rows are first put in a bounded geometry, ``||z|| <= 1`` and ``|u| <= 1``:

``dpgd`` (standard)
    raw columns divided by a row-norm bound ``B_x`` and ``y`` by ``B_y``,
    both from the public facts or private quantiles (as in ``adassp``);
``dpgd_std`` (standard)
    the privately standardised basis of ``adassp_std`` (every box column in
    ``[-1, 1]``, one-hot groups, intercept), divided by ``sqrt(D)`` with
    ``D = sup ||z||^2``.

Then, from ``theta_0 = 0``, for ``t = 1 .. T``::

    g_i = z_i (z_i' theta - u_i),   g = sum_i clip_C(g_i) + N(0, sigma^2 I),
    theta <- theta - eta g / n

with ``clip_C(g) = g min(1, C/||g||)`` (per-example clipping, Abadi et al.
2016). Replacing one row changes the clipped sum by at most ``2C`` in L2
(replace-one; ``C`` for add/remove), so each step is a Gaussian mechanism
with zCDP cost ``(2C)^2 / (2 sigma^2)``; the ``T`` steps share the remaining
budget equally. The iterate after ``T`` steps is mapped back to the raw
coefficients.
"""

from __future__ import annotations

import math
from typing import Any, Literal, cast

import numpy as np

from dpstats.algorithms.base import Algorithm, Outcome, Param, PublicFacts, TaskData
from dpstats.algorithms.linreg._basis import BASIS_DETAILS, RAW_BOUNDS_DETAILS, raw_problem, standardised_problem
from dpstats.algorithms.registry import coefficient_of, register
from dpstats.privacy.accounting import ZCDPAccountant

__all__ = ["ClippedGradientSum", "DPGD", "DPGDStd", "noisy_gd", "row_norms"]

_CITATION = (
    "Bassily, R., Smith, A. and Thakurta, A. (2014). Private empirical risk minimization: efficient algorithms "
    "and tight error bounds. FOCS 2014 (noisy gradient descent); Abadi, M. et al. (2016). Deep learning with "
    "differential privacy. CCS 2016 (per-example clipping); Bun, M. and Steinke, T. (2016). Concentrated "
    "differential privacy. TCC 2016 (zCDP accounting)."
)


def noisy_gd(
    Z: np.ndarray, u: np.ndarray, T: int, eta: float, C: float, acc: ZCDPAccountant, rng: np.random.Generator,
    theta0: np.ndarray | None = None,
) -> tuple[np.ndarray, dict[str, Any]]:
    """Full-batch DP-GD on ``(1/2n) ||u - Z theta||^2``; spends the accountant's remaining budget over ``T`` steps.

    Each step releases ``sum_i clip_C(g_i) + N(0, sigma^2 I)`` with replace-one
    sensitivity ``2C`` and ``sigma = 2C / sqrt(2 rho_step)``.

    The clipped sums are :class:`ClippedGradientSum`'s, which never forms
    the ``(n, d)`` per-example gradients: their norms factor by row.
    """
    n, d = Z.shape
    theta = np.zeros(d) if theta0 is None else np.array(theta0, dtype=float)
    rho_step = acc.remaining / T
    sigma = 2.0 * C / math.sqrt(2.0 * rho_step)
    clipped_sum = ClippedGradientSum(Z, C)
    for t in range(T):
        g = clipped_sum(Z @ theta - u)
        if t == T - 1:
            rho_step = acc.remaining  # the last step takes exactly what is left
            sigma = 2.0 * C / math.sqrt(2.0 * rho_step)
        g = acc.gaussian(f"gradient step {t + 1}", g, sensitivity=2.0 * C, sigma=sigma, rng=rng,
                         note="replace-one sensitivity 2C")
        theta = theta - eta * g / n
    return theta, {"sigma": sigma}


class ClippedGradientSum:
    """``sum_i clip_C(z_i r_i)`` for residuals ``r``: the clipped gradient sum of one DP-GD step.

    Parameters
    ----------
    Z : ndarray, shape (n, d)
        The rows ``z_i`` (the same for every call).
    C : float
        The clipping norm.

    Notes
    -----
    The per-example gradient ``z_i r_i`` has the norm ``||z_i|| |r_i|``.
    The row norms ``||z_i||`` are computed once (:func:`row_norms`); a call
    forms ``f = min(1, C / max(||z_i|| |r_i|, 1e-300))`` and returns
    ``Z.T @ (r f)``: one pass over ``Z`` and no ``(n, d)`` array. This is
    the written-out step ``G = Z * r[:, None]``, ``G.T @ min(1, C /
    ||G_i||)`` with the products taken in another order, so it agrees with
    it to rounding (relative differences of order 1e-16 per term), and each
    clipped term still has norm at most ``C`` up to that rounding.
    """

    def __init__(self, Z: np.ndarray, C: float) -> None:
        self.Z = Z
        self.C = C
        self._znorms = row_norms(Z)

    def __call__(self, r: np.ndarray) -> np.ndarray:
        """The clipped sum for residuals ``r`` (shape ``(n,)``); shape ``(d,)``."""
        f = np.minimum(1.0, self.C / np.maximum(np.abs(r) * self._znorms, 1e-300))
        return cast(np.ndarray, self.Z.T @ (r * f))


def row_norms(G: np.ndarray, out: np.ndarray | None = None, block: int = 4096) -> np.ndarray:
    """``numpy.linalg.norm(G, axis=1)`` bit for bit, squaring ``block`` rows at a time.

    Parameters
    ----------
    G : ndarray, shape (n, d)
    out : ndarray, shape (n,), optional
        Written and returned; a new array when omitted.
    block : int
        Rows squared and summed at a time (at least 2; a single row left
        over joins the block before it).

    Returns
    -------
    ndarray, shape (n,)

    Notes
    -----
    ``numpy.linalg.norm`` squares the whole of ``G`` into a new ``(n, d)``
    array, then sums each row. Here the squares go to a ``(block, d)``
    scratch array with the memory order of ``G``, so that numpy sums each
    row of a block in the same order as it sums that row of the whole array
    (pairwise along a C-ordered row, left to right across an F-ordered one);
    each row's sum, and so its square root, is the same. A block of one row
    is never made: numpy sums a lone F-ordered row pairwise. A ``G`` that is
    neither C- nor F-contiguous is left to ``numpy.linalg.norm``.
    """
    if block < 2:
        raise ValueError(f"row_norms: block must be at least 2, got {block}")
    n, d = G.shape
    if out is None:
        out = np.empty(n)
    order: Literal["C", "F"]
    if G.flags.c_contiguous:
        order = "C"
    elif G.flags.f_contiguous:
        order = "F"
    else:
        out[:] = np.linalg.norm(G, axis=1)
        return out
    cuts = list(range(0, n, block)) + [n]
    if len(cuts) > 2 and cuts[-1] - cuts[-2] == 1:
        del cuts[-2]
    scratch = np.empty((min(n, block + 1), d), order=order)
    for a, b in zip(cuts[:-1], cuts[1:], strict=True):
        S = scratch[: b - a]
        np.multiply(G[a:b], G[a:b], out=S)
        np.add.reduce(S, axis=1, out=out[a:b])
    return np.sqrt(out, out=out)


_PARAMS = {
    "steps": Param(25, "ours: a few dozen full-batch steps; each costs 1/T of the budget"),
    "learning_rate": Param(1.0, "ours: 1/L for L = lambda_max(Z'Z/n) <= 1 when ||z|| <= 1"),
    "clip": Param(1.0, "ours: every gradient at theta = 0 has norm ||z|| |u| <= 1"),
}


@register
class DPGD(Algorithm):
    """Noisy clipped gradient descent on norm-bounded raw columns (standard)."""

    name = "dpgd"
    task = "linreg"
    citation = _CITATION
    interpretation = "standard"
    summary = "full-batch noisy clipped gradient descent (zCDP) on raw columns scaled by private norm bounds"
    iterative = True
    defaults = {
        **_PARAMS,
        "bound_quantile": Param(None, "ours: as adassp (highest reliable level up to 0.95)"),
        "bounds_fraction": Param(0.1, "ours: a tenth of the budget for the private bounds"),
    }
    public_details = {**RAW_BOUNDS_DETAILS, "sigma": "public fact: 2 clip / sqrt(2 rho_step), clip a hyperparameter"}

    def _run(self, data: TaskData, facts: PublicFacts, epsilon: float, delta: float,
             rng: np.random.Generator) -> Outcome:
        X, y = data.X, cast(np.ndarray, data.y)
        acc = ZCDPAccountant(epsilon, delta)
        Xc, yc, B2, By, det, _ = raw_problem(X, y, facts, acc, rng, self.params["bounds_fraction"],
                                             self.params["bound_quantile"])
        Bx = math.sqrt(B2)
        theta, det2 = noisy_gd(Xc / Bx, yc / By, int(self.params["steps"]), float(self.params["learning_rate"]),
                               float(self.params["clip"]), acc, rng)
        return self.release(theta * By / Bx, acc, **det, **det2)


@register
class DPGDStd(Algorithm):
    """Noisy clipped gradient descent in a privately standardised basis (standard)."""

    name = "dpgd_std"
    task = "linreg"
    citation = _CITATION + " Preprocessing: private per-column standardisation (dpstats)."
    interpretation = "standard"
    summary = "full-batch noisy clipped gradient descent (zCDP) in a privately standardised basis"
    iterative = True
    defaults = {
        **_PARAMS,
        "range_fraction": Param(0.1, "ours: a tenth of the budget for the private column ranges"),
        "k_sd": Param(3.0, "ours: clip at about 3 standard deviations of normal data"),
    }
    public_details = {**BASIS_DETAILS, "sigma": "public fact: 2 clip / sqrt(2 rho_step), clip a hyperparameter"}

    def _run(self, data: TaskData, facts: PublicFacts, epsilon: float, delta: float,
             rng: np.random.Generator) -> Outcome:
        X, y = data.X, cast(np.ndarray, data.y)
        acc = ZCDPAccountant(epsilon, delta)
        S, basis, Z, u = standardised_problem(X, y, facts, acc, rng, self.params["range_fraction"], self.params["k_sd"])
        rD = math.sqrt(basis.norm2_bound())
        theta, det = noisy_gd(Z / rD, u, int(self.params["steps"]), float(self.params["learning_rate"]),
                              float(self.params["clip"]), acc, rng)
        return self.release(basis.coef_to_raw(theta / rD), acc, **basis.details, **det)


coefficient_of(DPGD)
coefficient_of(DPGDStd)
