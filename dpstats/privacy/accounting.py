"""Privacy accountants: every release is charged, and its noise drawn, here.

Every algorithm in dpstats is given an explicit ``(epsilon, delta)`` budget and
must spend exactly that budget. The neighbouring relation throughout is
*replace one row* with ``n`` public, so every sensitivity in the package is the
largest change of a statistic when one row is replaced by any other row that
satisfies the public facts.

The conversions between privacy notions (Gaussian DP, zCDP, the exponential
mechanism's zCDP cost) live in :mod:`dpstats.privacy.conversions` and are
re-exported here.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, TypeVar

import numpy as np

from dpstats.privacy.conversions import (
    EMBound,
    em_epsilon,
    em_rho,
    gaussian_sigma,
    gdp_delta,
    gdp_mu,
    laplace_scale,
    validate_budget,
    zcdp_epsilon,
    zcdp_rho,
)
from dpstats.privacy.mechanisms import exponential_mechanism

T = TypeVar("T")

__all__ = [
    "PrivacyLeakWarning",
    "validate_budget",
    "gdp_delta",
    "gdp_mu",
    "gaussian_sigma",
    "zcdp_epsilon",
    "zcdp_rho",
    "laplace_scale",
    "Spend",
    "EMBound",
    "em_rho",
    "em_epsilon",
    "Accountant",
    "ZCDPAccountant",
    "GDPAccountant",
    "PureAccountant",
]


class PrivacyLeakWarning(UserWarning):
    """Raised when an algorithm without a full DP argument (a non-standard class) runs."""


class Spend(NamedTuple):
    """One entry of an accountant's ledger (a named tuple, so releases carry it as it is).

    Its fields, in order: ``mechanism``, ``cost``, ``unit`` and ``note`` say
    what was charged, its cost in the accountant's unit, and a comment.
    ``kind`` is ``"gaussian"``, ``"gaussian_joint"``, ``"laplace"``,
    ``"exponential"`` or ``"measurement"`` for an entry written by a charging
    call (:meth:`Accountant.gaussian`, :meth:`Accountant.gaussian_joint`,
    :meth:`Accountant.laplace`, :meth:`Accountant.exponential`,
    :meth:`Accountant.measurement`), which also drew the noise, and ``""`` for a
    direct charge (``spend_*``: budget arithmetic in tests and docs, never an
    algorithm's noise). ``sensitivity`` is the sensitivity charged for (L2 for
    Gaussian, L1 for Laplace, of the score for the exponential mechanism; for
    ``"gaussian_joint"`` the L2 sensitivity ``sqrt(sens2)`` of the blocks
    divided by their scales). ``scale`` is the scale actually drawn: the
    Gaussian ``sigma`` (one per block for ``"gaussian_joint"``), the Laplace
    ``b``, or the exponential mechanism's ``epsilon``; a measurement records
    what its caller states.
    """

    mechanism: str
    cost: float
    unit: str
    note: str = ""
    kind: str = ""
    sensitivity: float | None = None
    scale: float | tuple[float, ...] | None = None


class BudgetExceeded(RuntimeError):
    """An algorithm tried to spend more than its budget."""


_TOL = 1e-9


def _check_sensitivity(sensitivity: float) -> None:
    if not (sensitivity >= 0 and math.isfinite(sensitivity)):
        raise ValueError(f"sensitivity must be finite and >= 0, got {sensitivity!r}")


@dataclass
class Accountant:
    """Base class: a ledger of privacy spends against a fixed (epsilon, delta) budget.

    Subclasses hold the budget in their own unit (``rho`` for zCDP, ``mu^2`` for
    GDP, ``epsilon`` for pure DP) and convert it back to ``(epsilon, delta)``.
    """

    epsilon: float
    delta: float
    ledger: list[Spend] = field(default_factory=list)

    unit = "abstract"

    @property
    def capacity(self) -> float:  # pragma: no cover - abstract
        raise NotImplementedError

    @property
    def spent(self) -> float:
        return float(sum(s.cost for s in self.ledger))

    @property
    def remaining(self) -> float:
        return max(self.capacity - self.spent, 0.0)

    def _charge(
        self,
        mechanism: str,
        cost: float,
        note: str = "",
        *,
        kind: str = "",
        sensitivity: float | None = None,
        scale: float | tuple[float, ...] | None = None,
    ) -> None:
        self._check_cost(mechanism, cost)
        self.ledger.append(Spend(mechanism, float(cost), self.unit, note, kind, sensitivity, scale))

    def _check_cost(self, mechanism: str, cost: float) -> None:
        """Refuse a cost that is not finite and >= 0, or that this budget cannot hold (before any draw)."""
        if cost < 0 or not math.isfinite(cost):
            raise ValueError(f"privacy cost must be finite and >= 0, got {cost!r}")
        if self.spent + cost > self.capacity * (1 + _TOL) + 1e-15:
            raise BudgetExceeded(
                f"{mechanism}: cost {cost:.6g} {self.unit} exceeds the remaining "
                f"{self.remaining:.6g} of {self.capacity:.6g}"
            )

    # ------------------------------------------------------------------
    # charging calls: draw the noise and charge exactly the scale drawn
    # ------------------------------------------------------------------

    def _gaussian_cost(self, sensitivity: float, sigma: float) -> float:
        raise TypeError(f"{type(self).__name__} cannot account for a Gaussian mechanism")

    def _gaussian_joint_cost(self, sens2: float) -> float:
        raise TypeError(f"{type(self).__name__} cannot account for a Gaussian mechanism")

    def _laplace_charge(self, mechanism: str, epsilon: float, note: str, sensitivity: float, scale: float) -> None:
        raise TypeError(f"{type(self).__name__} cannot account for a Laplace mechanism")

    def _em_charge(
        self, mechanism: str, epsilon: float, bound: EMBound | None, note: str, sensitivity: float
    ) -> None:
        raise TypeError(f"{type(self).__name__} cannot account for an exponential mechanism")

    def gaussian(
        self,
        mechanism: str,
        value: Any,
        *,
        sensitivity: float,
        sigma: float,
        rng: np.random.Generator,
        note: str = "",
        unit: float = 1.0,
    ) -> Any:
        """Release ``value + N(0, sigma^2)`` and charge the Gaussian mechanism for it.

        The charge is recorded before the draw, so a draw that exceeds the
        budget raises :class:`BudgetExceeded` without touching ``rng``.

        Parameters
        ----------
        mechanism : str
            Name of the ledger entry.
        value : float or array_like
            The exact statistic. A scalar draws one ``rng.normal(0.0, sigma)``
            and returns a Python float; an array draws ``rng.normal(0.0, sigma,
            size=value.shape)`` and returns an array of that shape.
        sensitivity : float
            L2 sensitivity of ``value`` under replace-one neighbours (``>= 0``).
        sigma : float
            Noise scale (``> 0``); the ledger records exactly this scale.
        rng : Generator
            Source of the noise (a :class:`~dpstats.privacy.randomness.SecureGenerator`
            for releases that must resist floating-point attacks).
        note : str
            Comment for the ledger entry.
        unit : float
            The unit ``value``, ``sensitivity`` and ``sigma`` are expressed in
            (``> 0``, default 1): an algorithm that computes on rescaled values
            ``x / unit`` (CoinPress in units of a standard-deviation bound)
            draws ``N(0, sigma^2)`` in those units, and the ledger records,
            and charges for, the statistic in its own units: sensitivity
            ``sensitivity * unit`` and scale ``sigma * unit`` (the same cost,
            which is unit-free, with the rounding of those units).

        Returns
        -------
        float or ndarray
            The noisy statistic.

        Raises
        ------
        ValueError
            For ``sigma <= 0``, a negative or non-finite sensitivity, or a
            ``unit`` that is not finite and > 0.
        TypeError
            For an accountant that cannot account for Gaussian noise (pure DP).
        """
        _check_sensitivity(sensitivity)
        if not (sigma > 0 and math.isfinite(sigma)):
            raise ValueError(f"sigma must be finite and > 0, got {sigma!r}")
        if not (unit > 0 and math.isfinite(unit)):
            raise ValueError(f"unit must be finite and > 0, got {unit!r}")
        sens_u, sigma_u = float(sensitivity * unit), float(sigma * unit)
        self._charge(
            mechanism, self._gaussian_cost(sens_u, sigma_u), note,
            kind="gaussian", sensitivity=sens_u, scale=sigma_u,
        )
        if np.ndim(value) == 0:
            return float(value + rng.normal(0.0, sigma))
        arr = np.asarray(value)
        return arr + rng.normal(0.0, sigma, size=arr.shape)

    def gaussian_joint(
        self,
        mechanism: str,
        values: Sequence[Any],
        *,
        sigmas: Sequence[float],
        sens2: float,
        rng: np.random.Generator,
        note: str = "",
    ) -> list[np.ndarray]:
        """Release several statistics with their own Gaussian scales as *one* mechanism, and charge it.

        Block ``i`` is released as ``values[i] + N(0, sigmas[i]^2 I)``. This is
        the Gaussian mechanism on ``(values[0] / sigmas[0], values[1] /
        sigmas[1], ...)`` with unit noise, so its cost depends only on
        ``sens2``, the supremum over replace-one neighbours of
        ``sum_i ||Delta values[i]||^2 / sigmas[i]^2`` (a joint bound, which can
        be smaller than the sum of the blocks' separate sensitivities):
        ``sens2 / 2`` in zCDP, ``sens2`` in GDP (``mu^2``).

        The charge is recorded before the draws; the blocks are drawn in
        order, each as ``rng.normal(0.0, sigmas[i], size=shape)``.

        Parameters
        ----------
        mechanism : str
        values : sequence of array_like
            The exact statistics (each an array).
        sigmas : sequence of float
            Noise scale of each block (``> 0``), recorded in the ledger.
        sens2 : float
            Squared joint sensitivity in units of the noise (``>= 0``).
        rng : Generator
        note : str

        Returns
        -------
        list of ndarray
            The noisy blocks.
        """
        if len(values) != len(sigmas) or not len(values):
            raise ValueError("need one sigma per block and at least one block")
        for s in sigmas:
            if not (s > 0 and math.isfinite(s)):
                raise ValueError(f"sigma must be finite and > 0, got {s!r}")
        _check_sensitivity(sens2)
        self._charge(
            mechanism, self._gaussian_joint_cost(sens2), note,
            kind="gaussian_joint", sensitivity=math.sqrt(sens2), scale=tuple(float(s) for s in sigmas),
        )
        out = []
        for v, s in zip(values, sigmas, strict=True):
            arr = np.asarray(v)
            out.append(arr + rng.normal(0.0, s, size=arr.shape))
        return out

    def laplace(
        self,
        mechanism: str,
        value: Any,
        *,
        sensitivity: float,
        rng: np.random.Generator,
        epsilon: float | None = None,
        scale: float | None = None,
        note: str = "",
    ) -> Any:
        """Release ``value + Laplace(0, b)`` and charge the ``Delta / b``-DP Laplace mechanism for it.

        Give exactly one of ``epsilon`` (then ``b = sensitivity / epsilon``)
        and ``scale`` (then ``b = scale`` and ``epsilon = sensitivity / b``).
        A :class:`PureAccountant` charges ``epsilon``, a :class:`ZCDPAccountant`
        ``epsilon^2 / 2``.

        Parameters
        ----------
        mechanism : str
        value : float or array_like
            Scalar in, Python float out (``rng.laplace(0.0, b)``); arrays draw
            ``size=value.shape``.
        sensitivity : float
            L1 sensitivity of ``value`` under replace-one neighbours (``>= 0``).
        rng : Generator
        epsilon, scale : float
            The privacy parameter or the noise scale (exactly one, ``> 0``).
        note : str

        Returns
        -------
        float or ndarray
        """
        _check_sensitivity(sensitivity)
        if (epsilon is None) == (scale is None):
            raise ValueError("give exactly one of epsilon and scale")
        if epsilon is not None:
            if not (epsilon > 0 and math.isfinite(epsilon)):
                raise ValueError(f"epsilon must be finite and > 0, got {epsilon!r}")
            b = sensitivity / epsilon
            eps = float(epsilon)
        else:
            assert scale is not None
            if not (scale > 0 and math.isfinite(scale)):
                raise ValueError(f"scale must be finite and > 0, got {scale!r}")
            b = scale
            eps = sensitivity / scale
        if not b > 0:
            raise ValueError("the Laplace scale must be > 0 (sensitivity 0?)")
        self._laplace_charge(mechanism, eps, note, float(sensitivity), float(b))
        if np.ndim(value) == 0:
            return float(value + rng.laplace(0.0, b))
        arr = np.asarray(value)
        return arr + rng.laplace(0.0, b, size=arr.shape)

    def exponential(
        self,
        mechanism: str,
        scores: Any,
        *,
        sensitivity: float,
        epsilon: float,
        rng: np.random.Generator,
        bound: EMBound | None = None,
        log_base: Any = None,
        monotone: bool = False,
        note: str = "",
    ) -> int:
        """Draw an index by :func:`~dpstats.privacy.mechanisms.exponential_mechanism` and charge it.

        Parameters
        ----------
        mechanism : str
        scores : array_like
            Utility of each candidate; moves by at most ``sensitivity`` between
            replace-one neighbours.
        sensitivity : float
            Sensitivity of the scores (``> 0``).
        epsilon : float
            The mechanism is ``epsilon``-DP; the ledger records this epsilon.
        rng : Generator
        bound : {"bounded_range", "pure"}
            Required by a :class:`ZCDPAccountant`: the zCDP cost (:func:`em_rho`).
            A :class:`PureAccountant` charges ``epsilon`` and ignores it.
        log_base, monotone
            Passed to the mechanism (data-independent base measure; scores that
            all move the same way).
        note : str

        Returns
        -------
        int
            The index drawn.
        """
        if not (sensitivity > 0 and math.isfinite(sensitivity)):
            raise ValueError(f"sensitivity must be finite and > 0, got {sensitivity!r}")
        if not (epsilon > 0 and math.isfinite(epsilon)):
            raise ValueError(f"epsilon must be finite and > 0, got {epsilon!r}")
        self._em_charge(mechanism, float(epsilon), bound, note, float(sensitivity))
        return exponential_mechanism(scores, epsilon, sensitivity, rng, log_base=log_base, monotone=monotone)

    def measurement(
        self,
        mechanism: str,
        release: Callable[[np.random.Generator], T],
        *,
        epsilon: float,
        rng: np.random.Generator,
        delta: float = 0.0,
        sensitivity: float | None = None,
        scale: float | None = None,
        note: str = "",
    ) -> T:
        """Run a whole ``(epsilon, delta)``-DP mechanism that is proved as one unit, and charge it.

        For mechanisms whose privacy argument is not the sum of fixed-scale
        Gaussian, Laplace or exponential draws: a PrivTree (Laplace draws with
        a biased count, epsilon-DP as a whole), a propose-test-release whose
        test and release are analysed together (BHS), an exponential mechanism
        over data-dependent regions made private by a preceding test (TukeyEM).
        ``release(rng)`` is the mechanism: it must draw all of its randomness
        from the generator it is given, and it is called only after the charge
        is recorded, so a mechanism that exceeds the budget raises
        :class:`BudgetExceeded` without drawing. Like the other charging calls
        this is the one place where such a mechanism's noise meets its cost
        (and where a secure sampler or an audit plugs in).

        Parameters
        ----------
        mechanism : str
            Name of the ledger entry.
        release : callable
            ``release(rng) -> output``: the mechanism on the exact data.
        epsilon, delta : float
            The mechanism's privacy guarantee (``epsilon > 0``, ``delta >= 0``),
            which the docs page of the algorithm proves.
        rng : Generator
            The release's generator, handed to ``release``.
        sensitivity, scale : float, optional
            Recorded in the ledger for readers and audits (for example the
            count sensitivity and Laplace scale of a PrivTree); not used for
            the charge.
        note : str

        Returns
        -------
        The output of ``release(rng)``.

        Raises
        ------
        ValueError
            For an epsilon that is not finite and > 0 or a negative delta.
        TypeError
            For an accountant that cannot compose such a mechanism (zCDP and
            GDP take pure ``delta = 0`` mechanisms only, as ``epsilon^2 / 2``
            in zCDP; GDP none).
        """
        if not (epsilon > 0 and math.isfinite(epsilon)):
            raise ValueError(f"epsilon must be finite and > 0, got {epsilon!r}")
        if not (delta >= 0 and math.isfinite(delta)):
            raise ValueError(f"delta must be finite and >= 0, got {delta!r}")
        if sensitivity is not None:
            _check_sensitivity(sensitivity)
        self._measurement_charge(
            mechanism, float(epsilon), float(delta), note,
            None if sensitivity is None else float(sensitivity), None if scale is None else float(scale),
        )
        return release(rng)

    def _measurement_charge(
        self, mechanism: str, epsilon: float, delta: float, note: str,
        sensitivity: float | None, scale: float | None,
    ) -> None:
        raise TypeError(f"{type(self).__name__} cannot account for an (epsilon, delta) mechanism")

    def exhausted(self) -> bool:
        """True when the whole budget has been spent (to relative tolerance 1e-9)."""
        return abs(self.spent - self.capacity) <= _TOL * max(self.capacity, 1e-300)

    def achieved(self) -> tuple[float, float]:
        """The (epsilon, delta) that the ledger so far guarantees."""
        raise NotImplementedError  # pragma: no cover


@dataclass
class ZCDPAccountant(Accountant):
    """Account in zero-concentrated DP; the budget is ``rho = zcdp_rho(epsilon, delta)``.

    Examples
    --------
    >>> import numpy as np
    >>> acc = ZCDPAccountant(1.0, 1e-6)
    >>> rng = np.random.default_rng(0)
    >>> sigma = acc.gaussian_sigma(sensitivity=2.0, fraction=0.5)
    >>> noisy_sum = acc.gaussian("sum", 10.0, sensitivity=2.0, sigma=sigma, rng=rng)
    >>> round(acc.remaining / acc.rho, 12)
    0.5
    >>> acc.ledger[0].kind, acc.ledger[0].scale == sigma
    ('gaussian', True)
    """

    unit = "rho"

    def __post_init__(self) -> None:
        validate_budget(self.epsilon, self.delta)
        self._rho = zcdp_rho(self.epsilon, self.delta)

    @property
    def capacity(self) -> float:
        return self._rho

    @property
    def rho(self) -> float:
        return self._rho

    def gaussian_sigma(self, sensitivity: float, fraction: float) -> float:
        """Noise scale for a Gaussian mechanism that spends ``fraction`` of the total rho."""
        if not (0 < fraction <= 1 + _TOL):
            raise ValueError("fraction must lie in (0, 1]")
        return float(sensitivity / math.sqrt(2.0 * fraction * self._rho))

    def pure_epsilon(self, fraction: float) -> float:
        """Pure-DP epsilon whose zCDP cost ``eps^2/2`` is ``fraction`` of the *remaining* rho."""
        if not (0 < fraction <= 1 + _TOL):
            raise ValueError("fraction must lie in (0, 1]")
        return float(math.sqrt(2.0 * fraction * self.remaining))

    @staticmethod
    def em_rho(epsilon: float, *, bound: EMBound) -> float:
        """zCDP cost of an ``epsilon``-DP exponential mechanism (:func:`em_rho`)."""
        return em_rho(epsilon, bound=bound)

    @staticmethod
    def em_epsilon(rho: float, *, bound: EMBound) -> float:
        """Epsilon of an exponential mechanism costing ``rho`` (:func:`em_epsilon`)."""
        return em_epsilon(rho, bound=bound)

    def _gaussian_cost(self, sensitivity: float, sigma: float) -> float:
        return float(sensitivity**2 / (2.0 * sigma**2))

    def _gaussian_joint_cost(self, sens2: float) -> float:
        return float(sens2 / 2.0)

    def _laplace_charge(self, mechanism: str, epsilon: float, note: str, sensitivity: float, scale: float) -> None:
        self._charge(mechanism, epsilon**2 / 2.0, note, kind="laplace", sensitivity=sensitivity, scale=scale)

    def _em_charge(
        self, mechanism: str, epsilon: float, bound: EMBound | None, note: str, sensitivity: float
    ) -> None:
        if bound is None:
            raise ValueError("a zCDP accountant needs bound='bounded_range' or bound='pure' for an exponential mechanism")
        self._charge(mechanism, em_rho(epsilon, bound=bound), note, kind="exponential", sensitivity=sensitivity, scale=epsilon)

    def _measurement_charge(
        self, mechanism: str, epsilon: float, delta: float, note: str,
        sensitivity: float | None, scale: float | None,
    ) -> None:
        if delta != 0.0:
            raise TypeError("a zCDP accountant composes pure (delta = 0) mechanisms only: "
                            f"{mechanism} claims delta = {delta:g}")
        # an epsilon-DP mechanism is (epsilon^2 / 2)-zCDP (Bun and Steinke 2016, Prop. 1.4)
        self._charge(mechanism, epsilon**2 / 2.0, note, kind="measurement", sensitivity=sensitivity, scale=scale)

    def achieved(self) -> tuple[float, float]:
        return (zcdp_epsilon(self.spent, self.delta) if self.spent > 0 else 0.0, self.delta)


@dataclass
class GDPAccountant(Accountant):
    """Account in Gaussian DP for algorithms made only of Gaussian mechanisms.

    The budget is ``mu^2`` with ``mu = gdp_mu(epsilon, delta)``; Gaussian
    mechanisms compose as ``mu^2 = sum mu_i^2`` (Dong, Roth, Su 2022), which is
    tight, so this wastes nothing.
    """

    unit = "mu^2"

    def __post_init__(self) -> None:
        validate_budget(self.epsilon, self.delta)
        self._mu = gdp_mu(self.epsilon, self.delta)

    @property
    def capacity(self) -> float:
        return self._mu**2

    @property
    def mu(self) -> float:
        return self._mu

    def gaussian_sigma(self, sensitivity: float, fraction: float) -> float:
        """Noise scale for a Gaussian mechanism that spends ``fraction`` of the total mu^2."""
        if not (0 < fraction <= 1 + _TOL):
            raise ValueError("fraction must lie in (0, 1]")
        return float(sensitivity / (self._mu * math.sqrt(fraction)))

    def _gaussian_cost(self, sensitivity: float, sigma: float) -> float:
        return float((sensitivity / sigma) ** 2)

    def _gaussian_joint_cost(self, sens2: float) -> float:
        return float(sens2)

    def achieved(self) -> tuple[float, float]:
        mu = math.sqrt(self.spent)
        if mu == 0:
            return (0.0, 0.0)
        return (self.epsilon, gdp_delta(mu, self.epsilon))


@dataclass
class PureAccountant(Accountant):
    """Basic composition of (epsilon_i, delta_i) mechanisms: epsilons and deltas add.

    The ledger's cost is epsilon; delta spends are kept separately.
    """

    unit = "epsilon"
    delta_spent: float = 0.0

    def __post_init__(self) -> None:
        validate_budget(self.epsilon, self.delta)

    @property
    def capacity(self) -> float:
        return self.epsilon

    def _laplace_charge(self, mechanism: str, epsilon: float, note: str, sensitivity: float, scale: float) -> None:
        self._charge(mechanism, epsilon, note, kind="laplace", sensitivity=sensitivity, scale=scale)

    def _em_charge(
        self, mechanism: str, epsilon: float, bound: EMBound | None, note: str, sensitivity: float
    ) -> None:
        self._charge(mechanism, epsilon, note, kind="exponential", sensitivity=sensitivity, scale=epsilon)

    def _measurement_charge(
        self, mechanism: str, epsilon: float, delta: float, note: str,
        sensitivity: float | None, scale: float | None,
    ) -> None:
        if self.delta_spent + delta > self.delta * (1 + _TOL) + 1e-300:
            raise BudgetExceeded(f"{mechanism}: delta {delta:g} exceeds the remaining delta")
        self._charge(mechanism, epsilon, note, kind="measurement", sensitivity=sensitivity, scale=scale)
        self.delta_spent += delta

    def achieved(self) -> tuple[float, float]:
        return (self.spent, self.delta_spent)


