"""benchmarks/pld_bound.py: exact accounting of a release's ledger, against closed forms."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from tests.conftest import REPO, load_script

pytest.importorskip("dp_accounting")


def _module():
    return load_script(REPO / "benchmarks" / "pld_bound.py")


@pytest.mark.parametrize("eps", [0.08, 1.0])
def test_the_bounded_range_pair_dominates_every_two_point_pair(eps):
    """Its curve lies above each t's (both directions: t and 1 - t), its losses within [-eps, eps], masses sum to 1."""
    pb = _module()
    p, q = pb.br_pair(eps)
    assert p.sum() == pytest.approx(1.0) and q.sum() == pytest.approx(1.0)
    live = q > 0
    loss = np.log(p[live] / q[live])
    assert loss.max() <= eps + 1e-9 and loss.min() >= -eps - 1e-9
    x = np.exp(np.linspace(-1.5 * eps, 1.5 * eps, 997))  # off the construction's grid
    curve = (q[None, :] * np.maximum(p[None, :] / np.where(q > 0, q, 1.0)[None, :] - x[:, None], 0.0)).sum(axis=1)
    worst = pb.two_point_curve(eps, np.linspace(0.0, 1.0, 4001), x).max(axis=0)
    assert np.all(curve >= worst - 1e-12)
    # a single mechanism: pure eps-DP and no better (t = 1/2 reaches eps - tiny at delta 0)
    assert pb.br_pld(eps).get_epsilon_for_delta(0.0) == pytest.approx(eps, abs=2e-3)


def test_an_all_gaussian_ledger_calibrates_to_the_gaussian_dp_factor():
    """Gaussian mechanisms compose exactly: the noise factor is sqrt(rho_zCDP / (mu_GDP^2 / 2)) (0.932 at eps 1)."""
    pb = _module()
    from dpstats.privacy.conversions import gdp_mu, zcdp_rho

    rho = zcdp_rho(1.0, 1e-6)
    ledger = [SimpleNamespace(kind="gaussian", scale=1.0 / math.sqrt(rho), sensitivity=1.0, mechanism=f"g{i}")
              for i in range(2)]  # two mechanisms of rho / 2 each
    c = pb.calibration_factor(ledger, 1.0, 1e-6)
    expected = math.sqrt(rho / (gdp_mu(1.0, 1e-6) ** 2 / 2.0))
    assert 1.0 / math.sqrt(c) == pytest.approx(expected, rel=2e-3)


def test_composed_bounded_range_mechanisms_beat_pure_dp_and_the_zcdp_charge():
    """Ten 0.08-bounded-range mechanisms: below the pure-DP composition and below zCDP's epsilon for their rho."""
    pb = _module()
    from dp_accounting.pld import common
    from dp_accounting.pld import privacy_loss_distribution as pldm

    from dpstats.privacy.conversions import zcdp_rho

    ledger = [SimpleNamespace(kind="exponential", scale=0.08, sensitivity=1.0, mechanism=f"e{i}") for i in range(10)]
    br = pb.ledger_pld(ledger).get_epsilon_for_delta(1e-6)
    pure = pldm.from_privacy_parameters(common.DifferentialPrivacyParameters(0.08, 0.0),
                                        value_discretization_interval=pb.STEP)
    composed = pure
    for _ in range(9):
        composed = composed.compose(pure)
    assert br < composed.get_epsilon_for_delta(1e-6)
    # zCDP charges 10 * 0.08^2 / 8; the epsilon whose rho that is lies above the PLD's
    rho = 10 * 0.08**2 / 8.0
    lo, hi = 0.01, 5.0
    while hi - lo > 1e-6:
        mid = (lo + hi) / 2.0
        lo, hi = (mid, hi) if zcdp_rho(mid, 1e-6) < rho else (lo, mid)
    assert br < lo


def test_equal_mechanisms_lie_between_the_optimal_composition_and_zcdp():
    """The dominating pair bounds every common-t composition from above and stays below zCDP's epsilon."""
    r = _module().compare_homogeneous(6, 0.1, 1e-6, t_points=9)
    assert r["common_t"] <= r["pair"] + 1e-3 and r["pair"] < r["zcdp"]
