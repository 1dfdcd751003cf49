"""PATE-GAN (Jordon, Yoon, van der Schaar 2019): teacher discriminators on disjoint parts, a student, a generator.

Privacy argument (full version: ``docs/synth/pategan.md``)
---------------------------------------------------------
Replace-one neighbours, ``n`` and the domain public. The rows are split into
``k`` disjoint parts by a public random permutation; teacher ``t`` sees part
``t`` only and is never released. The only release is, for each batch of
``m`` generated rows, the vector of counts of teachers voting 'real', with
Gaussian noise, drawn and charged through the accountant: replacing one row
changes one teacher, so each count by at most 1, L2 sensitivity ``sqrt(m)``,
``m / (2 sd^2)`` of zCDP per batch, composed additively. This is a
*data-independent* bound: the original paper's data-dependent moments bound
(and smartnoise-synth's implementation of it) is not a DP guarantee unless
smoothed, and is not used. The Gaussian replaces the paper's Laplace vote
noise (GNMax, Papernot et al. 2018), whose data-independent composition is
much worse. The student is trained only on generated rows and the noisy
labels, the generator only through the student: post-processing.
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
    partitions,
    pate_labels,
    pate_schedule,
    smartnoise_discriminator,
    smartnoise_generator,
)

__all__ = ["PATEGAN"]

_SN = "smartnoise-synth 1.0.8 PATEGAN default (the benchmark paper's implementation, Tao et al. 2021 ref. [31])"


class PATEGAN(GANSynthesizer):
    """PATE-GAN with a data-independent (zCDP) bound on the noisy teacher votes.

    Examples
    --------
    >>> import numpy as np
    >>> from dpstats.synth.base import DiscreteData, Domain
    >>> x = np.random.default_rng(0).integers(0, 3, size=(300, 2))
    >>> res = PATEGAN(max_iterations=2).synthesize(DiscreteData(x, Domain(("a", "b"), (3, 3))), 1.0, 1e-6,
    ...                                            np.random.default_rng(1))
    >>> res.data.n, round(res.epsilon, 6)
    (300, 1.0)
    """

    name = "pategan"
    citation = ("Jordon, Yoon, van der Schaar (2019). PATE-GAN: Generating Synthetic Data with Differential "
                "Privacy Guarantees. ICLR 2019.")
    summary = "PATE-GAN: teachers on disjoint parts, Gaussian noisy votes (data-independent zCDP), student, generator"
    defaults = {
        "latent_dim": Param(64, _SN),
        "batch_size": Param(64, _SN),
        "teacher_iters": Param(5, _SN),
        "student_iters": Param(5, _SN),
        "rows_per_teacher": Param(1000, _SN + " (num_teachers = n / 1000)"),
        "vote_sd": Param(SMARTNOISE_VOTE_SD, _SN + ": Laplace scale 1 / 1e-3 = 1000, sd sqrt(2) * 1000; "
                                                   "trained with it until the budget is spent, then set so the "
                                                   "iterations spend it exactly"),
        "max_iterations": Param(None, _SN + " (no cap: the budget decides)"),
        "lr": Param(1e-4, _SN + " (Adam, generator, student and teachers)"),
    }
    _ints = ("latent_dim", "batch_size", "teacher_iters", "student_iters", "rows_per_teacher", "max_iterations")
    _floats = ("vote_sd", "lr")

    def _train_and_sample(self, torch: Any, data: DiscreteData, x: np.ndarray, accountant: ZCDPAccountant,
                          rng: np.random.Generator, n_rows: int) -> np.ndarray:
        p = self.params
        n, dim = x.shape
        batch, latent, s_it = int(p["batch_size"]), int(p["latent_dim"]), int(p["student_iters"])
        k = max(n // int(p["rows_per_teacher"]), 1)
        iters, sd = pate_schedule(accountant.remaining, s_it * batch, float(p["vote_sd"]), p["max_iterations"])
        parts = partitions(n, k, rng)
        blocks = block_slices(data.domain.shape)
        xt = torch.from_numpy(x)
        gen = smartnoise_generator(torch, latent, dim)
        student = smartnoise_discriminator(torch, dim)
        teachers = [smartnoise_discriminator(torch, dim) for _ in range(k)]
        lr = float(p["lr"])
        opt_g = torch.optim.Adam(gen.parameters(), lr=lr)
        opt_s = torch.optim.Adam(student.parameters(), lr=lr)
        opt_t = [torch.optim.Adam(t.parameters(), lr=lr) for t in teachers]
        bce = torch.nn.functional.binary_cross_entropy_with_logits

        def fake(m: int) -> Any:
            return block_softmax(torch, gen(torch.randn(m, latent)), blocks)

        for it in range(iters):
            for _ in range(int(p["teacher_iters"])):
                for t, opt, part in zip(teachers, opt_t, parts, strict=True):
                    idx = part[rng.choice(part.size, size=min(batch, part.size), replace=False)]
                    with torch.no_grad():
                        f = fake(batch)
                    opt.zero_grad()
                    out_r, out_f = t(xt[idx]).squeeze(1), t(f).squeeze(1)
                    (bce(out_r, torch.ones_like(out_r)) + bce(out_f, torch.zeros_like(out_f))).backward()
                    opt.step()
            for j in range(s_it):
                with torch.no_grad():
                    f = fake(batch)
                lab = pate_labels(torch, teachers, f, accountant, sd, rng, f"{self.name}:votes",
                                  last=(it == iters - 1 and j == s_it - 1))
                opt_s.zero_grad()
                bce(student(f).squeeze(1), lab).backward()
                opt_s.step()
            opt_g.zero_grad()
            out = student(fake(batch)).squeeze(1)
            bce(out, torch.ones_like(out)).backward()
            opt_g.step()
        self.details = {"iterations": iters, "teachers": k, "vote_sd": sd}
        with torch.no_grad():
            return np.asarray(fake(n_rows).numpy())
