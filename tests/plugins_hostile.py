"""Test algorithms for the benchmark runner, loaded as plugins (``tests.plugins_hostile:Name``).

Well-behaved ones (fast, seeded, of every task) and hostile ones that hang,
exhaust memory, abort or segfault the interpreter, raise, or return NaN or an
estimate of the wrong shape. They are NOT private: they only exercise the
harness.
"""

from __future__ import annotations

import ctypes
import os
import time

import numpy as np

from dpstats.algorithms import Algorithm, Decline, Param, Release

CITE = "dpstats test suite"


class _TestAlgorithm(Algorithm):
    citation = CITE
    interpretation = "data-bounds"
    summary = "harness test algorithm (not private)"

    def release_of(self, est, epsilon, delta):
        return Release(estimate=np.atleast_1d(np.asarray(est, dtype=float)), epsilon=epsilon, delta=delta)


def _ols(data):
    beta, *_ = np.linalg.lstsq(data.X, data.y, rcond=None)
    return beta


# --------------------------------------------------------------------------
# well-behaved
# --------------------------------------------------------------------------


class NoisyMean(_TestAlgorithm):
    """Sample mean plus N(0, (sd / (eps sqrt n))^2) noise per coordinate."""

    name = "test_noisy_mean"
    task = "mean"

    def _run(self, data, facts, epsilon, delta, rng):
        sd = data.X.std(axis=0) + 1e-12
        return self.release_of(data.X.mean(axis=0) + rng.normal(size=data.d) * sd / (epsilon * np.sqrt(data.n)),
                               epsilon, delta)


class NoisyOLS(_TestAlgorithm):
    """OLS plus noise proportional to the coefficients' scale."""

    name = "test_noisy_ols"
    task = "linreg"

    def _run(self, data, facts, epsilon, delta, rng):
        beta = _ols(data)
        return self.release_of(beta + rng.normal(size=data.d) * (np.abs(beta) + 1e-3) / (10 * epsilon),
                               epsilon, delta)


class NoisyCoef(_TestAlgorithm):
    """The OLS coefficient of interest plus noise; declines for seed draws below 0.1 at epsilon < 0.5."""

    name = "test_noisy_coef"
    task = "sce"

    def _run(self, data, facts, epsilon, delta, rng):
        if epsilon < 0.5 and rng.uniform() < 0.1:
            return Decline("test decline")
        b = _ols(data)[facts.coef_index]
        return self.release_of([b + rng.normal() * (abs(b) + 1e-3) / (10 * epsilon)], epsilon, delta)


class SlowMean(NoisyMean):
    """NoisyMean after sleeping ``pause`` seconds (for interrupting a run)."""

    name = "test_slow_mean"
    defaults = {"pause": Param(0.05, "test")}

    def _run(self, data, facts, epsilon, delta, rng):
        time.sleep(self.params["pause"])
        return super()._run(data, facts, epsilon, delta, rng)


class BusyMean(NoisyMean):
    """NoisyMean after ``work`` seconds of pure-CPU work (no BLAS; for speed measurements)."""

    name = "test_busy_mean"
    defaults = {"work": Param(0.1, "test")}

    def _run(self, data, facts, epsilon, delta, rng):
        end = time.process_time() + self.params["work"]
        x = 0
        while time.process_time() < end:
            for i in range(2000):
                x += i * i
        return super()._run(data, facts, epsilon, delta, rng)


class MutatesInput(_TestAlgorithm):
    """Writes into its input data (the harness gives read-only arrays)."""

    name = "test_mutates_input"
    task = "mean"

    def _run(self, data, facts, epsilon, delta, rng):
        data.X[0, 0] = 0.0
        return self.release_of(data.X.mean(axis=0), epsilon, delta)


# --------------------------------------------------------------------------
# hostile
# --------------------------------------------------------------------------


class SleepForever(_TestAlgorithm):
    name = "test_sleep_forever"
    task = "mean"

    def _run(self, data, facts, epsilon, delta, rng):
        while True:
            time.sleep(3600)


class MemoryHog(_TestAlgorithm):
    """Allocates and fills 10 GB at once."""

    name = "test_memory_hog"
    task = "mean"

    def _run(self, data, facts, epsilon, delta, rng):
        big = np.ones(10 * 1024**3 // 8)
        return self.release_of(np.full(data.d, big[0]), epsilon, delta)


class GradualHog(_TestAlgorithm):
    """Allocates 10 GB in 32 MB blocks, touching each (caught by the resident-memory watch)."""

    name = "test_gradual_hog"
    task = "mean"

    def _run(self, data, facts, epsilon, delta, rng):
        blocks = []
        for _ in range(10 * 1024 // 32):
            blocks.append(np.ones(32 * 1024**2 // 8))
            time.sleep(0.002)
        return self.release_of(np.zeros(data.d), epsilon, delta)


class Aborts(_TestAlgorithm):
    name = "test_aborts"
    task = "mean"

    def _run(self, data, facts, epsilon, delta, rng):
        os.abort()


class Segfaults(_TestAlgorithm):
    name = "test_segfaults"
    task = "mean"

    def _run(self, data, facts, epsilon, delta, rng):
        ctypes.string_at(0)


class HardExit(_TestAlgorithm):
    name = "test_hard_exit"
    task = "mean"

    def _run(self, data, facts, epsilon, delta, rng):
        os._exit(3)


class Raises(_TestAlgorithm):
    name = "test_raises"
    task = "mean"

    def _run(self, data, facts, epsilon, delta, rng):
        raise RuntimeError(f"boom at epsilon={epsilon}")


class ReturnsNaN(_TestAlgorithm):
    name = "test_returns_nan"
    task = "mean"

    def _run(self, data, facts, epsilon, delta, rng):
        return self.release_of(np.full(data.d, np.nan), epsilon, delta)


class WrongShape(_TestAlgorithm):
    name = "test_wrong_shape"
    task = "mean"

    def _run(self, data, facts, epsilon, delta, rng):
        return self.release_of(np.zeros(data.d + 2), epsilon, delta)


class WrongShapeRun(_TestAlgorithm):
    """Overrides ``run`` itself, so only the harness checks the shape."""

    name = "test_wrong_shape_run"
    task = "sce"

    def run(self, data, facts, epsilon, delta, rng):
        return self.release_of(np.zeros(3), epsilon, delta)

    def _run(self, data, facts, epsilon, delta, rng):  # pragma: no cover - never called
        raise AssertionError


class ReturnsNone(_TestAlgorithm):
    name = "test_returns_none"
    task = "mean"

    def run(self, data, facts, epsilon, delta, rng):
        return None

    def _run(self, data, facts, epsilon, delta, rng):  # pragma: no cover - never called
        raise AssertionError


class AbortsOnSeed3(NoisyMean):
    """Fast releases, except that seed 3 aborts the interpreter."""

    name = "test_aborts_on_seed_3"

    def _run(self, data, facts, epsilon, delta, rng):
        if rng.bit_generator.seed_seq.entropy == 3:
            os.abort()
        return super()._run(data, facts, epsilon, delta, rng)


class HangsOnSeed3(NoisyMean):
    """Fast releases, except that seed 3 never returns."""

    name = "test_hangs_on_seed_3"

    def _run(self, data, facts, epsilon, delta, rng):
        if rng.bit_generator.seed_seq.entropy == 3:
            while True:
                time.sleep(3600)
        return super()._run(data, facts, epsilon, delta, rng)


HOSTILE = {
    "tests.plugins_hostile:SleepForever": ("timeout", "time limit"),
    "tests.plugins_hostile:MemoryHog": ("memory", "MemoryError"),
    "tests.plugins_hostile:Aborts": ("error", "signal 6 (SIGABRT) (at plugins_hostile.py"),
    "tests.plugins_hostile:Segfaults": ("error", "signal 11 (SIGSEGV) (at "),
    "tests.plugins_hostile:HardExit": ("error", "exited with status 3"),
    "tests.plugins_hostile:Raises": ("error", "RuntimeError: boom at epsilon=1.0"),
    "tests.plugins_hostile:ReturnsNaN": ("error", "non-finite estimate"),
    "tests.plugins_hostile:WrongShape": ("error", "length 5, expected 3"),
    "tests.plugins_hostile:ReturnsNone": ("error", "NoneType"),
    "tests.plugins_hostile:MutatesInput": ("error", "read-only"),
}
