import math

import numpy as np
import pytest

from dpstats.privacy.accounting import GDPAccountant, PureAccountant, ZCDPAccountant, zcdp_rho
from dpstats.privacy.rdp import RDPAccountant
from dpstats.synth import SYNTHESIZERS, get_synthesizer, list_synthesizers
from dpstats.synth.base import DiscreteData, Domain, Synthesizer
from dpstats.synth.discretize import EqualWidth, PrivTree, encode
from dpstats.synth.mechanisms.independent import Independent
from dpstats.synth.pipeline import synthesize_frame
from tests.privacy import direct_charges as dc


def test_ledger_spends_exactly_the_budget(bank):
    df, schema = bank
    data = encode(df, schema, EqualWidth().edges(df, schema, None, np.random.default_rng(0)))
    res = Independent().synthesize(data, 1.0, 1e-6, np.random.default_rng(1))
    rho = zcdp_rho(1.0, 1e-6)
    assert len(res.ledger) == len(schema)
    assert math.isclose(sum(s.cost for s in res.ledger), rho, rel_tol=1e-9)
    assert math.isclose(res.epsilon, 1.0, rel_tol=1e-6) and res.delta == 1e-6
    sigma = res.details["sigma"]
    assert math.isclose(sigma, math.sqrt(len(schema) / rho))


def test_marginals_are_kept_and_pairs_are_not(bank):
    df, schema = bank
    data = encode(df, schema, EqualWidth().edges(df, schema, None, np.random.default_rng(0)))
    syn = Independent().synthesize(data, 10.0, 1e-6, np.random.default_rng(2)).data
    for name in ("job", "y", "age"):
        p, q = data.marginal([name]) / data.n, syn.marginal([name]) / syn.n
        assert 0.5 * np.abs(p - q).sum() < 0.06
    # duration and y are strongly dependent in Bank; Independent breaks the dependence
    real_pair = data.marginal(["duration", "y"]) / data.n
    syn_pair = syn.marginal(["duration", "y"]) / syn.n
    prod = np.outer(data.marginal(["duration"]) / data.n, data.marginal(["y"]) / data.n)
    assert 0.5 * np.abs(syn_pair - prod).sum() < 0.5 * np.abs(real_pair - prod).sum()


def test_noise_grows_as_epsilon_shrinks():
    rng = np.random.default_rng(0)
    data = DiscreteData(rng.choice(4, p=[0.7, 0.2, 0.05, 0.05], size=(2000, 1)), Domain(("a",), (4,)))
    errs = []
    for eps in (0.01, 10.0):
        e = [0.5 * np.abs(Independent().synthesize(data, eps, 1e-6, np.random.default_rng(s)).data.marginal(["a"])
                          / 2000 - data.marginal(["a"]) / 2000).sum() for s in range(20)]
        errs.append(np.mean(e))
    assert errs[0] > 3 * errs[1]


def test_pipeline_with_privtree_shares_one_ledger(shopping):
    df, schema = shopping
    res = synthesize_frame(df, schema, Independent(), 1.0, 1e-6, np.random.default_rng(0),
                           discretizer=PrivTree(share=0.1), n_rows=500)
    names = [s.mechanism for s in res.synthetic.ledger]
    assert names[:10] == [f"privtree:{c}" for c in schema.numeric]
    assert len(names) == 10 + len(schema)
    assert res.frame.shape == (500, len(schema))
    schema.validate(res.frame)       # synthetic values respect the public schema


def test_contract_is_enforced():
    class Lazy(Synthesizer):
        name = "lazy"

        def _synthesize(self, data, accountant, rng, n_rows):
            dc.spend_rho(accountant, "half", accountant.remaining / 2)
            return data

    data = DiscreteData(np.zeros((5, 1), dtype=int), Domain(("a",), (2,)))
    with pytest.raises(RuntimeError, match="must spend exactly its budget"):
        Lazy().synthesize(data, 1.0, 1e-6, np.random.default_rng(0))
    with pytest.raises(TypeError, match="^independent: the accountant must be an instance of ZCDPAccountant "
                                        ".*got PureAccountant$"):
        Independent().synthesize(data, 1.0, 0.0, np.random.default_rng(0), accountant=PureAccountant(1.0, 0.0))


@pytest.mark.parametrize("name", list(SYNTHESIZERS))
def test_synthesize_refuses_an_accountant_of_another_type(name):
    """Every registered synthesizer refuses, before any spend or draw, an accountant not of its declared type."""
    try:
        cls = get_synthesizer(name)
    except ImportError as exc:  # pragma: no cover - a mechanism whose optional extra is missing
        pytest.skip(f"{name}: {exc}")
    data = DiscreteData(np.arange(40).reshape(20, 2) % 2, Domain(("a", "b"), (2, 2)))
    others = [a for a in (PureAccountant, ZCDPAccountant, RDPAccountant, GDPAccountant)
              if not issubclass(a, cls.accountant)]
    assert others
    for other in others:
        acc = other(1.0, 1e-6)
        rng = np.random.default_rng(0)
        state = rng.bit_generator.state
        with pytest.raises(TypeError, match=f"^{name}: the accountant must be an instance of "
                                            f"{cls.accountant.__name__} .*got {other.__name__}$"):
            cls().synthesize(data, 1.0, 1e-6, rng, accountant=acc)
        assert not acc.ledger and rng.bit_generator.state == state


def test_pipeline_refuses_an_accountant_of_another_type_before_the_discretiser_spends(bank):
    """synthesize_frame checks the accountant's type before PrivTree charges it or draws."""
    df, schema = bank
    acc = PureAccountant(1.0, 0.0)
    rng = np.random.default_rng(0)
    state = rng.bit_generator.state
    with pytest.raises(TypeError, match="^independent: the accountant must be an instance of ZCDPAccountant"):
        synthesize_frame(df, schema, Independent(), 1.0, 0.0, rng, accountant=acc)
    assert not acc.ledger and rng.bit_generator.state == state


def test_registry_lists_without_heavy_imports():
    import subprocess
    import sys

    code = ("import sys; from dpstats.synth import list_synthesizers; list_synthesizers(); "
            "print([m for m in ('torch', 'jax', 'mbi', 'xgboost') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
    assert get_synthesizer("independent") is Independent
    assert {"name": "independent", "family": "baseline"}.items() <= list_synthesizers()[0].items()
    with pytest.raises(KeyError, match="unknown mechanism 'nope'"):
        get_synthesizer("nope")
