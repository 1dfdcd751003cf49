"""Distinguishing statistics: which releases came from the data set with the canary?

Every run of the algorithm ends in one of six *kinds*: a release (a vector),
a decline, an error (an exception, a non-finite estimate, or a worker process
that died), a time-out or a memory overrun (the run exceeded the benchmark's
per-run limit, :class:`~dpstats.bench.sandbox.Limits`), or a fallback (a release
that says it is not an estimate: ``details["fallback"]``, such as 0 after a
failed private standardisation or the prior centre). Each kind other than a
release is an output like any other: an algorithm that declines, falls back,
fails or runs out of time more often on one neighbour than on the other leaks
through that alone.

A :class:`Statistic` maps each run to a real score, higher meaning "looks like
the neighbour with the canary". It is *fitted on one part of the runs* and
applied to others, so that the bounds computed on held-out runs stay valid
(DP-Sniper, Bichsel et al. 2021, trains its classifier the same way):

1. each coordinate of the released vectors is mapped to normal scores through
   the pooled empirical CDF of the fitting runs (robust to heavy tails and to
   the scale of the estimate);
2. ``"lda"``: a projection on ``Sigma^-1 (m_in - m_out)`` (pooled covariance),
   the optimal test between two Gaussians with a common covariance: a
   threshold on a projection;
3. ``"qda"``: the log-likelihood ratio of two Gaussians with their own
   covariances, a classifier that also sees a change of spread (noise scaled
   to data-dependent bounds);
4. a decline, an error, a time-out, a memory overrun or a fallback scores ``+inf`` if
   that kind was more frequent among the fitting runs with the canary, ``-inf``
   if less frequent, and the median release score if equally frequent.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import cast

import numpy as np
from scipy import special

__all__ = ["RELEASED", "DECLINED", "ERROR", "TIMEOUT", "MEMORY", "FALLBACK", "KINDS", "OTHER_KINDS", "KIND_NAMES", "Runs",
           "Statistic", "fit_statistic", "STATISTICS"]

RELEASED, DECLINED, ERROR, TIMEOUT, MEMORY, FALLBACK = 0, 1, 2, 3, 4, 5
KINDS = (RELEASED, DECLINED, ERROR, TIMEOUT, MEMORY, FALLBACK)
#: the kinds of run without an estimate: each is scored as a category
OTHER_KINDS = (DECLINED, ERROR, TIMEOUT, MEMORY, FALLBACK)
KIND_NAMES = {RELEASED: "released", DECLINED: "declined", ERROR: "error", TIMEOUT: "timeout", MEMORY: "memory",
              FALLBACK: "fallback"}
STATISTICS = ("lda", "qda")
_RIDGE = 1e-6


@dataclass(frozen=True)
class Runs:
    """Outputs of runs: ``values`` (k, p) with NaN rows where nothing was released, and ``kind`` (k,)."""

    values: np.ndarray
    kind: np.ndarray

    def __len__(self) -> int:
        return int(self.kind.size)

    def take(self, idx: np.ndarray) -> Runs:
        return Runs(self.values[idx], self.kind[idx])


def _normal_scores(sorted_ref: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Map values to normal scores by the (mid-rank) empirical CDF of ``sorted_ref``."""
    n = sorted_ref.size
    lo = np.searchsorted(sorted_ref, v, side="left")
    hi = np.searchsorted(sorted_ref, v, side="right")
    u = (0.5 * (lo + hi) + 0.5) / (n + 1.0)
    return cast(np.ndarray, special.ndtri(u))


@dataclass
class Statistic:
    """A fitted distinguishing statistic (see the module docstring)."""

    kind: str
    refs: list[np.ndarray] = field(default_factory=list)
    w: np.ndarray | None = None
    m_in: np.ndarray | None = None
    m_out: np.ndarray | None = None
    p_in: np.ndarray | None = None
    p_out: np.ndarray | None = None
    logdet_diff: float = 0.0
    category_scores: dict[int, float] = field(default_factory=dict)

    def _z(self, values: np.ndarray) -> np.ndarray:
        if not self.refs:
            return np.zeros((values.shape[0], 0))
        return np.column_stack([_normal_scores(r, values[:, j]) for j, r in enumerate(self.refs)])

    def _release_scores(self, values: np.ndarray) -> np.ndarray:
        if values.shape[0] == 0:
            return np.zeros(0)
        z = self._z(values)
        if self.w is None:
            return np.zeros(values.shape[0])
        if self.kind == "lda":
            return cast(np.ndarray, z @ self.w)
        a = z - self.m_in
        b = z - self.m_out
        # the qda fit sets p_in and p_out together with w
        p_in, p_out = cast(np.ndarray, self.p_in), cast(np.ndarray, self.p_out)
        return cast(np.ndarray, 0.5 * (np.einsum("ij,jk,ik->i", b, p_out, b) - np.einsum("ij,jk,ik->i", a, p_in, a))
                    - 0.5 * self.logdet_diff)

    def score(self, runs: Runs) -> np.ndarray:
        """Scores of ``runs`` (higher = "with the canary")."""
        out = np.empty(len(runs))
        rel = runs.kind == RELEASED
        out[rel] = self._release_scores(runs.values[rel])
        for k in OTHER_KINDS:
            out[runs.kind == k] = self.category_scores.get(k, 0.0)
        return out


def fit_statistic(fit_in: Runs, fit_out: Runs, kind: str = "lda") -> Statistic:
    """Fit a :class:`Statistic` on runs with (``fit_in``) and without (``fit_out``) the canary."""
    if kind not in STATISTICS:
        raise ValueError(f"statistic must be one of {STATISTICS}, got {kind!r}")
    st = Statistic(kind)
    ri, ro = fit_in.kind == RELEASED, fit_out.kind == RELEASED
    vi, vo = fit_in.values[ri], fit_out.values[ro]
    if vi.shape[0] >= 2 and vo.shape[0] >= 2:
        pooled = np.vstack([vi, vo])
        st.refs = [np.sort(pooled[:, j]) for j in range(pooled.shape[1])]
        zi, zo = st._z(vi), st._z(vo)
        mi, mo = zi.mean(axis=0), zo.mean(axis=0)
        p = zi.shape[1]
        if kind == "lda":
            S = 0.5 * (np.cov(zi, rowvar=False).reshape(p, p) + np.cov(zo, rowvar=False).reshape(p, p))
            st.w = np.linalg.solve(S + _RIDGE * np.eye(p) * max(np.trace(S) / p, 1.0), mi - mo)
        else:
            Si = np.cov(zi, rowvar=False).reshape(p, p) + 1e-3 * np.eye(p)
            So = np.cov(zo, rowvar=False).reshape(p, p) + 1e-3 * np.eye(p)
            st.w = np.ones(p)
            st.m_in, st.m_out = mi, mo
            st.p_in, st.p_out = np.linalg.inv(Si), np.linalg.inv(So)
            st.logdet_diff = float(np.linalg.slogdet(Si)[1] - np.linalg.slogdet(So)[1])
        base = st._release_scores(np.vstack([vi, vo]))
        neutral = float(np.median(base))
    else:
        neutral = 0.0
    for k in OTHER_KINDS:
        a = float(np.mean(fit_in.kind == k)) if len(fit_in) else 0.0
        b = float(np.mean(fit_out.kind == k)) if len(fit_out) else 0.0
        st.category_scores[k] = np.inf if a > b else (-np.inf if a < b else neutral)
    return st
