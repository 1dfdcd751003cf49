"""fwl_score's count of non-zero pair differences: its calibration, its rule, and the confident miss it removes.

A regressor that is mostly one value (2 % ones, no declared bounds) has about 100 non-zero differences among
the 2,500 pairs of its scale's matching; at epsilon 1 or 3 the scale's median then lands anywhere on its grid,
and a scale orders of magnitude off looks plausible in the Gram (the column's mean square is small by nature).
Before the count (``nonzero_share = 0``) such draws released -2.05e5 with the "significant" interval
[-3.2e5, -9.0e4] and -184 with [-246, -122] for a coefficient of 1 (``benchmarks/validity_designs.py``,
design B, draws 2 and 5 at epsilon 3).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest

import dpstats
from dpstats.algorithms.sce.fwl_score import FWLScore
from dpstats.algorithms.sce._utils import SPARSE_FAIL, LocationScale, positive_grid, private_location_scale
from dpstats.privacy.accounting import ZCDPAccountant


def _rare_binary(seed: int) -> pd.DataFrame:
    """Design B of benchmarks/validity_designs.py: a 0/1 regressor with 2 % ones, three controls, n = 5,000."""
    r = np.random.default_rng(seed)
    n = 5000
    z = r.normal(size=(n, 3))
    x = (r.uniform(size=n) < 0.02).astype(float)
    y = x + z @ np.array([0.5, -0.3, 0.2]) + r.normal(size=n)
    return pd.DataFrame({"y": y, "x": x, "z1": z[:, 0], "z2": z[:, 1], "z3": z[:, 2]})


def _coef(df: pd.DataFrame, seed: int):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return dpstats.private_coef(df, "y ~ x + z1 + z2 + z3", "x", epsilon=3.0, seed=seed)


def test_a_sparse_regressor_whose_scale_failed_gives_no_finite_interval():
    res = _coef(_rare_binary(1005), 5)
    lo, hi = res.conf_int().to_numpy().ravel()
    assert math.isinf(hi - lo) and float(res.estimate) == 0.0
    assert res.release.details["interval_check"] == "failed standardisation (sparse column)"
    assert "sparse column x" in res.release.details["fallback"] and res.uninformative
    assert "Declare the bounds" in res.uninformative_reason


def test_control_without_the_count_the_same_draw_is_a_confident_miss(monkeypatch):
    # the API refuses nonzero_share=0 with an interval: the control runs the earlier interval configuration
    # (without the count, and without the clip excess, which came later and widens this draw's interval to
    # [-411, 41])
    monkeypatch.setattr(FWLScore, "interval_params",
                        {**FWLScore.interval_params, "nonzero_share": 0.0, "excess_share": 0.0})
    res = _coef(_rare_binary(1005), 5)
    lo, hi = res.conf_int().to_numpy().ravel()
    assert math.isfinite(hi - lo) and hi < -100.0  # "significant", far below the coefficient 1


def test_declared_bounds_need_no_count_and_cover():
    df = _rare_binary(1005)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = dpstats.private_coef(df, "y ~ x + z1 + z2 + z3", "x", epsilon=3.0, seed=5, bounds={"x": (0.0, 1.0)})
    lo, hi = res.conf_int().to_numpy().ravel()
    assert lo <= 1.0 <= hi and not any("(x)" in e.mechanism for e in res.release.ledger)


def _released_count(w: np.ndarray, count_rho: float) -> tuple[LocationScale, ZCDPAccountant]:
    acc = ZCDPAccountant(10.0, 1e-6)
    return private_location_scale(w, 0.5, np.random.default_rng(4), acc=acc, label="w", count_rho=count_rho), acc


def test_the_count_is_charged_at_sensitivity_1_and_a_replaced_row_moves_it_by_1():
    """Same seed, same matching and noise: the difference of two releases is the difference of the true counts;
    replacing one row moves it by exactly 1 at most (attained), so a halved sensitivity would not cover it."""
    rho_c = 0.002
    w = (np.random.default_rng(0).uniform(size=400) < 0.1).astype(float)
    base, acc = _released_count(w, rho_c)
    (spend,) = [e for e in acc.ledger if e.mechanism.startswith("Gaussian count of non-zero")]
    assert spend.cost == pytest.approx(rho_c, rel=1e-12) and spend.sensitivity == 1.0
    assert spend.scale == pytest.approx(1.0 / math.sqrt(2.0 * rho_c), rel=1e-12) == base.nonzero_sd
    steps = set()
    for i in range(0, 400, 7):
        for v in (0.0, 1.0, 5.0):
            w2 = w.copy()
            w2[i] = v
            other, _ = _released_count(w2, rho_c)
            steps.add(round(other.nonzero - base.nonzero, 9))
    assert steps <= {-1.0, 0.0, 1.0} and {-1.0, 1.0} <= steps
    # without count_rho nothing is released or charged, and the draws are those of before
    plain, acc0 = _released_count(w, 0.0)
    assert math.isnan(plain.nonzero) and not any(e.mechanism.startswith("Gaussian count") for e in acc0.ledger)


def test_the_rule_reads_the_count_against_the_bound():
    n, sd = 5000, 10.0
    log_g = math.log(positive_grid().size)
    need = 4.0 * (log_g - math.log(SPARSE_FAIL))  # epsilon times the pairs seen
    eps = 0.2
    seen_ok = need / eps + 1.0
    assert not LocationScale(0.0, 1.0, seen_ok + 2 * sd, sd).scale_unsure(n, eps)  # sparse, enough pairs
    assert LocationScale(0.0, 1.0, seen_ok + 2 * sd - 2.0, sd).scale_unsure(n, eps)  # sparse, too few
    assert not LocationScale(0.0, 1.0, 0.25 * n - 2 * sd + 1.0, sd).scale_unsure(n, 1e-3)  # not shown sparse
    assert not LocationScale(0.0, 1.0).scale_unsure(n, eps)  # no count released
