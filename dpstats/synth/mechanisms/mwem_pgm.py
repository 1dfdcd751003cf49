"""MWEM-PGM (McKenna, Sheldon, Miklau 2019): MWEM's selection with Private-PGM estimation.

Privacy argument (full version: ``docs/synth/mwem_pgm.md``)
----------------------------------------------------------
zCDP, replace-one neighbours (the reference code's ``bounded=True``), ``n``
and the domain public. The remaining ``rho`` is split evenly over ``T``
rounds; in each round a share ``1 - alpha`` pays for an exponential mechanism
choosing the worst-approximated workload marginal, score ``||M_q(D) -
M_q(model)||_1 - |dom(q)|`` (L1 sensitivity 2; the model is fitted to the
earlier releases only), with ``epsilon_t = sqrt(8 (1 - alpha) rho / T)``
charged ``epsilon_t^2 / 8`` (bounded range), and the share ``alpha`` pays for
the chosen marginal with Gaussian noise ``sigma = sqrt(T / (alpha rho))``
(L2 sensitivity ``sqrt(2)``). Estimation and sampling post-process.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dpstats.privacy.accounting import Accountant, ZCDPAccountant
from dpstats.synth.base import DiscreteData, Param, Synthesizer
from dpstats.synth.workload import paper_workload

__all__ = ["MWEMPGM"]


class MWEMPGM(Synthesizer):
    """MWEM-PGM: rounds of (exponential-mechanism selection, Gaussian measurement, Private-PGM fit).

    Examples
    --------
    >>> import numpy as np
    >>> from dpstats.synth.base import DiscreteData, Domain
    >>> x = np.random.default_rng(0).integers(0, 3, size=(400, 3))
    >>> res = MWEMPGM().synthesize(DiscreteData(x, Domain(("a", "b", "c"), (3, 3, 3))), 1.0, 1e-6, np.random.default_rng(1))
    >>> res.data.n, len(res.ledger)
    (400, 6)
    """

    name = "mwem_pgm"
    family = "marginal"
    interpretation = "standard"
    citation = ("McKenna, Sheldon, Miklau (2019). Graphical-model based estimation and inference for differential "
                "privacy. ICML 2019 (MWEM+PGM, reference code mechanisms/mwem+pgm.py).")
    summary = "MWEM's worst-approximated-marginal selection, Gaussian measurements, Private-PGM estimation"
    defaults = {
        "rounds": Param(None, "reference code: rounds = number of columns"),
        "alpha": Param(0.9, "reference code: share of each round's budget for the measurement"),
        "max_model_mb": Param(25.0, "reference code: maxsize_mb = 25, growing linearly over the rounds"),
        "iters": Param(1000, "reference code (private-pgm mechanisms/mwem+pgm.py): mirror_descent's default "
                             "1000 iterations per round, warm-started"),
        "final_iters": Param(1000, "reference code: the last round's fit is the same 1000-iteration call"),
        "label": Param(None, "label column: workload of Tao et al. (2021), 2- and 3-way marginals with the label"),
        "rounding": Param(True, "reference code (private-pgm's synthetic_data, method='round'): the counts of each "
                                "column's values within each parent configuration are rounded, not drawn row by row"),
    }
    accountant = ZCDPAccountant

    def _synthesize(self, data: DiscreteData, accountant: Accountant, rng: np.random.Generator,
                    n_rows: int) -> DiscreteData:
        from dpstats.synth.mechanisms import _pgm, _pgm_sample

        dom, names, n = data.domain, data.domain.names, data.n
        rho = accountant.remaining
        workload = paper_workload(names, self.params["label"]) if len(names) > 1 else [tuple(names)]
        rounds = int(self.params["rounds"] or len(names))
        alpha = float(self.params["alpha"])
        eps_t = math.sqrt(8.0 * (1.0 - alpha) * rho / rounds)
        sigma = math.sqrt(rounds / (alpha * rho))            # sqrt(2) / sqrt(2 alpha rho / T)
        answers = {q: data.marginal(list(q)).ravel() for q in workload}
        measurements: list[Any] = []
        cliques: list[tuple[str, ...]] = []
        model: _pgm.Model | None = None
        marg: _pgm.ModelMarginals | None = None
        chosen = []
        for t in range(1, rounds + 1):
            limit = float(self.params["max_model_mb"]) * t / rounds
            cands = [q for q in workload if q in cliques or _pgm.model_size_mb(dom, cliques + [q]) <= limit]
            if not cands:
                cands = list(workload)
            if marg is None:
                est = {q: np.full(dom.size(q), n / dom.size(q)) for q in cands}   # uniform: no measurement yet
            else:
                est = {q: marg.counts(q) for q in cands}
            scores = np.array([np.abs(answers[q] - est[q]).sum() - dom.size(q) for q in cands])
            last = t == rounds
            idx = accountant.exponential(
                "mwem_pgm:select", scores, sensitivity=2.0, epsilon=eps_t, rng=rng, bound="bounded_range",
                note="score ||M_q - model_q||_1 - |dom q|, replace-one sensitivity 2")
            q = cands[idx]
            sig = math.sqrt(1.0 / accountant.remaining) if last else sigma
            y = np.asarray(accountant.gaussian(f"mwem_pgm:measure:{','.join(q)}", answers[q],
                                               sensitivity=math.sqrt(2.0), sigma=sig, rng=rng,
                                               note="marginal, replace-one L2 sensitivity sqrt(2)"))
            measurements.append((q, y, sig))
            cliques.append(q)
            chosen.append(q)
            iters = self.params["final_iters"] if last else self.params["iters"]
            model = _pgm.estimate(dom, measurements, n, iters, warm_start=model)
            marg = _pgm.ModelMarginals(model)
        assert model is not None and marg is not None      # rounds >= 1
        out = _pgm_sample.sample(model, dom, n_rows, rng, marginals=marg, rounding=bool(self.params["rounding"]))
        self.details = {"workload": workload, "selected": chosen, "sigma": sigma, "epsilon_select": eps_t}
        return data.with_codes(out)
