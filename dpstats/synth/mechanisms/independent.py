"""The Independent baseline: noisy 1-way marginals, sampled independently.

Privacy argument
----------------
Neighbours replace one row; ``n`` and the domain are public. For column ``j``
with ``k_j`` cells, the count vector ``c_j`` changes in at most two cells, by
``-1`` and ``+1``: L2 sensitivity ``sqrt(2)``. Releasing ``c_j + N(0,
sigma_j^2 I)`` is ``rho_j = 2 / (2 sigma_j^2) = 1 / sigma_j^2``-zCDP (Bun and
Steinke 2016, Prop. 1.6). With ``rho_j = rho / d`` for each of the ``d``
columns the releases compose to ``rho``-zCDP (Lemma 2.3), where ``rho`` is
the remaining budget, converted from (epsilon, delta) by
:func:`dpstats.privacy.accounting.zcdp_rho`. Clipping negative counts to zero,
normalising, and sampling each column independently from its normalised
noisy marginal only post-process the releases.
"""

from __future__ import annotations

import math

import numpy as np

from dpstats.privacy.accounting import Accountant, ZCDPAccountant
from dpstats.synth.base import DiscreteData, Synthesizer

__all__ = ["Independent", "noisy_probabilities"]


def noisy_probabilities(counts: np.ndarray) -> np.ndarray:
    """Post-process noisy counts into probabilities: clip at 0, normalise (uniform if all 0)."""
    p = np.clip(np.asarray(counts, dtype=float), 0.0, None)
    total = p.sum()
    if not np.isfinite(total) or total <= 0:
        return np.full(p.size, 1.0 / p.size)
    out: np.ndarray = p / total
    return out


class Independent(Synthesizer):
    """Noisy 1-way marginals (Gaussian mechanism, zCDP), each column sampled independently.

    Examples
    --------
    >>> import numpy as np
    >>> from dpstats.synth.base import DiscreteData, Domain
    >>> data = DiscreteData(np.random.default_rng(0).integers(0, 3, size=(500, 2)), Domain(("a", "b"), (3, 3)))
    >>> res = Independent().synthesize(data, 1.0, 1e-6, np.random.default_rng(1))
    >>> res.data.n, len(res.ledger), res.epsilon
    (500, 2, 1.0...)
    """

    name = "independent"
    family = "baseline"
    interpretation = "standard"
    citation = ("Tao, McKenna, Hay, Machanavajjhala, Miklau (2021). Benchmarking Differentially Private "
                "Synthetic Data Generation Algorithms. arXiv:2112.09238 (the Independent baseline).")
    summary = "noisy 1-way marginals (Gaussian mechanism, equal zCDP share per column), sampled independently"
    defaults = {}
    accountant = ZCDPAccountant

    def _synthesize(self, data: DiscreteData, accountant: Accountant, rng: np.random.Generator,
                    n_rows: int) -> DiscreteData:
        d = len(data.domain)
        rho_j = accountant.remaining / d
        sigma = 1.0 / math.sqrt(rho_j)          # sqrt(2) / sqrt(2 rho_j)
        out = np.empty((n_rows, d), dtype=np.int64)
        for j, name in enumerate(data.domain.names):
            counts = np.bincount(data.codes[:, j], minlength=data.domain.shape[j]).astype(float)
            noisy = np.asarray(accountant.gaussian(f"independent:{name}", counts, sensitivity=math.sqrt(2.0),
                                                   sigma=sigma, rng=rng,
                                                   note="1-way marginal, replace-one L2 sensitivity sqrt(2)"))
            out[:, j] = rng.choice(counts.size, size=n_rows, p=noisy_probabilities(noisy))
        self.details = {"sigma": sigma}
        return data.with_codes(out)
