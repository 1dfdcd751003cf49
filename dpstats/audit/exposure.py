"""Canary exposure (Carlini et al. 2019) and its random-guessing baselines.

Convention: a *loss* is a score where **lower** means "looks more like a
member" (a canary the release memorised has a small loss). Scores where
higher means "member" are turned into losses by negation.

Exposure of a canary among ``N`` reference losses::

    exposure = log2(N) - log2(rank),    rank = 1 + #{references with a smaller loss}

so a canary ranked first has exposure ``log2 N`` and one ranked last
(``rank = N + 1``) has exposure ``log2(N / (N + 1)) < 0``.

Ties (``ties=``): ``"average"`` (default) counts a reference with an equal
loss as half smaller (mid-rank), which gives an uninformative (constant) score
an exposure of about 1, as random guessing; ``"min"`` counts no tie as smaller
(the highest exposure, optimistic for the attacker); ``"max"`` counts every tie
as smaller (the lowest exposure, conservative); ``"random"`` breaks ties
uniformly at random (needs ``rng``), which gives a constant score exactly the
random-guessing distribution.

Random guessing
---------------
If the losses carry no information, the rank of a canary is uniform on
``1..N+1``. Then ``P(exposure >= e) ~= 2^-e``: the exposure is about
exponential with rate ``ln 2`` (in bits), with mean ``1/ln 2 ~= 1.44``, median
1 and 75th percentile 2 (Jagielski's note). :func:`random_guessing_baseline`
gives these asymptotic values and the exact ones for finite ``N`` (and a finite
number ``m`` of canaries when an aggregate over canaries is reported).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
from numpy.typing import ArrayLike
from scipy import special, stats

__all__ = [
    "ranks",
    "exposure",
    "extrapolated_exposure",
    "ExposureSummary",
    "summarize_exposure",
    "random_guessing_baseline",
    "ASYMPTOTIC_BASELINES",
]

_TIES = ("average", "min", "max", "random")

#: random-guessing exposure as N (and m) grow: mean 1/ln 2, median 1, 75th percentile 2
ASYMPTOTIC_BASELINES = {"mean": 1.0 / math.log(2.0), "median": 1.0, "p75": 2.0}


def _as_1d(x: ArrayLike, name: str) -> np.ndarray:
    a = np.asarray(x, dtype=float).reshape(-1)
    if a.size == 0:
        raise ValueError(f"{name} must not be empty")
    if np.any(np.isnan(a)):
        raise ValueError(f"{name} contains NaN")
    return a


def ranks(canary_losses: ArrayLike, reference_losses: ArrayLike, ties: str = "average",
          rng: np.random.Generator | None = None) -> np.ndarray:
    """Rank of each canary among the references: ``1 + #{references with a smaller loss}``.

    Parameters
    ----------
    canary_losses : array_like, shape (m,)
    reference_losses : array_like, shape (N,)
    ties : {"average", "min", "max", "random"}
        How a reference with a loss equal to the canary's counts (module docstring).
    rng : numpy.random.Generator, optional
        Needed for ``ties="random"``.

    Returns
    -------
    ndarray of float, shape (m,)
        Ranks in ``[1, N + 1]`` (half-integers are possible with ``"average"``).
    """
    if ties not in _TIES:
        raise ValueError(f"ties must be one of {_TIES}, got {ties!r}")
    c = _as_1d(canary_losses, "canary_losses")
    r = np.sort(_as_1d(reference_losses, "reference_losses"))
    below = np.searchsorted(r, c, side="left").astype(float)
    equal = np.searchsorted(r, c, side="right") - below
    if ties == "min":
        smaller = below
    elif ties == "max":
        smaller = below + equal
    elif ties == "average":
        smaller = below + equal / 2.0
    else:
        if rng is None:
            raise ValueError("ties='random' needs rng (a seeded numpy Generator)")
        # the canary's position among the equal references is uniform on 0..equal
        smaller = below + np.floor(rng.random(c.size) * (equal + 1))
    return 1.0 + smaller


def exposure(canary_losses: ArrayLike, reference_losses: ArrayLike, ties: str = "average",
             rng: np.random.Generator | None = None) -> np.ndarray:
    """Exposure ``log2 N - log2 rank`` of each canary (Carlini et al. 2019, Definition 4).

    Parameters
    ----------
    canary_losses : array_like, shape (m,)
        Losses of the canaries (lower = more exposed).
    reference_losses : array_like, shape (N,)
        Losses of ``N`` reference (never inserted) candidates.
    ties, rng
        See :func:`ranks`.

    Returns
    -------
    ndarray, shape (m,)
        Between ``log2(N/(N+1))`` and ``log2 N``.

    Examples
    --------
    >>> exposure([0.0, 5.0], [1.0, 2.0, 3.0, 4.0]).round(6).tolist()
    [2.0, -0.321928]
    """
    n_ref = np.asarray(reference_losses).size
    rk = ranks(canary_losses, reference_losses, ties=ties, rng=rng)
    return cast(np.ndarray, np.log2(n_ref) - np.log2(rk))


def extrapolated_exposure(canary_losses: ArrayLike, reference_losses: ArrayLike,
                          distribution: str = "norm") -> np.ndarray:
    """Exposure extrapolated from a distribution fitted to the reference losses (model-based).

    ``-log2 F(loss)`` with ``F`` the CDF of a normal (``"norm"``) or skew-normal
    (``"skewnorm"``, as Carlini et al. 2019, §4.3) fitted by maximum likelihood
    to the references. It can exceed ``log2 N`` (it extrapolates into the tail),
    and it is **only as good as the fitted model**: it is an estimate, not a
    confidence bound, and it must not be turned into an epsilon lower bound.

    Parameters
    ----------
    canary_losses, reference_losses : array_like
    distribution : {"norm", "skewnorm"}

    Returns
    -------
    ndarray
        Model-based exposure of each canary (bits).
    """
    c = _as_1d(canary_losses, "canary_losses")
    r = _as_1d(reference_losses, "reference_losses")
    if r.size < 3 or np.ptp(r) == 0:
        raise ValueError("extrapolated exposure needs at least 3 reference losses that are not all equal")
    if distribution == "norm":
        logcdf = stats.norm(*stats.norm.fit(r)).logcdf(c)
    elif distribution == "skewnorm":
        logcdf = stats.skewnorm(*stats.skewnorm.fit(r)).logcdf(c)
    else:
        raise ValueError(f"distribution must be 'norm' or 'skewnorm', got {distribution!r}")
    return -np.asarray(logcdf) / math.log(2.0)


# --------------------------------------------------------------------------
# Random-guessing baselines
# --------------------------------------------------------------------------


def _rank_exposures(n_ref: int) -> np.ndarray:
    """Exposure of ranks 1..N+1 (decreasing)."""
    return cast(np.ndarray, math.log2(n_ref) - np.log2(np.arange(1, n_ref + 2, dtype=float)))


def _expected_order_statistics(n_ref: int, m: int, ks: ArrayLike) -> np.ndarray:
    """E of the k-th smallest of ``m`` iid random-guessing exposures (exact), for each k in ``ks``.

    Exposure is decreasing in the rank, so the k-th smallest exposure is the
    exposure of the k-th largest rank. With ``R`` uniform on ``1..N+1``,
    ``E[X_(k)] = sum_v v P(X_(k) = v)`` and ``P(X_(k) <= v)`` is a binomial tail.
    """
    e = _rank_exposures(n_ref)[::-1]  # increasing exposure: ranks N+1, ..., 1
    F = np.arange(1, n_ref + 2, dtype=float) / (n_ref + 1)  # P(X <= e_j)
    out = []
    for k in np.atleast_1d(ks):
        # P(X_(k) <= v) = P(Binom(m, F(v)) >= k) = I_F(k, m - k + 1)
        G = special.betainc(k, m - k + 1, F)
        pmf = np.diff(np.concatenate([[0.0], G]))
        out.append(float(np.dot(pmf, e)))
    return np.array(out)


def _expected_order_statistics_shared(n_ref: int, m: int, ks: ArrayLike) -> np.ndarray:
    """As :func:`_expected_order_statistics` when all canaries are ranked against the *same* references.

    With all ``m + N`` losses iid and continuous, the canaries sit at uniformly
    random positions among the references; the number ``T`` of references below
    the ``j``-th smallest canary loss is negative hypergeometric,
    ``P(T = t) = C(t + j - 1, j - 1) C(N - t + m - j, m - j) / C(N + m, m)``,
    and that canary's rank is ``1 + T``.
    """
    t = np.arange(0, n_ref + 1, dtype=float)
    e = math.log2(n_ref) - np.log2(1.0 + t)
    lg = special.gammaln
    out = []
    for k in np.atleast_1d(ks):
        j = m - int(k) + 1  # the k-th smallest exposure is the j-th smallest rank
        logp = (lg(t + j) - lg(j) - lg(t + 1)
                + lg(n_ref - t + m - j + 1) - lg(m - j + 1) - lg(n_ref - t + 1)
                - (lg(n_ref + m + 1) - lg(m + 1) - lg(n_ref + 1)))
        out.append(float(np.dot(np.exp(logp), e)))
    return np.array(out)


def random_guessing_baseline(n_references: int, statistic: str | float = "median", n_canaries: int | None = None,
                             shared_references: bool = True) -> float:
    """Exact exposure of random guessing with ``N`` references.

    Parameters
    ----------
    n_references : int
        ``N``; the rank of a canary is uniform on ``1..N+1``.
    statistic : {"mean", "median", "p75"} or float in (0, 1)
        The aggregate: the mean, the median, the 75th percentile or a quantile
        ``q`` of the canaries' exposures.
    n_canaries : int, optional
        ``m``. When given, the expected value of the *sample* statistic over
        ``m`` iid canaries (sample quantiles as :func:`numpy.quantile`, linear
        interpolation). When omitted, the statistic of the distribution of one
        canary's exposure (the mean is the same in both cases).
    shared_references : bool, default True
        With ``n_canaries``: all canaries are ranked against the same ``N``
        references (a canary experiment), so their ranks are dependent; with
        False, each canary has its own references (independent ranks).

    Returns
    -------
    float
        Tends to :data:`ASYMPTOTIC_BASELINES` (``1/ln 2``, 1, 2) as ``N`` and
        ``m`` grow.

    Examples
    --------
    >>> round(random_guessing_baseline(2**20, "mean"), 3)
    1.443
    >>> round(random_guessing_baseline(2**20, "median", n_canaries=1001), 2)
    1.0
    """
    N = int(n_references)
    if N < 1:
        raise ValueError(f"n_references must be >= 1, got {n_references!r}")
    q = {"median": 0.5, "p75": 0.75}.get(statistic, statistic) if isinstance(statistic, str) else float(statistic)
    if statistic == "mean":
        # (1/(N+1)) sum_{i=1}^{N+1} (log2 N - log2 i) = log2 N - log2((N+1)!)/(N+1)
        return float(math.log2(N) - special.gammaln(N + 2) / math.log(2.0) / (N + 1))
    if isinstance(q, str) or not (0.0 < q < 1.0):
        raise ValueError(f"statistic must be 'mean', 'median', 'p75' or a quantile in (0, 1), got {statistic!r}")
    if n_canaries is None:
        # population quantile of the exposure: the smallest e with P(X <= e) >= q
        e = _rank_exposures(N)[::-1]
        F = np.arange(1, N + 2, dtype=float) / (N + 1)
        return float(e[np.searchsorted(F, q - 1e-12, side="left")])
    m = int(n_canaries)
    if m < 1:
        raise ValueError(f"n_canaries must be >= 1, got {n_canaries!r}")
    # numpy's linear quantile: position h = (m - 1) q (0-based) between order statistics
    h = (m - 1) * q
    lo = int(math.floor(h))
    frac = h - lo
    ks = [lo + 1] if frac == 0 or lo + 1 >= m else [lo + 1, lo + 2]
    fn = _expected_order_statistics_shared if shared_references else _expected_order_statistics
    vals = fn(N, m, ks)
    return float(vals[0] if len(vals) == 1 else (1 - frac) * vals[0] + frac * vals[1])


@dataclass(frozen=True)
class ExposureSummary:
    """Aggregates of canary exposures next to their random-guessing baselines.

    Attributes
    ----------
    n_canaries, n_references : int
    mean, median, p75, max : float
        Observed aggregates.
    baseline_mean, baseline_median, baseline_p75 : float
        Exact random-guessing values for these ``N`` and ``m``.
    """

    n_canaries: int
    n_references: int
    mean: float
    median: float
    p75: float
    max: float
    baseline_mean: float
    baseline_median: float
    baseline_p75: float

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def summarize_exposure(exposures: ArrayLike, n_references: int) -> ExposureSummary:
    """Mean, median, 75th percentile and maximum of exposures, each with its random-guessing baseline."""
    e = _as_1d(exposures, "exposures")
    m = e.size
    return ExposureSummary(
        n_canaries=m, n_references=int(n_references), mean=float(e.mean()), median=float(np.median(e)),
        p75=float(np.quantile(e, 0.75)), max=float(e.max()),
        baseline_mean=random_guessing_baseline(n_references, "mean"),
        baseline_median=random_guessing_baseline(n_references, "median", n_canaries=m),
        baseline_p75=random_guessing_baseline(n_references, "p75", n_canaries=m),
    )
