"""``dpstats report`` and ``dpstats release`` (see :mod:`dpstats.bench.report`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from dpstats.bench.leaderboard import verify_leaderboard
from dpstats.bench.report import (
    _default_results,
    build_release,
    instance_facts,
    load_intervals,
    load_trials,
    write_report,
)


def add_report_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """``dpstats report``."""
    p = sub.add_parser(
        "report", help="write trials.csv, leaderboard.csv and the static results site",
        description="Read benchmark results and write trials.csv, leaderboard.csv, profiles.csv and a static site "
                    "(leaderboards per task and privacy level with slices, Explore pages, performance profiles).")
    p.add_argument("--results", action="append", metavar="PATH",
                   help=f"results file (SQLite from dpstats bench, or a trials.csv); repeat to combine corpora "
                        f"(default: {_default_results()})")
    p.add_argument("--out", required=True, metavar="DIR", help="output folder")
    p.add_argument("--corpus", metavar="DIR", help="corpus whose manifests give the instances' facts (default: public)")
    p.add_argument("--explore", action=argparse.BooleanOptionalAction, default=None,
                   help="Explore pages for every corpus / for none (default: only for public-corpus results)")
    p.add_argument("--no-site", action="store_true", help="write the CSV files only")
    p.add_argument("--workers", type=int, metavar="K",
                   help="processes drawing the pages and figures (default: the CPUs available; 1: this process)")
    return p


def cmd_report(args: argparse.Namespace) -> int:
    """Handler of ``dpstats report``."""
    from dpstats.data.corpus import Corpus

    paths = args.results or [_default_results()]
    if args.workers is not None and args.workers < 1:
        raise ValueError(f"--workers must be at least 1, got {args.workers}")
    try:
        trials = load_trials(paths)
        intervals = load_intervals(paths)
    except FileNotFoundError as exc:
        print(f"dpstats: {exc} (run dpstats bench first, or pass --results)", file=sys.stderr)
        return 2
    if trials.empty and intervals.empty:
        print("dpstats: the results hold no trials", file=sys.stderr)
        return 2
    corpus = Corpus(args.corpus) if args.corpus else None
    facts = None
    if not args.no_site and not trials.empty:
        facts = instance_facts(trials, corpus=corpus, results=paths)
    from dpstats.api import DEFAULT_METHODS

    res = write_report(trials, args.out, facts=facts, explore=args.explore, site=not args.no_site,
                       defaults=DEFAULT_METHODS, intervals=intervals, workers=args.workers)
    lb = res["leaderboard"]
    if trials.empty:
        print(f"{len(intervals)} coverage trials, {len(res['coverage'])} coverage rows; wrote {len(res['files'])} "
              f"files to {args.out}" + ("" if args.no_site else f" (open {Path(args.out) / 'index.html'})"))
        return 0
    problems = verify_leaderboard(Path(args.out) / "trials.csv", Path(args.out) / "leaderboard.csv")
    if problems:  # pragma: no cover - a bug, reported loudly
        print("dpstats: leaderboard.csv does not agree with trials.csv:\n  " + "\n  ".join(problems[:20]),
              file=sys.stderr)
        return 1
    extra = f", {len(intervals)} coverage trials" if not intervals.empty else ""
    print(f"{len(trials)} trials{extra}, {len(lb)} leaderboard rows; wrote {len(res['files'])} files to {args.out}"
          + ("" if args.no_site else f" (open {Path(args.out) / 'index.html'})"))
    return 0


def add_release_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """``dpstats release``."""
    p = sub.add_parser(
        "release", help="write the downloadable bundle of the public corpus (folder and .zip)",
        description="Write the public-corpus instance list with its facts, every algorithm's trials on the public "
                    "corpus, the leaderboard, a README and a manifest with versions, as a folder and a .zip.")
    p.add_argument("--out", required=True, metavar="DIR", help="output folder")
    p.add_argument("--results", action="append", metavar="PATH",
                   help=f"results file(s) of the public corpus (default: {_default_results()} if it exists)")
    p.add_argument("--corpus", metavar="DIR", help="the public corpus (default: the shipped one)")
    p.add_argument("--name", help="bundle name (default: dpstats-benchmark-<version>)")
    return p


def cmd_release(args: argparse.Namespace) -> int:
    """Handler of ``dpstats release``."""
    from dpstats.data.corpus import Corpus

    paths = args.results
    if paths is None:
        paths = [p for p in [_default_results()] if Path(p).is_file()]
        if not paths:
            print(f"dpstats: no results at {_default_results()}; the bundle has no trials", file=sys.stderr)
    corpus = Corpus(args.corpus) if args.corpus else None
    try:
        res = build_release(args.out, results=paths, corpus=corpus, name=args.name)
    except FileNotFoundError as exc:
        print(f"dpstats: {exc}", file=sys.stderr)
        return 2
    m = res["manifest"]
    print(f"{m['corpus']['instances']} instances, {m['trials']['rows']} trials "
          f"({res['dropped']} left out: not in the public corpus) -> {res['folder']} and {res['zip']}")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register the command(s) of this module."""
    add_report_parser(sub).set_defaults(func=cmd_report)
    add_release_parser(sub).set_defaults(func=cmd_release)
