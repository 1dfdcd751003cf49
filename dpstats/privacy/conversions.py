"""Privacy budgets and the conversions between privacy notions.

Conversions
-----------
* Gaussian differential privacy (Dong, Roth, Su 2022): a mechanism is
  ``mu``-GDP when distinguishing neighbours is no easier than telling
  ``N(0, 1)`` from ``N(mu, 1)``. It is ``(epsilon, delta(epsilon))``-DP for
  every ``epsilon`` with ``delta(epsilon) = Phi(-epsilon/mu + mu/2) -
  exp(epsilon) Phi(-epsilon/mu - mu/2)``; this is the exact privacy profile of
  the Gaussian mechanism (Balle and Wang 2018, "analytic Gaussian
  mechanism"). GDP composes as ``sqrt(sum mu_i^2)``.
* Zero-concentrated DP (Bun and Steinke 2016): ``rho``-zCDP composes
  additively, an ``epsilon``-DP mechanism is ``epsilon^2 / 2``-zCDP, and the
  Gaussian mechanism with sensitivity ``D`` and scale ``sigma`` is
  ``D^2 / (2 sigma^2)``-zCDP. It converts to ``(epsilon, delta)`` with the
  tight bound of Canonne, Kamath and Steinke (2020, Proposition 12).

Examples
--------
>>> from dpstats.privacy.conversions import gaussian_sigma
>>> round(gaussian_sigma(1.0, 1.0, 1e-6), 4)
4.2247
"""

from __future__ import annotations

import math
import warnings
from typing import Literal

from scipy import optimize, special

__all__ = [
    "validate_budget",
    "gdp_delta",
    "gdp_mu",
    "gaussian_sigma",
    "zcdp_epsilon",
    "zcdp_rho",
    "laplace_scale",
    "EMBound",
    "em_rho",
    "em_epsilon",
]


def _log_norm_cdf(x: float) -> float:
    return float(special.log_ndtr(x))


def validate_budget(epsilon: float, delta: float, n: int | None = None) -> None:
    """Check a privacy budget and raise a clear error naming the argument.

    Parameters
    ----------
    epsilon : float
        Must be finite and > 0.
    delta : float
        Must lie in [0, 1).
    n : int, optional
        Number of rows; a warning is issued when ``delta > 1/n`` because such a
        delta allows releasing a row outright.

    Raises
    ------
    ValueError
        When ``epsilon`` or ``delta`` is out of range.
    """
    try:
        eps = float(epsilon)
    except (TypeError, ValueError):
        raise ValueError(f"epsilon must be a positive finite number, got {epsilon!r}") from None
    if not math.isfinite(eps) or eps <= 0:
        raise ValueError(f"epsilon must be a positive finite number, got {epsilon!r}")
    try:
        dlt = float(delta)
    except (TypeError, ValueError):
        raise ValueError(f"delta must lie in [0, 1), got {delta!r}") from None
    if not (0.0 <= dlt < 1.0) or not math.isfinite(dlt):
        raise ValueError(f"delta must lie in [0, 1), got {delta!r}")
    if n is not None and n > 0 and dlt > 1.0 / n:
        warnings.warn(
            f"delta={dlt:g} exceeds 1/n={1.0 / n:g}: such a delta permits releasing "
            "a whole row; choose delta well below 1/n",
            UserWarning,
            stacklevel=3,
        )


# --------------------------------------------------------------------------
# Gaussian DP
# --------------------------------------------------------------------------


def gdp_delta(mu: float, epsilon: float) -> float:
    """delta(epsilon) of ``mu``-GDP (exact privacy profile of the Gaussian mechanism)."""
    if mu <= 0:
        return 0.0
    if math.isinf(mu):
        return 1.0
    a = -epsilon / mu + mu / 2.0
    b = -epsilon / mu - mu / 2.0
    # Phi(a) - exp(eps) Phi(b), computed in log space for stability
    la = _log_norm_cdf(a)
    lb = epsilon + _log_norm_cdf(b)
    if lb >= la:
        return 0.0
    return float(math.exp(la) * -math.expm1(lb - la))


def gdp_mu(epsilon: float, delta: float) -> float:
    """Largest ``mu`` such that ``mu``-GDP implies ``(epsilon, delta)``-DP."""
    validate_budget(epsilon, delta)
    if delta == 0:
        return 0.0
    lo, hi = 1e-12, 1.0
    while gdp_delta(hi, epsilon) < delta:
        hi *= 2.0
        if hi > 1e6:
            return hi
    return float(optimize.brentq(lambda m: gdp_delta(m, epsilon) - delta, lo, hi, xtol=1e-14, rtol=1e-14, maxiter=500))


def gaussian_sigma(sensitivity: float, epsilon: float, delta: float) -> float:
    """Smallest Gaussian noise scale giving ``(epsilon, delta)``-DP (analytic Gaussian mechanism).

    Parameters
    ----------
    sensitivity : float
        L2 sensitivity of the statistic under replace-one neighbours.
    epsilon, delta : float
        Target budget; ``delta`` must be > 0.

    Returns
    -------
    float
        ``sigma = sensitivity / gdp_mu(epsilon, delta)``.
    """
    if delta <= 0:
        raise ValueError("the Gaussian mechanism needs delta > 0")
    if sensitivity < 0 or not math.isfinite(sensitivity):
        raise ValueError(f"sensitivity must be finite and >= 0, got {sensitivity!r}")
    return float(sensitivity / gdp_mu(epsilon, delta))


def laplace_scale(sensitivity: float, epsilon: float) -> float:
    """Laplace scale ``b = sensitivity / epsilon`` for ``epsilon``-DP (L1 sensitivity)."""
    validate_budget(epsilon, 0.0)
    return float(sensitivity / epsilon)


# --------------------------------------------------------------------------
# zCDP
# --------------------------------------------------------------------------


def zcdp_epsilon(rho: float, delta: float) -> float:
    """Smallest epsilon such that ``rho``-zCDP implies ``(epsilon, delta)``-DP.

    Uses Canonne, Kamath, Steinke (2020), Proposition 12:
    ``epsilon = min_{alpha > 1} alpha rho + log(1 - 1/alpha) - (log delta + log alpha) / (alpha - 1)``.
    """
    if rho < 0:
        raise ValueError("rho must be >= 0")
    if rho == 0:
        return 0.0
    if not (0 < delta < 1):
        raise ValueError("delta must lie in (0, 1)")

    def eps_of(alpha: float) -> float:
        return alpha * rho + math.log1p(-1.0 / alpha) - (math.log(delta) + math.log(alpha)) / (alpha - 1.0)

    # the function is quasi-convex in log(alpha - 1)
    res = optimize.minimize_scalar(
        lambda t: eps_of(1.0 + math.exp(t)), bounds=(-20.0, 30.0), method="bounded", options={"xatol": 1e-12}
    )
    best = min(res.fun, rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta)))
    return float(max(best, 0.0))


def zcdp_rho(epsilon: float, delta: float) -> float:
    """Largest ``rho`` such that ``rho``-zCDP implies ``(epsilon, delta)``-DP (inverse of :func:`zcdp_epsilon`)."""
    validate_budget(epsilon, delta)
    if delta == 0:
        raise ValueError("zCDP needs delta > 0 to convert to (epsilon, delta)-DP")
    hi = max(epsilon, 1.0)
    while zcdp_epsilon(hi, delta) < epsilon:
        hi *= 2.0
    return float(optimize.brentq(lambda r: zcdp_epsilon(r, delta) - epsilon, 1e-15, hi, xtol=1e-15, rtol=1e-13, maxiter=500))


# --------------------------------------------------------------------------
# Accountants
# --------------------------------------------------------------------------


#: how an exponential mechanism is charged in zCDP: ``"bounded_range"`` at
#: ``epsilon^2 / 8`` (Cesar and Rogers 2021, Lemma 3.2), ``"pure"`` at the
#: generic ``epsilon^2 / 2`` of an ``epsilon``-DP mechanism (Bun and Steinke 2016)
EMBound = Literal["bounded_range", "pure"]


def em_rho(epsilon: float, *, bound: EMBound) -> float:
    """zCDP cost of an ``epsilon``-DP exponential mechanism.

    Parameters
    ----------
    epsilon : float
        The mechanism's epsilon (``>= 0``).
    bound : {"bounded_range", "pure"}
        ``"bounded_range"``: ``epsilon^2 / 8``. The exponential mechanism with
        ``exp(epsilon u / (2 Delta))`` and a data-independent base measure is
        ``epsilon``-bounded-range (Durfee and Rogers 2019), hence
        ``epsilon^2/8``-zCDP (Cesar and Rogers 2021, Lemma 3.2).
        ``"pure"``: ``epsilon^2 / 2``, the cost of any ``epsilon``-DP mechanism.

    Returns
    -------
    float
    """
    if bound == "bounded_range":
        return float(epsilon) ** 2 / 8.0
    if bound == "pure":
        return float(epsilon) ** 2 / 2.0
    raise ValueError(f"bound must be 'bounded_range' or 'pure', got {bound!r}")


def em_epsilon(rho: float, *, bound: EMBound) -> float:
    """Epsilon of an exponential mechanism whose zCDP cost (see :func:`em_rho`) is ``rho``.

    ``sqrt(8 rho)`` for ``"bounded_range"``, ``sqrt(2 rho)`` for ``"pure"``.
    """
    if rho < 0:
        raise ValueError("rho must be >= 0")
    if bound == "bounded_range":
        return math.sqrt(8.0 * rho)
    if bound == "pure":
        return math.sqrt(2.0 * rho)
    raise ValueError(f"bound must be 'bounded_range' or 'pure', got {bound!r}")
