"""The paper's metrics (Tao, McKenna, Hay, Machanavajjhala, Miklau 2021, Section 5).

For the first three groups, each numeric column is cut into **19 equal-depth
bins computed on the original data**, plus one bin at each end for synthetic
values below the original minimum or above its maximum (:func:`metric_bins`;
equal quantiles that coincide are merged, so a column with ties has fewer
bins). Categorical columns keep their schema levels.

``ind``
    Average of ``1 - TVD`` over the 1-way marginals, ``TVD(p, q) = 1/2 sum
    |p - q|``.
``pair``
    Average of ``1 - TVD`` over all 2-way marginals.
``coracc``
    Share of attribute pairs whose bias-corrected Cramér's V
    (:func:`cramers_v`, Bergsma 2013) falls in the same level -- [0, .1),
    [.1, .3), [.3, .5), [.5, 1] -- on the original and the synthetic data.
``f1``
    Macro-averaged F1 on the original data of an XGBoost classifier trained
    on the synthetic data (only with a label).

Examples
--------
>>> import pandas as pd
>>> from dpstats.synth.schema import Schema
>>> s = Schema.from_dict({"columns": {"a": {"type": "categorical", "levels": ["x", "y"]},
...                                   "b": {"type": "categorical", "levels": ["u", "v"]}}})
>>> real = pd.DataFrame({"a": list("xxyy"), "b": list("uuvv")})
>>> syn = pd.DataFrame({"a": list("xyxy"), "b": list("uvvu")})
>>> m = evaluate(real, syn, s, metrics=("ind", "pair", "coracc"))
>>> m["ind"], m["pair"]
(1.0, 0.5)
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any

import numpy as np
import pandas as pd

from dpstats.synth.schema import Schema, level_key

__all__ = [
    "METRICS",
    "original_f1",
    "CORRELATION_LEVELS",
    "MetricBins",
    "metric_bins",
    "tvd",
    "one_way_score",
    "two_way_score",
    "cramers_v",
    "cramers_v_matrix",
    "correlation_level",
    "coracc",
    "macro_f1",
    "xgboost_f1",
    "evaluate",
]

#: Metric name -> paper group.
METRICS: dict[str, str] = {"ind": "Ind", "pair": "Pair", "coracc": "Corr", "f1": "F1"}

#: Lower edges of the Cramér's V levels low, weak, middle, strong.
CORRELATION_LEVELS = (0.0, 0.1, 0.3, 0.5)

N_DEPTH_BINS = 19


@dataclass(frozen=True)
class MetricBins:
    """Per column: the categorical levels, or the equal-depth edges of a numeric column."""

    schema: Schema
    edges: Mapping[str, np.ndarray]

    def sizes(self) -> dict[str, int]:
        return {c.name: (len(c.levels or ()) if c.categorical else len(self.edges[c.name]) + 1)
                for c in self.schema}

    def bin(self, df: pd.DataFrame) -> np.ndarray:
        """Integer bin codes, shape ``(n, d)``, in schema order.

        Numeric: bin 0 is below the original minimum, bins ``1..m`` the
        equal-depth bins ``[e_i, e_{i+1})`` (last closed), bin ``m + 1`` above
        the maximum. A categorical value outside the levels raises.
        """
        out = np.empty((len(df), len(self.schema)), dtype=np.int64)
        for j, c in enumerate(self.schema):
            s = df[c.name]
            if c.categorical:
                lookup = {level_key(v): i for i, v in enumerate(c.levels or ())}
                codes = s.map(lambda v, lookup=lookup: lookup.get(level_key(v), -1)).to_numpy(dtype=np.int64)
                if np.any(codes < 0):
                    raise ValueError(f"column {c.name!r}: value outside the schema's levels")
                out[:, j] = codes
            else:
                e = self.edges[c.name]
                x = pd.to_numeric(s).to_numpy(dtype=float)
                inner = np.clip(np.searchsorted(e[1:-1], x, side="right") + 1, 1, max(len(e) - 1, 1))
                out[:, j] = np.where(x < e[0], 0, np.where(x > e[-1], len(e), inner))
        return out


def metric_bins(real: pd.DataFrame, schema: Schema, n_bins: int = N_DEPTH_BINS) -> MetricBins:
    """The paper's evaluation bins, from the original data (evaluation only: not private)."""
    edges = {}
    for c in schema:
        if not c.categorical:
            x = pd.to_numeric(real[c.name]).to_numpy(dtype=float)
            edges[c.name] = np.unique(np.quantile(x, np.linspace(0.0, 1.0, n_bins + 1)))
    return MetricBins(schema, edges)


def tvd(p: np.ndarray, q: np.ndarray) -> float:
    """Total variation distance ``1/2 sum |p/sum p - q/sum q|`` of two count arrays."""
    p = np.asarray(p, dtype=float).ravel()
    q = np.asarray(q, dtype=float).ravel()
    return 0.5 * float(np.abs(p / p.sum() - q / q.sum()).sum())


def _counts(codes: np.ndarray, cols: Sequence[int], sizes: Sequence[int]) -> np.ndarray:
    shape = tuple(sizes[c] for c in cols)
    flat = np.ravel_multi_index(tuple(codes[:, c] for c in cols), shape)
    return np.bincount(flat, minlength=int(np.prod(shape))).reshape(shape)


def one_way_score(real: np.ndarray, syn: np.ndarray, sizes: Sequence[int]) -> float:
    """Average ``1 - TVD`` over the 1-way marginals of binned tables."""
    return float(np.mean([1 - tvd(_counts(real, [j], sizes), _counts(syn, [j], sizes)) for j in range(len(sizes))]))


def two_way_score(real: np.ndarray, syn: np.ndarray, sizes: Sequence[int]) -> float:
    """Average ``1 - TVD`` over all 2-way marginals of binned tables."""
    pairs = list(combinations(range(len(sizes)), 2))
    if not pairs:
        return float("nan")
    return float(np.mean([1 - tvd(_counts(real, list(p), sizes), _counts(syn, list(p), sizes)) for p in pairs]))


def cramers_v(table: np.ndarray) -> float:
    """Bias-corrected Cramér's V of a contingency table (Bergsma 2013).

    Empty rows and columns are dropped. With ``chi2`` Pearson's statistic,
    ``phi2 = chi2 / n``, ``phi2c = max(0, phi2 - (k-1)(r-1)/(n-1))``,
    ``kc = k - (k-1)^2/(n-1)``, ``rc = r - (r-1)^2/(n-1)``, the result is
    ``sqrt(phi2c / min(kc - 1, rc - 1))``; it is 0 when either variable takes
    a single value.

    Examples
    --------
    >>> round(cramers_v(np.array([[50, 0], [0, 50]])), 4)
    1.0
    >>> cramers_v(np.array([[25, 25], [25, 25]]))
    0.0
    """
    t = np.asarray(table, dtype=float)
    t = t[t.sum(axis=1) > 0][:, t.sum(axis=0) > 0]
    r, k = t.shape if t.ndim == 2 else (0, 0)
    n = t.sum()
    if r < 2 or k < 2 or n < 2:
        return 0.0
    expected = np.outer(t.sum(axis=1), t.sum(axis=0)) / n
    chi2 = float(((t - expected) ** 2 / expected).sum())
    phi2c = max(0.0, chi2 / n - (k - 1) * (r - 1) / (n - 1))
    kc = k - (k - 1) ** 2 / (n - 1)
    rc = r - (r - 1) ** 2 / (n - 1)
    denom = min(kc - 1, rc - 1)
    if denom <= 0:
        return 0.0
    return float(min(1.0, math.sqrt(phi2c / denom)))


def cramers_v_matrix(codes: np.ndarray, sizes: Sequence[int]) -> np.ndarray:
    """Symmetric matrix of bias-corrected Cramér's V between all columns (1 on the diagonal)."""
    d = len(sizes)
    m = np.eye(d)
    for i, j in combinations(range(d), 2):
        m[i, j] = m[j, i] = cramers_v(_counts(codes, [i, j], sizes))
    return m


def correlation_level(v: float) -> int:
    """0 low [0, .1), 1 weak [.1, .3), 2 middle [.3, .5), 3 strong [.5, 1]."""
    return int(np.searchsorted(CORRELATION_LEVELS, v, side="right") - 1)


def coracc(real: np.ndarray, syn: np.ndarray, sizes: Sequence[int]) -> float:
    """Share of attribute pairs whose Cramér's V level agrees on real and synthetic data."""
    pairs = list(combinations(range(len(sizes)), 2))
    if not pairs:
        return float("nan")
    same = [correlation_level(cramers_v(_counts(real, [i, j], sizes)))
            == correlation_level(cramers_v(_counts(syn, [i, j], sizes))) for i, j in pairs]
    return float(np.mean(same))


def macro_f1(y_true: Sequence[Any] | np.ndarray, y_pred: Sequence[Any] | np.ndarray) -> float:
    """Macro-averaged F1 over the classes present in ``y_true`` or ``y_pred`` (as scikit-learn)."""
    yt = np.asarray([level_key(v) for v in y_true])
    yp = np.asarray([level_key(v) for v in y_pred])
    scores = []
    for c in np.union1d(yt, yp):
        tp = float(np.sum((yt == c) & (yp == c)))
        fp = float(np.sum((yt != c) & (yp == c)))
        fn = float(np.sum((yt == c) & (yp != c)))
        scores.append(0.0 if tp == 0 else 2 * tp / (2 * tp + fp + fn))
    return float(np.mean(scores))


def _features(df: pd.DataFrame, schema: Schema) -> np.ndarray:
    blocks = []
    for c in schema:
        if c.name == schema.label:
            continue
        if c.categorical:
            keys = df[c.name].map(level_key).to_numpy()
            blocks.append(np.stack([(keys == level_key(v)).astype(float) for v in c.levels or ()], axis=1))
        else:
            blocks.append(pd.to_numeric(df[c.name]).to_numpy(dtype=float)[:, None])
    return np.hstack(blocks) if blocks else np.zeros((len(df), 1))


def xgboost_f1(real: pd.DataFrame, syn: pd.DataFrame, schema: Schema, seed: int = 0) -> float:
    """Macro-F1 on ``real`` of an XGBoost classifier trained on ``syn`` (features one-hot / numeric).

    XGBoost (``xgboost-cpu``, the ``synth`` extra) runs with its defaults,
    one thread, seeded. A synthetic label with one class gives the constant
    classifier.
    """
    if schema.label is None:
        raise ValueError("the F1 metric needs a label")
    y_syn = syn[schema.label].map(level_key).to_numpy()
    y_real = real[schema.label].map(level_key).to_numpy()
    classes = np.unique(y_syn)
    if classes.size < 2:
        return macro_f1(y_real, np.full(len(y_real), classes[0] if classes.size else ""))
    import xgboost

    index = {c: i for i, c in enumerate(classes)}
    model = xgboost.XGBClassifier(n_jobs=1, random_state=seed, verbosity=0, tree_method="hist")
    model.fit(_features(syn, schema), np.array([index[c] for c in y_syn]))
    pred = classes[np.asarray(model.predict(_features(real, schema)), dtype=np.int64)]
    return macro_f1(y_real, pred)


def original_f1(real: pd.DataFrame, schema: Schema, *, folds: int = 5, seed: int = 0) -> float:
    """Macro-F1 on ``real`` of XGBoost trained on the original data itself, cross-fitted.

    Each row is predicted by the classifier of :func:`xgboost_f1` trained on
    the other ``folds - 1`` folds (a seeded random split), so the training
    data do not contain the row scored. ``xgboost_f1(real, real, schema)``
    is the F1 of a "synthesizer" that returns the data unchanged, scored on
    its own training rows; the gap between the two is what such a table
    gains by holding the very rows it is scored on.
    """
    if schema.label is None:
        raise ValueError("the F1 metric needs a label")
    if folds < 2:
        raise ValueError(f"folds must be >= 2, got {folds}")
    y = real[schema.label].map(level_key).to_numpy()
    fold = np.random.default_rng(seed).permutation(len(real)) % folds
    pred = np.empty(len(real), dtype=object)
    for k in range(folds):
        test = fold == k
        train = real[~test]
        y_train = y[~test]
        classes = np.unique(y_train)
        if classes.size < 2:
            pred[test] = classes[0] if classes.size else ""
            continue
        import xgboost

        index = {c: i for i, c in enumerate(classes)}
        model = xgboost.XGBClassifier(n_jobs=1, random_state=seed, verbosity=0, tree_method="hist")
        model.fit(_features(train, schema), np.array([index[c] for c in y_train]))
        pred[test] = classes[np.asarray(model.predict(_features(real[test], schema)), dtype=np.int64)]
    return macro_f1(y, pred)


def evaluate(real: pd.DataFrame, syn: pd.DataFrame, schema: Schema, *, metrics: Sequence[str] | None = None,
             bins: MetricBins | None = None, seed: int = 0) -> dict[str, float]:
    """All the paper's metrics of ``syn`` against ``real`` (``f1`` only when the schema has a label)."""
    if metrics is None:
        metrics = [m for m in METRICS if m != "f1" or schema.label is not None]
    unknown = sorted(set(metrics) - set(METRICS))
    if unknown:
        raise KeyError(f"unknown metric(s) {unknown}; known: {list(METRICS)}")
    bins = bins or metric_bins(real, schema)
    sizes = list(bins.sizes().values())
    r, s = bins.bin(real), bins.bin(syn)
    out: dict[str, float] = {}
    if "ind" in metrics:
        out["ind"] = one_way_score(r, s, sizes)
    if "pair" in metrics:
        out["pair"] = two_way_score(r, s, sizes)
    if "coracc" in metrics:
        out["coracc"] = coracc(r, s, sizes)
    if "f1" in metrics:
        out["f1"] = xgboost_f1(real, syn, schema, seed=seed)
    return out
