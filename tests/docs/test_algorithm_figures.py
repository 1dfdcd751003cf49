"""The algorithm pages' benchmark figures: the committed ratio table and the generator the build runs.

- ``benchmarks/ratio_table.py`` writes a table from which :func:`read_ratio_table` rebuilds trials
  with the same leaderboard (τ@50, ranks, reaches, tails);
- the committed ``docs/benchmark/ratios_public_quick.csv`` has every algorithm with a page;
- every algorithm page includes its generated snippet, and ``docs/gen_algorithm_figures.py`` writes
  the snippets and figures (a profile for every page, a coverage figure where the method has
  intervals) and does not rewrite unchanged files.
"""

from __future__ import annotations

import math
import shutil
from pathlib import Path
from types import ModuleType

import numpy as np
import pandas as pd
import pytest

from tests.conftest import load_script
from tests.docs.conftest import REPO

DOCS = REPO / "docs"
PAGES = sorted(p for p in DOCS.glob("algorithms/*/*.md") if p.stem != "index")


@pytest.fixture(scope="module")
def ratio_table() -> ModuleType:
    return load_script(REPO / "benchmarks" / "ratio_table.py", "ratio_table")


def _trials() -> pd.DataFrame:
    rows = []
    for algo, interp, base in (("a", "standard", 0.5), ("b", "standard", 2.0), ("c", "data-bounds", 1.0)):
        for eps in (1.0, 10.0):
            for inst, study, n, d in (("i1", "s1", 500, 3), ("i2", "s1", 80, 2), ("i3", "s2", 5000, 12)):
                for seed in range(3):
                    status = "declined" if (algo == "b" and inst == "i2" and seed == 1) else "ok"
                    ratio = math.inf if status != "ok" else base * (1 + seed) / eps * (1.0 + 1e-9 * seed) / 3.0
                    rows.append({"algorithm": algo, "interpretation": interp, "instance": inst, "study": study,
                                 "task": "sce", "epsilon": eps, "seed": seed, "status": status, "ratio": ratio,
                                 "n": n, "d": d})
    return pd.DataFrame(rows)


def test_ratio_table_round_trip(ratio_table: ModuleType, tmp_path: Path) -> None:
    from dpstats.bench.leaderboard import leaderboard

    trials = _trials()
    path = tmp_path / "ratios.csv"
    table = ratio_table.ratio_table(trials)
    table.to_csv(path, index=False)
    assert list(table.columns) == list(ratio_table.COLUMNS)
    assert len(table) == 3 * 2 * 3  # algorithm, epsilon, instance
    assert "inf" in table.loc[(table["algorithm"] == "b") & (table["instance"] == "i2"), "ratios"].iloc[0]
    back = ratio_table.read_ratio_table(path)
    assert len(back) == len(trials)
    exact, rebuilt = leaderboard(trials), leaderboard(back)
    assert list(exact["algorithm"]) == list(rebuilt["algorithm"])
    np.testing.assert_allclose(exact["tau50"], rebuilt["tau50"], rtol=1e-5)
    for col in ("reaches", "tail10", "tail100", "instances", "studies"):
        np.testing.assert_array_equal(exact[col], rebuilt[col])
    assert exact["rank"].astype(float).fillna(-1).tolist() == rebuilt["rank"].astype(float).fillna(-1).tolist()


def test_merge_keeps_the_old_table_at_other_epsilons(ratio_table: ModuleType) -> None:
    trials = _trials()
    old = ratio_table.ratio_table(trials)
    later = trials[trials["epsilon"] == 10.0].assign(epsilon=3.0, ratio=lambda d: d["ratio"] * 2)
    rerun = trials[trials["epsilon"] == 10.0].assign(ratio=lambda d: d["ratio"] * 5)
    merged = ratio_table.merge_tables(ratio_table.ratio_table(pd.concat([later, rerun])), old)
    # ε = 1 kept from the old table; ε = 3 added; ε = 10 replaced by the new run; the order of a fresh table
    assert merged.equals(ratio_table.ratio_table(pd.concat([trials[trials["epsilon"] == 1.0], later, rerun])))
    assert list(merged["epsilon"].drop_duplicates()) == [1.0, 3.0, 10.0]


def test_merge_adds_an_algorithm_at_every_epsilon(ratio_table: ModuleType) -> None:
    trials = _trials()
    old = ratio_table.ratio_table(trials)
    name = sorted(trials["algorithm"].unique())[0]
    rerun = trials[trials["algorithm"] == name].assign(ratio=lambda d: d["ratio"] * 7)
    merged = ratio_table.merge_tables(ratio_table.ratio_table(rerun), old)
    # that algorithm's rows replaced at every ε, the others kept as they were
    assert merged.equals(ratio_table.ratio_table(pd.concat([trials[trials["algorithm"] != name], rerun])))
    assert not merged.equals(old)


def test_committed_table_covers_every_page(ratio_table: ModuleType) -> None:
    trials = ratio_table.read_ratio_table(DOCS / "benchmark" / "ratios_public_quick.csv")
    have = set(zip(trials["task"], trials["algorithm"]))
    missing = [f"{p.parent.name}/{p.stem}" for p in PAGES if (p.parent.name, p.stem) not in have]
    assert missing == [], missing
    assert set(trials["status"]) <= {"ok", "error"}
    # every page's algorithm at the protocol's four ε, 3 trials on each of the quick preset's instances
    for p in PAGES:
        mine = trials[(trials["task"] == p.parent.name) & (trials["algorithm"] == p.stem)]
        per = mine.groupby("epsilon")["instance"].agg(["nunique", "size"])
        assert list(per.index) == [0.3, 1.0, 3.0, 10.0], (p.stem, list(per.index))
        assert (per["nunique"] == 43).all() and (per["size"] == 3 * 43).all(), (p.stem, per)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_page_includes_its_figures(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    assert f"```{{include}} ../../generated/algorithm_figures/{page.parent.name}/{page.stem}.inc\n```" in text


def test_generator_writes_snippets_and_figures(tmp_path: Path) -> None:
    gen = load_script(DOCS / "gen_algorithm_figures.py", "gen_algorithm_figures_test")
    src = tmp_path / "docs"
    for rel in ("algorithms/sce/fwl_score.md", "algorithms/sce/theilsen_match.md", "algorithms/mean/index.md"):
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(DOCS / rel, src / rel)
    out = src / gen.OUT
    stale = out / "sce-gone-profile.png"
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"old")
    snippets = gen.write_figures(src)
    assert sorted(p.relative_to(out).as_posix() for p in snippets) == ["sce/fwl_score.inc", "sce/theilsen_match.inc"]
    assert not stale.exists()
    pngs = sorted(p.name for p in out.glob("*.png"))
    assert pngs == ["sce-fwl_score-coverage.png", "sce-fwl_score-profile.png", "sce-theilsen_match-profile.png"]
    text = (out / "sce" / "fwl_score.inc").read_text(encoding="utf-8")
    assert f"/{gen.OUT}/sce-fwl_score-profile.png" in text and f"/{gen.OUT}/sce-fwl_score-coverage.png" in text
    assert "benchmarks/ratio_table.py" in text and "dpstats bench --inference" in text
    assert "by τ@50 at each ε (0.3, 1, 3 and 10)" in text   # the committed table's four ε, one panel each
    assert "coverage" not in (out / "sce" / "theilsen_match.inc").read_text(encoding="utf-8").split("```text")[0]
    import matplotlib.image as mpimg

    img = mpimg.imread(out / "sce-fwl_score-profile.png")
    assert img.shape[1] == round(gen.WIDTH * gen.DPI) and img[..., :3].std() > 0.05
    assert img.shape[0] > 0.9 * img.shape[1]   # two rows of two panels
    stamps = {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file()}
    gen.write_figures(src)  # unchanged inputs: no file is rewritten
    assert {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file()} == stamps
