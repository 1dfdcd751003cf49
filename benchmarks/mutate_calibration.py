"""Mutation testing of the privacy calibration: does the test suite catch a wrong noise scale?

The script finds every *calibration site* of the privacy code with :mod:`ast`
(``dpstats/algorithms/**/*.py``, ``dpstats/privacy/mechanisms.py``, the grid
quantiles of ``dpstats/privacy/quantiles.py``, and the conversions of
``dpstats/privacy/conversions.py``, the accountants of ``accounting.py`` and the budget parts of
``composition.py``),
makes one mutant per site, runs the relevant tests on each mutant in an
isolated copy of the package and reports which mutants the tests kill.

Mutant kinds
------------
``noise_scale``
    The scale of a noise draw halved (= sensitivity halved): ``rng.normal``
    and ``rng.laplace`` (their ``scale``), ``s * rng.normal()`` and
    ``s * rng.standard_normal(...)`` (the factor ``s``), and calls of the
    package's noise helpers (any function with a ``sigma`` or ``scale`` and an
    ``rng`` parameter: ``gaussian_noise``, ``laplace_noise``, ``noisy_gram``).
``em_epsilon``
    The epsilon argument doubled in each call of an exponential-mechanism or
    private-quantile function (any function of the scanned files with an
    ``eps*`` and an ``rng`` parameter, found automatically:
    ``exponential_mechanism``, ``private_quantile*``, ``private_grid_index``,
    ``private_grid_cell``, ``noisy_max_bin``, ``sample_depth_region`` ...).
``sensitivity``
    The sensitivity passed to ``gaussian_sigma`` / ``acc.gaussian_sigma`` /
    ``acc.spend_gaussian`` and to the charging calls ``acc.gaussian`` /
    ``acc.laplace`` / ``acc.exponential`` (``sens2`` of ``acc.gaussian_joint``,
    whose block ``sigmas`` are ``noise_scale`` sites) and to any other
    function with a ``sensitivity`` and an ``rng`` parameter (sce's Theil-Sen
    medians, told the score sensitivity ``k``) halved.
``eps_share``
    The result of ``acc.pure_epsilon(fraction)`` doubled.
``charge``
    An accountant charge (``spend_gaussian``, ``spend_pure``, ``spend_rho``,
    ``spend``, ``_charge`` and the package's wrappers around them such as
    ``spend_em``) replaced by the no-op expression ``None``.
``conversion``
    In ``dpstats/privacy/conversions.py`` and ``accounting.py``: the value returned by ``gaussian_sigma`` and
    ``laplace_scale`` halved, by ``pure_epsilon``, ``gdp_mu`` and
    ``zcdp_rho`` doubled.

Each mutant is one text edit at the ``ast`` position of the expression
(``(expr) * 0.5``, ``(expr) * 2.0`` or ``None``); the rest of the file is kept
byte for byte.

Isolation
---------
``dpstats/`` and ``tests/`` are copied once to a temporary directory (and
``replication/`` linked), so the working tree is never touched. Each pytest
run has ``PYTHONPATH`` and its working directory set to the copy, byte code
writing off (two mutants of one file can have the same size and mtime second),
and a tiny plugin that aborts the run unless ``dpstats.__file__`` lies in the
copy (the venv's editable install points at the working tree).

Test selection
--------------
One baseline run of the selected test files on the unmutated copy under
``coverage`` (one context per test function) maps each source line to the
tests that execute it; a mutant then runs only those tests, ordered
calibration tests first, then fastest first, with ``-x``. Tests that fail on
the baseline are left out (and reported). Without ``coverage``
(``--no-coverage``) the test files are chosen by task prefix (``sce_*`` ->
sce tests, ...; the shared modules -> all).

Examples
--------
List the mutants without running anything::

    .venv/bin/python benchmarks/mutate_calibration.py --list

The full run (about half an hour on two cores), with the table for the docs::

    nice -n 10 .venv/bin/python benchmarks/mutate_calibration.py \\
        --json results/mutation.json --markdown docs/privacy_testing_mutants.inc

Exit status 0 when every mutant is killed or explained in
``benchmarks/mutate_calibration_survivors.toml``, 1 otherwise, 2 on a
set-up error (baseline collection failed, isolation broken).
"""

from __future__ import annotations

import argparse
import ast
import concurrent.futures as cf
import dataclasses
import fnmatch
import glob
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import tomllib
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SURVIVORS_TOML = Path(__file__).resolve().with_name("mutate_calibration_survivors.toml")

SOURCE_GLOBS = ["dpstats/algorithms/**/*.py", "dpstats/privacy/mechanisms.py", "dpstats/privacy/quantiles.py",
                "dpstats/privacy/accounting.py", "dpstats/privacy/composition.py", "dpstats/privacy/conversions.py"]
#: the conversions and the accountants' charging calls (a budget part's included)
PRIVACY_FILES = ("dpstats/privacy/accounting.py", "dpstats/privacy/composition.py", "dpstats/privacy/conversions.py")
DEFAULT_TESTS = [
    "tests/algorithms/test_calibration_*.py",
    "tests/algorithms/*/test_calibration*.py",
    "tests/algorithms/*/test_algorithms.py",
    "tests/algorithms/test_details_allowlist.py",
    "tests/algorithms/test_synth_estimate.py",
    "tests/privacy/test_*.py",
]

NOISE_METHODS = {"normal", "laplace"}  # Generator methods with a (loc, scale, size) signature
UNIT_NOISE_METHODS = {"normal", "standard_normal"}  # called without a scale, multiplied by one
CHARGE_METHODS = {"spend_gaussian", "spend_pure", "spend_rho", "spend", "_charge"}
#: the accountants' charging calls (draw and charge in one call): their sensitivity argument is halved
#: (``sigma``/``scale``/``epsilon`` are found from their signatures like any noise or EM helper)
CHARGING_CALLS = {"gaussian": "sensitivity", "laplace": "sensitivity", "exponential": "sensitivity",
                  "gaussian_joint": "sens2"}
ENTRY_POINTS = {"run", "_run", "_setup"}  # algorithm entry points: their epsilon is the whole budget
CONVERSIONS = {"gaussian_sigma": 0.5, "laplace_scale": 0.5, "pure_epsilon": 2.0, "gdp_mu": 2.0, "zcdp_rho": 2.0}
TASK_PREFIXES = ("sce", "linreg", "mean")


# --------------------------------------------------------------------------
# discovery
# --------------------------------------------------------------------------


@dataclasses.dataclass
class Mutant:
    """One source edit at a calibration site."""

    file: str  # path relative to the repository root
    line: int
    col: int
    kind: str
    function: str  # enclosing function (qualified), "" at module level
    expr: str  # the original expression, whitespace collapsed
    replacement: str  # the mutated expression, whitespace collapsed
    start: int  # byte offsets of the edit in the file
    end: int
    new_text: str  # the bytes (decoded) that replace [start, end)
    lines: tuple[int, int]  # enclosing statement's first line .. the expression's last line
    status: str = "pending"  # killed | survived | timeout | error | not covered | explained
    by: str = ""
    seconds: float = 0.0
    reason: str = ""

    @property
    def ident(self) -> str:
        return f"{self.file}:{self.line}:{self.col}:{self.kind}"

    def row(self) -> dict:
        d = dataclasses.asdict(self)
        for k in ("start", "end", "new_text"):
            d.pop(k)
        d["id"] = self.ident
        return d


def _collapse(s: str) -> str:
    return re.sub(r"\s+", " ", s).strip()


def _params(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    a = fn.args
    return [p.arg for p in a.posonlyargs + a.args + a.kwonlyargs]


class _Signatures:
    """Functions of the scanned files, classified by their parameters."""

    def __init__(self, trees: dict[str, ast.Module]):
        self.em: dict[str, str] = {}  # name -> epsilon parameter
        self.noise: dict[str, str] = {}  # name -> sigma/scale parameter
        self.sens: dict[str, str] = {}  # name -> sensitivity parameter of a mechanism helper (not a charging call)
        self.params: dict[str, list[str]] = {}
        self.wrappers: set[str] = set()  # functions that charge an accountant passed in
        self.ambiguous: set[str] = set()
        for tree in trees.values():
            for fn in ast.walk(tree):
                if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    continue
                ps = _params(fn)
                if fn.name in ENTRY_POINTS:
                    continue
                if "rng" in ps:
                    eps = [p for p in ps if p.startswith("eps")]
                    if eps:
                        self._add(self.em, fn.name, eps[0], ps)
                    scale = [p for p in ps if p in ("sigma", "scale")]
                    if scale:
                        self._add(self.noise, fn.name, scale[0], ps)
                    if "sensitivity" in ps and fn.name not in CHARGING_CALLS:
                        self._add(self.sens, fn.name, "sensitivity", ps)
                if "acc" in ps and fn.name not in CHARGE_METHODS and _is_charge_wrapper(fn):
                    self.wrappers.add(fn.name)

    def _add(self, table: dict[str, str], name: str, param: str, ps: list[str]) -> None:
        prev = self.params.get(name)
        if name in self.ambiguous or (prev is not None and prev != ps and (table.get(name) != param or prev.index(param) != ps.index(param))):
            # two functions of one name that bind the parameter differently: leave the name out
            self.ambiguous.add(name)
            table.pop(name, None)
            return
        table[name] = param
        self.params[name] = ps


def _is_charge_wrapper(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A function whose whole body (after the docstring) is one charge of the ``acc`` passed in (``spend_em``)."""
    body = list(fn.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    if len(body) != 1 or not isinstance(body[0], ast.Expr) or not isinstance(body[0].value, ast.Call):
        return False
    f = body[0].value.func
    return isinstance(f, ast.Attribute) and f.attr in CHARGE_METHODS and isinstance(f.value, ast.Name) and f.value.id == "acc"


def _arg(call: ast.Call, pos: int, name: str) -> ast.expr | None:
    """The argument bound to parameter ``name`` at position ``pos`` (None when absent or starred)."""
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    if any(isinstance(a, ast.Starred) for a in call.args[: pos + 1]):
        return None
    if pos < len(call.args):
        return call.args[pos]
    return None


def _called_name(call: ast.Call) -> str | None:
    f = call.func
    if isinstance(f, ast.Name):
        return f.id
    if isinstance(f, ast.Attribute):
        return f.attr
    return None


class _Finder(ast.NodeVisitor):
    def __init__(self, rel: str, text: str, sigs: _Signatures):
        self.rel = rel
        self.text = text
        self.raw = text.encode("utf-8")
        starts = [0]
        for ln in self.raw.splitlines(keepends=True):
            starts.append(starts[-1] + len(ln))
        self.line_starts = starts
        self.sigs = sigs
        self.stack: list[str] = []
        self.stmt: list[ast.stmt] = []
        self.found: list[Mutant] = []
        self.seen: set[tuple[int, int, str]] = set()

    # positions ------------------------------------------------------------
    def _off(self, line: int, col: int) -> int:
        return self.line_starts[line - 1] + col

    def _segment(self, node: ast.AST) -> tuple[int, int, str]:
        a = self._off(node.lineno, node.col_offset)
        b = self._off(node.end_lineno, node.end_col_offset)
        return a, b, self.raw[a:b].decode("utf-8")

    def _add(self, node: ast.AST, kind: str, how: str | float) -> None:
        a, b, src = self._segment(node)
        key = (a, b, kind)
        if key in self.seen:
            return
        self.seen.add(key)
        if how == "none":
            new = "None"
        else:
            new = f"({src}) * {how!r}"
        first = self.stmt[-1].lineno if self.stmt else node.lineno
        self.found.append(
            Mutant(
                file=self.rel, line=node.lineno, col=node.col_offset, kind=kind,
                function=".".join(self.stack), expr=_collapse(src), replacement=_collapse(new),
                start=a, end=b, new_text=new, lines=(first, node.end_lineno),
            )
        )

    # scopes ---------------------------------------------------------------
    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.stack.append(node.name)
        self.generic_visit(node)
        self.stack.pop()

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self.stack.append(node.name)
        if self.rel.endswith(PRIVACY_FILES) and node.name in CONVERSIONS:
            rets = [r for r in ast.walk(node) if isinstance(r, ast.Return) and r.value is not None]
            if rets:
                last = max(rets, key=lambda r: (r.lineno, r.col_offset))
                self.stmt.append(last)
                self._add(last.value, "conversion", CONVERSIONS[node.name])
                self.stmt.pop()
        self.generic_visit(node)
        self.stack.pop()

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def generic_visit(self, node: ast.AST) -> None:
        if isinstance(node, ast.stmt):
            self.stmt.append(node)
            super().generic_visit(node)
            self.stmt.pop()
        else:
            super().generic_visit(node)

    # sites ----------------------------------------------------------------
    def visit_BinOp(self, node: ast.BinOp) -> None:
        if isinstance(node.op, ast.Mult):
            for unit, other in ((node.right, node.left), (node.left, node.right)):
                if (
                    isinstance(unit, ast.Call)
                    and isinstance(unit.func, ast.Attribute)
                    and unit.func.attr in UNIT_NOISE_METHODS
                    and _arg(unit, 1, "scale") is None
                ):
                    self._add(other, "noise_scale", 0.5)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        name = _called_name(node)
        f = node.func
        sigs = self.sigs
        in_privacy = self.rel.endswith(PRIVACY_FILES)
        charging = any(kw.arg == "sensitivity" for kw in node.keywords)  # acc.laplace(...), not rng.laplace(...)
        if isinstance(f, ast.Attribute) and name in NOISE_METHODS and not charging:
            s = _arg(node, 1, "scale")
            if s is not None:
                self._add(s, "noise_scale", 0.5)
        if name in sigs.noise and name not in NOISE_METHODS:
            p = sigs.noise[name]
            s = _arg(node, sigs.params[name].index(p), p)
            if s is not None:
                self._add(s, "noise_scale", 0.5)
        if name in sigs.sens and not in_privacy:
            # a mechanism helper told the score's sensitivity (sce's Theil-Sen median with k matchings)
            s = _arg(node, sigs.params[name].index("sensitivity"), "sensitivity")
            if s is not None:
                self._add(s, "sensitivity", 0.5)
        if name in sigs.em:
            p = sigs.em[name]
            e = _arg(node, sigs.params[name].index(p), p)
            if e is not None:
                self._add(e, "em_epsilon", 2.0)
        if name == "gaussian_sigma" and not in_privacy:
            s = _arg(node, 0, "sensitivity")
            if s is not None:
                self._add(s, "sensitivity", 0.5)
        if name == "spend_gaussian" and isinstance(f, ast.Attribute):
            s = _arg(node, 1, "sensitivity")
            if s is not None:
                self._add(s, "sensitivity", 0.5)
        if name in CHARGING_CALLS and isinstance(f, ast.Attribute) and not in_privacy:
            s = _arg(node, 99, CHARGING_CALLS[name])  # keyword-only
            if s is not None:
                self._add(s, "sensitivity", 0.5)
            if name == "gaussian_joint":
                s = _arg(node, 99, "sigmas")
                if isinstance(s, (ast.List, ast.Tuple)):
                    for el in s.elts:
                        self._add(el, "noise_scale", 0.5)
        if name == "pure_epsilon" and isinstance(f, ast.Attribute) and not in_privacy:
            self._add(node, "eps_share", 2.0)
        is_charge = (isinstance(f, ast.Attribute) and name in CHARGE_METHODS) or (
            isinstance(f, ast.Name) and name in sigs.wrappers
        )
        if is_charge and not (in_privacy and name != "_charge"):
            self._add(node, "charge", "none")
        self.generic_visit(node)


def discover(root: Path, file_filter: list[str] | None = None) -> list[Mutant]:
    """All mutants of the calibration sites under ``root`` (sorted by file and position)."""
    paths: list[Path] = []
    for g in SOURCE_GLOBS:
        paths.extend(sorted(root.glob(g)))
    texts = {p.relative_to(root).as_posix(): p.read_text(encoding="utf-8") for p in paths}
    trees = {rel: ast.parse(t, filename=rel) for rel, t in texts.items()}
    sigs = _Signatures(trees)
    out: list[Mutant] = []
    for rel, tree in trees.items():
        if file_filter and not any(fnmatch.fnmatch(rel, pat) or pat in rel for pat in file_filter):
            continue
        fd = _Finder(rel, texts[rel], sigs)
        fd.visit(tree)
        out.extend(fd.found)
    out.sort(key=lambda m: (m.file, m.start, m.kind))
    return out


def apply(text: str, m: Mutant) -> str:
    raw = text.encode("utf-8")
    return (raw[: m.start] + m.new_text.encode("utf-8") + raw[m.end :]).decode("utf-8")


# --------------------------------------------------------------------------
# explained survivors
# --------------------------------------------------------------------------


def load_explained(path: Path) -> list[dict]:
    """Entries ``{file, function, kind, expr, reason}`` (``file`` and ``reason`` required)."""
    if not path.exists():
        return []
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    entries = data.get("survivor", [])
    for e in entries:
        if "file" not in e or "reason" not in e:
            raise SystemExit(f"{path}: every [[survivor]] needs file and reason: {e}")
    return entries


def explanation(m: Mutant, entries: list[dict]) -> str | None:
    for e in entries:
        if e["file"] != m.file:
            continue
        if "function" in e and e["function"] != m.function:
            continue
        if "kind" in e and e["kind"] != m.kind:
            continue
        if "expr" in e and _collapse(e["expr"]) != m.expr:
            continue
        return e["reason"]
    return None


# --------------------------------------------------------------------------
# the isolated copy and the runs
# --------------------------------------------------------------------------

_CHECK_PLUGIN = textwrap.dedent(
    '''
    """Abort the run unless dpstats is imported from this copy (written by mutate_calibration.py)."""
    import os
    import sys

    import dpstats

    _root = os.path.realpath(os.environ["DPSTATS_MUTATION_ROOT"])
    if not os.path.realpath(dpstats.__file__).startswith(_root + os.sep):
        sys.stderr.write(f"ISOLATION BROKEN: dpstats from {dpstats.__file__}, expected under {_root}\\n")
        os._exit(97)
    '''
)
ISOLATION_RC = 97


def make_copy(src_root: Path, dst: Path) -> None:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache")
    shutil.copytree(src_root / "dpstats", dst / "dpstats", ignore=ignore)
    shutil.copytree(src_root / "tests", dst / "tests", ignore=ignore)
    for f in ("pyproject.toml",):
        shutil.copy2(src_root / f, dst / f)
    (dst / "replication").symlink_to(src_root / "replication", target_is_directory=True)
    (dst / "_mutcheck.py").write_text(_CHECK_PLUGIN, encoding="utf-8")


def child_env(root: Path) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(root) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["DPSTATS_MUTATION_ROOT"] = str(root)
    env["DPSTATS_CORPUS"] = env.get("DPSTATS_CORPUS", "")  # keep a user's override, never a stale one
    if not env["DPSTATS_CORPUS"]:
        env.pop("DPSTATS_CORPUS")
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    env.setdefault("MKL_NUM_THREADS", "1")
    return env


def run_child(cmd: list[str], root: Path, timeout: float, niceness: int) -> tuple[int | None, str, float]:
    """Run ``cmd`` in ``root``; returns (return code or None on timeout, output, seconds)."""
    t0 = time.monotonic()

    def pre() -> None:
        if niceness:
            os.nice(niceness)

    p = subprocess.Popen(
        cmd, cwd=root, env=child_env(root), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, start_new_session=True, preexec_fn=pre,
    )
    try:
        out, _ = p.communicate(timeout=timeout)
        rc: int | None = p.returncode
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)  # the child's own process group
        out, _ = p.communicate()
        rc = None
    return rc, out or "", time.monotonic() - t0


def check_isolation(root: Path) -> str:
    rc, out, _ = run_child(
        [sys.executable, "-c", "import _mutcheck, dpstats; print(dpstats.__file__)"], root, 120, 0
    )
    if rc != 0:
        raise SystemExit(f"isolation check failed (rc {rc}):\n{out}")
    return out.strip().splitlines()[-1]


PYTEST = ["-m", "pytest", "-p", "no:cacheprovider", "-p", "_mutcheck", "-q", "--no-header"]


def _testfile_of_context(ctx: str, modules: dict[str, str]) -> str | None:
    """Map a coverage ``test_function`` context (``tests.test_x.Class.test_y``) to a pytest node id."""
    parts = ctx.split(".")
    for i in range(len(parts), 0, -1):
        mod = ".".join(parts[:i])
        if mod in modules:
            rest = parts[i:]
            return "::".join([modules[mod]] + rest) if rest else None
    return None


@dataclasses.dataclass
class Baseline:
    tests: list[str]  # passing node ids (function level) in run order
    failing: list[str]
    seconds: dict[str, float]  # node id -> baseline seconds (summed over parametrisations)
    lines: dict[str, dict[int, set[str]]] | None  # source rel -> line -> node ids (None without coverage)
    wall: float


def _junit(path: Path) -> tuple[dict[str, float], set[str]]:
    secs: dict[str, float] = {}
    bad: set[str] = set()
    for tc in ET.parse(path).getroot().iter("testcase"):
        cls = tc.get("classname", "")
        name = re.sub(r"\[.*\]$", "", tc.get("name", ""))
        # classname "tests.test_x" or "tests.test_x.TestC"
        parts = cls.split(".")
        i = next((k for k in range(len(parts), 0, -1) if parts[k - 1].startswith("test_")), len(parts))
        nodeid = "/".join(parts[:i]) + ".py::" + "::".join(parts[i:] + [name])
        secs[nodeid] = secs.get(nodeid, 0.0) + float(tc.get("time", 0.0) or 0.0)
        if tc.find("failure") is not None or tc.find("error") is not None:
            bad.add(nodeid)
    return secs, bad


def run_baseline(root: Path, test_files: list[str], use_coverage: bool, niceness: int, timeout: float) -> Baseline:
    junit = root / "_baseline.xml"
    args = [*PYTEST, "--junitxml", str(junit), "-o", "junit_family=xunit1", *test_files]
    if use_coverage:
        rc_file = root / "_coveragerc"
        rc_file.write_text(
            "[run]\ndynamic_context = test_function\nsource = dpstats\ndata_file = "
            + str(root / "_coverage")
            + "\n",
            encoding="utf-8",
        )
        cmd = [sys.executable, "-m", "coverage", "run", "--rcfile", str(rc_file), *args]
    else:
        cmd = [sys.executable, *args]
    rc, out, secs = run_child(cmd, root, timeout, niceness)
    if rc == ISOLATION_RC or rc is None or not junit.exists():
        raise SystemExit(f"baseline run failed (rc {rc}):\n{out[-4000:]}")
    seconds, bad = _junit(junit)
    order = sorted(seconds, key=lambda t: (_priority(t), seconds[t]))
    lines = None
    if use_coverage:
        import coverage

        data = coverage.CoverageData(basename=str(root / "_coverage"))
        data.read()
        modules = {}
        for tf in test_files:
            modules[tf[:-3].replace("/", ".")] = tf
        lines = {}
        for measured in data.measured_files():
            rel = Path(measured).resolve().relative_to(root.resolve()).as_posix() if str(measured).startswith(str(root)) else None
            if rel is None:
                continue
            table: dict[int, set[str]] = {}
            for ln, ctxs in data.contexts_by_lineno(measured).items():
                ids = {n for n in (_testfile_of_context(c, modules) for c in ctxs if c) if n}
                if ids:
                    table[ln] = ids
            lines[rel] = table
    return Baseline([t for t in order if t not in bad], sorted(bad), seconds, lines, secs)


def _priority(nodeid: str) -> int:
    f = nodeid.split("::")[0]
    if "calibration" in f:
        return 0
    if "test_alg_" in f:
        return 1
    return 2


def _prefix_tests(m: Mutant, base: Baseline) -> list[str]:
    stem = Path(m.file).stem.lstrip("_")
    task = next((t for t in TASK_PREFIXES if stem.startswith(t)), None)
    if task is None or m.file.endswith(("mechanisms.py", "accounting.py", "composition.py", "conversions.py")):
        return list(base.tests)
    return [t for t in base.tests if task in t.split("::")[0] or "alg_" not in t.split("::")[0]]


def tests_for(m: Mutant, base: Baseline) -> list[str]:
    if base.lines is None:
        return _prefix_tests(m, base)
    table = base.lines.get(m.file, {})
    ids: set[str] = set()
    for ln in range(m.lines[0], m.lines[1] + 1):
        ids |= table.get(ln, set())
    return [t for t in base.tests if t in ids]


_FAIL = re.compile(r"^(FAILED|ERROR) (\S+)", re.M)


def run_mutant(m: Mutant, root: Path, pristine: str, base: Baseline, opts: argparse.Namespace) -> None:
    tests = tests_for(m, base)
    if not tests:
        m.status, m.by = "not covered", "no selected test executes this line"
        return
    target = root / m.file
    target.write_text(apply(pristine, m), encoding="utf-8")
    try:
        budget = opts.timeout or max(60.0, 3.0 * sum(base.seconds.get(t, 1.0) for t in tests) + 30.0)
        rc, out, secs = run_child([sys.executable, *PYTEST, "-x", *tests], root, budget, opts.nice)
    finally:
        target.write_text(pristine, encoding="utf-8")
    m.seconds = round(secs, 1)
    if rc == ISOLATION_RC:
        raise SystemExit(f"isolation broken while running {m.ident}:\n{out[-2000:]}")
    if rc is None:
        m.status, m.by = "timeout", f"killed by timeout ({budget:.0f} s)"
    elif rc == 0:
        m.status, m.by = "survived", f"{len(tests)} test(s) passed"
    elif rc in (1, 2):
        hit = _FAIL.search(out)
        m.status = "killed"
        m.by = hit.group(2) if hit else f"pytest exit {rc}"
        if rc == 2 and not hit:
            m.status, m.by = "error", "collection or import error: " + out.strip().splitlines()[-1][:200]
    else:
        m.status, m.by = "error", f"pytest exit {rc}: " + (out.strip().splitlines() or [""])[-1][:200]


# --------------------------------------------------------------------------
# reporting
# --------------------------------------------------------------------------

KILLED = {"killed", "timeout", "error"}


def _short(s: str, k: int = 70) -> str:
    return s if len(s) <= k else s[: k - 1] + "…"


def print_table(ms: list[Mutant], file=sys.stdout) -> None:
    for m in ms:
        by = m.by if m.status != "explained" else m.reason
        print(f"{m.file}:{m.line:<4} {m.kind:<12} {m.status:<11} {_short(m.expr, 60):<60}  {_short(by, 90)}", file=file)


def counts(ms: list[Mutant]) -> dict[str, int]:
    c: dict[str, int] = {}
    for m in ms:
        c[m.status] = c.get(m.status, 0) + 1
    return c


def write_markdown(ms: list[Mutant], path: Path, meta: dict) -> None:
    def esc(s: str) -> str:
        return s.replace("|", "\\|").replace("`", "'")

    c = counts(ms)
    lines = [
        f"Mutation run of {meta['date']} on commit `{meta['commit']}`: {len(ms)} mutants, "
        + ", ".join(f"{v} {k}" for k, v in sorted(c.items()))
        + f"; {meta['wall_minutes']:.1f} min wall time with {meta['jobs']} job(s).",
        "",
        "| file | line | function | kind | mutant | result | killed by / reason |",
        "|---|---|---|---|---|---|---|",
    ]
    for m in ms:
        by = m.reason if m.status == "explained" else m.by
        what = f"drop `{esc(_short(m.expr, 70))}`" if m.kind == "charge" else f"`{esc(_short(m.replacement, 70))}`"
        lines.append(
            f"| `{Path(m.file).name}` | {m.line} | `{m.function}` | {m.kind} | {what} | {m.status} | {esc(by)} |"
        )
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _commit(root: Path) -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True)
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "dpstats", "tests"], cwd=root, capture_output=True, text=True
        ).stdout.strip()
        return out.stdout.strip() + ("+uncommitted" if dirty else "")
    except OSError:
        return "unknown"


# --------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--file", action="append", help="only mutants of files matching this glob or substring (repeatable)")
    ap.add_argument("--kind", action="append", help="only mutants of this kind (repeatable)")
    ap.add_argument("--mutant", action="append", help="only the mutant with this id (file:line:col:kind; repeatable)")
    ap.add_argument("--tests", action="append", help="test file globs (repeatable; default: calibration, alg, allow-list, synth-estimate, privacy)")
    ap.add_argument("--list", action="store_true", help="list the mutants and exit")
    ap.add_argument("--json", type=Path, help="write the results as JSON")
    ap.add_argument("--markdown", type=Path, help="write the result table as Markdown (for the docs)")
    ap.add_argument("--jobs", type=int, default=1, help="mutants run in parallel (default 1)")
    ap.add_argument("--timeout", type=float, default=0.0, help="seconds per mutant (default: 3x the baseline time of its tests + 30, at least 60)")
    ap.add_argument("--nice", type=int, default=10, help="niceness of the pytest children (default 10)")
    ap.add_argument("--no-coverage", action="store_true", help="choose tests by task prefix instead of coverage")
    ap.add_argument("--survivors", type=Path, default=SURVIVORS_TOML, help="TOML of explained survivors")
    ap.add_argument("--keep", action="store_true", help="keep the temporary copies")
    ap.add_argument("--survivors-of", type=Path, help="only the mutants that survived (or were not covered) in this previous --json result, matched by file, function, kind and expression")
    ap.add_argument("--from-json", type=Path, help="re-render a previous --json result (re-applying the survivors TOML) without running")
    opts = ap.parse_args(argv)

    if opts.from_json:
        return rerender(opts)

    def select(root: Path) -> list[Mutant]:
        ms = discover(root, opts.file)
        if opts.kind:
            ms = [m for m in ms if m.kind in opts.kind]
        if opts.mutant:
            ms = [m for m in ms if m.ident in opts.mutant]
        if opts.survivors_of:
            prev = json.loads(opts.survivors_of.read_text(encoding="utf-8"))["mutants"]
            keys = {(r["file"], r["function"], r["kind"], r["expr"]) for r in prev if r["status"] in ("survived", "not covered", "explained")}
            ms = [m for m in ms if (m.file, m.function, m.kind, m.expr) in keys]
        return ms

    mutants = select(ROOT)
    if opts.list:
        for m in mutants:
            print(f"{m.ident:<58} {m.function:<40} {_short(m.expr, 50)}  ->  {_short(m.replacement, 60)}")
        print(f"{len(mutants)} mutants")
        return 0
    if not mutants:
        print("no mutants selected", file=sys.stderr)
        return 2

    use_cov = not opts.no_coverage
    if use_cov:
        try:
            import coverage  # noqa: F401
        except ImportError:
            print("coverage is not installed: choosing tests by task prefix", file=sys.stderr)
            use_cov = False

    patterns = opts.tests or DEFAULT_TESTS
    test_files = sorted({Path(p).relative_to(ROOT).as_posix() for g in patterns for p in glob.glob(str(ROOT / g))})
    if not test_files:
        print("no test files matched", file=sys.stderr)
        return 2

    t0 = time.monotonic()
    commit = _commit(ROOT)  # the state the copy is taken from
    tmp = Path(tempfile.mkdtemp(prefix="dpstats_mutation_"))
    try:
        pristine_root = tmp / "pristine"
        make_copy(ROOT, pristine_root)
        where = check_isolation(pristine_root)
        print(f"isolated copy: dpstats imported from {where}", flush=True)
        # the mutants are positions in the copy's sources (the working tree may change under us)
        mutants = select(pristine_root)
        print(f"test files: {', '.join(test_files)}", flush=True)
        print(f"baseline run{' under coverage' if use_cov else ''} ...", flush=True)
        base = run_baseline(pristine_root, test_files, use_cov, opts.nice, 3600.0)
        print(f"baseline: {len(base.tests)} passing test functions, {len(base.failing)} failing (left out), {base.wall:.0f} s", flush=True)
        for f in base.failing:
            print(f"  failing on the unmutated code: {f}", flush=True)

        pristine = {m.file: (pristine_root / m.file).read_text(encoding="utf-8") for m in mutants}
        roots: queue.Queue[Path] = queue.Queue()
        for j in range(max(1, opts.jobs)):
            r = tmp / f"job{j}"
            shutil.copytree(pristine_root, r, symlinks=True, ignore=shutil.ignore_patterns("_coverage*", "_baseline.xml"))
            roots.put(r)

        explained = load_explained(opts.survivors)
        done = 0

        def work(m: Mutant) -> Mutant:
            r = roots.get()
            try:
                run_mutant(m, r, pristine[m.file], base, opts)
            finally:
                roots.put(r)
            return m

        with cf.ThreadPoolExecutor(max_workers=max(1, opts.jobs)) as ex:
            for m in ex.map(work, mutants):
                done += 1
                if m.status in ("survived", "not covered"):
                    why = explanation(m, explained)
                    if why:
                        m.status, m.reason = "explained", why
                print(f"[{done}/{len(mutants)}] {m.ident} {m.status} ({m.seconds:.0f} s) {_short(m.by, 80)}", flush=True)
    finally:
        if opts.keep:
            print(f"copies kept in {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)

    wall = time.monotonic() - t0
    meta = {
        "date": time.strftime("%Y-%m-%d"),
        "commit": commit,
        "wall_minutes": wall / 60,
        "jobs": opts.jobs,
        "test_files": test_files,
        "baseline_failing": base.failing,
        "baseline_seconds": base.wall,
        "coverage": use_cov,
    }
    return report(mutants, meta, opts)


def report(mutants: list[Mutant], meta: dict, opts: argparse.Namespace) -> int:
    """Print the table and summary, write --json / --markdown; 1 when an unexplained mutant survives."""
    print()
    print_table(mutants)
    c = counts(mutants)
    unexplained = [m for m in mutants if m.status in ("survived", "not covered")]
    print()
    print(f"{len(mutants)} mutants: " + ", ".join(f"{v} {k}" for k, v in sorted(c.items())) + f"; wall time {meta['wall_minutes']:.1f} min")
    if opts.json:
        opts.json.parent.mkdir(parents=True, exist_ok=True)
        opts.json.write_text(json.dumps({"meta": meta, "counts": c, "mutants": [m.row() for m in mutants]}, indent=1), encoding="utf-8")
    if opts.markdown:
        opts.markdown.parent.mkdir(parents=True, exist_ok=True)
        write_markdown(mutants, opts.markdown, meta)
    if unexplained:
        print(f"{len(unexplained)} unexplained survivor(s):")
        print_table(unexplained)
        return 1
    return 0


def rerender(opts: argparse.Namespace) -> int:
    """Rebuild the report of a previous run from its JSON, with the current explained-survivors list."""
    data = json.loads(opts.from_json.read_text(encoding="utf-8"))
    explained = load_explained(opts.survivors)
    mutants = []
    for row in data["mutants"]:
        row = dict(row)
        row.pop("id", None)
        m = Mutant(**{**row, "lines": tuple(row["lines"]), "start": 0, "end": 0, "new_text": ""})
        if m.status == "explained":
            m.status = "not covered" if m.by.startswith("no selected test") else "survived"
            m.reason = ""
        if m.status in ("survived", "not covered"):
            why = explanation(m, explained)
            if why:
                m.status, m.reason = "explained", why
        mutants.append(m)
    return report(mutants, data["meta"], opts)


if __name__ == "__main__":
    sys.exit(main())
