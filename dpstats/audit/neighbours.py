"""Neighbouring data sets for an audit: a base data set and the same with one row replaced by a canary.

The neighbouring relation of dpstats is *replace one row* (``n`` public). The
audit builds the pair ``(D, D')`` itself:

* ``D`` is a corpus instance (:func:`from_instance`) or a generated data set
  (:func:`generated`) whose rows lie well inside public bounds;
* ``D'`` replaces the row of ``D`` farthest from the canary by a worst-case
  canary row (:func:`canary_row`): every bounded column at the public bound
  farther from the column's mean (``mode="at"``) or half a range beyond it
  (``mode="beyond"``, which tests clipping; such a row is outside the public
  facts, so a release that changes is not a violation of the DP claim, which
  covers only rows inside the bounds, and :mod:`dpstats.audit.run` reports it
  as such). The outcome goes to the bound farther from the least-squares
  prediction at the canary's ``x``. A column without a public bound is set to
  its mean plus 10 times its data range in the same direction (no worst case
  exists there); the intercept and dummy columns keep the replaced row's values
  (a dummy group must stay one-hot).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from dpstats.algorithms.base import TaskData
from dpstats.data.instance import PublicFacts
from dpstats.data.manifest import TASKS

__all__ = ["Neighbours", "canary_row", "make_neighbours", "generated", "from_instance", "CANARY_MODES", "DESIGNS",
           "CANARY_CLUSTER"]

CANARY_MODES = ("at", "beyond")
_UNBOUNDED_FACTOR = 10.0
#: the cluster label of the canary row when the labels are not integers (integers: one above the largest)
CANARY_CLUSTER = "audit-canary"
_BEYOND = 0.5


@dataclass(frozen=True)
class Neighbours:
    """A pair of neighbouring data sets and how it was built.

    Attributes
    ----------
    base, neighbour : TaskData
        ``D`` and ``D'`` (the same but for row ``row``).
    facts : PublicFacts
        Public facts of both (they are the same: ``n`` is public).
    row : int
        Index of the replaced row.
    canary_x : ndarray
    canary_y : float or None
    mode : str
        ``"at"`` or ``"beyond"`` the public bounds.
    source : str
        ``"generated"`` (design inside), ``"generated-<design>"`` for the others, or the instance id.
    notes : tuple of str
        Columns without public bounds, and the like.
    """

    base: TaskData
    neighbour: TaskData
    facts: Any
    row: int
    canary_x: np.ndarray
    canary_y: float | None
    mode: str
    source: str
    notes: tuple[str, ...] = field(default_factory=tuple)

    def describe(self) -> dict[str, Any]:
        return {"source": self.source, "n": self.facts.n, "d": self.facts.d, "task": self.facts.task,
                "row": self.row, "canary_x": [float(v) for v in self.canary_x],
                "canary_y": None if self.canary_y is None else float(self.canary_y), "mode": self.mode,
                "notes": list(self.notes),
                "clusters": None if self.base.clusters is None else len(set(self.base.clusters.tolist()))}


def _far_bound(mean: float, lo: float, hi: float, spread: float, mode: str) -> tuple[float, str | None]:
    """The bound farther from ``mean`` (or beyond it); for a missing bound, far beyond the data."""
    up = (hi - mean) >= (mean - lo) if np.isfinite(lo) and np.isfinite(hi) else np.isfinite(hi) or not np.isfinite(lo)
    b = hi if up else lo
    if not np.isfinite(b):
        s = max(spread, 1.0)
        return (mean + _UNBOUNDED_FACTOR * s) if up else (mean - _UNBOUNDED_FACTOR * s), "no public bound"
    if mode == "beyond":
        w = (hi - lo) if np.isfinite(lo) and np.isfinite(hi) else max(spread, 1.0)
        return (b + _BEYOND * w) if up else (b - _BEYOND * w), None
    return float(b), None


def canary_row(data: TaskData, facts: Any, mode: str = "at") -> tuple[np.ndarray, float | None, int, list[str]]:
    """The worst-case canary row for ``data`` under ``facts`` and the row it replaces.

    Returns
    -------
    x : ndarray, shape (d,)
    y : float or None
    row : int
        The row of ``data`` farthest from the canary (in units of each column's range).
    notes : list of str
    """
    if mode not in CANARY_MODES:
        raise ValueError(f"canary mode must be one of {CANARY_MODES}, got {mode!r}")
    X = np.asarray(data.X, dtype=float)
    n, d = X.shape
    lo, hi = facts.column_bounds()
    fixed = set(getattr(facts, "dummies", ()) or ())
    cols = list(facts.columns)
    mean = X.mean(axis=0)
    spread = np.ptp(X, axis=0)
    x = np.empty(d)
    notes: list[str] = []
    free = np.ones(d, dtype=bool)
    for j in range(d):
        name = cols[j] if j < len(cols) else f"x{j}"
        if name in fixed or (np.isfinite(lo[j]) and lo[j] == hi[j]) or (spread[j] == 0 and not np.isfinite(lo[j])):
            free[j] = False
            x[j] = np.nan
            continue
        x[j], note = _far_bound(mean[j], lo[j], hi[j], spread[j], mode)
        if note:
            notes.append(f"{name}: {note}; canary at mean {'+' if x[j] > mean[j] else '-'} "
                         f"{_UNBOUNDED_FACTOR:g} x data range")
    y = None
    scale = np.where(spread > 0, spread, 1.0)
    dist = np.nansum(np.abs((X - np.where(free, x, 0.0)) / scale) * free, axis=1)
    if data.y is not None:
        yv = np.asarray(data.y, dtype=float)
        # the replaced row: farthest in x; its fixed columns (intercept, dummies) stay
        row = int(np.argmax(dist))
        xr = np.where(free, x, X[row])
        coef = np.linalg.lstsq(X, yv, rcond=None)[0]
        pred = float(xr @ coef)
        ob = facts.outcome_bounds() or (-np.inf, np.inf)
        y, note = _far_bound(pred, float(ob[0]), float(ob[1]), float(np.ptp(yv)), mode)
        if note:
            notes.append(f"{facts.outcome}: {note}")
        ys = np.ptp(yv) or 1.0
        dist = dist + np.abs(yv - y) / ys
    row = int(np.argmax(dist))
    x = np.where(free, x, X[row])
    return x, y, row, notes


def make_neighbours(data: TaskData, facts: Any, mode: str = "at", source: str = "data",
                    canary: tuple[np.ndarray, float | None, int] | None = None) -> Neighbours:
    """``D = data`` and ``D'`` = ``data`` with its farthest row replaced by :func:`canary_row`.

    ``canary = (x, y, row)`` gives the canary row and the replaced row explicitly.
    """
    if canary is None:
        x, y, row, notes = canary_row(data, facts, mode)
    else:
        x, y, row = canary
        notes = []
    X2 = np.array(data.X, dtype=float, copy=True)
    X2[row] = x
    y2 = None
    if data.y is not None:
        y2 = np.array(data.y, dtype=float, copy=True)
        y2[row] = y
    cl = cl2 = None
    if data.clusters is not None:
        # the canary row joins a cluster of its own, so that the count of clusters changes by one and the
        # row's group of clusters (a public hash of its label) changes with it
        cl = np.array(data.clusters, copy=True)
        cl2 = cl.copy() if cl.dtype.kind in "iu" else cl.astype(object)
        cl2[row] = int(cl.max()) + 1 if cl.dtype.kind in "iu" else CANARY_CLUSTER
    base = TaskData(np.array(data.X, dtype=float, copy=True), None if data.y is None else np.array(data.y, dtype=float),
                    clusters=cl)
    nb = TaskData(X2, y2, clusters=cl2)
    for t in (base, nb):  # algorithms must not write into their input
        for a in (t.X, t.y, t.clusters):
            if a is not None:
                a.flags.writeable = False
    return Neighbours(base, nb, facts, row, x, y, mode, source, tuple(notes))


#: the generated designs: the first two are audited by ``design="both"``, all four by ``design="search"``
DESIGNS = ("mirror", "inside", "concentrated", "heavy")
#: half-width of the ball the rows of the concentrated design fill (the public box is [-1, 1])
CONCENTRATED_HALF = 0.02
#: scale of the heavy design's t(2) rows (clipped to +-0.95)
HEAVY_SCALE = 0.05


def _source(design: str) -> str:
    """The ``source`` label of a generated design (``"generated"`` for inside, as before)."""
    return "generated" if design == "inside" else f"generated-{design}"


def _rows(rng: np.random.Generator, design: str, size: tuple[int, ...], levels: int | None) -> np.ndarray:
    """Rows of a generated design inside the public box [-1, 1]."""
    if design == "concentrated":
        return rng.uniform(-CONCENTRATED_HALF, CONCENTRATED_HALF, size=size)
    if design == "heavy":
        return np.clip(HEAVY_SCALE * rng.standard_t(2.0, size=size), -0.95, 0.95)
    if levels is None:
        return rng.uniform(-0.5, 0.5, size=size)
    return _grid_values(rng, -0.5, 0.5, int(levels), size)


def _grid_values(rng: np.random.Generator, lo: float, hi: float, levels: int, size: tuple[int, ...]) -> np.ndarray:
    return rng.choice(np.linspace(lo, hi, levels), size=size)


def generated(task: str, n: int = 1000, seed: int = 0, mode: str = "at", regressors: int = 2,
              columns: int = 3, design: str = "mirror", levels: int | None = None,
              clusters: int | None = None) -> Neighbours:
    """A generated base data set with public bounds and its canary neighbour.

    ``sce`` / ``linreg``: columns ``Intercept, x1, x2`` with ``x1, x2`` in
    public ``[-1, 1]`` (drawn uniform on ``[-0.5, 0.5]``), outcome ``y`` in
    public ``[-1, 1]`` with ``y = 0.5 x1 - 0.25 x2 + N(0, 0.2^2)`` clipped to
    ``[-0.6, 0.6]``; the coefficient of interest (sce) is ``x1``
    (``regressors=1``: ``Intercept, x1`` only, for algorithms made for
    simple regression). ``mean``:
    ``columns`` columns (default 3) in public ``[-1, 1]``, drawn uniform on ``[-0.5, 0.5]``. The
    data fill only the middle of the public box, so a canary at the bounds
    moves data-dependent ranges (catching bounds read from the data).

    ``design="mirror"``: the replaced row is set to the *mirror image* of the
    canary in the public box (the opposite corner, the opposite outcome bound),
    so that the pair attains the largest change of sums and means a replace-one
    sensitivity allows (best against noise that is too small).
    ``design="inside"``: the replaced row is the data row farthest from the
    canary, so all of ``D`` lies inside the middle of the box and only ``D'``
    reaches the bounds (best against ranges read from the data).

    ``design="concentrated"``: every row lies within ``CONCENTRATED_HALF`` of
    the centre (the outcome's noise shrunk alike), so the canary at the bounds
    is an outlier by a factor of about 50 relative to the data: a guard, a
    decline or a branch that reacts to a row far from the others (rather than
    to the public bounds) fires on ``D'`` only. ``design="heavy"``: rows
    ``HEAVY_SCALE t(2)`` clipped to +-0.95, a heavy-tailed base with a few rows
    near the bounds already. Both replace the data row farthest from the canary.

    ``levels=L``: the columns (and the outcome) take ``L`` equally spaced
    values on the same ranges instead of continuous ones, so the data set has
    few distinct rows. DP must hold on every data set, so such a pair is as
    valid as any; it makes algorithms that work on distinct rows (``bhs_affine``)
    fast enough to audit at the large ``n`` they need.

    ``clusters=K``: the rows are sampled in ``K`` clusters (integer labels
    drawn uniformly, named ``g`` in the facts' ``cluster``), so that methods
    with a cluster-robust path take it; the canary row joins a new cluster of
    its own (:func:`make_neighbours`).
    """
    if design not in DESIGNS:
        raise ValueError(f"design must be one of {DESIGNS}, got {design!r}")
    if task not in TASKS:
        raise ValueError(f"task must be one of sce, linreg, mean, got {task!r}")
    n = int(n)
    if n < 10:
        raise ValueError(f"n must be at least 10, got {n}")
    if levels is not None and (int(levels) != levels or levels < 2):
        raise ValueError(f"levels must be an integer of at least 2, got {levels!r}")
    if clusters is not None and (int(clusters) != clusters or not 2 <= clusters <= n):
        raise ValueError(f"clusters must be an integer from 2 to n = {n}, got {clusters!r}")
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0xA0D17]))
    # drawn from their own stream, so that the rows are those of the same design without clusters
    labels = None if clusters is None else \
        np.random.default_rng(np.random.SeedSequence([int(seed), 0xC1057])).integers(0, int(clusters), n)
    cluster = None if clusters is None else "g"
    if task == "mean":
        if int(columns) != columns or columns < 1:
            raise ValueError(f"columns must be a positive integer, got {columns!r}")
        X = _rows(rng, design, (n, int(columns)), levels)
        cols = tuple(f"x{j + 1}" for j in range(int(columns)))
        facts = PublicFacts(instance="audit-generated", study="audit", task=task, n=n, d=len(cols), columns=cols,
                            bounds={c: (-1.0, 1.0) for c in cols}, cluster=cluster)
        return _mirrored(TaskData(X, clusters=labels), facts, mode) if design == "mirror" else \
            make_neighbours(TaskData(X, clusters=labels), facts, mode, _source(design))
    if regressors not in (1, 2):
        raise ValueError(f"regressors must be 1 or 2, got {regressors!r}")
    Z = _rows(rng, design, (n, 2), levels)
    noise = 0.2 * (CONCENTRATED_HALF / 0.5 if design == "concentrated" else 1.0)
    y = np.clip(0.5 * Z[:, 0] - 0.25 * Z[:, 1] + rng.normal(0.0, noise, n), -0.6, 0.6)
    if levels is not None:  # the outcome on a grid of the same size over [-0.6, 0.6]
        step = 1.2 / (int(levels) - 1)
        y = -0.6 + step * np.round((y + 0.6) / step)
    Z = Z[:, :regressors]
    X = np.column_stack([np.ones(n), Z])
    cols = ("Intercept", "x1", "x2")[: regressors + 1]
    bounds = {c: (-1.0, 1.0) for c in cols[1:]}
    bounds.update({"Intercept": (1.0, 1.0), "y": (-1.0, 1.0)})
    facts = PublicFacts(instance="audit-generated", study="audit", task=task, n=n, d=regressors + 1, columns=cols,
                        outcome="y", coefficient="x1" if task == "sce" else None,
                        coef_index=1 if task == "sce" else None, bounds=bounds, intercept=True, cluster=cluster)
    if design == "mirror":
        return _mirrored(TaskData(X, y, clusters=labels), facts, mode)
    return make_neighbours(TaskData(X, y, clusters=labels), facts, mode, _source(design))


def _mirrored(data: TaskData, facts: Any, mode: str) -> Neighbours:
    """Neighbours whose replaced row is the canary mirrored through the centre of the public box."""
    x, y, row, _ = canary_row(data, facts, "at")
    lo, hi = facts.column_bounds()
    X = np.array(data.X, dtype=float, copy=True)
    X[row] = np.where(lo < hi, lo + hi - x, x)
    Y = None
    if data.y is not None:
        ob = facts.outcome_bounds()
        Y = np.array(data.y, dtype=float, copy=True)
        Y[row] = ob[0] + ob[1] - y
    if mode == "beyond":
        x2, y2, _, _ = canary_row(data, facts, "beyond")
        x, y = np.where(lo < hi, x2, x), y2
    nb = make_neighbours(TaskData(X, Y, clusters=data.clusters), facts, mode, "generated", canary=(x, y, row))
    return replace(nb, source="generated-mirror")


def from_instance(instance: Any, mode: str = "at") -> Neighbours:
    """Neighbours from a corpus :class:`~dpstats.data.instance.Instance` (its task data and public facts)."""
    return make_neighbours(instance.task_data(), instance.facts, mode, instance.id)


def with_task(nb: Neighbours, task: str) -> Neighbours:
    """The same pair with the facts' task replaced (an sce instance audited as linreg)."""
    return replace(nb, facts=replace(nb.facts, task=task))
