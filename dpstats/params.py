"""Hyperparameter defaults with their sources, shared by the estimators and the synthesizers.

:class:`Param` sits at the bottom of the layers (beside :mod:`dpstats.errors`)
so that :mod:`dpstats.algorithms.base` and :mod:`dpstats.synth.base` use one
class without the synthesizers importing the algorithms above them.

Examples
--------
>>> Param(0.1, "Tao et al. (2021), Section 4").to_dict()
{'value': 0.1, 'source': 'Tao et al. (2021), Section 4'}
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

__all__ = ["Param", "Configurable"]


@dataclass(frozen=True)
class Param:
    """A default hyperparameter and where it comes from."""

    value: Any
    source: str

    def to_dict(self) -> dict[str, Any]:
        return {"value": self.value, "source": self.source}


class Configurable:
    """Hyperparameters from the class's :attr:`defaults`, overridden by keyword (estimators and synthesizers).

    Examples
    --------
    >>> class Demo(Configurable):
    ...     defaults = {"k": Param(3, "ours")}
    >>> Demo(k=5).params, repr(Demo(k=5)), repr(Demo())
    ({'k': 5}, 'Demo(k=5)', 'Demo()')
    """

    defaults: ClassVar[dict[str, Param]] = {}

    def __init__(self, **params: Any) -> None:
        unknown = sorted(set(params) - set(self.defaults))
        if unknown:
            raise TypeError(
                f"{type(self).__name__}: unknown hyperparameter(s) {unknown}; "
                f"known: {sorted(self.defaults)}"
            )
        self.params: dict[str, Any] = {k: p.value for k, p in self.defaults.items()}
        self.params.update(params)

    def __repr__(self) -> str:
        changed = {k: v for k, v in self.params.items() if self.defaults[k].value != v}
        args = ", ".join(f"{k}={v!r}" for k, v in changed.items())
        return f"{type(self).__name__}({args})"

