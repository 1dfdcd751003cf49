"""Synthesize, then average: ``synth_<synthesizer>`` for every DP synthesizer (mean task).

The column means of a DP synthetic copy of the instance's mean columns; see
:mod:`dpstats.algorithms._synth_estimate` for the steps and the privacy
argument (post-processing of the synthesizer's release).
"""

from __future__ import annotations

from dpstats.algorithms._synth_estimate import make_classes
from dpstats.algorithms.registry import register

CLASSES = [register(cls) for cls in make_classes("mean")]

__all__ = ["CLASSES"]
