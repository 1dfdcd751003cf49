"""The R tutorial (docs/r/tutorial.md) runs, and every output it shows is what R prints.

Each ```` ```r ```` block is split into groups: a run of code lines and the
``#>`` lines after it. All groups run in order in one R session (the package
installed from ``r_bridge/``, the dpstats under test behind reticulate); a
group followed by ``#>`` lines must print them (whitespace-insensitive;
``...`` stands for any text), a group without them only has to run.
``Sys.setenv(...)`` lines are the reader's set-up and are skipped: the test
sets ``RETICULATE_PYTHON`` itself.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.test_r_package import r_env, r_lib, rscript  # noqa: F401  (r_lib is a fixture)

pytestmark = pytest.mark.r

TUTORIAL = Path(__file__).resolve().parent.parent / "docs" / "r" / "tutorial.md"
R_FENCE = re.compile(r"^```r\s*\n(.*?)^```", re.S | re.M)

#: R side: run each group file in the global environment (the driver's own names stay in a local one); write
#: what it printed, and its warnings, as the page shows them ("Warning message:" and the message indented)
DRIVER = r"""
local({
files <- sort(list.files("groups", full.names = TRUE))
for (f in files) {
  warns <- character()
  out <- character()
  exprs <- parse(f, keep.source = FALSE)
  for (e in exprs) {
    if (is.call(e) && identical(e[[1]], as.name("Sys.setenv"))) next
    printed <- utils::capture.output(res <- withCallingHandlers(
      withVisible(eval(e, envir = globalenv())),
      warning = function(w) {
        warns <<- c(warns, conditionMessage(w))
        invokeRestart("muffleWarning")
      }))
    out <- c(out, printed)
    if (res$visible) out <- c(out, utils::capture.output(print(res$value)))
  }
  for (w in warns) out <- c(out, "Warning message:", paste0("  ", w))
  writeLines(out, sub("groups", "outputs", f))
}
})
"""


def groups(text: str) -> list[tuple[str, list[str]]]:
    """The page's (code, shown output) pairs in order; the output lines without their ``#> `` prefix."""
    out: list[tuple[str, list[str]]] = []
    for block in R_FENCE.findall(text):
        code: list[str] = []
        shown: list[str] = []
        for line in block.splitlines():
            if line.startswith("#>"):
                shown.append(line[2:])
            else:
                if shown:
                    out.append(("\n".join(code), shown))
                    code, shown = [], []
                code.append(line)
        if code:
            out.append(("\n".join(code), shown))
    return out


def matches(shown: list[str], printed: list[str]) -> bool:
    """Whether R's output is what the page shows, whitespace-insensitive, ``...`` matching any text."""
    want = " ".join(" ".join(shown).split())
    got = " ".join(" ".join(printed).split())
    pattern = ".*?".join(re.escape(part) for part in want.split("..."))
    return re.fullmatch(pattern, got, flags=re.S) is not None


def test_the_parser_pairs_code_with_its_output() -> None:
    text = "```r\nx <- 1\nx\n#> [1] 1\ny <- 2\n```\n"
    assert groups(text) == [("x <- 1\nx", [" [1] 1"]), ("y <- 2", [])]
    assert matches([" [1] ...  1"], ["[1] 0.5 1"]) and not matches([" [1] 2"], ["[1] 1"])


def test_the_r_tutorial_prints_what_it_shows(r_lib: Path, tmp_path: Path) -> None:  # noqa: F811
    pairs = groups(TUTORIAL.read_text(encoding="utf-8"))
    (tmp_path / "groups").mkdir()
    (tmp_path / "outputs").mkdir()
    for i, (code, _) in enumerate(pairs):
        (tmp_path / "groups" / f"{i:03d}.R").write_text(code + "\n", encoding="utf-8")
    out = rscript(DRIVER, r_env(r_lib), timeout=1200, cwd=tmp_path)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    wrong = []
    for i, (code, shown) in enumerate(pairs):
        printed = (tmp_path / "outputs" / f"{i:03d}.R").read_text(encoding="utf-8").splitlines()
        if shown and not matches(shown, printed):
            wrong.append(f"--- {code}\n+++ page shows:\n" + "\n".join(shown) + "\n+++ R prints:\n" + "\n".join(printed))
    assert not wrong, "\n\n".join(wrong)


def test_the_readme_r_session_runs(r_lib: Path, tmp_path: Path) -> None:  # noqa: F811
    """The README's R session (no output shown: its noise is fresh) runs on a fresh checkout and prints a summary
    and an interval for educ."""
    readme = TUTORIAL.parents[2] / "README.md"
    pairs = groups(readme.read_text(encoding="utf-8"))
    assert len(pairs) == 1 and "dp_coef(" in pairs[0][0] and not pairs[0][1]
    (tmp_path / "groups").mkdir()
    (tmp_path / "outputs").mkdir()
    (tmp_path / "groups" / "000.R").write_text(pairs[0][0] + "\n", encoding="utf-8")
    out = rscript(DRIVER, r_env(r_lib), timeout=600, cwd=tmp_path)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    printed = (tmp_path / "outputs" / "000.R").read_text(encoding="utf-8")
    assert "educ" in printed and "2.5 %" in printed and "97.5 %" in printed, printed[-2000:]
