"""``Accountant.measurement``: a whole mechanism charged and run in one call."""
from __future__ import annotations

import math

import numpy as np
import pytest

from dpstats.privacy.accounting import BudgetExceeded, GDPAccountant, PureAccountant, ZCDPAccountant


def _draw(r: np.random.Generator) -> float:
    return float(r.laplace(0.0, 2.0))


def test_pure_charges_epsilon_and_delta_then_draws():
    acc = PureAccountant(1.0, 1e-6)
    rng = np.random.default_rng(3)
    out = acc.measurement("m", _draw, epsilon=0.4, delta=4e-7, rng=rng, sensitivity=1.0, scale=2.0, note="n")
    assert out == float(np.random.default_rng(3).laplace(0.0, 2.0))
    (e,) = acc.ledger
    assert (e.mechanism, e.cost, e.unit, e.note, e.kind, e.sensitivity, e.scale) == (
        "m", 0.4, "epsilon", "n", "measurement", 1.0, 2.0)
    assert acc.achieved() == (0.4, 4e-7)


def test_zcdp_charges_eps_squared_over_two():
    acc = ZCDPAccountant(1.0, 1e-6)
    acc.measurement("m", _draw, epsilon=0.1, rng=np.random.default_rng(0))
    assert acc.ledger[-1].cost == pytest.approx(0.005, rel=1e-15)
    assert acc.ledger[-1].kind == "measurement"


def test_zcdp_refuses_approximate_mechanisms_and_gdp_refuses_all():
    with pytest.raises(TypeError, match="pure"):
        ZCDPAccountant(1.0, 1e-6).measurement("m", _draw, epsilon=0.5, delta=1e-7, rng=np.random.default_rng(0))
    with pytest.raises(TypeError):
        GDPAccountant(1.0, 1e-6).measurement("m", _draw, epsilon=0.5, rng=np.random.default_rng(0))


@pytest.mark.parametrize("acc", [PureAccountant(1.0, 1e-6), ZCDPAccountant(1.0, 1e-6)])
def test_over_budget_raises_before_drawing(acc):
    rng = np.random.default_rng(1)
    state = rng.bit_generator.state
    called = []
    with pytest.raises(BudgetExceeded):
        acc.measurement("m", lambda r: called.append(r), epsilon=5.0, rng=rng)
    assert not called and acc.ledger == [] and rng.bit_generator.state == state


def test_delta_over_budget_raises_before_drawing():
    acc = PureAccountant(1.0, 1e-6)
    called = []
    with pytest.raises(BudgetExceeded, match="delta"):
        acc.measurement("m", lambda r: called.append(r), epsilon=0.1, delta=2e-6, rng=np.random.default_rng(0))
    assert not called and acc.ledger == [] and acc.delta_spent == 0.0


@pytest.mark.parametrize("bad", [dict(epsilon=0.0), dict(epsilon=math.inf), dict(epsilon=0.1, delta=-1e-9),
                                 dict(epsilon=0.1, sensitivity=-1.0)])
def test_bad_parameters(bad):
    with pytest.raises(ValueError):
        PureAccountant(1.0, 1e-6).measurement("m", _draw, rng=np.random.default_rng(0), **bad)
