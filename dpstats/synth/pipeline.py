"""Synthesize a table of values: validate, discretise (privately), synthesize, decode.

:func:`synthesize_frame` makes one accountant for the whole budget; the
discretiser (PrivTree) is charged first, and the synthesizer spends what
remains, so the ledger of the result covers every access to the data.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from dpstats.privacy.accounting import Accountant
from dpstats.synth.base import DiscreteData, Synthesizer, Synthetic
from dpstats.synth.discretize import DISCRETIZERS, EqualWidth, PrivTree, encode
from dpstats.synth.schema import Schema

__all__ = ["SynthesisResult", "synthesize_frame", "make_discretizer"]


def make_discretizer(name: str, **params: Any) -> EqualWidth | PrivTree:
    """A discretiser by name (``"privtree"`` or ``"equal_width"``)."""
    try:
        cls = DISCRETIZERS[name]
    except KeyError:
        raise KeyError(f"unknown discretizer {name!r}; known: {', '.join(DISCRETIZERS)}") from None
    out: EqualWidth | PrivTree = cls(**params)
    return out


@dataclass(frozen=True)
class SynthesisResult:
    """Synthetic values and the coded tables (private input and synthetic output share codings)."""

    frame: pd.DataFrame
    synthetic: Synthetic
    real: DiscreteData


def synthesize_frame(df: pd.DataFrame, schema: Schema, synthesizer: Synthesizer, epsilon: float, delta: float,
                     rng: np.random.Generator, *, discretizer: EqualWidth | PrivTree | None = None,
                     n_rows: int | None = None, file: str | None = None,
                     accountant: Accountant | None = None) -> SynthesisResult:
    """Synthesize ``df`` under the public ``schema`` with an (epsilon, delta) budget.

    Parameters
    ----------
    df : DataFrame
        The private data (checked against ``schema``; bad values raise
        :class:`~dpstats.synth.schema.SchemaError` naming ``file`` and column).
    schema : Schema
    synthesizer : Synthesizer
    epsilon, delta : float
    rng : Generator
    discretizer : EqualWidth or PrivTree, optional
        Default :class:`PrivTree` (its share of the budget) when there are
        numeric columns.
    n_rows : int, optional
    file : str, optional
        Named in error messages.
    accountant : Accountant, optional
        The accountant of the whole ``(epsilon, delta)`` budget, of the
        synthesizer's type; it may already hold other spends of the same
        release (e.g. privately estimated ranges), and the discretiser and the
        synthesizer then spend what remains. Default: a new one.
    """
    df = schema.validate(df, file=file)
    if accountant is not None:
        # before the discretiser spends from it: a wrong type is refused with nothing charged or drawn
        synthesizer.check_accountant(accountant)
    acc = synthesizer.accountant(epsilon, delta) if accountant is None else accountant
    disc = discretizer if discretizer is not None else PrivTree()
    edges = disc.edges(df, schema, acc, rng)
    real = encode(df, schema, edges, file=file)
    syn = synthesizer.synthesize(real, epsilon, delta, rng, n_rows, accountant=acc)
    return SynthesisResult(syn.data.decode(rng), syn, real)
