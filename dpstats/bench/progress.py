"""The benchmark's progress display: a bar on a terminal, otherwise a line at each quarter of the trials."""

from __future__ import annotations

import math
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from dpstats.bench.model import STATUSES, TrialResult

__all__ = ["Progress", "format_seconds", "seconds_left"]


def format_seconds(s: float) -> str:
    """``1h02m03s``, ``4m05s`` or ``6s`` (``?`` when not finite)."""
    if not math.isfinite(s):
        return "?"
    s = int(round(s))
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    return f"{h}h{m:02d}m{sec:02d}s" if h else (f"{m}m{sec:02d}s" if m else f"{sec}s")


def seconds_left(elapsed: float, done: int, total: int, running: list[float], limit: float, workers: int) -> float:
    """Expected seconds until ``total`` trials are done, counting the running ones against their limit.

    The mean seconds of a trial on one worker is ``elapsed * workers / done``.
    A running trial younger than that mean is expected to take the rest of it;
    one older has shown itself slow, and may run to the per-trial ``limit``,
    so it counts ``limit`` minus its age. The estimate is the larger of the
    work left spread over the workers and the longest single running trial
    (the run cannot end before it). ``inf`` before any trial is done.
    """
    if done <= 0:
        return math.inf
    mean = elapsed * max(workers, 1) / done
    rest = [mean - e if e < mean else max(limit - e, 0.0) for e in running]
    queued = max(total - done - len(running), 0)
    return max((queued * mean + sum(rest)) / max(workers, 1), max(rest, default=0.0))


class Progress:
    """A tqdm bar drawn on ``out`` (a terminal); otherwise a line to ``log`` at 25 %, 50 % and 75 %."""

    def __init__(self, total: int, bar: bool, log: Callable[[str], None], out: Any = None) -> None:
        self.total = total
        self.done = 0
        self.counts: Counter[str] = Counter()
        self.log = log
        self.out = out or sys.stderr
        self.t0 = time.monotonic()
        self.next_mark = 1
        self.running_now: list[float] = []
        self.seconds: list[float] = []
        self.limit = math.inf
        self.workers = 1
        self.waiting_said = False
        self.bar = None
        if bar and total:
            import tqdm

            tqdm.tqdm.monitor_interval = 0  # no monitor thread: workers are forked from this process
            self.bar = tqdm.tqdm(total=total, unit="trial", file=self.out, dynamic_ncols=True, smoothing=0.05,
                                 desc="bench")

    def update(self, r: TrialResult) -> None:
        self.done += 1
        self.counts[r.status] += 1
        self.seconds.append(float(r.seconds))
        if self.bar is not None:
            self.bar.update(1)
            if self.done % 10 == 0 or self.done == self.total:
                self.bar.set_postfix({s: self.counts[s] for s in STATUSES if self.counts[s]}, refresh=False)
            return
        while self.total and self.next_mark <= 3 and self.done >= self.next_mark * self.total / 4:
            el = time.monotonic() - self.t0
            left = seconds_left(el, self.done, self.total, self.running_now, self.limit, self.workers)
            self.log(f"dpstats bench: {25 * self.next_mark}% ({self.done}/{self.total} trials) in {format_seconds(el)}, "
                     f"about {format_seconds(left)} left")
            self.next_mark += 1

    def running(self, seconds: list[float], limit: float, workers: int) -> None:
        """The ages of the trials running now (local workers), for the estimate and the wait notice.

        When every trial has started and one has run three times as long as the
        median finished trial (and a quarter of the limit, or 10 s), the display
        says so once: the run is waiting on it, for at most the rest of its
        ``limit``.
        """
        self.running_now, self.limit, self.workers = list(seconds), float(limit), int(workers)
        if self.waiting_said or not seconds or self.done <= 0 or self.done + len(seconds) < self.total:
            return
        oldest = max(seconds)
        if oldest < max(min(10.0, limit / 4.0), 3.0 * statistics.median(self.seconds)):
            return
        self.waiting_said = True
        line = (f"waiting on {len(seconds)} running trial{'s' if len(seconds) > 1 else ''}, the longest at "
                f"{format_seconds(oldest)} of the {limit:g} s limit (at most {format_seconds(max(limit - oldest, 0.0))} "
                f"more)")
        if self.bar is not None:
            self.bar.write(f"bench: {line}", file=self.out)
        else:
            self.log(f"dpstats bench: {self.done}/{self.total} trials done; {line}")

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
