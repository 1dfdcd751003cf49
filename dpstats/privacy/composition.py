"""Parts of a zCDP budget: one release made of several pieces, each held to its share (sequential composition)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dpstats.privacy.accounting import ZCDPAccountant

__all__ = ["ZCDPPart", "part"]


def part(acc: ZCDPAccountant, fraction: float, label: str) -> ZCDPPart:
    """A part of ``acc``'s budget for one piece of a release made of several (sequential composition).

    The part holds ``fraction`` of ``acc``'s ``rho``; each charge made on it
    is checked against that share and entered, as
    ``"<mechanism> (<label>)"``, in ``acc``'s ledger too. zCDP composes by
    adding the ``rho`` of the pieces, so parts whose fractions sum to at most
    1 keep the whole release within ``acc``'s budget (Bun and Steinke 2016,
    Lemma 2.3); ``acc``'s own check refuses any charge beyond it.

    Examples
    --------
    >>> import numpy as np
    >>> acc = ZCDPAccountant(1.0, 1e-6)
    >>> rng = np.random.default_rng(0)
    >>> half = part(acc, 0.5, "educ")
    >>> sigma = half.gaussian_sigma(sensitivity=1.0, fraction=1.0)
    >>> _ = half.gaussian("sum", 3.0, sensitivity=1.0, sigma=sigma, rng=rng)
    >>> half.exhausted(), round(acc.remaining / acc.rho, 12), acc.ledger[0].mechanism
    (True, 0.5, 'sum (educ)')
    """
    return ZCDPPart(acc.epsilon, acc.delta, parent=acc, fraction=fraction, label=label)


@dataclass
class ZCDPPart(ZCDPAccountant):
    """``fraction`` of a parent zCDP accountant's ``rho`` (see :func:`part`).

    A charge is checked against the part's share first, so one that exceeds
    it raises :class:`BudgetExceeded` with neither ledger touched; it is then
    entered in the parent's ledger (as ``"<mechanism> (<label>)"``, checked
    against the parent's budget) and in the part's own.
    """

    parent: ZCDPAccountant | None = field(default=None, repr=False)
    fraction: float = 1.0
    label: str = ""

    def __post_init__(self) -> None:
        if self.parent is None:
            raise ValueError("a ZCDPPart needs its parent accountant")
        if not (0.0 < self.fraction <= 1.0):
            raise ValueError(f"fraction must be in (0, 1], got {self.fraction!r}")
        self._rho = self.fraction * self.parent.rho

    def _charge(self, mechanism: str, cost: float, note: str = "", **entry: Any) -> None:
        """Check the part's share, then enter the charge in the parent's ledger and in the part's own."""
        assert self.parent is not None
        self._check_cost(f"{mechanism} ({self.label}, a part of the budget)", cost)  # the part's share first
        self.parent._charge(f"{mechanism} ({self.label})", cost, note, **entry)
        super()._charge(mechanism, cost, note, **entry)
