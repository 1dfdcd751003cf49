"""PrivBayes (Zhang, Cormode, Procopiuc, Srivastava, Xiao 2017): a private Bayesian network.

Privacy argument (full version: ``docs/synth/privbayes.md``)
-----------------------------------------------------------
Pure epsilon-DP (:class:`~dpstats.privacy.accounting.PureAccountant`, as in
the paper), replace-one neighbours, ``n`` and the domain public. The budget
``epsilon`` (what the accountant has left) is split ``beta`` / ``1 - beta``:

1. GreedyBayes: the first attribute is drawn uniformly (data-independent);
   each of the other ``d - 1`` attribute-parent pairs is chosen by an
   exponential mechanism with ``epsilon_1 = beta epsilon / (d - 1)`` on the
   mutual information ``I(X; Pi)``, whose replace-one sensitivity is
   Lemma 4.1 of the paper (:func:`mi_sensitivity`);
2. each of the ``d`` joint counts of ``(X_i, Pi_i)`` gets Laplace noise of
   scale ``2 d / ((1 - beta) epsilon)`` (L1 sensitivity 2).

Normalising the noisy joints into conditionals and sampling post-process.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from dpstats.privacy.accounting import Accountant, PureAccountant
from dpstats.synth.base import DiscreteData, Param, Synthesizer

__all__ = ["PrivBayes", "mi_sensitivity", "mutual_information"]


def mi_sensitivity(n: int, binary: bool) -> float:
    """Replace-one sensitivity of the empirical mutual information (natural log), Zhang et al. (2017), Lemma 4.1.

    ``(1/n) log n + ((n-1)/n) log(n/(n-1))`` when ``X`` or ``Pi`` is binary,
    ``(2/n) log((n+1)/2) + ((n-1)/n) log((n+1)/(n-1))`` otherwise.
    """
    if n < 2:
        return 1.0
    if binary:
        return math.log(n) / n + (n - 1) / n * math.log(n / (n - 1))
    return 2.0 / n * math.log((n + 1) / 2.0) + (n - 1) / n * math.log((n + 1) / (n - 1))


def mutual_information(joint: np.ndarray) -> float:
    """``I(X; Pi)`` (natural log) of a count table whose last axis is ``X``."""
    p = joint.reshape(-1, joint.shape[-1]) / max(joint.sum(), 1.0)
    px, pp = p.sum(axis=0, keepdims=True), p.sum(axis=1, keepdims=True)
    nz = p > 0
    return float(np.sum(p[nz] * np.log(p[nz] / (pp @ px)[nz])))


class PrivBayes(Synthesizer):
    """PrivBayes: GreedyBayes network of degree ``k`` by the exponential mechanism, Laplace-noised conditionals.

    Examples
    --------
    >>> import numpy as np
    >>> from dpstats.synth.base import DiscreteData, Domain
    >>> x = np.random.default_rng(0).integers(0, 3, size=(400, 3))
    >>> res = PrivBayes().synthesize(DiscreteData(x, Domain(("a", "b", "c"), (3, 3, 3))), 1.0, 0.0, np.random.default_rng(1))
    >>> res.data.n, len(res.ledger), res.epsilon
    (400, 5, 1.0)
    """

    name = "privbayes"
    family = "marginal"
    interpretation = "standard"
    citation = ("Zhang, Cormode, Procopiuc, Srivastava, Xiao (2017). PrivBayes: Private Data Release via "
                "Bayesian Networks. ACM Transactions on Database Systems 42(4), 25.")
    summary = "private Bayesian network (exponential mechanism on mutual information), Laplace-noised conditionals"
    defaults = {
        "degree": Param(2, "maximum number of parents k; DataSynthesizer's default (Ping, Stoyanovich, Howe 2017)"),
        "beta": Param(0.3, "Zhang et al. (2017): share of epsilon for learning the network in their experiments"),
        "theta": Param(4.0, "Zhang et al. (2017): the theta-usefulness threshold they recommend"),
    }
    accountant = PureAccountant

    def _synthesize(self, data: DiscreteData, accountant: Accountant, rng: np.random.Generator,
                    n_rows: int) -> DiscreteData:
        eps = accountant.remaining
        names, d, n = data.domain.names, len(data.domain), data.n
        beta = float(self.params["beta"]) if d > 1 else 0.0
        eps1, eps2 = beta * eps, eps - beta * eps
        k, theta = int(self.params["degree"]), float(self.params["theta"])
        # theta-usefulness: average cell mass / Laplace scale of a distribution >= theta
        max_cells = n * eps2 / (2.0 * d * theta)
        # 1. GreedyBayes
        first = names[int(rng.integers(0, d))]
        order: list[tuple[str, tuple[str, ...]]] = [(first, ())]
        chosen = [first]
        for _ in range(d - 1):
            cands: list[tuple[str, tuple[str, ...]]] = []
            for x in names:
                if x in chosen:
                    continue
                size = min(k, len(chosen))
                useful: list[tuple[str, ...]] = []
                while size >= 0 and not useful:
                    useful = [pa for pa in itertools.combinations(chosen, size)
                              if data.domain.size(pa) * data.domain[x] <= max_cells]
                    size -= 1
                cands += [(x, pa) for pa in (useful or [()])]
            scores = np.array([mutual_information(data.marginal(list(pa) + [x])) for x, pa in cands])
            binary = all(data.domain[x] == 2 or data.domain.size(pa) == 2 for x, pa in cands)
            idx = accountant.exponential(
                "privbayes:parents", scores, sensitivity=mi_sensitivity(n, binary), epsilon=eps1 / (d - 1),
                rng=rng, note="mutual information I(X; Pi), Zhang et al. (2017) Lemma 4.1")
            order.append(cands[idx])
            chosen.append(cands[idx][0])
        # 2. noisy conditionals
        pos = {c: j for j, c in enumerate(names)}
        out = np.zeros((n_rows, d), dtype=np.int64)
        scale = 2.0 * d / eps2
        for x, pa in order:
            joint = data.marginal(list(pa) + [x])
            noisy = np.asarray(accountant.laplace(
                f"privbayes:joint:{x}|{','.join(pa)}", joint, sensitivity=2.0, scale=scale, rng=rng,
                note="joint counts of (Pi, X), replace-one L1 sensitivity 2"))
            flat = np.clip(noisy, 0, None).reshape(-1, data.domain[x])
            tot = flat.sum(axis=1, keepdims=True)
            cond = np.where(tot > 0, flat / np.where(tot > 0, tot, 1.0), 1.0 / flat.shape[1])
            cdf = np.cumsum(cond, axis=1)
            pidx = (np.ravel_multi_index(tuple(out[:, pos[p]] for p in pa), joint.shape[:-1]) if pa
                    else np.zeros(n_rows, dtype=np.int64))
            u = rng.random(n_rows) * cdf[pidx, -1]
            out[:, pos[x]] = np.minimum((cdf[pidx] <= u[:, None]).sum(axis=1), flat.shape[1] - 1)
        self.details = {"network": [(x, list(pa)) for x, pa in order], "laplace_scale": scale}
        return data.with_codes(out)
