"""Checks of the API's arguments and data, before any budget is spent.

Argument checks (seed, data, bounds, levels, formula, method, delta,
hyperparameters), the inspection of the design a formula builds, the
warnings on what was dropped or clipped, and the public rule that declines
data sets too small for any private estimate (:func:`_too_few_rows`). Every
message starts with the argument at fault.
"""

from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from dpstats.algorithms import get as get_algorithm
from dpstats.algorithms import list_algorithms
from dpstats.api.methods import _TASK_FUNC, DEFAULT_METHODS, INFERENCE_METHODS
from dpstats.api.words import _TINY_PREFIX, _covers_text, _fmt
from dpstats.data.instance import design_from_formula, factor_variables
from dpstats.errors import CorpusError


def _check_seed(seed: Any) -> int | None:
    if seed is None:
        return None
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        if isinstance(seed, float) and seed.is_integer():
            seed = int(seed)
        else:
            raise TypeError(f"seed must be a non-negative integer or None, got {seed!r}")
    if int(seed) < 0:
        raise ValueError(f"seed must be a non-negative integer or None, got {seed!r}")
    return int(seed)


_NAMED_DATA = ("pass a pandas DataFrame with named columns (the formula and the column names refer to them), "
               "e.g. pd.DataFrame(array, columns=[...])")


def _check_data(data: Any) -> pd.DataFrame:
    if isinstance(data, pd.DataFrame):
        df = data
    elif isinstance(data, np.ndarray):
        raise TypeError(f"data: got a NumPy array, which has no column names; {_NAMED_DATA}")
    else:
        try:
            df = pd.DataFrame(data)
        except Exception as exc:
            raise TypeError(f"data must be a pandas DataFrame, got {type(data).__name__}; {_NAMED_DATA}") from exc
        if isinstance(df.columns, pd.RangeIndex):  # a list of rows, a matrix: no names
            raise TypeError(f"data: got a {type(data).__name__} without column names; {_NAMED_DATA}")
    if df.shape[0] == 0:
        raise ValueError("data has no rows")
    if not all(isinstance(c, str) for c in df.columns):
        df = df.rename(columns=str)
    return _plain_missing(df)


def _plain_missing(df: pd.DataFrame) -> pd.DataFrame:
    """pandas' nullable columns (``Int64``, ``Float64``, ``boolean``) with ``pd.NA`` as NumPy ones with NaN / None.

    The formula machinery cannot test ``pd.NA``; its rows are then dropped as any missing value is (and reported).
    """
    nullable = [c for c in df.columns
                if isinstance(df[c].dtype, pd.api.extensions.ExtensionDtype) and bool(df[c].isna().any())
                and (pd.api.types.is_numeric_dtype(df[c].dtype) or pd.api.types.is_bool_dtype(df[c].dtype))]
    if not nullable:
        return df
    df = df.copy()
    for c in nullable:
        if pd.api.types.is_bool_dtype(df[c].dtype):
            df[c] = df[c].astype(object).where(df[c].notna(), None)
        else:
            df[c] = df[c].astype("float64")
    return df


def _check_bounds(bounds: Any) -> dict[str, tuple[float, float]]:
    if bounds is None:
        return {}
    if not isinstance(bounds, Mapping):
        raise TypeError(f"bounds must be a dict {{column: (lo, hi)}}, got {type(bounds).__name__}")
    out: dict[str, tuple[float, float]] = {}
    for col, b in bounds.items():
        try:
            lo, hi = (float(v) for v in np.asarray(b, dtype=float).reshape(-1))
        except (TypeError, ValueError):
            raise ValueError(f"bounds[{col!r}] must be a pair (lo, hi), got {b!r}") from None
        if not (math.isfinite(lo) and math.isfinite(hi)) or lo >= hi:
            raise ValueError(f"bounds[{col!r}] must be finite with lo < hi, got {b!r}")
        out[str(col)] = (lo, hi)
    return out


def _check_levels(levels: Any) -> dict[str, tuple]:
    if levels is None:
        return {}
    if not isinstance(levels, Mapping):
        raise TypeError(f"levels must be a dict {{column: [level, ...]}}, got {type(levels).__name__}")
    out: dict[str, tuple] = {}
    for col, lv in levels.items():
        if isinstance(lv, (str, bytes)) or not hasattr(lv, "__iter__"):
            raise ValueError(f"levels[{col!r}] must be a list of levels, got {lv!r}")
        lv = tuple(v.item() if isinstance(v, np.generic) else v for v in lv)
        if not lv:
            raise ValueError(f"levels[{col!r}] is empty: declare at least one level")
        if any(v is None or (isinstance(v, float) and math.isnan(v)) for v in lv):
            raise ValueError(f"levels[{col!r}] contains a missing value; missing values are dropped, not a level")
        if len(set(lv)) != len(lv):
            raise ValueError(f"levels[{col!r}] repeats a level: {list(lv)}")
        out[str(col)] = lv
    return out


def _declared_column(df: pd.DataFrame, col: str, lv: tuple) -> tuple[pd.Categorical, tuple]:
    """Column ``col`` as a categorical over the declared levels ``lv``; a value not declared is an error."""
    if col not in df.columns:
        raise ValueError(f"levels: {col!r} is not a column of data")
    s = df[col]
    if isinstance(s.dtype, pd.CategoricalDtype):
        kind = s.cat.categories.dtype
        values = s.astype(object)
    else:
        kind = s.dtype
        values = s
    if pd.api.types.is_integer_dtype(kind) or pd.api.types.is_bool_dtype(kind):
        # R sends numbers as doubles: 1.0 declares the integer level 1
        lv = tuple(int(v) if isinstance(v, float) and v.is_integer() else v for v in lv)
    present = pd.unique(values.dropna())
    declared = set(lv)
    extra = [v for v in present if v not in declared]
    if extra:
        shown = ", ".join(repr(v.item() if isinstance(v, np.generic) else v) for v in extra[:5])
        more = f" and {len(extra) - 5} more" if len(extra) > 5 else ""
        raise ValueError(f"levels: column {col!r} has value(s) {shown}{more} not among its declared levels "
                         f"{list(lv)}; declare every level the column can take")
    return pd.Categorical(values, categories=list(lv)), lv


_FIELD_ARG = {"formula": "formula", "coefficient": "coef", "columns": "columns", "weights": "weights"}


def _user_error(exc: CorpusError, data_arg: str = "data") -> ValueError:
    fld = exc.field or ""
    arg = "bounds" if fld.startswith("bounds") else _FIELD_ARG.get(fld, data_arg)
    msg = exc.message
    if "n = " in msg and "is not more than d" in msg:
        msg += " (after dropping rows with missing values): too few rows for this model"
    return ValueError(f"{arg}: {msg}")


def _check_formula(formula: Any) -> str:
    if not isinstance(formula, str) or "~" not in formula:
        raise ValueError(f"formula must be a string 'outcome ~ regressors', got {formula!r}")
    return formula


def _is_text(s: pd.Series) -> bool:
    """True for a column of strings (object, string or categorical dtype): not a number per row."""
    return (pd.api.types.is_object_dtype(s.dtype) or pd.api.types.is_string_dtype(s.dtype)
            or isinstance(s.dtype, pd.CategoricalDtype))


def _inspect_design(data: pd.DataFrame, formula: str) -> tuple[set[str], set[str]]:
    """The data columns used in categorical factors and all the data columns the formula uses.

    Raises for a categorical (string) outcome and for a regressor constant
    beside the intercept (clearer messages than build_instance's).
    """
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ydf, Xdf = design_from_formula(formula, data)
    except Exception:
        return set(), set()  # build_instance gives the error
    used: set[str] = set()
    for f in (*ydf.design_info.factor_infos, *Xdf.design_info.factor_infos):
        used |= factor_variables(f.code, data.columns)
    for f, fi in ydf.design_info.factor_infos.items():
        if fi.type == "categorical":
            cols = sorted(factor_variables(f.code, data.columns))
            kind = ", ".join(f"{c!r} has dtype {data[c].dtype}" for c in cols) or "categorical"
            conv = "a numeric column"
            if cols:
                conv = (f"data[{cols[0]!r}].astype(int)" if pd.api.types.is_bool_dtype(data[cols[0]].dtype)
                        else f"pd.to_numeric(data[{cols[0]!r}])")
            raise ValueError(
                f"formula: the outcome {f.code!r} is not numeric ({kind}); the outcome must be one number per row: "
                f"convert it, e.g. {conv}, or code it 0/1 for a linear probability model")
    if len(Xdf) == 0:
        raise ValueError("data: no row is complete in the variables of the formula")
    info = Xdf.design_info
    cat_vars: set[str] = set()
    for f, fi in info.factor_infos.items():
        if fi.type == "categorical":
            cat_vars |= factor_variables(f.code, data.columns)
    if "Intercept" not in Xdf.columns:
        return cat_vars, used
    categorical = set()
    for term, sl in info.term_slices.items():
        if term.factors and all(info.factor_infos[f].type == "categorical" for f in term.factors):
            categorical.update(Xdf.columns[sl])
    X = Xdf.to_numpy(dtype=float)
    for j, name in enumerate(Xdf.columns):
        if name == "Intercept" or name in categorical:
            continue
        col = X[:, j]
        if np.all(np.isfinite(col)) and np.ptp(col) == 0:
            raise ValueError(
                f"formula: the regressor {name!r} is constant ({_fmt(float(col[0]))} in every complete row); "
                "it cannot be estimated beside the intercept"
            )
    return cat_vars, used


def _method_class(task: str, method: str | None, inference: bool = False) -> tuple[str, type]:
    name = (INFERENCE_METHODS if inference else DEFAULT_METHODS)[task] if method is None else method
    if not isinstance(name, str) or not name:
        raise TypeError(f"method must be an algorithm name (str) or None, got {method!r}")
    try:
        return name, get_algorithm(task, name)
    except ValueError as exc:
        if ":" in name:  # a plugin 'module:object': keep its own message
            raise ValueError(f"method: {exc}") from None
        known = ", ".join(a.name for a in list_algorithms(task))
        raise ValueError(f"method: unknown method {name!r} for {_TASK_FUNC[task]}(); known: {known}") from None


def _warn_delta(delta: float, n: int) -> None:
    if delta > 1.0 / n:
        warnings.warn(
            f"delta = {delta:g} exceeds 1/n = {1.0 / n:.3g}: such a delta allows a mechanism to publish a "
            "whole row; choose delta well below 1/n (1e-6 or smaller is usual)",
            UserWarning,
            stacklevel=4,
        )


def _warn_bounds(inst: Any, user_bounds: Mapping[str, tuple[float, float]]) -> None:
    facts = inst.facts
    used_names = set(facts.columns) | ({facts.outcome} if facts.outcome else set())
    unused = [c for c in user_bounds if c not in used_names]
    if unused:
        warnings.warn(
            f"bounds: {unused} name(s) no design column, outcome or mean column; they are not used "
            f"(columns: {list(facts.columns)})",
            UserWarning,
            stacklevel=4,
        )
    if inst.out_of_bounds:
        n = inst.n
        for col, k in inst.out_of_bounds.items():
            if k >= n:
                lo, hi = user_bounds.get(col, facts.bounds.get(col))
                raise ValueError(
                    f"bounds: the range [{_fmt(lo)}, {_fmt(hi)}] declared for {col!r} contains none of its {n} values; "
                    "check the column and the units of the bounds"
                )
        parts = ", ".join(f"{k} of {col!r}" for col, k in inst.out_of_bounds.items())
        warnings.warn(
            f"bounds: {parts} lie outside the declared range and will be clipped by the algorithm "
            "(this count is computed without privacy: for you, not for publication)",
            UserWarning,
            stacklevel=4,
        )


def _check_weights(task: str, weights: Any, params: dict[str, Any], df: pd.DataFrame) -> str | None:
    """The column of analytic weights (weighted least squares), checked; ``None`` without weights.

    ``private_mean`` has no ``weights`` argument: ``weights=None`` among its keywords is dropped, any other
    value is an error naming ``weights``.
    """
    if task == "mean":
        if params.get("weights") is not None:
            raise ValueError(
                "weights: private_mean has no weighted mean. For the weighted mean of one column y, "
                "private_coef(data, 'y ~ 1', 'Intercept', epsilon=..., weights='w') estimates it by weighted "
                "least squares (the coefficient of the constant)")
        params.pop("weights", None)
        return None
    if weights is None:
        return None
    if not isinstance(weights, str) or not weights:
        raise TypeError(f"weights must be the name of a column of data holding positive weights, got {weights!r}")
    if weights not in df.columns:
        raise ValueError(f"weights: {weights!r} is not a column of data (give the column that holds each row's "
                         "weight)")
    col = df[weights]
    if not (pd.api.types.is_numeric_dtype(col) and not pd.api.types.is_bool_dtype(col)):
        raise ValueError(f"weights: column {weights!r} is not numeric (dtype {col.dtype}); weights are positive "
                         f"numbers, e.g. pd.to_numeric(data[{weights!r}])")
    vals = col.to_numpy(dtype=float)
    bad = int(np.sum(~np.isnan(vals) & ~(np.isfinite(vals) & (vals > 0))))
    if bad:
        # a count for the analyst (as the missing rows'), not a release
        raise ValueError(f"weights: column {weights!r} has {bad} value(s) that are zero, negative or infinite; "
                         "weighted least squares needs positive finite weights: drop the rows of weight zero "
                         "(they do not count) and fix the others")
    return weights


def _warn_binary_unbounded(inst: Any) -> None:
    """Tell the analyst which columns hold only 0 and 1 without declared bounds (a check on the data, not a release).

    Such a column is scaled privately; when its 1s are rare, few of its pair differences are non-zero and the
    private scale can land orders of magnitude off. Declaring the public range (0, 1) removes that step.
    """
    facts = inst.facts
    cols = [(c, inst.X[:, j]) for j, c in enumerate(facts.columns)]
    if getattr(inst, "y", None) is not None and facts.outcome:
        cols.append((facts.outcome, inst.y))
    binary = [c for c, x in cols
              if c not in facts.bounds and c != "Intercept" and x.size and bool(np.all((x == 0.0) | (x == 1.0)))
              and bool(np.any(x == 1.0)) and bool(np.any(x == 0.0))]
    if binary:
        example = ", ".join(f"{c!r}: (0, 1)" for c in binary[:2])
        warnings.warn(
            f"bounds: {binary} hold only the values 0 and 1 in your data (a check for you, not part of the "
            f"release). If 0 and 1 is their public range, declare it, e.g. bounds={{{example}}}: without it a 0/1 "
            "column is scaled privately, and the private scale of a rare one (few 1s) can fail and give a wrong "
            "estimate with a narrow interval",
            UserWarning,
            stacklevel=4,
        )


def _warn_weighted_bounds(weights: str, user_bounds: Mapping[str, tuple[float, float]]) -> None:
    warnings.warn(
        f"bounds: with weights={weights!r} the declared bounds {sorted(user_bounds)} are not used by the method: "
        "it sees each row multiplied by the square root of its weight, and the weights are private, so no range "
        "of the scaled columns is public (the method finds the scales privately, as without bounds)",
        UserWarning,
        stacklevel=4,
    )


def _warn_missing(df: pd.DataFrame, used: Sequence[str], dropped: int) -> None:
    """Say how many rows were dropped for a missing value, and in which of the columns used."""
    if dropped <= 0:
        return
    cols = [c for c in df.columns if c in set(used) and bool(df[c].isna().any())]
    where = ("in " + ", ".join(cols)) if cols else "in the variables of the formula"
    rows = "1 row" if dropped == 1 else f"{dropped} rows"
    warnings.warn(
        f"data: {rows} with a missing value {where} {'was' if dropped == 1 else 'were'} dropped (a count computed "
        "without privacy: for you, not for publication; also in diagnostics['dropped_missing'])",
        UserWarning,
        stacklevel=4,
    )


#: Registered methods that run with ``delta = 0`` (pure epsilon-DP, or a decline that does not depend on delta),
#: found by running every registered method with delta = 0 (kept true by tests/test_api_errors.py). The others
#: account their Gaussian noise in zCDP, which needs delta > 0.
_PURE_DP: dict[str, frozenset[str]] = {
    "sce": frozenset({"fwl_blocks", "noisystats", "noisystats_databounds", "sa_coef_interval", "sa_coef_median",
                      "sa_coef_winsorized", "synth_privbayes", "theilsen_databounds", "theilsen_match",
                      "theilsen_wide"}),
    "linreg": frozenset({"synth_privbayes"}),
    "mean": frozenset({"synth_privbayes"}),
}

#: pure-DP methods for a design with one regressor and an intercept only (they decline otherwise)
_ONE_REGRESSOR = frozenset({"noisystats", "theilsen_match", "theilsen_wide"})


def _check_delta(task: str, name: str, default: bool, delta: float) -> None:
    """``delta = 0`` for a method that needs ``delta > 0``: a clear error before any data work (a public fact)."""
    if delta > 0 or ":" in name or name in _PURE_DP.get(task, frozenset()):
        return
    pure = [a.name for a in list_algorithms(task, interpretation="standard") if a.name in _PURE_DP.get(task, ())]
    many = [m for m in pure if m not in _ONE_REGRESSOR]
    one = [m for m in pure if m in _ONE_REGRESSOR]
    alt = ", ".join(many) + (f"; with one regressor only: {', '.join(one)}" if one else "")
    who = f"the default method {name}" if default else f"method {name!r}"
    msg = (f"delta: {who} needs delta > 0 (its Gaussian noise is accounted in zCDP, which gives "
           "(epsilon, delta)-DP only with delta > 0); use e.g. delta=1e-6")
    if not pure:
        raise ValueError(f"{msg} (no registered method of {_TASK_FUNC[task]}() accepts delta=0)")
    raise ValueError(f"{msg}, or a pure-DP method, which accepts delta=0: {alt}")



def _check_params(task: str, name: str, cls: type, params: Mapping[str, Any]) -> None:
    """Keywords that are no hyperparameter of the method: ``cluster=`` explained, others named with the known ones."""
    if "cluster" in params:
        covers = _covers_text(cls)
        what = (f"the interval of {name} covers {covers}" if covers else
                f"the interval of {name} assumes independent rows" if cls.intervals else
                f"{name} gives no interval")
        raise ValueError(
            f"cluster: {name} has no cluster-robust private interval. Instead, {what}. With clustered data "
            "(rows that are not independent) the interval may be too narrow, and the privacy guarantee protects "
            "one row, not a whole cluster. For one coefficient, private_coef's default method (fwl_score) gives "
            "one; otherwise remove cluster= to run it.")
    defaults = cls.defaults
    unknown = sorted(k for k in params if k not in defaults)
    if unknown:
        names = ", ".join(repr(k) for k in unknown)
        known = ", ".join(sorted(defaults)) or "none"
        raise TypeError(
            f"unknown argument{'s' if len(unknown) > 1 else ''} {names} for {_TASK_FUNC[task]}(): neither an "
            f"argument of the function nor a hyperparameter of method {name!r} (its hyperparameters: {known}; "
            f"see its page in the docs, algorithms/{task}/{name}, or `dpstats algorithms --task {task}`)")


#: The API declines, before running any method and without spending budget, when
#: ``n * epsilon < _MIN_N_EPS * sqrt(k)`` (``k`` released quantities). See :func:`_too_few_rows`.
_MIN_N_EPS = 10.0


def _round_up(x: float, digits: int = 3) -> float:
    """``x`` rounded up to ``digits`` significant digits (so that the value shown clears the threshold)."""
    if x <= 0:
        return x
    step = 10.0 ** (math.floor(math.log10(x)) - digits + 1)
    return math.ceil(x / step - 1e-9) * step


def _too_few_rows(n: int, k: int, epsilon: float) -> str | None:
    """The reason of the API's decline for too few rows, or ``None``: a public rule on ``n``, ``k`` and ``epsilon``.

    The rule: decline when ``n * epsilon < 10 * sqrt(k)``, with ``k`` the
    number of released quantities (1 for :func:`private_coef`, the design
    columns for :func:`private_ols`, the mean terms for
    :func:`private_mean`). Below it the privacy noise alone swamps any
    estimate: the 95% interval of a Gaussian-noise mean of one bounded
    column is about ``19 sqrt(k) / (n epsilon)`` times its range at
    ``delta = 1e-6`` (wider than the range below ``n epsilon = 19 sqrt(k)``),
    and on mroz the default regression methods gave no finite interval below
    ``n epsilon / d`` of about 200 (coefficient) and 800 (OLS vector). The rule
    reads only public facts, so the decline reveals nothing and costs nothing.
    """
    need = _MIN_N_EPS * math.sqrt(k)
    if n * epsilon >= need:
        return None
    rows = math.ceil(need / epsilon - 1e-9)
    what = "1 released quantity" if k == 1 else f"{k} released quantities"
    return (f"{_TINY_PREFIX}: n * epsilon = {n} * {_fmt(epsilon)} = {_fmt(n * epsilon)} is below "
            f"10 sqrt(k) = {_fmt(need)} for {what}, where the privacy noise swamps any estimate. Use at least "
            f"{rows} rows at this epsilon, or epsilon >= {_fmt(_round_up(need / n))} with these {n} rows (nothing "
            "was spent: the rule reads only n, k and epsilon)")
