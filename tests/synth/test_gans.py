"""The four GAN synthesizers: DP-SGD and PATE accounting, the noise actually drawn, domain, bad arguments.

Tiny data and one or two epochs: these check privacy and plumbing, not utility
(measured on Adult in ``benchmarks/bench_synth.py``, figures in ``docs/synth/``).
"""

from __future__ import annotations

import math
import subprocess
import sys
import warnings

import numpy as np
import pytest

from dpstats.privacy.accounting import ZCDPAccountant, zcdp_epsilon
from dpstats.privacy.rdp import rdp_epsilon
from dpstats.synth import SYNTHESIZERS, get_synthesizer
from dpstats.synth.base import DiscreteData, Domain
from tests.noise_spy import RecordingGenerator

torch = pytest.importorskip("torch")
pytest.importorskip("opacus")
pytest.importorskip("dp_accounting")

from dpstats.synth.mechanisms import _torch as T  # noqa: E402
from tests.privacy import direct_charges as dc

GANS = ("dpgan", "dpctgan", "pategan", "patectgan")
SMALL_CTGAN = {"embedding_dim": 8, "generator_dim": (16,), "discriminator_dim": (16,)}


def _data(n: int = 240, seed: int = 0) -> DiscreteData:
    r = np.random.default_rng(seed)
    a = r.integers(0, 3, size=n)
    b = (a + (r.random(n) < 0.2)) % 3          # correlated with a
    c = r.integers(0, 2, size=n)
    return DiscreteData(np.column_stack([a, b, c]), Domain(("a", "b", "c"), (3, 3, 2)))


def test_listing_and_import_do_not_import_torch():
    code = ("import sys\n"
            "import dpstats.synth\n"
            "from dpstats.synth import list_synthesizers\n"
            "names = [m['name'] for m in list_synthesizers()]\n"
            "from dpstats.cli import main\n"
            "try:\n    main(['synth', 'bench', '--help'])\nexcept SystemExit:\n    pass\n"
            "assert {'dpgan', 'dpctgan', 'pategan', 'patectgan'} <= set(names), names\n"
            "bad = [m for m in ('torch', 'opacus', 'dp_accounting') if m in sys.modules]\n"
            "print('BAD', bad)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "BAD []" in out.stdout


def test_registry_rows():
    for name in GANS:
        cls = get_synthesizer(name)
        assert cls.name == name and cls.family == "GAN" and cls.interpretation == "standard"
        assert SYNTHESIZERS[name].endswith(cls.__name__)
        assert all(p.source for p in cls.defaults.values())


# ----------------------------------------------------------------------
# accounting: our path vs dp_accounting's public API, opacus, and zCDP
# ----------------------------------------------------------------------

def test_rdp_path_matches_dp_accounting_public_accountant():
    from dp_accounting import NeighboringRelation, dp_event
    from dp_accounting.rdp import rdp_privacy_accountant as rdp

    n, b, z, steps, delta, rho = 5000, 100, 1.3, 400, 1e-7, 0.01
    acc = rdp.RdpAccountant(list(T.ORDERS), NeighboringRelation.REPLACE_ONE)
    acc.compose(dp_event.SampledWithoutReplacementDpEvent(n, b, dp_event.GaussianDpEvent(z)), steps)
    acc.compose(dp_event.GaussianDpEvent(1.0 / math.sqrt(2.0 * rho)))      # rho-zCDP = RDP rho * alpha
    assert T.dpsgd_epsilon(n, b, z, steps, delta, rho) == pytest.approx(acc.get_epsilon(delta), rel=1e-9)
    # the vectorised conversion is dp_accounting's
    r = steps * T.wor_rdp(n, b, z)
    assert rdp_epsilon(r, delta)[0] == pytest.approx(rdp.compute_epsilon(list(T.ORDERS), list(r), delta)[0])


def test_full_batch_calibration_matches_opacus_and_zcdp():
    """With a full batch, DP-SGD is the Gaussian mechanism: opacus' RDP accountant and a zCDP bound agree."""
    from opacus.accountants.analysis.rdp import compute_rdp, get_privacy_spent

    n, steps, eps, delta = 1000, 50, 1.0, 1e-6
    z = T.calibrate_noise(n, n, steps, eps, delta)
    orders = list(T.ORDERS)
    e_opacus, _ = get_privacy_spent(orders=orders, rdp=compute_rdp(q=1.0, noise_multiplier=z, steps=steps,
                                                                  orders=orders), delta=delta)
    assert e_opacus <= eps * (1 + 1e-9) and e_opacus == pytest.approx(eps, rel=5e-3)
    # hand bound: T Gaussian mechanisms of sensitivity 1 and sd z are T / (2 z^2)-zCDP
    e_zcdp = zcdp_epsilon(steps / (2.0 * z * z), delta)
    assert e_zcdp <= eps * 1.01 and e_zcdp == pytest.approx(eps, rel=2e-2)
    # halving the noise (or doubling the sensitivity) breaks the claim
    assert T.dpsgd_epsilon(n, n, z / 2.0, steps, delta) > 1.5 * eps
    assert zcdp_epsilon(steps / (2.0 * (z / 2) ** 2), delta) > 1.5 * eps


def test_subsampled_calibration_hits_the_budget_and_halving_fails():
    n, b, steps, eps, delta, rho = 4000, 80, 300, 1.0, 1e-8, 0.002
    z = T.calibrate_noise(n, b, steps, eps, delta, rho)
    got = T.dpsgd_epsilon(n, b, z, steps, delta, rho)
    assert got <= eps and got == pytest.approx(eps, rel=1e-2)
    assert T.dpsgd_epsilon(n, b, z / 2.0, steps, delta, rho) > 1.3 * eps
    # subsampling amplifies: the same noise on full batches costs far more
    assert T.dpsgd_epsilon(n, n, z, steps, delta, rho) > 3 * eps
    # the step count is the most the noise affords
    t = T.dpsgd_max_steps(n, b, 2.0, eps, delta, rho, cap=10**6)
    assert T.dpsgd_epsilon(n, b, 2.0, t, delta, rho) <= eps < T.dpsgd_epsilon(n, b, 2.0, t + 1, delta, rho)


def test_ghost_clipping_matches_opacus_per_sample_gradients():
    from opacus import GradSampleModule

    torch.manual_seed(0)
    disc = T.smartnoise_discriminator(torch, 12)
    x = torch.rand(20, 12) * 3
    y = torch.cat([torch.ones(10), torch.zeros(10)])
    bce = torch.nn.functional.binary_cross_entropy_with_logits
    step = T.DPDiscriminatorStep(torch, disc, clip=0.05, sigma=1.0, rng=np.random.default_rng(0))
    total, norms = step.clipped_sum(x, lambda o: bce(o.squeeze(1), y, reduction="none"))
    ref = T.smartnoise_discriminator(torch, 12)
    ref.load_state_dict(disc.state_dict())
    gsm = GradSampleModule(ref, loss_reduction="sum")
    bce(gsm(x).squeeze(1), y, reduction="none").sum().backward()
    gs = [p.grad_sample.reshape(20, -1) for p in ref.parameters()]
    ref_norms = torch.sqrt(sum((g * g).sum(1) for g in gs))
    assert torch.allclose(norms, ref_norms, rtol=1e-4)
    assert (ref_norms > 0.05).all()                    # every row is clipped: the test bites
    f = torch.clamp(0.05 / ref_norms, max=1.0)
    for t, g, p in zip(total, gs, ref.parameters()):
        assert torch.allclose(t.reshape(-1), (f[:, None] * g).sum(0), rtol=1e-4, atol=1e-6), p.shape


# ----------------------------------------------------------------------
# the mechanisms themselves, with a recording generator
# ----------------------------------------------------------------------

@pytest.mark.parametrize("name,kw", [("dpgan", {"epochs": 1, "batch_size": 60}),
                                     ("dpctgan", {"epochs": 1, "batch_size": 60, **SMALL_CTGAN})])
def test_dpsgd_noise_drawn_gives_the_budget(name, kw):
    data = _data()
    syn = get_synthesizer(name)(**kw)
    rng = RecordingGenerator(3)
    eps, delta = 2.0, 1e-6
    acc = T.RDPAccountant(eps, delta)
    dc.spend_pure(acc, "earlier", 0.3)                      # e.g. PrivTree's share
    res = syn.synthesize(data, eps, delta, rng, accountant=acc)
    assert res.epsilon <= eps and res.epsilon == pytest.approx(eps, rel=1e-2) and res.delta == delta
    assert res.ledger[-1].kind == "rdp" and acc.exhausted()
    assert res.epsilon == pytest.approx(T.dpsgd_epsilon(data.n, kw["batch_size"], syn.details["noise_multiplier"],
                                                        syn.details["steps"], delta, acc.spent - acc.ledger[-1].cost))
    d = syn.details
    size = sum(p.numel() for p in _disc_params(name, kw, data))
    draws = [r for r in rng.draws if r.method == "normal" and r.count == size]
    assert len(draws) == d["steps"] >= 1
    sigma = draws[0].scale
    assert all(r.scale == sigma for r in draws) and sigma == pytest.approx(d["sigma"])
    z = sigma / (2.0 * 1.0)                              # replace-one sensitivity 2C, C = 1
    rho_prior = acc.ledger[0].cost + sum(s.cost for s in acc.ledger if ":marginal:" in s.mechanism)
    got = T.dpsgd_epsilon(data.n, kw["batch_size"], z, d["steps"], delta, rho_prior)
    assert got <= eps and got == pytest.approx(eps, rel=1e-2)
    # a sensitivity of C (add/remove) instead of 2C would claim this noise is twice as large
    assert T.dpsgd_epsilon(data.n, kw["batch_size"], z / 2.0, d["steps"], delta, rho_prior) > 1.2 * eps
    # an extra step would overspend: the step count is the most the noise allows, or the cap
    assert d["steps"] == data.n // kw["batch_size"] or \
        T.dpsgd_epsilon(data.n, kw["batch_size"], z, d["steps"] + 1, delta, rho_prior) > eps


def _disc_params(name, kw, data):
    dim = sum(data.domain.shape)
    if name == "dpgan":
        return list(T.smartnoise_discriminator(torch, dim).parameters())
    return list(T.ctgan_discriminator(torch, 2 * dim, kw["discriminator_dim"]).parameters())


@pytest.mark.parametrize("name,kw", [("pategan", {"max_iterations": 2, "batch_size": 30, "rows_per_teacher": 60}),
                                     ("patectgan", {"max_iterations": 1, "batch_size": 30, "rows_per_teacher": 60,
                                                    **SMALL_CTGAN})])
def test_pate_votes_charged_and_drawn(name, kw):
    data = _data()
    rng = RecordingGenerator(4)
    syn = get_synthesizer(name)(**kw)
    res = syn.synthesize(data, 1.0, 1e-6, rng)
    votes = [s for s in res.ledger if s.mechanism.endswith(":votes")]
    assert len(votes) == kw["max_iterations"] * 5 and syn.details["iterations"] == kw["max_iterations"]
    m = kw["batch_size"]
    for s in votes:                                      # one teacher changes: each count by 1
        assert s.kind == "gaussian" and s.sensitivity == pytest.approx(math.sqrt(m))
        assert s.cost == pytest.approx(m / (2.0 * s.scale ** 2))
    drawn = [r.scale for r in rng.draws if r.method == "normal" and r.count == m]
    assert drawn == pytest.approx([s.scale for s in votes])
    acc = ZCDPAccountant(1.0, 1e-6)
    assert sum(s.cost for s in res.ledger) == pytest.approx(acc.capacity, rel=1e-9)
    k = data.n // 60 + (1 if name == "patectgan" else 0)
    assert syn.details["teachers"] == k


@pytest.mark.parametrize("name", GANS)
def test_seeded_domain_and_determinism(name, bank):
    from dpstats.synth.pipeline import synthesize_frame

    df, schema = bank
    df = df.iloc[:300].reset_index(drop=True)
    kw = {"dpgan": {"epochs": 1}, "dpctgan": {"epochs": 1, "batch_size": 100, **SMALL_CTGAN},
          "pategan": {"max_iterations": 1, "rows_per_teacher": 100},
          "patectgan": {"max_iterations": 1, "batch_size": 100, "rows_per_teacher": 100, **SMALL_CTGAN}}[name]
    cls = get_synthesizer(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = synthesize_frame(df, schema, cls(**kw), 1.0, 1e-6, np.random.default_rng(7), n_rows=50)
        b = synthesize_frame(df, schema, cls(**kw), 1.0, 1e-6, np.random.default_rng(7), n_rows=50)
    assert a.frame.equals(b.frame) and len(a.frame) == 50
    assert a.synthetic.epsilon <= 1.0 + 1e-9 and a.synthetic.epsilon == pytest.approx(1.0, rel=1e-2)
    for c in schema.columns:
        col = a.frame[c.name]
        if c.levels is not None:
            assert set(col) <= set(c.levels), c.name
        else:
            assert col.min() >= c.bounds[0] and col.max() <= c.bounds[1], c.name


def test_rdp_accountant_refuses_overspending_and_a_second_rdp_mechanism():
    from dpstats.privacy.accounting import BudgetExceeded

    acc = T.RDPAccountant(1.0, 1e-6)
    big = 400 * T.wor_rdp(1000, 1000, 1.0)                # full-batch Gaussians, far over budget
    with pytest.raises(BudgetExceeded):
        acc.rdp_measurement("x", lambda r: r.normal(), rdp=big, rng=RecordingGenerator(0))
    assert not acc.ledger
    rng = RecordingGenerator(0)
    small = 5 * T.wor_rdp(1000, 1000, 20.0)
    assert acc.rdp_measurement("y", lambda r: 1, rdp=small, rng=rng) == 1
    assert acc.exhausted() and acc.achieved()[0] == pytest.approx(rdp_epsilon(small, 1e-6)[0])
    with pytest.raises(BudgetExceeded, match="closed"):
        acc.rdp_measurement("z", lambda r: 1, rdp=small, rng=rng)
    with pytest.raises(TypeError, match="^dpgan: the accountant must be an instance of RDPAccountant "
                                        ".*got ZCDPAccountant$"):
        get_synthesizer("dpgan")(epochs=1).synthesize(_data(), 1.0, 1e-6, np.random.default_rng(0),
                                                      accountant=ZCDPAccountant(1.0, 1e-6))


def test_bad_arguments():
    with pytest.raises(TypeError, match="unknown hyperparameter"):
        get_synthesizer("dpgan")(epoch=3)
    with pytest.raises(ValueError, match="batch_size"):
        get_synthesizer("dpgan")(batch_size=0)
    with pytest.raises(ValueError, match="noise_multiplier"):
        get_synthesizer("dpgan")(noise_multiplier=-1.0)
    with pytest.raises(ValueError, match="marginal_share"):
        get_synthesizer("dpctgan")(marginal_share=1.5)
    with pytest.raises(ValueError, match="generator_dim"):
        get_synthesizer("patectgan")(generator_dim=())
    with pytest.raises(ValueError, match="max_iterations"):
        get_synthesizer("pategan")(max_iterations=0)
    with pytest.raises(ValueError, match="exceeds the number of rows"):
        get_synthesizer("dpgan")(batch_size=1000).synthesize(_data(100), 1.0, 1e-6, np.random.default_rng(0))
    with pytest.raises(ValueError, match="noise multiplier"):
        T.wor_rdp(100, 10, 0.0)


def test_small_budgets_leave_dp_sgd_room_after_a_zcdp_share():
    """At epsilon 0.1, delta 1e-9 a 10 % zCDP share (PrivTree's) must not eat the RDP budget (orders to 1024)."""
    from dpstats.privacy.accounting import zcdp_rho
    from dpstats.privacy.rdp import ORDERS, calibrate_noise, dpsgd_epsilon

    rho = zcdp_rho(0.1, 1e-9)
    assert rdp_epsilon(0.1 * rho * np.asarray(ORDERS), 1e-9)[0] < 0.05
    z = calibrate_noise(45211, 64, 1000, 0.1, 1e-9, rho_prior=0.1 * rho)
    assert dpsgd_epsilon(45211, 64, z, 1000, 1e-9, rho_prior=0.1 * rho) <= 0.1
