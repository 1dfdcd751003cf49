"""Differentially private simple linear regression (Alabi, McMillan, Sarathy, Smith, Vadhan 2020).

For instances with one regressor besides the intercept (``d = 2``); others
are declined without spending budget (a decline is a result). The slope is
the coefficient of interest.

``noisystats``
    NoisyStats: Laplace noise on ``ncov(x, y)`` and ``nvar(x)`` of the data
    rescaled to ``[0, 1]``; slope = ratio; declines when the noisy variance
    is not positive (the paper returns "bottom").
``theilsen_match`` / ``theilsen_wide``
    DP Theil-Sen on ``k`` random perfect matchings (default 1, the paper's
    "Match" variant): slopes of matched pairs, private median by the
    exponential mechanism (Smith) or its widened version.

Bounds for ``x`` and ``y`` come from the instance's public facts when given;
otherwise a private range is found (tie-robust grid quantiles, budget spent).
The ``*_databounds`` variants read the range from the data (as experiments
that assume known bounds do) and are of class ``data-bounds`` (not DP).

All are pure ``epsilon``-DP under replace-one neighbours (``delta`` unused).
"""

from __future__ import annotations

from typing import Any, ClassVar, cast

import numpy as np

from dpstats.algorithms.base import Algorithm, Decline, Outcome, Param, PublicFacts, TaskData
from dpstats.algorithms.registry import register
from dpstats.algorithms.sce._utils import (
    private_interval,
    private_median_interval,
    private_widened_median,
    symmetric_grid,
)
from dpstats.privacy.accounting import PureAccountant

__all__ = [
    "NoisyStats",
    "NoisyStatsDataBounds",
    "TheilSenMatch",
    "TheilSenWide",
    "TheilSenDataBounds",
    "ncov_sensitivity",
    "matched_slopes",
]

_CITATION = (
    "Alabi, D., McMillan, A., Sarathy, J., Smith, A. and Vadhan, S. (2020). Differentially private simple "
    "linear regression. Proceedings on Privacy Enhancing Technologies 2022(2)."
)


def ncov_sensitivity(n: int) -> float:
    """Replace-one sensitivity of ``sum (x - xbar)(y - ybar)`` and of ``sum (x - xbar)^2`` on ``[0, 1]`` data: ``1 - 1/n``."""
    return 1.0 - 1.0 / n


def _simple_columns(facts: Any, d: int) -> tuple[int, int] | None:
    """(intercept index, regressor index) when the design is intercept + one regressor."""
    if d != 2 or getattr(facts, "weighted", False):
        return None
    j = facts.coef_index
    other = 1 - j
    name = facts.columns[other]
    b = facts.bounds.get(name)
    if name == "Intercept" or (b is not None and float(b[0]) == 1.0 and float(b[1]) == 1.0):
        return other, j
    return None


def _bounds(
    values: np.ndarray, public: tuple[float, float] | None, acc: PureAccountant, eps_each: float,
    rng: np.random.Generator, name: str, data_bounds: bool,
) -> tuple[float, float]:
    if data_bounds:
        lo, hi = float(np.min(values)), float(np.max(values))
        return (lo, hi) if hi > lo else (lo - 0.5, hi + 0.5)
    if public is not None and np.isfinite(public[0]) and np.isfinite(public[1]) and public[1] > public[0]:
        return float(public[0]), float(public[1])
    return private_interval(
        values, 0.05, 0.95, eps_each, rng, symmetric_grid(), widen=0.5, acc=acc,
        mechanisms=(f"grid quantile (range of {name}, low)", f"grid quantile (range of {name}, high)"),
    )


def _n_private_ranges(facts: Any) -> int:
    out = 0
    for name in (facts.columns[facts.coef_index], facts.outcome):
        b = facts.bounds.get(name)
        if not (b is not None and np.isfinite(b[0]) and np.isfinite(b[1]) and b[1] > b[0]):
            out += 1
    return out


#: the bounds the data are rescaled with (variants with private or public bounds)
_BOUNDS_DETAILS = {
    "x_bounds": "paid statistic: `grid quantile (range of x` (low and high), or the public bounds of x when the "
                "facts give them",
    "y_bounds": "paid statistic: `grid quantile (range of y` (low and high), or the public bounds of y when the "
                "facts give them",
}
_NOISYSTATS_SCALE = {"laplace_scale": "public fact: (1 - 1/n) / (eps / 2), eps what the ranges leave of the budget"}


class _SimpleRegression(Algorithm):
    """Shared set-up: check the design, find the bounds, rescale to [0, 1]."""

    data_bounds = False

    def _setup(
        self, data: TaskData, facts: PublicFacts, epsilon: float, delta: float, rng: np.random.Generator,
    ) -> tuple[PureAccountant, np.ndarray, np.ndarray, float, float, dict[str, Any]] | None:
        cols = _simple_columns(facts, data.d)
        if cols is None:
            return None
        _, j = cols
        acc = PureAccountant(epsilon, delta)
        k_priv = 0 if self.data_bounds else _n_private_ranges(facts)
        eps_range = epsilon * self.params["range_share"] if k_priv else 0.0
        eps_each = eps_range / (2 * k_priv) if k_priv else 0.0
        x, y = data.X[:, j], cast(np.ndarray, data.y)  # sce data carry y
        bx = _bounds(x, facts.bounds.get(facts.columns[j]), acc, eps_each, rng, "x", self.data_bounds)
        by = _bounds(y, facts.outcome_bounds(), acc, eps_each, rng, "y", self.data_bounds)
        xs = (np.clip(x, *bx) - bx[0]) / (bx[1] - bx[0])
        ys = (np.clip(y, *by) - by[0]) / (by[1] - by[0])
        unit = (by[1] - by[0]) / (bx[1] - bx[0])
        # data-bounds variants read the bounds from the data without privacy: not reported
        det: dict[str, Any] = {} if self.data_bounds else {"x_bounds": bx, "y_bounds": by}
        return acc, xs, ys, unit, epsilon - eps_range, det


def _decline_d(self_: Algorithm, data: TaskData) -> Decline:
    return self_.decline(
        f"{self_.name} needs one regressor and an intercept (d = 2, unweighted); this design has d = {data.d}"
    )


class _NoisyStatsBase(_SimpleRegression):
    def _run(
        self, data: TaskData, facts: PublicFacts, epsilon: float, delta: float, rng: np.random.Generator,
    ) -> Outcome:
        setup = self._setup(data, facts, epsilon, delta, rng)
        if setup is None:
            return _decline_d(self, data)
        acc, xs, ys, unit, eps, det = setup
        n = xs.size
        xc = xs - xs.mean()
        ncov = float(xc @ (ys - ys.mean()))
        nvar = float(xc @ xc)
        sens = ncov_sensitivity(n)
        e_each = eps / 2.0
        note = f"sensitivity 1 - 1/n = {sens:.6g}"
        ncov_noisy = acc.laplace("Laplace ncov(x, y)", ncov, sensitivity=sens, epsilon=e_each, rng=rng, note=note)
        nvar_noisy = acc.laplace("Laplace nvar(x)", nvar, sensitivity=sens, epsilon=e_each, rng=rng, note=note)
        det["laplace_scale"] = sens / e_each
        if nvar_noisy <= 0:
            return self.decline("noisy nvar(x) is not positive (NoisyStats returns bottom)", acc, **det)
        slope = ncov_noisy / nvar_noisy
        return self.release(slope * unit, acc, **det)


@register
class NoisyStats(_NoisyStatsBase):
    """NoisyStats (Alabi et al. 2020, Algorithm 2) for the slope.

    Privacy: after rescaling to ``[0, 1]`` with public or privately found
    bounds, ``ncov`` and ``nvar`` each have replace-one sensitivity
    ``1 - 1/n`` and get Laplace noise at ``epsilon/2`` each (the paper spends
    a third on the intercept, which sce does not release). Private ranges
    spend ``range_share * epsilon`` first.
    """

    name = "noisystats"
    task = "sce"
    citation = _CITATION
    interpretation = "standard"
    summary = "NoisyStats: Laplace-perturbed ncov and nvar of [0,1]-rescaled data (d = 2 only)"
    defaults = {
        "range_share": Param(0.2, "share of epsilon for private ranges when bounds are not public (our choice)"),
    }
    public_details = {**_BOUNDS_DETAILS, **_NOISYSTATS_SCALE}


@register
class NoisyStatsDataBounds(_NoisyStatsBase):
    """NoisyStats with the range of ``x`` and ``y`` read from the data (class data-bounds, not DP)."""

    name = "noisystats_databounds"
    task = "sce"
    citation = _CITATION
    interpretation = "data-bounds"
    summary = "NoisyStats with data min/max as bounds (not DP; comparison only)"
    defaults = {"range_share": Param(0.0, "unused: bounds come from the data")}
    data_bounds = True
    public_details = dict(_NOISYSTATS_SCALE)


def matched_slopes(x: np.ndarray, y: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """Slopes of the pairs of ``k`` random perfect matchings (pairs with equal ``x`` are dropped).

    Each point lies in at most ``k`` pairs, so replacing one point changes,
    adds or removes at most ``k`` slopes.
    """
    n = x.size
    out = []
    for _ in range(k):
        perm = rng.permutation(n)
        p, q = perm[0 : n - 1 : 2], perm[1:n:2]
        dx = x[q] - x[p]
        ok = dx != 0
        out.append((y[q][ok] - y[p][ok]) / dx[ok])
    return np.concatenate(out) if out else np.zeros(0)


class _TheilSenBase(_SimpleRegression):
    widened = False
    public_details = dict(_BOUNDS_DETAILS)

    def _run(
        self, data: TaskData, facts: PublicFacts, epsilon: float, delta: float, rng: np.random.Generator,
    ) -> Outcome:
        setup = self._setup(data, facts, epsilon, delta, rng)
        if setup is None:
            return _decline_d(self, data)
        acc, xs, ys, unit, eps, det = setup
        k = int(self.params["matchings"])
        slopes = matched_slopes(xs, ys, k, rng)
        lo, hi = self.params["slope_bound"]
        # one point changes at most k slopes; each changes the median score by at most 1
        note = f"{k} matching(s): score sensitivity {k}"
        if self.widened:
            s = private_widened_median(
                slopes, lo, hi, self.params["width"], eps, rng, acc=acc,
                mechanism="widened exponential-mechanism median of slopes", sensitivity=float(k), note=note,
            )
        else:
            s = private_median_interval(
                slopes, lo, hi, eps, rng, acc=acc, mechanism="exponential-mechanism median of slopes",
                sensitivity=float(k), note=note,
            )
        # the number of pairs with distinct x is a data statistic: never reported
        return self.release(s * unit, acc, **det)


_TS_DEFAULTS = {
    "matchings": Param(1, "one random perfect matching: the paper's 'Match' variant"),
    "slope_bound": Param((-50.0, 50.0), "slope range in [0,1]-rescaled units, as the authors' code (min/max_slope)"),
    "range_share": Param(0.2, "share of epsilon for private ranges when bounds are not public (our choice)"),
}


@register
class TheilSenMatch(_TheilSenBase):
    """DP Theil-Sen on random matchings with an exponential-mechanism median (Alabi et al. 2020).

    Privacy: slopes of ``k`` matchings; one point changes at most ``k`` of
    them; Smith's median score (count-robust) then has sensitivity ``k``, so
    the median runs at ``epsilon / k``. Pure DP.
    """

    name = "theilsen_match"
    task = "sce"
    citation = _CITATION
    interpretation = "standard"
    summary = "DP Theil-Sen: exponential-mechanism median of matched-pair slopes (d = 2 only)"
    defaults = dict(_TS_DEFAULTS)


@register
class TheilSenWide(_TheilSenBase):
    """DP Theil-Sen with the widened exponential-mechanism median (Alabi et al. 2020)."""

    name = "theilsen_wide"
    task = "sce"
    citation = _CITATION
    interpretation = "standard"
    summary = "DP Theil-Sen with a widened private median of matched-pair slopes (d = 2 only)"
    defaults = {**_TS_DEFAULTS, "width": Param(0.01, "widening in [0,1]-rescaled units, the authors' code default")}
    widened = True


@register
class TheilSenDataBounds(_TheilSenBase):
    """DP Theil-Sen (matching, exponential mechanism) with data min/max as bounds (class data-bounds)."""

    name = "theilsen_databounds"
    task = "sce"
    citation = _CITATION
    interpretation = "data-bounds"
    summary = "DP Theil-Sen with data min/max as bounds (not DP; comparison only)"
    defaults = {**_TS_DEFAULTS, "range_share": Param(0.0, "unused: bounds come from the data")}
    data_bounds = True
    public_details: ClassVar[dict[str, str]] = {}  # the bounds come from the data: not reported

