"""Private-PGM helpers shared by MST, AIM and MWEM-PGM (post-processing only).

Everything here works on *released* quantities (noisy marginals and their
noise scales) or on public facts (the domain, ``n``): estimating a graphical
model from noisy measurements by Private-PGM's mirror descent (McKenna,
Sheldon, Miklau 2019, Algorithm 1, with ``mbi``'s Armijo line search),
and projecting it (sampling rows from it is :mod:`._pgm_sample`). No
function here reads private data, so nothing here is charged.

Two implementations of the same iteration (:func:`estimate` picks one by the
size of the model's junction tree): for small models a NumPy loop over
``mbi``'s junction tree (no compilation; the AIM and MWEM-PGM models of the
benchmark's data sets have a few thousand cells, and compiling ``mbi``'s JAX
loop took 4-5 s of CPU per round there, against about 1 ms per NumPy
iteration), and for large ones ``mbi.estimation.MirrorDescent`` itself, compiled
by JAX once per model structure. ``tests/synth/test_mechanisms.py`` checks that
the two give the same model.

JAX and ``mbi`` are imported inside :func:`load_mbi` (never at module level),
with 64-bit floats enabled (float32 stalls above 100k rows) and JAX's
persistent compilation cache disabled (``mbi``'s advice).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpstats.synth.base import Domain

__all__ = ["load_mbi", "mbi_domain", "Measurement", "Model", "estimate", "pool_measurements", "JunctionTree",
           "ModelMarginals", "marginal", "model_size_mb", "simplex_projection", "NUMPY_MAX_CELLS",
           "NUMPY_MAX_WORK"]

#: one noisy marginal: (clique, noisy counts flattened in the clique's order, noise standard deviation)
Measurement = tuple[tuple[str, ...], np.ndarray, float]

#: the NumPy loop fits junction trees of at most this many cells and at most NUMPY_MAX_WORK cells x iterations;
#: larger fits go to mbi's JAX loop, whose compilation (5-15 s of CPU on Adult's models) then pays for itself
#: (measured on this machine: NumPy about 70 ns per cell and iteration up to 100k cells, superlinear above)
NUMPY_MAX_CELLS = 250_000
NUMPY_MAX_WORK = 100_000_000


def load_mbi() -> Any:
    """Import ``mbi`` with JAX in float64 (lazily: listing synthesizers never imports JAX)."""
    import jax

    jax.config.update("jax_enable_x64", True)  # type: ignore[no-untyped-call]
    jax.config.update("jax_enable_compilation_cache", False)  # type: ignore[no-untyped-call]
    import mbi

    return mbi


def mbi_domain(domain: Domain) -> Any:
    """The ``mbi.Domain`` of a :class:`~dpstats.synth.base.Domain`."""
    mbi = load_mbi()
    return mbi.Domain(domain.names, domain.shape)


@dataclass(frozen=True)
class Model:
    """A fitted Markov random field: ``P(x) ∝ exp(sum_C potentials[C](x_C))``, scaled to ``total`` rows.

    ``potentials`` maps each clique (attributes in the domain's order) to its
    log-potential table (axes in the same order).
    """

    domain: Domain
    potentials: dict[tuple[str, ...], np.ndarray]
    total: float
    #: mirror-descent iterations the fit ran (0 when unknown: ``mbi``'s JAX estimator, or no fit)
    iterations: int = 0

    @property
    def cliques(self) -> list[tuple[str, ...]]:
        return list(self.potentials)

    @classmethod
    def from_mbi(cls, mrf: Any, domain: Domain) -> Model:
        """The model of an ``mbi.MarkovRandomField`` fitted on ``domain``."""
        pos = {name: j for j, name in enumerate(domain.names)}
        pots = {}
        for cl in mrf.potentials.cliques:
            f = mrf.potentials[cl]
            attrs = tuple(f.domain.attributes)
            can = _canonical(pos, attrs)
            pots[can] = np.transpose(np.asarray(f.values, dtype=float), [attrs.index(a) for a in can])
        return cls(domain, pots, float(mrf.total))

    def to_mbi_potentials(self) -> Any:
        """The potentials as an ``mbi.CliqueVector`` (for ``mbi``'s estimators)."""
        mbi = load_mbi()
        import jax.numpy as jnp

        md = mbi_domain(self.domain)
        return mbi.CliqueVector(md, list(self.potentials),
                                {c: mbi.Factor(md.project(c), jnp.asarray(v)) for c, v in self.potentials.items()})


def estimate(domain: Domain, measurements: Sequence[Measurement], total: float, iters: int,
             warm_start: Model | None = None, backend: str = "auto", tol: float = 0.0) -> Model:
    """Fit a Markov random field to noisy marginals by Private-PGM's mirror descent.

    The loss is ``sum_i ||M_i mu - y_i||^2 / (2 sigma_i^2)`` over the
    measurements (``mbi``'s L2 loss), minimised over the marginal polytope of
    the model whose cliques are the maximal measured cliques, starting at step
    size ``2 / (L n)`` (``L`` the loss's Lipschitz constant, ``mbi``'s) with
    ``mbi``'s Armijo line search (step ×1.01 on sufficient decrease, else
    ×0.5 and the step rejected).

    Parameters
    ----------
    domain : Domain
    measurements : sequence of (clique, noisy counts, sigma)
        Repeated cliques are pooled first (:func:`pool_measurements`, exact).
    total : float
        The public number of rows ``n``.
    iters : int
        Mirror-descent iterations (rounded up to mbi's block of 50).
    warm_start : Model, optional
        A previous estimate to start from (AIM, MWEM-PGM): its potentials are
        added into cliques of the new model that contain theirs (the same
        distribution, as ``mbi``'s ``CliqueVector.expand``).
    backend : {"auto", "numpy", "jax"}
        ``"auto"``: NumPy when the junction tree has at most
        :data:`NUMPY_MAX_CELLS` cells and cells times iterations are at most
        :data:`NUMPY_MAX_WORK`, else ``mbi``'s JAX estimator.
    tol : float, default 0
        Convergence stop (NumPy backend only; 0 runs all ``iters``): after
        every block of 50 iterations, stop when the loss decreased by at most
        ``tol`` times its value at the start of the block. Not in ``mbi``,
        whose estimators run a fixed number of iterations.

    Returns
    -------
    Model
    """
    pooled = pool_measurements(measurements)
    if backend == "auto":
        cells = _model_cells(domain.names, domain.shape, frozenset(frozenset(c) for c, _, _ in pooled)) \
            if pooled else 0
        work = cells * 50 * math.ceil(iters / 50)
        backend = "numpy" if cells <= NUMPY_MAX_CELLS and work <= NUMPY_MAX_WORK else "jax"
    if backend == "numpy":
        return _mirror_descent_numpy(domain, pooled, float(total), int(iters), warm_start, float(tol))
    if backend != "jax":
        raise ValueError(f"backend must be 'auto', 'numpy' or 'jax', not {backend!r}")
    mbi = load_mbi()
    import jax.numpy as jnp

    dom = mbi_domain(domain)
    ms = [mbi.LinearMeasurement(jnp.asarray(y), cl, stddev=s) for cl, y, s in pooled]
    est = _fast_mirror_descent()
    warm = warm_start.to_mbi_potentials() if warm_start is not None and warm_start.potentials else None
    mrf = est.estimate(dom, ms, known_total=float(total), iters=int(iters), warm_start=warm)
    return Model.from_mbi(mrf, domain)


def pool_measurements(measurements: Sequence[Measurement]) -> list[Measurement]:
    """Merge repeated measurements of one clique into their precision-weighted mean (an exact rewrite of the loss).

    Private-PGM's loss is ``sum_i ||M_c mu - y_i||^2 / (2 sigma_i^2)``; for the
    measurements ``i`` of one clique ``c`` this equals
    ``||M_c mu - ybar||^2 / (2 sbar^2)`` plus a constant, with
    ``1/sbar^2 = sum_i 1/sigma_i^2`` and ``ybar = sbar^2 sum_i y_i/sigma_i^2``.
    Gradients, ``mbi``'s Lipschitz constant (a sum of ``1/sigma^2`` per
    clique) and the line search's loss differences are unchanged, so mirror
    descent takes the same steps; but the loss keeps the same structure when
    AIM re-measures a clique, so JAX reuses the compiled program. Cliques keep
    the order of their first measurement.

    Examples
    --------
    >>> [(c, y.tolist(), round(s, 6)) for c, y, s in pool_measurements([(("a",), np.array([1.0]), 1.0),
    ...                                                                  (("a",), np.array([3.0]), 1.0)])]
    [(('a',), [2.0], 0.707107)]
    """
    prec: dict[tuple[str, ...], float] = {}
    wsum: dict[tuple[str, ...], np.ndarray] = {}
    for cl, y, s in measurements:
        key, w = tuple(cl), 1.0 / float(s) ** 2
        prec[key] = prec.get(key, 0.0) + w
        wsum[key] = wsum.get(key, 0.0) + w * np.asarray(y, dtype=float)
    return [(key, wsum[key] / prec[key], float(1.0 / math.sqrt(prec[key]))) for key in prec]


def simplex_projection(y: np.ndarray, total: float) -> np.ndarray:
    """Euclidean projection of ``y`` onto ``{x >= 0, sum(x) = total}`` (Duchi et al. 2008).

    This is the Private-PGM estimate of a 1-way marginal when the only
    measurements are 1-way marginals (the model is then a product of
    independent columns, each fitted by least squares on the scaled simplex),
    computed exactly without running mirror descent.

    Examples
    --------
    >>> simplex_projection(np.array([3.0, -1.0, 1.0]), 2.0)
    array([2., 0., 0.])
    """
    y = np.asarray(y, dtype=float)
    if total <= 0:
        return np.zeros_like(y)
    u = np.sort(y)[::-1]
    css = np.cumsum(u) - total
    ks = np.arange(1, y.size + 1)
    r = int(np.nonzero(u - css / ks > 0)[0][-1])
    out: np.ndarray = np.maximum(y - css[r] / (r + 1.0), 0.0)
    return out


_FAST: Any = None


def _fast_mirror_descent() -> Any:
    """``mbi.estimation.MirrorDescent`` (Armijo line search) with one compiled program per model.

    ``mbi``'s ``_init`` and ``_finalize`` evaluate the marginal oracle and the
    loss eagerly, which on CPU compiles every small operation on its own
    (about 170 XLA compilations for Adult's MST model, most of the run time).
    The iteration itself recomputes the marginals from the potentials at each
    step and never reads the initial ones, so here the initial state carries
    the potentials as a placeholder for the marginals and an infinite loss,
    and the result keeps only the final potentials (:class:`Model`; its
    marginals are computed by :class:`ModelMarginals`). The optimisation
    steps are ``mbi``'s own. Used for models above :data:`NUMPY_MAX_CELLS`.
    """
    global _FAST
    if _FAST is not None:
        return _FAST
    mbi = load_mbi()
    import jax.numpy as jnp

    est_mod = mbi.estimation

    class FastMirrorDescent(est_mod.MirrorDescent):  # type: ignore[misc, name-defined]
        def _init(self, domain: Any, loss_fn: Any, known_total: float, *, warm_start: Any = None,
                  constraints: Any = ()) -> Any:
            potentials = est_mod._extract_potentials(warm_start, domain, loss_fn.cliques)
            alpha = 2.0 / (loss_fn.lipschitz * known_total)
            f64 = jnp.float64
            return est_mod.MirrorDescentState(potentials, potentials, jnp.asarray(alpha, dtype=f64),
                                              jnp.asarray(jnp.inf, dtype=f64))

        def _finalize(self, state: Any, known_total: float, constraints: Any = ()) -> Any:
            return mbi.MarkovRandomField(potentials=state.potentials, marginals=state.mu, total=known_total,
                                         constraints=constraints)

    _FAST = FastMirrorDescent()
    return _FAST


def _canonical(pos: dict[str, int], attrs: Sequence[str]) -> tuple[str, ...]:
    return tuple(sorted(attrs, key=pos.__getitem__))


def _logsumexp_axes(values: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    if not axes:
        return values
    m = values.max(axis=axes, keepdims=True)          # potentials are finite (no structural zeros here)
    tmp = values - m                                  # in place below: the same operations, fewer allocations
    np.exp(tmp, out=tmp)
    out: np.ndarray = tmp.sum(axis=axes)
    np.log(out, out=out)
    out += m.squeeze(axis=axes)
    return out


def _axes_out(attrs: tuple[str, ...], keep: Sequence[str]) -> tuple[int, ...]:
    return tuple(i for i, a in enumerate(attrs) if a not in keep)


class JunctionTree:
    """``mbi``'s junction tree of a set of cliques, with exact calibration in NumPy.

    Parameters
    ----------
    domain : Domain
    cliques : sequence of cliques
        The cliques of the potentials (any attribute order).

    Attributes
    ----------
    nodes : list of tuple
        Maximal cliques of the triangulated model graph (attributes in the domain's order).
    order : list of str
        ``mbi``'s elimination order (sampling draws columns in its reverse).
    """

    def __init__(self, domain: Domain, cliques: Sequence[Sequence[str]]) -> None:
        self.domain = domain
        pos = {name: j for j, name in enumerate(domain.names)}
        self._pos = pos
        self.cliques = [_canonical(pos, c) for c in cliques]
        if self.cliques:
            mbi = load_mbi()
            jtree, order = mbi.junction_tree.make_junction_tree(mbi_domain(domain), self.cliques)
            nodes = [_canonical(pos, c) for c in jtree.nodes]
            edges = [(_canonical(pos, a), _canonical(pos, b)) for a, b in jtree.edges()]
        else:
            nodes, edges, order = [], [], list(domain.names)
        self.order: list[str] = list(order)
        self.nodes: list[tuple[str, ...]] = nodes
        self.shape = {c: tuple(domain[a] for a in c) for c in nodes}
        self.adj: dict[tuple[str, ...], list[tuple[str, ...]]] = {c: [] for c in nodes}
        for a, b in edges:
            self.adj[a].append(b)
            self.adj[b].append(a)
        #: for each clique, the first node containing it and the shape lifting its table onto that node
        self.home = [next(C for C in nodes if set(c) <= set(C)) for c in self.cliques]
        self._lift = [_lift_shape(c, C, domain) for c, C in zip(self.cliques, self.home, strict=True)]
        self.parent: dict[tuple[str, ...], tuple[str, ...] | None] = {}
        self.components: list[list[tuple[str, ...]]] = []
        seen: set[tuple[str, ...]] = set()
        for root in nodes:
            if root in seen:
                continue
            comp, i = [root], 0
            seen.add(root)
            self.parent[root] = None
            while i < len(comp):
                u = comp[i]
                i += 1
                for w in self.adj[u]:
                    if w not in seen:
                        seen.add(w)
                        self.parent[w] = u
                        comp.append(w)
            self.components.append(comp)
        # message schedule: (child, parent, axes of the child summed out, shape on the child, shape on the parent)
        self._up = []
        for comp in self.components:
            for u in reversed(comp[1:]):
                p = self.parent[u]
                assert p is not None
                sep = tuple(a for a in u if a in p)
                self._up.append((u, p, _axes_out(u, sep), _lift_shape(sep, u, domain), _lift_shape(sep, p, domain),
                                 _axes_out(p, sep)))
        self.covered = set().union(*map(set, nodes)) if nodes else set()

    @property
    def cells(self) -> int:
        return sum(int(np.prod(s)) for s in self.shape.values())

    def calibrate(self, log_potentials: Sequence[np.ndarray],
                  nodes: Sequence[tuple[str, ...]] | None = None) -> dict[tuple[str, ...], np.ndarray]:
        """Probability tables of the nodes (each summing to one) for potentials aligned with ``cliques``.

        Two-pass HUGIN message passing in log space: collect towards each
        component's root, then distribute, dividing out the upward message.
        ``nodes`` (default: all) are the nodes whose tables are returned; the
        others are calibrated but not exponentiated. The tables are written in
        place into freshly allocated arrays (the same floating-point operations
        in the same order as out-of-place sums: the results are identical).
        """
        belief = {C: np.zeros(self.shape[C]) for C in self.nodes}
        for v, C, shp in zip(log_potentials, self.home, self._lift, strict=False):
            belief[C] += v.reshape(shp)
        up = []
        for u, p, ax_u, _shp_u, shp_p, _ in self._up:
            m = _logsumexp_axes(belief[u], ax_u)
            up.append(m)
            belief[p] += m.reshape(shp_p)
        for (u, p, _ax_u, shp_u, _shp_p, ax_p), m_up in zip(reversed(self._up), reversed(up), strict=True):
            msg = _logsumexp_axes(belief[p], ax_p)
            msg -= m_up
            belief[u] += msg.reshape(shp_u)
        want = set(self.nodes) if nodes is None else set(nodes)
        out = {}
        for comp in self.components:                  # calibrated: every node of a component has the same log Z
            b = belief[comp[0]]
            m = b.max()
            tmp = b - m
            np.exp(tmp, out=tmp)
            log_z = m + math.log(tmp.sum())
            for C in comp:
                if C in want:
                    t = belief[C]
                    t -= log_z
                    np.exp(t, out=t)
                    out[C] = t
        return out


def _lift_shape(attrs: tuple[str, ...], target: tuple[str, ...], domain: Domain) -> tuple[int, ...]:
    """Shape broadcasting a table over ``attrs`` onto ``target`` (both in the domain's order)."""
    return tuple(domain[a] if a in attrs else 1 for a in target)


def _mirror_descent_numpy(domain: Domain, pooled: list[Measurement], total: float, iters: int,
                          warm_start: Model | None, tol: float = 0.0) -> Model:
    """Private-PGM's mirror descent with ``mbi``'s line search, on ``mbi``'s junction tree, in NumPy.

    Each step: gradient ``g`` of the loss at the current marginals ``mu``
    (``(P_i mu - y_i) / sigma_i^2`` for measurement ``i``), trial potentials
    ``theta - alpha g``, their marginals ``mu2``; accept when ``loss(mu) -
    loss(mu2) >= alpha/2 <g, mu - mu2>`` and grow ``alpha`` by 1.01, else keep
    ``theta`` and halve ``alpha`` (``mbi.estimation.MirrorDescent._step``).
    A measurement's gradient is added to one model clique containing it;
    which one does not change the distribution (potentials are summed in the
    exponent). The marginals of an accepted step are reused as the next
    step's, which ``mbi`` recomputes. With ``tol > 0`` the loop stops after
    a block of 50 iterations whose relative loss decrease is at most ``tol``.
    """
    mbi = load_mbi()
    pos = {name: j for j, name in enumerate(domain.names)}
    if not pooled:
        return Model(domain, {}, total)
    md = mbi_domain(domain)
    lip = mbi.marginal_loss.calculate_l2_lipschitz_from_metadata(
        md, [mbi.LinearMeasurement(np.zeros(1), cl, stddev=s) for cl, _, s in pooled])
    cliques = [_canonical(pos, c) for c in mbi.clique_utils.maximal_subset([cl for cl, _, _ in pooled])]
    jt = JunctionTree(domain, cliques)
    meas = []                                           # (model clique index, node, axes, lift shape, y, 1/sigma^2)
    for cl, y, s in pooled:
        can = _canonical(pos, cl)
        yc = np.transpose(np.asarray(y, dtype=float).reshape([domain[a] for a in cl]), [cl.index(a) for a in can])
        k = next(i for i, C in enumerate(cliques) if set(can) <= set(C))
        node = jt.home[k]
        meas.append((k, node, _axes_out(node, can), _lift_shape(can, cliques[k], domain), yc,
                     1.0 / max(float(s), 1e-12) ** 2))
    theta = [np.zeros(tuple(domain[a] for a in C)) for C in cliques]
    if warm_start is not None and warm_start.potentials:
        warm_homes = [next((i for i, C in enumerate(cliques) if set(w) <= set(C)), None)
                      for w in warm_start.potentials]
        if all(h is not None for h in warm_homes):
            for (w, v), h in zip(warm_start.potentials.items(), warm_homes, strict=True):
                assert h is not None
                theta[h] = theta[h] + v.reshape(_lift_shape(w, cliques[h], domain))

    homes = list(dict.fromkeys(node for _, node, _, _, _, _ in meas))   # the nodes the loss reads

    def evaluate(th: list[np.ndarray]) -> tuple[float, list[np.ndarray], list[np.ndarray]]:
        prob = jt.calibrate(th, homes)
        mus = [total * prob[node].sum(axis=ax) if ax else total * prob[node] for _, node, ax, _, _, _ in meas]
        diffs = [mu - y for mu, (_, _, _, _, y, _) in zip(mus, meas, strict=True)]
        loss = sum(0.5 * w * float(np.vdot(d, d)) for d, (_, _, _, _, _, w) in zip(diffs, meas, strict=True))
        grads = [w * d for d, (_, _, _, _, _, w) in zip(diffs, meas, strict=True)]
        return loss, mus, grads

    alpha = 2.0 / (lip * total)
    loss, mus, grads = evaluate(theta)
    block_start, done = loss, 0
    for done in range(1, 50 * math.ceil(iters / 50) + 1):
        step = list(theta)
        for (k, _, _, shp, _, _), g in zip(meas, grads, strict=True):
            step[k] = step[k] - alpha * g.reshape(shp)
        loss2, mus2, grads2 = evaluate(step)
        dot = sum(float(np.vdot(g, m1 - m2)) for g, m1, m2 in zip(grads, mus, mus2, strict=True))
        if loss - loss2 >= 0.5 * alpha * dot:
            theta, loss, mus, grads = step, loss2, mus2, grads2
            alpha *= 1.01
        else:
            alpha *= 0.5
        if tol > 0 and done % 50 == 0:
            if block_start - loss <= tol * abs(block_start):
                break
            block_start = loss
    return Model(domain, dict(zip(cliques, theta, strict=True)), total, done)


class ModelMarginals:
    """Exact marginals of a fitted model, computed in NumPy (no JAX compilation).

    The model's potentials are collected onto the nodes of its junction tree
    (:class:`JunctionTree`, ``mbi``'s) and calibrated; every node then holds
    its exact marginal probability table. A query inside one node is a sum
    over that table. Any other query ``q`` is answered from the junction-tree
    factorisation ``P = prod_C P_C / prod_S P_S`` restricted to the smallest
    subtree that covers ``q`` (leaves whose own attributes are not queried
    sum out exactly), contracted by ``opt_einsum``; attributes in no clique
    are uniform. This is the quantity ``mbi``'s ``variable_elimination``
    computes, without compiling a JAX program per query shape (on Adult that
    compilation took about 1 s per candidate marginal, hundreds per AIM round).

    Parameters
    ----------
    model : Model
    """

    def __init__(self, model: Model) -> None:
        self.domain, self.total = model.domain, float(model.total)
        self.tree = JunctionTree(model.domain, model.cliques)
        self._pos = self.tree._pos
        self.prob = self.tree.calibrate(list(model.potentials.values()))

    @property
    def nodes(self) -> list[tuple[str, ...]]:
        return self.tree.nodes

    @property
    def order(self) -> list[str]:
        return self.tree.order

    def _sum_to(self, c: tuple[str, ...], keep: tuple[str, ...]) -> np.ndarray:
        axes = _axes_out(c, keep)
        out: np.ndarray = self.prob[c].sum(axis=axes) if axes else self.prob[c]
        return out

    def probabilities(self, clique: Sequence[str]) -> np.ndarray:
        """The model's probability table over ``clique``, axes in the clique's order."""
        q = tuple(clique)
        qs = set(q)
        can = _canonical(self._pos, q)
        home = next((c for c in self.tree.nodes if qs <= set(c)), None)
        if home is not None:
            table = self._sum_to(home, can)
            return np.transpose(table, [can.index(a) for a in q]) if can != q else table
        import opt_einsum

        operands: list[Any] = []
        for a in q:
            if a not in self.tree.covered:
                k = self.domain[a]
                operands += [np.full(k, 1.0 / k), [self._pos[a]]]
        adj, parent = self.tree.adj, self.tree.parent
        for comp in self.tree.components:
            if not any(qs & set(c) for c in comp):
                continue                                      # sums to one
            alive = set(comp)
            changed = True
            while changed and len(alive) > 1:
                changed = False
                for u in list(alive):
                    nb = [w for w in adj[u] if w in alive]
                    if len(nb) == 1 and not (set(u) - set(nb[0])) & qs:
                        alive.discard(u)
                        changed = True
            for u in alive:
                operands += [self.prob[u], [self._pos[a] for a in u]]
                p = parent[u]
                if p is not None and p in alive:
                    sep = tuple(a for a in u if a in p)
                    ps = self._sum_to(u, sep)
                    inv = np.divide(1.0, ps, out=np.zeros_like(ps), where=ps > 0)
                    operands += [inv, [self._pos[a] for a in sep]]
        out: np.ndarray = opt_einsum.contract(*operands, [self._pos[a] for a in q], optimize="auto")
        return out

    def counts(self, clique: Sequence[str], flatten: bool = True) -> np.ndarray:
        """The model's counts over ``clique`` (``total`` times the probabilities), flattened by default."""
        out = self.total * self.probabilities(clique)
        return out.ravel() if flatten else out


def marginal(model: Model, clique: Sequence[str]) -> np.ndarray:
    """The model's counts over ``clique`` (flattened, in the clique's order); see :class:`ModelMarginals`."""
    return ModelMarginals(model).counts(clique)


def model_size_mb(domain: Domain, cliques: Sequence[Sequence[str]]) -> float:
    """Size in MB of the junction tree of a model over ``cliques`` (``mbi``'s measure, computed faster).

    ``mbi.junction_tree.hypothetical_model_size`` builds the model graph,
    eliminates its vertices in ``mbi``'s greedy order (or, when the graph is
    a tree, leaves first), and sums the cells of the triangulated graph's
    maximal cliques, 8 bytes each. This computes the same number with
    bitmasks instead of ``networkx`` (about 30 times faster; AIM asks it for
    every candidate in every round): the maximal cliques of a graph
    triangulated along an elimination order are the maximal sets of
    ``{v} + neighbours(v)`` at ``v``'s elimination, and ``mbi``'s greedy order
    (first attribute of least cost, cost the size of the union of the
    remaining cliques that contain it) is reproduced exactly.
    ``tests/synth/test_mechanisms.py`` compares it with ``mbi`` on random clique sets.
    """
    if not cliques:
        return 0.0
    return _model_cells(domain.names, domain.shape, frozenset(frozenset(c) for c in cliques)) * 8 / 2**20


def _model_cells(names: tuple[str, ...], shape: tuple[int, ...], cliques: frozenset[frozenset[str]]) -> int:
    pos = {a: j for j, a in enumerate(names)}
    d = len(names)
    masks = [sum(1 << pos[a] for a in c) for c in cliques]

    def size(mask: int) -> int:
        out, j = 1, 0
        while mask:
            if mask & 1:
                out *= shape[j]
            mask >>= 1
            j += 1
        return out

    adj = [0] * d
    for m in masks:
        for j in range(d):
            if m >> j & 1:
                adj[j] |= m & ~(1 << j)
    n_edges = sum(bin(a).count("1") for a in adj) // 2
    if n_edges and n_edges == d - 1:
        reach, frontier = 1, 1                               # connected and d - 1 edges: a tree
        while frontier:
            new = 0
            for j in range(d):
                if frontier >> j & 1:
                    new |= adj[j]
            frontier = new & ~reach
            reach |= new
        if reach == (1 << d) - 1:
            return sum(shape[i] * shape[j] for i in range(d) for j in range(i + 1, d) if adj[i] >> j & 1)
    order, cset, unmarked = [], set(masks), list(range(d))
    for _ in range(d):
        best, best_cost = -1, 0
        for a in unmarked:
            u = 0
            for m in cset:
                if m >> a & 1:
                    u |= m
            cost = size(u)
            if best < 0 or cost < best_cost:
                best, best_cost = a, cost
        order.append(best)
        unmarked.remove(best)
        nb = {m for m in cset if m >> best & 1}
        u = 0
        for m in nb:
            u |= m
        cset -= nb
        cset.add(u & ~(1 << best))
    g = list(adj)
    elim = []
    for v in order:
        nbv = g[v]
        elim.append(nbv | (1 << v))
        for x in range(d):
            if nbv >> x & 1:
                g[x] = (g[x] | nbv) & ~(1 << x) & ~(1 << v)
        g[v] = 0
    uniq = set(elim)
    return sum(size(c) for c in uniq if not any(c != e and c & e == c for e in uniq))
