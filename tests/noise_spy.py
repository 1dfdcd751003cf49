"""A numpy Generator that records every draw an algorithm makes.

Calibration tests run the algorithm itself with a :class:`RecordingGenerator`
as its ``rng`` and compare the noise scales actually drawn with the
sensitivities derived on the algorithm's docs page. The generator draws exactly
what ``numpy.random.default_rng(seed)`` draws (it *is* a Generator on the same
bit generator), so a recorded run gives the same release as an ordinary one.

Examples
--------
>>> rng = RecordingGenerator(0)
>>> _ = rng.normal(0.0, 2.5, size=3)
>>> [(d.method, d.scale, d.count) for d in rng.draws]
[('normal', 2.5, 3)]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["Draw", "RecordingGenerator"]

# positional parameter names of the recorded methods (numpy's signatures)
_SIGNATURES: dict[str, tuple[str, ...]] = {
    "normal": ("loc", "scale", "size"),
    "laplace": ("loc", "scale", "size"),
    "gumbel": ("loc", "scale", "size"),
    "standard_normal": ("size", "dtype", "out"),
    "uniform": ("low", "high", "size"),
    "exponential": ("scale", "size"),
    "integers": ("low", "high", "size", "dtype", "endpoint"),
    "choice": ("a", "size", "replace", "p", "axis", "shuffle"),
    "permutation": ("x", "axis"),
    "multinomial": ("n", "pvals", "size"),
    "random": ("size", "dtype", "out"),
}
_DEFAULT_SCALE = {"normal": 1.0, "laplace": 1.0, "gumbel": 1.0, "standard_normal": 1.0, "exponential": 1.0}


@dataclass(frozen=True)
class Draw:
    """One call of a Generator method: its name, bound arguments and how many values it returned."""

    method: str
    args: dict[str, Any]
    count: int

    @property
    def scale(self) -> float | None:
        """The scale parameter (standard deviation for ``normal``), ``None`` for methods without one."""
        if self.method not in _DEFAULT_SCALE:
            return None
        return float(np.max(np.asarray(self.args.get("scale", _DEFAULT_SCALE[self.method]), dtype=float)))


class RecordingGenerator(np.random.Generator):
    """``numpy.random.default_rng(seed)`` that logs each call in :attr:`draws`."""

    def __init__(self, seed: int) -> None:
        super().__init__(np.random.PCG64(seed))
        self.draws: list[Draw] = []

    def of(self, *methods: str) -> list[Draw]:
        """The recorded draws of the given methods, in order."""
        return [d for d in self.draws if d.method in methods]

    def noise(self) -> list[Draw]:
        """The Gaussian and Laplace draws (``normal``, ``standard_normal``, ``laplace``)."""
        return self.of("normal", "standard_normal", "laplace")


def _recorded(name: str):
    base = getattr(np.random.Generator, name)
    params = _SIGNATURES[name]

    def method(self: RecordingGenerator, *args: Any, **kwargs: Any) -> Any:
        out = base(self, *args, **kwargs)
        bound = dict(zip(params, args))
        bound.update(kwargs)
        self.draws.append(Draw(name, bound, int(np.size(out))))
        return out

    method.__name__ = name
    method.__doc__ = f"Recorded ``Generator.{name}``."
    return method


for _name in _SIGNATURES:
    setattr(RecordingGenerator, _name, _recorded(_name))
