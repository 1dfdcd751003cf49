"""dpstats report: the CSV files, the static site (checked in headless Chromium when available)."""

from __future__ import annotations

import html.parser
import math
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpstats.bench import evaluation as ev
from dpstats.bench import leaderboard as lbd
from dpstats.bench import report
from dpstats.bench.report import site as report_site
from dpstats.cli import main

# --------------------------------------------------------------------------
# synthetic, seeded trials
# --------------------------------------------------------------------------

INSTANCES = [
    # study, instance, task, n, d
    ("s_alpha", "alpha_small", "sce", 400, 3),
    ("s_alpha", "alpha_wide", "sce", 1500, 25),
    ("s_beta", "beta_one", "sce", 20000, 6),
    ("s_gamma", "gamma_fe", "sce", 900, 40),
    ("s_alpha", "alpha_mean", "mean", 250, 3),
    ("s_beta", "beta_mean", "mean", 20000, 4),
]

ALGORITHMS = {
    # name: (tasks, interpretation, median ratio, failure probability)
    "good": (("sce", "mean"), "standard", 0.6, 0.0),
    "okay": (("sce", "mean"), "standard", 2.5, 0.1),
    "flaky": (("sce",), "standard", 1.0, 0.7),
    "peek": (("sce", "mean"), "data-bounds", 0.2, 0.0),
}


def synthetic_trials(seed: int = 0, trials: int = 5, epsilons=(1.0,), corpus: str = "public") -> pd.DataFrame:
    """Trials of four algorithms on six instances of three studies (seeded)."""
    rng = np.random.default_rng(seed)
    rows = []
    for name, (tasks, interp, med, pfail) in ALGORITHMS.items():
        for study, inst, task, n, d in INSTANCES:
            if task not in tasks:
                continue
            for eps in epsilons:
                for s in range(trials):
                    fail = rng.random() < pfail
                    ratio = float(med / eps ** 0.5 * np.exp(0.5 * rng.standard_normal()))
                    rows.append({
                        "algorithm": name, "interpretation": interp, "instance": inst, "study": study, "task": task,
                        "epsilon": eps, "delta": 1e-6, "seed": s, "status": "error" if fail else "ok",
                        "error": "RuntimeError: boom" if fail else None, "baseline": 0.1,
                        "ratio": math.inf if fail else ratio, "seconds": 0.01, "peak_mb": 1.0, "n": n, "d": d,
                        "corpus": corpus,
                    })
    return pd.DataFrame(rows)


class _Tags(html.parser.HTMLParser):
    """Collects tags with their attributes, and table rows by table id."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.rows: dict[str, list[dict[str, str]]] = {}
        self._table: str | None = None

    def handle_starttag(self, tag, attrs):
        a = {k: v or "" for k, v in attrs}
        self.tags.append((tag, a))
        if tag == "table":
            self._table = a.get("id", "")
            self.rows.setdefault(self._table, [])
        if tag == "tr" and self._table is not None and "data-algorithm" in a:
            self.rows[self._table].append(a)

    def handle_endtag(self, tag):
        if tag == "table":
            self._table = None


def parse(text: str) -> _Tags:
    p = _Tags()
    p.feed(text)
    return p


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """A report with its site, written through the command line."""
    tmp = tmp_path_factory.mktemp("report")
    csv = tmp / "input.csv"
    synthetic_trials().to_csv(csv, index=False)
    out = tmp / "site"
    assert main(["report", "--results", str(csv), "--out", str(out), "--explore"]) == 0
    return out


# --------------------------------------------------------------------------
# files
# --------------------------------------------------------------------------


def test_csv_files_agree_with_the_trials(site: Path) -> None:
    trials = pd.read_csv(site / "trials.csv")
    assert list(trials.columns[: len(ev.TRIAL_COLUMNS)]) == list(ev.TRIAL_COLUMNS)
    src = synthetic_trials()
    assert len(trials) == len(src)
    assert (trials.loc[trials.status != "ok", "ratio"] == math.inf).all()
    lb = lbd.read_leaderboard(site / "leaderboard.csv")
    assert list(lb.columns) == list(lbd.LEADERBOARD_COLUMNS) + ["corpus"]
    assert lbd.verify_leaderboard(site / "trials.csv", site / "leaderboard.csv") == []
    # the leaderboard is the one computed from the original frame
    fresh = lbd.leaderboard(src)
    np.testing.assert_array_equal(fresh["tau50"].to_numpy(), lb["tau50"].to_numpy())
    assert fresh["rank"].astype("float").fillna(-1).tolist() == lb["rank"].astype("float").fillna(-1).tolist()
    # 'inf' is written for an infinite tau50, and the comparison has an empty rank
    text = (site / "leaderboard.csv").read_text()
    assert re.search(r"^sce,1\.0,all,flaky,standard,inf,", text, re.M)
    assert re.search(r"^sce,1\.0,all,peek,data-bounds,[0-9.e-]+,1\.0,,4,3,0\.0,0\.0,,public$", text, re.M)
    prof = pd.read_csv(site / "profiles.csv")
    one = prof[(prof.task == "sce") & (prof.slice == "d>10") & (prof.algorithm == "good")]
    assert one.rate.is_monotonic_increasing and one.rate.iloc[-1] == 1.0


def test_tampered_leaderboard_is_detected(site: Path, tmp_path: Path) -> None:
    text = (site / "leaderboard.csv").read_text().splitlines()
    cells = text[1].split(",")
    cells[7] = "2" if cells[7] != "2" else "1"   # the rank of the first row
    (tmp_path / "lb.csv").write_text("\n".join([text[0], ",".join(cells)] + text[2:]) + "\n")
    problems = lbd.verify_leaderboard(site / "trials.csv", tmp_path / "lb.csv")
    assert len(problems) == 1 and "rank" in problems[0]


def test_pages_links_and_images_are_local_and_exist(site: Path) -> None:
    pages = sorted(site.rglob("*.html"))
    names = {p.relative_to(site).as_posix() for p in pages}
    assert {"index.html", "explore.html", "leaderboard-sce-eps1.html", "leaderboard-mean-eps1.html"} <= names
    for iid in ("alpha_small", "gamma_fe", "beta_mean"):
        assert f"explore/instance-{iid}.html" in names
    assert "explore/algorithm-sce-flaky.html" in names
    images = 0
    for page in pages:
        text = page.read_text(encoding="utf-8")
        assert "<script" not in text
        tags = parse(text)
        for tag, attrs in tags.tags:
            for key in ("src", "href"):
                url = attrs.get(key)
                if not url or tag == "a" and url.startswith("#"):
                    continue
                assert not re.match(r"^([a-z]+:)?//", url), f"{page.name}: external resource {url}"
                target = (page.parent / url).resolve()
                assert target.is_file(), f"{page.name}: broken link {url}"
                if tag == "img":
                    images += 1
                    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
                    assert target.with_suffix(".svg").read_text().lstrip().startswith("<?xml")
    # 5 sce slices + 3 mean slices, 6 instances, 7 algorithm pages
    assert images == 8 + 6 + 7


def test_leaderboard_page_tables(site: Path) -> None:
    lb = lbd.read_leaderboard(site / "leaderboard.csv")
    tags = parse((site / "leaderboard-sce-eps1.html").read_text(encoding="utf-8"))
    for sl in ev.slices_for("sce"):
        expect = lb[(lb.task == "sce") & (lb.slice == sl)]
        rows = tags.rows[f"lb-public-{report.SLICE_TAGS[sl]}"]
        assert [r["data-algorithm"] for r in rows] == expect.algorithm.tolist()
        assert [r["class"] for r in rows] == ["ranked"] * 3 + ["comparison"]
    text = (site / "leaderboard-sce-eps1.html").read_text(encoding="utf-8")
    assert 'Other leaderboards: <a href="leaderboard-mean-eps1.html">' in text
    flaky = lb[(lb.task == "sce") & (lb.slice == "all") & (lb.algorithm == "flaky")].iloc[0]
    shown = lbd.format_tau50(flaky.tau50, flaky.reaches)
    assert re.fullmatch(r"∞ \(reaches [1-4]?[0-9]%\)", shown)  # fails on most trials: never reaches 50 %
    assert f"<td class=\"num\">{shown}</td>" in text
    assert "4 instances from 3 studies" in text
    mean = parse((site / "leaderboard-mean-eps1.html").read_text(encoding="utf-8"))
    assert {k for k in mean.rows if k.startswith("lb-")} == {"lb-public-all", "lb-public-nd-le-100",
                                                             "lb-public-nd-gt-100"}


def test_leaderboard_page_shows_the_tail_shares(site: Path) -> None:
    lb = lbd.read_leaderboard(site / "leaderboard.csv")
    text = (site / "leaderboard-sce-eps1.html").read_text(encoding="utf-8")
    assert "<th>&gt; 10×</th><th>&gt; 100×</th>" in text
    for r in lb[(lb.task == "sce") & (lb.slice == "all")].itertuples(index=False):
        rank = "comparison" if pd.isna(r.rank) else str(int(r.rank))
        cells = [rank, lbd.format_tau50(r.tau50, r.reaches), lbd.format_rate(r.reaches), lbd.format_tail(r.tail10),
                 lbd.format_tail(r.tail100), lbd.format_fallback(r.fallback)]
        row = re.search(rf'<tr class="[a-z]+" data-algorithm="{r.algorithm}">(.*?)</tr>', text).group(1)
        assert re.findall(r'<td class="num">([^<]*)</td>', row) == cells
    flaky = lb[(lb.task == "sce") & (lb.slice == "all") & (lb.algorithm == "flaky")].iloc[0]
    assert flaky.tail10 > 0.5  # fails on most trials, and failures are in the tail
    assert "profiles.csv" in text and "Not drawn" not in text  # four algorithms: every curve is drawn


def test_names_are_escaped(tmp_path: Path) -> None:
    evil = "<script>alert(1)</script>"
    df = synthetic_trials(trials=2)
    df.loc[df.algorithm == "okay", "algorithm"] = evil
    df.loc[df.instance == "alpha_small", "instance"] = 'a"<b>&c'
    out = tmp_path / "site"
    report.write_report(df, out, explore=True, public={})
    pages = sorted(out.rglob("*.html"))
    assert (out / "explore" / "algorithm-sce-_script_alert_1___script_.html").is_file()
    for page in pages:
        text = page.read_text(encoding="utf-8")
        assert "<script" not in text and "<b>" not in text, page.name
    text = (out / "leaderboard-sce-eps1.html").read_text(encoding="utf-8")
    assert 'data-algorithm="&lt;script&gt;alert(1)&lt;/script&gt;"' in text
    assert ">&lt;script&gt;alert(1)&lt;/script&gt;</a>" in text
    inst = (out / "explore" / "instance-a__b__c.html").read_text(encoding="utf-8")
    assert "<h1>Instance a&#34;&lt;b&gt;&amp;c</h1>" in inst
    # the escaped page still parses to the original names
    rows = parse(text).rows["lb-public-all"]
    assert evil in [r["data-algorithm"] for r in rows]


def test_profile_plots_draw_the_leaders_and_the_default(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    rows = []
    for k in range(6):
        for interp in ("standard", "data-bounds"):
            for inst, study in (("i1", "s1"), ("i2", "s2")):
                for seed in range(3):
                    # algorithm k of each class is about 2**k times worse; std5 has a tail beyond 1e3
                    r = 2.0 ** k * float(np.exp(0.2 * rng.standard_normal())) * (1e5 if k == 5 and seed == 0 else 1)
                    rows.append({"algorithm": f"{interp[:3]}{k}", "interpretation": interp, "instance": inst,
                                 "study": study, "task": "mean", "epsilon": 1.0, "delta": 1e-6, "seed": seed,
                                 "status": "ok", "error": None, "baseline": 1.0, "ratio": r, "seconds": 0.0,
                                 "peak_mb": 0.0, "n": 500, "d": 2, "corpus": "c"})
    df = pd.DataFrame(rows)
    lb = lbd.leaderboard(df)
    g = lb[lb.slice == "all"]
    assert report.profile_leaders(g) == ["sta0", "sta1", "sta2", "dat0", "dat1", "dat2"]
    assert report.profile_leaders(g, k=1, default="sta5") == ["sta0", "sta5", "dat0"]
    out = tmp_path / "site"
    report.write_report(df, out, explore=False, public={}, defaults={"mean": "sta5"})
    text = (out / "leaderboard-mean-eps1.html").read_text(encoding="utf-8")
    assert "Not drawn: sta3, sta4, dat3, dat4, dat5 (in profiles.csv)." in text
    assert "Other leaderboards" not in text  # the only one: no empty list of others
    assert "API default <code>sta5</code>" in text
    svg = (out / "img" / "profile-c-mean-eps1-all.svg").read_text()
    assert svg.count("sta5  τ@50") == 1 and "sta4  τ@50" not in svg
    s5 = g[g.algorithm == "sta5"].iloc[0]
    # its tail goes beyond τ = 1000: the legend entry is marked, the others are not
    assert f"<!-- sta5  τ@50 = {lbd.format_tau50(s5.tau50, s5.reaches)}  ▸ -->" in svg
    assert svg.count("  ▸ -->") == 1
    assert "1e+05" not in svg and "100000" not in svg  # the axis is clipped at TAU_MAX
    # profiles.csv keeps every algorithm and every step, the tail included
    prof = pd.read_csv(out / "profiles.csv")
    assert set(prof.algorithm) == set(lb.algorithm) and prof.tau.max() > 1e4


def test_explore_is_only_for_public_corpora() -> None:
    trials = synthetic_trials()
    public = {i: {"study": s, "task": t} for s, i, t, _, _ in INSTANCES}
    assert report_site._explorable(trials, public, None) == {"public"}
    assert report_site._explorable(trials, {}, None) == set()
    assert report_site._explorable(trials, {}, True) == {"public"}
    wrong_study = dict(public, alpha_small={"study": "other", "task": "sce"})
    assert report_site._explorable(trials, wrong_study, None) == set()
    assert report_site._explorable(trials, public, False) == set()


def test_report_cli_csv_only_and_bad_input(tmp_path: Path, capsys) -> None:
    df = synthetic_trials(seed=3, epsilons=(1.0, 10.0))
    both = pd.concat([df, synthetic_trials(seed=4, corpus="withheld")])
    src = tmp_path / "t.csv"
    both.to_csv(src, index=False)
    assert main(["report", "--results", str(src), "--out", str(tmp_path / "o"), "--no-site"]) == 0
    assert not (tmp_path / "o" / "index.html").exists()
    lb = lbd.read_leaderboard(tmp_path / "o" / "leaderboard.csv")
    assert set(lb.corpus) == {"public", "withheld"}
    assert set(lb[lb.corpus == "public"].epsilon) == {1.0, 10.0}
    bad = tmp_path / "bad.csv"
    df.assign(status="weird").to_csv(bad, index=False)
    assert main(["report", "--results", str(bad), "--out", str(tmp_path / "b")]) == 2
    assert "status" in capsys.readouterr().err
    assert main(["report", "--results", str(tmp_path / "missing.sqlite"), "--out", str(tmp_path / "m")]) == 2


def test_report_reads_a_results_store(tmp_path: Path) -> None:
    store = pytest.importorskip("dpstats.bench.store")
    model = pytest.importorskip("dpstats.bench.model")
    path = tmp_path / "r.sqlite"
    src = synthetic_trials(trials=2)
    with store.Store(path) as s:
        s.bind_corpus("public", str(tmp_path), True)
        for r in src.itertuples(index=False):
            s.add_trial(model.TrialResult(
                algorithm=r.algorithm, interpretation=r.interpretation, instance=r.instance, study=r.study,
                task=r.task, epsilon=r.epsilon, delta=r.delta, seed=r.seed, status=r.status, error=r.error,
                estimate=None, error_value=r.ratio * r.baseline, baseline=r.baseline, ratio=r.ratio,
                seconds=r.seconds, peak_mb=r.peak_mb, n=r.n, d=r.d))
    got = report.load_trials(path)
    assert len(got) == len(src) and set(got.corpus) == {"public"}
    # the store records that no release is a fallback (the synthetic frame has no flag: NaN shares)
    pd.testing.assert_frame_equal(lbd.leaderboard(got), lbd.leaderboard(src.assign(fallback=False)))


# --------------------------------------------------------------------------
# headless Chromium
# --------------------------------------------------------------------------

CHROMIUM = next((shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium is not installed "
                                    "(apt-get install chromium)")

PROBE = """<script>
window.addEventListener("load", function () {
  for (const img of document.images) {
    img.setAttribute("data-loaded", img.complete && img.naturalWidth > 0 ? "yes" : "no");
  }
  document.body.setAttribute("data-probe", "done");
});
</script>
<img id="control" src="img/no-such-image.png" alt="negative control">
"""


def run_chromium(tmp: Path, *args: str) -> subprocess.CompletedProcess:
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic",
           f"--user-data-dir={tmp / 'profile'}", "--hide-scrollbars", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=180)


@needs_chromium
def test_leaderboard_page_in_chromium(site: Path, tmp_path: Path) -> None:
    page = site / "leaderboard-sce-eps1.html"
    probe = site / "_probe.html"
    probe.write_text(page.read_text(encoding="utf-8").replace("</body>", PROBE + "</body>"), encoding="utf-8")
    try:
        out = run_chromium(tmp_path, "--virtual-time-budget=10000", "--dump-dom", probe.as_uri())
    finally:
        probe.unlink()
    assert out.returncode == 0, out.stderr[-2000:]
    dom = parse(out.stdout)
    body = [a for t, a in dom.tags if t == "body"]
    assert body and body[0].get("data-probe") == "done"
    imgs = [a for t, a in dom.tags if t == "img"]
    loaded = {a["src"]: a.get("data-loaded") for a in imgs}
    assert loaded.pop("img/no-such-image.png") == "no"  # the probe does notice a missing image
    assert len(loaded) == 5 and set(loaded.values()) == {"yes"}, loaded
    lb = lbd.read_leaderboard(site / "leaderboard.csv")
    expect = lb[(lb.task == "sce") & (lb.slice == "all")].algorithm.tolist()
    assert [r["data-algorithm"] for r in dom.rows["lb-public-all"]] == expect


@needs_chromium
def test_screenshot_shows_the_profile_plot(site: Path, tmp_path: Path) -> None:
    import matplotlib.image as mpimg

    shot = tmp_path / "shot.png"
    out = run_chromium(tmp_path, "--window-size=1100,1000", f"--screenshot={shot}",
                       (site / "leaderboard-sce-eps1.html").as_uri())
    assert out.returncode == 0 and shot.is_file(), out.stderr[-2000:]
    img = mpimg.imread(shot)[..., :3]
    assert img.shape[0] >= 900 and img.shape[1] >= 1000
    assert img.std() > 0.05  # not blank
    # the curves' colours (Okabe-Ito blue and orange) come only from the plotted image
    for hexcol in report.COLORS[:2]:
        rgb = np.array([int(hexcol[i:i + 2], 16) for i in (1, 3, 5)]) / 255
        close = np.abs(img - rgb).max(axis=-1) < 0.12
        assert close.sum() > 150, hexcol
