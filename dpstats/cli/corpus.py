"""``dpstats corpus list|show|verify``: inspect and check a replication corpus."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from dpstats.cli._common import _dump, _table
from dpstats.data.corpus import Corpus, public_corpus_path

__all__ = ["add_parser"]


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
    from dpstats.ols.baseline import compute_baseline

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
    from dpstats.ols.verify import verify_corpus

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


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """``dpstats corpus list|show|verify``."""
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
    return pc
