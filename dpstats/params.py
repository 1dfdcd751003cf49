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
from typing import Any

__all__ = ["Param"]


@dataclass(frozen=True)
class Param:
    """A default hyperparameter and where it comes from."""

    value: Any
    source: str

    def to_dict(self) -> dict[str, Any]:
        return {"value": self.value, "source": self.source}
