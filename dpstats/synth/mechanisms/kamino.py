"""Kamino (Ge, Mohapatra, He, Ilyas 2021): constraint-aware sequential synthesis with DP-trained conditionals.

Privacy argument (full version: ``docs/synth/kamino.md``)
--------------------------------------------------------
zCDP, replace-one neighbours, ``n``, the domain, the attribute order and the
denial constraints (DCs) and their given weights public. The remaining
``rho`` is split ``hist_share``, ``dc_share`` (only when some DC weights are
learned) and the rest:

1. the first attribute of the order: its counts with Gaussian noise, L2
   sensitivity ``sqrt(2)``, ``sigma = sqrt(2) / sqrt(2 hist_share rho)``;
2. the ``m`` DCs whose weight is learned: their numbers of ordered violating
   pairs, one Gaussian mechanism; one row is in ``2 (n - 1)`` ordered pairs,
   so the L2 sensitivity is ``2 (n - 1) sqrt(m)``, ``sigma = 2 (n - 1)
   sqrt(m) / sqrt(2 dc_share rho)``;
3. each later attribute ``A_j`` (``d - 1`` models): a softmax model of
   ``P(A_j | A_1..A_{j-1})`` trained by ``steps`` full-batch noisy gradient
   steps. Each step clips every row's gradient to L2 norm ``clip``, sums them
   and adds ``N(0, sigma^2 I)``; replacing one row changes one clipped
   gradient, so the sum has L2 sensitivity ``2 clip`` and the step is a
   Gaussian mechanism of zCDP cost ``(2 clip)^2 / (2 sigma^2)``. The model
   before a step depends on the data only through the earlier noisy sums
   (adaptive composition). All ``(d - 1) steps`` steps cost the same
   ``rho_step`` (what is left after 1 and 2, divided by ``(d - 1) steps``),
   ``sigma = 2 clip / sqrt(2 rho_step)``; the last step takes exactly what is
   left (rounding).

Sampling tuples attribute by attribute from the released models, with each
candidate value weighted by ``exp(-w * violations)`` against the tuples
already generated, uses released models, public constraints and the noisy
violation rates only: post-processing, and so is choosing a learned weight
(the one whose sampled violation rate matches the noisy real rate, by
bisection over sampling passes).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpstats.privacy.accounting import Accountant, ZCDPAccountant
from dpstats.synth.base import DiscreteData, Domain, Param, Synthesizer

__all__ = ["Kamino", "DenialConstraint", "Predicate", "parse_constraint", "constraint_order", "violations",
           "context_features", "clipped_gradient_sum"]

#: comparison operators of a DC predicate ``t1.A op t2.A`` (Kamino's / HoloClean's names)
OPS: dict[str, Any] = {
    "EQ": np.equal, "IQ": np.not_equal, "LT": np.less, "GT": np.greater, "LTE": np.less_equal,
    "GTE": np.greater_equal,
}

#: largest number of cells of a DC's columns (the size of its violation table, updated once per generated tuple)
MAX_DC_CELLS = 1_000_000


@dataclass(frozen=True)
class Predicate:
    """``t1.column op t2.column`` on the coded values (codes of a numeric column are ordered cells)."""

    column: str
    op: str

    def __post_init__(self) -> None:
        if self.op not in OPS:
            raise ValueError(f"DC predicate on {self.column!r}: unknown operator {self.op!r}; known: {', '.join(OPS)}")


@dataclass(frozen=True)
class DenialConstraint:
    """A denial constraint over pairs of tuples: no ordered pair ``(t1, t2)`` of distinct tuples satisfies every predicate.

    Attributes
    ----------
    predicates : tuple of Predicate
        At most one per column.
    weight : float or None
        ``math.inf`` for a hard constraint; a soft one multiplies a candidate
        value's probability by ``exp(-weight * violations)``; ``None``: a soft
        one whose weight is learned under DP (:class:`Kamino`, ``dc_share``).
    text : str
        The constraint as written (for messages).

    Examples
    --------
    >>> dc = parse_constraint("education -> education-num")
    >>> [(p.column, p.op) for p in dc.predicates], dc.weight
    ([('education', 'EQ'), ('education-num', 'IQ')], inf)
    >>> parse_constraint("t1&t2&LT(t1.gain,t2.gain)&LT(t1.loss,t2.loss)", weight=2.0).columns
    ('gain', 'loss')
    """

    predicates: tuple[Predicate, ...]
    weight: float | None = math.inf
    text: str = ""

    def __post_init__(self) -> None:
        cols = [p.column for p in self.predicates]
        if len(cols) < 2:
            raise ValueError(f"DC {self.text!r}: needs predicates on at least two columns")
        if len(set(cols)) != len(cols):
            raise ValueError(f"DC {self.text!r}: two predicates on one column")
        w = self.weight
        if w is not None and (isinstance(w, bool) or not isinstance(w, (int, float)) or not w > 0):
            raise ValueError(f"DC {self.text!r}: weight must be > 0 (math.inf for a hard constraint) or 'learn', "
                             f"got {w!r}")

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(p.column for p in self.predicates)

    @property
    def is_fd(self) -> bool:
        """A functional dependency: equalities on the determinant, one inequality."""
        ops = [p.op for p in self.predicates]
        return ops.count("IQ") == 1 and all(o in ("EQ", "IQ") for o in ops)


_FD = re.compile(r"^\s*([^>]+?)\s*->\s*(.+?)\s*$")
_PRED = re.compile(r"^(EQ|IQ|LT|GT|LTE|GTE)\(t1\.(.+),t2\.(.+)\)$")


def parse_constraint(text: str | DenialConstraint | tuple[Any, Any], weight: float | None = math.inf) -> DenialConstraint:
    """A DC from ``"A, B -> C"`` (a functional dependency) or Kamino's ``t1&t2&EQ(t1.A,t2.A)&IQ(t1.C,t2.C)``.

    A ``(text, weight)`` pair sets the weight (``"learn"``: learned under DP);
    a :class:`DenialConstraint` is returned as is.

    Raises
    ------
    ValueError
        For text in neither form.
    """
    if isinstance(text, DenialConstraint):
        return text
    if isinstance(text, tuple):
        if len(text) != 2:
            raise ValueError(f"a weighted DC is a (text, weight) pair, got {text!r}")
        return parse_constraint(text[0], weight=None if text[1] == "learn" else text[1])
    if not isinstance(text, str):
        raise ValueError(f"a DC is a string, a (string, weight) pair or a DenialConstraint, got {text!r}")
    s = text.strip()
    if s.startswith("t1&t2&"):
        preds = []
        for part in s[len("t1&t2&"):].split("&"):
            m = _PRED.match(part.strip())
            if m is None or m.group(2) != m.group(3):
                raise ValueError(f"DC {text!r}: cannot read predicate {part!r} (want OP(t1.A,t2.A))")
            preds.append(Predicate(m.group(2), m.group(1)))
        return DenialConstraint(tuple(preds), weight, text)
    m = _FD.match(s)
    if m is None:
        raise ValueError(f"DC {text!r}: write 'A, B -> C' or Kamino's 't1&t2&EQ(t1.A,t2.A)&IQ(t1.C,t2.C)'")
    lhs = [c.strip() for c in m.group(1).split(",") if c.strip()]
    rhs = m.group(2).strip()
    return DenialConstraint(tuple(Predicate(c, "EQ") for c in lhs) + (Predicate(rhs, "IQ"),), weight, text)


def constraint_order(domain: Domain, dcs: Sequence[DenialConstraint], label: str | None = None,
                     order: Sequence[str] | None = None) -> tuple[str, ...]:
    """The public attribute order: given, or from the DCs (Kamino's ``find_sequence_alg``), then the schema's.

    Without ``order``: the functional dependencies by the smallest domain of
    their determinant, each adding its determinant columns (smaller domains
    first) then its dependent; then the columns of the other DCs (smaller
    domains first); then the remaining columns in schema order, with
    ``label`` (when given and not yet placed) last.
    """
    names = domain.names
    if order is not None:
        order = tuple(order)
        unknown = [c for c in order if c not in names]
        if unknown:
            raise ValueError(f"Kamino: order names unknown column {unknown[0]!r}")
        if sorted(order) != sorted(names):
            raise ValueError("Kamino: order must list every column exactly once")
        return order
    seq: list[str] = []
    fds = [dc for dc in dcs if dc.is_fd]
    fds.sort(key=lambda dc: min(domain[p.column] for p in dc.predicates if p.op == "EQ"))
    for dc in fds:
        lhs = sorted((p.column for p in dc.predicates if p.op == "EQ"), key=lambda c: domain[c])
        rhs = [p.column for p in dc.predicates if p.op == "IQ"]
        seq += [c for c in lhs + rhs if c not in seq]
    for dc in dcs:
        if not dc.is_fd:
            seq += [c for c in sorted(dc.columns, key=lambda c: domain[c]) if c not in seq]
    rest = [c for c in names if c not in seq and c != label]
    seq += rest
    if label is not None and label not in seq:
        seq.append(label)
    return tuple(seq)


def violations(codes: np.ndarray, domain: Domain, dc: DenialConstraint) -> int:
    """Number of ordered pairs of distinct rows of ``codes`` that violate ``dc`` (on the codes).

    Counted from the joint counts of the DC's columns, so it needs no pass
    over pairs of rows (distinct rows with equal codes are counted as pairs).
    """
    idx = [domain.names.index(c) for c in dc.columns]
    shape = tuple(domain[c] for c in dc.columns)
    flat = np.ravel_multi_index(tuple(codes[:, i] for i in idx), shape)
    counts = np.bincount(flat, minlength=int(np.prod(shape))).reshape(shape).astype(float)
    # for each cell x, the number of rows y with every predicate op(x_c, y_c): a contraction per column
    cells = counts.copy()
    for ax, p in enumerate(dc.predicates):
        k = shape[ax]
        m = OPS[p.op](np.arange(k)[:, None], np.arange(k)[None, :]).astype(float)   # m[x, y] = op(x, y)
        cells = np.moveaxis(np.tensordot(m, cells, axes=([1], [ax])), 0, ax)
    total = float((counts * cells).sum())
    # a row paired with itself satisfies the DC only if every op is reflexive (EQ, LTE, GTE)
    if all(p.op in ("EQ", "LTE", "GTE") for p in dc.predicates):
        total -= float(counts.sum())
    return int(round(total))


class _DCState:
    """One DC's violation counts for every candidate value of its last column, against the tuples generated so far.

    ``table[x, v]`` is the number of ordered pairs (both orders) that a new
    tuple with the DC's other columns at cell ``x`` and its last column at
    ``v`` would form in violation with the tuples added so far; :meth:`add`
    updates it in ``O(cells * k)``, so a lookup costs ``O(k)``.
    """

    def __init__(self, dc: DenialConstraint, domain: Domain, order: Sequence[str]) -> None:
        pos = {c: i for i, c in enumerate(order)}
        cols = sorted(dc.columns, key=lambda c: pos[c])
        self.dc, self.target = dc, cols[-1]
        self.others = cols[:-1]
        preds = {p.column: p.op for p in dc.predicates}
        self.other_idx = [domain.names.index(c) for c in self.others]
        self.other_shape = tuple(domain[c] for c in self.others)
        kb = domain[self.target]
        ncells = int(np.prod(self.other_shape))
        if ncells * kb > MAX_DC_CELLS:
            raise ValueError(f"Kamino: DC {dc.text!r}: its columns have {ncells * kb} cells "
                             f"(at most {MAX_DC_CELLS})")
        self.table = np.zeros((ncells, kb))
        # op_c(x, y) per other column: [x, y]; the new tuple is t1 (forward) or t2 (reverse)
        self.ops = [OPS[preds[c]](np.arange(k)[:, None], np.arange(k)[None, :]) for c, k in
                    zip(self.others, self.other_shape, strict=True)]
        opb = OPS[preds[self.target]]
        self.b_fwd = opb(np.arange(kb)[:, None], np.arange(kb)[None, :]).astype(float)   # [v, b'] op(v, b')
        self.b_rev = opb(np.arange(kb)[None, :], np.arange(kb)[:, None]).astype(float)   # [v, b'] op(b', v)

    def flat(self, x: np.ndarray) -> int:
        return int(np.ravel_multi_index(tuple(int(c) for c in x), self.other_shape))

    def add(self, y: np.ndarray, b: int) -> None:
        """Record a generated tuple with the other columns at ``y`` and the last column at ``b``."""
        fwd = np.ones(1)
        rev = np.ones(1)
        for m, yi in zip(self.ops, y, strict=True):
            fwd = np.outer(fwd, m[:, yi]).ravel()     # op(x, y) over the cells x
            rev = np.outer(rev, m[yi, :]).ravel()     # op(y, x)
        self.table += np.outer(fwd, self.b_fwd[:, b]) + np.outer(rev, self.b_rev[:, b])


def context_features(codes: np.ndarray, ctx: Sequence[int], shape: Sequence[int]) -> Any:
    """One-hot features of the context columns ``ctx`` plus a bias, scaled so that every row has L2 norm 1 (CSR)."""
    from scipy import sparse

    offs = np.concatenate([[1], 1 + np.cumsum([shape[c] for c in ctx])]).astype(np.int64)
    n, m = codes.shape[0], len(ctx) + 1
    idx = np.empty((n, m), dtype=np.int64)
    idx[:, 0] = 0
    for i, c in enumerate(ctx):
        idx[:, i + 1] = offs[i] + codes[:, c]
    return sparse.csr_matrix((np.full(idx.size, 1.0 / math.sqrt(m)), idx.ravel(), np.arange(0, idx.size + 1, m)),
                             shape=(n, int(offs[-1])))


def clipped_gradient_sum(x: Any, y: np.ndarray, w: np.ndarray, clip: float, xt: Any = None,
                         row_norms: np.ndarray | None = None) -> np.ndarray:
    """Sum over rows of the cross-entropy gradient of the softmax model ``x @ w``, each row's clipped to L2 norm ``clip``.

    Row ``i``'s gradient is ``x_i (softmax(x_i w) - e_{y_i})^T``, whose
    Frobenius norm is ``||x_i|| ||softmax - e_y||`` (rank one), so clipping
    scales the residual; :func:`context_features` rows have norm 1.
    ``xt`` (``x.T`` as CSR) and ``row_norms`` may be passed precomputed.
    """
    s = _softmax(np.asarray(x @ w))
    s[np.arange(s.shape[0]), y] -= 1.0
    xn = np.sqrt(np.asarray(x.multiply(x).sum(axis=1)).ravel()) if row_norms is None else row_norms
    norm = np.sqrt((s * s).sum(axis=1)) * xn
    s *= np.minimum(1.0, clip / np.maximum(norm, 1e-12))[:, None]
    out: np.ndarray = np.asarray((x.T if xt is None else xt) @ s)
    return out


def _softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    out: np.ndarray = e / e.sum(axis=1, keepdims=True)
    return out


class Kamino(Synthesizer):
    """Kamino: noisy first-attribute histogram, DP-trained conditionals in a constraint-aware order, DC-aware sampling.

    Examples
    --------
    >>> import numpy as np
    >>> from dpstats.synth.base import DiscreteData, Domain
    >>> x = np.random.default_rng(0).integers(0, 3, size=(400, 3))
    >>> x[:, 2] = x[:, 0]
    >>> res = Kamino(steps=5, constraints=["a -> c"]).synthesize(
    ...     DiscreteData(x, Domain(("a", "b", "c"), (3, 3, 3))), 1.0, 1e-6, np.random.default_rng(1))
    >>> res.data.n, len(res.ledger), res.details["order"], res.details["violations"]
    (400, 11, ['a', 'c', 'b'], [0])
    """

    name = "kamino"
    family = "other"
    interpretation = "standard"
    citation = ("Ge, Mohapatra, He, Ilyas (2021). Kamino: Constraint-aware differentially private data synthesis. "
                "PVLDB 14(10), 1886-1899 (reference code cgebest/kamino).")
    summary = ("attributes in a constraint-aware order: the first from a noisy histogram, each later one from a "
               "softmax model of it given the earlier ones trained by noisy clipped gradient descent; tuples "
               "sampled with candidate values down-weighted by their denial-constraint violations")
    defaults = {
        "hist_share": Param(0.1, "share of the budget for the first attribute's histogram; the reference's "
                                 "syn_adult.py spends epsilon1 = 0.1 of epsilon = 1 on it"),
        "clip": Param(1.0, "per-row gradient clip C (L2); the reference's l2_norm_clip = 1.0 (syn_adult.py)"),
        "steps": Param(40, "noisy gradient steps per model (full batch). The reference runs 1600 DP-SGD "
                           "iterations of batches of 23 rows (syn_adult.py, about one epoch of Adult); full-batch "
                           "steps cost a whole Gaussian each, and 40 keeps Adult within the protocol's 60 s "
                           "(benchmarks/bench_synth.py)"),
        "learning_rate": Param(4.0, "step size on the mean gradient; ours: 2 / L for the mean cross-entropy of a "
                                    "softmax on features of norm 1, whose smoothness L is at most 1/2 (gradient "
                                    "descent then decreases the noiseless loss); 10 did better on Adult at "
                                    "epsilon 1 but oscillated on Bank at epsilon 50 (docs/synth/kamino.md)"),
        "constraints": Param((), "public denial constraints: 'A -> B' or Kamino's 't1&t2&EQ(t1.A,t2.A)&...' "
                                 "strings (hard), (string, weight) pairs (soft; weight 'learn': learned under "
                                 "DP) or DenialConstraint objects"),
        "dc_share": Param(0.05, "share of the budget for the noisy violation counts of the DCs whose weight is "
                                "learned (spent only when there are some); ours: the reference's epsilon_learnW "
                                "is a separate budget, set per run"),
        "calibration_steps": Param(8, "bisection steps (sampling passes) per learned weight, on log10 w in "
                                      "[-6, 2]; ours (post-processing, costs time only)"),
        "order": Param(None, "public attribute order; default: from the constraints (Kamino's "
                             "find_sequence_alg), then schema order with the label last"),
        "label": Param(None, "label column, placed last in the default order (Tao et al. 2021's ML efficacy "
                             "target)"),
    }
    accountant = ZCDPAccountant

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        v = self.params["steps"]
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"Kamino: steps must be an integer >= 1, got {v!r}")
        for key in ("clip", "learning_rate"):
            v = self.params[key]
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not (v > 0 and math.isfinite(v)):
                raise ValueError(f"Kamino: {key} must be a finite number > 0, got {v!r}")
        for key in ("hist_share", "dc_share"):
            v = self.params[key]
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v < 1:
                raise ValueError(f"Kamino: {key} must lie in (0, 1), got {v!r}")
        if self.params["hist_share"] + self.params["dc_share"] >= 1:
            raise ValueError("Kamino: hist_share + dc_share must be < 1")
        v = self.params["calibration_steps"]
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"Kamino: calibration_steps must be an integer >= 1, got {v!r}")
        cons = self.params["constraints"]
        if isinstance(cons, (str, DenialConstraint)):
            cons = [cons]
        self.dcs: tuple[DenialConstraint, ...] = tuple(parse_constraint(c) for c in cons)

    def _check(self, domain: Domain) -> None:
        for dc in self.dcs:
            for c in dc.columns:
                if c not in domain:
                    raise ValueError(f"Kamino: DC {dc.text!r} names unknown column {c!r}; "
                                     f"columns: {', '.join(domain.names)}")
        lab = self.params["label"]
        if lab is not None and lab not in domain:
            raise ValueError(f"Kamino: label {lab!r} is not a column")

    def _synthesize(self, data: DiscreteData, accountant: Accountant, rng: np.random.Generator,
                    n_rows: int) -> DiscreteData:
        dom = data.domain
        self._check(dom)
        order = constraint_order(dom, self.dcs, self.params["label"], self.params["order"])
        col = [dom.names.index(c) for c in order]
        targets = [_DCState(dc, dom, order).target for dc in self.dcs]     # checks the DCs' sizes before any spend
        d = len(order)
        rho = accountant.remaining
        share = float(self.params["hist_share"]) if d > 1 else 1.0
        clip, T, lr = float(self.params["clip"]), int(self.params["steps"]), float(self.params["learning_rate"])
        # 1. the first attribute: a noisy histogram
        sigma_h = math.sqrt(2.0) / math.sqrt(2.0 * share * rho)
        first = accountant.gaussian(
            f"kamino:hist:{order[0]}", data.marginal([order[0]]), sensitivity=math.sqrt(2.0), sigma=sigma_h,
            rng=rng, note="counts of the first attribute, replace-one L2 sensitivity sqrt(2)")
        p0 = np.clip(np.asarray(first, float), 0.0, None)
        p0 = p0 / p0.sum() if p0.sum() > 0 else np.full(p0.size, 1.0 / p0.size)
        # 1b. noisy violation counts of the DCs whose weight is learned
        learned = [i for i, dc in enumerate(self.dcs) if dc.weight is None]
        rates: dict[int, float] = {}
        sigma_dc = 0.0
        if learned:
            n, m = data.n, len(learned)
            sens = 2.0 * (n - 1) * math.sqrt(m)
            sigma_dc = sens / math.sqrt(2.0 * float(self.params["dc_share"]) * rho)
            counts = np.array([violations(data.codes, dom, self.dcs[i]) for i in learned], dtype=float)
            noisy_v = np.asarray(accountant.gaussian(
                "kamino:dc_violations", counts, sensitivity=sens, sigma=sigma_dc, rng=rng,
                note="ordered violating pairs per learned DC; one row is in 2(n-1) ordered pairs"))
            pairs = max(n * (n - 1), 1)
            rates = {i: float(np.clip(v / pairs, 0.0, 1.0)) for i, v in zip(learned, noisy_v, strict=True)}
        # 2. one softmax model per later attribute, noisy full-batch gradient descent
        models: list[np.ndarray] = []
        sigma = 0.0
        if d > 1:
            rho_step = accountant.remaining / ((d - 1) * T)
            sigma = 2.0 * clip / math.sqrt(2.0 * rho_step)
            for j in range(1, d):
                models.append(self._train(data, col[:j], col[j], T, clip, lr, sigma, accountant, rng,
                                          last=j == d - 1, name=order[j]))
        # 3. sampling (post-processing)
        out = np.zeros((n_rows, d), dtype=np.int64)
        if n_rows:
            out[:, col[0]] = rng.choice(p0.size, size=n_rows, p=p0)
        weights = [math.inf if dc.weight is None else float(dc.weight) for dc in self.dcs]
        for i in learned:
            weights[i] = 0.0
        fallbacks = 0
        for j in range(1, d):
            probs = _softmax(np.asarray(context_features(out, col[:j], dom.shape) @ models[j - 1]))
            here = [i for i, t in enumerate(targets) if t == order[j]]
            if not here:
                c = np.cumsum(probs, axis=1)
                u = rng.random(n_rows)[:, None] * c[:, -1:]
                out[:, col[j]] = np.minimum((u > c).sum(axis=1), probs.shape[1] - 1)
                continue
            for i in (i for i in here if i in rates):
                weights[i] = self._calibrate(out, probs, col[j], here, weights, i, rates[i], dom, order, rng)
            fallbacks += self._sample_constrained(out, probs, col[j], [self.dcs[i] for i in here],
                                                  [weights[i] for i in here], dom, order, rng)
        self.details = {
            "order": list(order), "hist_sigma": sigma_h, "step_sigma": sigma, "steps": T,
            "constraint_fallbacks": fallbacks, "weights": weights, "dc_sigma": sigma_dc,
            "target_rates": [rates.get(i) for i in range(len(self.dcs))],
            "violations": [violations(out, dom, dc) for dc in self.dcs],
        }
        return data.with_codes(out)

    def _train(self, data: DiscreteData, ctx: Sequence[int], target: int, T: int, clip: float, lr: float,
               sigma: float, accountant: Accountant, rng: np.random.Generator, *, last: bool,
               name: str) -> np.ndarray:
        """Softmax regression of ``target`` on the one-hot context (scaled to norm 1), ``T`` noisy clipped steps."""
        shape = data.domain.shape
        n, k = data.n, shape[target]
        x = context_features(data.codes, ctx, shape)
        xt = x.T.tocsr()
        y = data.codes[:, target]
        w = np.zeros((x.shape[1], k))
        xn = np.sqrt(np.asarray(x.multiply(x).sum(axis=1)).ravel())
        for t in range(T):
            g = clipped_gradient_sum(x, y, w, clip, xt, xn)
            sig = sigma
            if last and t == T - 1:                    # the last step takes exactly what is left
                sig = 2.0 * clip / math.sqrt(2.0 * accountant.remaining)
            noisy = accountant.gaussian(
                f"kamino:step:{name}", g, sensitivity=2.0 * clip, sigma=sig, rng=rng,
                note="sum of per-row gradients clipped to L2 norm C, replace-one sensitivity 2C")
            w -= lr * np.asarray(noisy) / n
        return w

    def _calibrate(self, out: np.ndarray, probs: np.ndarray, target: int, here: list[int], weights: list[float],
                   i: int, rate: float, dom: Domain, order: Sequence[str], rng: np.random.Generator) -> float:
        """The weight of DC ``i`` whose sampled violation rate matches the noisy ``rate`` (bisection on log10 w).

        Post-processing: sampling passes from the released models with the
        released rate; every pass reuses one random stream (common random
        numbers: the next draws of ``rng``, which the final pass then makes),
        so the rate is a step function of the weight alone.
        """
        import copy

        dc = self.dcs[i]
        stream = copy.deepcopy(rng)      # the passes replay rng's next draws; rng itself is not advanced
        n_rows = out.shape[0]
        pairs = max(n_rows * (n_rows - 1), 1)

        def sampled_rate(w: float) -> float:
            trial = out.copy()
            ws = [w if k == i else weights[k] for k in here]
            self._sample_constrained(trial, probs, target, [self.dcs[k] for k in here], ws, dom, order,
                                     copy.deepcopy(stream))
            return float(violations(trial, dom, dc) / pairs)

        if sampled_rate(0.0) <= rate:
            return 0.0
        lo, hi = -6.0, 2.0
        for _ in range(int(self.params["calibration_steps"])):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if sampled_rate(10.0 ** mid) > rate else (lo, mid)
        return float(10.0 ** hi)

    def _sample_constrained(self, out: np.ndarray, probs: np.ndarray, target: int, dcs: list[DenialConstraint],
                            weights: list[float], dom: Domain, order: Sequence[str],
                            rng: np.random.Generator) -> int:
        """Sample column ``target`` row by row, weights ``p(v) exp(-sum w * violations)``; returns the fallbacks."""
        states = [_DCState(dc, dom, order) for dc in dcs]
        fallbacks = 0
        u = np.asarray(rng.random(out.shape[0]), dtype=float)
        for i in range(out.shape[0]):
            logw = np.log(np.maximum(probs[i], 1e-300))
            hard = np.zeros(probs.shape[1])
            cells = []
            for s, w in zip(states, weights, strict=True):
                x = out[i, s.other_idx]
                cells.append(x)
                v = s.table[s.flat(x)]
                if math.isinf(w):
                    hard += v
                elif w > 0:
                    logw -= w * v
            low = hard.min()
            if low > 0:
                fallbacks += 1
            logw = np.where(hard == low, logw, -np.inf)
            pw = np.exp(logw - logw.max())
            c = np.cumsum(pw)
            val = min(int(np.searchsorted(c, float(u[i] * c[-1]), side="right")), c.size - 1)
            out[i, target] = val
            for s, x in zip(states, cells, strict=True):
                s.add(x, val)
        return fallbacks
