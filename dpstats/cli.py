"""The ``dpstats`` command line.

Commands
--------
``dpstats corpus list|show|verify``
    Inspect and check a corpus (default: the public corpus).
``dpstats algorithms``
    List the registered private algorithms.

Exit status is 0 on success, 1 when a check fails (a reported number does not
reproduce), 2 for invalid input (a malformed manifest, an unknown instance).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

from .corpus import Corpus, CorpusError, public_corpus_path

__all__ = ["main", "build_parser", "COMMANDS"]

#: extra sub-command builders: name -> (add_parser, handler); filled by other modules
COMMANDS: dict[str, tuple[Callable[[argparse._SubParsersAction], argparse.ArgumentParser], Callable[[argparse.Namespace], int]]] = {}


def _json_default(o: Any) -> Any:
    import numpy as np

    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, Path):
        return str(o)
    return str(o)


def _dump(obj: Any) -> str:
    def clean(x: Any) -> Any:
        if isinstance(x, float) and not math.isfinite(x):
            return None if math.isnan(x) else ("inf" if x > 0 else "-inf")
        if isinstance(x, dict):
            return {k: clean(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [clean(v) for v in x]
        return x

    return json.dumps(clean(obj), indent=2, default=_json_default)


def _table(rows: list[list[Any]], header: list[str]) -> str:
    cells = [[str(c) for c in header]] + [[("" if c is None else str(c)) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _corpus(args: argparse.Namespace) -> Corpus:
    return Corpus(args.corpus) if args.corpus else Corpus(public_corpus_path())


def cmd_corpus_list(args: argparse.Namespace) -> int:
    corpus = _corpus(args)
    rows = [
        {"study": s.study, "instance": s.id, "task": s.task, "dataset": s.dataset,
         "formula": s.formula, "columns": list(s.columns) or None, "coefficient": s.coefficient,
         "se": s.se if s.task == "sce" else None}
        for s in corpus.specs()
    ]
    if args.json:
        print(_dump(rows))
    else:
        print(_table([[r["study"], r["instance"], r["task"], r["se"] or "", r["formula"] or ", ".join(r["columns"] or [])]
                      for r in rows], ["study", "instance", "task", "se", "formula / columns"]))
        print(f"\n{len(rows)} instances in {len(corpus.studies)} studies ({corpus.root})")
    return 0


def cmd_corpus_show(args: argparse.Namespace) -> int:
    from .baseline import compute_baseline

    corpus = _corpus(args)
    if args.instance not in corpus:
        print(f"dpstats: no instance {args.instance!r} in {corpus.root}", file=sys.stderr)
        return 2
    spec = corpus.spec(args.instance)
    inst = corpus.instance(args.instance)
    b = compute_baseline(inst)
    study = corpus.studies[spec.study]
    out = {
        "study": study.id, "title": study.title, "citation": study.citation, "instance": spec.id,
        "task": spec.task, "manifest": str(spec.manifest), "formula": spec.formula, "table": spec.table,
        "facts": inst.facts.to_dict(), "se_type": b.se_type, "estimate": b.to_dict()["estimate"],
        "baseline": b.baseline, "reported": {k: v.value for k, v in spec.reported.items()},
        "unreproduced": dict(spec.unreproduced), "dropped_missing": inst.dropped_missing,
        "dropped_collinear": list(inst.dropped_collinear), "out_of_bounds": dict(inst.out_of_bounds),
        "notes": spec.notes,
    }
    if args.json:
        print(_dump(out))
    else:
        for k, v in out.items():
            if k == "facts":
                v = {kk: vv for kk, vv in v.items() if kk in ("n", "d", "columns", "outcome", "coefficient", "bounds")}
            print(f"{k:>18}: {v}")
    return 0


def cmd_corpus_verify(args: argparse.Namespace) -> int:
    from .verify import verify_corpus

    corpus = _corpus(args)
    rows = verify_corpus(corpus, engine=args.engine)
    if args.json:
        print(_dump([r.to_dict() for r in rows]))
    else:
        def fmt(v: Any) -> str:
            if v is None:
                return ""
            if isinstance(v, list):
                return "[" + ", ".join(f"{x:.4g}" for x in v[:3]) + (", ..." if len(v) > 3 else "") + "]"
            return f"{v:.6g}"

        table = [
            [r.instance, r.task, r.n, r.d, r.se_type or "", fmt(r.estimate), fmt(r.baseline),
             ", ".join(f"{k}={v}" for k, v in r.reported_text.items()),
             {True: "yes", False: "NO", None: ""}[r.reproduces], r.dropped_missing,
             r.error or "; ".join(r.mismatches)]
            for r in rows
        ]
        print(_table(table, ["instance", "task", "n", "d", "se", "estimate", "baseline", "reported", "reproduces",
                             "dropped", "problem"]))
        n_rep = sum(r.reproduces is True for r in rows)
        n_bad = sum(r.reproduces is False for r in rows)
        print(f"\n{len(rows)} instances, {len(corpus.studies)} studies: {n_rep} reported numbers reproduce, {n_bad} do not")
    return 1 if any(r.reproduces is False or r.error for r in rows) else 0


def cmd_algorithms(args: argparse.Namespace) -> int:
    from .algorithms import list_algorithms

    algos = list_algorithms(args.task)
    meta = [a.metadata() for a in algos]
    if args.json:
        print(_dump(meta))
    else:
        print(_table([[m["task"], m["name"], m["interpretation"], m["citation"][:60]] for m in meta],
                     ["task", "name", "interpretation", "citation"]))
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="dpstats", description="Differentially private statistics for economists.")
    p.add_argument("--version", action="version", version=f"dpstats {_version()}")
    sub = p.add_subparsers(dest="command", required=True)

    pc = sub.add_parser("corpus", help="list, show and verify a replication corpus")
    csub = pc.add_subparsers(dest="corpus_command", required=True)

    def corpus_opt(q: argparse.ArgumentParser) -> None:
        q.add_argument("--corpus", metavar="DIR", help="corpus folder (default: the public corpus)")
        q.add_argument("--json", action="store_true", help="machine-readable output")

    q = csub.add_parser("list", help="list instances")
    corpus_opt(q)
    q.set_defaults(func=cmd_corpus_list)
    q = csub.add_parser("show", help="show one instance with its facts and baseline")
    q.add_argument("instance")
    corpus_opt(q)
    q.set_defaults(func=cmd_corpus_show)
    q = csub.add_parser("verify", help="load every instance, compute baselines, compare with reported numbers")
    corpus_opt(q)
    q.add_argument("--engine", choices=("python", "r"), default="python",
                   help="compute sce standard errors in Python (statsmodels) or in R (sandwich via rpy2)")
    q.set_defaults(func=cmd_corpus_verify)

    pa = sub.add_parser("algorithms", help="list the private algorithms")
    pa.add_argument("--task", choices=("sce", "linreg", "mean"))
    pa.add_argument("--json", action="store_true")
    pa.set_defaults(func=cmd_algorithms)

    _load_extra_commands()
    # the registry lives in the module dpstats.cli, also when this file runs as __main__
    from dpstats import cli as registry

    for name, (add, handler) in registry.COMMANDS.items():
        q = add(sub)
        q.set_defaults(func=handler)
    return p


def _load_extra_commands() -> None:
    import importlib

    for mod in ("dpstats.runner", "dpstats.report", "dpstats.tuning", "dpstats.audit"):
        try:
            importlib.import_module(mod)
        except ModuleNotFoundError as exc:
            if exc.name != mod:
                raise


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("dpstats")
    except PackageNotFoundError:
        return "0+unknown"


def main(argv: Sequence[str] | None = None) -> int:
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


if __name__ == "__main__":
    sys.exit(main())
