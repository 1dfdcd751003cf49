import math

import numpy as np
import pytest

from dpstats.privacy.accounting import PureAccountant, ZCDPAccountant
from dpstats.synth.discretize import EqualWidth, PrivTree, encode, from_one_hot, one_hot, privtree_edges


def test_equal_width_round_trip_stays_in_bounds_and_cells(bank):
    df, schema = bank
    edges = EqualWidth(bins=20).edges(df, schema, None, np.random.default_rng(0))
    assert len(edges["day"]) == 21          # 20 equal cells over [1, 31]
    assert len(EqualWidth(bins=40).edges(df, schema, None, None)["day"]) == 32   # 31 days: one cell each
    data = encode(df, schema, edges)
    back = data.decode(np.random.default_rng(1))
    again = encode(schema.validate(back), schema, edges)
    np.testing.assert_array_equal(again.codes, data.codes)   # decoding stays within each cell
    for c in schema.numeric:
        lo, hi = schema[c].bounds
        assert back[c].between(lo, hi).all()
        if schema[c].integer:
            assert (back[c] == np.round(back[c])).all()
    np.testing.assert_array_equal(back["job"].to_numpy(), df["job"].to_numpy())


def test_privtree_charges_its_share_and_adapts(bank):
    df, schema = bank
    acc = ZCDPAccountant(1.0, 1e-6)
    edges = PrivTree(share=0.2).edges(df, schema, acc, np.random.default_rng(0))
    assert math.isclose(acc.spent, 0.2 * acc.capacity, rel_tol=1e-9)
    assert [s.mechanism for s in acc.ledger] == [f"privtree:{c}" for c in schema.numeric]
    for c in schema.numeric:
        e = edges[c]
        half = 0.5 if schema[c].integer else 0.0
        assert e[0] == schema[c].bounds[0] - half and e[-1] == schema[c].bounds[1] + half
        assert np.all(np.diff(e) > 0) and (not schema[c].integer or np.diff(e).min() >= 1)
    # balance is concentrated near 0 on [-10000, 110000]: PrivTree splits there, not in the empty tail
    e = edges["balance"]
    widths = np.diff(e)
    assert widths[np.searchsorted(e, 500) - 1] < widths[-1]
    pacc = PureAccountant(1.0, 0.0)
    PrivTree(share=0.5).edges(df, schema, pacc, np.random.default_rng(0))
    assert math.isclose(pacc.spent, 0.5)


def test_privtree_noise_scale_follows_the_theorem():
    # 10 rows at the root (depth 0): split iff 10 + Lap(lambda) > 0, with lambda = 3 / (eps / 2) = 6 at
    # eps = 1 under replace-one neighbours (lambda = 3 would be the add/remove scale: P = 0.982)
    eps, lam = 1.0, 6.0
    rng = np.random.default_rng(3)
    x = np.full(10, 0.3)
    splits = np.mean([len(privtree_edges(x, 0, 1, eps, rng, max_depth=1)) > 2 for _ in range(4000)])
    expected = 1 - 0.5 * math.exp(-10 / lam)
    assert abs(splits - expected) < 0.015


def test_privtree_requires_an_accountant(bank):
    df, schema = bank
    with pytest.raises(ValueError, match="accountant"):
        PrivTree().edges(df, schema, None, np.random.default_rng(0))


def test_one_hot_round_trip(bank):
    df, schema = bank
    data = encode(df, schema, EqualWidth().edges(df, schema, None, np.random.default_rng(0)))
    x = one_hot(data)
    assert x.shape == (data.n, sum(data.domain.shape)) and np.all(x.sum(axis=1) == len(schema))
    np.testing.assert_array_equal(from_one_hot(x, data.domain), data.codes)
