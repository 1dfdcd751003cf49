"""Private-PGM helpers shared by MST, AIM and MWEM-PGM (post-processing only).

Everything here works on *released* quantities (noisy marginals and their
noise scales) or on public facts (the domain, ``n``): estimating a graphical
model from noisy measurements with ``mbi`` 2.0 (McKenna, Sheldon, Miklau 2019),
projecting it, and sampling rows from it with the caller's generator. No
function here reads private data, so nothing here is charged.

JAX and ``mbi`` are imported inside :func:`load_mbi` (never at module level),
with 64-bit floats enabled (float32 stalls above 100k rows) and JAX's
persistent compilation cache disabled (``mbi``'s advice).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from dpstats.synth.base import Domain

__all__ = ["load_mbi", "mbi_domain", "Measurement", "estimate", "marginal", "sample", "model_size_mb",
           "simplex_projection"]

#: one noisy marginal: (clique, noisy counts flattened, noise standard deviation)
Measurement = tuple[tuple[str, ...], np.ndarray, float]


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


def estimate(domain: Domain, measurements: Sequence[Measurement], total: float, iters: int,
             warm_start: Any = None) -> Any:
    """Fit a Markov random field to noisy marginals by mirror descent (``mbi.estimation.MirrorDescent``).

    Parameters
    ----------
    domain : Domain
    measurements : sequence of (clique, noisy counts, sigma)
        Weighted by ``1 / sigma`` in the L2 loss, as in Private-PGM.
    total : float
        The public number of rows ``n``.
    iters : int
        Mirror-descent iterations (rounded up to mbi's block of 50).
    warm_start : MarkovRandomField, optional
        A previous estimate to start from (AIM, MWEM-PGM).

    Returns
    -------
    mbi.MarkovRandomField
    """
    mbi = load_mbi()
    import jax.numpy as jnp

    dom = mbi.Domain(domain.names, domain.shape)
    ms = [mbi.LinearMeasurement(jnp.asarray(np.asarray(y, dtype=float)), tuple(cl), stddev=float(s))
          for cl, y, s in measurements]
    est = _fast_mirror_descent()
    return est.estimate(dom, ms, known_total=float(total), iters=int(iters), warm_start=warm_start)


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
    and the result carries the marginals of the last iterate's potentials as
    computed inside the compiled loop (one step behind the final potentials,
    whose own marginals are not needed: the model is only projected and
    sampled). The optimisation steps are ``mbi``'s own.
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


def marginal(model: Any, clique: Sequence[str]) -> np.ndarray:
    """The model's counts over ``clique`` (flattened, in the clique's order)."""
    return np.asarray(model.project(tuple(clique)).datavector(flatten=True), dtype=float)


def model_size_mb(domain: Domain, cliques: Sequence[Sequence[str]]) -> float:
    """Size in MB of the junction tree of a model over ``cliques`` (``mbi``'s measure)."""
    mbi = load_mbi()
    if not cliques:
        return 0.0
    return float(mbi.junction_tree.hypothetical_model_size(mbi_domain(domain), [tuple(c) for c in cliques]))


def sample(model: Any, domain: Domain, n_rows: int, rng: np.random.Generator) -> np.ndarray:
    """Draw ``n_rows`` i.i.d. rows from the model, all randomness from ``rng``.

    Ancestral sampling along the junction tree's elimination order (reversed):
    each column is drawn from its conditional given the already drawn
    columns of the maximal cliques that contain it, computed from the
    model's marginals (the structure of ``mbi``'s ``synthetic_data``, whose
    draws come from NumPy's global generator and so cannot be seeded here).

    Returns
    -------
    ndarray of int64, shape (n_rows, len(domain))
    """
    mbi = load_mbi()
    jtree, order = mbi.junction_tree.make_junction_tree(model.domain, [tuple(cl) for cl in model.cliques])
    cliques = [set(cl) for cl in jtree.nodes]
    out = np.zeros((n_rows, len(domain)), dtype=np.int64)
    if n_rows == 0:
        return out
    pos = {name: j for j, name in enumerate(domain.names)}
    used: set[str] = set()
    for col in list(order)[::-1]:
        rel = [cl for cl in cliques if col in cl]
        parents = tuple(sorted(used.intersection(set().union(*rel)) if rel else set(), key=pos.__getitem__))
        used.add(col)
        marg = np.clip(np.asarray(model.project(parents + (col,)).datavector(flatten=False), dtype=float), 0, None)
        k = domain[col]
        if parents:
            flat = marg.reshape(-1, k)
            pidx = np.ravel_multi_index(tuple(out[:, pos[p]] for p in parents), marg.shape[:-1])
            tot = flat.sum(axis=1, keepdims=True)
            cond = np.where(tot > 0, flat / np.where(tot > 0, tot, 1.0), 1.0 / k)
            cdf = np.cumsum(cond, axis=1)[pidx]
        else:
            p = marg / marg.sum() if marg.sum() > 0 else np.full(k, 1.0 / k)
            cdf = np.broadcast_to(np.cumsum(p), (n_rows, k))
        u = rng.random(n_rows) * cdf[:, -1]
        out[:, pos[col]] = np.minimum((cdf <= u[:, None]).sum(axis=1), k - 1)
    return out
