"""Post-processing pieces of fwl_score's release and interval (released values and public facts only).

See ``docs/algorithms/sce/fwl_score.md`` (*Interval*, *Clip widening*,
*Shrinkage*): the shrinkage of the estimate, the widening of the ``|u|`` clip,
what the interval's sampling part accounts for, and the sandwich standard
error.
"""

from __future__ import annotations

import math
from typing import Any

from scipy import stats

__all__ = ["clip_widening", "clustered_on", "sampling_error", "score_std_error", "shrunk"]


def shrunk(est: float, noise_sd: float, k: float) -> float:
    """Positive-part shrinkage of ``est`` towards 0 by its privacy-noise z-score: ``est max(0, 1 - k sd^2 / est^2)``.

    Post-processing of the released estimate and its noise standard deviation; ``est = 0`` stays 0.
    """
    return est if est == 0.0 else est * max(0.0, 1.0 - k * noise_sd**2 / est**2)


def clip_widening(q: float, beyond: float) -> float:
    """Factor taking a ``|u|`` clip at the ``q`` quantile to one with a share ``beyond`` of rows above it (Gaussian tails).

    ``Phi^{-1}(1 - beyond / 2) / Phi^{-1}(1 - (1 - q) / 2)``, at least 1; 1 when
    ``beyond`` is 0. The exponential mechanism can only locate a quantile
    with about ``kappa / epsilon`` rows above it, so at small ``epsilon n``
    the clip sits low in the bulk of ``|u|`` and the clipped score estimates
    a different weighted slope than least squares (a clipping bias that the
    interval does not see). Post-processing of the released quantile with
    public ``q`` (from ``n``, ``epsilon`` and ``kappa``).
    """
    if beyond <= 0.0 or 1.0 - q <= beyond:
        return 1.0
    return float(stats.norm.ppf(1.0 - beyond / 2.0) / stats.norm.ppf(1.0 - (1.0 - q) / 2.0))


def clustered_on(facts: Any, block: list[int]) -> bool:
    """Whether the sampling clusters are the levels of the absorbed term (public: names only).

    True when ``facts.cluster`` names the variable of the absorbed block
    (columns ``C(<cluster>)[T.<level>]`` or ``C(<cluster>, ...)[T.<level>]``).
    """
    cl = getattr(facts, "cluster", None)
    if not cl or not block:
        return False
    term = facts.columns[block[0]].split("[T.", 1)[0]
    return term in (cl, f"C({cl})") or term.startswith(f"C({cl},")


def sampling_error(facts: Any, within: bool, J: int, kind: str = "levels", labelled: bool = False,
                   singletons: bool = False) -> str:
    """What the interval's sampling part accounts for (public: the design's names, whether the data hold the
    cluster labels, the released count of clusters and the method's settings)."""
    if singletons:
        base = "classical, within the absorbed groups" if within else "HC0"
        return f"cluster-robust: the clusters ({facts.cluster}) hold about one row each; {base} over the rows"
    if labelled and not J:
        return f"cluster-robust: too few clusters ({facts.cluster}) for a delete-a-group jackknife"
    if J and kind == "levels":
        return (f"cluster-robust: delete-a-group jackknife over {J} groups of the absorbed levels (clusters "
                f"{facts.cluster})")
    if J:
        return f"cluster-robust: delete-a-group jackknife over {J} groups of the clusters ({facts.cluster})"
    base = "classical, within the absorbed groups" if within else "HC0"
    cl = getattr(facts, "cluster", None)
    return base if not cl else f"{base}; not the clustering by {cl}"


def score_std_error(Q: float, sig_Q: float, T: float, T_raw: float, sig_T: float, noise_sd: float,
                    unit: float, guard: float = 3.0) -> float:
    """Sandwich standard error of ``theta0 + S / T`` from released values only (post-processing).

    Sampling part: the heteroskedasticity-robust (HC0) sandwich
    ``sum u_i^2 v_i^2 / (sum u_i^2)^2`` with the released ``Q`` (plus one
    noise standard deviation ``sig_Q``, so the noisy variance errs wide) and
    ``T``; privacy part: ``noise_sd``, the delta-method standard deviation of
    ``S / T`` under the noise of ``S`` and ``T``. Infinite when the released
    ``T`` is within ``guard`` noise standard deviations of 0: the denominator
    is then noise and the release cannot localise the coefficient.
    """
    if not (T_raw > guard * sig_T):
        return math.inf
    samp = max(Q, 0.0) + sig_Q
    return float(math.sqrt(samp / T**2 * unit**2 + noise_sd**2))
