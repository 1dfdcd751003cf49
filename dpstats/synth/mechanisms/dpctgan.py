"""DP-CTGAN (Fang, Dhami, Kersting 2022): CTGAN (Xu et al. 2019) with a DP-SGD discriminator.

Privacy argument (full version: ``docs/synth/dpctgan.md``)
---------------------------------------------------------
Replace-one neighbours, ``n`` and the domain public. Numeric columns arrive
discretised (public equal-width cells, or PrivTree paid for in the ledger),
so CTGAN's mode-specific normalisation (a Gaussian mixture fitted to the
data, not private) is not used: every column is a one-hot block. Two
mechanisms:

1. the 1-way marginals for CTGAN's conditional vector, Gaussian noise
   (L2 sensitivity ``sqrt(2)``), ``marginal_share`` of the remaining
   ``rho`` (zCDP, through the accountant);
2. DP-SGD on the discriminator exactly as in :mod:`.dpgan`: batches of
   ``B`` rows without replacement, per-row clipping to ``C``, Gaussian
   noise ``2 C z``; RDP composed with step 1 and any earlier spend
   (:mod:`dpstats.synth.mechanisms._torch`). A real row's condition is a
   uniformly chosen column and that row's own category (a function of the
   row, so the row's clipped gradient still bounds the change); CTGAN's
   training-by-sampling, which picks real rows *by* condition, is replaced
   by uniform batches, which the accounting needs.

The generator (trained through the discriminator) and sampling are
post-processing.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dpstats.synth.base import DiscreteData, Param
from dpstats.synth.mechanisms._torch import (
    DPDiscriminatorStep,
    GANSynthesizer,
    RDPAccountant,
    block_slices,
    block_softmax,
    cond_from_marginals,
    cond_from_rows,
    ctgan_discriminator,
    ctgan_generator,
    dpsgd_schedule,
    noisy_marginals,
)

__all__ = ["DPCTGAN", "train_ctgan_conditional"]

_SN = "smartnoise-synth 1.0.8 DPCTGAN default (the benchmark paper's implementation, Tao et al. 2021 ref. [31])"
_CT = "Xu, Skoularidou, Cuesta-Infante, Veeramachaneni (2019), CTGAN, Sec. 4 and its reference code"


def generator_loss(torch: Any, logits: Any, out: Any, cond_idx: np.ndarray, blocks: list[slice],
                   cols: np.ndarray) -> Any:
    """CTGAN's generator loss: fool the critic plus cross-entropy of the conditioned column's block."""
    f = torch.nn.functional
    loss = f.binary_cross_entropy_with_logits(out, torch.ones_like(out))
    starts = np.array([s.start for s in blocks])
    ce = 0.0
    for j in np.unique(cols):
        w = np.flatnonzero(cols == j)
        s = blocks[int(j)]
        target = torch.from_numpy(cond_idx[w] - starts[int(j)])
        ce = ce + f.cross_entropy(logits[w, s], target, reduction="sum")
    return loss + ce / len(cols)


def train_ctgan_conditional(torch: Any, p: dict[str, Any], blocks: list[slice], shape: tuple[int, ...],
                            probs: list[np.ndarray], n_rows: int, rng: np.random.Generator,
                            gen: Any) -> np.ndarray:
    """Sample ``n_rows`` rows of per-column probabilities from a trained conditional generator."""
    gen.eval()
    emb = int(p["embedding_dim"])
    cond, _, _ = cond_from_marginals(n_rows, shape, probs, rng)
    with torch.no_grad():
        logits = gen(torch.cat([torch.randn(n_rows, emb), torch.from_numpy(cond)], dim=1))
        out = block_softmax(torch, logits, blocks)
    return np.asarray(out.numpy())


class DPCTGAN(GANSynthesizer):
    """DP-CTGAN: CTGAN's conditional generator and discriminator, DP-SGD on the discriminator.

    Examples
    --------
    >>> import numpy as np
    >>> from dpstats.synth.base import DiscreteData, Domain
    >>> x = np.random.default_rng(0).integers(0, 3, size=(300, 2))
    >>> res = DPCTGAN(epochs=1, batch_size=100).synthesize(DiscreteData(x, Domain(("a", "b"), (3, 3))),
    ...                                                    1.0, 1e-6, np.random.default_rng(1))
    >>> res.data.n, 0.99 < res.epsilon <= 1.0
    (300, True)
    """

    name = "dpctgan"
    citation = ("Fang, Dhami, Kersting (2022). DP-CTGAN: Differentially Private Medical Data Generation Using "
                "CTGANs. AIME 2022, LNCS 13263; Xu et al. (2019), Modeling Tabular Data using Conditional GAN, "
                "NeurIPS.")
    summary = "conditional tabular GAN (CTGAN) with a DP-SGD discriminator; noisy marginals for the conditions"
    defaults = {
        "embedding_dim": Param(128, _SN + "; " + _CT),
        "generator_dim": Param((256, 256), _SN + "; " + _CT),
        "discriminator_dim": Param((256, 256), _SN + "; " + _CT),
        "batch_size": Param(500, _SN + "; " + _CT),
        "epochs": Param(300, _SN + "; an upper bound: training stops when the budget is spent"),
        "noise_multiplier": Param(5.0, _SN + " (sigma = noise sd / C; trained until the budget is spent, then "
                                          "lowered so the last step spends it exactly)"),
        "clip": Param(1.0, _SN + " (max_per_sample_grad_norm)"),
        "lr_discriminator": Param(2e-4, _SN + " (Adam, betas (0.5, 0.9), weight decay 1e-6)"),
        "lr_generator": Param(2e-4, _SN + " (Adam, betas (0.5, 0.9), weight decay 1e-6)"),
        "tau": Param(0.2, _CT + " (Gumbel-softmax temperature)"),
        "marginal_share": Param(0.1, "dpstats' choice: CTGAN's conditional sampler needs category frequencies "
                                     "(Xu et al. 2019, Sec. 4.3), paid here with 10% of the budget"),
    }
    _ints = ("embedding_dim", "batch_size", "epochs")
    _floats = ("noise_multiplier", "clip", "lr_discriminator", "lr_generator", "tau")

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self._check_shapes(self.params)

    @staticmethod
    def _check_shapes(params: dict[str, Any]) -> None:
        ms = params["marginal_share"]
        if isinstance(ms, bool) or not isinstance(ms, (int, float)) or not 0 < ms < 1:
            raise ValueError(f"hyperparameter marginal_share must lie in (0, 1), got {ms!r}")
        for k in ("generator_dim", "discriminator_dim"):
            v = params[k]
            if not isinstance(v, (tuple, list)) or not v or not all(
                    isinstance(h, int) and not isinstance(h, bool) and h >= 1 for h in v):
                raise ValueError(f"hyperparameter {k} must be a non-empty sequence of positive integers, got {v!r}")

    def _train_and_sample(self, torch: Any, data: DiscreteData, x: np.ndarray, accountant: RDPAccountant,
                          rng: np.random.Generator, n_rows: int) -> np.ndarray:
        p = self.params
        n, dim = x.shape
        shape = data.domain.shape
        batch, clip, emb = int(p["batch_size"]), float(p["clip"]), int(p["embedding_dim"])
        if batch > n:
            raise ValueError(f"{self.name}: batch_size {batch} exceeds the number of rows {n}")
        probs = noisy_marginals(data, accountant, float(p["marginal_share"]) * accountant.remaining, rng, self.name)
        steps, z, eps_rdp, rdp = dpsgd_schedule(self.name, n, batch, float(p["noise_multiplier"]) / 2.0,
                                           int(p["epochs"]), accountant)
        sigma = 2.0 * clip * z

        blocks = block_slices(shape)

        def train(rng: np.random.Generator) -> tuple[Any, int]:
            gen = ctgan_generator(torch, emb + dim, tuple(p["generator_dim"]), dim)
            disc = ctgan_discriminator(torch, 2 * dim, tuple(p["discriminator_dim"]))
            step = DPDiscriminatorStep(torch, disc, clip, sigma, rng)
            kw = {"betas": (0.5, 0.9), "weight_decay": 1e-6}
            opt_d = torch.optim.Adam(disc.parameters(), lr=float(p["lr_discriminator"]), **kw)
            opt_g = torch.optim.Adam(gen.parameters(), lr=float(p["lr_generator"]), **kw)
            bce = torch.nn.functional.binary_cross_entropy_with_logits
            tau = float(p["tau"])
            xt = torch.from_numpy(x)
            labels = torch.cat([torch.ones(batch), torch.zeros(batch)])
            for _ in range(steps):
                idx = rng.choice(n, size=batch, replace=False)
                creal, _ = cond_from_rows(data.codes[idx], shape, rng)
                cfake, _, _ = cond_from_marginals(batch, shape, probs, rng)
                cf = torch.from_numpy(cfake)
                with torch.no_grad():
                    fake = block_softmax(torch, gen(torch.cat([torch.randn(batch, emb), cf], dim=1)), blocks, tau)
                inp = torch.cat([torch.cat([xt[idx], torch.from_numpy(creal)], dim=1), torch.cat([fake, cf], dim=1)])
                step(inp, lambda out: bce(out.squeeze(1), labels, reduction="none"), batch)
                opt_d.step()
                # generator step (post-processing of the discriminator)
                cfake, cols, cidx = cond_from_marginals(batch, shape, probs, rng)
                cf = torch.from_numpy(cfake)
                opt_g.zero_grad()
                logits = gen(torch.cat([torch.randn(batch, emb), cf], dim=1))
                out = disc(torch.cat([block_softmax(torch, logits, blocks, tau), cf], dim=1)).squeeze(1)
                generator_loss(torch, logits, out, cidx, blocks, cols).backward()
                opt_g.step()
                disc.zero_grad(set_to_none=True)
            return gen, steps

        gen, _ = accountant.rdp_measurement(
            f"{self.name}:dp-sgd", train, rdp=rdp, rng=rng, sensitivity=2.0 * clip, scale=sigma,
            note=(f"{steps} DP-SGD steps, batches of {batch} of {n} rows without replacement, clip {clip:g}, "
                  f"noise sd {sigma:.6g} (multiplier {z:.6g} per replace-one sensitivity 2C); RDP "
                  f"(Wang et al. 2019) composed with the earlier spends gives epsilon {eps_rdp:.6g}; "
                  "the entry closes the ledger with the remaining rho (bookkeeping, not a zCDP cost)"))
        self.details = {"steps": steps, "noise_multiplier": z, "sigma": sigma, "epsilon_rdp": eps_rdp,
                        "epochs": steps * batch / n}
        return train_ctgan_conditional(torch, p, blocks, shape, probs, n_rows, rng, gen)
