"""Differentially private synthetic data (Tao, McKenna, Hay, Machanavajjhala, Miklau 2021).

* :mod:`dpstats.synth.schema` -- public schemas (levels, bounds, label);
* :mod:`dpstats.synth.base` -- :class:`Domain`, :class:`DiscreteData`, the
  :class:`Synthesizer` base class;
* :mod:`dpstats.synth.discretize` -- equal-width and PrivTree discretisers,
  decoding, one-hot encoding;
* :mod:`dpstats.synth.workload` -- the paper's workloads;
* :mod:`dpstats.synth.pipeline` -- validate, discretise, synthesize, decode;
* :mod:`dpstats.synth.datasets` -- Bank, Shopping (shipped), Adult, Census,
  Mushroom (fetched by ``scripts/setup.sh``);
* :mod:`dpstats.synth.mechanisms` -- the synthesizers.

This package is a layer between :mod:`dpstats.algorithms` (whose
synthesize-then-estimate algorithms use it) and :mod:`dpstats.ols` /
:mod:`dpstats.data`; the benchmark behind ``dpstats synth bench``, the
paper's metrics and figures are in :mod:`dpstats.bench.synth`.

Registry
--------
:data:`SYNTHESIZERS` is a plain table ``name -> "module:Class"``; a module is
imported only when its synthesizer is asked for (:func:`get_synthesizer`).
Mechanism modules import heavy dependencies (torch, jax, mbi) inside
functions, never at module level, so :func:`list_synthesizers` stays light.
A new synthesizer is a module in :mod:`dpstats.synth.mechanisms` and a line
below.

Examples
--------
>>> "independent" in SYNTHESIZERS
True
>>> get_synthesizer("independent").family
'baseline'
"""

from __future__ import annotations

import importlib
from typing import Any

from dpstats.synth.base import DiscreteData, Domain, Synthesizer, Synthetic
from dpstats.synth.schema import Column, Schema, SchemaError

__all__ = [
    "SYNTHESIZERS",
    "get_synthesizer",
    "list_synthesizers",
    "Schema",
    "Column",
    "SchemaError",
    "Domain",
    "DiscreteData",
    "Synthesizer",
    "Synthetic",
]

#: name -> "module:Class", in listing order.
SYNTHESIZERS: dict[str, str] = {
    "independent": "dpstats.synth.mechanisms.independent:Independent",
    "mst": "dpstats.synth.mechanisms.mst:MST",
    "aim": "dpstats.synth.mechanisms.aim:AIM",
    "mwem_pgm": "dpstats.synth.mechanisms.mwem_pgm:MWEMPGM",
    "privbayes": "dpstats.synth.mechanisms.privbayes:PrivBayes",
    "dpgan": "dpstats.synth.mechanisms.dpgan:DPGAN",
    "dpctgan": "dpstats.synth.mechanisms.dpctgan:DPCTGAN",
    "pategan": "dpstats.synth.mechanisms.pategan:PATEGAN",
    "patectgan": "dpstats.synth.mechanisms.patectgan:PATECTGAN",
    "ron_gauss": "dpstats.synth.mechanisms.ron_gauss:RONGauss",
    "fem": "dpstats.synth.mechanisms.fem:FEM",
    "rap": "dpstats.synth.mechanisms.rap:RAP",
    "kamino": "dpstats.synth.mechanisms.kamino:Kamino",
}


def get_synthesizer(name: str) -> type[Synthesizer]:
    """The synthesizer class registered as ``name`` (imports its module).

    Raises
    ------
    KeyError
        For an unknown name, listing the known ones.
    """
    try:
        target = SYNTHESIZERS[name]
    except KeyError:
        raise KeyError(f"unknown mechanism {name!r}; known: {', '.join(SYNTHESIZERS)}") from None
    module, _, cls = target.partition(":")
    out: type[Synthesizer] = getattr(importlib.import_module(module), cls)
    return out


def list_synthesizers() -> list[dict[str, Any]]:
    """Metadata of every registered synthesizer (never imports torch or jax)."""
    return [get_synthesizer(n).metadata() for n in SYNTHESIZERS]
