"""``dpstats synth bench|run``: benchmark DP synthesizers (Tao et al. 2021) or synthesize one data set.

Bad input -- a data file that cannot be read, a schema naming a missing
column or a value outside its levels or bounds, a label that is not a
column, an empty data file, a missing value in a numeric column, an unknown
mechanism, data set or hyperparameter -- is one line naming the file and
column (or the mechanism and the valid names) on stderr, exit status 2, and
nothing written to ``--out`` (results are written to a temporary folder or
file beside it and renamed at the end).

``--param MECHANISM.NAME=VALUE`` (repeatable) sets a mechanism's
hyperparameter, e.g. ``--param mst.iters=5000``; ``VALUE`` is read as a
Python literal (a number, ``None``, a list...) and otherwise kept as text.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import shutil
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

from dpstats.errors import CorpusError

DEFAULT_TRIALS = 3
DISCRETIZERS = ("privtree", "equal_width")


def _common(p: argparse.ArgumentParser, *, several: bool = False) -> None:
    p.add_argument("--schema", metavar="FILE", help="public schema (TOML or JSON) of --data; without one the "
                   "domain is read from the data (not DP, PrivacyLeakWarning)")
    p.add_argument("--label", metavar="COL", help="label column of --data (overrides the schema's)")
    p.add_argument("--delta", type=float, metavar="D", help="delta (default: 1e-9)")
    if several:
        p.add_argument("--discretizer", nargs="+", choices=DISCRETIZERS, default=None, metavar="D",
                       help="discretiser(s) of numeric columns, privtree (10%% of the budget) or equal_width; "
                            "with both, every trial runs under each and discretizers.csv compares them "
                            "(default: privtree)")
    else:
        p.add_argument("--discretizer", choices=DISCRETIZERS, default="privtree",
                       help="discretiser of numeric columns (default: privtree, 10%% of the budget)")
    p.add_argument("--time-limit", type=float, default=None, metavar="SECONDS", help="per-trial wall clock (default: 900; the paper ran each synthesizer to completion)")
    p.add_argument("--memory-limit", type=float, default=None, metavar="MB", help="per-trial memory (default: 4096)")
    p.add_argument("--param", action="append", default=[], metavar="MECHANISM.NAME=VALUE",
                   help="a mechanism's hyperparameter, e.g. mst.iters=5000 (repeatable; VALUE a Python literal "
                        "or text)")


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``dpstats synth`` with its sub-commands ``bench`` and ``run``."""
    p = sub.add_parser("synth", help="DP synthetic data: benchmark synthesizers or synthesize a data set",
                       description=__doc__.split("\n\n")[0])
    ss = p.add_subparsers(dest="synth_command", required=True)
    b = ss.add_parser("bench", help="benchmark synthesizers with the paper's metrics",
                      description="Write results.csv (metric values per dataset, mechanism, epsilon, trial "
                                  "and discretiser, and the original data's as mechanism 'original'), "
                                  "summary.csv (optimal rate and average rank per mechanism) and figures/*.png.")
    src = b.add_mutually_exclusive_group()
    src.add_argument("--dataset", nargs="+", action="extend", metavar="NAME",
                     help="paper data sets: bank shopping adult census mushroom (default: bank shopping)")
    src.add_argument("--data", metavar="FILE", help="any CSV or Parquet file")
    b.add_argument("--mechanism", nargs="+", action="extend", metavar="M", help="synthesizers (default: all)")
    b.add_argument("--epsilon", nargs="+", action="extend", type=float, metavar="E",
                   help="privacy levels (default: 0.1 1 10)")
    b.add_argument("--trials", type=int, default=DEFAULT_TRIALS, metavar="N", help=f"seeds 0..N-1 (default: {DEFAULT_TRIALS})")
    b.add_argument("--sample", type=int, metavar="ROWS", help="use a seeded sample of ROWS rows of each data set")
    b.add_argument("--workers", type=int, default=1, metavar="K",
                   help="benchmark worker processes running trials at once (default: 1)")
    b.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="progress bar (default: when stderr is a terminal)")
    b.add_argument("--out", required=True, metavar="DIR", help="output folder (must not exist or be empty)")
    _common(b, several=True)
    b.set_defaults(func=_bench)
    r = ss.add_parser("run", help="synthesize one data set")
    r.add_argument("mechanism", metavar="MECHANISM")
    r.add_argument("--data", required=True, metavar="FILE")
    r.add_argument("--epsilon", required=True, type=float, metavar="E")
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--rows", type=int, metavar="N", help="rows to synthesize (default: as many as the data)")
    r.add_argument("--out", required=True, metavar="FILE", help="synthetic CSV")
    _common(r)
    r.set_defaults(func=_run)


def _load_data(path: str, schema_file: str | None, label: str | None) -> tuple[Any, Any]:
    from dpstats.synth.schema import Schema, SchemaError, read_table

    df = read_table(path)
    if schema_file is not None:
        schema = Schema.from_file(schema_file)
    else:
        if label is not None and label not in df.columns:
            raise SchemaError("the label is not a column of the data", file=path, column=label)
        schema = Schema.from_data(df, label=label)
    if label is not None:
        if label not in schema:
            raise SchemaError(f"the label is not a column of the schema {schema_file or ''}".rstrip(), file=path,
                              column=label)
        try:
            schema = schema.with_label(label)
        except SchemaError as exc:
            raise SchemaError(exc.message, file=schema_file or path, column=label) from None
    return schema.validate(df, file=path), schema


def _mechanisms(names: list[str] | None) -> list[str]:
    from dpstats.synth import SYNTHESIZERS, get_synthesizer

    names = names or list(SYNTHESIZERS)
    for n in names:
        try:
            get_synthesizer(n)
        except KeyError as exc:
            raise ValueError(exc.args[0]) from None
    return names


def _params(specs: list[str], mechanisms: list[str]) -> dict[str, dict[str, Any]]:
    """``--param MECHANISM.NAME=VALUE`` options as ``{mechanism: {name: value}}``, checked against the registry."""
    from dpstats.bench.synth.benchmark import check_params

    out: dict[str, dict[str, Any]] = {}
    for spec in specs:
        key, eq, text = spec.partition("=")
        mech, dot, name = key.strip().partition(".")
        if not (eq and dot and mech and name):
            raise ValueError(f"--param {spec}: expected MECHANISM.NAME=VALUE, e.g. mst.iters=5000")
        try:
            value: Any = ast.literal_eval(text.strip())
        except (ValueError, SyntaxError):
            value = text.strip()
        try:
            check_params({mech: {name: value}})
        except KeyError as exc:
            raise ValueError(f"--param {spec}: {exc.args[0]}") from None
        if mech not in mechanisms:
            raise ValueError(f"--param {spec}: {mech} is not among the mechanisms run ({', '.join(mechanisms)})")
        out.setdefault(mech, {})[name] = value
    return out


def _limits(args: argparse.Namespace) -> dict[str, float]:
    from dpstats.bench.sandbox import DEFAULT_MEMORY_MB, Limits
    from dpstats.bench.synth.benchmark import SYNTH_TIME_LIMIT

    lim = Limits(time=args.time_limit or SYNTH_TIME_LIMIT, memory_mb=args.memory_limit or DEFAULT_MEMORY_MB)
    return {"time_limit": lim.time, "memory_mb": lim.memory_mb}


def _check_out_dir(out: Path) -> None:
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ValueError(f"{out}: --out must be a new or empty folder")
    if not out.parent.exists():
        raise ValueError(f"{out.parent}: the parent folder of --out does not exist")


def _bench(args: argparse.Namespace) -> int:
    import pandas as pd

    from dpstats.bench.synth.benchmark import DEFAULT_DELTA, DEFAULT_EPSILONS, run_benchmark, summarize
    from dpstats.bench.synth.compare import discretizer_comparison, original_rows, ranked_results
    from dpstats.bench.synth.figures import correlation_heatmaps, discretizer_bars, marginal_bars, metric_curves
    from dpstats.privacy.accounting import validate_budget
    from dpstats.synth.datasets import DATASETS, load_dataset

    out = Path(args.out)
    _check_out_dir(out)
    mechs = _mechanisms(args.mechanism)
    params = _params(args.param, mechs)
    epsilons = args.epsilon or list(DEFAULT_EPSILONS)
    delta = DEFAULT_DELTA if args.delta is None else args.delta
    for e in epsilons:
        validate_budget(e, delta)
    if args.trials < 1:
        raise ValueError(f"--trials must be >= 1, got {args.trials}")
    if args.workers < 1:
        raise ValueError(f"--workers must be >= 1, got {args.workers}")
    if (args.schema or args.label) and not args.data:
        raise ValueError("--schema and --label go with --data")
    limits = _limits(args)
    datasets = []
    if args.data:
        df, schema = _load_data(args.data, args.schema, args.label)
        datasets.append((Path(args.data).name.split(".")[0], df, schema))
    else:
        for name in args.dataset or ["bank", "shopping"]:
            if name not in DATASETS:
                raise ValueError(f"unknown dataset {name!r}; known: {', '.join(DATASETS)}")
        for name in args.dataset or ["bank", "shopping"]:
            df, schema = load_dataset(name)
            if not schema.standard:
                warnings.warn(f"{name}: the schema is read from the data (not DP)", stacklevel=1)
            datasets.append((name, df, schema))
    if args.sample:
        datasets = [(n, d.sample(min(args.sample, len(d)), random_state=0).reset_index(drop=True), s)
                    for n, d, s in datasets]
    discretizers = list(dict.fromkeys(args.discretizer or ["privtree"]))
    total = len(datasets) * len(mechs) * len(epsilons) * args.trials * len(discretizers)
    show = sys.stderr.isatty() if args.progress is None else args.progress
    bar: Any = None
    if show:
        from tqdm import tqdm

        bar = tqdm(total=total, desc="synth bench", unit="trial", file=sys.stderr)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        parts, frames = [], {}
        for disc in discretizers:
            part, fr = run_benchmark(datasets, mechs, epsilons, args.trials, delta=delta, discretizer=disc,
                                     keep_frames=disc == discretizers[0], workers=args.workers, params=params,
                                     progress=(lambda _o: bar.update(1)) if bar is not None else None, **limits)
            parts.append(part.assign(discretizer=disc))
            frames = frames or fr
        if bar is not None:
            bar.close()
        res = pd.concat([*parts, original_rows(datasets).assign(discretizer="")], ignore_index=True)
        res.to_csv(tmp / "results.csv", index=False)
        summary = summarize(ranked_results(res))
        summary.to_csv(tmp / "summary.csv", index=False)
        (tmp / "figures").mkdir()
        if len(discretizers) > 1:
            comparison = discretizer_comparison(res, *discretizers[:2])
            comparison.to_csv(tmp / "discretizers.csv", index=False)
            for name, _, _ in datasets:
                discretizer_bars(comparison, name, tmp / "figures" / f"discretizers_{name}.png")
        for name, df, schema in datasets:
            metric_curves(ranked_results(res, original=True), name, tmp / "figures" / f"metrics_{name}.png")
            for eps in epsilons:
                syn = {m: frames[(name, m, float(eps))] for m in mechs if (name, m, float(eps)) in frames}
                if not syn:
                    continue
                tag = f"{name}_eps{eps:g}"
                marginal_bars(df, syn, schema, tmp / "figures" / f"marginals_{tag}.png", title=f"{name}, ε = {eps:g}")
                correlation_heatmaps(df, syn, schema, tmp / "figures" / f"correlation_{tag}.png",
                                     title=f"{name}, ε = {eps:g}")
        if out.exists():
            out.rmdir()
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    failed = res[res["status"] != "ok"][["dataset", "mechanism", "epsilon", "trial", "discretizer"]].drop_duplicates()
    print(summary.to_string(index=False))
    extra = ", discretizers.csv" if len(discretizers) > 1 else ""
    print(f"wrote {out}/results.csv, summary.csv{extra}, figures/ ({total} trials, {len(failed)} failed)")
    return 0


def _run(args: argparse.Namespace) -> int:
    from dpstats.bench.synth.benchmark import DEFAULT_DELTA, SynthTrial, run_supervised
    from dpstats.privacy.accounting import validate_budget

    out = Path(args.out)
    if not out.parent.exists():
        raise ValueError(f"{out.parent}: the folder of --out does not exist")
    (mech,) = _mechanisms([args.mechanism])
    params = _params(args.param, [mech])
    delta = DEFAULT_DELTA if args.delta is None else args.delta
    validate_budget(args.epsilon, delta)
    df, schema = _load_data(args.data, args.schema, args.label)
    if args.rows is not None and args.rows < 1:
        raise ValueError(f"--rows must be >= 1, got {args.rows}")
    trial = SynthTrial(Path(args.data).name, mech, args.epsilon, delta, args.seed)
    outcome = run_supervised(df, schema, trial, discretizer=args.discretizer, params=params.get(mech),
                             **_limits(args))
    if outcome.status != "ok" or outcome.frame is None:
        print(f"dpstats: {mech} on {args.data}: {outcome.status}: {outcome.message.splitlines()[0] if outcome.message else ''}",
              file=sys.stderr)
        return 1
    frame = outcome.frame
    if args.rows is not None:
        frame = frame.sample(args.rows, replace=args.rows > len(frame), random_state=args.seed).reset_index(drop=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", dir=out.parent)
    os.close(fd)
    try:
        frame.to_csv(tmp, index=False)
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    print(json.dumps({"mechanism": mech, "epsilon": args.epsilon, "delta": delta, "rows": len(frame),
                      "schema_standard": schema.standard, "seconds": round(outcome.seconds, 3), "out": str(out)}))
    return 0


__all__ = ["add_parser", "CorpusError"]
