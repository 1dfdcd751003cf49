"""What an algorithm may know and see: an instance's public facts and the private data (:class:`TaskData`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True)
class PublicFacts:
    """What an algorithm may know about an instance without spending privacy.

    Attributes
    ----------
    instance, study, task : str
    n, d : int
        Rows and columns of the design (sce, linreg) or of the mean columns.
    columns : tuple of str
        Design column names (statsmodels naming) or the mean columns.
    outcome : str or None
        Outcome name (sce, linreg).
    coefficient : str or None
        The coefficient of interest (sce).
    coef_index : int or None
        Its position in ``columns``.
    bounds : mapping of str to (float, float)
        Public ranges: manifest ``bounds`` mapped to design columns, the
        outcome and mean columns, plus ``[1, 1]`` for the intercept and
        ``[0, 1]`` for dummy columns of categorical terms.
    dummies : tuple of str
        Design columns that are 0/1 dummies by construction (categorical terms).
    intercept : bool
        Whether the design has an intercept column.
    weighted : bool
        Whether the instance has analytic weights. Algorithms then see rows
        scaled by sqrt(weight), for which no column range is public, so
        ``bounds`` is empty for weighted instances.
    cluster : str or None
        The variable whose values are the sampling clusters (the study's
        clustered standard errors, or the API's ``cluster=``); ``None`` for
        independent rows. Public: a fact of the design, not of the data.
    """

    instance: str
    study: str
    task: str
    n: int
    d: int
    columns: tuple[str, ...]
    outcome: str | None = None
    coefficient: str | None = None
    coef_index: int | None = None
    bounds: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    dummies: tuple[str, ...] = ()
    intercept: bool = False
    weighted: bool = False
    cluster: str | None = None

    def column_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Arrays ``(lo, hi)`` over ``columns``; ``-inf``/``inf`` where no public bound is known."""
        lo = np.array([self.bounds.get(c, (-np.inf, np.inf))[0] for c in self.columns], dtype=float)
        hi = np.array([self.bounds.get(c, (-np.inf, np.inf))[1] for c in self.columns], dtype=float)
        return lo, hi

    def outcome_bounds(self) -> tuple[float, float] | None:
        """Public range of the outcome, if the manifest gives one."""
        if self.outcome is None:
            return None
        return self.bounds.get(self.outcome)

    def to_dict(self) -> dict[str, Any]:
        return {
            "instance": self.instance, "study": self.study, "task": self.task, "n": self.n, "d": self.d,
            "columns": list(self.columns), "outcome": self.outcome, "coefficient": self.coefficient,
            "coef_index": self.coef_index, "bounds": {k: list(v) for k, v in self.bounds.items()},
            "dummies": list(self.dummies), "intercept": self.intercept, "weighted": self.weighted,
            **({"cluster": self.cluster} if self.cluster is not None else {}),
        }


@dataclass(frozen=True)
class TaskData:
    """The private data an algorithm sees.

    Attributes
    ----------
    X : ndarray, shape (n, d)
        Design matrix (sce, linreg) or the columns whose mean is estimated (mean).
        For weighted instances, rows are already multiplied by sqrt(weight).
    y : ndarray, shape (n,), or None
        Outcome (sce, linreg); ``None`` for mean.
    clusters : ndarray, shape (n,), or None
        The sampling cluster of each row (private, like the rows), when
        ``PublicFacts.cluster`` names them and the data hold them; a method
        that gives a cluster-robust interval reads them, others ignore them.
    """

    X: np.ndarray
    y: np.ndarray | None = None
    clusters: np.ndarray | None = None

    def __post_init__(self) -> None:
        X = np.asarray(self.X, dtype=float)
        if X.ndim != 2:
            raise ValueError(f"X must be 2-dimensional, got shape {X.shape}")
        if not np.all(np.isfinite(X)):
            raise ValueError("X contains NaN or infinite values")
        object.__setattr__(self, "X", X)
        if self.y is not None:
            y = np.asarray(self.y, dtype=float).reshape(-1)
            if y.shape[0] != X.shape[0]:
                raise ValueError(f"y has {y.shape[0]} rows but X has {X.shape[0]}")
            if not np.all(np.isfinite(y)):
                raise ValueError("y contains NaN or infinite values")
            object.__setattr__(self, "y", y)
        if self.clusters is not None:
            c = np.asarray(self.clusters).reshape(-1)
            if c.shape[0] != X.shape[0]:
                raise ValueError(f"clusters has {c.shape[0]} rows but X has {X.shape[0]}")
            object.__setattr__(self, "clusters", c)

    @property
    def n(self) -> int:
        return int(self.X.shape[0])

    @property
    def d(self) -> int:
        return int(self.X.shape[1])
