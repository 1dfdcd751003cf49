"""The R engine: OLS covariances computed by R's ``sandwich`` and ``clubSandwich`` through rpy2.

The R engine recomputes the covariance matrix of an instance's OLS
coefficients in R, independently of the statsmodels code in
:mod:`dpstats.ols.covariance`, so that the two can be checked against each other
(``dpstats corpus verify --engine r``). It needs R with the packages
``sandwich`` and ``clubSandwich`` and the Python extra ``dpstats[r]``
(rpy2 3.5.17).

Two routes fit the model in R:

``"design"`` (the default)
    ``lm(y ~ X - 1, weights = w)`` on dpstats' own design matrix, so the
    columns are identical by construction.
``"formula"``
    The manifest formula translated to R syntax (:func:`translate_formula`)
    and fitted with ``lm`` on the instance's ``frame``; the R columns are then
    matched to dpstats' columns by their values, and the nesting of fixed
    effects in the clusters is recomputed in R from the factors themselves.

=====================  ==========================================================
``se``                 R computation
=====================  ==========================================================
``classical``          ``vcov(lm)``
``HC0`` ... ``HC3``    ``sandwich::vcovHC(fit, type = se)``
``cluster:<col>``      ``sandwich::vcovCL(fit, type = "HC0", cadjust = TRUE)``
                       times ``(n - 1) / (n - k)`` with ``k`` the rank less the
                       nested fixed effects (Stata's convention, as
                       :meth:`dpstats.ols.covariance.ClusterCR1.k_effective`);
                       checked against ``vcovCL(type = "HC1")`` and
                       ``clubSandwich::vcovCR(type = "CR1S")`` rescaled to
                       that ``k``
``bootstrap:<reps>``   ``lm`` refitted (``lm.fit``/``lm.wfit``, the routines
                       ``lm`` calls) on the resamples of
                       :func:`dpstats.ols.covariance.bootstrap_indices`, the same
                       rows as the Python engine; resamples of lower rank are
                       skipped
=====================  ==========================================================

Examples
--------
>>> from dpstats.data.corpus import Corpus
>>> from dpstats.ols.r_engine import r_vcov
>>> inst = Corpus.public().instance("mroz87_lwage")
>>> round(float(r_vcov(inst)[1, 1]) ** 0.5, 4)  # doctest: +SKIP
0.0141
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from dpstats.ols.covariance import BOOTSTRAP_SEED, bootstrap_indices

__all__ = [
    "REngineError",
    "RCovariance",
    "r_available",
    "r_vcov",
    "r_covariance",
    "r_coefficients",
    "translate_formula",
    "R_PACKAGES",
]

#: R packages the engine needs
R_PACKAGES = ("sandwich", "clubSandwich")

#: clubSandwich's cross-check runs when the sum of squared cluster sizes is at most this
#: (it builds an ``n_g x n_g`` matrix per cluster)
CLUBSANDWICH_MAX_CELLS = 2e7

#: tolerance matching R's model-matrix columns to dpstats' (formula route)
MATCH_RTOL = 1e-10
#: the same when the data have float32 columns: patsy evaluates ``I(x**2)`` in
#: float32 for them, R in double precision
MATCH_RTOL_FLOAT32 = 1e-6

#: relative tolerance of the internal cross-checks (vcovCL HC1 and clubSandwich CR1S)
CROSSCHECK_RTOL = 1e-8


class REngineError(RuntimeError):
    """R, rpy2 or an R package is missing, or R failed on an instance."""


_R_CODE = r"""
local({
  fit_design <- function(X, y, w) {
    if (is.null(w)) lm(y ~ X - 1) else lm(y ~ X - 1, weights = w)
  }

  fit_formula <- function(formula, data, weights) {
    f <- stats::as.formula(formula, env = globalenv())
    if (is.null(weights)) {
      lm(f, data = data)
    } else {
      data[[".dpstats_w"]] <- weights
      lm(f, data = data, weights = .dpstats_w)
    }
  }

  # columns of single-factor terms whose levels each lie in one cluster
  nested_count <- function(fit, cluster) {
    tt <- stats::terms(fit)
    mf <- stats::model.frame(fit)
    asg <- attr(stats::model.matrix(fit), "assign")
    kept <- !is.na(stats::coef(fit))
    labs <- attr(tt, "term.labels")
    fac <- attr(tt, "factors")
    nest <- 0L
    for (j in seq_along(labs)) {
      vars <- rownames(fac)[fac[, j] > 0]
      if (length(vars) != 1L) next
      v <- mf[[vars]]
      if (!(is.factor(v) || is.character(v) || is.logical(v))) next
      per_level <- tapply(cluster, as.character(v), function(z) length(unique(z)))
      if (all(per_level == 1L)) nest <- nest + sum(kept[asg == j])
    }
    nest
  }

  k_effective <- function(rank, n_nested, intercept) {
    as.integer(rank - n_nested - (if (n_nested > 0 && intercept) 1L else 0L))
  }

  boot <- function(X, y, w, idx) {
    d <- ncol(X)
    draws <- matrix(NA_real_, nrow(idx), d)
    skipped <- 0L
    for (r in seq_len(nrow(idx))) {
      i <- idx[r, ]
      f <- if (is.null(w)) stats::lm.fit(X[i, , drop = FALSE], y[i])
           else stats::lm.wfit(X[i, , drop = FALSE], y[i], w[i])
      if (f$rank < d) { skipped <- skipped + 1L; next }
      draws[r, ] <- f$coefficients
    }
    draws <- draws[stats::complete.cases(draws), , drop = FALSE]
    if (nrow(draws) < 2L) stop("fewer than 2 bootstrap resamples had a full-rank design")
    list(V = stats::cov(draws), skipped = skipped)
  }

  covariance <- function(fit, se, cluster, k_eff, idx, X, y, w, club_max) {
    out <- list(k_effective = NA_integer_, skipped = NA_integer_,
                V_hc1 = NULL, V_cr1s = NULL)
    if (se == "classical") {
      V <- stats::vcov(fit)
    } else if (se %in% c("HC0", "HC1", "HC2", "HC3")) {
      V <- sandwich::vcovHC(fit, type = se)
    } else if (se == "cluster") {
      n <- stats::nobs(fit)
      k <- fit$rank
      cl <- factor(cluster)
      V0 <- sandwich::vcovCL(fit, cluster = cl, type = "HC0", cadjust = TRUE)
      V <- V0 * (n - 1) / (n - k_eff)
      # cross-checks, both with k = rank, rescaled to k_eff
      out$V_hc1 <- sandwich::vcovCL(fit, cluster = cl, type = "HC1", cadjust = TRUE) * (n - k) / (n - k_eff)
      # clubSandwich forms an n_g x n_g matrix per cluster: only where that fits in memory
      if (sum(as.numeric(table(cl))^2) <= club_max) {
        out$V_cr1s <- as.matrix(clubSandwich::vcovCR(fit, cluster = cl, type = "CR1S")) * (n - k) / (n - k_eff)
      }
      out$k_effective <- as.integer(k_eff)
    } else if (se == "bootstrap") {
      b <- boot(X, y, w, idx)
      V <- b$V
      out$skipped <- b$skipped
    } else {
      stop("unknown se type: ", se)
    }
    V <- as.matrix(V)
    dimnames(V) <- NULL
    out$V <- V
    out
  }

  list(fit_design = fit_design, fit_formula = fit_formula, nested_count = nested_count,
       k_effective = k_effective, covariance = covariance)
})
"""

_STATE: dict[str, Any] = {}


def r_available() -> tuple[bool, str]:
    """Whether the R engine can run here.

    Returns
    -------
    ok : bool
    reason : str
        Empty when ``ok``; otherwise what is missing and how to install it.
    """
    try:
        _r()
    except REngineError as exc:
        return False, str(exc)
    return True, ""


def _r() -> Any:
    """The R helper functions (defined once per process)."""
    if "fns" in _STATE:
        return _STATE["fns"]
    if "error" in _STATE:
        raise REngineError(_STATE["error"])
    # Starting the embedded R sets LD_LIBRARY_PATH to R's library folders (and
    # the system's), which would make child Python processes (worker pools,
    # Dask nannies) load the system's libpython; R's own libraries are loaded
    # by then, so the variable is restored.
    saved = os.environ.get("LD_LIBRARY_PATH")
    try:
        import rpy2.robjects as ro
        from rpy2.rinterface_lib.embedded import RRuntimeError  # noqa: F401
    except Exception as exc:  # ImportError, or R itself cannot be loaded
        _STATE["error"] = (
            f"the R engine needs rpy2 and R ({type(exc).__name__}: {exc}); "
            "install R and then `pip install 'dpstats[r]'` (rpy2==3.5.17)"
        )
        raise REngineError(_STATE["error"]) from None
    finally:
        if saved is None:
            os.environ.pop("LD_LIBRARY_PATH", None)
        else:
            os.environ["LD_LIBRARY_PATH"] = saved
    missing = [p for p in R_PACKAGES if not ro.r(f'isTRUE(suppressMessages(requireNamespace("{p}", quietly = TRUE)))')[0]]
    if missing:
        _STATE["error"] = (
            f"the R engine needs the R package(s) {', '.join(missing)}: "
            f"install.packages(c({', '.join(repr(p) for p in missing)})) "
            "or apt-get install " + " ".join(f"r-cran-{p.lower()}" for p in missing)
        )
        raise REngineError(_STATE["error"])
    _STATE["ro"] = ro
    _STATE["fns"] = ro.r(_R_CODE)
    return _STATE["fns"]


def _fn(name: str) -> Any:
    return _r().rx2(name)


def _call(name: str, *args: Any) -> Any:
    from rpy2.rinterface_lib.embedded import RRuntimeError

    try:
        return _fn(name)(*args)
    except RRuntimeError as exc:
        raise REngineError(f"R failed in {name}: {str(exc).strip()}") from None


def _vec(x: np.ndarray | None) -> Any:
    ro = _STATE["ro"]
    if x is None:
        return ro.NULL
    return ro.FloatVector(np.asarray(x, dtype=float).ravel())


def _mat(X: np.ndarray) -> Any:
    ro = _STATE["ro"]
    X = np.asarray(X, dtype=float)
    return ro.r.matrix(ro.FloatVector(X.ravel(order="F")), nrow=X.shape[0], ncol=X.shape[1])


def _imat(idx: np.ndarray) -> Any:
    ro = _STATE["ro"]
    idx = np.asarray(idx)
    return ro.r.matrix(ro.IntVector((idx + 1).ravel(order="F").tolist()), nrow=idx.shape[0], ncol=idx.shape[1])


def _cluster_codes(clusters: np.ndarray | None) -> Any:
    ro = _STATE["ro"]
    if clusters is None:
        return ro.NULL
    return ro.IntVector((pd.factorize(pd.Series(clusters))[0] + 1).tolist())


def _se_kind(se: str) -> tuple[str, int | None]:
    if se == "classical" or se in ("HC0", "HC1", "HC2", "HC3"):
        return se, None
    kind, _, arg = se.partition(":")
    if kind == "cluster":
        return "cluster", None
    if kind == "bootstrap":
        return "bootstrap", int(arg)
    raise ValueError(f"unknown se {se!r}")


# --------------------------------------------------------------------------
# Formula translation (patsy -> R)
# --------------------------------------------------------------------------

_NP_FUNCS = {"log": "log", "exp": "exp", "sqrt": "sqrt", "abs": "abs", "log1p": "log1p", "log10": "log10",
             "log2": "log2"}


def translate_formula(formula: str, fixed_effects: tuple[str, ...] | list[str] = (),
                      factors: tuple[str, ...] | list[str] = ()) -> str:
    """Translate a dpstats (patsy) formula into R's formula syntax.

    Handles ``np.log``/``log`` and the other numpy functions patsy sees in
    dpstats (``exp``, ``sqrt``, ``abs``), ``C(x)`` to ``factor(x)``,
    ``I(x**2)`` to ``I(x^2)``, ``Q("name")`` to a backquoted name, and
    passes ``a*b``, ``a:b``, ``- 1`` and ``+ 0`` through; each fixed effect
    becomes ``+ factor(fe)``.

    Parameters
    ----------
    formula : str
    fixed_effects : sequence of str
    factors : sequence of str
        Variables that are already R factors with patsy's levels (including
        levels with no rows); ``C(x)`` becomes plain ``x`` for them, since
        ``factor(x)`` would drop the unused levels and move the reference level.

    Returns
    -------
    str

    Raises
    ------
    ValueError
        For patsy constructs with no translation (contrast arguments to
        ``C()``, other numpy functions, patsy's stateful transforms).

    Examples
    --------
    >>> translate_formula("np.log(wage) ~ educ + C(region) + I(exper**2) - 1", ["year"])
    'log(wage) ~ educ + factor(region) + I(exper^2) - 1 + factor(year)'
    """
    out = formula
    factors = set(factors)

    def np_func(m: re.Match[str]) -> str:
        name = m.group(1)
        if name not in _NP_FUNCS:
            raise ValueError(f"no R translation for np.{name} in {formula!r}")
        return _NP_FUNCS[name] + "("

    out = re.sub(r"\b(?:np|numpy)\.([A-Za-z_][A-Za-z0-9_]*)\s*\(", np_func, out)
    for bad in ("center(", "standardize(", "scale(", "bs(", "cr(", "cc(", "te("):
        if re.search(r"(?<![A-Za-z0-9_.])" + re.escape(bad), out):
            raise ValueError(f"no R translation for patsy's {bad[:-1]}() in {formula!r}")

    def c_call(m: re.Match[str]) -> str:
        inner = m.group(1).strip()
        if "," in inner:
            raise ValueError(f"no R translation for C() with contrast arguments in {formula!r}")
        return inner if inner in factors else f"factor({inner})"

    out = re.sub(r"(?<![A-Za-z0-9_.])C\(([^()]*)\)", c_call, out)
    if re.search(r"(?<![A-Za-z0-9_.])C\(", out):
        raise ValueError(f"no R translation for C() with contrast arguments in {formula!r}")
    out = re.sub(r"(?<![A-Za-z0-9_.])Q\(\s*(['\"])(.*?)\1\s*\)", lambda m: f"`{m.group(2)}`", out)
    out = out.replace("**", "^")
    for fe in fixed_effects:
        out += f" + {fe}" if fe in factors else f" + factor({fe})"
    return out


def _factor_levels(instance: Any) -> dict[str, list[str]]:
    """R levels for each categorical variable that reproduce dpstats' dummy columns.

    Patsy takes the levels from the rows before those with missing values are
    dropped, so a level can have no row in ``frame`` (its dummy is all zero and
    dropped as collinear) and can even be patsy's reference level; then the
    last level's dummy is dropped as collinear with the intercept instead, and
    that level is the effective reference. R's ``lm`` drops unused levels, so
    the levels are given explicitly: first the one level of ``frame`` that has
    no dummy column in dpstats' design, then the levels of the kept dummy
    columns ``<term>[T.<level>]`` in design order. A term not coded that way
    (no intercept, interactions) keeps patsy's order of the rows' levels.
    """
    spec = instance.spec
    frame = instance.frame
    columns = list(instance.facts.columns)
    cvars = set(re.findall(r"(?<![A-Za-z0-9_.])C\(\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)", spec.formula or ""))
    cvars |= set(spec.fixed_effects)
    plain = {c for c in frame.columns if c not in cvars and not pd.api.types.is_numeric_dtype(frame[c])
             and re.search(r"(?<![A-Za-z0-9_.])" + re.escape(c) + r"(?![A-Za-z0-9_.(])", spec.formula or "")}
    out: dict[str, list[str]] = {}
    for var in sorted(cvars | plain):
        if var not in frame.columns:
            continue
        prefix = f"C({var})[T." if var in cvars else f"{var}[T."
        kept = [c[len(prefix):-1] for c in columns if c.startswith(prefix) and c.endswith("]")]
        present = [str(v) for v in sorted(pd.unique(frame[var]), key=_sort_key())]
        ref = [v for v in present if v not in set(kept)]
        if len(ref) == 1 and set(kept) <= set(present):
            out[var] = ref + kept
        else:
            out[var] = present
    return out


def _sort_key() -> Any:
    import patsy.util

    return patsy.util.SortAnythingKey


def _r_frame(frame: pd.DataFrame, levels: Mapping[str, list[str]] | None = None) -> Any:
    """An R data.frame of ``frame``.

    Columns in ``levels`` become factors with those levels; other text and
    categorical columns become factors in patsy's level order.
    """
    ro = _STATE["ro"]
    levels = dict(levels or {})
    cols: dict[str, Any] = {}
    for name in frame.columns:
        s = frame[name]
        if name in levels:
            cols[name] = ro.r["factor"](ro.StrVector(s.astype(str).tolist()), levels=ro.StrVector(levels[name]))
        elif pd.api.types.is_bool_dtype(s):
            cols[name] = ro.BoolVector(s.astype(bool).tolist())
        elif pd.api.types.is_numeric_dtype(s) and not isinstance(s.dtype, pd.CategoricalDtype):
            cols[name] = ro.FloatVector(s.to_numpy(dtype=float))
        else:
            if isinstance(s.dtype, pd.CategoricalDtype):
                lv = [str(v) for v in s.cat.categories]
            else:
                lv = [str(v) for v in sorted(pd.unique(s), key=_sort_key())]
            cols[name] = ro.r["factor"](ro.StrVector(s.astype(str).tolist()), levels=ro.StrVector(lv))
    lst = ro.ListVector(cols)
    return ro.r("function(l) as.data.frame(l, optional = TRUE, stringsAsFactors = FALSE)")(lst)


def _match_columns(XR: np.ndarray, X: np.ndarray, rtol: float = 1e-10) -> np.ndarray:
    """Permutation ``p`` with ``XR[:, p[j]] == X[:, j]`` (to ``rtol`` of the column's largest value), or raise.

    Candidates are screened by a random projection (a column within the
    tolerance projects within ``rtol * max|x| * ||r||_1``), then checked in full.
    """
    n, d = X.shape
    if XR.shape != X.shape:
        raise REngineError(f"R's model matrix has {XR.shape[1]} columns, dpstats' has {d}")
    scale = np.maximum(np.abs(X).max(axis=0), 1e-300)
    r = np.random.default_rng(0).standard_normal(n)
    sig_r, sig_p = r @ XR, r @ X
    slack = np.abs(r).sum() * scale * rtol * (1 + 1e-6) + 1e-12 * np.abs(sig_p)
    perm = np.full(d, -1)
    used: set[int] = set()
    for j in range(d):
        screen = np.flatnonzero(np.abs(sig_r - sig_p[j]) <= slack[j])
        cand = [int(c) for c in screen
                if int(c) not in used and np.abs(XR[:, c] - X[:, j]).max() <= rtol * scale[j]]
        if len(cand) != 1:
            raise REngineError(f"cannot match dpstats column {j} to exactly one R column ({len(cand)} candidates)")
        perm[j] = cand[0]
        used.add(cand[0])
    return perm


# --------------------------------------------------------------------------
# Public functions
# --------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class RCovariance:
    """A covariance matrix computed in R, with what R reported along the way.

    Attributes
    ----------
    vcov : ndarray, shape (d, d)
        In dpstats' column order.
    beta : ndarray, shape (d,)
        R's OLS coefficients, in dpstats' column order.
    se_type : str
    route : {"design", "formula"}
    k_effective : int or None
        The ``k`` of ``(n - 1)/(n - k)`` (cluster).
    bootstrap_skipped : int or None
        Resamples skipped for rank deficiency (bootstrap).
    crosschecks : mapping of str to ndarray
        ``"vcovCL_HC1"`` and ``"clubSandwich_CR1S"`` rescaled to ``k_effective`` (cluster);
        clubSandwich only where the sum of squared cluster sizes is at most
        :data:`CLUBSANDWICH_MAX_CELLS` (it builds one ``n_g x n_g`` matrix per cluster).
    r_formula : str or None
        The R formula (formula route).
    """

    vcov: np.ndarray
    beta: np.ndarray
    se_type: str
    route: str
    k_effective: int | None = None
    bootstrap_skipped: int | None = None
    crosschecks: Mapping[str, np.ndarray] = field(default_factory=dict)
    r_formula: str | None = None


def _instance_weights(instance: Any) -> np.ndarray | None:
    return None if instance.weights is None else np.asarray(instance.weights, dtype=float)


def r_covariance(instance: Any, route: str = "design", se: str | None = None, check: bool = True) -> RCovariance:
    """Fit an instance's OLS in R and compute the covariance of its coefficients.

    Parameters
    ----------
    instance : Instance
        An sce or linreg instance.
    route : {"design", "formula"}
        Fit ``lm(y ~ X - 1)`` on the design matrix, or the translated formula on ``instance.frame``.
    se : str, optional
        A manifest ``se`` string; default the instance's own (``instance.spec.se``).
    check : bool, default True
        For clustered errors, raise when ``vcovCL(type = "HC1")`` or
        ``clubSandwich::vcovCR(type = "CR1S")`` (rescaled to the same ``k``)
        disagree with the result beyond a relative 1e-8.

    Returns
    -------
    RCovariance

    Raises
    ------
    REngineError
        R, rpy2 or an R package is missing, or R fails.
    ValueError
        A mean instance, an unknown route or ``se``.
    """
    if instance.task == "mean":
        raise ValueError("the R engine computes regression covariances; mean instances have none")
    if route not in ("design", "formula"):
        raise ValueError(f"route must be 'design' or 'formula', got {route!r}")
    se = instance.spec.se if se is None else se
    kind, reps = _se_kind(se)
    _r()
    ro = _STATE["ro"]
    X = np.asarray(instance.X, dtype=float)
    y = np.asarray(instance.y, dtype=float)
    w = _instance_weights(instance)
    n, d = X.shape
    if kind == "cluster" and instance.clusters is None:
        raise ValueError(f"se {se!r} needs cluster labels; instance {instance.id!r} has none")
    cl = _cluster_codes(instance.clusters if kind == "cluster" else None)
    r_formula = None
    perm = np.arange(d)
    if route == "design":
        fit = _call("fit_design", _mat(X), _vec(y), _vec(w))
        n_nested = len(instance.nested_columns) if kind == "cluster" else 0
    else:
        spec = instance.spec
        levels = _factor_levels(instance)
        r_formula = translate_formula(spec.formula, spec.fixed_effects, factors=tuple(levels))
        rw = ro.NULL if spec.weights is None else _vec(instance.frame[spec.weights].to_numpy(dtype=float))
        fit = _call("fit_formula", r_formula, _r_frame(instance.frame, levels), rw)
        coef = np.asarray(ro.r["coef"](fit), dtype=float)
        mm = np.asarray(ro.r["model.matrix"](fit), dtype=float)[:, ~np.isnan(coef)]
        f32 = any(instance.frame[c].dtype == np.float32 for c in instance.frame.columns)
        perm = _match_columns(mm, X, rtol=MATCH_RTOL_FLOAT32 if f32 else MATCH_RTOL)
        n_nested = int(_call("nested_count", fit, cl)[0]) if kind == "cluster" else 0
    intercept = bool(np.any(np.all(X == 1.0, axis=0)))
    k_eff = int(_call("k_effective", d, n_nested, intercept)[0])
    idx = ro.NULL
    if kind == "bootstrap":
        idx = _imat(bootstrap_indices(n, int(reps), BOOTSTRAP_SEED))
    res = _call("covariance", fit, kind, cl, k_eff, idx, _mat(X), _vec(y), _vec(w), float(CLUBSANDWICH_MAX_CELLS))
    coef = np.asarray(ro.r["coef"](fit), dtype=float)
    coef = coef[~np.isnan(coef)]
    V = np.asarray(res.rx2("V"), dtype=float)
    if kind != "bootstrap":
        V = V[np.ix_(perm, perm)]
    beta = coef[perm]
    checks: dict[str, np.ndarray] = {}
    k_out = None
    skipped = None
    if kind == "cluster":
        k_out = int(res.rx2("k_effective")[0])
        checks["vcovCL_HC1"] = np.asarray(res.rx2("V_hc1"), dtype=float)[np.ix_(perm, perm)]
        if res.rx2("V_cr1s") is not ro.NULL:
            checks["clubSandwich_CR1S"] = np.asarray(res.rx2("V_cr1s"), dtype=float)[np.ix_(perm, perm)]
        if check:
            tol = CROSSCHECK_RTOL * np.abs(V).max()
            for name, other in checks.items():
                if not np.allclose(other, V, rtol=CROSSCHECK_RTOL, atol=tol):
                    raise REngineError(
                        f"instance {instance.id!r}: {name} disagrees with vcovCL(HC0) * (n-1)/(n-k) "
                        f"(max abs difference {np.abs(other - V).max():.3g})"
                    )
    if kind == "bootstrap":
        skipped = int(res.rx2("skipped")[0])
    return RCovariance(V, beta, se, route, k_out, skipped, checks, r_formula)


def r_vcov(instance: Any, route: str = "design") -> np.ndarray:
    """Covariance matrix of an instance's OLS coefficients of the study's type, computed in R.

    Used by :func:`dpstats.ols.baseline.compute_baseline` with ``engine="r"``.

    Parameters
    ----------
    instance : Instance
    route : {"design", "formula"}
        See :func:`r_covariance`.

    Returns
    -------
    ndarray, shape (d, d)
        In dpstats' column order.
    """
    return r_covariance(instance, route=route).vcov


def r_coefficients(instance: Any, route: str = "formula") -> np.ndarray:
    """OLS coefficients fitted by R's ``lm``, in dpstats' column order.

    Parameters
    ----------
    instance : Instance
    route : {"design", "formula"}

    Returns
    -------
    ndarray, shape (d,)
    """
    return r_covariance(instance, route=route, se="classical").beta
