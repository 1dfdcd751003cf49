"""RAP (Aydore et al. 2021): relaxed adaptive projection onto noisy marginal queries.

Privacy argument (full version: ``docs/synth/rap.md``)
-----------------------------------------------------
zCDP, replace-one neighbours, ``n`` and the domain public. The queries are
the cells of the workload's marginals (Tao et al. 2021: 2- and 3-way
marginals with the label, all 2-way otherwise), answered as counts. The
remaining ``rho`` is split evenly over ``T`` epochs and, in each, half to
selection and half to measurement (the reference code's ``zCDPTracker``):

* selection: ``K`` exponential mechanisms, one after another, each over the
  cells not yet selected, score ``|count_q(D) - n q(D')|`` (a cell count moves
  by at most 1 when one row is replaced: sensitivity 1; ``D'`` is fitted to
  earlier releases only), each with ``epsilon = sqrt(8 (rho / 2T) / K)``
  charged ``epsilon^2 / 8`` (bounded range; Cesar and Rogers 2021);
* measurement: the ``K`` selected counts as one Gaussian mechanism. A
  replaced row changes at most two cells of any one marginal, by 1 each, so
  the L2 sensitivity is ``sqrt(sum_m min(2, K_m))`` over the marginals ``m``
  holding ``K_m`` selected cells (at most ``sqrt(K)``, the reference code's
  per-query accounting); ``sigma = sensitivity / sqrt(2 rho / 2T)``.

Fitting the relaxed table ``D'`` (rows on the product of simplices; Adam on
``||q_S(D') - a_S||_2`` with a sparsemax projection after every step) and
randomized rounding only post-process released values.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dpstats.privacy.accounting import Accountant, ZCDPAccountant
from dpstats.synth.base import DiscreteData, Param, Synthesizer
from dpstats.synth.workload import paper_workload

__all__ = ["RAP", "relaxed_marginal", "simplex_project_blocks", "randomized_rounding"]


def relaxed_marginal(dprime: np.ndarray, offsets: np.ndarray, sizes: tuple[int, ...], cols: tuple[int, ...]) -> np.ndarray:
    """Answers of a marginal's product queries on relaxed rows: ``mean_r prod_j D'[r, block_j]`` (flattened)."""
    blocks = [dprime[:, offsets[c]:offsets[c] + sizes[c]] for c in cols]
    letters = "abcdefgh"[:len(cols)]
    spec = ",".join(f"r{ch}" for ch in letters) + "->" + letters
    out: np.ndarray = np.einsum(spec, *blocks, optimize=True).ravel() / dprime.shape[0]
    return out


def simplex_project_blocks(x: np.ndarray, sizes: tuple[int, ...]) -> np.ndarray:
    """Euclidean projection of every row's block of each column onto the simplex (sparsemax), NumPy version."""
    out = np.empty_like(x)
    start = 0
    for k in sizes:
        z = x[:, start:start + k]
        u = -np.sort(-z, axis=1)
        css = np.cumsum(u, axis=1) - 1.0
        ind = np.arange(1, k + 1)
        cond = u - css / ind > 0
        r = k - np.argmax(cond[:, ::-1], axis=1)            # last index where cond holds (1-based)
        theta = css[np.arange(z.shape[0]), r - 1] / r
        out[:, start:start + k] = np.maximum(z - theta[:, None], 0.0)
        start += k
    return out


def randomized_rounding(dprime: np.ndarray, sizes: tuple[int, ...], n_rows: int, rng: np.random.Generator) -> np.ndarray:
    """Codes: row ``i`` samples each column from block ``j`` of relaxed row ``i mod n'`` (post-processing)."""
    m = dprime.shape[0]
    src = np.arange(n_rows) % m
    out = np.empty((n_rows, len(sizes)), dtype=np.int64)
    start = 0
    for j, k in enumerate(sizes):
        p = np.clip(dprime[src, start:start + k], 0.0, None)
        tot = p.sum(axis=1, keepdims=True)
        p = np.where(tot > 0, p / np.where(tot > 0, tot, 1.0), 1.0 / k)
        cdf = np.cumsum(p, axis=1)
        u = rng.random(n_rows)[:, None] * cdf[:, -1:]
        out[:, j] = np.minimum((u >= cdf).sum(axis=1), k - 1)
        start += k
    return out


def _project_rows(xt: np.ndarray, sizes: tuple[int, ...]) -> None:
    """In place: project every block of rows of ``xt`` (one-hot columns x relaxed rows) onto the simplex.

    Each block is sorted and summed along its rows in a contiguous transposed
    copy (relaxed rows x levels): sorting is exact and a cumulative sum adds in
    order, so the values are those of the same operations along axis 0, at a
    fraction of the strided cost.
    """
    start = 0
    n = xt.shape[1]
    rows = np.arange(n)
    for k in sizes:
        z = xt[start:start + k]
        start += k
        u = np.sort(z.T, axis=1)                                # ascending, (n', k), contiguous
        u = u[:, ::-1]                                          # descending
        css = np.cumsum(u, axis=1)
        css -= 1.0
        ind = np.arange(1, k + 1, dtype=np.float64)
        r = (u - css / ind > 0).sum(axis=1)                     # sorted prefix where the condition holds
        theta = css[rows, r - 1] / r
        np.maximum(z - theta, 0.0, out=z)


def fit_relaxed(x: np.ndarray, qidx: np.ndarray, target: np.ndarray, sizes: tuple[int, ...], iterations: int,
                lr: float, stop: float) -> tuple[np.ndarray, int]:
    """Adam on ``||q_S(D') - a_S||_2`` with a sparsemax projection after every step (the reference's RAP loop).

    ``qidx`` (m, 3) holds each query's one-hot columns, ``sum(sizes)`` standing
    for the constant 1 (2-way queries). Stops after ``iterations`` steps or
    when the loss improves by less than ``stop``. Adam's constants are Kingma
    and Ba's (0.9, 0.999, 1e-8), as ``jax.experimental.optimizers.adam`` in the
    reference code. The gradient is exact (product rule). Post-processing.
    """
    from scipy import sparse

    n_prime, width = x.shape
    m = qidx.shape[0]
    # [S_0 S_1 S_2]: query slot j of query i reads column qidx[i, j]
    sel = sparse.csr_matrix((np.ones(3 * m, dtype=np.float32), (qidx.T.ravel(), np.arange(3 * m))), shape=(width + 1, 3 * m))
    xt = np.ones((width + 1, n_prime), dtype=np.float32)     # float32: half the memory traffic
    xt[:width] = x.T
    b1, b2, eps = 0.9, 0.999, 1e-8
    mom, vel = np.zeros((width, n_prime), np.float32), np.zeros((width, n_prime), np.float32)
    buf, step = np.empty((width, n_prime), np.float32), np.empty((width, n_prime), np.float32)
    target = np.asarray(target, dtype=np.float32)
    prev = math.inf
    t = 0
    while t < iterations:
        p0, p1, p2 = xt[qidx[:, 0]], xt[qidx[:, 1]], xt[qidx[:, 2]]          # (m, n') each
        p12 = p1 * p2
        err = (p0 * p12).mean(axis=1) - target
        val = float(np.sqrt(np.sum(err.astype(np.float64) ** 2)))
        if val == 0.0:
            break
        coef = (err / np.float32(val * n_prime))[:, None]
        g = (sel @ np.concatenate([p12 * coef, p0 * p2 * coef, p0 * p1 * coef]))[:width]
        mom *= b1                                   # in place into two buffers: the same operations in order
        np.multiply(g, 1 - b1, out=buf)
        mom += buf
        vel *= b2
        np.multiply(g, 1 - b2, out=buf)
        buf *= g
        vel += buf
        np.multiply(vel, np.float32(1 / (1 - b2 ** (t + 1))), out=step)
        np.sqrt(step, out=step)
        step += eps
        np.divide(mom, step, out=step)
        step *= np.float32(lr / (1 - b1 ** (t + 1)))
        xt[:width] -= step
        _project_rows(xt[:width], sizes)
        t += 1
        if val >= prev - stop:
            break
        prev = val
    out: np.ndarray = np.ascontiguousarray(xt[:width].T, dtype=np.float64)
    return out, t


class RAP(Synthesizer):
    """RAP: adaptive rounds of (K exponential-mechanism selections, one Gaussian measurement, relaxed projection).

    Examples
    --------
    >>> import numpy as np
    >>> from dpstats.synth.base import DiscreteData, Domain
    >>> x = np.random.default_rng(0).integers(0, 3, size=(400, 3))
    >>> res = RAP(epochs=2, top_q=3, iterations=50).synthesize(DiscreteData(x, Domain(("a", "b", "c"), (3, 3, 3))),
    ...                                                          1.0, 1e-6, np.random.default_rng(1))
    >>> res.data.n, len(res.ledger)
    (400, 8)
    """

    name = "rap"
    family = "workload"
    interpretation = "standard"
    citation = ("Aydore, Brown, Kearns, Kenthapadi, Melis, Roth, Siva (2021). Differentially private query "
                "release through adaptive projection. ICML 2021 (reference code "
                "amazon-science/relaxed-adaptive-projection).")
    summary = ("cells of the workload's marginals; per epoch K noisy-max selections and one Gaussian "
               "measurement; Adam + sparsemax projection of a relaxed table; randomized rounding")
    defaults = {
        "epochs": Param(10, "reference code main.py: --epochs 10 (capped at ceil(|Q| / top_q))"),
        "top_q": Param(50, "reference code main.py: --top-q 50 queries selected per epoch"),
        "n_prime": Param(1000, "reference code main.py: --num-generated-points 1000 relaxed rows"),
        "iterations": Param(250, "reference code main.py: --iterations 1000 Adam steps per epoch (its Adult "
                                 "config: 5000); 250 keep Adult near the protocol's 60 s "
                                 "(benchmarks/bench_synth.py, docs/synth/rap.md)"),
        "learning_rate": Param(1e-3, "reference code main.py: --learning-rate 1e-3 (Adam)"),
        "stopping": Param(1e-7, "reference code main.py: --stopping-condition 1e-7 (stop an epoch when the "
                                "loss improves by less)"),
        "label": Param(None, "label column: workload of Tao et al. (2021), 2- and 3-way marginals with the label"),
    }
    accountant = ZCDPAccountant

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        for key in ("epochs", "top_q", "n_prime", "iterations"):
            v = self.params[key]
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise ValueError(f"RAP: {key} must be an integer >= 1, got {v!r}")
        for key in ("learning_rate", "stopping"):
            v = self.params[key]
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not (v >= 0 and math.isfinite(v)) \
                    or (key == "learning_rate" and v == 0):
                raise ValueError(f"RAP: {key} must be a finite number {'> 0' if key == 'learning_rate' else '>= 0'}, "
                                 f"got {v!r}")

    def _synthesize(self, data: DiscreteData, accountant: Accountant, rng: np.random.Generator,
                    n_rows: int) -> DiscreteData:
        dom, names, n = data.domain, data.domain.names, data.n
        sizes = dom.shape
        offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
        workload = paper_workload(names, self.params["label"]) if len(names) > 1 else [tuple(names)]
        cols = [tuple(names.index(c) for c in q) for q in workload]
        # the query set: every cell of every workload marginal (public: the domain and the workload)
        qmarg, qidx_all = [], []
        for m, cs in enumerate(cols):
            grid = np.indices([sizes[c] for c in cs]).reshape(len(cs), -1).T     # cells in C order
            idx = np.full((grid.shape[0], 3), int(sum(sizes)), dtype=np.int64)   # pad: the constant column
            idx[:, :len(cs)] = grid + offsets[list(cs)]
            qidx_all.append(idx)
            qmarg.append(np.full(grid.shape[0], m))
        qidx_all_a, qmarg_a = np.concatenate(qidx_all), np.concatenate(qmarg)
        nq = qmarg_a.size
        real = np.concatenate([data.marginal(list(q)).ravel() for q in workload])
        K = int(self.params["top_q"])
        T = int(min(self.params["epochs"], math.ceil(nq / K)))
        rho = accountant.remaining
        rho_sel = rho / (2.0 * T)
        eps_sel = math.sqrt(8.0 * rho_sel / K)
        n_prime = int(self.params["n_prime"])
        width = int(sum(sizes))
        dprime = simplex_project_blocks(rng.random((n_prime, width)), sizes)
        selected = np.zeros(nq, dtype=bool)
        order: list[int] = []
        targets: list[float] = []
        sigmas, steps = [], []
        picks: list[list[int]] = []
        for t in range(T):
            syn = np.concatenate([relaxed_marginal(dprime, offsets, sizes, cs) for cs in cols]) * n
            err = np.abs(real - syn)
            k_t = min(K, int((~selected).sum()))
            chosen = []
            for _ in range(k_t):
                cand = np.flatnonzero(~selected)
                i = accountant.exponential(
                    "rap:select", err[cand], sensitivity=1.0, epsilon=eps_sel, rng=rng, bound="bounded_range",
                    note="score |count_q(D) - n q(D')|, replace-one sensitivity 1")
                selected[cand[i]] = True
                chosen.append(int(cand[i]))
            per_marg = np.bincount(qmarg_a[chosen], minlength=len(workload))
            sens = math.sqrt(float(np.minimum(per_marg, 2).sum()))
            last = t == T - 1
            rho_ans = accountant.remaining if last else rho_sel
            sigma = sens / math.sqrt(2.0 * rho_ans)
            noisy = np.asarray(accountant.gaussian(
                "rap:measure", real[chosen], sensitivity=sens, sigma=sigma, rng=rng,
                note="selected cell counts; replace-one L2 sensitivity sqrt(sum_m min(2, K_m))"))
            sigmas.append(sigma)
            picks.append(chosen)
            order.extend(chosen)
            targets.extend(np.clip(noisy / max(n, 1), 0.0, 1.0).tolist())
            # post-processing: relaxed projection onto every answer released so far
            dprime, it = fit_relaxed(dprime, qidx_all_a[order], np.asarray(targets), sizes,
                                     int(self.params["iterations"]), float(self.params["learning_rate"]),
                                     float(self.params["stopping"]))
            steps.append(int(it))
        out = randomized_rounding(dprime, sizes, n_rows, rng)
        self.details = {"workload": workload, "epochs": T, "top_q": K, "epsilon_select": eps_sel, "sigmas": sigmas,
                        "adam_steps": steps, "queries": nq,
                        "selected": picks}
        return data.with_codes(out)
