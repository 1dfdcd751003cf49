"""The result of a private release: :class:`PrivateResult`, its intervals and its texts.

A frozen record of what was released and what it assumed: the algorithm's
:class:`~dpstats.algorithms.base.Release` (or
:class:`~dpstats.algorithms.base.Decline`) as it was returned, wrapped with
the call's public facts, and the post-processing a reader needs:
:meth:`~PrivateResult.conf_int`, :meth:`~PrivateResult.tidy`,
:meth:`~PrivateResult.summary`, :meth:`~PrivateResult.interpretation` and
whether the release is worth reporting (:attr:`~PrivateResult.uninformative`).
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

import numpy as np
import pandas as pd

from dpstats.algorithms import get as get_algorithm
from dpstats.algorithms.base import INTERPRETATIONS, NO_INTERVAL, Algorithm, Decline, Release
from dpstats.api.interpretation import interpretation_text
from dpstats.api.methods import INFERENCE_METHODS
from dpstats.api.words import (
    _TASK_TITLES,
    _TINY_PREFIX,
    _covers,
    _fallback_remedy,
    _fmt,
    _infinite_cause,
)


def _readonly(a: Any) -> np.ndarray | None:
    """A read-only float copy of ``a``, one-dimensional; ``None`` stays ``None``."""
    if a is None:
        return None
    a = np.array(a, dtype=float, copy=True).reshape(-1)
    a.setflags(write=False)
    return a


def _frozen(out: Release | Decline) -> Release | Decline:
    """``out`` with read-only arrays and details, so that the result wrapping it cannot drift."""
    details = MappingProxyType(dict(out.details))
    if isinstance(out, Release):
        return replace(out, estimate=_readonly(out.estimate), std_error=_readonly(out.std_error),
                       bias_bound=_readonly(out.bias_bound), ledger=tuple(out.ledger), details=details)
    return replace(out, ledger=tuple(out.ledger), details=details)


def _detail_str(out: Release | Decline, key: str) -> str | None:
    """A release's ``details[key]`` as text; ``None`` when absent, ``None``, ``False`` or empty."""
    v = out.details.get(key)
    return None if v is None or v is False or v == "" else str(v)


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
    release : Release or Decline
        The algorithm's outcome as it returned it
        (:class:`~dpstats.algorithms.base.Release` or
        :class:`~dpstats.algorithms.base.Decline`), with read-only arrays and
        details. ``estimate``, ``declined``, ``reason``, ``ledger``,
        ``std_error``, ``df``, ``bias_bound``, ``sampling_error``,
        ``fallback``, ``fallback_terms`` and ``interval_check`` are read
        from it.
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
    weights : str or None
        The column of analytic weights (weighted least squares), or ``None``.
        The weights are private, part of each row: the method sees each row
        multiplied by the square root of its weight.
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
    inference : bool
        Whether the interval was asked for (the API's ``inference``). Without
        it the result shows no standard error, interval, ``sampling_error``
        or ``interval_check``, even when the method's release carries them.
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
        ``"too few clusters"``, ``"failed standardisation (scales)"`` or
        ``"(Gram)"``); a paid
        statistic, read by :attr:`uninformative_reason`.

    The properties :attr:`uninformative` (True when the release says
    nothing about the target) and :attr:`uninformative_reason` (why, and
    what to do about it) are documented below.
    """

    task: str
    terms: tuple[str, ...]
    epsilon: float
    delta: float
    method: str
    interpretation_class: str
    n: int
    d: int
    model: str
    release: Release | Decline
    coefficient: str | None = None
    outcome: str | None = None
    bounds: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    levels: Mapping[str, tuple] = field(default_factory=dict)
    levels_from_data: tuple[str, ...] = ()
    seeded: bool = False
    params: Mapping[str, Any] = field(default_factory=dict)
    citation: str = ""
    diagnostics: Mapping[str, Any] = field(default_factory=dict)
    inference: bool = True
    weights: str | None = None

    def __post_init__(self) -> None:
        # mappings are copied into read-only views, and the release into one with read-only arrays and
        # details, so the record cannot drift
        if not isinstance(self.release, (Release, Decline)):
            raise TypeError(f"release must be a Release or a Decline, got {type(self.release).__name__}")
        for name in ("bounds", "levels", "params", "diagnostics"):
            object.__setattr__(self, name, MappingProxyType(dict(getattr(self, name))))
        object.__setattr__(self, "release", _frozen(self.release))

    # The release's values, read from it (documented under Attributes above; no docstrings here, which would
    # document them twice).

    @property
    def declined(self) -> bool:
        return not self.release.released

    @property
    def reason(self) -> str | None:
        return self.release.reason if isinstance(self.release, Decline) else None

    @property
    def estimate(self) -> Any:
        return self._per_term(self.release.estimate) if isinstance(self.release, Release) else None

    @property
    def ledger(self) -> tuple:
        return self.release.ledger

    @property
    def std_error(self) -> Any:
        rel = self._shown_interval()
        return None if rel is None else self._per_term(rel.std_error)

    @property
    def df(self) -> float | None:
        rel = self._shown_interval()
        return None if rel is None or rel.df is None else float(rel.df)

    @property
    def bias_bound(self) -> Any:
        rel = self._shown_interval()
        return None if rel is None or rel.bias_bound is None else self._per_term(rel.bias_bound)

    @property
    def sampling_error(self) -> str | None:
        rel = self.release
        return rel.details.get("sampling_error") if self.inference and isinstance(rel, Release) else None

    @property
    def interval_check(self) -> str | None:
        rel = self.release
        return _detail_str(rel, "interval_check") if self.inference and isinstance(rel, Release) else None

    @property
    def fallback(self) -> str | None:
        return _detail_str(self.release, "fallback") if isinstance(self.release, Release) else None

    @property
    def fallback_terms(self) -> tuple[str, ...]:
        if not self.fallback:
            return ()
        # a per-term boolean ``guard`` of the method's when it has one, else every term
        try:
            m = np.asarray(self.release.details.get("guard"))
        except Exception:
            return self.terms
        if m.dtype == bool and m.shape == (len(self.terms),) and m.any():
            return tuple(t for t, f in zip(self.terms, m, strict=True) if f)
        return self.terms

    def _per_term(self, a: np.ndarray) -> Any:
        """A release's array as the result shows it: a float for one coefficient, else the read-only array."""
        return float(a[0]) if self.task == "sce" else a

    def _shown_interval(self) -> Release | None:
        """The release when the result shows its interval: released, asked for, and with a standard error."""
        rel = self.release
        return rel if self.inference and isinstance(rel, Release) and rel.std_error is not None else None

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
        return self.release.conf_int(float(level))

    def _cluster_robust(self) -> bool:
        return bool(self.sampling_error) and str(self.sampling_error).startswith("cluster-robust")

    def _classical_within(self) -> bool:
        return bool(self.sampling_error) and str(self.sampling_error).startswith("classical")

    def _algorithm(self) -> type[Algorithm] | None:
        """The method's class, whose attributes say what its interval covers; None when it is not registered."""
        try:
            return get_algorithm(self.task, self.method)
        except ValueError:
            return None

    def _covers(self) -> str:
        """What the interval covers, in the words of the method's class (per release where the method reports it)."""
        return _covers(self._algorithm(), self.sampling_error)

    def _robust(self) -> bool:
        cls = self._algorithm()
        return cls is not None and cls.interval_robust and not self._classical_within()

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
        infinite = [t for t, a, b in zip(self.terms, lo, hi, strict=False)
                    if t in bad and not (np.isfinite(a) and np.isfinite(b))]
        wide = [t for t in bad if t not in infinite]
        parts = []
        # by the check that made each infinite: the term's own when the method reports one per term
        per_term = dict(zip(self.terms, self._term_checks(), strict=True))
        groups: dict[str | None, list[str]] = {}
        for t in infinite:
            groups.setdefault(per_term[t] or self.interval_check, []).append(t)
        for check, ts in groups.items():
            cause, remedy = _infinite_cause(check, self.method, self.coefficient, ts, self.task)
            parts.append(f"The 95% interval of {', '.join(ts)} is infinite: {cause}. {remedy}")
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
        by_design = set(self.terms_without_interval())
        for t, a, b in zip(self.terms, lo, hi, strict=False):
            if t in by_design:
                continue
            if not (np.isfinite(a) and np.isfinite(b)):
                out.append(t)
                continue
            bd = self.bounds.get(t) if self.task == "mean" else None
            if (bd is not None and (b - a) >= (bd[1] - bd[0])) or (
                    self.task != "mean" and self.coefficient and t == self.coefficient and a <= 0 <= b and (b - a) > 0
                    and self._coef_range() is not None and (b - a) >= self._coef_range()):
                out.append(t)
        return tuple(out)

    def _term_checks(self) -> tuple[str | None, ...]:
        """Each term's interval check when the method reports one per term (``details["interval_checks"]``)."""
        rel = self.release
        v = rel.details.get("interval_checks") if self.inference and isinstance(rel, Release) else None
        if isinstance(v, (tuple, list)) and len(v) == len(self.terms):
            return tuple(None if c is None else str(c) for c in v)
        return (None,) * len(self.terms)

    def terms_without_interval(self) -> tuple[str, ...]:
        """Terms the method gives no interval by design (fwl_each's intercept); ``()`` for most methods.

        Their standard error is infinite whatever the data; they are shown as
        "no interval" and do not make the release :attr:`uninformative`.

        Returns
        -------
        tuple of str
        """
        return tuple(t for t, c in zip(self.terms, self._term_checks(), strict=True)
                     if c is not None and c.startswith(NO_INTERVAL))

    def _coef_range(self) -> float | None:
        """Width of the coefficient range implied by public bounds on y and the regressor (|dy| / |dx|), if any."""
        if not (self.outcome and self.coefficient):
            return None
        by, bx = self.bounds.get(self.outcome), self.bounds.get(self.coefficient)
        if by is None or bx is None:
            return None
        return 2.0 * (by[1] - by[0]) / (bx[1] - bx[0])

    def _values(self) -> np.ndarray:
        if isinstance(self.release, Release):
            return self.release.estimate
        return np.full(len(self.terms), np.nan)

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
        if self.weights:
            lines.append(f"  {'weights:':<13}{self.weights} (weighted least squares; the weights are private)")
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
            by_design = set(self.terms_without_interval())
            lines.append(f"  {'term':<{width}}  {'private estimate':>16}  {'std. error':>11}  95% interval")
            for t, v, s, a, b in zip(self.terms, self._values(), se, lo, hi, strict=False):
                # a fallback was not estimated: its interval, even a finite one, is not shown as an interval
                ci = ("not estimated (fallback)" if t in fallen and np.isfinite(a) and np.isfinite(b)
                      else "none from this method" if t in by_design
                      else f"[{_fmt(float(a))}, {_fmt(float(b))}]")
                lines.append(f"  {t:<{width}}  {_fmt(float(v)):>16}  {_fmt(float(s)):>11}  {ci}")
        else:
            width = max(len(t) for t in self.terms)
            lines.append(f"  {'term':<{width}}  private estimate")
            for t, v in zip(self.terms, self._values(), strict=False):
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
        return interpretation_text(self)

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
