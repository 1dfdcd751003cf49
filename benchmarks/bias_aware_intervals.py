"""How much narrower would fwl_score's intervals be with bias-aware critical values?

The released interval is ``estimate +- (q se + b)`` (``q`` the normal or Student
quantile, ``b`` the release's ``bias_bound``). When ``b`` bounds the bias of an
estimate that is normal with sd ``se``, the shortest fixed-length interval with
coverage ``1 - alpha`` is ``estimate +- c(b / se) se``, ``c(t)`` the ``1 - alpha``
quantile of ``|Z + t|`` (Armstrong and Kolesar 2020, "Simple and honest
confidence intervals in nonparametric regression"). Both are post-processing of
the same release; this script compares them on the coverage benchmark's draws
of the public sce instances (fetter13_ols aside): each draw resamples the
instance and releases with the API's interval configuration and
``default_rng(draw)``, as ``dpstats bench --inference`` does.

Usage (about 2 minutes for 10 draws on two cores)::

    python benchmarks/bias_aware_intervals.py --draws 10
"""

from __future__ import annotations

import argparse
import math
import warnings

import numpy as np
from scipy import optimize, stats

from dpstats.algorithms.release import AlgorithmSpec, Budget, release
from dpstats.bench.inference import inference_problem, resample
from dpstats.bench.model import Problem
from dpstats.data.corpus import Corpus

LEVEL = 0.95


def critical_value(t: float, df: float | None) -> float:
    """The ``LEVEL`` quantile of ``|Z + t|``, ``Z`` normal (``df`` None) or Student with ``df`` degrees of freedom."""
    dist = stats.t(df) if df is not None else stats.norm
    return float(optimize.brentq(lambda c: dist.cdf(c - t) - dist.cdf(-c - t) - LEVEL, 0.0, t + 50.0))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=10, help="draws per instance and epsilon (default 10)")
    ap.add_argument("--epsilon", type=float, nargs="+", default=[1.0, 3.0, 10.0])
    args = ap.parse_args()
    corpus = Corpus.public()
    ids = [i.id for i in corpus.instances() if i.task == "sce" and i.id != "fetter13_ols"]
    spec = AlgorithmSpec("sce", "fwl_score").with_intervals()
    warnings.simplefilter("ignore")
    print("| ε | finite intervals | half-width, bias-aware / released (median, 10th-90th percentile) "
          "| coverage of the finite, released → bias-aware | lowest instance, released → bias-aware |")
    print("| --- | --- | --- | --- | --- |")
    for eps in args.epsilon:
        ratios: list[float] = []
        per: dict[str, list[int]] = {}
        for iid in ids:
            inst = corpus.instance(iid)
            truth = float(np.ravel(inference_problem(inst).truth)[0])
            for draw in range(args.draws):
                pr = Problem.from_instance(resample(inst, draw))
                out = release(spec, pr.data, pr.facts, Budget(eps, 1e-6), np.random.default_rng(draw))
                se, b = float(out.std_error[0]), float(out.bias_bound[0])
                if not math.isfinite(se):
                    continue
                q = stats.t.ppf(0.5 + LEVEL / 2, out.df) if out.df is not None else stats.norm.ppf(0.5 + LEVEL / 2)
                old = q * se + b
                new = critical_value(b / se, out.df) * se if se > 0 else b
                miss = abs(float(out.estimate[0]) - truth)
                ratios.append(new / old)
                row = per.setdefault(iid, [0, 0, 0])
                row[0] += 1
                row[1] += miss <= old
                row[2] += miss <= new
        tot = np.array(list(per.values())).sum(axis=0)
        low = min(per.items(), key=lambda kv: (kv[1][2] / kv[1][0], -kv[1][0]))
        print(f"| {eps:g} | {len(ratios)} | {np.median(ratios):.3f} ({np.quantile(ratios, 0.1):.3f}–"
              f"{np.quantile(ratios, 0.9):.3f}) | {tot[1] / tot[0]:.3f} → {tot[2] / tot[0]:.3f} | "
              f"{low[0]} {low[1][1]} → {low[1][2]} of {low[1][0]} |", flush=True)


if __name__ == "__main__":
    main()
