"""Epsilon lower bounds from the outcomes of a distinguishing test.

A test guesses "in" (the release came from the data set *with* the canary) or
"out". For an ``(epsilon, delta)``-DP mechanism every test satisfies
(Kairouz, Oh, Viswanath 2015)::

    TPR <= exp(epsilon) FPR + delta    and    TNR <= exp(epsilon) FNR + delta,

so observed rates give ``epsilon >= ln((TPR - delta) / FPR)``. The rates are
estimated from finitely many releases; to make the bound hold with a stated
confidence ``1 - alpha``, TPR is replaced by a one-sided Clopper-Pearson lower
bound and FPR by an upper bound. ``split=True`` (default) spends ``alpha/2`` on
each, so both hold together with probability ``>= 1 - alpha``; ``split=False``
spends ``alpha`` on each (each bound alone has confidence ``1 - alpha``; the
pair only ``1 - 2 alpha``), as some papers do.

Estimators
----------
Clopper-Pearson (:func:`epsilon_lower_bound`)
    Assumption-free: valid for any mechanism.
Exposure (:func:`exposure_epsilon_bound`)
    Jagielski's reading of the median canary: ``TPR = 1/2`` (half the canaries
    lie below the median loss) and ``FPR = 2^-E`` (the references below it),
    then Clopper-Pearson as above. Other quantiles give bounds at lower FPR.
Gaussian DP (:func:`gdp_mu_lower_bound`, Nasr et al. 2023)
    A ``mu``-GDP mechanism has ``FNR >= Phi(Phi^-1(1 - FPR) - mu)`` for every
    test, so ``mu >= Phi^-1(1 - FPR) - Phi^-1(FNR)`` with the upper bounds of
    FPR and FNR. The lower bound on ``mu`` is valid for any mechanism; the
    epsilon it implies (``epsilon`` with ``delta_mu(epsilon) = delta``) is a
    lower bound on epsilon **only for mechanisms whose trade-off curve is
    Gaussian** (the Gaussian mechanism and its compositions), not for, e.g., a
    Laplace or exponential mechanism.
zCDP (:func:`zcdp_rho_lower_bound`)
    A ``rho``-zCDP mechanism has Renyi divergence ``D_a <= a rho`` between the
    outputs on neighbours for all orders ``a > 1``, and by post-processing the
    same holds for the Bernoulli outcome of any test, so
    ``rho >= sup_a D_a(Bern(TPR) || Bern(FPR)) / a`` (and with the roles
    swapped). Valid lower bound on rho for any mechanism; refutes a zCDP claim.
One run (:func:`epsilon_one_run`, Steinke, Nasr, Jagielski 2023, Theorem 3.1)
    ``m`` canaries, each included independently with probability 1/2; the
    auditor makes ``r`` guesses of which ``v`` are right. For an
    ``(epsilon, delta)``-DP mechanism ``P[V >= v] <= P[Binom(r, e^eps/(1+e^eps)) >= v]
    + 2 m delta max_i P[v > Binom(...) >= v - i] / i``; the bound is the
    largest epsilon this rejects at level ``alpha``.

Threshold search
----------------
A threshold chosen by looking at the same scores the bound is computed from
makes the bound invalid (it is the maximum of many noisy bounds). The
``*_scores`` functions take the threshold either from a separate part of the
data (``correction="split"``: choose on a random fraction, evaluate on the
rest) or search a fixed grid of thresholds and divide ``alpha`` by their
number (``correction="bonferroni"``).

Group privacy: with ``k`` copies of each canary, the test distinguishes data
sets ``k`` rows apart, which are ``k epsilon``-indistinguishable; every bound
here is divided by ``group_size = k``. (For ``delta > 0`` the group's delta is
``k e^((k-1) epsilon) delta``; pass that as ``delta``.)
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast, overload

import numpy as np
from numpy.typing import ArrayLike
from scipy import optimize, special, stats

from dpstats.privacy.accounting import gdp_delta

__all__ = [
    "clopper_pearson_lower",
    "clopper_pearson_upper",
    "Bound",
    "epsilon_lower_bound",
    "exposure_epsilon_bound",
    "gdp_mu_lower_bound",
    "epsilon_from_gdp",
    "renyi_bernoulli",
    "zcdp_rho_lower_bound",
    "one_run_p_value",
    "epsilon_one_run",
    "epsilon_clopper_pearson_scores",
    "epsilon_gdp_scores",
    "epsilon_one_run_scores",
    "check_confidence",
]


def check_confidence(confidence: float) -> float:
    """Return ``confidence`` as a float, or raise ``ValueError`` naming it if not in (0, 1)."""
    try:
        c = float(confidence)
    except (TypeError, ValueError):
        raise ValueError(f"confidence must be a number in (0, 1), got {confidence!r}") from None
    if not (0.0 < c < 1.0) or math.isnan(c):
        raise ValueError(f"confidence must lie in (0, 1), got {confidence!r}")
    return c


def _check_delta(delta: float) -> float:
    d = float(delta)
    if not (0.0 <= d < 1.0):
        raise ValueError(f"delta must lie in [0, 1), got {delta!r}")
    return d


def _check_group(k: int) -> int:
    if int(k) != k or k < 1:
        raise ValueError(f"group_size must be a positive integer, got {k!r}")
    return int(k)


@overload
def clopper_pearson_lower(k: float, n: float, alpha: float) -> float: ...
@overload
def clopper_pearson_lower(k: ArrayLike, n: ArrayLike, alpha: float) -> np.ndarray | float: ...
def clopper_pearson_lower(k: ArrayLike, n: ArrayLike, alpha: float) -> np.ndarray | float:
    """One-sided ``1 - alpha`` Clopper-Pearson lower bound on a binomial proportion (0 when ``k = 0``)."""
    k = np.asarray(k, dtype=float)
    n = np.asarray(n, dtype=float)
    with np.errstate(invalid="ignore"):
        out = np.where(k > 0, stats.beta.ppf(alpha, np.maximum(k, 1), np.maximum(n - k + 1, 1)), 0.0)
    return out if out.ndim else float(out)


@overload
def clopper_pearson_upper(k: float, n: float, alpha: float) -> float: ...
@overload
def clopper_pearson_upper(k: ArrayLike, n: ArrayLike, alpha: float) -> np.ndarray | float: ...
def clopper_pearson_upper(k: ArrayLike, n: ArrayLike, alpha: float) -> np.ndarray | float:
    """One-sided ``1 - alpha`` Clopper-Pearson upper bound on a binomial proportion (1 when ``k = n``)."""
    k = np.asarray(k, dtype=float)
    n = np.asarray(n, dtype=float)
    with np.errstate(invalid="ignore"):
        out = np.where(k < n, stats.beta.ppf(1.0 - alpha, k + 1, np.maximum(n - k, 1)), 1.0)
    return out if out.ndim else float(out)


@dataclass(frozen=True)
class Bound:
    """An epsilon lower bound with what it rests on.

    Attributes
    ----------
    estimator : str
        ``"clopper_pearson"``, ``"exposure"``, ``"gdp"``, ``"zcdp"`` or ``"one_run"``.
    epsilon : float
        The lower bound (at ``delta``), >= 0, already divided by ``group_size``.
    confidence : float
        It holds with at least this probability (under the estimator's assumption).
    delta : float
    details : dict
        Counts, rate bounds, threshold, ``mu`` or ``rho`` bound, ...
    assumption : str
        Empty when the bound holds for every mechanism.
    """

    estimator: str
    epsilon: float
    confidence: float
    delta: float
    details: dict[str, Any] = field(default_factory=dict)
    assumption: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"estimator": self.estimator, "epsilon": self.epsilon, "confidence": self.confidence,
                "delta": self.delta, "assumption": self.assumption, **self.details}


def _eps_from_rates(tpr_lo: ArrayLike, fpr_hi: ArrayLike, delta: float) -> np.ndarray:
    tpr_lo = np.asarray(tpr_lo, dtype=float)
    fpr_hi = np.asarray(fpr_hi, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        e = np.where((tpr_lo > delta) & (fpr_hi > 0), np.log(np.maximum(tpr_lo - delta, 1e-300)) - np.log(fpr_hi),
                     np.where((tpr_lo > delta) & (fpr_hi <= 0), np.inf, 0.0))
    return np.maximum(e, 0.0)


def epsilon_lower_bound(tp: int, n_pos: int, fp: int, n_neg: int, delta: float = 0.0, confidence: float = 0.95,
                        split: bool = True, group_size: int = 1, two_sided: bool = True) -> Bound:
    """Clopper-Pearson epsilon lower bound from the counts of one test.

    Parameters
    ----------
    tp, n_pos : int
        Releases from the data set with the canary guessed "in", and their number.
    fp, n_neg : int
        Releases from the data set without it guessed "in", and their number.
    delta : float
        The ``delta`` of the claim being audited.
    confidence : float in (0, 1)
        ``1 - alpha``.
    split : bool
        Spend ``alpha/2`` on each rate (joint confidence ``1 - alpha``); else ``alpha`` on each.
    group_size : int
        Copies of the canary; the bound is divided by it.
    two_sided : bool
        Also use ``TNR <= e^eps FNR + delta`` (same two confidence bounds).

    Returns
    -------
    Bound
        ``epsilon = max(ln((TPR_lo - delta)/FPR_hi), ln((TNR_lo - delta)/FNR_hi), 0) / group_size``.

    Examples
    --------
    >>> round(epsilon_lower_bound(500, 1000, 1024, 2**20, delta=1e-6).epsilon, 2)
    6.11
    """
    conf = check_confidence(confidence)
    delta = _check_delta(delta)
    k = _check_group(group_size)
    for nm, c, n in (("tp", tp, n_pos), ("fp", fp, n_neg)):
        if not (0 <= c <= n) or n < 1:
            raise ValueError(f"{nm} must lie in [0, n] with n >= 1, got {c} of {n}")
    a = (1.0 - conf) / (2.0 if split else 1.0)
    tpr_lo = clopper_pearson_lower(tp, n_pos, a)
    fpr_hi = clopper_pearson_upper(fp, n_neg, a)
    e1 = float(_eps_from_rates(tpr_lo, fpr_hi, delta))
    e2 = float(_eps_from_rates(1.0 - fpr_hi, 1.0 - tpr_lo, delta)) if two_sided else 0.0
    return Bound("clopper_pearson", max(e1, e2) / k, conf, delta,
                 {"tp": int(tp), "n_pos": int(n_pos), "fp": int(fp), "n_neg": int(n_neg), "tpr_lower": float(tpr_lo),
                  "fpr_upper": float(fpr_hi), "split": bool(split), "group_size": k})


def exposure_epsilon_bound(canary_losses: ArrayLike, reference_losses: ArrayLike, quantile: float = 0.5,
                           delta: float = 0.0, confidence: float = 0.95, split: bool = True,
                           group_size: int = 1) -> Bound:
    """Epsilon lower bound from the canary at a quantile of the canary losses (Jagielski's note).

    The test "in if loss <= the ``quantile`` of the canary losses" has
    ``TPR ~= quantile`` and ``FPR ~= 2^-E`` with ``E`` the exposure of that
    canary; the bound is :func:`epsilon_lower_bound` on its counts. The median
    (``quantile = 0.5``) gives ``ln((1/2 - delta) / 2^-E)`` up to sampling
    error; small quantiles (the most exposed canaries) probe lower FPR.

    The threshold is a statistic of the canaries themselves, so the TPR bound
    is heuristic (exact for the FPR); audits that must be valid choose the
    threshold on separate data (:func:`epsilon_clopper_pearson_scores`).

    Returns
    -------
    Bound
        ``details`` has the threshold and the exposure at it.
    """
    from dpstats.audit.exposure import exposure

    if not (0.0 < quantile < 1.0):
        raise ValueError(f"quantile must lie in (0, 1), got {quantile!r}")
    c = np.asarray(canary_losses, dtype=float).reshape(-1)
    r = np.asarray(reference_losses, dtype=float).reshape(-1)
    thr = float(np.quantile(c, quantile, method="inverted_cdf"))
    tp = int(np.sum(c <= thr))
    fp = int(np.sum(r <= thr))
    b = epsilon_lower_bound(tp, c.size, fp, r.size, delta=delta, confidence=confidence, split=split,
                            group_size=group_size, two_sided=False)
    e = float(exposure([thr], r, ties="min")[0])  # the canary at the threshold; references tied with it not below
    return Bound("exposure", b.epsilon, b.confidence, b.delta,
                 {**b.details, "quantile": quantile, "threshold": thr, "exposure": e},
                 assumption="threshold taken from the canaries (heuristic TPR bound)")


# --------------------------------------------------------------------------
# Gaussian DP
# --------------------------------------------------------------------------


def gdp_mu_lower_bound(fpr_upper: ArrayLike, fnr_upper: ArrayLike) -> float:
    """``mu >= Phi^-1(1 - FPR) - Phi^-1(FNR)`` at upper bounds of both rates (Nasr et al. 2023), clipped at 0.

    jax-privacy 2.0 takes the absolute value instead, which for a test worse
    than random guessing uses the wrong side of the confidence intervals; here
    such a test gives 0 (reverse it by negating the scores).
    """
    fpr = np.clip(np.asarray(fpr_upper, dtype=float), 1e-300, 1.0)
    fnr = np.clip(np.asarray(fnr_upper, dtype=float), 1e-300, 1.0)
    # Phi^-1(1 - FPR) - Phi^-1(FNR), clipped at 0. No absolute value: a test worse than random guessing,
    # reversed, is as good, but its rate bounds are 1 - (the *lower* bounds), so |mu| computed from upper
    # bounds would overstate the evidence; reverse the test (negate the scores) instead.
    mu = np.maximum(-special.ndtri(fpr) - special.ndtri(fnr), 0.0)
    mu = np.where((fpr >= 1.0) | (fnr >= 1.0), 0.0, mu)
    return float(np.max(mu)) if mu.ndim else float(mu)


def epsilon_from_gdp(mu: float, delta: float) -> float:
    """The ``epsilon`` of ``mu``-GDP at ``delta``: the root of ``delta_mu(epsilon) = delta`` (0 if none)."""
    delta = _check_delta(delta)
    if mu <= 0:
        return 0.0
    if delta == 0:
        return math.inf
    if gdp_delta(mu, 0.0) <= delta:
        return 0.0
    hi = max(1.0, mu * mu)
    while gdp_delta(mu, hi) > delta:
        hi *= 2.0
        if hi > 1e6:
            return math.inf
    return float(optimize.brentq(lambda e: gdp_delta(mu, e) - delta, 0.0, hi, xtol=1e-12, rtol=1e-12))


# --------------------------------------------------------------------------
# zCDP (Renyi divergence of the test's outcome)
# --------------------------------------------------------------------------

_ORDERS = 1.0 + np.logspace(-3, 3, 300)


def renyi_bernoulli(p: float, q: float, orders: ArrayLike = _ORDERS) -> np.ndarray:
    """Renyi divergences ``D_a(Bern(p) || Bern(q))`` at each order ``a > 1`` (natural log)."""
    a = np.asarray(orders, dtype=float)
    p = float(p)
    q = float(q)
    with np.errstate(divide="ignore", invalid="ignore"):
        t1 = np.where(p > 0, a * np.log(p) + (1 - a) * np.log(q) if q > 0 else np.inf, -np.inf)
        t2 = np.where(p < 1, a * np.log1p(-p) + (1 - a) * np.log1p(-q) if q < 1 else np.inf, -np.inf)
        return np.logaddexp(t1, t2) / (a - 1.0)


def zcdp_rho_lower_bound(tpr_lower: float, fpr_upper: float) -> float:
    """``rho >= sup_a max(D_a(B(TPR)||B(FPR)), D_a(B(FPR)||B(TPR))) / a`` at the rate bounds; 0 if TPR <= FPR."""
    p, q = float(tpr_lower), float(fpr_upper)
    if p <= q:
        return 0.0
    d1 = renyi_bernoulli(p, q) / _ORDERS
    d2 = renyi_bernoulli(q, p) / _ORDERS
    # a -> 1: the KL divergence
    kl: Callable[[float, float], float] = lambda x, y: (  # noqa: E731
        x * math.log(x / y) + ((1 - x) * math.log((1 - x) / (1 - y)) if x < 1 else 0.0))
    vals = [float(np.nanmax(d1)), float(np.nanmax(d2))]
    if q > 0 and p < 1:
        vals += [kl(p, q), kl(q, p)]
    return max(max(vals), 0.0)


# --------------------------------------------------------------------------
# One run (Steinke, Nasr, Jagielski 2023)
# --------------------------------------------------------------------------


def one_run_p_value(m: int, r: int, v: int, epsilon: float, delta: float = 0.0) -> float:
    """Bound on ``P[V >= v]`` for an ``(epsilon, delta)``-DP mechanism (Theorem 3.1 of Steinke et al. 2023).

    Parameters
    ----------
    m : int
        Canaries (each included independently with probability 1/2).
    r, v : int
        Guesses made and guesses right.
    epsilon, delta : float
    """
    if not (0 <= v <= r <= m):
        raise ValueError(f"need 0 <= v <= r <= m, got v={v}, r={r}, m={m}")
    p = special.expit(epsilon)
    beta = float(stats.binom.sf(v - 1, r, p))
    if delta == 0 or v == 0:
        return min(beta, 1.0)
    i = np.arange(1, v + 1)
    between = stats.binom.sf(v - i - 1, r, p) - beta  # P[v > W >= v - i]
    return float(min(beta + 2.0 * m * delta * np.max(between / i), 1.0))


def epsilon_one_run(m: int, r: int, v: int, delta: float = 0.0, confidence: float = 0.95, group_size: int = 1) -> Bound:
    """The largest epsilon rejected at level ``alpha = 1 - confidence`` by ``v`` right of ``r`` guesses.

    Examples
    --------
    >>> round(epsilon_one_run(1000, 100, 100, confidence=0.95).epsilon, 4)   # logit(0.05 ** (1/100))
    3.493
    """
    conf = check_confidence(confidence)
    delta = _check_delta(delta)
    k = _check_group(group_size)
    alpha = 1.0 - conf
    det = {"m": int(m), "guesses": int(r), "correct": int(v), "group_size": k}
    if r == 0 or one_run_p_value(m, r, v, 0.0, delta) > alpha:
        return Bound("one_run", 0.0, conf, delta, det)

    def f(e: float) -> float:
        return alpha - one_run_p_value(m, r, v, e, delta)

    lo, hi = 0.0, 1.0
    while f(hi) > 0:
        lo, hi = hi, hi * 2.0
        if hi > 1e4:
            return Bound("one_run", math.inf, conf, delta, det)
    eps = float(optimize.brentq(f, lo, hi, xtol=1e-10, rtol=1e-12))
    return Bound("one_run", eps / k, conf, delta, det)


# --------------------------------------------------------------------------
# From scores, with a corrected threshold search
# --------------------------------------------------------------------------


#: ``value_fn(tp, n_pos, fp, n_neg, alpha_each)``: the bound at each threshold's counts
_ValueFn = Callable[[np.ndarray, int, np.ndarray, int, float], np.ndarray]
#: ``to_bound(tp, n_pos, fp, n_neg, alpha, details)``: the bound at the chosen threshold
_ToBound = Callable[[int, int, int, int, float, dict[str, Any]], Bound]


def _scores(x: ArrayLike, name: str) -> np.ndarray:
    a = np.asarray(x, dtype=float).reshape(-1)
    if a.size == 0:
        raise ValueError(f"{name} must not be empty")
    if np.any(np.isnan(a)):
        raise ValueError(f"{name} contains NaN")
    return a


def _grid(in_s: np.ndarray, out_s: np.ndarray, max_thresholds: int | None) -> np.ndarray:
    allv = np.unique(np.concatenate([in_s, out_s]))
    t = np.concatenate([allv, [np.inf]])
    if max_thresholds is not None and t.size > max_thresholds:
        qs = np.unique(np.quantile(allv, np.linspace(0, 1, max_thresholds - 1), method="inverted_cdf"))
        t = np.concatenate([qs, [np.inf]])
    return t


def _counts(in_s: np.ndarray, out_s: np.ndarray, t: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """Releases with score >= t (guessed "in") in each group."""
    si, so = np.sort(in_s), np.sort(out_s)
    tp = in_s.size - np.searchsorted(si, t, side="left")
    fp = out_s.size - np.searchsorted(so, t, side="left")
    return tp, fp


def _split(in_s: np.ndarray, out_s: np.ndarray, fraction: float, rng: np.random.Generator,
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    if not (0 < fraction < 1):
        raise ValueError(f"split fraction must lie in (0, 1), got {fraction!r}")
    pi, po = rng.permutation(in_s.size), rng.permutation(out_s.size)
    ki, ko = int(in_s.size * fraction), int(out_s.size * fraction)
    if min(ki, ko, in_s.size - ki, out_s.size - ko) < 1:
        raise ValueError("too few scores to split")
    return in_s[pi[:ki]], out_s[po[:ko]], in_s[pi[ki:]], out_s[po[ko:]]


def _search(in_s: np.ndarray, out_s: np.ndarray, thresholds: np.ndarray, value_fn: _ValueFn,
            alpha_each: float) -> tuple[float, float]:
    """Best threshold by ``value_fn(tp, n_pos, fp, n_neg, alpha_each)`` over ``thresholds`` (vectorised)."""
    tp, fp = _counts(in_s, out_s, thresholds)
    vals = value_fn(tp, in_s.size, fp, out_s.size, alpha_each)
    i = int(np.argmax(vals))
    return float(thresholds[i]), float(vals[i])


def _cp_values(tp: ArrayLike, n_pos: int, fp: ArrayLike, n_neg: int, a: float, delta: float) -> np.ndarray:
    tpr_lo = clopper_pearson_lower(tp, n_pos, a)
    fpr_hi = clopper_pearson_upper(fp, n_neg, a)
    return cast(np.ndarray,
                np.maximum(_eps_from_rates(tpr_lo, fpr_hi, delta), _eps_from_rates(1 - fpr_hi, 1 - tpr_lo, delta)))


def _gdp_values(tp: ArrayLike, n_pos: int, fp: ArrayLike, n_neg: int, a: float, delta: float) -> np.ndarray:
    fpr_hi = clopper_pearson_upper(fp, n_neg, a)
    fnr_hi = clopper_pearson_upper(n_pos - np.asarray(tp), n_pos, a)
    ok = np.maximum(fpr_hi, fnr_hi) < 1.0 - delta
    mu = np.maximum(-special.ndtri(np.clip(fpr_hi, 1e-300, 1)) - special.ndtri(np.clip(fnr_hi, 1e-300, 1)), 0.0)
    return np.where(ok, mu, 0.0)


def _finish_scores(estimator: str, in_s: np.ndarray, out_s: np.ndarray, delta: float, conf: float, correction: str,
                   max_thresholds: int | None, rng: np.random.Generator | None, split_fraction: float,
                   thresholds: ArrayLike | None, value_fn: _ValueFn, to_bound: _ToBound) -> Bound:
    alpha = 1.0 - conf
    if correction == "bonferroni":
        t = np.asarray(thresholds, dtype=float) if thresholds is not None else _grid(in_s, out_s, max_thresholds)
        thr, _ = _search(in_s, out_s, t, value_fn, alpha / t.size / 2.0)
        tp, fp = _counts(in_s, out_s, np.array([thr]))
        return to_bound(int(tp[0]), in_s.size, int(fp[0]), out_s.size, alpha / t.size,
                        {"threshold": thr, "correction": "bonferroni", "n_thresholds": int(t.size)})
    if correction == "split":
        if rng is None:
            raise ValueError("correction='split' needs rng (a seeded numpy Generator)")
        a_in, a_out, b_in, b_out = _split(in_s, out_s, split_fraction, rng)
        thr, _ = _search(a_in, a_out, _grid(a_in, a_out, max_thresholds), value_fn, alpha / 2.0)
        tp, fp = _counts(b_in, b_out, np.array([thr]))
        return to_bound(int(tp[0]), b_in.size, int(fp[0]), b_out.size, alpha,
                        {"threshold": thr, "correction": "split", "split_fraction": split_fraction})
    raise ValueError(f"correction must be 'bonferroni' or 'split', got {correction!r}")


def epsilon_clopper_pearson_scores(in_scores: ArrayLike, out_scores: ArrayLike, delta: float = 0.0,
                                   confidence: float = 0.95, correction: str = "bonferroni",
                                   max_thresholds: int | None = None,
                                   rng: np.random.Generator | None = None, split_fraction: float = 0.5,
                                   thresholds: ArrayLike | None = None, group_size: int = 1) -> Bound:
    """Clopper-Pearson bound from scores (higher = "in"), the threshold found with a correction.

    Parameters
    ----------
    in_scores, out_scores : array_like
        Scores of releases from the data set with / without the canary.
    correction : {"bonferroni", "split"}
        Search ``thresholds`` (default: every distinct score, or ``max_thresholds``
        quantiles) at ``alpha / #thresholds``; or choose on a random
        ``split_fraction`` and evaluate on the rest.
    """
    conf = check_confidence(confidence)
    delta = _check_delta(delta)
    k = _check_group(group_size)
    i_s, o_s = _scores(in_scores, "in_scores"), _scores(out_scores, "out_scores")

    def to_bound(tp: int, n_pos: int, fp: int, n_neg: int, a: float, det: dict[str, Any]) -> Bound:
        b = epsilon_lower_bound(tp, n_pos, fp, n_neg, delta, 1.0 - a, split=True, group_size=k)
        return Bound("clopper_pearson", b.epsilon, conf, delta, {**b.details, **det})

    return _finish_scores("clopper_pearson", i_s, o_s, delta, conf, correction, max_thresholds, rng, split_fraction,
                          thresholds, lambda tp, n, fp, m, a: _cp_values(tp, n, fp, m, a, delta), to_bound)


def epsilon_gdp_scores(in_scores: ArrayLike, out_scores: ArrayLike, delta: float, confidence: float = 0.95,
                       correction: str = "bonferroni", max_thresholds: int | None = None,
                       rng: np.random.Generator | None = None,
                       split_fraction: float = 0.5, thresholds: ArrayLike | None = None, group_size: int = 1) -> Bound:
    """Gaussian-DP estimate (Nasr et al. 2023): a lower bound on ``mu``, then epsilon at ``delta``.

    ``details["mu_lower"]`` holds for any mechanism; ``epsilon`` is a lower
    bound only if the mechanism's trade-off curve is Gaussian (see the module
    docstring).
    """
    conf = check_confidence(confidence)
    delta = _check_delta(delta)
    k = _check_group(group_size)
    i_s, o_s = _scores(in_scores, "in_scores"), _scores(out_scores, "out_scores")

    def to_bound(tp: int, n_pos: int, fp: int, n_neg: int, a: float, det: dict[str, Any]) -> Bound:
        fpr_hi = float(clopper_pearson_upper(fp, n_neg, a / 2.0))
        fnr_hi = float(clopper_pearson_upper(n_pos - tp, n_pos, a / 2.0))
        mu = gdp_mu_lower_bound(fpr_hi, fnr_hi) if max(fpr_hi, fnr_hi) < 1.0 - delta else 0.0
        return Bound("gdp", epsilon_from_gdp(mu, delta) / k, conf, delta,
                     {"mu_lower": mu, "tp": tp, "n_pos": n_pos, "fp": fp, "n_neg": n_neg, "fpr_upper": fpr_hi,
                      "fnr_upper": fnr_hi, "group_size": k, **det},
                     assumption="Gaussian trade-off curve (mu_lower itself holds for any mechanism)")

    return _finish_scores("gdp", i_s, o_s, delta, conf, correction, max_thresholds, rng, split_fraction, thresholds,
                          lambda tp, n, fp, m, a: _gdp_values(tp, n, fp, m, a, delta), to_bound)


def epsilon_one_run_scores(in_scores: ArrayLike, out_scores: ArrayLike, delta: float = 0.0, confidence: float = 0.95,
                           correction: str = "bonferroni", max_thresholds: int | None = 200,
                           rng: np.random.Generator | None = None, split_fraction: float = 0.5,
                           thresholds: ArrayLike | None = None, group_size: int = 1) -> Bound:
    """One-run bound from scores: guess "in" for every score at or above a threshold, abstain otherwise.

    ``m`` is the number of scores (in and out). The threshold is searched with
    a Bonferroni correction or chosen on a split, as in
    :func:`epsilon_clopper_pearson_scores`. The in/out labels must come from
    independent fair coins for the theorem to apply.
    """
    conf = check_confidence(confidence)
    delta = _check_delta(delta)
    k = _check_group(group_size)
    i_s, o_s = _scores(in_scores, "in_scores"), _scores(out_scores, "out_scores")

    def one_run_values(tp: ArrayLike, n: int, fp: ArrayLike, m: int, a: float) -> np.ndarray:
        # the one-run bound at the candidate thresholds, best raw precision first; a threshold whose raw
        # precision is below e^eps/(1+e^eps) of the best bound so far cannot beat it and is skipped
        # (the selection rule does not affect validity)
        tp, fp = np.asarray(tp), np.asarray(fp)
        r = tp + fp
        prec = np.where(r > 0, tp / np.maximum(r, 1), 0.0)
        vals = np.zeros(tp.size)
        best = 0.0
        for i in np.argsort(-prec, kind="stable"):
            if r[i] == 0 or prec[i] <= special.expit(best):
                continue
            vals[i] = epsilon_one_run(n + m, int(r[i]), int(tp[i]), delta, 1.0 - 2.0 * a).epsilon
            best = max(best, vals[i])
        return vals

    def to_bound(tp: int, n_pos: int, fp: int, n_neg: int, a: float, det: dict[str, Any]) -> Bound:
        b = epsilon_one_run(n_pos + n_neg, tp + fp, tp, delta, 1.0 - a, group_size=k)
        return Bound("one_run", b.epsilon, conf, delta, {**b.details, **det})

    return _finish_scores("one_run", i_s, o_s, delta, conf, correction, max_thresholds, rng, split_fraction,
                          thresholds, one_run_values, to_bound)
