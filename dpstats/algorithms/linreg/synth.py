"""Synthesize, then regress: ``synth_<synthesizer>`` for every DP synthesizer (linreg, and sce by coefficient_of).

The least-squares coefficients of the outcome on the design, computed on a
DP synthetic copy of the instance's variables; see
:mod:`dpstats.algorithms._synth_estimate` for the steps and the privacy
argument (post-processing of the synthesizer's release).
"""

from __future__ import annotations

from dpstats.algorithms._synth_estimate import make_classes
from dpstats.algorithms.registry import coefficient_of, register

CLASSES = [register(cls) for cls in make_classes("linreg")]
SCE_CLASSES = [coefficient_of(cls) for cls in CLASSES]
for _lin, _sce in zip(CLASSES, SCE_CLASSES, strict=True):
    _sce.opt_in = _lin.opt_in

__all__ = ["CLASSES", "SCE_CLASSES"]
