"""PATE-CTGAN (Rosenblatt, Liu, Pouyanfar, de Leon, Desai, Allen 2020): PATE-GAN's teachers and student on CTGAN.

Privacy argument (full version: ``docs/synth/patectgan.md``)
-----------------------------------------------------------
Replace-one neighbours, ``n`` and the domain public; numeric columns arrive
discretised (no mode-specific normalisation, see :mod:`.dpctgan`). Two
releases, both Gaussian mechanisms charged through the accountant (zCDP):

1. the 1-way marginals for CTGAN's conditional vectors
   (``marginal_share`` of the budget, L2 sensitivity ``sqrt(2)``);
2. the teachers' noisy vote counts on generated rows, as in
   :mod:`.pategan`: one row changes one teacher, L2 sensitivity ``sqrt(m)``
   per batch of ``m`` rows; a data-independent bound (the data-dependent
   moments bound of PATE-GAN and smartnoise-synth is not a DP guarantee
   unless smoothed, and is not used).

Teachers (CTGAN discriminators, one per disjoint part) are never released; a
real row's condition is a uniformly chosen column and its own category. The
student, the generator and sampling are post-processing.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dpstats.privacy.accounting import ZCDPAccountant
from dpstats.synth.base import DiscreteData, Param
from dpstats.synth.mechanisms._torch import (
    SMARTNOISE_VOTE_SD,
    GANSynthesizer,
    block_slices,
    block_softmax,
    cond_from_marginals,
    cond_from_rows,
    ctgan_discriminator,
    ctgan_generator,
    noisy_marginals,
    partitions,
    pate_labels,
    pate_schedule,
)
from dpstats.synth.mechanisms.dpctgan import DPCTGAN, generator_loss, train_ctgan_conditional

__all__ = ["PATECTGAN"]

_SN = "smartnoise-synth 1.0.8 PATECTGAN default (the benchmark paper's implementation, Tao et al. 2021 ref. [31])"
_CT = "Xu et al. (2019), CTGAN"


class PATECTGAN(GANSynthesizer):
    """PATE-CTGAN with a data-independent (zCDP) bound on the noisy teacher votes.

    Examples
    --------
    >>> import numpy as np
    >>> from dpstats.synth.base import DiscreteData, Domain
    >>> x = np.random.default_rng(0).integers(0, 3, size=(300, 2))
    >>> res = PATECTGAN(max_iterations=1, batch_size=50).synthesize(
    ...     DiscreteData(x, Domain(("a", "b"), (3, 3))), 1.0, 1e-6, np.random.default_rng(1))
    >>> res.data.n, round(res.epsilon, 6)
    (300, 1.0)
    """

    name = "patectgan"
    citation = ("Rosenblatt, Liu, Pouyanfar, de Leon, Desai, Allen (2020). Differentially Private Synthetic Data: "
                "Applied Evaluations and Enhancements. arXiv:2011.05537.")
    summary = "PATE on CTGAN: teachers on disjoint parts, Gaussian noisy votes (data-independent zCDP), student"
    defaults = {
        "embedding_dim": Param(128, _SN + "; " + _CT),
        "generator_dim": Param((256, 256), _SN + "; " + _CT),
        "discriminator_dim": Param((256, 256), _SN + "; " + _CT),
        "batch_size": Param(500, _SN),
        "teacher_iters": Param(5, _SN),
        "student_iters": Param(5, _SN),
        "rows_per_teacher": Param(1000, _SN + " (sample_per_teacher; num_teachers = n / 1000 + 1)"),
        "vote_sd": Param(SMARTNOISE_VOTE_SD, _SN + ": noise_multiplier 1e-3 = Laplace scale 1000, sd "
                                                   "sqrt(2) * 1000; then set so the iterations spend the budget"),
        "max_iterations": Param(None, _SN + " (trains until the budget is spent)"),
        "lr_discriminator": Param(2e-4, _SN + " (Adam, betas (0.5, 0.9), weight decay 1e-6)"),
        "lr_generator": Param(2e-4, _SN + " (Adam, betas (0.5, 0.9), weight decay 1e-6)"),
        "tau": Param(0.2, _CT + " (Gumbel-softmax temperature)"),
        "marginal_share": Param(0.1, "dpstats' choice, as DP-CTGAN: noisy 1-way marginals for the conditions"),
    }
    _ints = ("embedding_dim", "batch_size", "teacher_iters", "student_iters", "rows_per_teacher", "max_iterations")
    _floats = ("vote_sd", "lr_discriminator", "lr_generator", "tau")

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        DPCTGAN._check_shapes(self.params)

    def _train_and_sample(self, torch: Any, data: DiscreteData, x: np.ndarray, accountant: ZCDPAccountant,
                          rng: np.random.Generator, n_rows: int) -> np.ndarray:
        p = self.params
        n, dim = x.shape
        shape = data.domain.shape
        batch, emb, s_it = int(p["batch_size"]), int(p["embedding_dim"]), int(p["student_iters"])
        tau = float(p["tau"])
        k = n // int(p["rows_per_teacher"]) + 1
        probs = noisy_marginals(data, accountant, float(p["marginal_share"]) * accountant.remaining, rng, self.name)
        iters, sd = pate_schedule(accountant.remaining, s_it * batch, float(p["vote_sd"]), p["max_iterations"])
        parts = partitions(n, k, rng)
        blocks = block_slices(shape)
        xt = torch.from_numpy(x)
        gen = ctgan_generator(torch, emb + dim, tuple(p["generator_dim"]), dim)
        student = ctgan_discriminator(torch, 2 * dim, tuple(p["discriminator_dim"]))
        teachers = [ctgan_discriminator(torch, 2 * dim, tuple(p["discriminator_dim"])) for _ in range(k)]
        kw = {"betas": (0.5, 0.9), "weight_decay": 1e-6}
        opt_g = torch.optim.Adam(gen.parameters(), lr=float(p["lr_generator"]), **kw)
        opt_s = torch.optim.Adam(student.parameters(), lr=float(p["lr_discriminator"]), **kw)
        opt_t = [torch.optim.Adam(t.parameters(), lr=float(p["lr_discriminator"]), **kw) for t in teachers]
        bce = torch.nn.functional.binary_cross_entropy_with_logits

        def fake(m: int) -> tuple[Any, Any, np.ndarray, np.ndarray]:
            cond, cols, cidx = cond_from_marginals(m, shape, probs, rng)
            cf = torch.from_numpy(cond)
            logits = gen(torch.cat([torch.randn(m, emb), cf], dim=1))
            return torch.cat([block_softmax(torch, logits, blocks, tau), cf], dim=1), logits, cols, cidx

        for it in range(iters):
            for _ in range(int(p["teacher_iters"])):
                for t, opt, part in zip(teachers, opt_t, parts, strict=True):
                    idx = part[rng.choice(part.size, size=min(batch, part.size), replace=False)]
                    creal, _ = cond_from_rows(data.codes[idx], shape, rng)
                    with torch.no_grad():
                        f = fake(idx.size)[0]
                    opt.zero_grad()
                    out_r = t(torch.cat([xt[idx], torch.from_numpy(creal)], dim=1)).squeeze(1)
                    out_f = t(f).squeeze(1)
                    (bce(out_r, torch.ones_like(out_r)) + bce(out_f, torch.zeros_like(out_f))).backward()
                    opt.step()
            for j in range(s_it):
                with torch.no_grad():
                    f = fake(batch)[0]
                lab = pate_labels(torch, teachers, f, accountant, sd, rng, f"{self.name}:votes",
                                  last=(it == iters - 1 and j == s_it - 1))
                opt_s.zero_grad()
                bce(student(f).squeeze(1), lab).backward()
                opt_s.step()
            opt_g.zero_grad()
            f, logits, cols, cidx = fake(batch)
            generator_loss(torch, logits, student(f).squeeze(1), cidx, blocks, cols).backward()
            opt_g.step()
        self.details = {"iterations": iters, "teachers": k, "vote_sd": sd}
        return train_ctgan_conditional(torch, p, blocks, shape, probs, n_rows, rng, gen)
