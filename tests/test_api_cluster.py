"""private_coef(..., cluster=): a cluster-robust private interval, a delete-a-group jackknife.

A panel of 60 clusters whose slopes differ between clusters: the rows of a
cluster are not independent given the fixed effects, so the classical
within interval is too narrow. With ``cluster="state"`` and ``C(state)`` in
the formula the default method releases its stage-2 sums per group of
states and the interval is a delete-a-group jackknife (``t(J - 1)``).
Without ``C(state)`` the groups are formed from the state labels, as many
as a noisy count of the states can fill.
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


def test_clusters_that_are_no_fixed_effect_get_groups_of_their_labels(panel):
    """60 states at epsilon 10: the noisy count (sd about 4) fills (60 - 12) / 8 = 6 groups; HC0 is narrower."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = dpstats.private_coef(panel, "y ~ x", coef="x", epsilon=10.0, cluster="state", seed=2)
        plain = dpstats.private_coef(panel, "y ~ x", coef="x", epsilon=10.0, seed=2)
    J = int(res.df) + 1
    assert res.sampling_error == f"cluster-robust: delete-a-group jackknife over {J} groups of the clusters (state)"
    assert 5 <= J <= 7 and np.isfinite(res.std_error)
    names = [e.mechanism for e in res.ledger]
    assert "Gaussian count of clusters" in names and "Gaussian sum of clip(u) clip(v), per group of clusters" in names
    assert plain.sampling_error == "HC0" and plain.std_error < res.std_error
    # at epsilon 1 the count's noise (sd about 32) leaves fewer than three groups of 60 states: no interval
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        low = dpstats.private_coef(panel, "y ~ x", coef="x", epsilon=1.0, cluster="state", seed=2)
    assert low.sampling_error == "cluster-robust: too few clusters (state) for a delete-a-group jackknife"
    assert not np.isfinite(low.std_error) and low.uninformative


def test_clusters_of_one_row_keep_the_row_interval_and_say_so(panel):
    """A cluster column that names every row (an id): the noisy count is about n, and HC0 is cluster-robust."""
    ids = panel.assign(rowid=np.arange(len(panel)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = dpstats.private_coef(ids, "y ~ x", coef="x", epsilon=3.0, cluster="rowid", seed=2)
    assert res.sampling_error == "cluster-robust: the clusters (rowid) hold about one row each; HC0 over the rows"
    assert np.isfinite(res.std_error) and res.df == len(panel) - 2
    assert "sampling error of rows that are their own clusters (HC0 over the rows)" in res.summary()
