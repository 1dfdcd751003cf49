"""The README's block of ``dpstats`` commands runs as written, and each line does what its comment says.

The block is read from README.md (the ```bash block whose lines all start with
``.venv/bin/dpstats``); nothing here repeats its commands. Each line runs in
order, as ``python -m dpstats`` of this interpreter, in a temporary folder that
stands in for the clone's root: the repository entries that the lines read
(``examples/corpus``, ``dpstats/synth/datasets/...``) are linked into it, and
what the lines write lands in it. Each line must exit 0 and pass the check of its
subcommand below, which reads the options from the line itself (so the README
may change paths, instances or sizes). A line of a subcommand with no check
fails the test. The whole block takes about a minute on one CPU.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

from dpstats.bench.store import read_intervals, read_runs, read_trials
from dpstats.data.corpus import Corpus
from dpstats.synth.datasets import load_dataset
from dpstats.synth.schema import Schema

REPO = Path(__file__).resolve().parent.parent
PUBLIC = REPO / "replication"   # the shipped public corpus (the lines run without DPSTATS_CORPUS)
PREFIX = ".venv/bin/dpstats"
FENCE = re.compile(r"^```bash\s*\n(.*?)^```", re.S | re.M)


def _cli_block() -> list[str]:
    """The lines of README.md's one ```bash block made only of ``.venv/bin/dpstats`` commands."""
    blocks = [[ln for ln in b.splitlines() if ln.strip()] for b in FENCE.findall((REPO / "README.md").read_text("utf-8"))]
    ours = [b for b in blocks if b and all(ln.startswith(PREFIX + " ") for ln in b)]
    assert len(ours) == 1, f"expected one bash block of {PREFIX} commands in README.md, found {len(ours)}"
    return ours[0]


def _argv(line: str) -> list[str]:
    """The line's arguments after ``.venv/bin/dpstats``, without its trailing comment; no shell syntax allowed."""
    assert "  # " in line, f"README line without a comment saying what it does: {line}"
    words = shlex.split(line, comments=True)
    assert words[0] == PREFIX
    assert not {"|", ">", "<", "&&", ";", "&"} & set(words), f"shell syntax in a README line: {line}"
    return words[1:]


def _values(argv: list[str], flag: str) -> list[str]:
    """The values that follow ``flag`` up to the next option."""
    if flag not in argv:
        return []
    out = []
    for w in argv[argv.index(flag) + 1:]:
        if w.startswith("--"):
            break
        out.append(w)
    return out


def _one(argv: list[str], flag: str) -> str:
    vals = _values(argv, flag)
    assert len(vals) == 1, f"{flag} needs one value in {argv}"
    return vals[0]


def _key(argv: list[str]) -> str:
    key = argv[0] + (" " + argv[1] if argv[0] in ("corpus", "synth") else "")
    return key + (" --inference" if "--inference" in argv else "")


# ---- the checks, one per subcommand: (argv, completed process, working folder) ----

def _corpus_list(argv: list[str], p: subprocess.CompletedProcess, cwd: Path) -> None:
    corpus = Corpus(PUBLIC)
    studies = {s.study for s in corpus}
    assert p.stdout.rstrip().splitlines()[-1].startswith(f"{len(corpus)} instances in {len(studies)} studies")
    listed = {ln.split()[1] for ln in p.stdout.splitlines()[1:] if len(ln.split()) > 2}
    assert {s.id for s in corpus} <= listed


def _corpus_show(argv: list[str], p: subprocess.CompletedProcess, cwd: Path) -> None:
    spec = Corpus(PUBLIC).spec(argv[2])
    fields = dict(ln.strip().split(": ", 1) for ln in p.stdout.splitlines() if ": " in ln)
    assert fields["instance"] == spec.id and fields["study"] == spec.study and fields["task"] == spec.task
    assert spec.reported, "show an instance with published numbers"
    # the printed OLS estimate and standard error are the published ones, to the decimals printed in the paper
    for key, field in (("coef", "estimate"), ("se", "baseline")):
        if key in spec.reported:
            assert spec.reported[key].matches(float(fields[field])), (key, fields[field])


def _corpus_verify(argv: list[str], p: subprocess.CompletedProcess, cwd: Path) -> None:
    corpus = Corpus(cwd / _one(argv, "--corpus"))
    m = re.search(r"^(\d+) instances, (\d+) studies: (\d+) reported numbers reproduce, (\d+) do not$", p.stdout, re.M)
    assert m, p.stdout[-2000:]
    assert int(m[1]) == len(corpus) and int(m[2]) == len({s.study for s in corpus})
    assert int(m[3]) > 0 and int(m[4]) == 0


def _algorithms(argv: list[str], p: subprocess.CompletedProcess, cwd: Path) -> None:
    roster = json.loads(p.stdout)
    task = _one(argv, "--task")
    names = [a["name"] for a in roster]
    assert len(names) == len(set(names)) > 10 and {a["task"] for a in roster} == {task}
    assert all(a["citation"] and a["interpretation"] and isinstance(a["defaults"], dict) for a in roster)
    if task == "sce":
        assert "fwl_score" in names   # the API's default method


def _bench(argv: list[str], p: subprocess.CompletedProcess, cwd: Path) -> None:
    results = cwd / _one(argv, "--results")
    runs = read_runs(results)
    assert list(runs["status"]) == ["complete"] and (runs["completed"] == runs["planned"]).all()
    trials = read_trials(results)
    assert len(trials) == int(runs["completed"].iloc[0]) > 0
    corpus = Corpus(cwd / _one(argv, "--corpus")) if "--corpus" in argv else Corpus(PUBLIC)
    tasks = _values(argv, "--task") or ["sce", "linreg", "mean"]
    wanted = _values(argv, "--instance") or [s.id for t in tasks for s in corpus.specs(t)]
    assert set(trials["instance"]) == set(wanted) and set(trials["task"]) <= set(tasks)
    assert set(trials["corpus"]) == {corpus.name}
    assert set(trials["epsilon"]) == {float(e) for e in _values(argv, "--epsilon")}
    assert set(trials["seed"]) == set(range(int(_one(argv, "--trials"))))
    assert set(trials["status"]) <= {"ok", "declined"} and (trials["status"] == "ok").sum() > len(trials) / 2
    assert f"complete: {len(trials)} trials" in p.stdout + p.stderr


def _report(argv: list[str], p: subprocess.CompletedProcess, cwd: Path) -> None:
    out = cwd / _one(argv, "--out")
    trials = read_trials(cwd / _one(argv, "--results"))
    assert len(pd.read_csv(out / "trials.csv")) == len(trials)
    board = pd.read_csv(out / "leaderboard.csv")
    assert set(board["algorithm"]) <= set(trials["algorithm"]) and set(board["epsilon"]) == set(trials["epsilon"])
    overall = board[board["slice"] == "all"]
    for eps, rows in overall.groupby("epsilon"):
        assert sorted(rows["rank"])[0] == 1, eps
        assert (out / f"leaderboard-{rows['task'].iloc[0]}-eps{eps:g}.html").is_file()
    assert "leaderboard" in (out / "index.html").read_text("utf-8")


def _bench_inference(argv: list[str], p: subprocess.CompletedProcess, cwd: Path) -> None:
    results = cwd / _one(argv, "--results")
    runs = read_runs(results)
    assert list(runs["status"]) == ["complete"] and (runs["completed"] == runs["planned"]).all()
    iv = read_intervals(results)
    assert len(iv) == int(runs["completed"].iloc[0]) > 0 and set(iv["instance"]) == set(_values(argv, "--instance"))
    if "--preset" in argv and _one(argv, "--preset") == "quick":
        assert set(iv["epsilon"]) == {1.0, 10.0} and set(iv["seed"]) == {0, 1, 2}
    ok = iv[iv["status"] == "ok"]
    assert len(ok) > len(iv) / 2 and (ok["level"] == 0.95).all() and set(ok["covered"]) <= {0.0, 1.0}
    lows, highs = ok["low"].map(lambda v: v[0]), ok["high"].map(lambda v: v[0])
    assert (lows <= highs).all()


def _audit(argv: list[str], p: subprocess.CompletedProcess, cwd: Path) -> None:
    assert p.stdout.startswith(f"audit of {argv[1]} ({_one(argv, '--task')},")
    m = re.search(r"^epsilon_lower = ([\d.]+) vs claimed ([\d.]+): no violation found", p.stdout, re.M)
    assert m and float(m[1]) <= float(m[2]) == float(_one(argv, "--epsilon")), p.stdout
    counted = int(re.search(r"^trials = (\d+) releases", p.stdout, re.M)[1])
    pilots = re.search(r"pilots of (\d+) releases on each of (\d+) designs", p.stdout)
    assert counted + (int(pilots[1]) * int(pilots[2]) if pilots else 0) == int(_one(argv, "--trials"))


def _synth_run(argv: list[str], p: subprocess.CompletedProcess, cwd: Path) -> None:
    info = json.loads(p.stdout)
    data = pd.read_csv(cwd / _one(argv, "--data"), sep=None, engine="python")
    assert info["mechanism"] == argv[2] and info["epsilon"] == float(_one(argv, "--epsilon"))
    assert info["schema_standard"] is True and info["rows"] == len(data)
    schema = Schema.from_file(cwd / _one(argv, "--schema"))
    syn = pd.read_csv(cwd / _one(argv, "--out"))
    assert tuple(syn.columns) == schema.names and len(syn) == len(data)
    schema.validate(syn)   # every value inside the schema's levels and bounds
    assert all(syn[c].nunique() > 1 for c in schema.names)   # not a constant table


def _synth_bench(argv: list[str], p: subprocess.CompletedProcess, cwd: Path) -> None:
    out = cwd / _one(argv, "--out")
    mechs = set(_values(argv, "--mechanism"))
    res = pd.read_csv(out / "results.csv", keep_default_na=False, na_values=[""])
    runs = res[res["mechanism"] != "original"]
    assert set(runs["mechanism"]) == mechs and (res["status"] == "ok").all()
    assert set(runs["dataset"]) == set(_values(argv, "--dataset"))
    assert set(runs["epsilon"]) == {float(e) for e in _values(argv, "--epsilon")}
    assert set(runs["metric"]) == {"ind", "pair", "coracc", "f1"} and runs["value"].between(0, 1).all()
    summ = pd.read_csv(out / "summary.csv")
    assert set(summ["mechanism"]) == mechs and set(summ["group"]) == {"Ind", "Pair", "Corr", "F1", "GT"}
    figures = {f.name for f in (out / "figures").iterdir()}
    assert {f"metrics_{d}.png" for d in _values(argv, "--dataset")} <= figures
    if "--sample" in argv:   # the F1 classifier's held-out rows are part of the sample
        assert int(_one(argv, "--sample")) < len(load_dataset(_values(argv, "--dataset")[0])[0])


CHECKS: dict[str, Callable[[list[str], subprocess.CompletedProcess, Path], None]] = {
    "corpus list": _corpus_list,
    "corpus show": _corpus_show,
    "corpus verify": _corpus_verify,
    "algorithms": _algorithms,
    "bench": _bench,
    "report": _report,
    "bench --inference": _bench_inference,
    "audit": _audit,
    "synth run": _synth_run,
    "synth bench": _synth_bench,
}


PATH_FLAGS = ("--corpus", "--data", "--schema")   # options whose value the line reads from the clone


def _link_inputs(lines: list[list[str]], cwd: Path) -> None:
    """Link into ``cwd`` the top-level entries of the clone that the lines read (``examples``, ``dpstats``)."""
    for argv in lines:
        for flag in PATH_FLAGS:
            for v in _values(argv, flag):
                assert (REPO / v).exists(), f"{' '.join(argv)}: {v} is not in the clone"
                top = Path(v).parts[0]
                if not (cwd / top).exists():
                    (cwd / top).symlink_to(REPO / top)


def test_readme_block_parses() -> None:
    lines = [_argv(ln) for ln in _cli_block()]
    assert len(lines) >= 10
    assert [k for k in map(_key, lines) if k not in CHECKS] == []
    # nothing the block writes goes into the clone's tracked files: outputs are under out/ (git-ignored)
    for argv in lines:
        for flag in ("--out", "--results"):
            for v in _values(argv, flag):
                assert Path(v).parts[0] == "out", argv


@pytest.mark.slow
def test_readme_cli_block_runs(tmp_path: Path) -> None:
    lines = [_argv(ln) for ln in _cli_block()]
    _link_inputs(lines, tmp_path)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    env.pop("DPSTATS_CORPUS", None)   # the public corpus is the shipped one
    took = []
    for argv in lines:
        t0 = time.monotonic()
        p = subprocess.run([sys.executable, "-m", "dpstats", *argv], cwd=tmp_path, env=env, capture_output=True,
                           text=True, timeout=300)
        took.append((time.monotonic() - t0, " ".join(argv[:2])))
        assert p.returncode == 0, f"{' '.join(argv)}\n{p.stdout[-2000:]}\n{p.stderr[-4000:]}"
        CHECKS[_key(argv)](argv, p, tmp_path)
    print("\n".join(f"{s:6.1f} s  {what}" for s, what in took))
