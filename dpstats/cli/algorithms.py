"""``dpstats algorithms``: list the roster: the registered private algorithms and the named configurations."""

from __future__ import annotations

import argparse

from dpstats.cli._common import _dump, _table
from dpstats.data.manifest import TASKS


def cmd_algorithms(args: argparse.Namespace) -> int:
    from dpstats.algorithms import list_configurations

    meta = [c.metadata() for c in list_configurations(args.task)]
    if args.json:
        print(_dump(meta))
    else:
        print(_table([[m["task"], m["name"], m["interpretation"], m["citation"][:60]] for m in meta],
                     ["task", "name", "interpretation", "citation"]))
    return 0


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """``dpstats algorithms [--task T] [--json]``."""
    pa = sub.add_parser("algorithms", help="list the private algorithms and their named configurations")
    pa.add_argument("--task", choices=TASKS)
    pa.add_argument("--json", action="store_true")
    pa.set_defaults(func=cmd_algorithms)
    return pa
