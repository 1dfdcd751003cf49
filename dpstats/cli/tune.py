"""``dpstats tune`` (see :mod:`dpstats.bench.tuning`)."""

from __future__ import annotations

import argparse

from dpstats.algorithms.configurations import TUNED_DIR
from dpstats.bench.sandbox import DEFAULT_MEMORY_MB, DEFAULT_TIME_LIMIT
from dpstats.bench.tuning import tune, write_tuned
from dpstats.data.manifest import TASKS


def _build_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """``dpstats tune``."""
    p = sub.add_parser(
        "tune", help="tune an algorithm's hyperparameters on the public corpus at each epsilon",
        description="Tune hyperparameters on training studies of the public corpus (seeded split by study) over the "
                    "algorithm's grid, and keep the tuned configuration only if it beats the defaults' tau@50 on the "
                    "held-out studies. Writes a JSON file per epsilon.")
    p.add_argument("algorithm", help="registry name")
    p.add_argument("--epsilon", type=float, nargs="+", action="extend", required=True, metavar="E",
                   help="privacy level(s); each is tuned separately")
    p.add_argument("--task", choices=TASKS, help="the task (needed when the name exists for several)")
    p.add_argument("--trials", type=int, default=10, metavar="N", help="trials per instance and candidate (10)")
    p.add_argument("--seed", type=int, default=0, metavar="S",
                   help="seed of the study split (0); trials use seeds 0..N-1 as in dpstats bench")
    p.add_argument("--max-studies", type=int, metavar="K", help="tune on a seeded subset of K studies")
    p.add_argument("--delta", type=float, default=1e-6, help="delta (1e-6)")
    p.add_argument("--min-improvement", type=float, default=0.0, metavar="F",
                   help="required relative improvement of the held-out tau@50 (0: any strict improvement)")
    p.add_argument("--corpus", metavar="DIR", help="corpus (default: the public corpus)")
    p.add_argument("--workers", type=int, default=1, metavar="W", help="worker processes running trials (1)")
    p.add_argument("--time-limit", type=float, default=DEFAULT_TIME_LIMIT, metavar="S",
                   help=f"seconds per trial, as in dpstats bench ({DEFAULT_TIME_LIMIT:g})")
    p.add_argument("--memory-mb", type=float, default=DEFAULT_MEMORY_MB, metavar="MB",
                   help=f"memory per trial, as in dpstats bench ({DEFAULT_MEMORY_MB:g})")
    p.add_argument("--out", metavar="DIR", help=f"where to write the JSON files (default: {TUNED_DIR})")
    return p


def cmd_tune(args: argparse.Namespace) -> int:
    """Handler of ``dpstats tune``."""
    from dpstats.data.corpus import Corpus

    corpus = Corpus(args.corpus) if args.corpus else None
    for eps in dict.fromkeys(args.epsilon):
        print(f"tuning {args.algorithm} at epsilon = {eps:g}")
        res = tune(args.algorithm, eps, task=args.task, trials=args.trials, seed=args.seed, corpus=corpus,
                   delta=args.delta, max_studies=args.max_studies, min_improvement=args.min_improvement, log=print,
                   time_limit=args.time_limit, memory_mb=args.memory_mb, workers=args.workers)
        path = write_tuned(res, args.out)
        verdict = f"accepted as {res.name} with {res.params}" if res.accepted else "not accepted"
        print(f"{res.algorithm} at epsilon = {eps:g}: {verdict} ({res.decision}); wrote {path}")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the command(s) of this module."""
    _build_parser(sub).set_defaults(func=cmd_tune)
