"""Privacy auditing: canary exposure, empirical epsilon lower bounds, and audits of algorithms.

Modules
-------
:mod:`~dpstats.audit.exposure`
    Canary exposure with ties, model-based extrapolated exposure, and the
    random-guessing baselines (exact and asymptotic).
:mod:`~dpstats.audit.bounds`
    Epsilon lower bounds: Clopper-Pearson at a threshold (with TPR, FPR,
    delta, group size), from the median canary, Gaussian DP, zCDP, and the
    one-run bound of Steinke, Nasr and Jagielski, with corrected threshold
    searches.
:mod:`~dpstats.audit.power`
    What an audit could have seen: the bound an ideal attack reaches with the
    same releases on a mechanism that spends exactly the claim.
:mod:`~dpstats.audit.neighbours`, :mod:`~dpstats.audit.attack`, :mod:`~dpstats.audit.run`
    Auditing an algorithm: neighbouring data sets with a worst-case canary
    row, distinguishing statistics chosen on one half of the releases and
    evaluated on the other, and the driver.
:mod:`~dpstats.audit.releases`
    The releases of an audit, one call each in the benchmark's worker pool.
:mod:`~dpstats.cli.audit`
    ``dpstats audit``.

A lower bound below the claimed epsilon is **not** evidence of privacy: it
only says this attack, with this many releases, did not find a violation.
"""

from __future__ import annotations

from dpstats.audit.bounds import (
    Bound,
    clopper_pearson_lower,
    clopper_pearson_upper,
    epsilon_clopper_pearson_scores,
    epsilon_from_gdp,
    epsilon_gdp_scores,
    epsilon_lower_bound,
    epsilon_one_run,
    epsilon_one_run_scores,
    exposure_epsilon_bound,
    gdp_mu_lower_bound,
    zcdp_rho_lower_bound,
)
from dpstats.audit.exposure import (
    ASYMPTOTIC_BASELINES,
    exposure,
    extrapolated_exposure,
    random_guessing_baseline,
    ranks,
    summarize_exposure,
)
from dpstats.audit.power import audit_power, exact_gaussian_sigma, gaussian_power, trials_for_power
from dpstats.audit.run import AuditResult, audit

__all__ = [
    "AuditResult", "audit", "audit_power", "exact_gaussian_sigma", "gaussian_power", "trials_for_power",
    "ASYMPTOTIC_BASELINES", "Bound", "clopper_pearson_lower", "clopper_pearson_upper",
    "epsilon_clopper_pearson_scores", "epsilon_from_gdp", "epsilon_gdp_scores", "epsilon_lower_bound",
    "epsilon_one_run", "epsilon_one_run_scores", "exposure", "exposure_epsilon_bound", "extrapolated_exposure",
    "gdp_mu_lower_bound", "random_guessing_baseline", "ranks", "summarize_exposure", "zcdp_rho_lower_bound",
]

