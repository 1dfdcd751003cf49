"""Where a release's randomness comes from.

A release's noise must be secret: by default it is drawn from fresh operating
system entropy. A ``seed`` makes the release reproducible by anyone who knows
it (the noise can then be subtracted), so it is for teaching and tests only
and passing one warns.

``secure=True`` draws the Gaussian and Laplace noise through OpenDP's vetted
samplers instead of numpy's floating-point ones (see :doc:`/privacy`):
:func:`release_generator` then returns a :class:`SecureGenerator`, a
:class:`numpy.random.Generator` whose ``normal``, ``standard_normal`` and
``laplace`` methods call OpenDP (``opendp.measurements.make_gaussian`` and
``make_laplace`` over vectors of floats), so every algorithm that draws its
noise from the ``rng`` it is given draws it securely without a change. Its
other methods (``uniform``, ``gumbel``, ``permutation``, ``integers``, ...)
are numpy's, on a bit generator seeded from fresh operating-system entropy.

OpenDP is an optional dependency (``pip install "dpstats[secure]"``),
imported on the first secure draw, never by ``import dpstats``.

Examples
--------
>>> from dpstats.privacy.randomness import release_generator
>>> rng = release_generator(secure=True)  # doctest: +SKIP
>>> rng.normal(0.0, [1.0, 2.0], size=(3, 2)).shape  # doctest: +SKIP
(3, 2)
>>> release_generator(seed=1, secure=True)
Traceback (most recent call last):
...
ValueError: seed must be None with secure=True: a secure generator draws fresh operating-system entropy and cannot be seeded (got seed=1)
"""

from __future__ import annotations

import functools
import operator
import warnings
from typing import Any

import numpy as np

from dpstats.privacy.accounting import PrivacyLeakWarning

__all__ = ["SECURE_METHODS", "SecureGenerator", "opendp_available", "release_generator", "require_opendp"]

#: the Generator methods a :class:`SecureGenerator` draws through OpenDP
SECURE_METHODS = ("normal", "standard_normal", "laplace")

#: the pinned OpenDP release (``dpstats[secure]``)
OPENDP_VERSION = "0.14.1"

#: OpenDP measurements kept (one per distinct kind, scale and float type; they hold no randomness)
_CACHE_SIZE = 256

_OPENDP: Any = None


def require_opendp() -> Any:
    """Import OpenDP, enable its ``contrib`` feature, and return ``opendp.prelude``.

    Only ``contrib`` is enabled (OpenDP's float Gaussian and Laplace
    measurements need it); ``floating-point``, which OpenDP requires for the
    float *transformations* that Mironov-type attacks threaten, is not needed
    and not enabled. The feature flag is process-wide in OpenDP.

    Raises
    ------
    ImportError
        OpenDP is not installed.
    """
    global _OPENDP
    if _OPENDP is None:
        try:
            import opendp.prelude as dp
        except ImportError as exc:  # pragma: no cover - opendp is in the dev extra
            raise ImportError(
                f"secure=True needs OpenDP: pip install \"dpstats[secure]\" (opendp=={OPENDP_VERSION})"
            ) from exc
        dp.enable_features("contrib")
        _OPENDP = dp
    return _OPENDP


def opendp_available() -> bool:
    """Whether OpenDP can be imported (without importing it)."""
    import importlib.util

    return importlib.util.find_spec("opendp") is not None


@functools.lru_cache(maxsize=_CACHE_SIZE)
def _measurement(kind: str, scale: float, T: str) -> Any:
    """OpenDP's vector measurement adding ``kind`` noise of ``scale`` to a list of ``T`` floats.

    Gaussian: ``make_gaussian`` over ``vector_domain(atom_domain(T))`` with the
    ``l2_distance``; Laplace: ``make_laplace`` with the ``l1_distance``. The
    noise granularity ``k`` is OpenDP's default, the finest of the float type
    (``2^-1074`` for float64). The measurement draws from the operating
    system's entropy at every call, so sharing it between generators is safe.
    """
    dp = require_opendp()
    domain = dp.vector_domain(dp.atom_domain(T=T, nan=False))
    if kind == "gaussian":
        return dp.m.make_gaussian(domain, dp.l2_distance(T=T), scale=scale)
    return dp.m.make_laplace(domain, dp.l1_distance(T=T), scale=scale)


def _shape_of(size: Any) -> tuple[int, ...]:
    if isinstance(size, (tuple, list, np.ndarray)):
        return tuple(operator.index(s) for s in size)
    return (operator.index(size),)


def _params(name: str, value: Any) -> np.ndarray:
    arr = np.asarray(value, dtype=np.float64)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite for a secure draw, got {value!r}")
    return arr


class SecureGenerator(np.random.Generator):
    """A numpy Generator whose Gaussian and Laplace draws come from OpenDP.

    ``normal(loc, scale, size)``, ``standard_normal(size, dtype, out)`` and
    ``laplace(loc, scale, size)`` take numpy's arguments, broadcast ``loc``
    and ``scale`` arrays against each other and ``size`` as numpy does, and
    return numpy's types and shapes (a Python ``float`` for scalar
    parameters without ``size``). Each draw is OpenDP's sample of
    ``loc + Z`` with ``Z ~ N(0, scale^2)`` or ``Laplace(0, scale)``, computed
    exactly (noise on the grid ``2^-1074 Z``, the finest there is for
    float64, so ``loc`` is not rounded) and rounded once to the nearest
    float, with randomness from the operating system. One OpenDP call draws
    every element of the same scale (one call per array when ``scale`` is a
    scalar). ``scale = 0`` returns ``loc`` as numpy does.

    Everything else (``uniform``, ``gumbel``, ``permutation``, ``integers``,
    ``choice``, ...) is numpy's own, on a PCG64 bit generator seeded with
    fresh operating-system entropy. The generator cannot be seeded; a copy
    (``copy.deepcopy``, pickling) or :meth:`spawn` gives new, independent
    secure generators and never copies the state.

    Differences from numpy: non-finite ``loc`` or ``scale`` is a
    ``ValueError`` (numpy returns NaN or inf), and a draw whose exact value
    exceeds the largest float64 saturates at it instead of overflowing.

    Raises
    ------
    ImportError
        OpenDP is not installed (``pip install "dpstats[secure]"``).
    """

    def __init__(self) -> None:
        super().__init__(np.random.PCG64(np.random.SeedSequence()))
        require_opendp()

    def __repr__(self) -> str:
        return "SecureGenerator(OpenDP noise, PCG64 from fresh OS entropy)"

    __str__ = __repr__

    def __reduce__(self) -> tuple[Any, tuple[()]]:  # type: ignore[override]  # rebuilt fresh, not from state
        # a copy or an unpickled generator is a fresh one: the secret state never travels
        return (SecureGenerator, ())

    def __deepcopy__(self, memo: dict[int, Any]) -> SecureGenerator:
        return SecureGenerator()

    def __copy__(self) -> SecureGenerator:
        return SecureGenerator()

    def spawn(self, n_children: int) -> list[SecureGenerator]:  # type: ignore[override]  # children are secure
        """``n_children`` new, independent secure generators."""
        return [SecureGenerator() for _ in range(operator.index(n_children))]

    def _draw(self, kind: str, loc: Any, scale: Any, size: Any, T: str = "f64") -> Any:
        loc_a = _params("loc", loc)
        scale_a = _params("scale", scale)
        if np.any(scale_a < 0):
            raise ValueError("scale < 0")
        if size is None:
            shape = np.broadcast_shapes(loc_a.shape, scale_a.shape)
            scalar = shape == ()
        else:
            shape, scalar = _shape_of(size), False
            try:
                full = np.broadcast_shapes(loc_a.shape, scale_a.shape, shape)
            except ValueError:
                full = None
            if full != shape:
                raise ValueError(f"shape mismatch: loc {loc_a.shape} and scale {scale_a.shape} "
                                 f"cannot be broadcast to size {shape}")
        L = np.broadcast_to(loc_a, shape).ravel()
        S = np.broadcast_to(scale_a, shape).ravel()
        out = np.empty(L.size, dtype=np.float64)
        if L.size:
            scales = np.unique(S)
            for s in scales:
                idx = slice(None) if scales.size == 1 else np.flatnonzero(S == s)  # noqa: SIM300 (S is an array)
                if s == 0.0:
                    out[idx] = L[idx]
                else:
                    out[idx] = _measurement(kind, float(s), T)(L[idx].tolist())
        if scalar:
            return float(out[0])
        return out.reshape(shape)

    # -- numpy's API --------------------------------------------------------
    def normal(self, loc: Any = 0.0, scale: Any = 1.0, size: Any = None) -> Any:
        """Gaussian draws ``N(loc, scale^2)`` through OpenDP (``scale`` is the standard deviation).

        Parameters
        ----------
        loc, scale : float or array_like of floats
            Finite; ``scale >= 0``.
        size : int or tuple of ints, optional
            Output shape; by default the broadcast shape of ``loc`` and ``scale``.

        Returns
        -------
        float or ndarray
        """
        return self._draw("gaussian", loc, scale, size)

    def laplace(self, loc: Any = 0.0, scale: Any = 1.0, size: Any = None) -> Any:
        """Laplace draws (density ``exp(-|x - loc| / scale) / (2 scale)``) through OpenDP.

        Parameters
        ----------
        loc, scale : float or array_like of floats
            Finite; ``scale >= 0``.
        size : int or tuple of ints, optional
            Output shape; by default the broadcast shape of ``loc`` and ``scale``.

        Returns
        -------
        float or ndarray
        """
        return self._draw("laplace", loc, scale, size)

    def standard_normal(self, size: Any = None, dtype: Any = np.float64, out: np.ndarray | None = None) -> Any:
        """Standard Gaussian draws through OpenDP (float32 ones are rounded once, to float32).

        Parameters
        ----------
        size : int or tuple of ints, optional
        dtype : {float64, float32}
        out : ndarray, optional
            Filled in place and returned; its dtype must be ``dtype``.

        Returns
        -------
        float or ndarray
        """
        dt = np.dtype(dtype)
        if dt not in (np.dtype(np.float64), np.dtype(np.float32)):
            raise TypeError(f"Unsupported dtype {dt!r} for standard_normal")
        T = "f64" if dt == np.float64 else "f32"
        if out is not None:
            if not isinstance(out, np.ndarray):
                raise TypeError("out must be a numpy array")
            if out.dtype != dt:
                raise TypeError(f"Supplied output array has the wrong type. Expected {dt}, got {out.dtype}")
            if size is not None and _shape_of(size) != out.shape:
                raise ValueError("size must match out.shape when used together")
            out[...] = self._draw("gaussian", 0.0, 1.0, out.shape, T)
            return out
        x = self._draw("gaussian", 0.0, 1.0, size, T)
        if isinstance(x, float) or dt == np.float64:
            return x
        return x.astype(np.float32)


def release_generator(seed: int | None = None, *, secure: bool = False) -> np.random.Generator:
    """The random generator of one release.

    Parameters
    ----------
    seed : int or None
        ``None`` (the default) draws fresh entropy from the operating system.
        An integer makes the release reproducible and warns with
        :class:`~dpstats.privacy.accounting.PrivacyLeakWarning`.
    secure : bool
        Draw Gaussian and Laplace noise with OpenDP's samplers: returns a
        :class:`SecureGenerator`, which cannot be seeded.

    Returns
    -------
    numpy.random.Generator

    Raises
    ------
    ValueError
        ``secure=True`` with a ``seed``.
    ImportError
        ``secure=True`` without OpenDP installed.
    """
    if secure:
        if seed is not None:
            raise ValueError(
                "seed must be None with secure=True: a secure generator draws fresh operating-system entropy "
                f"and cannot be seeded (got seed={seed!r})"
            )
        return SecureGenerator()
    if seed is not None:
        warnings.warn(
            "a fixed seed makes the release reproducible: anyone who knows the seed can remove the noise. "
            "Keep it secret, and use seed=None (the default) for anything you publish.",
            PrivacyLeakWarning,
            stacklevel=3,
        )
    return np.random.default_rng(seed)
