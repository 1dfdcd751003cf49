"""The benchmark's progress display: a bar on a terminal, otherwise a line at each quarter of the trials."""

from __future__ import annotations

import math
import sys
import time
from collections import Counter
from typing import Any, Callable

from dpstats.bench.model import STATUSES, TrialResult

__all__ = ["Progress", "format_seconds"]


def format_seconds(s: float) -> str:
    """``1h02m03s``, ``4m05s`` or ``6s`` (``?`` when not finite)."""
    if not math.isfinite(s):
        return "?"
    s = int(round(s))
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    return f"{h}h{m:02d}m{sec:02d}s" if h else (f"{m}m{sec:02d}s" if m else f"{sec}s")


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
        self.bar = None
        if bar and total:
            import tqdm

            tqdm.tqdm.monitor_interval = 0  # no monitor thread: workers are forked from this process
            self.bar = tqdm.tqdm(total=total, unit="trial", file=self.out, dynamic_ncols=True, smoothing=0.05,
                                 desc="bench")

    def update(self, r: TrialResult) -> None:
        self.done += 1
        self.counts[r.status] += 1
        if self.bar is not None:
            self.bar.update(1)
            if self.done % 10 == 0 or self.done == self.total:
                self.bar.set_postfix({s: self.counts[s] for s in STATUSES if self.counts[s]}, refresh=False)
            return
        while self.total and self.next_mark <= 3 and self.done >= self.next_mark * self.total / 4:
            el = time.monotonic() - self.t0
            left = el * (self.total - self.done) / max(self.done, 1)
            self.log(f"dpstats bench: {25 * self.next_mark}% ({self.done}/{self.total} trials) in {format_seconds(el)}, "
                     f"about {format_seconds(left)} left")
            self.next_mark += 1

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
