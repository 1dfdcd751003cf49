"""The interface every private algorithm implements.

An algorithm is configured once (its hyperparameters) and then run on data::

    outcome = algo.run(data, facts, epsilon, delta, rng)

where ``data`` is a :class:`TaskData` (``X`` and, for regression, ``y``),
``facts`` the instance's :class:`~dpstats.data.instance.PublicFacts`, and ``rng`` a
seeded :class:`numpy.random.Generator` (the only source of randomness). The
result is a :class:`Release` or a :class:`Decline`; a decline is a result, not
an exception.

Interpretation classes
----------------------
``standard``
    A full (epsilon, delta)-DP argument under replace-one neighbours that uses
    only public facts: ``n``, ``d``, names, the task and manifest ``bounds``.
``data-bounds``
    Clipping bounds or scales are read from the data without privacy, as many
    reference implementations do. Not DP; run for comparison only.
``data-hyperparameters``
    Hyperparameters tuned on the same data without privacy. Not DP.
``reference-code``
    Follows a reference implementation whose accounting is known to overspend.
"""

from __future__ import annotations

import warnings
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

import numpy as np

from dpstats.data.facts import PublicFacts, TaskData
from dpstats.data.manifest import TASKS
from dpstats.params import Configurable, Param
from dpstats.privacy.accounting import Accountant, PrivacyLeakWarning, validate_budget

__all__ = [
    "TASKS",
    "INTERPRETATIONS",
    "Param",
    "TaskData",
    "PublicFacts",
    "Release",
    "Decline",
    "Outcome",
    "Algorithm",
    "DETAIL_KINDS",
    "NO_INTERVAL",
]


INTERPRETATIONS: dict[str, str] = {
    "standard": "full (epsilon, delta)-DP argument using only public facts",
    "data-bounds": "clipping bounds or scales read from the data without privacy (not DP)",
    "data-hyperparameters": "hyperparameters chosen on the same data without privacy (not DP)",
    "reference-code": "follows a reference implementation whose accounting overspends (not the stated DP)",
}


@dataclass(frozen=True)
class Release:
    """A private release.

    Attributes
    ----------
    estimate : ndarray
        Shape ``(d,)`` for linreg and mean; shape ``(1,)`` for sce.
    epsilon, delta : float
        The budget the release guarantees (from the accountant's ledger).
    ledger : tuple of Spend
        The accountant's entries as they are: named tuples
        ``(mechanism, cost, unit, note, kind, sensitivity, scale)``
        (:class:`~dpstats.privacy.accounting.Spend`), whose ``kind``,
        ``sensitivity`` and ``scale`` name the charging call that drew the
        noise and the scale it drew.
    details : mapping
        Diagnostics (clipping counts, chosen ranges, ...). Never private data
        beyond what the released quantities already reveal.
    std_error : ndarray or None
        A private standard error, shaped like ``estimate``, for the
        population parameter (sampling error plus privacy noise), computed
        from released values and public facts only; ``None`` for methods
        that give no interval. ``inf`` where the method cannot localise the
        estimate.
    df : float or None
        Degrees of freedom of a Student-t interval; ``None`` for a normal one.
    bias_bound : ndarray or None
        A bound on the estimate's bias (e.g. from clipping), added to both
        ends of the interval; ``None`` for none.
    """

    estimate: np.ndarray
    epsilon: float
    delta: float
    ledger: tuple[Any, ...] = ()
    details: Mapping[str, Any] = field(default_factory=dict)
    std_error: np.ndarray | None = None
    df: float | None = None
    bias_bound: np.ndarray | None = None

    released: ClassVar[bool] = True

    def with_details(self, **more: Any) -> Release:
        return replace(self, details={**dict(self.details), **more})

    def conf_int(self, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
        """The interval ``estimate +- (q * std_error + bias_bound)`` at ``level`` (post-processing).

        ``q`` is the Student-t quantile with :attr:`df` degrees of freedom
        (normal when ``df`` is None).

        Raises
        ------
        ValueError
            ``level`` outside (0, 1), or a release without a standard error.
        """
        from scipy import stats

        if isinstance(level, bool) or not isinstance(level, (int, float, np.floating)) or not (0.0 < float(level) < 1.0):
            raise ValueError(f"level must lie in (0, 1), got {level!r}")
        if self.std_error is None:
            raise ValueError("this release has no standard error (its method gives no interval)")
        p = 0.5 + float(level) / 2.0
        q = float(stats.norm.ppf(p) if self.df is None else stats.t.ppf(p, self.df))
        est = np.asarray(self.estimate, dtype=float).reshape(-1)
        half = q * np.asarray(self.std_error, dtype=float).reshape(-1)
        if self.bias_bound is not None:
            half = half + np.asarray(self.bias_bound, dtype=float).reshape(-1)
        return est - half, est + half


@dataclass(frozen=True)
class Decline:
    """The algorithm declined to release (for example a failed propose-test-release check)."""

    reason: str
    epsilon: float = 0.0
    delta: float = 0.0
    ledger: tuple[Any, ...] = ()
    details: Mapping[str, Any] = field(default_factory=dict)

    released: ClassVar[bool] = False


Outcome = Release | Decline

#: Why a ``details`` key may be published (the start of every :attr:`Algorithm.public_details` reason).
DETAIL_KINDS = ("released value", "public fact", "paid statistic")

#: The start of a term's entry in ``details["interval_checks"]`` (one check per term, for a method that
#: reports them) when the method gives that term no interval by design (fwl_each's intercept): its
#: infinite standard error is not a "cannot tell" of this release, and the API shows it as no interval.
NO_INTERVAL = "no interval"


class Algorithm(Configurable, ABC):
    """Base class of every private algorithm.

    Subclasses set the class attributes and implement :meth:`_run`. The public
    :meth:`run` validates the budget and data, warns when the class is not
    ``standard``, and checks the shape of the release.

    Class attributes
    ----------------
    name : str
        Registry name (unique within a task).
    task : str
        ``"sce"``, ``"linreg"`` or ``"mean"``.
    citation : str
        The paper the algorithm comes from.
    interpretation : str
        One of :data:`INTERPRETATIONS`.
    defaults : dict of str to Param
        Default hyperparameters with their sources.
    iterative : bool
        True for inherently iterative algorithms (gradient descent, EM).
    public_details : mapping of str to str
        The allow-list of ``details`` keys: every key the algorithm may put in
        the ``details`` of a :class:`Release` or :class:`Decline`, mapped to
        why publishing it reveals nothing beyond the release. Each reason
        starts with one of :data:`DETAIL_KINDS` and a colon:
        ``"released value: ..."`` (a function of the released estimate),
        ``"public fact: ..."`` (n, d, names, bounds, hyperparameters, the
        budget: equal on neighbouring data sets) or ``"paid statistic: ..."``
        (the output of a mechanism in the ledger, or post-processing of such
        outputs and public facts), naming in backquotes the ledger entries
        (or the start of their names) that paid for it. A key not listed must
        not appear; ``tests/algorithms/test_details_allowlist.py`` checks every
        registered algorithm.
    intervals : bool
        Whether a release carries a standard error and an interval (when run
        with :attr:`interval_params`).
    interval_params : mapping of str to object
        The hyperparameters, on top of :attr:`defaults`, with which the method
        releases its interval (the API's and the coverage benchmark's).
    interval_validated : bool
        Whether the method's intervals have been judged one data set at a
        time and found fit to publish: on the public corpus's coverage
        benchmark (40 draws per instance, epsilon 1, 3 and 10), no instance
        far below 95 % where the non-private interval covers, and no finite
        interval that misses by many standard errors, except as the method's
        page explains. The economist API gives intervals only from such
        methods; the others' intervals are for the benchmark.
    cluster_intervals : bool
        Whether the method can give a cluster-robust interval when
        ``facts.cluster`` names the sampling clusters (the API's ``cluster=``).
    interval_covers : str
        What the interval covers, in words that complete "the interval
        covers ...": the kind of sampling error, the privacy noise, any bias
        allowance, and what it leaves out (read by the API's summaries and
        messages); empty: the API says "sampling error and privacy noise".
    interval_covers_within : str
        The same words for a release whose ``details["sampling_error"]``
        starts with ``"classical"`` (a classical within variance, with an
        absorbed fixed effect); empty: the method never reports one.
    interval_covers_cluster : str
        The same words for a release whose ``details["sampling_error"]``
        starts with ``"cluster-robust"``; empty: the method never reports one.
    interval_robust : bool
        Whether the interval's sampling error is heteroskedasticity-robust
        (a sandwich, or the spread of independent blocks or bootstraps),
        except in a release that reports a classical within variance.
    opt_in : bool
        Not listed by :func:`~dpstats.algorithms.list_algorithms` unless asked
        for (slow or heavy methods); run by name.
    wraps : Algorithm subclass or None
        The algorithm whose ``_run`` this one runs and post-processes (the
        linear regression behind a single-coefficient algorithm of
        :func:`~dpstats.algorithms.coefficient_of`); ``None`` for an algorithm
        of its own.
    grid : mapping of str to list
        The values ``dpstats tune`` tries for each hyperparameter (their
        Cartesian product); empty: its scaling rule
        (:func:`dpstats.bench.tuning.grid_for`).

    A wrapper (``wraps`` set in its class body) that does not declare
    ``interval_covers``, ``interval_covers_within``,
    ``interval_covers_cluster`` or ``interval_robust`` takes them from the
    algorithm it wraps: its interval is a coordinate of that one's. It does
    not take ``interval_validated``: the judgement is made on the corpus's
    instances of its own task (the coordinate of a vector interval that holds
    on the linreg instances missed on single-coefficient designs).
    """

    name: ClassVar[str] = ""
    task: ClassVar[str] = ""
    citation: ClassVar[str] = ""
    interpretation: ClassVar[str] = "standard"
    summary: ClassVar[str] = ""
    defaults: ClassVar[dict[str, Param]] = {}
    iterative: ClassVar[bool] = False
    public_details: ClassVar[Mapping[str, str]] = {}
    intervals: ClassVar[bool] = False
    interval_params: ClassVar[Mapping[str, Any]] = {}
    interval_validated: ClassVar[bool] = False
    cluster_intervals: ClassVar[bool] = False
    interval_covers: ClassVar[str] = ""
    interval_covers_within: ClassVar[str] = ""
    interval_covers_cluster: ClassVar[str] = ""
    interval_robust: ClassVar[bool] = False
    opt_in: ClassVar[bool] = False
    wraps: ClassVar[type[Algorithm] | None] = None
    grid: ClassVar[Mapping[str, Sequence[Any]]] = {}

    #: the attributes a wrapper takes from the algorithm it wraps unless it declares them
    _WRAPPER_TAKES: ClassVar[tuple[str, ...]] = (
        "interval_covers", "interval_covers_within", "interval_covers_cluster", "interval_robust")

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        inner = cls.__dict__.get("wraps")
        if inner is not None:
            for attr in Algorithm._WRAPPER_TAKES:
                if attr not in cls.__dict__:
                    setattr(cls, attr, getattr(inner, attr))

    @classmethod
    def metadata(cls) -> dict[str, Any]:
        """Metadata for listings: name, task, citation, interpretation, defaults."""
        return {
            "name": cls.name,
            "task": cls.task,
            "citation": cls.citation,
            "interpretation": cls.interpretation,
            "summary": cls.summary,
            "iterative": cls.iterative,
            "defaults": {k: p.to_dict() for k, p in cls.defaults.items()},
        }

    def run(self, data: TaskData, facts: PublicFacts, epsilon: float, delta: float, rng: np.random.Generator) -> Outcome:
        """Run the algorithm under an (epsilon, delta) budget.

        Parameters
        ----------
        data : TaskData
            The private data.
        facts : PublicFacts
            Public facts about the instance (n, d, names, task, bounds).
        epsilon, delta : float
            The budget; the algorithm spends exactly this.
        rng : numpy.random.Generator
            The only source of randomness.

        Returns
        -------
        Release or Decline
        """
        validate_budget(epsilon, delta)
        if not isinstance(rng, np.random.Generator):
            raise TypeError("rng must be a numpy.random.Generator (seed it for reproducible releases)")
        if self.interpretation != "standard":
            warnings.warn(
                f"algorithm {self.name!r} is of class {self.interpretation!r}: "
                f"{INTERPRETATIONS.get(self.interpretation, 'no full DP argument')}",
                PrivacyLeakWarning,
                stacklevel=2,
            )
        out = self._run(data, facts, float(epsilon), float(delta), rng)
        if isinstance(out, Release):
            est = np.asarray(out.estimate, dtype=float).reshape(-1)
            expected = 1 if self.task == "sce" else data.d
            if est.shape[0] != expected:
                raise ValueError(
                    f"algorithm {self.name!r} returned an estimate of length {est.shape[0]}, expected {expected}"
                )
            out = replace(out, estimate=est)
        elif not isinstance(out, Decline):
            raise TypeError(f"algorithm {self.name!r} returned {type(out).__name__}, not Release or Decline")
        return out

    @abstractmethod
    def _run(self, data: TaskData, facts: PublicFacts, epsilon: float, delta: float, rng: np.random.Generator) -> Outcome:
        """Implementation; ``run`` has validated the inputs."""

    # helpers for subclasses -------------------------------------------------

    @staticmethod
    def release(estimate: Any, accountant: Accountant, *, std_error: Any = None, df: float | None = None,
                bias_bound: Any = None, **details: Any) -> Release:
        """Build a :class:`Release` from an accountant that must be exhausted.

        Parameters
        ----------
        estimate : array-like
            The released estimate (a scalar for one coordinate).
        accountant : Accountant
            Its ledger becomes the release's; it must have spent its whole budget.
        std_error, bias_bound : array-like, optional
            The interval's standard error and bias allowance, shaped like
            ``estimate`` (a scalar for one coordinate); stored as float arrays
            of at least one dimension. ``None`` (the default): no interval.
        df : float, optional
            Degrees of freedom of a Student-t interval; ``None`` for a normal one.
        **details
            The release's ``details``. ``std_error``, ``df`` and ``bias_bound``
            are the interval's fields, never ``details`` keys.
        """
        if not accountant.exhausted():
            raise RuntimeError(
                f"privacy accounting: spent {accountant.spent:.6g} of {accountant.capacity:.6g} "
                f"{accountant.unit}; an algorithm must spend exactly its budget"
            )

        def as_array(a: Any) -> np.ndarray | None:
            return None if a is None else np.atleast_1d(np.asarray(a, dtype=float))

        return Release(
            estimate=np.atleast_1d(np.asarray(estimate, dtype=float)),
            epsilon=accountant.epsilon,
            delta=accountant.delta,
            ledger=tuple(accountant.ledger),
            details=details,
            std_error=as_array(std_error),
            df=None if df is None else float(df),
            bias_bound=as_array(bias_bound),
        )

    @staticmethod
    def decline(reason: str, accountant: Accountant | None = None, **details: Any) -> Decline:
        """Build a :class:`Decline`; the budget spent so far is recorded."""
        if accountant is None:
            return Decline(reason=reason, details=details)
        eps, dlt = accountant.achieved()
        return Decline(
            reason=reason,
            epsilon=float(eps),
            delta=float(dlt),
            ledger=tuple(accountant.ledger),
            details=details,
        )


