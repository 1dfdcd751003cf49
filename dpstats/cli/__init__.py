"""The ``dpstats`` command line: one module per command, listed in :data:`COMMANDS`.

Commands
--------
``dpstats corpus list|show|verify``
    Inspect and check a corpus (default: the public corpus).
``dpstats algorithms``
    List the registered private algorithms.
``dpstats bench``, ``dpstats report``, ``dpstats release``, ``dpstats tune``
    Run the benchmark, write its report and release bundle, tune hyperparameters.
``dpstats audit``
    Audit an algorithm's privacy empirically.

Exit status is 0 on success, 1 when a check fails (a reported number does not
reproduce, an audit finds a violation), 2 for invalid input (a malformed
manifest, an unknown instance, a bad argument).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from dpstats.errors import CorpusError

__all__ = ["main", "build_parser", "COMMANDS"]

#: The commands, in help order: each module has ``add_parser(sub)`` (one or more sub-commands,
#: each with ``set_defaults(func=handler)``). A new command is a module here and a line below.
COMMANDS: tuple[str, ...] = (
    "dpstats.cli.corpus",
    "dpstats.cli.algorithms",
    "dpstats.cli.bench",
    "dpstats.cli.report",
    "dpstats.cli.tune",
    "dpstats.cli.audit",
    "dpstats.cli.synth",
)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("dpstats")
    except PackageNotFoundError:
        return "0+unknown"


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``dpstats`` with every command of :data:`COMMANDS`."""
    p = argparse.ArgumentParser(prog="dpstats", description="Differentially private statistics for economists.")
    p.add_argument("--version", action="version", version=f"dpstats {_version()}")
    sub = p.add_subparsers(dest="command", required=True)
    for name in COMMANDS:
        importlib.import_module(name).add_parser(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``dpstats``; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except CorpusError as exc:
        print(f"dpstats: {exc}", file=sys.stderr)
        return 2
    except (ValueError, KeyError) as exc:
        print(f"dpstats: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0
