"""Discrete data and the interface every DP synthesizer implements.

A synthesizer works on :class:`DiscreteData`: every column coded as integers
``0..k-1`` over a public :class:`Domain` (column -> number of cells), with a
:class:`Coding` per column that maps codes back to values (the categorical
levels, or the cell edges of a discretised numeric column). It is configured
once and then run::

    result = synth.synthesize(data, epsilon, delta, rng)      # a Synthetic
    result.data                                               # DiscreteData, same domain
    result.ledger                                             # the accountant's spends

Contract for subclasses
-----------------------
Implement :meth:`Synthesizer._synthesize` ``(data, accountant, rng, n_rows)``
and return a :class:`DiscreteData` over ``data.domain``. ``accountant`` is
an instance of the class's declared ``accountant`` type: :meth:`synthesize`
creates one, or refuses a given accountant of another type, so the
mechanism's calibration (rho under zCDP, epsilon under pure DP) always
reads the unit it was written for. It must

* draw all randomness from ``rng``;
* pay for every access to ``data.codes`` through ``accountant`` (a
  :mod:`dpstats.privacy.accounting` accountant), in its charging calls
  (``gaussian``, ``laplace``, ``exponential``, ``measurement``), which draw
  the noise from ``rng`` and charge exactly the scale they draw;
* spend exactly ``accountant.remaining`` *as found on entry* (the accountant
  may already hold a discretiser's spend, see :func:`synthesize_frame`);
  :meth:`synthesize` checks that the ledger is exhausted at the end;
* use only public facts besides: the domain, ``n`` (replace-one neighbours,
  ``n`` public) and the hyperparameters.

Neighbouring relation: replace one row (as everywhere in dpstats). A count
vector over any partition then changes by ``-1`` in one cell and ``+1`` in
another: L1 sensitivity 2, L2 sensitivity ``sqrt(2)``.

Families (:data:`FAMILIES`)
---------------------------
``marginal`` (MST, AIM, MWEM-PGM, PrivBayes), ``GAN``, ``workload`` (FEM,
RAP), ``baseline`` (Independent) and ``other``, as in Tao et al. (2021).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from dpstats.params import Configurable, Param
from dpstats.privacy.accounting import Accountant, PrivacyLeakWarning, Spend, ZCDPAccountant, validate_budget

__all__ = [
    "FAMILIES",
    "INTERPRETATIONS",
    "Param",
    "Domain",
    "Coding",
    "DiscreteData",
    "Synthetic",
    "Synthesizer",
    "PrivacyLeakWarning",
]

FAMILIES: dict[str, str] = {
    "marginal": "fits a model to noisy low-dimensional marginals (MST, AIM, MWEM-PGM, PrivBayes)",
    "GAN": "generative adversarial network trained with DP-SGD or PATE",
    "workload": "optimises a synthetic table against a query workload (FEM, RAP)",
    "baseline": "noisy 1-way marginals sampled independently",
    "other": "any other approach",
}

#: Interpretation classes, as for the estimators (:mod:`dpstats.algorithms.base`).
INTERPRETATIONS: dict[str, str] = {
    "standard": "full (epsilon, delta)-DP argument using only the public schema and n",
    "data-bounds": "domain (levels, ranges) read from the data without privacy (not DP)",
    "data-hyperparameters": "hyperparameters chosen on the same data without privacy (not DP)",
    "reference-code": "follows a reference implementation whose accounting overspends (not the stated DP)",
}


@dataclass(frozen=True)
class Domain:
    """Column names and their number of cells, in order.

    Examples
    --------
    >>> d = Domain(("a", "b"), (3, 2))
    >>> d["b"], d.size(), d.project(["b"])
    (2, 6, Domain(names=('b',), shape=(2,)))
    """

    names: tuple[str, ...]
    shape: tuple[int, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "names", tuple(str(n) for n in self.names))
        object.__setattr__(self, "shape", tuple(int(k) for k in self.shape))
        if len(self.names) != len(self.shape):
            raise ValueError("Domain: names and shape differ in length")
        if len(set(self.names)) != len(self.names):
            raise ValueError("Domain: repeated column name")
        if any(k < 1 for k in self.shape):
            raise ValueError("Domain: every column needs at least one cell")

    @classmethod
    def from_dict(cls, sizes: Mapping[str, int]) -> Domain:
        return cls(tuple(sizes), tuple(sizes.values()))

    def to_dict(self) -> dict[str, int]:
        return dict(zip(self.names, self.shape, strict=True))

    def __getitem__(self, name: str) -> int:
        return self.shape[self.names.index(name)]

    def __contains__(self, name: object) -> bool:
        return name in self.names

    def __iter__(self) -> Iterator[str]:
        return iter(self.names)

    def __len__(self) -> int:
        return len(self.names)

    def project(self, names: Sequence[str]) -> Domain:
        """The domain of the columns ``names``, in that order."""
        return Domain(tuple(names), tuple(self[n] for n in names))

    def size(self, names: Sequence[str] | None = None) -> int:
        """Number of cells of the (projected) domain."""
        return int(math.prod(self.shape if names is None else [self[n] for n in names]))


@dataclass(frozen=True)
class Coding:
    """How one column's codes map back to values.

    A categorical column has ``levels`` (code ``i`` is ``levels[i]``). A
    numeric column has cell ``edges`` (``k + 1`` increasing numbers, code ``i``
    is the cell ``[edges[i], edges[i+1])``, the last cell closed); decoding
    draws uniformly within the cell, rounding for ``integer`` columns.
    """

    name: str
    levels: tuple[Any, ...] | None = None
    edges: tuple[float, ...] | None = None
    integer: bool = False

    def __post_init__(self) -> None:
        if (self.levels is None) == (self.edges is None):
            raise ValueError(f"Coding {self.name!r}: give exactly one of levels or edges")
        if self.edges is not None:
            e = np.asarray(self.edges, dtype=float)
            if e.size < 2 or np.any(np.diff(e) < 0) or not np.all(np.isfinite(e)):
                raise ValueError(f"Coding {self.name!r}: edges must be >= 2 finite non-decreasing numbers")

    @property
    def size(self) -> int:
        return len(self.levels) if self.levels is not None else len(self.edges or ()) - 1

    @property
    def categorical(self) -> bool:
        return self.levels is not None

    def decode(self, codes: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Values for ``codes``: the level, or a uniform draw within the cell (post-processing)."""
        codes = np.asarray(codes, dtype=np.int64)
        if self.levels is not None:
            lv = np.empty(len(self.levels), dtype=object)
            lv[:] = list(self.levels)
            out: np.ndarray = lv[codes]
            return out
        e = np.asarray(self.edges, dtype=float)
        lo, hi = e[codes], e[codes + 1]
        if self.integer:
            # integers in the cell: [lo, hi) except the last cell which includes hi
            ilo = np.ceil(lo)
            last = codes == len(e) - 2
            ihi = np.where(last, np.floor(hi), np.ceil(hi) - 1)
            ihi = np.maximum(ihi, ilo)
            ints: np.ndarray = (ilo + np.floor(rng.random(codes.size) * (ihi - ilo + 1))).astype(np.int64)
            return ints
        vals: np.ndarray = lo + rng.random(codes.size) * (hi - lo)
        return vals


@dataclass(frozen=True)
class DiscreteData:
    """A table coded as integers ``0..k-1`` per column over a :class:`Domain`.

    Attributes
    ----------
    codes : ndarray of int64, shape (n, d)
    domain : Domain
    codings : tuple of Coding
        One per column, same order; maps codes back to values.
    """

    codes: np.ndarray
    domain: Domain
    codings: tuple[Coding, ...] = ()

    def __post_init__(self) -> None:
        codes = np.asarray(self.codes)
        if codes.ndim != 2 or codes.shape[1] != len(self.domain):
            raise ValueError(f"DiscreteData: codes must have shape (n, {len(self.domain)}), got {codes.shape}")
        codes = codes.astype(np.int64, copy=False)
        if codes.size and (codes.min() < 0 or np.any(codes.max(axis=0) >= np.asarray(self.domain.shape))):
            raise ValueError("DiscreteData: a code lies outside its column's domain")
        object.__setattr__(self, "codes", codes)
        if self.codings and (tuple(c.name for c in self.codings) != self.domain.names
                             or tuple(c.size for c in self.codings) != self.domain.shape):
            raise ValueError("DiscreteData: codings do not match the domain")

    @property
    def n(self) -> int:
        return int(self.codes.shape[0])

    def column(self, name: str) -> np.ndarray:
        return self.codes[:, self.domain.names.index(name)]

    def project(self, names: Sequence[str]) -> DiscreteData:
        idx = [self.domain.names.index(n) for n in names]
        cod = tuple(self.codings[i] for i in idx) if self.codings else ()
        return DiscreteData(self.codes[:, idx], self.domain.project(names), cod)

    def marginal(self, names: Sequence[str]) -> np.ndarray:
        """Counts over the cells of ``names`` (an array of shape ``domain.project(names).shape``)."""
        dom = self.domain.project(names)
        idx = [self.domain.names.index(n) for n in names]
        flat = np.ravel_multi_index(tuple(self.codes[:, i] for i in idx), dom.shape) if self.n else np.zeros(0, int)
        return np.bincount(flat, minlength=dom.size()).reshape(dom.shape).astype(float)

    def with_codes(self, codes: np.ndarray) -> DiscreteData:
        """Other rows over the same domain and codings (e.g. the synthetic table)."""
        return DiscreteData(codes, self.domain, self.codings)

    def decode(self, rng: np.random.Generator) -> pd.DataFrame:
        """The table of values: levels, or uniform draws within numeric cells."""
        if not self.codings:
            raise ValueError("DiscreteData.decode: no codings")
        return pd.DataFrame({c.name: c.decode(self.codes[:, j], rng) for j, c in enumerate(self.codings)})


@dataclass(frozen=True)
class Synthetic:
    """The result of :meth:`Synthesizer.synthesize`.

    Attributes
    ----------
    data : DiscreteData
        The synthetic rows, over the input's domain.
    epsilon, delta : float
        The budget the whole ledger guarantees (from the accountant).
    ledger : tuple of Spend
        Every spend, discretiser's included.
    details : mapping
        Diagnostics computed from released quantities only.
    """

    data: DiscreteData
    epsilon: float
    delta: float
    ledger: tuple[Spend, ...] = ()
    details: Mapping[str, Any] = field(default_factory=dict)


class Synthesizer(Configurable, ABC):
    """Base class of every DP synthesizer (see the module docstring for the contract).

    Class attributes
    ----------------
    name : str
        Registry name (lower case, e.g. ``"mst"``).
    citation : str
        The paper the mechanism comes from.
    interpretation : str
        One of :data:`INTERPRETATIONS`.
    family : str
        One of :data:`FAMILIES`.
    summary : str
        One line for listings.
    defaults : dict of str to Param
        Default hyperparameters with their sources.
    accountant : type
        The accountant :meth:`synthesize` creates when none is given
        (:class:`~dpstats.privacy.accounting.ZCDPAccountant` by default),
        and the type a given accountant must be an instance of.
    needs_numbers : bool
        The mechanism wants one-hot / numeric input (GANs); it then calls
        :func:`dpstats.synth.discretize.one_hot` itself.
    """

    name: ClassVar[str] = ""
    citation: ClassVar[str] = ""
    interpretation: ClassVar[str] = "standard"
    family: ClassVar[str] = "other"
    summary: ClassVar[str] = ""
    defaults: ClassVar[dict[str, Param]] = {}
    accountant: ClassVar[type[Accountant]] = ZCDPAccountant
    needs_numbers: ClassVar[bool] = False

    @classmethod
    def metadata(cls) -> dict[str, Any]:
        """Name, family, citation, interpretation, summary and defaults (for listings)."""
        return {
            "name": cls.name,
            "family": cls.family,
            "citation": cls.citation,
            "interpretation": cls.interpretation,
            "summary": cls.summary,
            "defaults": {k: p.to_dict() for k, p in cls.defaults.items()},
        }

    def synthesize(self, data: DiscreteData, epsilon: float, delta: float, rng: np.random.Generator,
                   n_rows: int | None = None, *, accountant: Accountant | None = None) -> Synthetic:
        """Synthesize ``n_rows`` rows (default ``data.n``) under an (epsilon, delta) budget.

        Parameters
        ----------
        data : DiscreteData
            The private table, coded over a public domain.
        epsilon, delta : float
            The total budget; when ``accountant`` is given it must be that
            budget's accountant (it may already hold other spends, e.g.
            PrivTree's), and the synthesizer spends what remains.
        rng : numpy.random.Generator
            The only source of randomness.
        n_rows : int, optional
        accountant : Accountant, optional
            An instance of the class's ``accountant`` type.

        Returns
        -------
        Synthetic

        Raises
        ------
        TypeError
            When ``accountant`` is not an instance of the class's
            ``accountant`` type.
        RuntimeError
            When the synthesizer leaves part of its budget unspent or returns
            rows outside the domain (a bug, never silently accepted).
        """
        validate_budget(epsilon, delta)
        if self.interpretation != "standard":
            import warnings

            warnings.warn(f"{self.name}: interpretation {self.interpretation!r}: "
                          f"{INTERPRETATIONS.get(self.interpretation, '')}", PrivacyLeakWarning, stacklevel=2)
        if accountant is None:
            accountant = self.accountant(epsilon, delta)
        else:
            self.check_accountant(accountant)
            if (accountant.epsilon, accountant.delta) != (epsilon, delta):
                raise ValueError("synthesize: the accountant's budget differs from (epsilon, delta)")
        n_out = data.n if n_rows is None else int(n_rows)
        if n_out < 0:
            raise ValueError(f"n_rows must be >= 0, got {n_rows!r}")
        self.details: dict[str, Any] = {}
        out = self._synthesize(data, accountant, rng, n_out)
        if not isinstance(out, DiscreteData) or out.domain != data.domain:
            raise RuntimeError(f"{self.name}: synthetic data must be DiscreteData over the input's domain")
        if out.n != n_out:
            raise RuntimeError(f"{self.name}: returned {out.n} rows, asked for {n_out}")
        if not accountant.exhausted():
            raise RuntimeError(f"{self.name}: spent {accountant.spent:.6g} of {accountant.capacity:.6g} "
                               f"{accountant.unit}; a synthesizer must spend exactly its budget")
        if not out.codings and data.codings:
            out = data.with_codes(out.codes)
        eps, dlt = accountant.achieved()
        return Synthetic(out, float(eps), float(dlt), tuple(accountant.ledger), dict(self.details))

    @classmethod
    def check_accountant(cls, accountant: Accountant) -> None:
        """Refuse an accountant that is not an instance of the class's declared ``accountant`` type.

        The mechanisms calibrate in the unit of their declared accountant
        (rho under zCDP, epsilon under pure DP, RDP curves for DP-SGD); an
        accountant of another type would read ``remaining`` in the wrong
        unit or lack the charging call the mechanism needs.

        Raises
        ------
        TypeError
            Naming the synthesizer, the expected type and the type given.
        """
        if not isinstance(accountant, cls.accountant):
            raise TypeError(f"{cls.name or cls.__name__}: the accountant must be an instance of "
                            f"{cls.accountant.__name__} (the synthesizer's accountant type), "
                            f"got {type(accountant).__name__}")

    @abstractmethod
    def _synthesize(self, data: DiscreteData, accountant: Accountant, rng: np.random.Generator,
                    n_rows: int) -> DiscreteData:
        """Spend ``accountant.remaining`` on ``data`` and return ``n_rows`` synthetic rows.

        ``accountant`` is an instance of the class's ``accountant`` type
        (:meth:`synthesize` has checked it).

        Diagnostics (from released quantities only) go into ``self.details``.
        """
