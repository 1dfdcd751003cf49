"""dpstats release: the public bundle (folder and zip), never withheld trials."""

from __future__ import annotations

import hashlib
import json
import math
import zipfile
from pathlib import Path

import pandas as pd
import pytest

from dpstats.bench.leaderboard import verify_leaderboard
from dpstats.cli import main
from dpstats.data.corpus import Corpus
from dpstats.bench.report import build_release


def public_copy(mroz_corpus: Path) -> Path:
    (mroz_corpus / "corpus.toml").write_text('name = "mini"\npublic = true\n', encoding="utf-8")
    return mroz_corpus


def trials_for(corpus: Corpus, extra: bool = True) -> pd.DataFrame:
    rows = []
    for spec in corpus.specs():
        inst = corpus.instance(spec.id)
        for algo, interp, r in (("a", "standard", 0.7), ("b", "data-bounds", 0.3)):
            for seed in range(4):
                ok = seed != 3 or algo == "b"
                rows.append({"algorithm": algo, "interpretation": interp, "instance": spec.id, "study": spec.study,
                             "task": spec.task, "epsilon": 1.0, "delta": 1e-6, "seed": seed,
                             "status": "ok" if ok else "timeout", "error": None if ok else "exceeded",
                             "baseline": 1.0, "ratio": r * (seed + 1) if ok else math.inf, "seconds": 0.1,
                             "peak_mb": 2.0, "n": inst.n, "d": inst.d, "corpus": "mini"})
    df = pd.DataFrame(rows)
    if extra:
        # a withheld instance, and a public id whose facts do not match the corpus (another corpus's instance)
        secret = df[df.instance == "m_sce"].assign(instance="secret_inst", study="secret_study")
        clash = df[df.instance == "m_lin"].assign(n=10)
        df = pd.concat([df, secret, clash], ignore_index=True)
    return df


def test_release_bundle(mroz_corpus: Path, tmp_path: Path) -> None:
    corpus = Corpus(public_copy(mroz_corpus))
    trials = trials_for(corpus)
    res = build_release(tmp_path / "out", corpus=corpus, trials=trials, name="bundle")
    folder, zpath = res["folder"], res["zip"]
    assert res["dropped"] == 2 * 8  # the secret instance and the clashing copy, 8 trials each
    for f in ("instances.csv", "trials.csv", "leaderboard.csv", "profiles.csv", "README.md", "manifest.json"):
        assert (folder / f).is_file(), f
    inst = pd.read_csv(folder / "instances.csv")
    assert inst.instance.tolist() == ["m_sce", "m_lin", "m_mean"]
    for col in ("instance", "study", "task", "n", "d", "columns", "se_type", "baseline"):
        assert col in inst.columns
    row = inst.set_index("instance").loc["m_sce"]
    assert (row.n, row.d, row.se_type) == (428, 4, "classical")
    assert row.baseline == pytest.approx(0.0141, abs=5e-5)
    assert inst.set_index("instance").loc["m_mean", "columns"] == "lwage | educ | exper"
    tr = pd.read_csv(folder / "trials.csv")
    assert set(tr.instance) == {"m_sce", "m_lin", "m_mean"} and len(tr) == 24
    assert "secret" not in (folder / "trials.csv").read_text()
    assert verify_leaderboard(folder / "trials.csv", folder / "leaderboard.csv") == []
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["trials"]["dropped_not_public"] == 16
    assert manifest["corpus"]["instances"] == 3
    assert {"dpstats", "numpy", "pandas", "python"} <= set(manifest["versions"])
    for name, meta in manifest["files"].items():
        assert hashlib.sha256((folder / name).read_bytes()).hexdigest() == meta["sha256"], name
    with zipfile.ZipFile(zpath) as zf:
        names = set(zf.namelist())
        on_disk = {f"bundle/{p.relative_to(folder).as_posix()}" for p in folder.rglob("*") if p.is_file()}
        assert names == on_disk
        assert zf.read("bundle/trials.csv") == (folder / "trials.csv").read_bytes()
    # the zip is reproducible: a second build gives the same bytes (fixed timestamps and order)
    first = zpath.read_bytes()
    build_release(tmp_path / "out", corpus=corpus, trials=trials, name="bundle")
    assert zpath.read_bytes() == first


def test_release_refuses_a_corpus_that_is_not_public(mroz_corpus: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not public"):
        build_release(tmp_path, corpus=Corpus(mroz_corpus), trials=pd.DataFrame())


def test_release_cli(mroz_corpus: Path, tmp_path: Path, capsys) -> None:
    corpus = Corpus(public_copy(mroz_corpus))
    src = tmp_path / "trials.csv"
    trials_for(corpus, extra=False).to_csv(src, index=False)
    out = tmp_path / "rel"
    assert main(["release", "--out", str(out), "--results", str(src), "--corpus", str(mroz_corpus),
                 "--name", "b"]) == 0
    assert "3 instances, 24 trials (0 left out" in capsys.readouterr().out
    assert (out / "b.zip").is_file() and (out / "b" / "manifest.json").is_file()
    # without results the bundle still lists the instances
    assert main(["release", "--out", str(out), "--corpus", str(mroz_corpus), "--name", "empty",
                 "--results", str(tmp_path / "none.csv")]) == 2
