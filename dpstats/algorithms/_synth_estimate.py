"""Synthesize, then estimate: every DP synthesizer as an algorithm of the sce, linreg and mean tasks.

For each row of :data:`dpstats.synth.SYNTHESIZERS` there is an algorithm
``synth_<name>`` of each task (linreg and mean in
:mod:`dpstats.algorithms.linreg.synth` and :mod:`dpstats.algorithms.mean.synth`;
the sce one is the linreg one's coefficient, :func:`~dpstats.algorithms.coefficient_of`).
A run

1. builds a **public schema** of the instance's variables from its public
   facts: a constant column (the intercept; public bounds ``lo == hi``) is left
   out and put back afterwards; the 0/1 dummies of one categorical term
   (``C(state)[T.ARIZONA]``, ...) become one categorical variable whose levels
   are the term's base level and its dummies (treatment coding makes them
   mutually exclusive by construction); every other column (and the outcome)
   is numeric on its public bounds from the manifest;
2. **pays for the bounds that are not public** (``range_share`` of the
   budget, split equally over those columns): a private median cell and a
   private quantile of the deviations from it
   (:func:`~dpstats.algorithms.linreg._private_ranges.private_center_halfwidth`, two
   exponential mechanisms of sensitivity 1), giving ``centre +- halfwidth``
   with the half-width about ``range_sd`` standard deviations for normal
   data; values outside a column's range are clipped to it (row by row);
3. **synthesizes** ``n`` rows with the synthesizer through
   :func:`dpstats.synth.pipeline.synthesize_frame` on the same accountant:
   PrivTree discretises the numeric columns with its own share
   (``privtree_share``) or ``equal_width`` cells cost nothing, the synthesizer
   spends exactly what remains, and the synthetic codes are decoded back to
   values (uniform within cells);
4. **estimates** on the synthetic rows: the least-squares coefficients of
   the outcome on the rebuilt design (:func:`numpy.linalg.lstsq`; the
   minimum-norm solution when the synthetic design is rank deficient), or the
   column means.

Privacy: steps 2 and 3 are the only accesses to the data, composed on one
accountant of the synthesizer's type (zCDP, or pure DP for PrivBayes) that
spends exactly the budget; the schema uses public facts only (``n``, ``d``,
the column names, the manifest bounds, the dummies); the clipping is a
row-wise map with public or already released ranges; step 4 is
post-processing of the synthetic table. The release is as private as the
synthesizer's release (its interpretation class is the synthesizer's).

Declines (before any spend, from public facts): more variables than
``max_columns``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from dpstats.algorithms.base import Algorithm, Outcome, Param, PublicFacts, TaskData
from dpstats.algorithms.linreg._private_ranges import POSITIVE_GRID, private_center_halfwidth, scale_quantile
from dpstats.privacy.accounting import Accountant, ZCDPAccountant, em_epsilon
from dpstats.synth import SYNTHESIZERS, get_synthesizer
from dpstats.synth.pipeline import make_discretizer, synthesize_frame
from dpstats.synth.schema import Column, Schema

__all__ = ["SynthEstimate", "Variable", "plan_variables", "make_classes", "PREFIX", "LIGHT", "SKIPPED"]

#: registry names are ``synth_<synthesizer>``
PREFIX = "synth_"

#: a dummy of a single categorical term in statsmodels/patsy naming: ``C(x)[T.level]`` (no interaction)
_DUMMY = re.compile(r"^(?P<term>[^:\[\]]+)\[T\.(?P<level>[^\]]*)\]$")

#: synthesizers whose synthesize-then-estimate algorithms are listed (run by ``dpstats bench`` and the
#: registry-wide tests) by default: measured on the quick preset, every trial well within the 60 s
#: (at most 2.3 s). The others are opt-in (``list_algorithms(opt_in=True)``; ``--algorithm synth_mst``):
#: JAX (MST, AIM, MWEM-PGM, RAP: seconds per run, mostly compilation), torch (the GANs), RON-GAUSS
#: (timed out at 60 s on the 18,790 rows of mm_nhis at epsilon 10), and any new row until measured.
LIGHT: frozenset[str] = frozenset({"independent", "privbayes"})

#: synthesizer rows whose module could not be imported (no algorithm made), with the reason
SKIPPED: dict[str, str] = {}

#: the name of the base level of a grouped categorical term
BASE_LEVEL = "(base)"


@dataclass(frozen=True)
class Variable:
    """One variable of the synthetic table and the design columns it stands for.

    ``kind`` is ``"constant"`` (value ``bounds[0]``, not synthesized),
    ``"categorical"`` (``columns`` are the term's dummies; level ``i > 0`` sets
    ``columns[i - 1]``) or ``"numeric"`` (one column; ``bounds`` public, or
    ``None`` when they must be paid for).
    """

    name: str
    kind: str
    columns: tuple[int, ...]
    bounds: tuple[float, float] | None = None
    levels: tuple[str, ...] = ()


def plan_variables(facts: PublicFacts, with_outcome: bool) -> list[Variable]:
    """The variables of the synthetic table, from public facts only.

    The outcome (when ``with_outcome``) is the last variable, with column
    index ``facts.d``.
    """
    bounds = dict(facts.bounds)
    dummies = set(facts.dummies) if not facts.weighted else set()
    groups: dict[str, list[tuple[int, str]]] = {}
    out: list[Variable] = []
    placed: dict[str, int] = {}
    for j, col in enumerate(facts.columns):
        b = bounds.get(col)
        if b is not None and float(b[0]) == float(b[1]):
            out.append(Variable(col, "constant", (j,), (float(b[0]), float(b[1]))))
            continue
        m = _DUMMY.match(col) if col in dummies else None
        if m is not None:
            term = m.group("term")
            if term not in placed:
                placed[term] = len(out)
                out.append(Variable(term, "categorical", ()))  # filled below
                groups[term] = []
            groups[term].append((j, m.group("level")))
            continue
        if col in dummies:
            out.append(Variable(col, "categorical", (j,), levels=("0", "1")))
            continue
        fb = (float(b[0]), float(b[1])) if b is not None and all(math.isfinite(float(v)) for v in b) else None
        out.append(Variable(col, "numeric", (j,), fb))
    for term, members in groups.items():
        out[placed[term]] = Variable(term, "categorical", tuple(j for j, _ in members),
                                     levels=(BASE_LEVEL,) + tuple(f"{lv}" for _, lv in members))
    if with_outcome:
        name = facts.outcome or "y"
        b = facts.outcome_bounds()
        fb = (float(b[0]), float(b[1])) if b is not None and all(math.isfinite(float(v)) for v in b) else None
        if fb is not None and fb[0] == fb[1]:
            out.append(Variable(name, "constant", (facts.d,), fb))
        else:
            out.append(Variable(name, "numeric", (facts.d,), fb))
    # names must be unique in the schema
    seen: set[str] = set()
    uniq = []
    for v in out:
        name = v.name
        while name in seen:
            name += "_"
        seen.add(name)
        uniq.append(v if name == v.name else Variable(name, v.kind, v.columns, v.bounds, v.levels))
    return uniq


def _table(Z: np.ndarray, variables: list[Variable]) -> dict[str, Any]:
    """The private values of each synthesized variable (categorical: level labels)."""
    cols: dict[str, Any] = {}
    for v in variables:
        if v.kind == "categorical":
            if v.levels == ("0", "1"):
                cols[v.name] = np.where(Z[:, v.columns[0]] > 0.5, "1", "0")
            else:
                block = Z[:, list(v.columns)] > 0.5
                # level 0 (base) when no dummy is set; the first set dummy otherwise (exclusive by construction)
                idx = np.where(block.any(axis=1), block.argmax(axis=1) + 1, 0)
                lv = np.asarray(v.levels, dtype=object)
                cols[v.name] = lv[idx]
        elif v.kind == "numeric":
            cols[v.name] = Z[:, v.columns[0]]
    return cols


def _rebuild(frame: pd.DataFrame, variables: list[Variable], width: int) -> np.ndarray:
    """The synthetic design (and outcome) matrix from the synthetic table."""
    out = np.zeros((len(frame), width))
    for v in variables:
        if v.kind == "constant":
            out[:, v.columns[0]] = v.bounds[0] if v.bounds else 0.0
        elif v.kind == "numeric":
            out[:, v.columns[0]] = frame[v.name].to_numpy(dtype=float)
        elif v.levels == ("0", "1"):
            out[:, v.columns[0]] = (frame[v.name].astype(str).to_numpy() == "1").astype(float)
        else:
            codes = pd.Categorical(frame[v.name].astype(str), categories=list(v.levels)).codes
            rows = np.flatnonzero(codes > 0)  # level i > 0 sets column columns[i - 1] to 1; the others stay 0
            out[rows, np.asarray(v.columns)[codes[rows] - 1]] = 1.0
    return out


def _em_epsilon(acc: Accountant, cost: float) -> float:
    """Epsilon of an exponential mechanism that costs ``cost`` in the accountant's unit."""
    if isinstance(acc, ZCDPAccountant):
        return em_epsilon(cost, bound="bounded_range")
    return cost


class SynthEstimate(Algorithm):
    """Synthesize the instance's variables with a DP synthesizer, then estimate on the synthetic rows.

    The concrete classes (one per synthesizer and task) are made by
    :func:`make_classes`; see the module docstring for the steps and the
    privacy argument.
    """

    synthesizer: ClassVar[str] = ""
    #: the synthesizer's hyperparameters: exposed name -> the synthesizer's name (``<synth>_<name>`` on a clash)
    synth_params: ClassVar[dict[str, str]] = {}
    #: not listed by default (``list_algorithms(opt_in=True)``), run by name: see :data:`LIGHT`
    opt_in: ClassVar[bool] = False
    common_defaults: ClassVar[dict[str, Param]] = {
        "discretizer": Param("privtree", "Tao et al. (2021), Section 4: PrivTree for numeric attributes"),
        "privtree_share": Param(0.1, "dpstats.synth.discretize.PrivTree default (10% of the budget)"),
        "range_share": Param(0.2, "dpstats choice: 20% of the budget for the ranges that are not public"),
        "range_sd": Param(4.0, "dpstats choice: half-width of a paid range, in normal standard deviations"),
        "max_columns": Param(25, "dpstats choice: larger tables decline (synthesis time within the 60 s trial)"),
    }
    public_details: ClassVar[dict[str, str]] = {
        "synthesizer": "public fact: the registry name of the synthesizer (fixed by the algorithm)",
        "variables": "public fact: the number of synthesized variables, from the column names and dummies",
        "paid_ranges": "public fact: the columns without public bounds (from the manifest)",
    }

    def _run(self, data: TaskData, facts: PublicFacts, epsilon: float, delta: float,
             rng: np.random.Generator) -> Outcome:
        with_y = self.task != "mean"
        variables = plan_variables(facts, with_y)
        synthesized = [v for v in variables if v.kind != "constant"]
        if len(synthesized) > int(self.params["max_columns"]):
            return self.decline(f"{len(synthesized)} variables to synthesize, more than max_columns = "
                                f"{self.params['max_columns']}", variables=len(synthesized))
        if not synthesized:
            return self.decline("no variable to synthesize (every column is constant)", variables=0)
        syn_params = {orig: self.params[k] for k, orig in self.synth_params.items()}
        synth = get_synthesizer(self.synthesizer)(**syn_params)
        acc = synth.accountant(epsilon, delta)
        Z = np.column_stack([data.X, data.y]) if with_y and data.y is not None else data.X
        # 2. ranges that are not public: paid, range_share of the capacity split over those columns
        missing = [v for v in synthesized if v.kind == "numeric" and v.bounds is None]
        ranges: dict[str, tuple[float, float]] = {}
        c: float | Column  # a paid centre below, then a schema column in the clipping loop
        if missing:
            share = float(self.params["range_share"])
            if not 0 < share < 1 or share + (float(self.params["privtree_share"])
                                             if self.params["discretizer"] == "privtree" else 0.0) >= 1:
                raise ValueError("range_share (and privtree_share) must leave part of the budget to the synthesizer")
            eps_em = _em_epsilon(acc, share * acc.capacity / (2 * len(missing)))
            q = scale_quantile(facts.n, eps_em, grid_size=POSITIVE_GRID.size)
            for v in missing:
                c, h = private_center_halfwidth(Z[:, v.columns[0]], acc, v.name, eps_em, eps_em, rng, q,  # type: ignore[arg-type]
                                                k_sd=float(self.params["range_sd"]))
                ranges[v.name] = (c - h, c + h) if h > 0 else (c, c)
        cols: list[Column] = []
        kept: list[Variable] = []
        for v in variables:
            if v.kind == "categorical":
                cols.append(Column(v.name, "categorical", levels=v.levels))
                kept.append(v)
            elif v.kind == "numeric":
                lo, hi = v.bounds if v.bounds is not None else ranges[v.name]
                if lo == hi:  # a paid range of width zero: the column is that constant
                    kept.append(Variable(v.name, "constant", v.columns, (lo, hi)))
                    continue
                cols.append(Column(v.name, "numeric", bounds=(lo, hi)))
                kept.append(Variable(v.name, v.kind, v.columns, (lo, hi)))
            else:
                kept.append(v)
        if not cols:  # every variable has a paid range of width zero: nothing left to synthesize
            return self.decline("every variable is constant on its paid range", acc,
                                variables=0, paid_ranges=len(missing))
        table = _table(Z, kept)
        for c in cols:
            if not c.categorical:
                lo, hi = c.bounds  # type: ignore[misc]
                table[c.name] = np.clip(table[c.name], lo, hi)
        df = pd.DataFrame(table, columns=[c.name for c in cols])
        schema = Schema(tuple(cols), None, True, f"instance {facts.instance}")
        disc = make_discretizer(str(self.params["discretizer"]),
                                **({"share": float(self.params["privtree_share"])}
                                   if self.params["discretizer"] == "privtree" else {}))
        res = synthesize_frame(df, schema, synth, epsilon, delta, rng, discretizer=disc, n_rows=facts.n,
                               file=f"instance {facts.instance}", accountant=acc)
        W = _rebuild(res.frame, kept, Z.shape[1])  # constants (intercept, width-zero ranges) put back
        if with_y:
            Xs, ys = W[:, :facts.d], W[:, facts.d]
            est = np.linalg.lstsq(Xs, ys, rcond=None)[0]
        else:
            est = W.mean(axis=0)
        return self.release(est, acc, synthesizer=self.synthesizer, variables=len(cols), paid_ranges=len(missing))


def make_classes(task: str) -> list[type[SynthEstimate]]:
    """One :class:`SynthEstimate` class of ``task`` per registered synthesizer (imports their light modules)."""
    out = []
    for name in SYNTHESIZERS:
        try:
            syn = get_synthesizer(name)
        except ImportError as exc:  # a registry row whose module cannot be imported: left out, said why
            SKIPPED[name] = f"{type(exc).__name__}: {exc}"
            continue
        defaults = dict(SynthEstimate.common_defaults)
        synth_params: dict[str, str] = {}
        for k, p in syn.defaults.items():
            exposed = k if k not in defaults else f"{name}_{k}"
            defaults[exposed], synth_params[exposed] = p, k
        stat = "least-squares coefficients" if task == "linreg" else "column means"
        cls = type(
            f"Synth{syn.__name__}{task.capitalize()}",
            (SynthEstimate,),
            {
                "name": PREFIX + name,
                "task": task,
                "synthesizer": name,
                "synth_params": synth_params,
                "citation": syn.citation or "Tao, McKenna, Hay, Machanavajjhala, Miklau (2021)",
                "interpretation": syn.interpretation,
                "summary": f"{stat} on a DP synthetic copy of the instance's variables by {name} "
                           f"({syn.family} synthesizer)",
                "defaults": defaults,
                "opt_in": name not in LIGHT,
                "__module__": f"dpstats.algorithms.{task}.synth",
                "__doc__": f"Synthesize with :class:`{syn.__module__}.{syn.__name__}`, then compute the {stat}.",
            },
        )
        out.append(cls)
    return out
