"""fwl_score's noisy Newton step of the nuisance (``newton_share``; not the default).

The step releases the clipped gradients of the two nuisance regressions,
``(g / C_x, h / C_y)``, with one Gaussian mechanism
(:func:`~dpstats.algorithms.sce._fwl_newton.newton_step`). Pinned here: a
replaced row moves that vector by at most the charged sensitivity
``2 sqrt(2 (1 + B^2))``, and a neighbour attains it (so a halved sensitivity
would not cover it); inside a run of the algorithm the step is charged its
share of rho at the noise that share pays for, with the released row bound,
and the whole budget is spent.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpstats.algorithms.sce._fwl_newton import newton_sensitivity, newton_step
from dpstats.algorithms.sce.fwl_score import FWLScore
from dpstats.privacy.accounting import ZCDPAccountant

MECH = "Gaussian gradients of the nuisance regressions"


def _released(Zs, rx, ry, B, const, C_x=0.7, C_y=1.3, seed=0):
    acc = ZCDPAccountant(1.0, 1e-6)
    k = Zs.shape[1]
    dg, dd, step = newton_step(Zs, rx, ry, B, const, np.eye(k), C_x, C_y, acc, 0.5 * acc.rho,
                               np.random.default_rng(seed))
    return np.concatenate([dg / C_x, dd / C_y]), step, acc


@pytest.mark.parametrize("const", [True, False])
def test_one_row_moves_the_gradients_by_at_most_their_sensitivity(const):
    """Same seed, same noise: the difference of two releases is the difference of the clipped sums. Every
    replacement stays within 2 sqrt(2 (1 + B^2)) (2 sqrt(2) B without a constant), and the row at the norm
    bound whose residuals flip sign from +clip to -clip attains it."""
    rng = np.random.default_rng(5)
    n, m, B = 120, 3, 2.5
    Z = rng.standard_normal((n, m)) * 2.0
    Zs = np.column_stack([np.ones(n), Z]) if const else Z
    rx, ry = rng.standard_t(2, n), rng.standard_t(2, n) * 2.0
    base, step, acc = _released(Zs, rx, ry, B, const)
    sens = newton_sensitivity(B, const)
    assert sens == pytest.approx(2.0 * math.sqrt(2.0 * ((1.0 if const else 0.0) + B * B)))
    (spend,) = [e for e in acc.ledger if e.mechanism == MECH]
    assert spend.sensitivity == pytest.approx(sens) and spend.cost == pytest.approx(0.5 * acc.rho, rel=1e-12)
    assert spend.scale == pytest.approx(sens / math.sqrt(acc.rho), rel=1e-12) == step.sigma
    far = np.full(m, 10.0)
    worst = 0.0
    for i in range(0, n, 7):
        for z_new, sx, sy in [(far, 1e3, 1e3), (far, -1e3, -1e3), (-far, 1e3, -1e3), (np.zeros(m), 0.0, 0.0)]:
            Z2, rx2, ry2 = Zs.copy(), rx.copy(), ry.copy()
            (Z2[i, 1:] if const else Z2[i])[:] = z_new
            rx2[i], ry2[i] = sx, sy
            diff = float(np.linalg.norm(_released(Z2, rx2, ry2, B, const)[0] - base))
            assert diff <= sens + 1e-9
            worst = max(worst, diff)
    # the attaining pair: the same row at the norm bound, residuals beyond +clip against beyond -clip
    Za, rxa, rya = Zs.copy(), rx.copy(), ry.copy()
    (Za[0, 1:] if const else Za[0])[:] = far
    rxa[0], rya[0] = 1e3, 1e3
    Zb, rxb, ryb = Za.copy(), rx.copy(), ry.copy()
    rxb[0], ryb[0] = -1e3, -1e3
    gap = float(np.linalg.norm(_released(Za, rxa, rya, B, const)[0] - _released(Zb, rxb, ryb, B, const)[0]))
    assert gap == pytest.approx(sens, rel=1e-9)
    assert worst > 0.5 * sens


def test_the_newton_step_is_charged_inside_the_algorithm():
    """A run with newton_share 0.1 on the public corpus's mroz87_lwage: the ledger holds the step at 0.1 rho, its
    sensitivity from the released row bound, the scale that charge pays for; the budget is spent exactly.
    Without the share (the default) there is no such entry."""
    from dpstats.data.corpus import Corpus

    inst = Corpus.public().instance("mroz87_lwage")
    data, facts = inst.task_data(), inst.facts
    rho = ZCDPAccountant(1.0, 1e-6).rho
    out = FWLScore(**{**FWLScore.interval_params, "newton_share": 0.1}).run(data, facts, 1.0, 1e-6,
                                                                            np.random.default_rng(3))
    (spend,) = [e for e in out.ledger if e.mechanism == MECH]
    assert spend.cost == pytest.approx(0.1 * rho, rel=1e-12)
    assert spend.sensitivity == pytest.approx(newton_sensitivity(out.details["row_bound"], True), rel=1e-12)
    assert spend.scale == pytest.approx(spend.sensitivity / math.sqrt(2.0 * spend.cost), rel=1e-12)
    assert sum(e.cost for e in out.ledger) == pytest.approx(rho, rel=1e-9)
    plain = FWLScore(**FWLScore.interval_params).run(data, facts, 1.0, 1e-6, np.random.default_rng(3))
    assert not [e for e in plain.ledger if e.mechanism == MECH]
