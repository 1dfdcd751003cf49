"""What an audit could have seen: its power against a mechanism that spends exactly the claim.

An audit that finds no violation reports a lower bound below the claimed
epsilon. That bound says as much about the audit as about the algorithm: with
a few thousand releases even a mechanism that uses its whole budget yields a
bound well below the claim. This module computes the bound an ideal attack
reaches, with the same number of evaluation runs and the same confidence
split as :func:`dpstats.audit.audit`, on the Gaussian mechanism that is
*exactly* ``(epsilon, delta)``-DP (for ``delta = 0``, the Laplace mechanism at
``epsilon``). Read an audit's ``epsilon_lower`` against it: "no violation,
lower bound 0.16 of a possible 0.6".

The ideal attack knows the mechanism: a threshold on the released value,
the best threshold for the counts. The counts are their expectations (the
bound is then a typical value, not a guarantee), and the threshold is
chosen on them rather than on separate selection runs, so the figure is
slightly optimistic for the audit. Only the Clopper-Pearson estimator is
modelled; ``one_run`` is weaker on Gaussian noise, ``zcdp`` and ``gdp`` may
be stronger where they count.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy import optimize, special

from dpstats.audit import bounds as B

__all__ = ["exact_gaussian_sigma", "evaluation_runs", "gaussian_power", "trials_for_power", "min_trials",
           "audit_power"]


def _gaussian_delta(sigma: float, epsilon: float) -> float:
    """The smallest delta of the sensitivity-1 Gaussian mechanism with noise sd ``sigma`` at ``epsilon``."""
    a, b = 0.5 / sigma, epsilon * sigma
    return float(special.ndtr(a - b) - math.exp(epsilon) * special.ndtr(-a - b))


def exact_gaussian_sigma(epsilon: float, delta: float) -> float:
    """Noise sd of the sensitivity-1 Gaussian mechanism that is exactly ``(epsilon, delta)``-DP.

    The analytic Gaussian mechanism (Balle and Wang, 2018): the root in
    ``sigma`` of ``Phi(1/(2 sigma) - epsilon sigma) - e^epsilon Phi(-1/(2 sigma)
    - epsilon sigma) = delta``, whose left side falls as ``sigma`` grows.

    Parameters
    ----------
    epsilon : float
        Positive.
    delta : float
        In (0, 1).

    Returns
    -------
    float
    """
    if not (epsilon > 0 and 0 < delta < 1):
        raise ValueError(f"exact_gaussian_sigma needs epsilon > 0 and delta in (0, 1), got {epsilon!r}, {delta!r}")
    lo, hi = 1e-3, 1.0
    while _gaussian_delta(hi, epsilon) > delta:
        hi *= 2.0
    while _gaussian_delta(lo, epsilon) < delta:
        lo /= 2.0
    return float(optimize.brentq(lambda s: _gaussian_delta(s, epsilon) - delta, lo, hi, xtol=1e-14, rtol=1e-12))


def evaluation_runs(trials: int, designs: int = 1) -> tuple[int, int]:
    """Expected evaluation runs per side of each design of an audit with ``trials`` releases in all.

    :func:`dpstats.audit.audit` splits the trials equally between its
    designs; in each, the last ``trials - 2 (trials // 4)`` runs are the
    evaluation runs, on either data set by a fair coin.
    """
    t = int(trials) // max(int(designs), 1)
    m = t - 2 * (t // 4)
    return m // 2, m - m // 2


def gaussian_power(epsilon: float, delta: float, trials: int, confidence: float = 0.95, counted: int = 2,
                   designs: int = 1, points: int = 4001) -> float:
    """The epsilon lower bound an ideal threshold attack typically reaches on a mechanism at the claim.

    Parameters
    ----------
    epsilon, delta : float
        The claim audited.
    trials : int
        Releases of the audit in all.
    confidence : float in (0, 1)
        The audit's confidence; split like the audit's (Bonferroni over
        ``designs`` and over the ``counted`` estimators, then half on each
        rate of the Clopper-Pearson test).
    counted : int
        Estimators that count for the claim (2: ``clopper_pearson`` and
        ``one_run``; 3 with ``zcdp`` or ``gdp``).
    designs : int
        Data-set designs audited, each with ``trials / designs`` releases.
    points : int
        Thresholds tried.

    Returns
    -------
    float
        The Clopper-Pearson lower bound at the expected counts, maximised
        over thresholds, for the Gaussian mechanism that is exactly
        ``(epsilon, delta)``-DP (Laplace at ``epsilon`` when ``delta = 0``).
    """
    n_in, n_out = evaluation_runs(trials, designs)
    if n_in < 1 or n_out < 1:
        return 0.0
    alpha = (1.0 - float(confidence)) / max(int(designs), 1) / max(int(counted), 1)
    if delta > 0:
        s = exact_gaussian_sigma(epsilon, delta)
        t = np.linspace(-8.0 * s, 1.0 + 8.0 * s, points)
        tpr, fpr = special.ndtr((1.0 - t) / s), special.ndtr(-t / s)
    else:
        b = 1.0 / epsilon
        t = np.linspace(-10.0 * b, 1.0 + 10.0 * b, points)

        def sf(x: np.ndarray) -> np.ndarray:
            return np.where(x < 0, 1.0 - 0.5 * np.exp(x / b), 0.5 * np.exp(-x / b))

        tpr, fpr = sf(t - 1.0), sf(t)
    vals = B._cp_values(n_in * tpr, n_in, n_out * fpr, n_out, alpha / 2.0, delta)
    return float(np.max(vals))


def trials_for_power(target: float, epsilon: float, delta: float, confidence: float = 0.95, counted: int = 2,
                     designs: int = 1, limit: int = 10**8) -> int | None:
    """Fewest trials (to about 3 %) whose :func:`gaussian_power` reaches ``target``; None beyond ``limit``."""
    t = 64 * max(int(designs), 1)
    while gaussian_power(epsilon, delta, t, confidence, counted, designs) < target:
        t *= 2
        if t > limit:
            return None
    lo, hi = t // 2, t
    while hi - lo > max(hi // 32, 1):
        mid = (lo + hi) // 2
        if gaussian_power(epsilon, delta, mid, confidence, counted, designs) >= target:
            hi = mid
        else:
            lo = mid
    return int(hi)


def _perfect_cp(n_side: int, alpha_each: float, delta: float) -> float:
    """The Clopper-Pearson bound of a test that separates ``n_side`` runs per side perfectly."""
    if n_side < 1:
        return 0.0
    lo = alpha_each ** (1.0 / n_side)
    return float(B._eps_from_rates(lo, 1.0 - lo, delta))


def min_trials(epsilon: float, delta: float, confidence: float, n_estimators: int = 2) -> int:
    """Fewest trials with which a perfect attack could show a bound above ``epsilon`` (Clopper-Pearson)."""
    alpha_each = (1.0 - confidence) / n_estimators / 2.0
    t = 8
    while _perfect_cp(t // 4, alpha_each, delta) <= epsilon:
        t *= 2
        if t > 1 << 40:
            break
    lo, hi = t // 2, t
    while hi - lo > 4:
        mid = (lo + hi) // 2
        if _perfect_cp(mid // 4, alpha_each, delta) > epsilon:
            hi = mid
        else:
            lo = mid
    return int(hi)


def audit_power(epsilon: float, delta: float, trials: int, confidence: float, bounds: list[dict[str, Any]],
                designs: int) -> dict[str, Any]:
    """The power statement of an audit (:mod:`dpstats.audit.power`), with its estimators and designs."""
    counted = len({b["estimator"] for b in bounds if b.get("counts")}) or 2
    args = (epsilon, delta)
    return {
        "gaussian_bound": gaussian_power(*args, trials, confidence, counted, designs),
        "trials_for_half": trials_for_power(epsilon / 2.0, *args, confidence, counted, designs),
        "mechanism": "Gaussian, exactly (epsilon, delta)-DP" if delta > 0 else "Laplace at epsilon",
        "estimator": "clopper_pearson, ideal threshold, expected counts",
        "counted": counted,
        "designs": designs,
    }
