"""Cluster draws of instances whose fixed effects are nested in the clusters (dpstats.bench.inference.resample).

Each drawn copy of a cluster is its own cluster and gets its own fixed-effect
levels; every other instance is drawn exactly as before (the digests below
were computed with ``resample`` at commit ``bc6b7e8``, before nested fixed
effects were rebuilt, so the coverage trials of those instances cannot move).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpstats.bench import inference as I
from dpstats.data.corpus import Corpus
from dpstats.data.instance import build_instance
from dpstats.data.manifest import InstanceSpec

#: the sce instances of the public corpus with fixed effects nested in their clusters
NESTED = ("cigar_panel", "fetter13_ols", "guns_fe", "kr14_organ", "papke05_mathpnl", "thornton08", "ab91_empluk_wg")

#: ``_digest(resample(instance, seed))`` for seeds 0, 1, 7 at commit bc6b7e8
HEAD_DIGESTS = {
    "mroz87_lwage": ("93fb2bc7742f9a4f", "6b57e666f19e73b7", "16744512875e9ead"),
    "ab91_empluk": ("d57e6396154553d9", "338afe87a01123c8", "d206cdea3bf1666f"),  # clustered
    "papke05_pooled": ("a83caa84fe7e884a", "b728f2c2a0816d29", "9710c0d6eee3f7f8"),  # clustered, year FE not nested
    "lmb04_lagdem": ("673daebda8c6990b", "47374b2a59935419", "7ea7f4f09bc9d0c3"),  # clustered
    "mm_nhis": ("41eaacb3dac4f2b4", "7972dafc245d09cb", "0b0556cb5ba8f6cd"),  # weighted
    "cft15_senate_rd_linreg": ("d56e0c8edd760988", "01de08a9c99f7555", "588bae34de1ba4dc"),  # weighted linreg
    "mean_guns_fe": ("f6175cef1da28cff", "c178f2d6415eba9c", "e734c538bf01de1a"),
}
SEEDS = (0, 1, 7)


@pytest.fixture(scope="module")
def corpus() -> Corpus:
    return Corpus.public()


def _digest(inst) -> str:
    h = hashlib.sha256()
    for a in (inst.X, inst.y, inst.weights):
        h.update(b"-" if a is None else np.ascontiguousarray(a, dtype=float).tobytes())
    h.update(b"-" if inst.clusters is None else "\x00".join(map(str, np.asarray(inst.clusters).tolist())).encode())
    h.update(repr(list(inst.frame.columns)).encode())
    h.update(pd.util.hash_pandas_object(inst.frame, index=True).to_numpy().tobytes())
    facts = inst.facts.to_dict()
    facts.pop("cluster", None)  # a later public fact (the design's cluster variable); the draws are unchanged
    h.update(repr((facts, inst.nested_columns)).encode())
    return h.hexdigest()[:16]


def _rows(inst, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The drawn rows and copies of the first draw the stream gives (the one resample keeps when it is full rank)."""
    rng = np.random.default_rng([I.RESAMPLE_KEY, seed])
    while True:
        idx, copies = I._draw_rows(inst, rng)
        if idx is not None:
            return idx, copies


@pytest.mark.parametrize("instance", sorted(HEAD_DIGESTS))
def test_instances_without_nested_fixed_effects_are_drawn_as_before(corpus, instance):
    inst = corpus.instance(instance)
    assert not inst.nested_columns
    assert tuple(_digest(I.resample(inst, s)) for s in SEEDS) == HEAD_DIGESTS[instance]


@pytest.mark.parametrize("instance", NESTED)
def test_a_draw_gives_each_drawn_copy_its_own_fixed_effects(corpus, instance):
    inst = corpus.instance(instance)
    assert inst.nested_columns  # the corpus still nests them; otherwise this test tests nothing
    seed = 3
    draw = I.resample(inst, seed)
    idx, copies = _rows(inst, seed)
    f = draw.facts
    g = len(np.unique(inst.clusters))
    # whole clusters, as many as the population, each drawn copy its own cluster
    assert np.array_equal(draw.clusters, copies) and len(np.unique(draw.clusters)) == g
    assert np.array_equal(draw.y, inst.y[idx])
    # a full-rank design whose facts describe it
    assert I._full_rank(draw.X, draw.weights)
    assert draw.X.shape == (len(idx), f.d) and f.n == len(idx) and len(f.columns) == f.d
    assert f.columns[f.coef_index] == inst.facts.coefficient
    # the columns that are not nested fixed effects: the population's, at the drawn rows, in the same order
    old = [j for j in range(inst.d) if j not in set(inst.nested_columns)]
    new = [j for j in range(f.d) if j not in set(draw.nested_columns)]
    assert [f.columns[j] for j in new] == [inst.facts.columns[j] for j in old]
    assert np.array_equal(draw.X[:, new], inst.X[np.ix_(idx, old)])
    # the nested dummies: 0/1, each a level of one drawn copy, one level per copy and population level
    D = draw.X[:, list(draw.nested_columns)]
    assert set(np.unique(D)) <= {0.0, 1.0} and np.all(D.sum(axis=0) > 0) and np.all(D.sum(axis=1) <= 1)
    assert all(len(np.unique(copies[D[:, k] == 1])) == 1 for k in range(D.shape[1]))
    assert f.intercept and "Intercept" in f.columns
    for term in {I._term_name(inst.facts.columns[j]) for j in inst.nested_columns}:
        pop = inst.X[:, [j for j in inst.nested_columns if I._term_name(inst.facts.columns[j]) == term]]
        pop_level = np.where(pop.any(axis=1), 1 + np.argmax(pop, axis=1), 0)
        pairs = len(set(zip(copies.tolist(), pop_level[idx].tolist())))
        cols = [j for j in draw.nested_columns if I._term_name(f.columns[j]) == term]
        assert len(cols) == pairs - 1  # one reference level dropped (an intercept absorbs it)
    # public facts of the new columns: dummies with bounds [0, 1]; nothing left of the population's nested columns
    names = {f.columns[j] for j in draw.nested_columns}
    assert names <= set(f.dummies) and all(f.bounds[c] == (0.0, 1.0) for c in names)
    assert set(f.dummies) <= set(f.columns) and set(f.bounds) <= set(f.columns) | {f.outcome}
    # the frame carries the draw's clusters and levels
    col = inst.spec.se.split(":", 1)[1]
    assert np.array_equal(draw.frame[col].to_numpy(), copies) and len(draw.frame) == len(idx)
    # the non-private interval of the draw is finite, with the CR1 correction not counting the nested columns
    est, lo, hi = I.nonprivate_interval(draw)
    assert np.all(np.isfinite([est[0], lo[0], hi[0]])) and lo[0] < est[0] < hi[0]


@pytest.mark.parametrize("instance", ["kr14_organ", "thornton08", "cigar_panel"])
def test_the_coefficient_keeps_its_meaning_within_each_drawn_copy(corpus, instance):
    """With one nested term, the draw's OLS coefficient is the within-copy regression of the other columns (FWL)."""
    inst = corpus.instance(instance)
    draw = I.resample(inst, 11)
    est, _, _ = I.nonprivate_interval(draw)
    other = [j for j in range(draw.d) if j not in set(draw.nested_columns) and draw.facts.columns[j] != "Intercept"]
    Z = pd.DataFrame(np.c_[draw.X[:, other], draw.y]).groupby(draw.clusters).transform(lambda s: s - s.mean())
    Z = Z.to_numpy()
    beta, *_ = np.linalg.lstsq(Z[:, :-1], Z[:, -1], rcond=None)
    assert est[0] == pytest.approx(beta[other.index(draw.facts.coef_index)], rel=1e-8)


def _county_instance(formula: str, task: str = "sce"):
    """Counties (fixed effects) nested in states (clusters), three counties a state."""
    rng = np.random.default_rng(5)
    s, c, r = 12, 3, 6
    state = np.repeat(np.arange(s), c * r)
    county = np.repeat(np.arange(s * c), r)
    x = rng.normal(size=state.size)
    y = 0.5 * x + rng.normal(size=s * c)[county] + rng.normal(size=state.size)
    df = pd.DataFrame({"state": [f"s{v}" for v in state], "county": county, "x": x, "y": y})
    spec = InstanceSpec(id=f"counties_{task}", study="t", task=task, dataset="t", manifest=Path("<t>"),
                        formula=formula, coefficient="x" if task == "sce" else None, se="cluster:state",
                        fixed_effects=("county",))
    return build_instance(spec, df)


@pytest.mark.parametrize("formula, reduced", [("y ~ x", True), ("y ~ 0 + x", False)])
def test_several_levels_in_a_cluster_and_the_reference_level(formula, reduced):
    """Levels (county, drawn copy of the state); a reference level only when an intercept absorbs one, as patsy."""
    inst = _county_instance(formula)
    assert len(inst.nested_columns) == 36 - reduced
    draw = I.resample(inst, 0)
    idx, copies = _rows(inst, 0)
    levels = set(zip(copies.tolist(), np.asarray(inst.frame["county"])[idx].tolist()))
    assert len(draw.nested_columns) == len(levels) - reduced
    assert all(draw.facts.columns[j].startswith("C(county)[T." if reduced else "C(county)[")
               for j in draw.nested_columns)
    # the frame's county holds the draw's level of each row, the one of its dummy column
    D = draw.X[:, list(draw.nested_columns)]
    lv = draw.frame["county"].to_numpy()
    assert np.array_equal(np.where(D.any(axis=1), np.argmax(D, axis=1) + reduced, 0), lv)
    assert len(np.unique(lv)) == len(levels)
    # the coefficient of x is the within-(copy, county) regression
    fr = draw.frame.assign(x=draw.frame["x"] - draw.frame.groupby("county")["x"].transform("mean"),
                           y=draw.frame["y"] - draw.frame.groupby("county")["y"].transform("mean"))
    est, lo, hi = I.nonprivate_interval(draw)
    assert est[0] == pytest.approx(float(fr["x"] @ fr["y"] / (fr["x"] @ fr["x"])), rel=1e-10)
    assert np.isfinite(lo[0]) and np.isfinite(hi[0])


def test_nested_fixed_effects_of_a_linreg_instance_are_refused():
    """A linreg target includes the fixed effects, which a cluster draw gives each copy anew."""
    inst = _county_instance("y ~ x", task="linreg")
    assert inst.nested_columns
    with pytest.raises(I.ResampleError, match="linreg"):
        I.resample(inst, 0)


def test_a_nested_instance_runs_as_a_coverage_trial(corpus):
    from dpstats.algorithms.release import AlgorithmSpec
    from dpstats.bench.model import AlgorithmRef
    from tests.bench.test_inference import OracleExact

    ip = I.inference_problem(corpus.instance("kr14_organ"))
    r = I.run_inference_trial(AlgorithmSpec.of(OracleExact), ip, AlgorithmRef.of(OracleExact), 1.0, 1e-6, 0)
    assert r.status == "ok", r.error
    assert r.interval["n_draw"] > 0 and np.isfinite(r.interval["width_ratio"])


def test_the_nonprivate_interval_covers_on_a_nested_instance(corpus):
    """Sanity only: the reference of kr14_organ (27 state clusters, state and quarter FE) over 50 draws."""
    inst = corpus.instance("kr14_organ")
    truth = I.population_truth(inst)[0]
    covered = []
    for s in range(50):
        _, lo, hi = I.nonprivate_interval(I.resample(inst, s))
        covered.append(lo[0] <= truth <= hi[0])
    assert 0.6 <= np.mean(covered) <= 1.0


@pytest.mark.r
@pytest.mark.parametrize("instance", ["kr14_organ", "guns_fe"])
def test_r_refits_the_draw_from_its_frame(corpus, instance):
    """R's lm on the draw's frame (the formula route) finds the draw's design and its cluster SE."""
    from tests.ols.test_r_engine import require_r

    require_r()
    from dpstats.ols.baseline import compute_baseline
    from dpstats.ols.r_engine import r_covariance

    draw = I.resample(corpus.instance(instance), 2)
    j = draw.facts.coef_index
    rc = r_covariance(draw, route="formula")
    assert np.sqrt(rc.vcov[j, j]) == pytest.approx(compute_baseline(draw).se, rel=1e-8)
