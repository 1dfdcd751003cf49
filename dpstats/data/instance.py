"""Instances: a manifest entry turned into a design matrix, an outcome and public facts.

:func:`build_instance` applies the formula (patsy, so column names are those of
statsmodels' formula interface), drops rows with missing values (and reports
the count), drops collinear dummy columns the way R's ``lm`` does (and reports
them), and collects the public facts an algorithm may use for free.

Examples
--------
>>> from dpstats.data.corpus import Corpus
>>> inst = Corpus.public().instance("mroz87_lwage")
>>> inst.facts.columns
('Intercept', 'educ', 'exper', 'expersq')
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import patsy
from scipy import linalg

from dpstats.data.facts import PublicFacts, TaskData
from dpstats.data.manifest import InstanceSpec
from dpstats.errors import InstanceError

__all__ = ["PublicFacts", "Instance", "build_instance", "design_from_formula", "COLLINEAR_TOL"]

#: relative tolerance for collinearity, as R's ``lm`` (``qr(tol = 1e-7)``)
COLLINEAR_TOL = 1e-7

_EVAL_NS = {"np": np, "log": np.log, "exp": np.exp, "sqrt": np.sqrt, "abs": np.abs}




@dataclass(frozen=True, eq=False)
class Instance:
    """A problem instance: private data plus public facts.

    Attributes
    ----------
    spec : InstanceSpec
        The manifest entry.
    facts : PublicFacts
    X : ndarray, shape (n, d)
        Design matrix (sce, linreg) or the mean columns (mean), unweighted.
    y : ndarray or None
    weights : ndarray or None
        Analytic weights (weighted least squares).
    clusters : ndarray or None
        Cluster labels for ``cluster:<col>`` standard errors.
    frame : DataFrame
        The rows used, with the variables the instance uses (for refitting in R).
    dropped_missing : int
        Rows dropped for a missing value in a variable the instance uses.
    dropped_collinear : tuple of str
        Dummy columns dropped as collinear.
    nested_columns : tuple of int
        Columns of categorical terms nested in the clusters (not counted in k for CR1).
    out_of_bounds : mapping of str to int
        Count of values outside the manifest ``bounds`` per column (the data
        are not changed; private algorithms clip).
    """

    spec: InstanceSpec
    facts: PublicFacts
    X: np.ndarray
    y: np.ndarray | None
    weights: np.ndarray | None
    clusters: np.ndarray | None
    frame: pd.DataFrame
    dropped_missing: int
    dropped_collinear: tuple[str, ...] = ()
    nested_columns: tuple[int, ...] = ()
    out_of_bounds: Mapping[str, int] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return self.spec.id

    @property
    def task(self) -> str:
        return self.spec.task

    @property
    def n(self) -> int:
        return self.facts.n

    @property
    def d(self) -> int:
        return self.facts.d

    def task_data(self) -> TaskData:
        """The data an algorithm sees; weighted rows are multiplied by sqrt(weight)."""
        if self.weights is None:
            return TaskData(self.X, self.y, clusters=self.clusters)
        sw = np.sqrt(self.weights)
        return TaskData(self.X * sw[:, None], None if self.y is None else self.y * sw, clusters=self.clusters)

    def __repr__(self) -> str:
        return f"Instance({self.id!r}, task={self.task!r}, n={self.n}, d={self.d})"


def _independent_columns(X: np.ndarray, tol: float = COLLINEAR_TOL) -> np.ndarray:
    """Boolean mask of columns kept by a left-to-right rank check (R's lm semantics).

    A column is aliased when its residual after projection on the kept columns
    to its left is below ``tol`` times its norm. One Householder QR without
    pivoting gives every residual norm as ``|R_jj|``; aliased columns are
    removed and the check repeated on the rest until it is stable (so that a
    nearly aliased column cannot lend its rounding noise to later columns).
    """
    norms = np.linalg.norm(X, axis=0)
    keep = norms > 0
    for _ in range(X.shape[1] + 1):
        idx = np.flatnonzero(keep)
        if idx.size == 0:
            break
        r = linalg.qr(X[:, idx], mode="r", check_finite=False)[0]
        diag = np.zeros(idx.size)
        m = min(r.shape)
        diag[:m] = np.abs(np.diag(r)[:m])
        ok = diag > tol * norms[idx]
        if ok.all():
            break
        # a column in the span of earlier columns stays in the span of the
        # earlier kept ones, so every flagged column can go at once
        keep[idx[~ok]] = False
    return keep


def _formula_variables(info: Any, columns: pd.Index) -> set[str]:
    """Data columns that a design's factors refer to (for refitting elsewhere)."""
    import ast

    names: set[str] = set()
    for f in info.factor_infos:
        try:
            tree = ast.parse(f.code, mode="eval")
        except SyntaxError:
            continue
        names.update(node.id for node in ast.walk(tree) if isinstance(node, ast.Name))
    return {c for c in columns if c in names}


def design_from_formula(formula: str, data: pd.DataFrame):
    """Build ``(y, X)`` with patsy (statsmodels' naming), dropping rows with missing values.

    Returns
    -------
    y : DataFrame, X : DataFrame
        With ``X.design_info`` attached.
    """
    env = patsy.EvalEnvironment([_EVAL_NS])
    f32 = [c for c in data.columns if data[c].dtype == np.float32]
    if f32:  # transforms in double precision, as R and Stata
        data = data.astype({c: np.float64 for c in f32})
    return patsy.dmatrices(formula, data, eval_env=env, NA_action="drop", return_type="dataframe")


def _formula_error(spec: InstanceSpec, exc: Exception, data: pd.DataFrame) -> InstanceError:
    msg = str(exc).splitlines()[0]
    if isinstance(exc, patsy.PatsyError) and "Error evaluating factor" in str(exc):
        missing = [ln for ln in str(exc).splitlines() if "NameError" in ln or "not defined" in ln]
        if missing:
            msg = f"missing column: {missing[0].strip()}"
    return _err(spec, "formula", f"{spec.formula!r} cannot be built: {msg}")


def build_instance(spec: InstanceSpec, data: pd.DataFrame, *, fixed_levels: frozenset[str] = frozenset()) -> Instance:
    """Turn an instance spec and its dataset into an :class:`Instance`.

    Parameters
    ----------
    spec : InstanceSpec
    data : pandas.DataFrame
    fixed_levels : frozenset of str, optional
        Data columns whose categorical levels are declared (public) rather
        than read from the data. The dummy columns of a term made only of
        such columns are never dropped, even when they are empty or collinear
        in the data, so that the design's columns do not depend on the data.
        Empty (the default, and always for the corpus): dummy columns are
        dropped as R's ``lm`` does.

    Raises
    ------
    InstanceError
        Missing column, unparsable formula, non-numeric outcome, coefficient not
        in the design, rank-deficient design (other than dummy columns, which are
        dropped and reported), n <= d, a single cluster, non-positive weights.
    """
    if spec.task == "mean":
        return _build_mean(spec, data)
    return _build_regression(spec, data, frozenset(fixed_levels))


def factor_variables(code: str, columns: Any) -> set[str]:
    """Data columns that one patsy factor's code refers to (``"C(region)"`` -> ``{"region"}``)."""
    import ast

    try:
        tree = ast.parse(code, mode="eval")
    except SyntaxError:
        return set()
    names = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    return {c for c in columns if c in names}


def _err(spec: InstanceSpec, fld: str | None, msg: str) -> InstanceError:
    return InstanceError(msg, file=spec.manifest, instance=spec.id, field=fld)


def _numeric(spec: InstanceSpec, fld: str, s: pd.Series, name: str) -> np.ndarray:
    if s.dtype == bool:
        return s.to_numpy(dtype=float)
    if not pd.api.types.is_numeric_dtype(s):
        raise _err(spec, fld, f"column {name!r} is not numeric (dtype {s.dtype})")
    return s.to_numpy(dtype=float)


def _build_mean(spec: InstanceSpec, data: pd.DataFrame) -> Instance:
    missing = [c for c in spec.columns if c not in data.columns]
    if missing:
        raise _err(spec, "columns", f"missing column(s) {missing} in dataset {spec.dataset!r}")
    sub = data[list(spec.columns)]
    mask = sub.notna().all(axis=1).to_numpy()
    sub = sub.loc[mask].reset_index(drop=True)
    X = np.column_stack([_numeric(spec, "columns", sub[c], c) for c in spec.columns])
    if not np.all(np.isfinite(X)):
        raise _err(spec, "columns", "infinite values in the mean columns")
    n, d = X.shape
    if n < 2:
        raise _err(spec, "columns", f"only {n} complete row(s)")
    bounds = {c: spec.bounds[c] for c in spec.columns if c in spec.bounds}
    unknown = sorted(set(spec.bounds) - set(spec.columns))
    if unknown:
        raise _err(spec, f"bounds.{unknown[0]}", f"bounds name column(s) {unknown} not among the mean columns")
    facts = PublicFacts(instance=spec.id, study=spec.study, task="mean", n=n, d=d, columns=tuple(spec.columns), bounds=bounds)
    return Instance(
        spec=spec, facts=facts, X=X, y=None, weights=None, clusters=None, frame=sub,
        dropped_missing=int((~mask).sum()), out_of_bounds=_out_of_bounds(X, facts.columns, bounds),
    )


def _zero_one_coding(info: Any, term: Any) -> bool:
    """Whether every contrast matrix of the categorical ``term`` holds only 0 and 1 (treatment coding)."""
    mats = [cm.matrix for st in info.term_codings[term] for cm in st.contrast_matrices.values()]
    return bool(mats) and all(np.isin(np.asarray(m), (0.0, 1.0)).all() for m in mats)


def _interaction_bounds(info: Any, var_bounds: Mapping[str, tuple[float, float]]) -> dict[str, tuple[float, float]]:
    """Public bounds of categorical and interaction columns whose factors all have public ranges (interval arithmetic).

    A column of a term with two or more factors is the product of one value
    per factor: a categorical factor contributes an entry of its contrast
    matrix (0 or 1 for the default treatment coding, -1 to 1 for sum coding),
    a numerical one its variable as it is (a factor whose code is a declared
    column name, no transform). When every factor is one of those, the column
    lies in the product of the factors' intervals, a function of the design
    and of declared bounds only; a categorical term alone gets its contrasts'
    range. Columns of other terms get nothing here.
    """
    out: dict[str, tuple[float, float]] = {}
    for term, sl in info.term_slices.items():
        if not term.factors or (len(term.factors) == 1 and info.factor_infos[term.factors[0]].type != "categorical"):
            continue
        lo, hi = 1.0, 1.0
        for f in term.factors:
            fi = info.factor_infos[f]
            if fi.type == "categorical":
                entries = [float(v) for st in info.term_codings[term] if f in st.contrast_matrices
                           for v in np.ravel(st.contrast_matrices[f].matrix)]
                if not entries:
                    break
                a, b = min(entries), max(entries)
            elif fi.num_columns == 1 and f.code in var_bounds:
                a, b = (float(v) for v in var_bounds[f.code])
            else:
                break
            ends = (lo * a, lo * b, hi * a, hi * b)
            lo, hi = min(ends), max(ends)
        else:
            for c in info.column_names[sl]:
                out[c] = (lo, hi)
    return out


def _out_of_bounds(X: np.ndarray, columns: tuple[str, ...], bounds: Mapping[str, tuple[float, float]]) -> dict[str, int]:
    out = {}
    for j, c in enumerate(columns):
        if c in bounds:
            lo, hi = bounds[c]
            k = int(np.sum((X[:, j] < lo) | (X[:, j] > hi)))
            if k:
                out[c] = k
    return out


def _build_regression(spec: InstanceSpec, data: pd.DataFrame, fixed_levels: frozenset[str] = frozenset()) -> Instance:
    formula = spec.formula or ""
    for fe in spec.fixed_effects:
        if fe not in data.columns:
            raise _err(spec, "fixed_effects", f"missing column {fe!r} in dataset {spec.dataset!r}")
        formula += f" + C({fe})"
    extra: list[str] = []
    if spec.weights:
        if spec.weights not in data.columns:
            raise _err(spec, "weights", f"missing column {spec.weights!r} in dataset {spec.dataset!r}")
        extra.append(spec.weights)
    cluster_col = spec.se.split(":", 1)[1] if spec.se.startswith("cluster:") else None
    if cluster_col:
        if cluster_col not in data.columns:
            raise _err(spec, "se", f"cluster column {cluster_col!r} is not in dataset {spec.dataset!r}")
        extra.append(cluster_col)
    # rows missing a weight or a cluster are dropped as well
    base = data
    if extra:
        base = data.loc[data[extra].notna().all(axis=1)]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ydf, Xdf = design_from_formula(formula, base)
    except (patsy.PatsyError, SyntaxError, NameError, TypeError, ValueError, KeyError) as exc:
        raise _formula_error(spec, exc, data) from None
    if ydf.shape[1] != 1:
        raise _err(spec, "formula", f"outcome {formula.split('~')[0].strip()!r} is not numeric (it expands to {ydf.shape[1]} columns)")
    outcome = ydf.columns[0]
    rows = Xdf.index
    dropped_missing = int(len(data) - len(rows))
    info = Xdf.design_info
    names = list(Xdf.columns)
    # dummy columns: columns of terms whose factors are all categorical; of those, the 0/1 ones (treatment
    # coding, the default) are the public dummies (other codings, such as sum coding's -1, get their range)
    dummy_cols: set[int] = set()
    zero_one: set[int] = set()
    fixed_cols: set[int] = set()  # dummies of declared levels: never dropped
    cat_terms: dict[str, list[int]] = {}
    for term, sl in info.term_slices.items():
        if not term.factors:
            continue
        if all(info.factor_infos[f].type == "categorical" for f in term.factors):
            idx = list(range(sl.start, sl.stop))
            dummy_cols.update(idx)
            if _zero_one_coding(info, term):
                zero_one.update(idx)
                if len(term.factors) == 1:
                    cat_terms[term.name()] = idx
            if fixed_levels and all(
                (v := factor_variables(f.code, data.columns)) and v <= fixed_levels for f in term.factors
            ):
                fixed_cols.update(idx)
    derived = _interaction_bounds(info, spec.bounds)
    X = Xdf.to_numpy(dtype=float)
    y = ydf.to_numpy(dtype=float).reshape(-1)
    if not np.all(np.isfinite(X)) or not np.all(np.isfinite(y)):
        raise _err(spec, "formula", "the design or outcome has infinite values (log of 0?)")
    intercept = "Intercept" in names
    if X.shape[0] <= X.shape[1]:
        raise _err(spec, "formula", f"n = {X.shape[0]} rows is not more than d = {X.shape[1]} columns")
    # collinearity (R's lm: drop aliased columns left to right)
    keep = _independent_columns(X)
    if fixed_cols:
        keep[sorted(fixed_cols)] = True
    dropped = [names[j] for j in np.flatnonzero(~keep)]
    bad = [names[j] for j in np.flatnonzero(~keep) if j not in dummy_cols]
    if bad:
        raise _err(spec, "formula", f"rank-deficient design: column(s) {bad} are collinear with the columns before them")
    if dropped:
        old = np.flatnonzero(keep)
        remap = {int(o): i for i, o in enumerate(old)}
        X = X[:, keep]
        names = [names[j] for j in old]
        dummy_cols = {remap[j] for j in dummy_cols if j in remap}
        zero_one = {remap[j] for j in zero_one if j in remap}
        cat_terms = {t: [remap[j] for j in idx if j in remap] for t, idx in cat_terms.items()}
    n, d = X.shape
    if n <= d:
        raise _err(spec, "formula", f"n = {n} rows is not more than d = {d} columns")
    coef_index = None
    if spec.task == "sce":
        if spec.coefficient not in names:
            hint = "; it was dropped as collinear" if spec.coefficient in dropped else ""
            raise _err(spec, "coefficient", f"{spec.coefficient!r} is not a design column{hint}; columns: {names}")
        coef_index = names.index(spec.coefficient)
    weights = None
    if spec.weights:
        weights = _numeric(spec, "weights", data.loc[rows, spec.weights], spec.weights)
        if np.any(weights <= 0) or not np.all(np.isfinite(weights)):
            raise _err(spec, "weights", "weights must be positive and finite (filter zero-weight rows with the dataset query)")
    clusters = None
    nested: list[int] = []
    if cluster_col:
        clusters = data.loc[rows, cluster_col].to_numpy()
        g = len(pd.unique(clusters))
        if g < 2:
            raise _err(spec, "se", f"cluster column {cluster_col!r} has {g} cluster(s); CR1 needs at least 2")
        cl_codes = pd.factorize(clusters)[0]
        for idx in cat_terms.values():
            if not idx:
                continue
            # the term's levels are nested in clusters when each level lies in one cluster
            levels = np.argmax(np.c_[np.zeros(n), X[:, idx]], axis=1)  # 0 = base level
            df_ = pd.DataFrame({"lvl": levels, "cl": cl_codes})
            if (df_.groupby("lvl")["cl"].nunique() == 1).all():
                nested.extend(idx)
    # public bounds mapped to design columns
    var_bounds = dict(spec.bounds)
    known_vars = set(data.columns)
    unknown = sorted(set(var_bounds) - known_vars - set(names))
    if unknown:
        raise _err(spec, f"bounds.{unknown[0]}", f"bounds name column(s) {unknown} not in the dataset or design")
    bounds: dict[str, tuple[float, float]] = {}
    for j, c in enumerate(names):
        if c in var_bounds:
            bounds[c] = var_bounds[c]
        elif c == "Intercept":
            bounds[c] = (1.0, 1.0)
        elif j in zero_one:
            bounds[c] = (0.0, 1.0)
        elif c in derived:
            bounds[c] = derived[c]
    if outcome in var_bounds:
        bounds[outcome] = var_bounds[outcome]
    if spec.weights:
        # algorithms see rows scaled by sqrt(weight): the weights are private, so
        # no range of the scaled columns (not even the intercept's) is public
        bounds = {}
    used_vars = (
        _formula_variables(info, data.columns) | _formula_variables(ydf.design_info, data.columns)
        | set(spec.fixed_effects) | set(extra)
    )
    frame = data.loc[rows, [c for c in data.columns if c in used_vars]].reset_index(drop=True)
    facts = PublicFacts(
        instance=spec.id, study=spec.study, task=spec.task, n=n, d=d, columns=tuple(names), outcome=outcome,
        coefficient=spec.coefficient, coef_index=coef_index, bounds=bounds,
        dummies=tuple(names[j] for j in sorted(zero_one)), intercept=intercept, weighted=bool(spec.weights),
        cluster=cluster_col,
    )
    oob = _out_of_bounds(np.column_stack([X, y]), tuple(names) + (outcome,), bounds)
    return Instance(
        spec=spec, facts=facts, X=X, y=y, weights=weights, clusters=clusters, frame=frame,
        dropped_missing=dropped_missing, dropped_collinear=tuple(dropped), nested_columns=tuple(sorted(nested)),
        out_of_bounds=oob,
    )
