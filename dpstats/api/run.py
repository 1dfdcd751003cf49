"""The three public functions and the run they share.

:func:`private_coef`, :func:`private_ols` and :func:`private_mean` check
their own arguments and hand the rest to :func:`_run`: checks, the design
(through the replication corpus's machinery), the public decline rule, the
release, and the :class:`~dpstats.api.result.PrivateResult`.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from dpstats.algorithms import list_algorithms
from dpstats.algorithms.base import Decline, Release
from dpstats.algorithms.release import AlgorithmSpec, Budget, InvalidOutcome, release
from dpstats.api.inputs import (
    _check_bounds,
    _check_data,
    _check_delta,
    _check_formula,
    _check_levels,
    _check_params,
    _check_seed,
    _check_weights,
    _declared_column,
    _inspect_design,
    _is_text,
    _method_class,
    _too_few_rows,
    _user_error,
    _warn_binary_unbounded,
    _warn_bounds,
    _warn_delta,
    _warn_missing,
    _warn_weighted_bounds,
)
from dpstats.api.methods import _TASK_FUNC
from dpstats.api.result import PrivateResult
from dpstats.data.corpus import InstanceSpec
from dpstats.data.instance import build_instance
from dpstats.errors import CorpusError
from dpstats.privacy.accounting import PrivacyLeakWarning
from dpstats.privacy.randomness import release_generator

#: The manifest path of the data frame's instance (it has no file).
_SOURCE = Path("<data>")


def _run(task: str, data: Any, *, formula: str | None = None, coef: str | None = None,
         columns: Sequence[str] | None = None, epsilon: Any, delta: Any, method: str | None, seed: Any,
         secure: Any, bounds: Any, levels: Any, params: dict[str, Any], inference: Any = None,
         weights: Any = None) -> PrivateResult:
    budget = Budget(epsilon, delta)
    eps, dlt = budget.epsilon, budget.delta
    if inference is not None and not isinstance(inference, (bool, np.bool_)):
        raise TypeError(f"inference must be True, False or None, got {inference!r}")
    seed = _check_seed(seed)
    if not isinstance(secure, (bool, np.bool_)):
        raise TypeError(f"secure must be True or False, got {secure!r}")
    user_bounds = _check_bounds(bounds)
    declared = _check_levels(levels)
    df = _check_data(data)
    weights = _check_weights(task, weights, params, df)
    name, cls = _method_class(task, method, inference is not False)
    cluster = params.pop("cluster", None) if (task == "sce" and cls.cluster_intervals) else None
    if cluster is not None and not (isinstance(cluster, str) and cluster):
        raise TypeError(f"cluster must be the name of a column, got {cluster!r}")
    if cluster is not None and inference is False:
        raise ValueError("cluster: a cluster-robust interval needs inference; remove cluster= or inference=False")
    _check_params(task, name, cls, params)
    _check_delta(task, name, method is None, dlt)
    if inference is None:  # the default: an interval whenever the method gives one fit to publish
        inference = bool(cls.intervals and cls.interval_validated)
    if inference and not (cls.intervals and cls.interval_validated):
        with_ci = ", ".join(a.name for a in list_algorithms(task) if a.intervals and a.interval_validated)
        if not with_ci:
            raise ValueError(f"inference: {_TASK_FUNC[task]}() offers no interval at present: the intervals of its "
                             "methods miss far more often than 5 % on some data sets of the public corpus "
                             "(docs/inference.md, 'Which methods give intervals'). Use inference=False for the "
                             "point estimate, or private_coef() for one coefficient with its interval")
        if not cls.intervals:
            raise ValueError(f"inference: method {name!r} gives no standard error or interval; use one of {with_ci} "
                             "(or method=None), or inference=False")
        # intervals that miss far more often than they claim on some data sets of the public corpus are the
        # benchmark's, not the economist's (docs/inference.md, "Which methods give intervals")
        raise ValueError(f"inference: the intervals of method {name!r} are not offered here: on the public corpus's "
                         "coverage benchmark, judged one data set at a time, they miss far more often than 5 % on "
                         f"some data sets. Use one of {with_ci} (or method=None) for an interval, or "
                         "inference=False for this method's point estimate")
    if inference:
        # the method's interval configuration, unless the user set it; a budget share of the interval
        # (``*_share``) set to 0 would leave the interval unpaid for
        switch = dict(cls.interval_params)
        for k, v in switch.items():
            if k.endswith("_share") and v and k in params and not params[k]:
                raise ValueError(f"inference: {k}={params[k]!r} leaves no budget for the interval of {name!r}; "
                                 f"use {k} > 0 (default {v!r}) or inference=False")
    configured = AlgorithmSpec(task, name, params)
    if inference:
        configured = configured.with_intervals()
    algo = configured.build()  # the hyperparameters are checked before any data work
    if inference and cls.interval_validated:
        # the intervals were judged per data set at the method's interval configuration, not at others
        judged = cls(**cls.interval_params).params
        moved = {k: v for k, v in algo.params.items() if judged.get(k) != v}
        if moved:
            warnings.warn(
                f"{', '.join(f'{k}={v!r}' for k, v in moved.items())}: the intervals of {name!r} were judged one "
                f"data set at a time with its interval configuration, not with these hyperparameters "
                f"(docs/inference.md, 'Which methods give intervals'); check them before you publish",
                UserWarning, stacklevel=3)
    if declared:
        df = df.copy()
        for col, lv in list(declared.items()):
            df[col], declared[col] = _declared_column(df, col, lv)
    spec_bounds = dict(user_bounds)
    levels_from_data: tuple[str, ...] = ()
    fixed: frozenset[str] = frozenset()
    if task == "mean":
        unused = [c for c in declared if c not in columns]
        mean_cols: list[str] = []
        for c in columns:
            if c not in declared:
                if c in df.columns and _is_text(df[c]):
                    raise ValueError(
                        f"columns: column {c!r} is not numeric (dtype {df[c].dtype}): a mean needs numbers. Declare "
                        f"its levels, levels={{{c!r}: [...]}}, to release the share of each level, or convert it "
                        f"with pd.to_numeric(data[{c!r}])")
                mean_cols.append(c)
                continue
            if c in user_bounds:
                raise ValueError(f"bounds: {c!r} has declared levels; its share columns are in [0, 1]")
            cat = df[c]
            missing = cat.isna().to_numpy()
            for lvl in declared[c]:
                share = f"{c}[{lvl}]"
                col = (cat == lvl).to_numpy(dtype=float)
                col[missing] = np.nan
                df[share] = col
                spec_bounds[share] = (0.0, 1.0)
                mean_cols.append(share)
        spec = InstanceSpec(id="data", study="data", task="mean", dataset="data", manifest=_SOURCE,
                            columns=tuple(mean_cols), bounds=spec_bounds)
        model = ", ".join(columns)
    else:
        formula = _check_formula(formula)
        cat_vars, used = _inspect_design(df, formula)
        unused = [c for c in declared if c not in cat_vars]
        levels_from_data = tuple(sorted(cat_vars - set(declared)))
        fixed = frozenset(declared)
        spec = InstanceSpec(id="data", study="data", task=task, dataset="data", manifest=_SOURCE,
                            formula=formula, coefficient=coef, bounds=spec_bounds, weights=weights,
                            **({"se": f"cluster:{cluster}"} if cluster is not None else {}))
        model = formula
    if unused:
        warnings.warn(f"levels: {unused} name(s) no categorical variable of the model; not used",
                      UserWarning, stacklevel=3)
    if levels_from_data:
        warnings.warn(
            f"levels: the levels of {list(levels_from_data)} are read from the data: the levels present and the "
            "dummy columns dropped as empty or collinear are treated as public without spending privacy, so the "
            "release's column names depend on the data. Declare them, e.g. levels={"
            + repr(levels_from_data[0]) + ": [...]}, to avoid this.",
            PrivacyLeakWarning,
            stacklevel=3,
        )
    try:
        inst = build_instance(spec, df, fixed_levels=fixed)
    except CorpusError as exc:
        if exc.field == "se":
            raise ValueError(f"cluster: {cluster!r} is not a column of data (give the column whose values are "
                             "the clusters)") from None
        err = _user_error(exc)
        if exc.field == "coefficient" and coef in df.columns and _is_text(df[coef]):
            err = ValueError(f"{err} ({coef!r} holds strings (dtype {df[coef].dtype}), so the formula treats it as "
                             f"categorical, one dummy column '{coef}[T.level]' per level: name one of them, or "
                             f"convert the column with pd.to_numeric(data[{coef!r}]) to estimate one slope)")
        raise err from None
    if task == "sce" and name == "fwl_score" and not weights and inst.facts.coefficient == "Intercept":
        # fwl_score partials out the constant, so the constant's own coefficient is never estimated
        alt = (f"its coefficient is the mean of {inst.facts.outcome}: use private_mean(data, "
               f"{inst.facts.outcome!r}, ...)" if inst.d == 1 else
               "use private_ols(), which releases the intercept with the slopes")
        raise ValueError(f"coef: fwl_score does not estimate the intercept (it partials the constant out); {alt}")
    _warn_missing(df, list(columns) if task == "mean" else sorted(used | ({weights} if weights else set())),
                  int(inst.dropped_missing))
    if weights and user_bounds:
        _warn_weighted_bounds(weights, user_bounds)
    if task == "mean":
        X = inst.X
        shares = set(spec_bounds) - set(user_bounds)  # a declared level may be absent: no warning
        const = [c for j, c in enumerate(inst.facts.columns) if np.ptp(X[:, j]) == 0 and c not in shares]
        if const:
            warnings.warn(f"columns: {const} constant in the data; the private mean is still noisy",
                          UserWarning, stacklevel=3)
    _warn_delta(dlt, inst.n)
    _warn_bounds(inst, user_bounds)
    if not weights:
        _warn_binary_unbounded(inst)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rng = release_generator(seed, secure=bool(secure))
    for w in caught:  # re-issued at the caller's line, so that the default filter warns at every call site
        warnings.warn(w.message, w.category, stacklevel=3)
    facts = inst.facts
    implied = [c for c in facts.bounds if c not in user_bounds]
    diagnostics = {
        "dropped_missing": int(inst.dropped_missing),
        "dropped_collinear": tuple(inst.dropped_collinear),
        "out_of_bounds": dict(inst.out_of_bounds),
        "implied_bounds": tuple(implied),
    }
    k = 1 if task == "sce" else inst.d
    tiny = _too_few_rows(inst.n, k, eps)
    try:
        out: Release | Decline = (Decline(reason=tiny) if tiny else
                                  release(configured, inst.task_data(), facts, budget, rng))
    except InvalidOutcome as exc:
        raise RuntimeError(f"method {name!r} returned an invalid outcome: {exc} (a bug in the method)") from None
    released = isinstance(out, Release)
    if cluster is not None and released and not str(out.details.get("sampling_error", "")).startswith("cluster-robust"):
        # the release says what its interval accounts for (public: the design's names, the method's settings):
        # an interval that ignores the clusters is not returned as one that accounts for them
        raise ValueError(
            f"cluster: {name} gave no cluster-robust interval on this design (its interval accounts for: "
            f"{out.details.get('sampling_error', 'independent rows')}); remove cluster= for an interval that "
            "assumes independent rows")
    if released and inference and out.std_error is None:
        raise RuntimeError(f"method {name!r} returned no standard error with inference=True (a bug in the method)")
    terms = (facts.coefficient,) if task == "sce" else tuple(facts.columns)
    return PrivateResult(
        task=task, terms=terms, epsilon=eps, delta=dlt, method=name, interpretation_class=cls.interpretation,
        n=inst.n, d=inst.d, model=model, release=out, coefficient=facts.coefficient, outcome=facts.outcome,
        bounds=dict(facts.bounds), levels=declared, levels_from_data=levels_from_data, seeded=seed is not None,
        params=dict(algo.params), citation=cls.citation, diagnostics=diagnostics, inference=bool(inference),
        weights=weights,
    )


def private_coef(data: Any, formula: str, coef: str, epsilon: float, delta: float = 1e-6,
                 method: str | None = None, seed: int | None = None,
                 bounds: Mapping[str, tuple[float, float]] | None = None, *,
                 levels: Mapping[str, Sequence[Any]] | None = None, secure: bool = False,
                 inference: bool | None = None, weights: str | None = None, **params: Any) -> PrivateResult:
    """A differentially private OLS coefficient.

    Parameters
    ----------
    data : pandas.DataFrame
        One row per person (the unit that privacy protects).
    formula : str
        ``"outcome ~ regressors"`` in patsy syntax (``np.log(x)``, ``C(x)``,
        ``I(x**2)``, ``a*b``, ``- 1``), as statsmodels' formula interface.
    coef : str
        The design column whose coefficient is released (e.g. ``"educ"``,
        ``"C(region)[T.south]"``).
    epsilon : float
        Privacy-loss bound, finite and > 0. Required: the budget is your
        choice, there is no default.
    delta : float, default 1e-6
        Failure probability in [0, 1); keep it well below ``1/n``. The
        default methods need ``delta > 0`` (Gaussian noise accounted in
        zCDP); ``delta=0`` works only with a pure-DP method, which the error
        lists.
    method : str, optional
        Algorithm name (see ``dpstats.list_algorithms("sce")``); default
        ``DEFAULT_METHODS["sce"]``.
    seed : int or None, default None
        ``None`` draws the noise from fresh operating-system entropy: use it
        for anything you publish. An integer makes the release reproducible
        for teaching and tests; whoever knows it can remove the noise, so it
        warns (:class:`~dpstats.privacy.accounting.PrivacyLeakWarning`). The seed is not
        stored on the result.
    bounds : dict, optional
        Public ranges ``{column: (lo, hi)}`` of regressors or of the outcome,
        known without looking at the data (e.g. years of schooling in [0, 20]).
    levels : dict, optional
        Public levels ``{column: [level, ...]}`` of categorical variables,
        known without looking at the data (the first is the reference level).
        The dummy columns then do not depend on the data: a declared level
        absent from the data is a column of zeros, and nothing is dropped as
        collinear. A value in the data that is not declared is an error.
        Without it the levels present in the data are used and treated as
        public (a ``PrivacyLeakWarning`` says so).
    secure : bool, default False
        Draw the Gaussian and Laplace noise with OpenDP's samplers instead of
        numpy's floating-point ones (see the privacy page of the docs).
    inference : bool or None, default None
        Release a private standard error and confidence interval with the
        estimate, within the same budget (``res.std_error``,
        ``res.conf_int()``). ``None`` (the default): whenever the method
        gives intervals that are offered, as the defaults of
        ``private_coef`` and ``private_mean`` do (``private_ols``'s does not
        at present; ``docs/inference.md`` gives each method's
        budget split between estimate and uncertainty, and which methods'
        intervals are offered: those judged one data set at a time on the
        public corpus). ``True``: a method without intervals, or whose
        intervals are not offered, is an error naming ``inference``.
        ``False``: a point release that spends the whole budget on the
        estimate.
    weights : str, optional
        The column of positive analytic weights: weighted least squares, as
        ``statsmodels``' ``WLS`` or R's ``lm(weights = )``; the interval is
        the weighted heteroskedasticity-robust (HC0) one. The weights are
        private, part of each person's row: the method sees each row
        multiplied by the square root of its weight, so declared ``bounds``
        are not used (a warning says so), and the intercept and dummies are
        not taken as public columns. Rows missing a weight are dropped.
    **params
        Hyperparameters of the method, and ``cluster=``: the column whose
        values are the sampling clusters. The default method (``fwl_score``)
        then gives a cluster-robust interval, a delete-a-group jackknife over
        groups of clusters (``t`` quantile): groups of the levels of the
        fixed effect it absorbs when the clusters are those levels
        (``cluster="state"`` with ``C(state)`` in the formula), otherwise
        groups formed by a public hash of the cluster labels, as many (up to
        8) as a noisy count of the clusters can fill with about 8 clusters
        each. Clusters of about one row each leave the row-level interval.
        Three groups need about 24 clusters plus three noise sd of the count
        (about 120 clusters at ``epsilon=1``, 60 at 3, 36 at 10); with
        fewer the interval is infinite and says "too few clusters". Methods
        without such an interval refuse ``cluster=`` and say what their
        interval covers instead. The privacy guarantee still protects one
        row, not a whole cluster.

    Returns
    -------
    PrivateResult
        Declined (``declined=True``, nothing spent) when the data are too
        small for a private estimate at this epsilon, by a public rule on
        ``n``, ``k`` and ``epsilon`` only: ``n * epsilon < 10 * sqrt(k)``,
        with ``k`` the number of released quantities (1 here; the design
        columns for :func:`private_ols`; the mean terms for
        :func:`private_mean`). Below it, the privacy noise alone makes the
        95% interval of a Gaussian-noise mean of a bounded column about as
        wide as its range, and the default regression methods are much
        further from a finite interval. See
        :attr:`PrivateResult.uninformative` for releases that say nothing.

    Raises
    ------
    TypeError
        No ``epsilon``; ``data`` that is no data frame with named columns
        (e.g. a NumPy array); an unknown keyword (the message lists the
        method's hyperparameters).
    ValueError
        Bad ``epsilon``/``delta``/``seed``/``bounds``/``levels``/``weights``, ``delta=0``
        for a method that needs ``delta > 0``, ``cluster=`` where no
        cluster-robust interval is offered, a formula that
        cannot be built, an outcome that is not numeric (a string column),
        a coefficient not in the design, infinite values, a constant
        regressor, fewer rows than columns, an unknown method, a value not
        among the declared levels. The message starts with the argument at
        fault. A string regressor is categorical: declare its levels
        (``levels={col: [...]}``) or it reads them from the data (warns).

    Warns
    -----
    UserWarning
        ``delta > 1/n``; values outside the declared ``bounds`` (clipped);
        bounds or levels that name no variable of the model; rows dropped
        for a missing value (a count for you, not for publication).
    PrivacyLeakWarning
        When the method is not of the standard class (not DP); when a
        ``seed`` is passed; when categorical levels are read from the data.
    """
    if not isinstance(coef, str) or not coef:
        raise TypeError(f"coef must be the name of a design column, got {coef!r}")
    return _run("sce", data, formula=formula, coef=coef, epsilon=epsilon, delta=delta, method=method, seed=seed,
                secure=secure, bounds=bounds, levels=levels, params=params, inference=inference, weights=weights)


def private_ols(data: Any, formula: str, epsilon: float, delta: float = 1e-6, method: str | None = None,
                seed: int | None = None, bounds: Mapping[str, tuple[float, float]] | None = None, *,
                levels: Mapping[str, Sequence[Any]] | None = None, secure: bool = False,
                inference: bool | None = None, weights: str | None = None, **params: Any) -> PrivateResult:
    """Differentially private OLS coefficients (the whole vector).

    Parameters
    ----------
    data : pandas.DataFrame
    formula : str
        ``"outcome ~ regressors"`` in patsy syntax.
    epsilon, delta, method, seed, bounds, levels, secure, inference, weights, **params
        As in :func:`private_coef` (``epsilon`` is required);
        ``method`` defaults to ``DEFAULT_METHODS["linreg"]``.

    Returns
    -------
    PrivateResult
        ``estimate`` is a read-only array over ``terms`` (the design columns).
        Declined, as in :func:`private_coef`, when ``n * epsilon < 10 * sqrt(d)``.

    Raises
    ------
    ValueError
        As :func:`private_coef`.
    """
    return _run("linreg", data, formula=formula, epsilon=epsilon, delta=delta, method=method, seed=seed,
                secure=secure, bounds=bounds, levels=levels, params=params, inference=inference, weights=weights)


def private_mean(data: Any, columns: Sequence[str] | str, epsilon: float, delta: float = 1e-6,
                 method: str | None = None, seed: int | None = None,
                 bounds: Mapping[str, tuple[float, float]] | None = None, *,
                 levels: Mapping[str, Sequence[Any]] | None = None, secure: bool = False,
                 inference: bool | None = None, **params: Any) -> PrivateResult:
    """Differentially private means of numeric columns.

    Parameters
    ----------
    data : pandas.DataFrame
    columns : str or sequence of str
        Numeric columns; rows missing any of them are dropped. A column with
        declared ``levels`` is released as the share of each level, one term
        ``"column[level]"`` per declared level.
    epsilon, delta, method, seed, bounds, levels, secure, inference, **params
        As in :func:`private_coef` (``epsilon`` is required);
        ``method`` defaults to ``DEFAULT_METHODS["mean"]``.

    Returns
    -------
    PrivateResult
        ``estimate`` is a read-only array over ``terms`` (the columns).
        Declined, as in :func:`private_coef`, when ``n * epsilon < 10 * sqrt(k)``
        for ``k`` terms.

    Raises
    ------
    ValueError
        As :func:`private_coef`, and for a missing or non-numeric column (a
        string column: declare its levels to release its shares).
    """
    if isinstance(columns, str):
        columns = [columns]
    try:
        columns = [str(c) for c in columns]
    except TypeError:
        raise TypeError(f"columns must be a list of column names, got {columns!r}") from None
    if not columns:
        raise ValueError("columns: give at least one column")
    if len(set(columns)) != len(columns):
        raise ValueError(f"columns: names repeat in {columns}")
    return _run("mean", data, columns=columns, epsilon=epsilon, delta=delta, method=method, seed=seed,
                secure=secure, bounds=bounds, levels=levels, params=params, inference=inference)
