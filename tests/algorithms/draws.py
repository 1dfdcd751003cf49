"""Releases of a corpus instance as the coverage benchmark draws them (shared by the interval-validity tests)."""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Iterator
from dataclasses import replace
from typing import Any

import numpy as np

from dpstats.algorithms import get
from dpstats.bench.inference import inference_problem, resample
from dpstats.bench.model import Problem
from dpstats.data.corpus import Corpus


def truth(iid: str) -> np.ndarray:
    """The population value of a public corpus instance (its full-data OLS coefficient or mean)."""
    return inference_problem(Corpus.public().instance(iid)).truth


def interval_releases(task: str, algorithm: str, iid: str, eps: float, seeds: Iterable[int],
                      rng_key: int | None = None, independent: bool = False, **override: Any) -> Iterator[Any]:
    """Per seed ``s``: resample the instance (``resample(instance, s)``) and release with the method's
    ``interval_params`` (``override`` on top) and ``default_rng(s)``, as ``dpstats bench --inference`` does
    (``default_rng([s, rng_key])`` with ``rng_key``, for draws found by a scan with other release seeds).
    ``independent``: the facts name no sampling clusters, so the method treats the rows as independent (for
    tests of what a design does apart from its clustering)."""
    inst = Corpus.public().instance(iid)
    cls = get(task, algorithm)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for s in seeds:
            pr = Problem.from_instance(resample(inst, s))
            facts = replace(pr.facts, cluster=None) if independent else pr.facts
            rng = np.random.default_rng(s if rng_key is None else [s, rng_key])
            yield cls(**{**cls.interval_params, **override}).run(pr.data, facts, eps, 1e-6, rng)
