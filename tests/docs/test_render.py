"""The built docs in headless Chromium with the network closed, over file://.

- formulas are typeset by the site's own MathJax (_static/mathjax/, sphinx-mathjax-offline): MathJax
  output and no raw ``\\(`` left, while the same page pointing at Sphinx's default CDN shows raw TeX;
- no code block (``pre``) of the guide and tutorial pages is wider than its column at a 1,400 px
  window, and the text column is wider than alabaster's ~650 px (a ``pre`` with ``white-space: pre``
  and a 400-character line, added to each page, shows that the probe does see an overflow);
- screenshots of four pages land in ``<build>/_screenshots/`` for a reader to look at.

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

from tests.docs.conftest import DocsBuild

CHROMIUM = next((shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium is not installed "
                                    "(apt-get install chromium; scripts/setup.sh installs it)")
pytestmark = needs_chromium

WINDOW = "1400,1000"
FORMULA_PAGE = "algorithms/sce/fwl_score.html"  # ~340 formulas, inline and display
CODE_PAGES = ["quickstart.html", "guide/economists.html", "r/tutorial.html"]
SCREENSHOTS = {
    "home": "index.html",
    "guide": "guide/economists.html",
    "algorithm": FORMULA_PAGE,
    "coverage": "benchmark/inference.html",
}

PROBE = r"""<script>
window.addEventListener("load", function () {
  const main = ["article.bd-article", "div.body", "[role=main]"].map(s => document.querySelector(s))
    .find(Boolean) || document.body;
  const control = document.createElement("pre");
  control.id = "probe-control";
  control.style.whiteSpace = "pre";
  control.textContent = "x".repeat(400);
  main.appendChild(control);
  const mathjax = window.MathJax && window.MathJax.startup && window.MathJax.startup.promise;
  (mathjax || Promise.resolve()).then(function () {
    const wide = p => p.scrollWidth > p.clientWidth + 1;
    const controlOverflows = wide(control);
    control.remove();
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
    record_property("screenshots", str(shots))
    print(f"screenshots in {shots}")
