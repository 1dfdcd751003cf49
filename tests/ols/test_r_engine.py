"""The R engine (rpy2 + sandwich/clubSandwich) agrees with the Python engine.

Every public sce instance, both R routes (design matrix and translated
formula), and small synthetic cases for each covariance type. Tests that need
R skip with the reason when R, rpy2 or an R package is absent.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpstats.data.corpus import Corpus, InstanceSpec
from dpstats.ols.covariance import (
    BOOTSTRAP_SEED,
    ClusterCR1,
    PairsBootstrap,
    bootstrap_indices,
    covariance_from_spec,
    fit_ols,
)
from dpstats.data.instance import build_instance
from dpstats.ols.r_engine import translate_formula

pytestmark = pytest.mark.r

RTOL = 1e-8


def require_r() -> None:
    """Skip (with the reason) unless R, rpy2, sandwich and clubSandwich are usable."""
    pytest.importorskip("rpy2", reason="rpy2 is not installed: pip install 'dpstats[r]' (needs R)")
    from dpstats.ols.r_engine import r_available

    ok, reason = r_available()
    if not ok:
        pytest.skip(reason)


def _public_sce_ids() -> list[str]:
    try:
        return [s.id for s in Corpus.public().specs("sce")]
    except Exception:  # the corpus itself is tested elsewhere
        return []


SCE_IDS = _public_sce_ids()


@pytest.fixture(scope="module")
def corpus() -> Corpus:
    return Corpus.public()


def python_vcov(inst) -> tuple[np.ndarray, np.ndarray, object, object]:
    fit = fit_ols(inst.X, inst.y, inst.weights, inst.clusters, inst.nested_columns)
    est = covariance_from_spec(inst.spec.se)
    return est.vcov(fit), fit.beta, est, fit


def assert_vcov_close(V_r: np.ndarray, V_py: np.ndarray, j: int, rtol: float = RTOL) -> None:
    # the coefficient of interest's SE to rtol; the whole matrix to rtol of its largest entry
    # (with fixed effects nested in clusters some variances are ~1e-30 and only noise)
    assert V_r.shape == V_py.shape
    np.testing.assert_allclose(np.sqrt(V_r[j, j]), np.sqrt(V_py[j, j]), rtol=rtol)
    np.testing.assert_allclose(V_r, V_py, rtol=rtol, atol=rtol * np.abs(V_py).max())


@pytest.mark.skipif(not SCE_IDS, reason="the public corpus has no sce instances here")
@pytest.mark.parametrize("iid", SCE_IDS)
def test_public_sce_instance_python_and_r_agree(corpus: Corpus, iid: str) -> None:
    require_r()
    from dpstats.ols.r_engine import r_covariance

    inst = corpus.instance(iid)
    V_py, beta_py, est, fit = python_vcov(inst)
    res = r_covariance(inst, route="design")
    j = inst.facts.coef_index
    assert_vcov_close(res.vcov, V_py, j)
    np.testing.assert_allclose(res.beta, beta_py, rtol=RTOL, atol=RTOL * np.abs(beta_py).max())
    if isinstance(est, ClusterCR1):
        assert res.k_effective == est.k_effective(fit)
        assert "vcovCL_HC1" in res.crosschecks
    if isinstance(est, PairsBootstrap):
        assert res.bootstrap_skipped == est.last_skipped


#: public instances whose formula route exercises the tricky parts: a reference level
#: without complete rows (ab91), unused dummy levels and nested fixed effects (thornton08),
#: float32 columns (thornton08_ctrl), text factors (bm04_controls), interactions with powers
#: (lmb04_fullpoly), state and year effects (guns_fe)
FORMULA_ROUTE_IDS = [i for i in ("ab91_empluk", "ab91_empluk_wg", "thornton08", "thornton08_ctrl", "bm04_controls",
                                 "lmb04_fullpoly", "guns_fe", "mroz87_lwage") if i in SCE_IDS]


def _formula_route(corpus: Corpus, iid: str) -> None:
    require_r()
    from dpstats.ols.r_engine import r_covariance

    inst = corpus.instance(iid)
    V_py, beta_py, est, fit = python_vcov(inst)
    res = r_covariance(inst, route="formula")
    # patsy evaluates I(x**2) in float32 for float32 columns, R in double: agreement to float32 precision
    f32 = any(inst.frame[c].dtype == np.float32 for c in inst.frame.columns)
    rtol = 1e-5 if f32 else RTOL
    np.testing.assert_allclose(res.beta, beta_py, rtol=rtol, atol=rtol * np.abs(beta_py).max())
    assert_vcov_close(res.vcov, V_py, inst.facts.coef_index, rtol=rtol)
    if isinstance(est, ClusterCR1):
        # the nesting of fixed effects in clusters, recomputed in R from the factors
        assert res.k_effective == est.k_effective(fit)


@pytest.mark.parametrize("iid", FORMULA_ROUTE_IDS)
def test_public_sce_instance_formula_route(corpus: Corpus, iid: str) -> None:
    """The manifest formula translated to R and fitted on ``frame`` gives the same coefficients and SE."""
    _formula_route(corpus, iid)


@pytest.mark.slow
@pytest.mark.skipif(not SCE_IDS, reason="the public corpus has no sce instances here")
@pytest.mark.parametrize("iid", SCE_IDS)
def test_every_public_sce_instance_formula_route(corpus: Corpus, iid: str) -> None:
    _formula_route(corpus, iid)


# --------------------------------------------------------------------------
# Synthetic instances
# --------------------------------------------------------------------------


def make_instance(df: pd.DataFrame, formula: str, coefficient: str, se: str, **kw) -> object:
    spec = InstanceSpec(
        id="synthetic", study="synthetic", task="sce", dataset="main", manifest=Path("synthetic/study.toml"),
        formula=formula, coefficient=coefficient, se=se, **kw,
    )
    return build_instance(spec, df)


def synthetic_frame(n: int = 300, seed: int = 1, groups: int = 12) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    g = rng.integers(0, groups, n)
    x = rng.normal(size=n)
    z = rng.exponential(size=n) + 0.1
    region = np.array(["north", "south", "east", "west"])[rng.integers(0, 4, n)]
    w = rng.uniform(0.5, 3.0, n)
    # heteroskedastic, clustered errors
    u = rng.normal(size=groups)[g] + rng.normal(size=n) * (0.5 + np.abs(x))
    y = 1.0 + 0.5 * x - 0.3 * np.log(z) + 0.2 * x**2 + (region == "south") * 0.4 + u
    return pd.DataFrame({"y": y, "x": x, "z": z, "region": region, "g": g, "firm": g.astype(str), "w": w})


@pytest.mark.parametrize("se", ["classical", "HC0", "HC1", "HC2", "HC3"])
@pytest.mark.parametrize("weighted", [False, True])
def test_synthetic_classical_and_hc(se: str, weighted: bool) -> None:
    require_r()
    from dpstats.ols.r_engine import r_covariance

    df = synthetic_frame()
    inst = make_instance(df, "y ~ x + np.log(z) + C(region)", "x", se, weights="w" if weighted else None)
    V_py, beta_py, _, _ = python_vcov(inst)
    for route in ("design", "formula"):
        res = r_covariance(inst, route=route)
        assert_vcov_close(res.vcov, V_py, inst.facts.coef_index)
        np.testing.assert_allclose(res.beta, beta_py, rtol=RTOL)


def test_hc_types_differ_so_the_comparison_has_power() -> None:
    require_r()
    from dpstats.ols.r_engine import r_covariance

    inst = make_instance(synthetic_frame(), "y ~ x + np.log(z)", "x", "HC0")
    ses = {t: float(np.sqrt(r_covariance(inst, se=t).vcov[1, 1])) for t in ("classical", "HC0", "HC1", "HC2", "HC3")}
    assert len({round(v, 10) for v in ses.values()}) == 5
    assert ses["HC0"] < ses["HC1"] and ses["HC2"] < ses["HC3"]


@pytest.mark.parametrize("weighted", [False, True])
def test_synthetic_clusters_with_nested_fixed_effects(weighted: bool) -> None:
    """Firm fixed effects nested in firm clusters are not counted in k (Stata's convention)."""
    require_r()
    from dpstats.ols.r_engine import r_covariance

    df = synthetic_frame(groups=15)
    inst = make_instance(df, "y ~ x + np.log(z)", "x", "cluster:g", fixed_effects=("firm",),
                         weights="w" if weighted else None)
    assert len(inst.nested_columns) == 14
    V_py, beta_py, est, fit = python_vcov(inst)
    k = est.k_effective(fit)
    assert k == inst.d - 14 - 1 == 2
    for route in ("design", "formula"):
        res = r_covariance(inst, route=route)
        assert res.k_effective == k
        assert_vcov_close(res.vcov, V_py, 1)
        # vcovCL(HC1) and clubSandwich CR1S, rescaled from k = rank to k_eff, agree
        assert set(res.crosschecks) == {"vcovCL_HC1", "clubSandwich_CR1S"}
        for other in res.crosschecks.values():
            np.testing.assert_allclose(other, res.vcov, rtol=RTOL, atol=RTOL * np.abs(res.vcov).max())


def test_synthetic_clusters_without_nesting_use_full_k() -> None:
    require_r()
    from dpstats.ols.r_engine import r_covariance

    df = synthetic_frame(groups=20)
    inst = make_instance(df, "y ~ x + np.log(z) + C(region)", "x", "cluster:g")
    assert inst.nested_columns == ()
    V_py, _, est, fit = python_vcov(inst)
    res = r_covariance(inst)
    assert res.k_effective == inst.d
    assert_vcov_close(res.vcov, V_py, 1)
    # without nesting the Stata factor is vcovCL's HC1 and clubSandwich's CR1S themselves
    np.testing.assert_allclose(res.crosschecks["clubSandwich_CR1S"], V_py, rtol=RTOL, atol=RTOL * np.abs(V_py).max())


@pytest.mark.parametrize("weighted", [False, True])
def test_synthetic_bootstrap_same_resamples(weighted: bool) -> None:
    require_r()
    from dpstats.ols.r_engine import r_covariance

    df = synthetic_frame(n=40, seed=3)
    # a rare dummy: some resamples miss all its rows and are skipped by both engines
    df["rare"] = 0.0
    df.loc[:2, "rare"] = 1.0
    inst = make_instance(df, "y ~ x + rare", "x", "bootstrap:300", weights="w" if weighted else None)
    V_py, _, est, _ = python_vcov(inst)
    res = r_covariance(inst)
    assert est.last_skipped > 0
    assert res.bootstrap_skipped == est.last_skipped
    np.testing.assert_allclose(res.vcov, V_py, rtol=RTOL, atol=RTOL * np.abs(V_py).max())
    # the resamples are the shared ones: another seed gives another answer
    other = np.cov(PairsBootstrap(300, seed=BOOTSTRAP_SEED + 1).draws(fit_ols(inst.X, inst.y, inst.weights)),
                   rowvar=False)
    assert not np.allclose(other, res.vcov, rtol=1e-3)
    assert bootstrap_indices(inst.n, 300).shape == (300, inst.n)


def test_formula_route_interactions_powers_and_no_intercept() -> None:
    require_r()
    from dpstats.ols.r_engine import r_coefficients

    df = synthetic_frame(n=200, seed=5)
    df.loc[[3, 7, 11], "x"] = np.nan  # dropped by both
    for formula in ("y ~ x * np.log(z) + I(x**2)", "y ~ x + C(region) - 1", "y ~ x:z + C(region)*x"):
        inst = make_instance(df, formula, "x" if "x:z" not in formula else "x:z", "classical")
        assert inst.n == 197
        beta = fit_ols(inst.X, inst.y).beta
        np.testing.assert_allclose(r_coefficients(inst), beta, rtol=RTOL, atol=RTOL * np.abs(beta).max())


def test_formula_route_reference_level_without_rows() -> None:
    """Patsy's reference level may have no complete row; R must reproduce the same dummies."""
    require_r()
    from dpstats.ols.r_engine import r_covariance

    df = synthetic_frame(n=200, seed=6)
    df.loc[df["region"] == "east", "x"] = np.nan  # 'east' (patsy's reference) has no complete row
    inst = make_instance(df, "y ~ x + C(region)", "x", "HC1")
    assert inst.dropped_collinear == ("C(region)[T.west]",)
    V_py, beta_py, _, _ = python_vcov(inst)
    res = r_covariance(inst, route="formula")
    np.testing.assert_allclose(res.beta, beta_py, rtol=RTOL)
    assert_vcov_close(res.vcov, V_py, 1)


def test_r_vcov_is_what_baseline_uses(corpus: Corpus) -> None:
    require_r()
    from dpstats.ols.baseline import compute_baseline
    from dpstats.ols.r_engine import r_vcov

    inst = corpus.instance("mroz87_lwage")
    b_r = compute_baseline(inst, engine="r")
    b_py = compute_baseline(inst)
    assert b_r.engine == "r"
    np.testing.assert_allclose(b_r.se, b_py.se, rtol=RTOL)
    np.testing.assert_array_equal(b_r.vcov, r_vcov(inst))


def test_mean_instance_is_refused(corpus: Corpus) -> None:
    require_r()
    from dpstats.ols.r_engine import r_covariance

    spec = next(s for s in corpus.specs("mean"))
    with pytest.raises(ValueError, match="mean"):
        r_covariance(corpus.instance(spec.id))


# --------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------


def test_cli_verify_engine_r_on_a_small_corpus(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    require_r()
    from dpstats.cli import main

    public = Corpus.public().root
    for study in ("mroz1987", "bertrand_mullainathan2004", "stock_watson_cigarettes"):
        if (public / study / "study.toml").is_file():
            shutil.copytree(public / study, tmp_path / study)
    if not any(tmp_path.iterdir()):
        pytest.skip("the public corpus lacks the studies this test copies")
    assert main(["corpus", "verify", "--engine", "r", "--corpus", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "reported numbers reproduce, 0 do not" in out


@pytest.mark.slow
def test_cli_verify_engine_r_on_the_public_corpus(capsys: pytest.CaptureFixture[str]) -> None:
    require_r()
    from dpstats.cli import main

    assert main(["corpus", "verify", "--engine", "r"]) == 0
    assert ", 0 do not" in capsys.readouterr().out


# --------------------------------------------------------------------------
# Formula translation (no R needed)
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("patsy", "r"),
    [
        ("np.log(wage) ~ educ + exper", "log(wage) ~ educ + exper"),
        ("y ~ C(state) + x", "y ~ factor(state) + x"),
        ("y ~ x + I(x**2) + I(x ** 3)", "y ~ x + I(x^2) + I(x ^ 3)"),
        ("y ~ a*b - 1", "y ~ a*b - 1"),
        ("y ~ a:b + 0", "y ~ a:b + 0"),
        ("y ~ np.sqrt(x) + abs(z) + np.exp(w)", "y ~ sqrt(x) + abs(z) + exp(w)"),
        ('y ~ Q("odd name")', "y ~ `odd name`"),
    ],
)
def test_translate_formula(patsy: str, r: str) -> None:
    assert translate_formula(patsy) == r


def test_translate_formula_fixed_effects_and_prepared_factors() -> None:
    assert translate_formula("y ~ x", ["state", "year"]) == "y ~ x + factor(state) + factor(year)"
    assert translate_formula("y ~ C(year) + x", ["state"], factors=["year", "state"]) == "y ~ year + x + state"


@pytest.mark.parametrize("bad", ["y ~ np.cos(x)", "y ~ C(x, Treatment('a'))", "y ~ center(x)", "y ~ bs(x, df=3)"])
def test_translate_formula_refuses_what_it_cannot_translate(bad: str) -> None:
    with pytest.raises(ValueError, match="no R translation"):
        translate_formula(bad)
