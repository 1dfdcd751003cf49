"""The benchmark: trials in supervised workers, runner, store, scoring, tuning, report."""
