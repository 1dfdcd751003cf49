"""The release bundle: the public corpus's instances, trials, leaderboard, README and manifest."""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import sys
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dpstats.bench import evaluation as ev
from dpstats.bench.report.loading import load_trials
from dpstats.bench.report.site import write_report

__all__ = ["build_release", "corpus_instance_table", "README"]

#: the repository root (``dpstats/bench/report/release.py`` is three levels below it)
_ROOT = Path(__file__).resolve().parents[3]


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()

def _versions() -> dict[str, str]:
    import importlib.metadata as md

    from dpstats import __version__

    out = {"dpstats": __version__, "python": sys.version.split()[0], "platform": platform.platform()}
    for pkg in ("numpy", "scipy", "pandas", "matplotlib", "statsmodels", "patsy"):
        try:
            out[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            out[pkg] = "absent"
    return out

def _git_commit() -> str | None:
    import subprocess

    root = _ROOT
    try:
        r = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    if r.returncode != 0 or not r.stdout.strip():
        return None
    commit = r.stdout.strip()
    try:
        st = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no", "--", "dpstats"],
                            capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return commit
    return commit + ("-dirty" if st.stdout.strip() else "")

def corpus_instance_table(corpus: Any) -> tuple[pd.DataFrame, list[str]]:
    """The public instance list with facts: ``instance, study, task, n, d, columns, se_type, baseline, ...``.

    Returns
    -------
    table : DataFrame
    problems : list of str
        Instances that could not be built (left out of the table).
    """
    from dpstats.ols.baseline import compute_baseline

    rows, problems = [], []
    for s in corpus.specs():
        try:
            inst = corpus.instance(s.id)
            b = compute_baseline(inst)
        except Exception as exc:  # noqa: BLE001 - reported in the manifest, not fatal
            problems.append(f"{s.id}: {type(exc).__name__}: {exc}")
            continue
        f = inst.facts
        study = corpus.studies[s.study]
        rows.append({
            "instance": s.id, "study": s.study, "task": s.task, "n": f.n, "d": f.d,
            "columns": " | ".join(f.columns), "outcome": f.outcome or "", "coefficient": f.coefficient or "",
            "se_type": b.se_type or "", "baseline": float(b.baseline),
            "estimate": json.dumps([float(v) for v in np.atleast_1d(b.estimate)]),
            "formula": s.formula or "", "dataset": study.datasets[s.dataset].source or study.datasets[s.dataset].path
            or "stack", "study_title": study.title, "citation": study.citation,
        })
    return pd.DataFrame(rows), problems

README = """\
# dpstats benchmark release {version}

This bundle is the public part of the dpstats benchmark:

* `instances.csv`: every instance of the public corpus with its public facts:
  study, task, `n`, `d`, the design columns (or the mean columns), the
  outcome and the coefficient of interest, the standard-error type, the
  non-private estimate and the sampling-error baseline.
* `trials.csv`: every trial of every algorithm on the public corpus (one row
  per algorithm, instance, ε and seed): status (ok, declined, error, timeout,
  memory), the error ratio `error / baseline` (`inf` for failures), time and
  memory.
* `leaderboard.csv`: τ@50 and rank per task, ε and slice, recomputed from
  `trials.csv` (`dpstats.bench.leaderboard.verify_leaderboard` checks it).
* `profiles.csv`: the exact performance profiles (success rate as a step
  function of τ).
* `manifest.json`: versions, the source commit, counts and SHA-256 checksums
  of every file.

Scoring: a trial succeeds at threshold τ when its ratio is at most τ;
failures fail at every τ. An instance's success rate is the share of its
successful trials; the corpus success rate averages instances so that every
study weighs the same. τ@50 is the smallest τ at which the corpus success
rate reaches 50 % (∞ when it never does). See the benchmark documentation
(`docs/benchmark/evaluation.md`) for the formulas.

Counts: {n_instances} instances from {n_studies} studies; {n_trials} trials of
{n_algorithms} algorithms.
"""

def build_release(out: str | os.PathLike[str], results: Sequence[str | os.PathLike[str]] | None = None,
                  corpus: Any = None, trials: pd.DataFrame | None = None, name: str | None = None
                  ) -> dict[str, Any]:
    """Write the release bundle as a folder and a ``.zip``.

    Parameters
    ----------
    out : path-like
        Parent folder; the bundle is ``out/<name>/`` and ``out/<name>.zip``.
    results : sequence of path-like, optional
        Results files (SQLite or CSV) with public-corpus trials.
    corpus : Corpus, optional
        The public corpus (default: the one shipped with dpstats). A corpus
        whose ``corpus.toml`` does not say ``public = true`` is refused unless
        it is the shipped public corpus.
    trials : DataFrame, optional
        Trials given directly instead of ``results``.
    name : str, optional
        Bundle name (default ``dpstats-benchmark-<version>``).

    Returns
    -------
    dict
        ``folder``, ``zip``, ``manifest`` and ``dropped`` (trials left out
        because their instance is not in the public corpus).
    """
    from dpstats import __version__
    from dpstats.data.corpus import Corpus, public_corpus_path

    if corpus is None:
        corpus = Corpus(public_corpus_path())
    elif not corpus.is_public and Path(corpus.root).resolve() != Path(public_corpus_path()).resolve():
        raise ValueError(f"corpus {corpus.root} is not public (its corpus.toml lacks public = true); "
                         "only the public corpus is released")
    name = name or f"dpstats-benchmark-{__version__}"
    out = Path(out)
    folder = out / name
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    table, problems = corpus_instance_table(corpus)
    table.to_csv(folder / "instances.csv", index=False)
    if trials is None:
        trials = load_trials(results) if results else pd.DataFrame(columns=list(ev.TRIAL_COLUMNS))
    dropped = 0
    if len(trials):
        known = table.set_index("instance")[["study", "task", "n", "d"]]
        t = trials.copy()
        idx = t["instance"].astype(str)
        ok = idx.isin(known.index)
        for col in ("study", "task"):
            ok &= t[col].astype(str) == idx.map(known[col]).astype(str)
        for col in ("n", "d"):
            ok &= pd.to_numeric(t[col], errors="coerce").to_numpy() == idx.map(known[col]).astype(float).to_numpy()
        dropped = int((~ok).sum())
        trials = t[ok]
    files = {"instances.csv": folder / "instances.csv"}
    report_dir = folder / "_work"
    if len(trials):
        rep = write_report(trials, report_dir, site=False)
        for f in ("trials.csv", "leaderboard.csv", "profiles.csv"):
            shutil.move(str(report_dir / f), folder / f)
            files[f] = folder / f
        shutil.rmtree(report_dir)
        lb = rep["leaderboard"]
    else:
        pd.DataFrame(columns=list(ev.TRIAL_COLUMNS)).to_csv(folder / "trials.csv", index=False)
        files["trials.csv"] = folder / "trials.csv"
        lb = pd.DataFrame()
    prot = _ROOT / "docs" / "benchmark"
    for doc in ("protocol.md", "evaluation.md", "reports.md"):
        if (prot / doc).is_file():
            shutil.copy(prot / doc, folder / doc)
            files[doc] = folder / doc
    n_alg = int(trials[["task", "algorithm"]].drop_duplicates().shape[0]) if len(trials) else 0
    (folder / "README.md").write_text(README.format(
        version=__version__, n_instances=len(table), n_studies=table["study"].nunique() if len(table) else 0,
        n_trials=len(trials), n_algorithms=n_alg), encoding="utf-8")
    files["README.md"] = folder / "README.md"
    manifest = {
        "name": name, "versions": _versions(), "commit": _git_commit(),
        "corpus": {"name": corpus.name, "instances": int(len(table)),
                   "studies": int(table["study"].nunique()) if len(table) else 0, "not_built": problems},
        "trials": {"rows": int(len(trials)), "dropped_not_public": dropped,
                   "algorithms": n_alg, "epsilons": sorted({float(e) for e in trials["epsilon"]}) if len(trials) else []},
        "leaderboard_rows": int(len(lb)),
        "protocol": {"epsilons": [0.3, 1, 3, 10], "delta": 1e-6, "trials_public": 10, "trials_withheld": 30,
                     "time_limit_s": 60, "memory_limit_mb": 4096},
        "files": {k: {"sha256": _sha256(v), "bytes": v.stat().st_size} for k, v in sorted(files.items())},
    }
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    zpath = out / f"{name}.zip"
    with zipfile.ZipFile(zpath, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for p in sorted(folder.rglob("*")):
            if p.is_file():
                info = zipfile.ZipInfo(f"{name}/{p.relative_to(folder).as_posix()}", date_time=(1980, 1, 1, 0, 0, 0))
                info.compress_type = zipfile.ZIP_DEFLATED
                info.external_attr = 0o644 << 16
                zf.writestr(info, p.read_bytes())
    return {"folder": folder, "zip": zpath, "manifest": manifest, "dropped": dropped}

