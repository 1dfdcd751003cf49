"""Subsample and aggregate (Nissim, Raskhodnikova and Smith 2007; Smith 2011): private medians of block OLS.

``sa_median`` (standard)

1. Standardise the columns privately (as in ``adassp_std``; centring matters
   here because coordinate-wise medians do not keep the correlation between
   the intercept and the slopes).
2. Split the rows at random into ``m`` disjoint blocks and fit OLS of ``u`` on
   ``z`` in each (unclipped; OLS needs no bounds).
3. For each coordinate ``j``, release a private median of the ``m`` block
   estimates with the tie-robust grid exponential mechanism on the public
   signed grid (no range needed). Each coordinate gets ``1/d`` of the
   remaining zCDP budget.
4. Map the medians back to the raw columns.

*Singular blocks.* With many dummy columns a block often has a column that is
constant or collinear within it, and its coefficient is not identified there.
Such a block contributes, for that coordinate only, ``-inf`` if its index is
even and ``+inf`` if odd: it counts as one value below (or above) every
candidate, so unidentified blocks split evenly around the median of the
identified ones and cannot drag it, while the other coordinates of the block
are still used.

*Privacy.* The partition is drawn from the rng, independently of the data.
Replacing one row changes one block, hence at most one of the ``m`` values
of each coordinate (whatever it becomes, including ``+-inf``), so each
coordinate's grid score has sensitivity 1 under replace-one and its
exponential mechanism is ``eps_j``-DP and ``eps_j``-bounded-range
(``eps_j^2/8``-zCDP). The ``d`` medians compose in zCDP.
"""

from __future__ import annotations

from typing import cast

import numpy as np

from dpstats.algorithms.base import Algorithm, Outcome, Param, PublicFacts, TaskData
from dpstats.algorithms.linreg._basis import BASIS_DETAILS, Structure, enforce_structure, private_basis
from dpstats.algorithms.linreg._private_ranges import SIGNED_GRID, private_median_midpoint
from dpstats.algorithms.linreg._ssp import block_ols
from dpstats.algorithms.registry import coefficient_of, register
from dpstats.privacy.accounting import ZCDPAccountant, em_epsilon

__all__ = ["SubsampleAggregateMedian", "block_estimates"]

_CITATION = (
    "Nissim, K., Raskhodnikova, S. and Smith, A. (2007). Smooth sensitivity and sampling in private data "
    "analysis. STOC 2007; Smith, A. (2011). Privacy-preserving statistical estimation with optimal convergence "
    "rates. STOC 2011; Dwork, C. and Smith, A. (2009). Differential privacy for statistics: what we know and "
    "what we want to learn. J. Privacy and Confidentiality."
)


def block_estimates(Z: np.ndarray, u: np.ndarray, m: int, rng: np.random.Generator) -> np.ndarray:
    """OLS of ``u`` on ``Z`` in ``m`` disjoint random blocks of ``floor(n/m)`` rows.

    Unidentified coordinates are ``-inf`` in even blocks and ``+inf`` in odd
    ones (see the module docstring). The ``n - m floor(n/m)`` leftover rows
    are not used.
    """
    n, d = Z.shape
    b = n // m
    blocks = rng.permutation(n)[: m * b].reshape(m, b)
    coef, unident = block_ols(Z, u, blocks)
    sign = np.where(np.arange(m) % 2 == 0, -np.inf, np.inf)[:, None]
    return np.where(unident, sign, coef)


@register
class SubsampleAggregateMedian(Algorithm):
    """Coordinate-wise private median of block OLS estimates in a privately standardised basis (standard)."""

    name = "sa_median"
    task = "linreg"
    citation = _CITATION
    interpretation = "standard"
    summary = "subsample and aggregate: private coordinate-wise median of OLS on disjoint blocks"
    defaults = {
        "block_rows": Param(None, "ours: None = max(2d, d + 10) rows per block, enough to identify most coefficients"),
        "range_fraction": Param(0.1, "ours: a tenth of the budget for the private column ranges"),
    }
    public_details = {**BASIS_DETAILS, "m": "public fact: number of blocks, n // block rows"}

    def _run(self, data: TaskData, facts: PublicFacts, epsilon: float, delta: float,
             rng: np.random.Generator) -> Outcome:
        X, y = data.X, cast(np.ndarray, data.y)
        n, d = X.shape
        acc = ZCDPAccountant(epsilon, delta)
        S = Structure.from_facts(facts, d)
        Xe = enforce_structure(X, S)
        need = S.free.size > 0 or S.y_bounds is None
        rho_r = self.params["range_fraction"] * acc.rho if need else 0.0
        basis = private_basis(Xe, y, S, acc, rho_r, rng)
        Z = basis.transform(Xe)
        u = basis.transform_y(y)
        b = self.params["block_rows"] or max(2 * d, d + 10)
        m = max(1, n // int(b))
        est = block_estimates(Z, u, m, rng)
        theta = np.empty(d)
        for j in range(d):
            # equal shares; the last takes exactly what is left
            eps_j = em_epsilon(acc.remaining / (d - j), bound="bounded_range")
            theta[j] = private_median_midpoint(est[:, j], SIGNED_GRID, acc, f"median of coordinate {j}", eps_j, rng,
                                               note="m block values, replace-one sensitivity 1")
        return self.release(basis.coef_to_raw(theta), acc, m=m, **basis.details)


coefficient_of(SubsampleAggregateMedian)
