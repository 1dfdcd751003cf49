"""Direct charges without noise, for budget arithmetic in tests.

The accountants charge only inside the calls that also draw the noise
(:meth:`~dpstats.privacy.accounting.Accountant.gaussian`, ``laplace``,
``exponential``, ``measurement``); a test that needs a ledger with a given
cost on it, and no noise, records the cost directly here. Production code
never does (``tests/privacy/test_noise_through_accountant.py``).
"""

from __future__ import annotations

from dpstats.privacy.accounting import _TOL, Accountant, BudgetExceeded, PureAccountant, ZCDPAccountant


def spend_gaussian(acc: Accountant, mechanism: str, sensitivity: float, sigma: float, note: str = "") -> None:
    """Record a Gaussian mechanism at the accountant's cost of ``sensitivity`` and ``sigma``."""
    if sigma <= 0:
        raise ValueError("sigma must be > 0")
    acc._charge(mechanism, acc._gaussian_cost(sensitivity, sigma), note)


def spend_pure(acc: ZCDPAccountant, mechanism: str, epsilon: float, note: str = "") -> None:
    """Record an ``epsilon``-DP mechanism in zCDP: cost ``epsilon^2 / 2`` (Bun and Steinke 2016, Prop. 1.4)."""
    acc._charge(mechanism, epsilon**2 / 2.0, note)


def spend_rho(acc: ZCDPAccountant, mechanism: str, rho: float, note: str = "") -> None:
    """Record a mechanism with a known zCDP cost."""
    acc._charge(mechanism, rho, note)


def spend(acc: PureAccountant, mechanism: str, epsilon: float, delta: float = 0.0, note: str = "") -> None:
    """Record an ``(epsilon, delta)``-DP mechanism on a pure (basic composition) accountant."""
    if delta < 0 or acc.delta_spent + delta > acc.delta * (1 + _TOL) + 1e-300:
        raise BudgetExceeded(f"{mechanism}: delta {delta:g} exceeds the remaining delta")
    acc._charge(mechanism, epsilon, note)
    acc.delta_spent += delta
