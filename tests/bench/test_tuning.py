"""dpstats tune: grids, the study split, trials run as benchmark trials, the held-out decision, tuned JSON files
and their loader."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest

from dpstats.algorithms import _REGISTRY
from dpstats.algorithms import configurations as tuned
from dpstats.algorithms.base import Algorithm, Param, Release
from dpstats.algorithms.release import AlgorithmSpec, Budget, release
from dpstats.bench import tuning
from dpstats.bench.model import AlgorithmRef
from dpstats.bench.scoring import score
from dpstats.bench.trial import execute
from dpstats.cli import main
from dpstats.data.corpus import Corpus
from dpstats.privacy.accounting import gaussian_sigma


class ToyMean(Algorithm):
    """Clip every value to [-clip, clip], average, add Gaussian noise (replace-one sensitivity 2 clip sqrt(d) / n)."""

    name = "toy_mean"
    task = "mean"
    citation = "test fixture"
    defaults: ClassVar = {"clip": Param(32.0, "deliberately loose"), "label": Param("x", "not tuned")}

    def _run(self, data, facts, epsilon, delta, rng):
        c = float(self.params["clip"])
        n, d = data.X.shape
        sens = 2 * c * math.sqrt(d) / n
        est = np.clip(data.X, -c, c).mean(axis=0) + rng.normal(0, gaussian_sigma(sens, epsilon, delta), d)
        return Release(est, epsilon, delta)


class ToyFallback(ToyMean):
    """Releases 0 as a fallback when the clip is below 4 (a released value's rule, as the defaults' guards)."""

    name = "toy_fallback"
    grid: ClassVar = {"clip": [2.0, 32.0]}

    def _run(self, data, facts, epsilon, delta, rng):
        out = super()._run(data, facts, epsilon, delta, rng)
        if float(self.params["clip"]) >= 4.0:
            return out
        return Release(np.zeros(data.d), epsilon, delta, details={"fallback": "0 released: clip below 4"})


class ToyGrid(ToyMean):
    name = "toy_grid"
    grid: ClassVar = {"clip": [6.0, 32.0, 128.0]}


class ToyBestDefault(ToyMean):
    name = "toy_best_default"
    defaults: ClassVar = {"clip": Param(6.0, "already good"), "label": Param("x", "not tuned")}
    grid: ClassVar = {"clip": [1.0, 6.0, 128.0]}


class ToyNothing(ToyMean):
    name = "toy_nothing"
    defaults: ClassVar = {"label": Param("x", "not tuned")}

    def _run(self, data, facts, epsilon, delta, rng):
        return Release(data.X.mean(axis=0) + rng.normal(0, 1, data.d), epsilon, delta)


class ToySlow(ToyMean):
    """Sleeps ``nap`` seconds before releasing (a candidate the time limit must stop)."""

    name = "toy_slow"
    defaults: ClassVar = {"clip": Param(6.0, "good"), "nap": Param(0.0, "no nap")}
    grid: ClassVar = {"nap": [0.0, 30.0]}

    def _run(self, data, facts, epsilon, delta, rng):
        time.sleep(float(self.params["nap"]))
        return super()._run(data, facts, epsilon, delta, rng)


class ToyInPlace(ToyMean):
    """Writes into its input (the benchmark's read-only arrays make that an error)."""

    name = "toy_in_place"

    def _run(self, data, facts, epsilon, delta, rng):
        data.X[0, 0] = 0.0
        return super()._run(data, facts, epsilon, delta, rng)


@pytest.fixture(scope="module")
def toy_corpus(tmp_path_factory) -> Corpus:
    """Six studies, each with one mean instance of N(3, 1) data (n = 200, d = 2)."""
    root = tmp_path_factory.mktemp("toy_corpus")
    rng = np.random.default_rng(11)
    for k in range(6):
        folder = root / f"study{k}"
        folder.mkdir()
        x = rng.normal(3.0, 1.0, size=(200, 2))
        np.savetxt(folder / "data.csv", x, delimiter=",", header="a,b", comments="", fmt="%.6f")
        (folder / "study.toml").write_text(
            f'id = "study{k}"\ntitle = "toy {k}"\n[datasets.main]\npath = "data.csv"\n'
            f'[[instances]]\nid = "toy{k}"\ntask = "mean"\ncolumns = ["a", "b"]\n', encoding="utf-8")
    return Corpus(root)


def test_scaled_values_rule() -> None:
    assert tuning.scaled_values(10) == [5, 20]
    assert tuning.scaled_values(1) == [2]            # ints stay >= 1, duplicates dropped
    lo, hi = tuning.scaled_values(0.9)
    assert 0 < lo < 0.9 < hi < 1                        # shares and quantiles stay in (0, 1)
    assert lo / (1 - lo) == pytest.approx(0.5 * 9) and hi / (1 - hi) == pytest.approx(2 * 9)
    assert tuning.scaled_values(3.0) == [1.5, 6.0]
    for v in (0, -1.0, True, "auto", None, math.inf):
        assert tuning.scaled_values(v) == []


def test_grids() -> None:
    g = tuning.grid_for(ToyGrid)
    assert g["rule"] == "declared"
    assert g["configs"] == [{}, {"clip": 6.0}, {"clip": 128.0}]
    g = tuning.grid_for(ToyMean)
    assert g["rule"] == "scaled" and g["configs"] == [{}, {"clip": 16.0}, {"clip": 64.0}]
    assert g["axes"] == {"clip": [32.0, 16.0, 64.0]}
    assert tuning.grid_for(ToyNothing)["configs"] == [{}]

    class Bad(ToyMean):
        grid: ClassVar = {"nope": [1, 2]}

    with pytest.raises(ValueError, match="unknown hyperparameter"):
        tuning.grid_for(Bad)

    class Huge(ToyMean):
        grid: ClassVar = {"clip": list(range(1, 100))}

    with pytest.raises(ValueError, match="candidates"):
        tuning.grid_for(Huge)


def test_split_by_study_is_seeded_and_disjoint(toy_corpus: Corpus) -> None:
    a = tuning.split_studies(toy_corpus, "mean", seed=1)
    assert a == tuning.split_studies(toy_corpus, "mean", seed=1)
    assert set(a["train_studies"]).isdisjoint(a["heldout_studies"])
    assert len(a["train_studies"]) == 3 and len(a["heldout_studies"]) == 3
    assert {f"toy{s[-1]}" for s in a["train_studies"]} == set(a["train_instances"])
    others = {tuple(tuning.split_studies(toy_corpus, "mean", seed=s)["train_studies"]) for s in range(8)}
    assert len(others) > 1
    sub = tuning.split_studies(toy_corpus, "mean", seed=1, max_studies=3)
    assert len(sub["train_studies"]) == 2 and len(sub["heldout_studies"]) == 1
    with pytest.raises(ValueError, match="two studies"):
        tuning.split_studies(toy_corpus, "sce", seed=1)


def test_tuning_accepts_a_better_clip_and_writes_the_evidence(toy_corpus: Corpus, tmp_path: Path) -> None:
    res = tuning.tune(ToyGrid, 1.0, trials=6, seed=3, corpus=toy_corpus)
    assert res.accepted and res.params == {"clip": 6.0}
    assert res.name == "toy_grid_tuned_eps1"
    assert res.heldout["tuned"]["tau50"] < res.heldout["default"]["tau50"]
    assert len(res.train_scores) == 3
    path = tuning.write_tuned(res, tmp_path)
    assert path.name == "mean_toy_grid_eps1.json"
    spec = json.loads(path.read_text())
    for key in ("split", "grid", "scores", "params", "default_params", "decision", "trials", "epsilon"):
        assert key in spec
    assert spec["split"]["train_studies"] and spec["split"]["heldout_studies"]
    assert spec["grid"]["axes"] == {"clip": [6.0, 32.0, 128.0]}
    assert isinstance(spec["scores"]["heldout"]["tuned"]["tau50"], float)

    # the loader reads the roster entry from the file: a configuration of ToyGrid, no class of its own
    configs = tuned.load_tuned(tmp_path, resolve=lambda task, name: {"toy_grid": ToyGrid}[name])
    assert len(configs) == 1
    cfg = configs[0]
    assert isinstance(cfg, tuned.Configuration)
    assert cfg.name == "toy_grid_tuned_eps1" and cfg.task == "mean" and cfg.interpretation == "standard"
    assert cfg.kind == "tuned" and cfg.epsilon == 1.0 and cfg.algorithm == "toy_grid" and cfg.cls is ToyGrid
    assert cfg.file == "mean_toy_grid_eps1.json" and not cfg.intervals
    assert dict(cfg.params) == {"clip": 6.0}
    spec = cfg.spec()
    assert spec == AlgorithmSpec("mean", "toy_grid", {"clip": 6.0}) and spec.cls is ToyGrid
    assert type(spec.build()) is ToyGrid and spec.build().params == {"clip": 6.0, "label": "x"}
    assert "tuned at epsilon = 1" in cfg.defaults["clip"].source and cfg.defaults["label"].value == "x"
    assert cfg.metadata()["name"] == "toy_grid_tuned_eps1"
    # it releases through release() with the tuned params: the release of ToyGrid(clip=6)
    p = tuning._problems(toy_corpus, ["toy0"])[0][0]
    out = release(spec, p.data, p.facts, Budget(1.0, 1e-6), np.random.default_rng(5))
    want = ToyGrid(clip=6.0).run(p.data, p.facts, 1.0, 1e-6, np.random.default_rng(5))
    assert np.array_equal(out.estimate, want.estimate)
    assert not any(c is not ToyGrid and issubclass(c, ToyGrid) for c in _REGISTRY.values())


def test_min_improvement_margin(toy_corpus: Corpus) -> None:
    loose = tuning.tune(ToyGrid, 1.0, trials=6, seed=3, corpus=toy_corpus, min_improvement=0.5)
    assert loose.accepted  # clip 6 against 32: several times smaller errors
    strict = tuning.tune(ToyGrid, 1.0, trials=6, seed=3, corpus=toy_corpus, min_improvement=0.99)
    assert not strict.accepted and "by at least 99%" in strict.decision
    assert strict.heldout["tuned"]["tau50"] < strict.heldout["default"]["tau50"]
    assert strict.to_json()["min_improvement"] == 0.99


def test_scaling_rule_tunes_a_class_without_grid(toy_corpus: Corpus) -> None:
    res = tuning.tune(ToyMean, 3.0, trials=4, seed=0, corpus=toy_corpus)
    assert res.grid["rule"] == "scaled"
    assert res.accepted and res.params == {"clip": 16.0}
    assert res.name == "toy_mean_tuned_eps3"


def test_defaults_kept_when_nothing_beats_them(toy_corpus: Corpus, tmp_path: Path) -> None:
    res = tuning.tune(ToyBestDefault, 1.0, trials=4, seed=0, corpus=toy_corpus)
    assert not res.accepted and res.params == {}
    assert "defaults are best" in res.decision
    nothing = tuning.tune(ToyNothing, 1.0, trials=2, seed=0, corpus=toy_corpus)
    assert not nothing.accepted and "no hyperparameter" in nothing.decision
    tuning.write_tuned(res, tmp_path)
    assert tuned.load_tuned(tmp_path, resolve=lambda t, n: ToyBestDefault) == []


def test_loader_with_empty_missing_and_bad_folders(tmp_path: Path) -> None:
    assert tuned.load_tuned(tmp_path / "missing") == []
    assert tuned.load_tuned(tmp_path) == []
    assert tuned.register_tuned(tmp_path) == []
    # the shipped folder registers without error, and every accepted file names a registered algorithm
    for cfg in tuned.register_tuned():
        assert cfg.name.startswith(cfg.algorithm + "_tuned_eps") and cfg.cls is _REGISTRY[(cfg.task, cfg.algorithm)]
    (tmp_path / "broken.json").write_text("{not json")
    (tmp_path / "unknown.json").write_text(json.dumps(
        {"accepted": True, "task": "mean", "algorithm": "no_such_algorithm", "epsilon": 1.0, "params": {}}))
    with pytest.warns(RuntimeWarning, match="skipping tuned configuration"):
        assert tuned.register_tuned(tmp_path) == []


def test_tune_cli(toy_corpus: Corpus, tmp_path: Path, capsys) -> None:
    out = tmp_path / "tuned"
    rc = main(["tune", "kv_clip", "--epsilon", "1", "--trials", "1", "--seed", "2", "--max-studies", "4",
               "--corpus", str(toy_corpus.root), "--out", str(out)])
    assert rc == 0
    spec = json.loads((out / "mean_kv_clip_eps1.json").read_text())
    assert spec["algorithm"] == "kv_clip" and spec["trials"] == 1 and spec["split"]["seed"] == 2
    assert len(spec["split"]["train_studies"]) == 2
    assert "kv_clip at epsilon = 1" in capsys.readouterr().out
    assert main(["tune", "no_such_algorithm", "--epsilon", "1", "--corpus", str(toy_corpus.root),
                 "--out", str(out)]) == 2


def test_tuning_trials_are_the_benchmarks_trials(toy_corpus: Corpus) -> None:
    """Each tuning trial gives the release and score of the benchmark's trial with the same seed."""
    problems, skipped = tuning._problems(toy_corpus, ["toy0", "toy1"])
    assert not skipped and len(problems) == 2
    default, small = tuning.run_configs(ToyGrid, [{}, {"clip": 6.0}], problems, 1.0, 1e-6, trials=3)
    assert len(default) == len(small) == 6
    assert set(default["seed"]) == {0, 1, 2} and set(default["algorithm"]) == {"toy_grid"}
    for table, params in ((default, {}), (small, {"clip": 6.0})):
        for row in table.itertuples():
            p = next(q for q in problems if q.instance == row.instance)
            kind, msg, est, secs = execute(AlgorithmSpec.of(ToyGrid, params), p, 1.0, 1e-6, int(row.seed))
            bench = score(p, AlgorithmRef.of(ToyGrid), 1.0, 1e-6, int(row.seed), kind, msg, est, secs, 0.0)
            assert row.status == bench.status == "ok"
            assert row.ratio == bench.ratio  # bit for bit: same seeding, same scoring
    assert (small["ratio"] < default["ratio"]).mean() > 0.5
    # the candidates travel to the workers as data: nothing was registered here
    assert ("mean", "toy_grid") not in _REGISTRY and not [k for k in _REGISTRY if "[tune" in k[1]]


def test_tuning_trials_run_under_the_benchmarks_limits(toy_corpus: Corpus) -> None:
    """A candidate that hangs is killed at the time limit (timeout); one that writes its input fails (error)."""
    t0 = time.monotonic()
    res = tuning.tune(ToySlow, 1.0, trials=1, seed=3, corpus=toy_corpus, time_limit=0.5)
    assert time.monotonic() - t0 < 20  # 30 s naps were interrupted, not waited for
    napping = next(s for s in res.train_scores if s["params"] == {"nap": 30.0})
    assert napping["statuses"] == {"timeout": 3} and napping["tau50"] == math.inf
    assert res.to_json()["limits"] == {"time": 0.5, "memory_mb": 4096.0}
    problems, _ = tuning._problems(toy_corpus, ["toy0"])
    table = tuning.run_config(ToyInPlace, {}, problems, 1.0, 1e-6, trials=1)
    assert list(table["status"]) == ["error"] and "read-only" in table["error"][0]


def test_tuning_scores_a_method_that_releases_fallbacks(toy_corpus: Corpus) -> None:
    """A release's fallback reason (a string) is the trials table's flag: tuning a method with guards runs."""
    problems, _ = tuning._problems(toy_corpus, ["toy0", "toy1"])
    guarded, plain = tuning.run_configs(ToyFallback, [{"clip": 2.0}, {}], problems, 1.0, 1e-6, trials=2)
    assert guarded["fallback"].tolist() == [True] * 4 and plain["fallback"].tolist() == [False] * 4
    res = tuning.tune(ToyFallback, 1.0, trials=2, seed=3, corpus=toy_corpus)
    assert 2.0 in {s["params"].get("clip") for s in res.train_scores} and res.params.get("clip") != 2.0
