"""``Accountant.gaussian(..., unit=)``: noise drawn in rescaled units, charged and recorded in the statistic's own."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpstats.privacy.accounting import GDPAccountant, ZCDPAccountant


@pytest.mark.parametrize("unit", [1.0, 0.37, 2.5e3])
def test_unit_draws_in_rescaled_units_and_charges_the_statistic(unit):
    acc = ZCDPAccountant(1.0, 1e-6)
    sens, sigma = 0.1, 0.9  # in units of `unit`
    out = acc.gaussian("m", 1.5, sensitivity=sens, sigma=sigma, rng=np.random.default_rng(4), unit=unit)
    # the draw is rng.normal(0, sigma) in the rescaled units, whatever the unit
    assert out == 1.5 + np.random.default_rng(4).normal(0.0, sigma)
    (e,) = acc.ledger
    # the ledger holds the statistic's own units, and the cost computed from them
    assert e.kind == "gaussian"
    assert e.sensitivity == sens * unit and e.scale == sigma * unit
    assert e.cost == (sens * unit) ** 2 / (2.0 * (sigma * unit) ** 2)
    assert e.cost == pytest.approx(sens**2 / (2.0 * sigma**2), rel=1e-14)  # unit-free up to rounding


def test_unit_one_is_the_default_and_gdp_charges_alike():
    a, b = GDPAccountant(1.0, 1e-6), GDPAccountant(1.0, 1e-6)
    x = np.arange(3.0)
    ya = a.gaussian("m", x, sensitivity=0.2, sigma=1.1, rng=np.random.default_rng(5))
    yb = b.gaussian("m", x, sensitivity=0.2, sigma=1.1, rng=np.random.default_rng(5), unit=1.0)
    assert np.array_equal(ya, yb) and a.ledger == b.ledger
    c = GDPAccountant(1.0, 1e-6)
    c.gaussian("m", x, sensitivity=0.2, sigma=1.1, rng=np.random.default_rng(5), unit=4.0)
    assert c.ledger[0].cost == pytest.approx((0.2 / 1.1) ** 2, rel=1e-14)
    assert c.ledger[0].scale == 4.4


@pytest.mark.parametrize("unit", [0.0, -1.0, math.inf, math.nan])
def test_unit_must_be_finite_and_positive(unit):
    acc = ZCDPAccountant(1.0, 1e-6)
    rng = np.random.default_rng(6)
    state = rng.bit_generator.state
    with pytest.raises(ValueError, match="unit"):
        acc.gaussian("m", 0.0, sensitivity=1.0, sigma=1.0, rng=rng, unit=unit)
    assert acc.ledger == [] and rng.bit_generator.state == state  # nothing charged, nothing drawn
