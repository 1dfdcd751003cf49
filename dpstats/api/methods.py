"""Which algorithm each function of the economist API runs by default.

:data:`DEFAULT_METHODS` names the method of each task when ``method=None``,
:data:`INFERENCE_METHODS` the method when an interval is asked for; the
function each task belongs to names it in messages.
"""

from __future__ import annotations

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
#: ``method=None``. Every input to an interval is a release or a public fact
#: (see ``docs/inference.md``), and the API runs the method with its
#: ``interval_params`` (the budget split between estimate and uncertainty):
#:
#: * sce ``fwl_score``: 10 % of the score stage for ``sum clip(u)^2 clip(v)^2``,
#:   a heteroskedasticity-robust sandwich standard error;
#: * linreg ``fwl_each``: each slope by ``fwl_score`` on ``1/k`` of the budget
#:   (``k`` slopes), with its interval; the intercept has none. Where
#:   ``n epsilon / k`` is below 300 or ``k`` above 20, dpnewton's point estimates
#:   with every interval infinite (no slope's interval is finite there). ``dpnewton``,
#:   the point default, has no interval fit to publish (it missed on simple
#:   designs with a rare binary regressor);
#: * mean ``adaptive_whiten``: free on the whitened path (the private covariance
#:   it releases anyway), else 10 % for the clipped second moments.
#:
#: With ``inference=False`` the API runs :data:`DEFAULT_METHODS` with their
#: registered defaults (the whole budget on the point estimate).
INFERENCE_METHODS: dict[str, str] = {**DEFAULT_METHODS, "linreg": "fwl_each"}

#: The public function of each task (named in error messages).
_TASK_FUNC = {"sce": "private_coef", "linreg": "private_ols", "mean": "private_mean"}
