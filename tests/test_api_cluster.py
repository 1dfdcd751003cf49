"""private_coef(..., cluster=): a cluster-robust private interval when the clusters are the absorbed fixed effect.

A panel of 60 clusters whose slopes differ between clusters: the rows of a
cluster are not independent given the fixed effects, so the classical
within interval is too narrow. With ``cluster="state"`` and ``C(state)`` in
the formula the default method releases its stage-2 sums per group of
states and the interval is a delete-a-group jackknife (``t(J - 1)``).
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

import dpstats

G, M = 60, 60


@pytest.fixture(scope="module")
def panel() -> pd.DataFrame:
    r = np.random.default_rng(1)
    a, b, c = r.normal(0, 1, G), r.normal(0, 0.5, G), r.normal(0, 2, G)
    g = np.repeat(np.arange(G), M)
    x = a[g] + r.normal(0, 1, G * M)
    return pd.DataFrame({"y": (1 + b[g]) * x + c[g] + r.normal(0, 1, G * M), "x": x, "state": [f"s{k:02d}" for k in g]})


def _coef(panel, **kw):
    levels = {"state": sorted(panel["state"].unique())}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return dpstats.private_coef(panel, "y ~ x + C(state)", coef="x", epsilon=3.0, levels=levels, seed=2, **kw)


def test_the_clustered_interval_is_the_jackknife_and_says_so(panel):
    res = _coef(panel, cluster="state")
    assert res.sampling_error.startswith("cluster-robust: delete-a-group jackknife over 8 groups")
    assert res.df == 7.0 and np.isfinite(res.std_error)
    assert "cluster-robust sampling error" in res.summary()
    # the classical within interval on the same data is far narrower: it ignores the clusters
    plain = _coef(panel)
    assert plain.sampling_error == "classical, within the absorbed groups"
    assert plain.std_error < 0.6 * res.std_error
    # the ledger holds the group sums, and the budget is spent exactly once
    names = [e.mechanism for e in res.ledger]
    assert "Gaussian sum of clip(u) clip(v), per group of levels" in names
    assert "Gaussian sum of clip(u) clip(v)" not in names


def test_cluster_needs_an_interval(panel):
    with pytest.raises(ValueError, match=r"^cluster: a cluster-robust interval needs inference"):
        _coef(panel, cluster="state", inference=False)
