"""``dpstats audit ALGORITHM``: audit one algorithm's privacy claim from its releases.

Exit status: 0 when no violation was found, 1 on a violation (a lower bound
above the claim, or a ledger or release that claims more than the budget), 2
on bad input (one message naming the argument).
"""

from __future__ import annotations

import argparse
import sys

from dpstats.data.manifest import TASKS

__all__ = ["add_parser", "cmd_audit"]


def _build_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """``dpstats audit``."""
    p = sub.add_parser(
        "audit", help="audit an algorithm: an empirical lower bound on its epsilon",
        description="Run the algorithm many times on a data set and on the same data set with one row replaced by a "
                    "worst-case canary row, choose distinguishing statistics on one half of the runs and evaluate "
                    "them on the other, and report epsilon lower bounds (Clopper-Pearson, one-run, zCDP and GDP "
                    "against the algorithm's ledger) and the canary exposure. Exit status 1 on a violation.")
    p.add_argument("algorithm", help="roster name (fwl_score, fwl_score[api]) or module:object plugin")
    p.add_argument("--task", choices=TASKS, help="the task (needed when the name exists for several)")
    p.add_argument("--epsilon", type=float, default=1.0, help="the claimed epsilon, run with (1)")
    p.add_argument("--delta", type=float, default=1e-6, help="delta (1e-6)")
    p.add_argument("--trials", type=int, default=20000, metavar="N", help="releases in total (20000)")
    p.add_argument("--confidence", type=float, default=0.95, metavar="C", help="confidence of the bounds (0.95)")
    p.add_argument("--seed", type=int, default=0, help="seed of the runs and of the data (0)")
    p.add_argument("--workers", type=int, metavar="W", help="worker processes (default: CPUs, at most 2)")
    p.add_argument("--time-limit", type=float, default=60.0, metavar="SECONDS",
                   help="per-release wall-clock limit of the worker pool (60); a release over it is a time-out outcome")
    p.add_argument("--memory-limit", type=float, default=4096.0, metavar="MB",
                   help="per-release memory limit in MB (4096); a release over it is a memory outcome")
    p.add_argument("--instance", metavar="ID", help="use this corpus instance as the base data set")
    p.add_argument("--corpus", metavar="DIR", help="corpus for --instance (default: the public corpus)")
    p.add_argument("--n", type=int, default=1000, help="rows of the generated data set (1000)")
    p.add_argument("--regressors", type=int, default=2, choices=(1, 2), help="regressors of the generated data (sce, linreg)")
    p.add_argument("--columns", type=int, default=3, help="columns of the generated data (mean)")
    p.add_argument("--levels", type=int, metavar="L",
                   help="generated data on a grid of L values per column (few distinct rows: fast for bhs_affine)")
    p.add_argument("--clusters", type=int, metavar="K",
                   help="generated data sampled in K clusters (the canary joins a new one): runs a method's "
                        "cluster-robust path")
    p.add_argument("--score", choices=("estimate", "interval"), default=None,
                   help="what the statistics see of a release: its estimate, or also its standard error, degrees of "
                        "freedom and bias bound (interval methods); default: the estimate, and with --design search "
                        "both, for a method that declares intervals")
    p.add_argument("--canary", choices=("at", "beyond"), default="at", help="canary at or beyond the public bounds")
    p.add_argument("--design", choices=("both", "search", "mirror", "inside", "concentrated", "heavy"),
                   default="search",
                   help="generated pair: replaced row mirrored at the bounds, inside the data, rows concentrated near "
                        "the centre (the canary an outlier), heavy-tailed rows; both = mirror and inside; "
                        "search = a pilot on every design, then the counted audit on the one that separates best "
                        "(default)")
    p.add_argument("--search-share", type=float, default=0.25,
                   help="with --design search: share of the trials spent on the pilots (default 0.25)")
    p.add_argument("--progress", action="store_true", help="report progress on stderr")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    return p


def cmd_audit(args: argparse.Namespace) -> int:
    """Handler of ``dpstats audit``."""
    from dpstats.audit.run import audit
    from dpstats.cli._common import _dump

    if args.workers is not None and args.workers < 1:
        raise ValueError(f"--workers must be at least 1, got {args.workers}")
    res = audit(args.algorithm, task=args.task, epsilon=args.epsilon, delta=args.delta, trials=args.trials,
                confidence=args.confidence, seed=args.seed, workers=args.workers, instance=args.instance,
                corpus=args.corpus, n=args.n, regressors=args.regressors, columns=args.columns, canary=args.canary,
                design=args.design, search_share=args.search_share, levels=args.levels, clusters=args.clusters,
                score=args.score, time_limit=args.time_limit, memory_mb=args.memory_limit,
                log=(lambda m: print(m, file=sys.stderr)) if args.progress else None)
    print(_dump(res.to_dict()) if args.json else res.summary())
    return 1 if res.violation else 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``dpstats audit``."""
    _build_parser(sub).set_defaults(func=cmd_audit)
