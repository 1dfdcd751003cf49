"""MST (McKenna, Miklau, Sheldon 2021): a private maximum spanning tree of 2-way marginals.

Privacy argument (full version: ``docs/synth/mst.md``)
-----------------------------------------------------
Replace-one neighbours, ``n`` and the domain public; the budget is the
accountant's remaining ``rho`` (zCDP), split in three equal parts as in the
paper (Sec. 4.1 and its reference code):

1. every 1-way marginal with Gaussian noise ``sigma_1 = sqrt(3 d / rho)``
   (L2 sensitivity ``sqrt(2)``: ``rho / (3 d)`` each, ``rho / 3`` in all);
2. ``d - 1`` exponential mechanisms choosing the tree's edges, scores
   ``||M_ab(D) - M_ab(model)||_1`` (L1 sensitivity 2 under replace-one; the
   model is fitted to step 1's releases only), each ``epsilon_e =
   sqrt(8 (rho/3) / (d-1))``, charged ``epsilon_e^2 / 8`` as bounded-range
   mechanisms (Cesar and Rogers 2021): ``rho / 3`` in all;
3. the ``d - 1`` chosen 2-way marginals with ``sigma_2 = sqrt(3 (d-1) / rho)``:
   ``rho / 3``.

Compressing rare 1-way cells (noisy count below ``3 sigma_1``), fitting
Private-PGM and sampling only post-process released values.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np

from dpstats.privacy.accounting import Accountant, ZCDPAccountant
from dpstats.synth.base import DiscreteData, Domain, Param, Synthesizer

__all__ = ["MST", "compress", "uncompress"]


def compress(noisy: np.ndarray, threshold: float) -> np.ndarray:
    """Map of original cells to compressed cells: cells whose noisy count is ``>= threshold`` kept, the rest merged.

    Returns ``mapping`` with ``mapping[i]`` the new code of cell ``i``
    (kept cells first in order, the merged cell last). Post-processing.
    """
    keep = np.asarray(noisy) >= threshold
    mapping = np.empty(keep.size, dtype=np.int64)
    mapping[keep] = np.arange(int(keep.sum()))
    mapping[~keep] = int(keep.sum())
    return mapping


def uncompress(codes: np.ndarray, mapping: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Original cells for compressed codes; a merged cell becomes one of its cells uniformly at random."""
    out = np.empty(codes.size, dtype=np.int64)
    for new in np.unique(codes):
        cells = np.flatnonzero(mapping == new)
        where = codes == new
        out[where] = cells[0] if cells.size == 1 else cells[rng.integers(0, cells.size, size=int(where.sum()))]
    return out


class MST(Synthesizer):
    """MST: noisy 1-way marginals, a private maximum spanning tree, noisy tree marginals, Private-PGM.

    Examples
    --------
    >>> import numpy as np
    >>> from dpstats.synth.base import DiscreteData, Domain
    >>> x = np.random.default_rng(0).integers(0, 3, size=(400, 3))
    >>> res = MST().synthesize(DiscreteData(x, Domain(("a", "b", "c"), (3, 3, 3))), 1.0, 1e-6, np.random.default_rng(1))
    >>> res.data.n, len(res.ledger)
    (400, 7)
    """

    name = "mst"
    family = "marginal"
    interpretation = "standard"
    citation = ("McKenna, Miklau, Sheldon (2021). Winning the NIST Contest: A scalable and general approach to "
                "differentially private synthetic data. Journal of Privacy and Confidentiality 11(3).")
    summary = "1-way marginals, private maximum spanning tree of 2-way marginals, noisy tree marginals, Private-PGM"
    defaults = {
        "compress": Param(True, "McKenna et al. (2021), Sec. 4.1: merge 1-way cells with noisy count < 3 sigma "
                                "(reference code mst.py)"),
        "iters": Param(10000, "reference code (private-pgm mechanisms/mst.py): mirror_descent(..., iters=10000)"),
        "rounding": Param(True, "reference code (private-pgm's synthetic_data, method='round'): the counts of each "
                                "column's values within each parent configuration are rounded, not drawn row by row"),
    }
    accountant = ZCDPAccountant

    def _synthesize(self, data: DiscreteData, accountant: Accountant, rng: np.random.Generator,
                    n_rows: int) -> DiscreteData:
        from dpstats.synth.mechanisms import _pgm, _pgm_sample

        rho = accountant.remaining
        names, d = data.domain.names, len(data.domain)
        share = rho / 3.0 if d > 1 else rho
        # 1. one-way marginals
        sigma1 = math.sqrt(2.0 * d / (2.0 * share))
        noisy1 = {}
        for name in names:
            noisy1[name] = np.asarray(accountant.gaussian(
                f"mst:1way:{name}", data.marginal([name]), sensitivity=math.sqrt(2.0), sigma=sigma1, rng=rng,
                note="1-way marginal, replace-one L2 sensitivity sqrt(2)"))
        # post-processing: compress rare cells (data re-coded with a released mapping)
        maps = {n: (compress(noisy1[n], 3.0 * sigma1) if self.params["compress"] else np.arange(data.domain[n]))
                for n in names}
        cdom = Domain(names, tuple(int(m.max()) + 1 for m in maps.values()))
        ccodes = np.column_stack([maps[n][data.column(n)] for n in names])
        cdata = DiscreteData(ccodes, cdom)
        log1 = [((n,), np.bincount(maps[n], weights=noisy1[n], minlength=cdom[n]), sigma1) for n in names]
        log2: list[Any] = []
        edges: list[tuple[str, str]] = []
        if d > 1:
            # 2. private maximum spanning tree (Kruskal with the exponential mechanism)
            # the Private-PGM fit to 1-way measurements alone is a product of
            # simplex projections (computed exactly, no mirror descent needed)
            fit1 = {n: _pgm.simplex_projection(y, data.n) for (n,), y, _ in log1}
            cands = list(itertools.combinations(names, 2))
            weights = {e: float(np.abs(cdata.marginal(list(e)).ravel()
                                       - np.outer(fit1[e[0]], fit1[e[1]]).ravel() / max(data.n, 1)).sum())
                       for e in cands}
            eps_e = math.sqrt(8.0 * share / (d - 1))
            comp = {n: n for n in names}

            def find(a: str) -> str:
                while comp[a] != a:
                    a = comp[a]
                return a

            for _ in range(d - 1):
                cands = [e for e in cands if find(e[0]) != find(e[1])]
                idx = accountant.exponential(
                    "mst:tree-edge", np.array([weights[e] for e in cands]), sensitivity=2.0, epsilon=eps_e,
                    rng=rng, bound="bounded_range",
                    note="edge score ||M_ab - model_ab||_1, replace-one sensitivity 2")
                a, b = cands[idx]
                edges.append((a, b))
                comp[find(a)] = find(b)
            # 3. noisy 2-way marginals on the tree (whatever remains: share up to rounding)
            sigma2 = math.sqrt(2.0 * (d - 1) / (2.0 * accountant.remaining))
            for e in edges:
                y = np.asarray(accountant.gaussian(
                    f"mst:2way:{e[0]},{e[1]}", cdata.marginal(list(e)).ravel(), sensitivity=math.sqrt(2.0),
                    sigma=sigma2, rng=rng, note="2-way tree marginal, replace-one L2 sensitivity sqrt(2)"))
                log2.append((e, y, sigma2))
        model = _pgm.estimate(cdom, log1 + log2, data.n, self.params["iters"])
        csyn = _pgm_sample.sample(model, cdom, n_rows, rng, rounding=bool(self.params["rounding"]))
        out = np.column_stack([uncompress(csyn[:, j], maps[n], rng) for j, n in enumerate(names)]) \
            if n_rows else np.zeros((0, d), dtype=np.int64)
        self.details = {"sigma_1way": sigma1, "tree": edges, "compressed_shape": cdom.shape}
        return data.with_codes(out)
