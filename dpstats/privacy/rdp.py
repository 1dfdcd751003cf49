"""Rényi-DP accounting for DP-SGD: the subsampled Gaussian, its conversion, and an accountant.

DP-SGD (DPGAN, DP-CTGAN) is accounted in Rényi DP (Mironov 2017): one step
is a Gaussian mechanism on a batch of fixed size drawn without replacement,
whose RDP under replace-one neighbours is the bound of Wang, Balle and
Kasiviswanathan (2019), computed by ``dp_accounting`` (imported lazily: the
``gan`` extra). zCDP spends are RDP ``rho * alpha`` at every order, so they
compose with it order by order; :func:`rdp_epsilon` converts to
``(epsilon, delta)`` (Canonne, Kamath and Steinke 2020, Prop. 12).
:class:`RDPAccountant` is a :class:`~dpstats.privacy.accounting.ZCDPAccountant`
whose :meth:`~RDPAccountant.rdp_measurement` charges such a mechanism and runs
it in one call, like the other charging calls.
"""
from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dpstats.privacy.accounting import BudgetExceeded, ZCDPAccountant

__all__ = [
    "ORDERS",
    "wor_rdp",
    "rdp_epsilon",
    "dpsgd_epsilon",
    "dpsgd_max_steps",
    "calibrate_noise",
    "RDPAccountant",
]

#: Rényi orders of the DP-SGD accounting.
#: Integer orders only: dp_accounting bounds a fractional order by two
#: integer ones, at twice the cost. Small budgets need large orders: at
#: epsilon = 0.1, delta = 1e-9 the best order for a zCDP spend is about 1000,
#: and with orders only up to 128 the 10 % PrivTree share alone converted to
#: epsilon 0.119 > 0.1, leaving DP-SGD nothing (`dpstats synth bench` at
#: epsilon 0.1 failed so); with orders to 1024 it is 0.031.
ORDERS: tuple[float, ...] = (*map(float, range(2, 33)), 40.0, 48.0, 56.0, 64.0, 80.0, 96.0, 128.0,
                             192.0, 256.0, 384.0, 512.0, 768.0, 1024.0)


def _check_sampling(n: int, batch: int) -> None:
    if not (isinstance(n, (int, np.integer)) and n >= 2):
        raise ValueError(f"DP-SGD needs at least 2 rows, got n={n!r}")
    if not (isinstance(batch, (int, np.integer)) and 1 <= batch <= n):
        raise ValueError(f"batch_size must be an integer in [1, n={n}], got {batch!r}")


@functools.lru_cache(maxsize=256)
def _wor_rdp_cached(q: float, z: float, orders: tuple[float, ...]) -> tuple[float, ...]:
    from dp_accounting.rdp import rdp_privacy_accountant as rdp

    return tuple(float(v) for v in rdp._compute_rdp_sample_wor_gaussian(q, z, list(orders)))


def wor_rdp(n: int, batch: int, z: float, orders: Sequence[float] = ORDERS) -> np.ndarray:
    """RDP of one step: Gaussian with noise multiplier ``z`` (per unit sensitivity) on ``batch`` of ``n`` rows.

    Sampling without replacement, replace-one neighbours (Wang, Balle,
    Kasiviswanathan 2019), from ``dp_accounting``; a full batch (``batch ==
    n``) is the Gaussian mechanism itself, RDP ``alpha / (2 z^2)``.
    """
    _check_sampling(n, batch)
    if not (z > 0 and math.isfinite(z)):
        raise ValueError(f"noise multiplier must be finite and > 0, got {z!r}")
    if batch == n:
        return np.asarray(orders, dtype=float) / (2.0 * z * z)
    return np.asarray(_wor_rdp_cached(batch / n, float(z), tuple(float(a) for a in orders)), dtype=float)


def rdp_epsilon(rdp_vec: np.ndarray, delta: float, orders: Sequence[float] = ORDERS) -> tuple[float, float]:
    """RDP to (epsilon, delta): Canonne, Kamath, Steinke (2020, Prop. 12), the conversion
    ``dp_accounting.rdp.compute_epsilon`` uses, vectorised (orders > 1.01; the tests compare the two)."""
    a = np.asarray(orders, dtype=float)
    r = np.asarray(rdp_vec, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        eps = r + np.log1p(-1.0 / a) - np.log(delta * a) / (a - 1.0)
    eps = np.where(np.isfinite(eps), eps, np.inf)
    i = int(np.argmin(eps))
    return max(0.0, float(eps[i])), float(a[i])


def dpsgd_epsilon(n: int, batch: int, z: float, steps: int, delta: float, rho_prior: float = 0.0) -> float:
    """Epsilon at ``delta`` of ``steps`` DP-SGD steps composed with a ``rho_prior``-zCDP release (RDP)."""
    if steps < 0:
        raise ValueError(f"steps must be >= 0, got {steps!r}")
    r = steps * wor_rdp(n, batch, z) + rho_prior * np.asarray(ORDERS)
    return rdp_epsilon(r, delta)[0]


def dpsgd_max_steps(n: int, batch: int, z: float, epsilon: float, delta: float, rho_prior: float,
                    cap: int) -> int:
    """The largest ``T <= cap`` with :func:`dpsgd_epsilon` ``<= epsilon`` (0 when not even one step fits)."""
    r1 = wor_rdp(n, batch, z)
    prior = rho_prior * np.asarray(ORDERS)

    def eps(t: int) -> float:
        return rdp_epsilon(t * r1 + prior, delta)[0]

    if eps(1) > epsilon:
        return 0
    lo, hi = 1, max(1, int(cap))
    if eps(hi) <= epsilon:
        return hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if eps(mid) <= epsilon else (lo, mid)
    return lo


def calibrate_noise(n: int, batch: int, steps: int, epsilon: float, delta: float, rho_prior: float = 0.0,
                    rtol: float = 1e-3) -> float:
    """The smallest noise multiplier (to relative ``rtol``) whose ``steps`` steps, with the prior spend, are ``epsilon``-DP.

    The value returned always satisfies ``dpsgd_epsilon(...) <= epsilon``.
    """
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps!r}")
    base = rho_prior * np.asarray(ORDERS)
    if rdp_epsilon(base, delta)[0] >= epsilon:
        raise ValueError("the earlier spends leave no budget for DP-SGD")

    def f(z: float) -> float:
        return rdp_epsilon(steps * wor_rdp(n, batch, z) + base, delta)[0] - epsilon

    from scipy import optimize

    lo, hi = 0.05, 1.0
    while f(hi) > 0:
        lo, hi = hi, hi * 4.0
        if hi > 1e7:  # pragma: no cover - astronomically small budgets
            raise ValueError("budget too small for DP-SGD")
    if f(lo) <= 0:
        return lo
    root = math.exp(optimize.brentq(lambda t: f(math.exp(t)), math.log(lo), math.log(hi), rtol=rtol / 10))
    z = root
    while f(z) > 0:   # brentq's root may lie a hair on the wrong side
        z *= 1.0 + rtol / 10
    return z


@dataclass
class RDPAccountant(ZCDPAccountant):
    """A zCDP ledger that also composes mechanisms known by their Rényi-DP curve (DP-SGD).

    zCDP spends are RDP ``rho * alpha`` at every order; an RDP mechanism's
    curve (on :data:`ORDERS`) is added order by order, and :meth:`achieved`
    converts the sum to ``(epsilon, delta)`` (Canonne, Kamath, Steinke 2020,
    Prop. 12). An RDP mechanism closes the ledger: its entry costs the whole
    remaining ``rho`` (so :meth:`exhausted` holds), a bookkeeping figure, not
    a zCDP cost; the guarantee reported is the RDP composition.
    """

    rdp_curves: list[tuple[float, ...]] = field(default_factory=list)

    def _rdp_total(self, extra: np.ndarray | None = None) -> np.ndarray:
        closed = sum(s.cost for s in self.ledger if s.kind == "rdp")
        total = (self.spent - closed) * np.asarray(ORDERS)
        for c in self.rdp_curves:
            total = total + np.asarray(c)
        return total if extra is None else total + extra

    def rdp_measurement(self, mechanism: str, release: Callable[[np.random.Generator], Any], *,
                        rdp: Sequence[float] | np.ndarray, rng: np.random.Generator, sensitivity: float | None = None,
                        scale: float | None = None, note: str = "") -> Any:
        """Charge a mechanism with RDP curve ``rdp`` (on :data:`ORDERS`), then run ``release(rng)``.

        Raises :class:`~dpstats.privacy.accounting.BudgetExceeded`, before
        drawing anything, when the composition would exceed ``epsilon`` at
        ``delta``, or when an RDP mechanism already closed the ledger.
        """
        r = np.asarray(rdp, dtype=float)
        if r.shape != (len(ORDERS),) or not np.all(np.isfinite(r)) or np.any(r < 0):
            raise ValueError(f"rdp must hold {len(ORDERS)} finite values >= 0 (one per order)")
        if self.rdp_curves:
            raise BudgetExceeded(f"{mechanism}: an RDP mechanism already closed this ledger")
        eps = rdp_epsilon(self._rdp_total(r), self.delta)[0]
        if eps > self.epsilon * (1 + 1e-9):
            raise BudgetExceeded(f"{mechanism}: RDP composition gives epsilon {eps:.6g} > {self.epsilon:g}")
        self._charge(mechanism, self.remaining, note, kind="rdp", sensitivity=sensitivity, scale=scale)
        self.rdp_curves.append(tuple(float(v) for v in r))
        return release(rng)

    def achieved(self) -> tuple[float, float]:
        if not self.rdp_curves:
            return super().achieved()
        return (rdp_epsilon(self._rdp_total(), self.delta)[0], self.delta)
