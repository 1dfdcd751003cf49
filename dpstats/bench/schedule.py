"""The order in which the benchmark hands out its jobs: longest first, from the times of earlier runs.

A run ends when its slowest worker does; jobs handed out in corpus order
leave the long ones to the end, with one worker idle. :class:`CostModel`
estimates each job's seconds from the trials a results file already holds
(or, for a fresh run, another run's file: ``dpstats bench --costs-from``),
and :func:`order_jobs` sorts the plan by that estimate (longest first, ties
in plan order). The rows a run stores, and what a resumed run skips, do not
depend on the order.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from dpstats.bench.sandbox import Job
from dpstats.bench.store import Store, read_costs

__all__ = ["CostModel", "order_jobs"]


@dataclass(frozen=True)
class CostModel:
    """Expected seconds of a job, from the trials of earlier runs.

    Attributes
    ----------
    seconds : mapping
        Mean stored seconds per trial of each ``(algorithm, task, instance,
        epsilon)`` (:meth:`~dpstats.bench.store.Store.trial_seconds`).
    sizes : mapping
        ``n * d`` of each instance an earlier run loaded
        (:meth:`~dpstats.bench.store.Store.instance_sizes`).
    """

    seconds: Mapping[tuple[str, str, str, float], float] = field(default_factory=dict)
    sizes: Mapping[str, int] = field(default_factory=dict)

    @classmethod
    def from_store(cls, store: Store, inference: bool = False) -> CostModel:
        """The costs recorded in a results file (its coverage trials with ``inference``)."""
        return cls(store.trial_seconds(inference), store.instance_sizes())

    @classmethod
    def from_file(cls, path: str, inference: bool = False) -> CostModel:
        """The costs recorded in another run's results file, opened read-only."""
        seconds, sizes = read_costs(path, inference)
        return cls(seconds, sizes)

    def merged(self, fallback: CostModel) -> CostModel:
        """These costs, with ``fallback``'s where these know nothing of a key."""
        return CostModel({**fallback.seconds, **self.seconds}, {**fallback.sizes, **self.sizes})

    def _rates(self) -> tuple[dict[tuple[str, str], float], float | None]:
        """Median seconds per unit of ``n * d``: per ``(algorithm, task)`` and over all of them."""
        by: dict[tuple[str, str], list[float]] = {}
        for (a, t, i, _), sec in self.seconds.items():
            size = self.sizes.get(i)
            if size:
                by.setdefault((a, t), []).append(sec / size)
        every = [r for rs in by.values() for r in rs]
        return {k: statistics.median(v) for k, v in by.items()}, (statistics.median(every) if every else None)

    def job_seconds(self, jobs: Sequence[Job]) -> list[float]:
        """Expected seconds of each job (``inf`` when nothing is known of it).

        A trial's expected seconds are, in this order of preference: the stored
        mean at the job's epsilon; the mean of the stored means at the other
        epsilons; the instance's ``n * d`` times the median seconds per unit of
        ``n * d`` of the algorithm (of every algorithm when it has none; the
        ``n * d`` itself when no trial is stored). A job's are its trials'
        times its number of trials.
        """
        rates, overall = self._rates()
        by_instance: dict[tuple[str, str, str], list[float]] = {}
        for (a, t, i, _), sec in self.seconds.items():
            by_instance.setdefault((a, t, i), []).append(sec)
        out = []
        for job in jobs:
            a, t, i = job.algorithm.name, job.algorithm.task, job.instance
            eps = float(job.trials[0][0]) if job.trials else math.nan
            per: float
            if (a, t, i, eps) in self.seconds:
                per = self.seconds[(a, t, i, eps)]
            elif (a, t, i) in by_instance:
                per = statistics.fmean(by_instance[(a, t, i)])
            elif i in self.sizes:
                rate = rates.get((a, t), overall)
                per = self.sizes[i] * (1.0 if rate is None else rate)
            else:
                per = math.inf
            out.append(per * len(job.trials))
        return out


def order_jobs(jobs: Sequence[Job], costs: CostModel) -> list[Job]:
    """The jobs by expected seconds (:meth:`CostModel.job_seconds`), longest first; ties keep their order."""
    expected = costs.job_seconds(jobs)
    order = sorted(range(len(jobs)), key=lambda k: -expected[k])
    return [jobs[k] for k in order]
