"""FEM (Vietri, Tian, Bun, Steinke, Wu 2020): follow-the-perturbed-leader with an integer-program oracle.

Privacy argument (full version: ``docs/synth/fem.md``)
-----------------------------------------------------
zCDP, replace-one neighbours, ``n`` and the domain public. The queries are
the cells of the workload's marginals (Tao et al. 2021) and their negations
``1 - q``. The remaining ``rho`` is split evenly over ``T`` rounds; each round
runs one exponential mechanism choosing the query the current synthetic
sample answers worst, score ``n (q(D) - q(D_t))`` for a query and ``n (q(D_t)
- q(D))`` for its negation (a cell count moves by at most 1 when one row is
replaced: sensitivity 1; ``D_t`` depends only on earlier selections), with
``epsilon_0 = sqrt(8 rho / T)`` charged ``epsilon_0^2 / 8`` (bounded range,
Cesar and Rogers 2021; the reference code charges the generic
``epsilon_0^2 / 2``). That is the only access to the data.

The data player (the oracle) sees only the selected queries: each synthetic
row is ``argmax_x sum_i w_i q_i(x) - <sigma, x>`` over the one-hot rows ``x``
of the public domain, with ``w_i`` the number of times query ``i`` was
selected and ``sigma`` i.i.d. exponential perturbations (FTPL; algorithmic
randomness, not privacy noise), solved exactly as a mixed-integer program by
HiGHS (:func:`scipy.optimize.milp`; the reference uses gurobi). Keeping the
samples of the rounds after half the epsilon was spent and resampling them to
``n_rows`` rows is post-processing.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dpstats.privacy.accounting import Accountant, ZCDPAccountant, zcdp_epsilon
from dpstats.synth.base import DiscreteData, Param, Synthesizer
from dpstats.synth.workload import paper_workload

__all__ = ["FEM", "best_response", "workload_cells"]


def workload_cells(sizes: tuple[int, ...], cols: list[tuple[int, ...]]) -> tuple[list[np.ndarray], np.ndarray]:
    """One-hot column indices of every cell of every marginal (``cells[m]``: array (cells, len(cols[m]))).

    Returns the per-marginal arrays and the marginal of each query, cells in C order (as ``np.ravel``).
    """
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    cells, owner = [], []
    for m, cs in enumerate(cols):
        grid = np.indices([sizes[c] for c in cs]).reshape(len(cs), -1).T
        cells.append(grid + offsets[list(cs)])
        owner.append(np.full(grid.shape[0], m))
    return cells, np.concatenate(owner)


def best_response(sizes: tuple[int, ...], pos: list[tuple[np.ndarray, float]], neg: list[tuple[np.ndarray, float]],
                  sigma: np.ndarray) -> np.ndarray:
    """The one-hot row maximising ``sum_pos w [x in q] + sum_neg w [x not in q] - <sigma, x>`` (exact MILP).

    Parameters
    ----------
    sizes : tuple of int
        Cells per column; ``x`` has one 1 in each column's block.
    pos, neg : list of (indices, weight)
        Queries (the one-hot indices a row must all have) and their weights.
    sigma : ndarray
        Linear perturbation of ``x`` (length ``sum(sizes)``).

    Returns
    -------
    ndarray of int
        The row's codes (one per column).

    Notes
    -----
    Variables ``x`` (binary) and ``c_i`` in ``[0, 1]``; ``c_i <= x_j`` for each
    ``j`` of a query (``c_i = min_j x_j`` at the optimum), ``c_i + sum_j x_j <=
    |q_i|`` for a negation (``c_i = 1`` unless all of ``q_i`` hold). The
    constraints make every optimum integral in ``c``, so ``c`` need not be
    declared integer.
    """
    from scipy import sparse
    from scipy.optimize import Bounds, LinearConstraint, milp

    width = int(sum(sizes))
    nq = len(pos) + len(neg)
    nv = width + nq
    obj = np.concatenate([np.asarray(sigma, float), -np.array([w for _, w in pos] + [w for _, w in neg])])
    rows, cols, vals, lo, hi = [], [], [], [], []
    r = 0
    start = 0
    for k in sizes:                         # one cell per column
        rows += [r] * k
        cols += list(range(start, start + k))
        vals += [1.0] * k
        lo.append(1.0)
        hi.append(1.0)
        r += 1
        start += k
    for i, (idx, _) in enumerate(pos):       # c_i <= x_j
        for j in idx:
            rows += [r, r]
            cols += [width + i, int(j)]
            vals += [1.0, -1.0]
            lo.append(-np.inf)
            hi.append(0.0)
            r += 1
    for i, (idx, _) in enumerate(neg):       # c_i + sum_j x_j <= |q|
        rows += [r] * (len(idx) + 1)
        cols += [width + len(pos) + i] + [int(j) for j in idx]
        vals += [1.0] * (len(idx) + 1)
        lo.append(-np.inf)
        hi.append(float(len(idx)))
        r += 1
    a = sparse.csr_matrix((vals, (rows, cols)), shape=(r, nv))
    integrality = np.concatenate([np.ones(width), np.zeros(nq)])
    res = milp(obj, constraints=LinearConstraint(a, lo, hi), integrality=integrality, bounds=Bounds(0.0, 1.0),
               options={"presolve": True})
    if res.x is None:
        raise RuntimeError(f"FEM oracle: HiGHS found no solution ({res.message})")
    x = np.round(res.x[:width]).astype(np.int64)
    out = np.empty(len(sizes), dtype=np.int64)
    start = 0
    for j, k in enumerate(sizes):
        out[j] = int(np.argmax(x[start:start + k]))
        start += k
    return out


class FEM(Synthesizer):
    """FEM: exponential-mechanism query selection against follow-the-perturbed-leader synthetic rows.

    Examples
    --------
    >>> import numpy as np
    >>> from dpstats.synth.base import DiscreteData, Domain
    >>> x = np.random.default_rng(0).integers(0, 3, size=(400, 3))
    >>> res = FEM(rounds=5, samples=4).synthesize(DiscreteData(x, Domain(("a", "b", "c"), (3, 3, 3))), 1.0, 1e-6,
    ...                                           np.random.default_rng(1))
    >>> res.data.n, len(res.ledger)
    (400, 5)
    """

    name = "fem"
    family = "workload"
    interpretation = "standard"
    citation = ("Vietri, Tian, Bun, Steinke, Wu (2020). New oracle-efficient algorithms for private synthetic "
                "data release. ICML 2020 (reference code giusevtr/fem).")
    summary = ("rounds of exponential-mechanism selection of the worst-answered marginal cell (or its negation); "
               "synthetic rows from follow-the-perturbed-leader solved as integer programs (HiGHS)")
    defaults = {
        "rounds": Param(60, "number of rounds T (epsilon_0 = sqrt(8 rho / T)). The reference code fixes "
                            "epsilon_0 (grid 0.003-0.009, fem_grid_search) and runs until the budget is spent: "
                            "290-2,610 rounds of 100 integer programs on Adult at epsilon = 1 over that grid (the "
                            "page); 60 rounds keep Adult within the protocol's 60 s (benchmarks/bench_synth.py)"),
        "samples": Param(10, "FTPL samples (integer programs) per round; reference code samples = 100 "
                             "(fem_grid_search), reduced with rounds for the 60 s"),
        "noise": Param(2.0, "scale of the exponential FTPL perturbation; the middle of the reference code's "
                            "grid noise in {1, 2, 3} (fem_grid_search)"),
        "label": Param(None, "label column: workload of Tao et al. (2021), 2- and 3-way marginals with the label"),
    }
    accountant = ZCDPAccountant

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        for key in ("rounds", "samples"):
            v = self.params[key]
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise ValueError(f"FEM: {key} must be an integer >= 1, got {v!r}")
        v = self.params["noise"]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not (v > 0 and math.isfinite(v)):
            raise ValueError(f"FEM: noise must be a finite number > 0, got {v!r}")

    def _synthesize(self, data: DiscreteData, accountant: Accountant, rng: np.random.Generator,
                    n_rows: int) -> DiscreteData:
        dom, names, n = data.domain, data.domain.names, data.n
        sizes = dom.shape
        workload = paper_workload(names, self.params["label"]) if len(names) > 1 else [tuple(names)]
        cols = [tuple(names.index(c) for c in q) for q in workload]
        cells, owner = workload_cells(sizes, cols)
        first = np.concatenate([[0], np.cumsum([c.shape[0] for c in cells])[:-1]])
        nq = owner.size
        real = np.concatenate([data.marginal(list(q)).ravel() for q in workload])
        T, s, scale = int(self.params["rounds"]), int(self.params["samples"]), float(self.params["noise"])
        rho = accountant.remaining
        eps0 = math.sqrt(8.0 * rho / T)
        width = int(sum(sizes))

        def cell(i: int) -> np.ndarray:
            m = int(owner[i])
            out: np.ndarray = cells[m][i - first[m]]
            return out

        weights_pos: dict[int, float] = {}
        weights_neg: dict[int, float] = {}
        # the reference code starts from one query and one negation drawn uniformly (data-independent)
        weights_pos[int(rng.integers(nq))] = 1.0
        weights_neg[int(rng.integers(nq))] = 1.0

        def ftpl() -> np.ndarray:
            pos = [(cell(i), w) for i, w in weights_pos.items()]
            neg = [(cell(i), w) for i, w in weights_neg.items()]
            return np.array([best_response(sizes, pos, neg, rng.exponential(scale, size=width)) for _ in range(s)])

        delta = accountant.delta
        eps_total = zcdp_epsilon(T * eps0 ** 2 / 8.0, delta)
        current = ftpl()
        kept: list[np.ndarray] = []
        for t in range(T):
            syn = DiscreteData(current, dom)
            fake = np.concatenate([syn.marginal(list(q)).ravel() for q in workload]) * (n / s)
            score = np.concatenate([real - fake, fake - real])
            last = t == T - 1
            e = math.sqrt(8.0 * accountant.remaining) if last else eps0
            i = accountant.exponential(
                "fem:select", score, sensitivity=1.0, epsilon=e, rng=rng, bound="bounded_range",
                note="score +-(count_q(D) - n q(D_t)), replace-one sensitivity 1")
            target = weights_pos if i < nq else weights_neg
            target[i % nq] = target.get(i % nq, 0.0) + 1.0
            current = ftpl()
            # the reference keeps the samples drawn once half the epsilon is spent ("halves the final error")
            if zcdp_epsilon((t + 1) * eps0 ** 2 / 8.0, delta) >= eps_total / 2:
                kept.append(current)
        pool = np.concatenate(kept) if kept else current
        out = pool[rng.integers(0, pool.shape[0], size=n_rows)] if n_rows else np.zeros((0, len(dom)), np.int64)
        self.details = {"workload": workload, "epsilon_0": eps0, "rounds": T, "samples_kept": int(pool.shape[0]),
                        "distinct_queries": len(weights_pos) + len(weights_neg)}
        return data.with_codes(out)
