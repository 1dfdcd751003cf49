"""The API's plain words: what an interval covers, why a release says nothing, and what to do.

What a method's interval covers, from the words its class declares
(:attr:`~dpstats.algorithms.base.Algorithm.interval_covers` and its
companions); the causes and remedies of an infinite interval (by the
method's ``interval_check``) and of a fallback release; the titles of the
summaries and the number format they share. Read by
:class:`~dpstats.api.result.PrivateResult` and by the input checks' messages.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from dpstats.algorithms.base import INTERPRETATIONS, Algorithm

_TASK_TITLES = {
    "sce": "Differentially private regression coefficient",
    "linreg": "Differentially private OLS coefficients",
    "mean": "Differentially private means",
}

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
    "too few clusters": (
        "the clustered rows hold too few clusters for a cluster-robust interval: a noisy count of the clusters "
        "leaves fewer than three groups of about eight clusters for the jackknife",
        "Use a larger epsilon (the count of clusters is then less noisy), or remove cluster= if the rows of a "
        "cluster are independent."),
    "too little budget per slope": (
        "each slope's share of the budget is too small for an interval one slope at a time (n epsilon / k, with k "
        "slopes, is below the public threshold of fwl_each), so the point estimates are dpnewton's, on the whole "
        "budget, without intervals",
        "Use private_coef for the coefficient of interest (it gets the whole budget), fewer regressors, a larger "
        "epsilon or more rows."),
    "too many slopes": (
        "the design has more slopes than fwl_each releases one at a time (max_parts), so the point estimates are "
        "dpnewton's, on the whole budget, without intervals",
        "Use private_coef for the coefficients of interest, or fewer regressors."),
    "failed standardisation (sparse column)": (
        "a column that is mostly one value (a rare 0/1 indicator or a count that is mostly 0) has too few "
        "distinct values for its private scale at this budget, so the estimate could be off by orders of "
        "magnitude",
        "Declare its bounds (bounds={{'column': (0, 1)}} for a 0/1 column), or use a larger epsilon or more rows."),
    "failed standardisation": (
        "the private standardisation of the columns failed: the budget was too small to find the scale of the "
        "data",
        _STANDARDISATION_REMEDY.replace("{", "{{").replace("}", "}}")),
}


def _infinite_cause(check: str | None, method: str, coef: str | None, terms: Sequence[str] = (),
                    task: str = "sce") -> tuple[str, str]:
    """Why an interval is infinite (from the method's ``interval_check`` when it has one) and the remedy.

    ``terms`` (the terms whose interval is infinite) and ``task`` word the generic remedy: a mean has columns,
    not an outcome and regressors.
    """
    name = coef or "the regressors"
    for key, (cause, remedy) in _CHECK_WORDS.items():
        if check and str(check).startswith(key):
            return cause.format(coef=name), remedy.format(coef=name)
    cause = (f"{method} cannot localise the estimate at this budget (the privacy noise, or a private step that "
             "failed, leaves its error unbounded)")
    if task == "mean":
        cols = ", ".join(terms) if terms else "the columns"
        return cause, (f"Declare bounds for {cols} (bounds={{...}}, e.g. (0, 1) for a 0/1 column), or use a larger "
                       "epsilon or more rows.")
    return cause, ("Use a larger epsilon or more rows, declare bounds for the outcome and the regressors, or use "
                   "fewer controls.")


def _fallback_remedy(fallback: str, terms: Sequence[str] = ()) -> str:
    """The remedy for a release that is a fallback, by what the method fell back to (``terms``: those replaced)."""
    f = fallback.lower()
    if "sparse column" in f:
        return ("Declare the bounds of the sparse column (bounds={...}, e.g. (0, 1) for a 0/1 indicator): a declared "
                "0/1 column needs no private scale. Otherwise use a larger epsilon or more rows.")
    if "standardis" in f:
        return _STANDARDISATION_REMEDY
    if "prior centre" in f and "assumed for a column without declared bounds" in f:
        cols = ", ".join(terms) if terms else "these columns"
        return (f"Declare bounds for {cols} (bounds={{...}}), or rescale them (e.g. to thousands) so that their values "
                "lie well inside the range assumed without bounds (default_range, +-1e6); a larger epsilon does not "
                "help.")
    if "prior centre" in f:
        cols = ", ".join(terms) if terms else "these columns"
        return f"Declare bounds for {cols} (bounds={{...}}), or use a larger epsilon or more rows."
    if "intercept-only" in f or "median of y" in f:
        return ("Declare bounds for the outcome and the regressors, or use a larger epsilon, fewer regressors or "
                "more rows.")
    if "shrunk" in f:
        return "The privacy noise is as large as the estimate: use a larger epsilon or more rows."
    return "Use a larger epsilon or more rows, declare bounds, or use fewer controls."


def _fmt(x: float) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "NA"
    return f"{x:.6g}"


#: What an interval covers when its method says nothing more (an interval method without ``interval_covers``).
_COVERS_DEFAULT = "sampling error and privacy noise"


def _covers(cls: type[Algorithm] | None, sampling_error: str | None = None) -> str:
    """What the interval of a release of ``cls`` covers, by the kind of sampling error the release reports.

    ``sampling_error`` is the release's ``details["sampling_error"]``: one
    starting with ``"cluster-robust"`` or ``"classical"`` takes the class's
    ``interval_covers_cluster`` or ``interval_covers_within`` when it declares
    them. ``cls`` None (a method no longer registered): the default words.
    """
    words = ""
    if cls is not None:
        kind = str(sampling_error or "")
        if kind.startswith("cluster-robust") and "one row each" in kind:
            # clusters of single rows: the row-level interval, which is then cluster-robust
            how = kind.split("; ", 1)[-1]
            return (f"sampling error of rows that are their own clusters ({how}) and the privacy noise; "
                    "not clipping bias")
        if kind.startswith("cluster-robust"):
            words = cls.interval_covers_cluster
        elif kind.startswith("classical"):
            words = cls.interval_covers_within
        words = words or cls.interval_covers
    return words or _COVERS_DEFAULT


def _covers_text(cls: type[Algorithm]) -> str:
    """What the interval of method ``cls`` covers, in every case it reports (for messages); "" without intervals."""
    if not cls.intervals:
        return ""
    if cls.interval_covers_within:
        within = cls.interval_covers_within.split(" and the privacy")[0]
        return f"{cls.interval_covers}; with an absorbed fixed effect, the {within}"
    return cls.interval_covers


def _promise(eps: float, dlt: float, n: int, cls: str, method: str) -> str:
    """What the budget promises the people in the data (``cls`` standard), or that it promises nothing."""
    if cls != "standard":
        return (f"This release is NOT differentially private: the method {method!r} is of class {cls!r} "
                f"({INTERPRETATIONS.get(cls, 'not DP')}). The nominal budget (epsilon = {_fmt(eps)}, delta = "
                f"{_fmt(dlt)}) does not bound what the release reveals about a person. Use it for comparison only, "
                "never for publication.")
    promise = (
        f"This release is ({_fmt(eps)}, {_fmt(dlt)})-differentially private. For every person in the data, "
        f"replacing their row by anybody else's changes the probability of any result by at most a factor "
        f"of e^epsilon = {math.exp(eps):.3g}"
        + (f", except with probability at most delta = {_fmt(dlt)}." if dlt > 0 else ", with no exceptions (delta = 0).")
        + " So whoever sees the release learns little more about any one person than they would have "
        "learned had that person's row not been used; the smaller epsilon, the stronger the protection."
    )
    if dlt > 0 and n and dlt > 1.0 / n:
        promise += f" Caution: delta exceeds 1/n = {_fmt(1.0 / n)}, which is weak protection."
    return promise

