"""DPGAN (Xie, Lin, Wang, Wang, Zhou 2018): a GAN whose discriminator is trained with DP-SGD.

Privacy argument (full version: ``docs/synth/dpgan.md``)
-------------------------------------------------------
Replace-one neighbours, ``n`` and the domain public. Input is the one-hot
coding of the public domain. Every discriminator step draws ``B`` rows
uniformly without replacement, clips each row's gradient to ``C`` (per-row
norms by ghost clipping, checked against opacus' per-sample gradients), sums, and adds ``N(0, (2 C z)^2 I)`` drawn from
``rng``: a Gaussian mechanism of multiplier ``z`` per unit of the replace-one
sensitivity ``2 C``, on a subsample. ``T`` steps and the ledger's earlier
spends compose in RDP (:mod:`dpstats.synth.mechanisms._torch`) to exactly
the budget's ``(epsilon, delta)``; the generator is trained only through the
discriminator (post-processing), and sampling from it is post-processing.
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
    dpsgd_schedule,
    smartnoise_discriminator,
    smartnoise_generator,
)

__all__ = ["DPGAN"]

_SN = "smartnoise-synth 1.0.8 DPGAN default (the benchmark paper's implementation, Tao et al. 2021 ref. [31])"


class DPGAN(GANSynthesizer):
    """DPGAN: DP-SGD discriminator, generator as post-processing (smartnoise-synth's architecture and defaults).

    Examples
    --------
    >>> import numpy as np
    >>> from dpstats.synth.base import DiscreteData, Domain
    >>> x = np.random.default_rng(0).integers(0, 3, size=(300, 2))
    >>> res = DPGAN(epochs=1).synthesize(DiscreteData(x, Domain(("a", "b"), (3, 3))), 1.0, 1e-6,
    ...                                 np.random.default_rng(1))
    >>> res.data.n, 0.99 < res.epsilon <= 1.0
    (300, True)
    """

    name = "dpgan"
    citation = ("Xie, Lin, Wang, Wang, Zhou (2018). Differentially Private Generative Adversarial Network. "
                "arXiv:1802.06739.")
    summary = "GAN with a DP-SGD discriminator (per-row clipping, Gaussian noise, RDP accounting)"
    defaults = {
        "latent_dim": Param(64, _SN),
        "batch_size": Param(64, _SN),
        "epochs": Param(1000, _SN + "; an upper bound: training stops when the budget is spent"),
        "noise_multiplier": Param(3.5, _SN + " (noise sd / C; smartnoise trains with it until the budget is "
                                        "spent; here it is then lowered so the last step spends it exactly)"),
        "clip": Param(1.0, _SN + " (max_grad_norm)"),
        "lr_discriminator": Param(4e-4, _SN + " (Adam)"),
        "lr_generator": Param(1e-4, _SN + " (Adam)"),
    }
    _ints = ("latent_dim", "batch_size", "epochs")
    _floats = ("noise_multiplier", "clip", "lr_discriminator", "lr_generator")

    def _train_and_sample(self, torch: Any, data: DiscreteData, x: np.ndarray, accountant: RDPAccountant,
                          rng: np.random.Generator, n_rows: int) -> np.ndarray:
        p = self.params
        n, dim = x.shape
        batch, clip, latent = int(p["batch_size"]), float(p["clip"]), int(p["latent_dim"])
        steps, z, eps_rdp, rdp = dpsgd_schedule(self.name, n, batch, float(p["noise_multiplier"]) / 2.0,
                                           int(p["epochs"]), accountant)
        sigma = 2.0 * clip * z

        blocks = block_slices(data.domain.shape)

        def train(rng: np.random.Generator) -> tuple[Any, int]:
            gen = smartnoise_generator(torch, latent, dim)
            disc = smartnoise_discriminator(torch, dim)
            step = DPDiscriminatorStep(torch, disc, clip, sigma, rng)
            opt_d = torch.optim.Adam(disc.parameters(), lr=float(p["lr_discriminator"]))
            opt_g = torch.optim.Adam(gen.parameters(), lr=float(p["lr_generator"]))
            bce = torch.nn.functional.binary_cross_entropy_with_logits
            xt = torch.from_numpy(x)
            labels = torch.cat([torch.ones(batch), torch.zeros(batch)])
            for _ in range(steps):
                idx = rng.choice(n, size=batch, replace=False)
                with torch.no_grad():
                    fake = block_softmax(torch, gen(torch.randn(batch, latent)), blocks)
                step(torch.cat([xt[idx], fake]), lambda out: bce(out.squeeze(1), labels, reduction="none"), batch)
                opt_d.step()
                opt_g.zero_grad()
                out = disc(block_softmax(torch, gen(torch.randn(batch, latent)), blocks)).squeeze(1)
                bce(out, torch.ones(batch)).backward()
                opt_g.step()
                disc.zero_grad(set_to_none=True)
            return gen, steps

        gen, _ = accountant.rdp_measurement(
            "dpgan:dp-sgd", train, rdp=rdp, rng=rng, sensitivity=2.0 * clip, scale=sigma,
            note=(f"{steps} DP-SGD steps, batches of {batch} of {n} rows without replacement, clip {clip:g}, "
                  f"noise sd {sigma:.6g} (multiplier {z:.6g} per replace-one sensitivity 2C); RDP "
                  f"(Wang et al. 2019) composed with the earlier spends gives epsilon {eps_rdp:.6g}; "
                  "the entry closes the ledger with the remaining rho (bookkeeping, not a zCDP cost)"))
        self.details = {"steps": steps, "noise_multiplier": z, "sigma": sigma, "epsilon_rdp": eps_rdp,
                        "epochs": steps * batch / n}
        gen.eval()
        with torch.no_grad():
            probs = block_softmax(torch, gen(torch.randn(n_rows, latent)), blocks).numpy()
        return np.asarray(probs)
