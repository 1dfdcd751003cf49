"""Synthetic rows from a fitted Private-PGM model, with the caller's generator (post-processing only).

:func:`sample` draws rows along the model's junction tree, i.i.d. or, as
the reference code's ``synthetic_data`` does by default, with the counts of
each column's values rounded within each configuration of its parents
(:func:`rounded_counts`). Used by MST, AIM and MWEM-PGM; the model is a
function of released measurements, so nothing here is charged.
"""

from __future__ import annotations

import numpy as np

from dpstats.synth.base import Domain
from dpstats.synth.mechanisms._pgm import Model, ModelMarginals

__all__ = ["sample", "rounded_counts"]


def rounded_counts(p: np.ndarray, total: int, rng: np.random.Generator) -> np.ndarray:
    """Integer counts summing to ``total`` whose expectation is ``total * p``: randomized rounding.

    Each cell gets ``floor(total p_k)``; the ``total - sum floor`` units left
    go to distinct cells drawn without replacement with probabilities
    proportional to the fractional parts. ``p`` must be non-negative with a
    positive sum (it is normalised).
    """
    want = np.asarray(p, dtype=float) * (total / float(np.sum(p)))
    base = np.floor(want)
    frac = want - base
    counts = base.astype(np.int64)
    extra = int(total - counts.sum())
    # the fractional parts sum to ``extra`` in exact arithmetic; rounding error may leave fewer positive cells
    room = min(extra, int(np.count_nonzero(frac > 0)))
    if room > 0:
        counts[rng.choice(frac.size, size=room, replace=False, p=frac / frac.sum())] += 1
    if extra > room:
        counts[int(np.argmax(want))] += extra - room
    return counts


def _rounded_column(cond: np.ndarray, group: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Codes for rows in groups ``group`` (0..G-1), each group's counts rounded from its row of ``cond`` (G, k)."""
    out = np.zeros(group.size, dtype=np.int64)
    order = np.argsort(group, kind="stable")
    starts = np.flatnonzero(np.r_[True, np.diff(group[order]) != 0])
    for a, b in zip(starts, np.r_[starts[1:], group.size], strict=True):
        rows = order[a:b]
        vals = np.repeat(np.arange(cond.shape[1]), rounded_counts(cond[group[rows[0]]], rows.size, rng))
        out[rows] = rng.permutation(vals)
    return out


def sample(model: Model, domain: Domain, n_rows: int, rng: np.random.Generator,
           marginals: ModelMarginals | None = None, *, rounding: bool = False) -> np.ndarray:
    """Draw ``n_rows`` rows from the model, all randomness from ``rng``.

    Ancestral sampling along the junction tree's elimination order (reversed):
    each column is drawn from its conditional given the already drawn
    columns of the maximal cliques that contain it, computed from the
    model's marginals (the structure of ``mbi``'s ``synthetic_data``, whose
    draws come from NumPy's global generator and so cannot be seeded here).

    With ``rounding``, rows are not drawn one by one: within each
    configuration of the parent columns, the counts of the column's values are
    the conditional times the group's size, rounded by :func:`rounded_counts`,
    and the values are shuffled among the group's rows (as the reference
    code of MST samples). The synthetic marginals then follow the model's to
    within one row per cell of each group, where i.i.d. draws add multinomial
    noise. Either way this is post-processing of the model.

    Returns
    -------
    ndarray of int64, shape (n_rows, len(domain))
    """
    mm = marginals if marginals is not None else ModelMarginals(model)
    cliques = [set(cl) for cl in mm.nodes]
    out = np.zeros((n_rows, len(domain)), dtype=np.int64)
    if n_rows == 0:
        return out
    pos = {name: j for j, name in enumerate(domain.names)}
    used: set[str] = set()
    for col in mm.order[::-1]:
        rel = [cl for cl in cliques if col in cl]
        parents = tuple(sorted(used.intersection(set().union(*rel)) if rel else set(), key=pos.__getitem__))
        used.add(col)
        marg = np.clip(mm.counts(parents + (col,), flatten=False), 0, None)
        k = domain[col]
        if parents:
            flat = marg.reshape(-1, k)
            pidx = np.ravel_multi_index(tuple(out[:, pos[p]] for p in parents), marg.shape[:-1])
            tot = flat.sum(axis=1, keepdims=True)
            cond = np.where(tot > 0, flat / np.where(tot > 0, tot, 1.0), 1.0 / k)
        else:
            pidx = np.zeros(n_rows, dtype=np.int64)
            cond = (marg / marg.sum() if marg.sum() > 0 else np.full(k, 1.0 / k)).reshape(1, k)
        if rounding:
            out[:, pos[col]] = _rounded_column(cond, pidx, rng)
            continue
        cdf = np.cumsum(cond, axis=1)[pidx] if parents else np.broadcast_to(np.cumsum(cond[0]), (n_rows, k))
        u = rng.random(n_rows) * cdf[:, -1]
        out[:, pos[col]] = np.minimum((cdf <= u[:, None]).sum(axis=1), k - 1)
    return out
