"""dpnewton's releases by ``n`` times the epsilon of one range's median draw, with and without ``guard_min``.

Runs dpnewton (registered defaults, the point release of ``private_ols(...,
inference=False)``) on every public linreg instance with at most 3,000 rows,
at epsilon 0.3, 1 and 3 and seeds 0-2 (``trial_generator(seed)``, as the
benchmark seeds a trial), once with ``guard_min = 0`` (the rule off) and once
with its default, and prints per band of ``n eps_c`` (``eps_c =
details["range_epsilon"][0]``, a public value): the trials, the share that
released the fallback, the median error ratio (:func:`dpstats.bench.metrics.ratio`)
and the share beyond 1,000 times the sampling error. About 30 seconds::

    python benchmarks/dpnewton_ranges.py
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from dpstats.algorithms.linreg.dpnewton import DPNewton
from dpstats.bench.metrics import ratio
from dpstats.bench.model import Problem, trial_generator
from dpstats.data.corpus import Corpus

BANDS = [0, 4, 8, 16, 32, 64, np.inf]


def main() -> None:
    rows = []
    for inst in Corpus.public().instances():
        if inst.task != "linreg" or inst.n > 3000:
            continue
        pr = Problem.from_instance(inst)
        for eps in (0.3, 1.0, 3.0):
            for seed in range(3):
                for rule, params in (("off", {"guard_min": 0.0}), ("on", {})):
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        out = DPNewton(**params).run(pr.data, pr.facts, eps, 1e-6, trial_generator(seed))
                    rows.append({"rule": rule, "ne": inst.n * out.details["range_epsilon"][0],
                                 "fallback": "fallback" in out.details, "ratio": ratio(out.estimate, pr.baseline)})
    df = pd.DataFrame(rows)
    df["band"] = pd.cut(df["ne"], BANDS, right=False)
    t = df.groupby(["band", "rule"], observed=True).agg(
        trials=("ratio", "size"), fallback=("fallback", "mean"), median_ratio=("ratio", "median"),
        beyond_1000=("ratio", lambda r: float((r > 1e3).mean())))
    print(t.round(3).to_string())
    lo = df[(df["rule"] == "off") & (df["ne"] < 16)]
    for fb, g in lo.groupby("fallback"):
        print(f"below 16, rule off, {'fallback' if fb else 'estimated'}: {len(g)} trials, median ratio "
              f"{float(np.median(g['ratio'])):.4g}")


if __name__ == "__main__":
    main()
