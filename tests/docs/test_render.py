"""The built docs in headless Chromium with the network closed, over file://.

- formulas are typeset by the site's own MathJax (_static/mathjax/, sphinx-mathjax-offline): MathJax
  output and no raw ``\\(`` left, while the same page pointing at Sphinx's default CDN shows raw TeX;
- no code block (``pre``) of the guide and tutorial pages is wider than its column at a 1,400 px
  window, and the text column is wider than alabaster's ~650 px (a ``pre`` with ``white-space: pre``
  and a 400-character line, added to each page, shows that the probe does see an overflow);
- no table of the guide, an algorithm page and the coverage page reaches past the text column: a
  table wider than the column scrolls inside its own box (``docs/_static/dpstats.css``), and the
  page does not scroll sideways (a table of a 400-character line forced to ``display: table``,
  added to each page, shows that the probe does see a table past the column; the same table
  left to the CSS scrolls in itself);
- each algorithm page whose method has intervals shows its two generated figures
  (``docs/gen_algorithm_figures.py``): images that loaded (``naturalWidth > 0``) and fit the column
  (the same page with a figure's file name misspelt shows that a broken image is caught);
- screenshots of six views land in ``<build>/_screenshots/`` for a reader to look at.

A probe page is the page with a script added before ``</body>`` that writes its findings as JSON
into ``document.title``, read back from ``--dump-dom``; it sits next to the page (same relative
links) and is removed afterwards.
"""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.docs.conftest import REPO, DocsBuild

CHROMIUM = next((shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium is not installed "
                                    "(apt-get install chromium; scripts/setup.sh installs it)")
pytestmark = needs_chromium

WINDOW = "1400,1000"
FORMULA_PAGE = "algorithms/sce/fwl_score.html"  # ~340 formulas, inline and display
CODE_PAGES = ["quickstart.html", "guide/economists.html", "r/tutorial.html"]
#: page -> how many of its tables are wider than the column, so scroll in their box, at least
TABLE_PAGES = {"guide/economists.html": 0, FORMULA_PAGE: 0, "benchmark/inference.html": 2}
COVERAGE_CSV = REPO / "docs" / "benchmark" / "coverage_public_quick.csv"
SCREENSHOTS = {
    "home": "index.html",
    "guide": "guide/economists.html",
    "algorithm": FORMULA_PAGE,
    "coverage": "benchmark/inference.html",
}
#: screenshots of a section further down a page (headless Chromium's screenshot of a scrolled page is
#: blank, so the page is shown with what precedes the section hidden): an algorithm page's figures,
#: and wide tables that scroll in their box
FIGURE_SHOTS = {"figures": ("algorithms/mean/kv_interval.html", "on-the-benchmark"),
                "wide-table": ("benchmark/inference.html", "on-the-whole-public-corpus")}
SHOW_SECTION = """<script>
window.addEventListener("load", function () {
  const article = document.querySelector("article.bd-article") || document.body;
  for (let el = document.getElementById("SECTION"); el && el !== article; el = el.parentElement) {
    for (let s = el.previousElementSibling; s; s = s.previousElementSibling) s.style.display = "none";
  }
});
</script>
"""

PROBE = r"""<script>
window.addEventListener("load", function () {
  const main = ["article.bd-article", "div.body", "[role=main]"].map(s => document.querySelector(s))
    .find(Boolean) || document.body;
  const control = document.createElement("pre");
  control.id = "probe-control";
  control.style.whiteSpace = "pre";
  control.textContent = "x".repeat(400);
  main.appendChild(control);
  // two bare tables (not in the theme's scroll box) with a 400-character line: forced to display as a
  // table, the probe must see it reach past the column; left to the site's CSS, it scrolls in itself
  const tcontrol = document.createElement("div");
  const cell = '<tr><td style="white-space: nowrap">' + "y".repeat(400) + "</td></tr>";
  tcontrol.innerHTML = '<table style="display: table">' + cell + "</table><table>" + cell + "</table>";
  main.appendChild(tcontrol);
  const mathjax = window.MathJax && window.MathJax.startup && window.MathJax.startup.promise;
  (mathjax || Promise.resolve()).then(function () {
    const wide = p => p.scrollWidth > p.clientWidth + 1;
    const controlOverflows = wide(control);
    control.remove();
    const mainBox = main.getBoundingClientRect();
    const outside = el => {
      const r = el.getBoundingClientRect();
      return r.right > mainBox.right + 1 || r.left < mainBox.left - 1;
    };
    const [forced, bare] = tcontrol.querySelectorAll("table");
    const tableControlOutside = outside(forced);
    const bareTableContained = !outside(bare) && wide(bare);
    tcontrol.remove();
    const tables = [...main.querySelectorAll("table")];
    const boxes = tables.map(t => t.closest(".pst-scrollable-table-container") || t);
    const pres = [...document.querySelectorAll("pre")];
    const raw = [];
    const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
    for (let n = walker.nextNode(); n; n = walker.nextNode()) {
      if (n.parentElement.closest("pre, code, script, style, title, mjx-container")) continue;
      if (/\\[(\[]|\$\$/.test(n.textContent)) raw.push(n.textContent.trim().slice(0, 80));
    }
    const maths = [...document.querySelectorAll(".math")];
    const findings = {
      mathjax_loaded: Boolean(mathjax),
      math: maths.length,
      typeset: maths.filter(m => m.querySelector("mjx-container")).length,
      mjx: document.querySelectorAll("mjx-container").length,
      merror: document.querySelectorAll("mjx-merror").length,
      raw: raw,
      pre: pres.length,
      overflowing: pres.filter(wide).map(p => ({start: p.textContent.slice(0, 60),
                                                 scroll: p.scrollWidth, client: p.clientWidth})),
      control_overflows: controlOverflows,
      column: main.clientWidth,
      page_overflows: document.documentElement.scrollWidth > document.documentElement.clientWidth,
      table_control_outside: tableControlOutside,
      bare_table_contained: bareTableContained,
      tables: tables.length,
      tables_outside: boxes.filter(outside).map(b => ({start: b.textContent.trim().slice(0, 60),
                                                        right: b.getBoundingClientRect().right,
                                                        column_right: mainBox.right})),
      tables_scrolling: boxes.filter(wide).length,
      images: [...document.images].map(i => ({src: i.getAttribute("src"), complete: i.complete,
                                              natural: i.naturalWidth, width: i.clientWidth})),
    };
    document.title = "PROBE" + JSON.stringify(findings);
  });
});
</script>
"""


def run_chromium(profile: Path, *args: str) -> subprocess.CompletedProcess:
    """Headless Chromium, a fresh profile, no network: a dead proxy and a resolver that finds no host."""
    assert CHROMIUM is not None
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", f"--user-data-dir={profile}",
           "--proxy-server=http://127.0.0.1:9", "--host-resolver-rules=MAP * ~NOTFOUND",
           "--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-quic",
           "--hide-scrollbars", f"--window-size={WINDOW}", "--virtual-time-budget=10000", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=180)


def probe(site: Path, page: str, profile: Path, replace: tuple[str, str] | None = None) -> dict:
    """The probe's findings on ``site/page`` (after ``replace`` in its HTML, if given)."""
    source = site / page
    text = source.read_text(encoding="utf-8")
    if replace is not None:
        assert replace[0] in text, replace[0]
        text = text.replace(*replace)
    head, body_end, tail = text.rpartition("</body>")
    assert body_end, page
    probe_page = source.with_name("_probe_" + source.name)
    probe_page.write_text(head + PROBE + body_end + tail, encoding="utf-8")
    try:
        out = run_chromium(profile, "--dump-dom", probe_page.as_uri())
    finally:
        probe_page.unlink()
    assert out.returncode == 0, out.stderr[-2000:]
    found = re.search(r"<title>PROBE(.*?)</title>", out.stdout, re.S)
    assert found, f"the probe did not finish on {page}: {out.stdout[:300]!r}"
    return json.loads(html.unescape(found.group(1)))


def test_formulas_are_typeset_offline(docs_build: DocsBuild, tmp_path: Path) -> None:
    site = docs_build.require()
    assert (site / "_static" / "mathjax" / "tex-chtml.js").is_file()
    page = (site / FORMULA_PAGE).read_text(encoding="utf-8")
    scripts = re.findall(r"<script[^>]*\bsrc=\"([^\"]+)\"", page)
    assert "../../_static/mathjax/tex-chtml.js" in scripts
    assert not [s for s in scripts if re.match(r"(https?:)?//", s)], scripts  # nothing loaded from outside

    found = probe(site, FORMULA_PAGE, tmp_path / "profile")
    assert found["mathjax_loaded"]
    assert found["math"] > 100 and found["typeset"] == found["math"], found
    assert found["mjx"] >= found["math"] and found["merror"] == 0, found
    assert found["raw"] == [], found["raw"]

    # negative control: the same page with MathJax from Sphinx's default CDN shows raw TeX (the
    # network is closed, and the assertions above can fail)
    import sphinx.util.logging  # noqa: F401  (Sphinx 9's sphinx.ext.mathjax needs it imported first)
    from sphinx.ext.mathjax import MATHJAX_URL

    cdn = probe(site, FORMULA_PAGE, tmp_path / "profile-cdn",
                replace=('src="../../_static/mathjax/tex-chtml.js"', f'src="{MATHJAX_URL}"'))
    assert not cdn["mathjax_loaded"] and cdn["mjx"] == 0 and cdn["typeset"] == 0, cdn
    assert len(cdn["raw"]) > 100, cdn


@pytest.mark.parametrize("page", CODE_PAGES)
def test_code_blocks_fit_their_column(docs_build: DocsBuild, tmp_path: Path, page: str) -> None:
    found = probe(docs_build.require(), page, tmp_path / "profile")
    assert found["control_overflows"], "the probe does not see an overflowing pre"
    assert found["pre"] > 0, f"no code block on {page}"
    assert found["overflowing"] == [], found["overflowing"]
    assert not found["page_overflows"], "the page scrolls sideways"
    assert found["column"] >= 800, f"text column {found['column']} px at a {WINDOW} px window"


@pytest.mark.parametrize("page", list(TABLE_PAGES))
def test_tables_stay_in_their_column(docs_build: DocsBuild, tmp_path: Path, page: str) -> None:
    found = probe(docs_build.require(), page, tmp_path / "profile")
    assert found["table_control_outside"], "the probe does not see a table reaching past the column"
    assert found["bare_table_contained"], "a wide table outside the theme's scroll box is not contained"
    assert found["tables"] > 0, f"no table on {page}"
    assert found["tables_outside"] == [], found["tables_outside"]
    assert found["tables_scrolling"] >= TABLE_PAGES[page], found["tables_scrolling"]
    assert not found["page_overflows"], "the page scrolls sideways"


def interval_pages() -> list[str]:
    """The algorithm pages of the methods in the committed coverage results."""
    import pandas as pd

    cov = pd.read_csv(COVERAGE_CSV)
    pairs = sorted(set(zip(cov["task"], cov["algorithm"])) - {(t, "non-private") for t in cov["task"]})
    return [f"{t}/{a}" for t, a in pairs if (REPO / "docs" / "algorithms" / t / f"{a}.md").is_file()]


def test_interval_pages_are_found() -> None:
    pages = interval_pages()
    assert {"sce/fwl_score", "linreg/dpnewton", "mean/adaptive_whiten"} <= set(pages), pages


def _figures(found: dict, stem: str) -> dict[str, dict]:
    return {kind: next((i for i in found["images"] if (i["src"] or "").endswith(f"/{stem}-{kind}.png")), {})
            for kind in ("profile", "coverage")}


@pytest.mark.parametrize("page", interval_pages())
def test_algorithm_page_shows_its_figures(docs_build: DocsBuild, tmp_path: Path, page: str) -> None:
    site = docs_build.require()
    found = probe(site, f"algorithms/{page}.html", tmp_path / "profile")
    stem = page.replace("/", "-")
    for kind, img in _figures(found, stem).items():
        assert img, f"no {kind} figure on {page}: {[i['src'] for i in found['images']]}"
        assert img["complete"] and img["natural"] > 0, img
        assert 0 < img["width"] <= found["column"], (img, found["column"])
    if page == "sce/fwl_score":  # negative control: a misspelt file name is a broken image
        src = f"../../_images/{stem}-coverage.png"
        broken = probe(site, f"algorithms/{page}.html", tmp_path / "profile-broken",
                       replace=(f'src="{src}"', f'src="{src[:-4]}-missing.png"'))
        img = next(i for i in broken["images"] if i["src"].endswith("-coverage-missing.png"))
        assert img["natural"] == 0, img


def test_screenshots(docs_build: DocsBuild, tmp_path: Path, record_property) -> None:  # noqa: ANN001
    import matplotlib.image as mpimg

    shots = docs_build.require() / "_screenshots"
    shots.mkdir(exist_ok=True)
    for name, page in SCREENSHOTS.items():
        png = shots / f"{name}.png"
        png.unlink(missing_ok=True)
        out = run_chromium(tmp_path / f"profile-{name}", f"--screenshot={png}", (docs_build.html / page).as_uri())
        assert out.returncode == 0 and png.is_file(), out.stderr[-2000:]
        img = mpimg.imread(png)[..., :3]
        assert img.shape[:2] == (1000, 1400), img.shape
        assert img.std() > 0.05, f"{name} looks blank"
    for name, (page, section) in FIGURE_SHOTS.items():  # the section at the top: what precedes it is hidden
        png = shots / f"{name}.png"
        png.unlink(missing_ok=True)
        source = docs_build.html / page
        head, body_end, tail = source.read_text(encoding="utf-8").rpartition("</body>")
        copy = source.with_name("_shot_" + source.name)
        copy.write_text(head + SHOW_SECTION.replace("SECTION", section) + body_end + tail, encoding="utf-8")
        try:
            out = run_chromium(tmp_path / f"profile-{name}", f"--screenshot={png}", copy.as_uri())
        finally:
            copy.unlink()
        assert out.returncode == 0 and png.is_file(), out.stderr[-2000:]
        assert mpimg.imread(png)[..., :3].std() > 0.05, f"{name} looks blank"
    record_property("screenshots", str(shots))
    print(f"screenshots in {shots}")
