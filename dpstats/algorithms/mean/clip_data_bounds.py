"""Gaussian mean with clipping bounds read from the data (class ``data-bounds``, not DP).

Many published implementations clip each column to ``[min x_j, max x_j]``
computed on the private data and then add noise calibrated to that range.
The noise calibration is right *given* the bounds, but the bounds themselves
are released without privacy (the noise scale reveals the range of every
column), so the whole is not differentially private. We run it for
comparison only: it shows what the Gaussian mechanism achieves when the range
is known exactly.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from dpstats.algorithms.base import Algorithm, Param, PublicFacts, Release, TaskData
from dpstats.algorithms.mean._utils import clipped_mean
from dpstats.algorithms.registry import register
from dpstats.privacy.accounting import GDPAccountant

__all__ = ["ClipDataBounds"]


@register
class ClipDataBounds(Algorithm):
    """Clipped Gaussian mean with per-column bounds ``[min, max]`` taken from the data.

    Algorithm
    ---------
    ``lo_j = min_i x_ij``, ``hi_j = max_i x_ij`` (not private). The clipped
    mean has replace-one L2 sensitivity ``||hi - lo||_2 / n``; the release is
    ``mean(X) + N(0, sigma^2 I)`` with ``sigma = ||hi - lo||_2 / (n mu)`` and
    ``mu = gdp_mu(epsilon, delta)``, i.e. the analytic Gaussian mechanism.
    Conditional on the bounds, this is ``(epsilon, delta)``-DP; the bounds are
    not, hence the class ``data-bounds``.
    """

    name = "clip_data_bounds"
    task = "mean"
    citation = "Dwork, McSherry, Nissim, Smith (2006), Gaussian mechanism with data-derived bounds"
    interpretation = "data-bounds"
    summary = "Gaussian mechanism on the mean with per-column [min, max] read from the data (not DP)"
    defaults = {
        "widen": Param(0.0, "ours: relative widening of the data range (0 keeps [min, max])"),
    }
    public_details: ClassVar[dict[str, str]] = {}  # the bounds are read from the data: no details

    def _run(self, data: TaskData, facts: PublicFacts, epsilon: float, delta: float,
             rng: np.random.Generator) -> Release:
        X = data.X
        n, d = X.shape
        acc = GDPAccountant(epsilon, delta)
        lo, hi = X.min(axis=0), X.max(axis=0)
        pad = float(self.params["widen"]) * (hi - lo) / 2.0
        lo, hi = lo - pad, hi + pad
        # a constant data set has sensitivity 0; a tiny floor keeps the ledger uniform
        sens = max(float(np.linalg.norm(hi - lo)) / n, np.finfo(float).tiny)
        mean = clipped_mean(X, lo, hi)
        sigma = acc.gaussian_sigma(sens, fraction=1.0)
        est = acc.gaussian("gaussian mean", mean, sensitivity=sens, sigma=sigma, rng=rng,
                           note="L2 sensitivity ||max-min||/n (replace-one)")
        # lo, hi are the data's exact minima and maxima and sigma a function of them: no details
        return self.release(est, acc)
