"""AIM (McKenna, Mullins, Sheldon, Miklau 2022): adaptive, iterative, workload-aware selection.

Privacy argument (full version: ``docs/synth/aim.md``)
-----------------------------------------------------
zCDP, replace-one neighbours, ``n`` and the domain public; ``rho`` is what
the accountant has left. With ``T`` the round budget (``16 d``, the paper's
default), every measurement is a Gaussian mechanism of scale ``sigma``
(``sqrt(T / (0.9 rho))`` at first; L2 sensitivity ``sqrt(2)``, cost
``1 / sigma^2``) and every selection an exponential mechanism with
``epsilon`` (``sqrt(0.8 rho / T)`` at first; score ``w_q (||M_q(D) -
M_q(model)||_1 - sqrt(2/pi) sigma |dom q|)`` with L1 sensitivity ``2 max
w_q``; bounded range, cost ``epsilon^2 / 8``). The 1-way marginals are
measured first. When the model's estimate of the marginal just measured
moved by less than the expected noise, ``sigma`` is halved and ``epsilon``
doubled (the annealing of Algorithm 2); when less than two rounds' cost is
left, the last round spends exactly what remains (0.9 on the measurement,
0.1 on the selection). Every parameter of a round depends only on earlier
releases, so the rounds compose adaptively (Bun and Steinke 2016, Lemma 2.3).
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np

from dpstats.privacy.accounting import Accountant, ZCDPAccountant
from dpstats.synth.base import DiscreteData, Param, Synthesizer
from dpstats.synth.workload import paper_workload

__all__ = ["AIM", "candidate_weights"]


def candidate_weights(workload: list[tuple[str, ...]]) -> dict[tuple[str, ...], float]:
    """AIM's candidates: the downward closure of the workload, weight ``sum_W |q & W|`` (Sec. 4 of the paper)."""
    out: dict[tuple[str, ...], float] = {}
    for w in workload:
        for r in range(1, len(w) + 1):
            for q in itertools.combinations(w, r):
                if q not in out:
                    out[q] = float(sum(len(set(q) & set(v)) for v in workload))
    return out


class AIM(Synthesizer):
    """AIM: workload-aware selection with budget annealing, Gaussian measurements, Private-PGM.

    Examples
    --------
    >>> import numpy as np
    >>> from dpstats.synth.base import DiscreteData, Domain
    >>> x = np.random.default_rng(0).integers(0, 3, size=(400, 3))
    >>> res = AIM(rounds=4).synthesize(DiscreteData(x, Domain(("a", "b", "c"), (3, 3, 3))), 1.0, 1e-6,
    ...                                np.random.default_rng(1))
    >>> res.data.n, res.ledger[-1].mechanism
    (400, 'aim:measure')
    """

    name = "aim"
    family = "marginal"
    interpretation = "standard"
    citation = ("McKenna, Mullins, Sheldon, Miklau (2022). AIM: An Adaptive and Iterative Mechanism for "
                "Differentially Private Synthetic Data. PVLDB 15(11).")
    summary = "adaptive workload-aware marginal selection with budget annealing, Private-PGM estimation"
    defaults = {
        "rounds": Param(None, "McKenna et al. (2022), Alg. 2: T = 16 d"),
        "max_model_mb": Param(80.0, "McKenna et al. (2022), Sec. 4: model size limit 80 MB"),
        "iters": Param(1000, "reference code (private-pgm mechanisms/aim.py): max_iters = 1000 warm-started "
                             "mirror-descent iterations per round"),
        "final_iters": Param(1000, "reference code: the last fit before sampling also runs max_iters = 1000"),
        "round_tol": Param(0.0, "reference code: a fixed max_iters per round (0: no convergence stop); > 0 "
                                "stops a warm-started per-round fit after a block of 50 iterations whose relative "
                                "loss decrease is at most this (a departure; the last fit runs final_iters in "
                                "full); off by default because on Adult at epsilon = 10 the round fits are still "
                                "far from converged at 1000 iterations (relative decrease 2e-3 to 1.5e-2 per "
                                "block, docs/synth/aim.md, Performance)"),
        "label": Param(None, "label column: workload of Tao et al. (2021), 2- and 3-way marginals with the label"),
        "rounding": Param(True, "reference code (private-pgm's synthetic_data, method='round'): the counts of each "
                                "column's values within each parent configuration are rounded, not drawn row by row"),
    }
    accountant = ZCDPAccountant

    def _synthesize(self, data: DiscreteData, accountant: Accountant, rng: np.random.Generator,
                    n_rows: int) -> DiscreteData:
        from dpstats.synth.mechanisms import _pgm, _pgm_sample

        dom, names, n, d = data.domain, data.domain.names, data.n, len(data.domain)
        rho = accountant.remaining
        workload = paper_workload(names, self.params["label"]) if d > 1 else [tuple(names)]
        cands = candidate_weights(workload)
        answers = {q: data.marginal(list(q)).ravel() for q in cands}
        rounds = int(self.params["rounds"] or 16 * d)
        sigma = math.sqrt(rounds / (0.9 * rho))
        eps = math.sqrt(0.8 * rho / rounds)
        if d / sigma**2 > rho * (1 + 1e-12):          # too few rounds for the 1-way marginals
            raise ValueError(f"AIM: rounds={rounds} leaves no budget after the {d} one-way marginals")
        measurements: list[Any] = []
        for name in names:
            y = np.asarray(accountant.gaussian(f"aim:1way:{name}", answers[(name,)], sensitivity=math.sqrt(2.0),
                                               sigma=sigma, rng=rng, note="1-way marginal, L2 sensitivity sqrt(2)"))
            measurements.append(((name,), y, sigma))
        tol = float(self.params["round_tol"])
        if not (tol >= 0 and math.isfinite(tol)):
            raise ValueError(f"AIM: round_tol must be a finite number >= 0, got {tol!r}")
        model = _pgm.estimate(dom, measurements, n, self.params["iters"], tol=tol)
        fit_iters = [model.iterations]
        marg = _pgm.ModelMarginals(model)
        cliques: list[tuple[str, ...]] = [(nm,) for nm in names]
        free = set(cliques)                       # the downward closure of the model's cliques (reference code)
        selected, anneals = [], 0
        while True:
            rem = accountant.remaining
            last = rem < 2.0 * (1.0 / sigma**2 + eps**2 / 8.0)
            if last:
                sigma, eps = math.sqrt(1.0 / (0.9 * rem)), math.sqrt(0.8 * rem)
            used_after = rho - rem + 1.0 / sigma**2 + eps**2 / 8.0
            limit = float(self.params["max_model_mb"]) * used_after / rho
            small = [q for q in cands if q in free or _pgm.model_size_mb(dom, cliques + [q]) <= limit]
            small = small or [q for q in cands if len(q) == 1]
            wgt = np.array([cands[q] for q in small])
            errs = np.array([np.abs(answers[q] - marg.counts(q)).sum()
                             - math.sqrt(2.0 / math.pi) * sigma * dom.size(q) for q in small])
            idx = accountant.exponential(
                "aim:select", wgt * errs, sensitivity=2.0 * float(wgt.max()), epsilon=eps, rng=rng,
                bound="bounded_range", note="weighted L1 error minus expected noise, sensitivity 2 max w")
            q = small[idx]
            sig = math.sqrt(1.0 / accountant.remaining) if last else sigma
            y = np.asarray(accountant.gaussian("aim:measure", answers[q], sensitivity=math.sqrt(2.0), sigma=sig,
                                               rng=rng, note=f"marginal {','.join(q)}, L2 sensitivity sqrt(2)"))
            measurements.append((q, y, sig))
            if q not in free:
                cliques.append(q)
                free.update(sub for r in range(1, len(q) + 1) for sub in itertools.combinations(q, r))
            selected.append(q)
            before = marg.counts(q)
            model = _pgm.estimate(dom, measurements, n, self.params["final_iters"] if last else self.params["iters"],
                                  warm_start=model, tol=0.0 if last else tol)
            fit_iters.append(model.iterations)
            marg = _pgm.ModelMarginals(model)
            if last:
                break
            if np.abs(marg.counts(q) - before).sum() <= math.sqrt(2.0 / math.pi) * sigma * dom.size(q):
                sigma, eps, anneals = sigma / 2.0, eps * 2.0, anneals + 1
        out = _pgm_sample.sample(model, dom, n_rows, rng, marginals=marg, rounding=bool(self.params["rounding"]))
        self.details = {"workload": workload, "selected": selected, "rounds_run": len(selected),
                        "anneals": anneals, "fit_iterations": fit_iters}
        return data.with_codes(out)
