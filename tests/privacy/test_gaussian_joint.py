"""``Accountant.gaussian_joint``: several blocks with their own scales, drawn and charged as one Gaussian mechanism."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpstats.privacy.accounting import GDPAccountant, PureAccountant, ZCDPAccountant


def test_blocks_drawn_in_order_at_their_scales_and_charged_sens2_over_2() -> None:
    acc = ZCDPAccountant(1.0, 1e-6)
    a, b = np.arange(3.0), np.array([10.0, 20.0])
    sens2 = acc.rho  # costs half the budget in zCDP
    out = acc.gaussian_joint("ab", [a, b], sigmas=[0.5, 3.0], sens2=sens2, rng=np.random.default_rng(4), note="n")
    g = np.random.default_rng(4)
    assert np.array_equal(out[0], a + g.normal(0.0, 0.5, size=3))  # bit for bit, block 0 first
    assert np.array_equal(out[1], b + g.normal(0.0, 3.0, size=2))
    (e,) = acc.ledger
    assert (e.mechanism, e.kind, e.scale, e.note) == ("ab", "gaussian_joint", (0.5, 3.0), "n")
    assert e.cost == sens2 / 2.0 and e.sensitivity == math.sqrt(sens2)


def test_gdp_cost_is_sens2_and_pure_dp_refuses() -> None:
    acc = GDPAccountant(1.0, 1e-6)
    acc.gaussian_joint("x", [np.zeros(2)], sigmas=[1.0], sens2=0.25 * acc.mu**2, rng=np.random.default_rng(0))
    assert acc.spent == pytest.approx(0.25 * acc.mu**2, rel=1e-15)
    with pytest.raises(TypeError):
        PureAccountant(1.0, 0.0).gaussian_joint("x", [np.zeros(2)], sigmas=[1.0], sens2=1.0, rng=np.random.default_rng(0))


def test_bad_arguments_and_budget_checked_before_drawing() -> None:
    acc = ZCDPAccountant(1.0, 1e-6)
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError):
        acc.gaussian_joint("x", [np.zeros(2), np.zeros(1)], sigmas=[1.0], sens2=0.1, rng=rng)
    with pytest.raises(ValueError):
        acc.gaussian_joint("x", [np.zeros(2)], sigmas=[0.0], sens2=0.1, rng=rng)
    with pytest.raises(ValueError):
        acc.gaussian_joint("x", [np.zeros(2)], sigmas=[1.0], sens2=-1.0, rng=rng)
    state = rng.bit_generator.state
    from dpstats.privacy.accounting import BudgetExceeded

    with pytest.raises(BudgetExceeded):
        acc.gaussian_joint("x", [np.zeros(2)], sigmas=[1.0], sens2=4.0 * acc.rho, rng=rng)
    assert rng.bit_generator.state == state and acc.ledger == []
