"""Shared machinery of the four GAN synthesizers (DPGAN, DP-CTGAN, PATE-GAN, PATE-CTGAN).

torch, opacus and dp_accounting are imported inside functions only (the
``gan`` extra: ``pip install 'dpstats[gan]'``), so importing this module, or
listing the synthesizers, never imports torch.

Privacy accounting of DP-SGD (DPGAN, DP-CTGAN)
----------------------------------------------
Neighbours replace one row, ``n`` public. Each discriminator step takes a
batch of exactly ``B`` rows drawn uniformly *without replacement* (fresh for
every step, from ``rng``), clips each row's gradient to L2 norm ``C``, sums
them and adds ``N(0, sigma^2 I)``. Replacing one row changes one clipped
gradient: L2 sensitivity ``2 C``. With ``z = sigma / (2 C)`` each step is a
Gaussian mechanism of noise multiplier ``z`` on a sample without
replacement of ``B`` of ``n`` rows, whose Rényi DP under the replace-one
relation is bounded by Wang, Balle and Kasiviswanathan (2019, Thm. 9), as
computed by ``dp_accounting`` (Google, ``RdpAccountant`` with
``NeighboringRelation.REPLACE_ONE``). ``T`` steps compose additively in RDP;
spends already in the zCDP ledger (``rho`` in all: PrivTree, noisy
marginals) are RDP ``rho * alpha`` at every order (Bun and Steinke 2016) and
are added order by order; the sum converts to ``(epsilon, delta)`` by
``dp_accounting.rdp.compute_epsilon``. Opacus' own RDP accountant analyses
Poisson sampling under add/remove neighbours, not this relation: it is used
as a cross-check in the tests only (in the full-batch case, where the two
relations' mechanisms coincide up to the factor 2 of the sensitivity).

The generator only ever sees the discriminator (post-processing); fake rows
and latent noise do not depend on the data given the past releases, so their
gradients (clipped too, for balance) add no sensitivity.

The whole DP-SGD run is one charging call on :class:`RDPAccountant` (the
GANs' accountant: a zCDP ledger that also composes RDP curves),
``rdp_measurement``, which checks the composition against the budget before
any draw and then runs the training; its entry closes the ledger with the
remaining ``rho`` (bookkeeping: the subsampled Gaussian is not ``rho``-zCDP
for any useful ``rho``), and :meth:`RDPAccountant.achieved` reports the RDP
composition of every entry.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, cast

import numpy as np

from dpstats.privacy.accounting import Accountant, ZCDPAccountant
from dpstats.privacy.rdp import (  # the RDP primitives live in dpstats.privacy (re-exported for the GANs)
    ORDERS,
    RDPAccountant,
    calibrate_noise,
    dpsgd_epsilon,
    dpsgd_max_steps,
    wor_rdp,
)
from dpstats.synth.base import DiscreteData, Synthesizer
from dpstats.synth.discretize import one_hot

__all__ = [
    "ORDERS",
    "require_torch",
    "wor_rdp",
    "dpsgd_epsilon",
    "dpsgd_max_steps",
    "calibrate_noise",
    "GANSynthesizer",
    "RDPAccountant",
]

def require_torch(name: str) -> Any:
    """Import torch (and check opacus and dp_accounting) or raise a clear ImportError naming the extra."""
    try:
        import dp_accounting  # noqa: F401
        import opacus  # noqa: F401
        import torch
    except ImportError as exc:  # pragma: no cover - exercised only without the extra
        raise ImportError(f"{name} needs torch, opacus and dp_accounting: pip install 'dpstats[gan]' "
                          f"({exc})") from exc
    return torch


# ----------------------------------------------------------------------
# networks (built inside functions: torch is imported lazily)
# ----------------------------------------------------------------------

def smartnoise_generator(torch: Any, latent: int, out: int) -> Any:
    """The generator of smartnoise-synth's DPGAN / PATE-GAN: two residual blocks of ``latent``, then ``out`` logits.

    Blocks are Linear (no bias), LayerNorm, LeakyReLU(0.2); the last block's
    output feeds a per-column softmax (:func:`block_softmax`).
    """
    nn = torch.nn

    def block(i: int, o: int) -> Any:
        return nn.Sequential(nn.Linear(i, o, bias=False), nn.LayerNorm(o), nn.LeakyReLU(0.2))

    class Gen(nn.Module):  # type: ignore[name-defined,misc]
        def __init__(self) -> None:
            super().__init__()
            self.l0, self.l1 = block(latent, latent), block(latent, latent)
            self.out = nn.Linear(latent, out)

        def forward(self, z: Any) -> Any:
            z = self.l0(z) + z
            z = self.l1(z) + z
            return self.out(z)

    return Gen()


def smartnoise_discriminator(torch: Any, d: int) -> Any:
    """smartnoise-synth's discriminator: Linear(d, 2d/3), LeakyReLU(0.2), Linear(., d/3), LeakyReLU, Linear(., 1) (logit)."""
    nn = torch.nn
    h1, h2 = max(2 * d // 3, 1), max(d // 3, 1)
    return nn.Sequential(nn.Linear(d, h1), nn.LeakyReLU(0.2), nn.Linear(h1, h2), nn.LeakyReLU(0.2), nn.Linear(h2, 1))


def ctgan_generator(torch: Any, inp: int, dims: Sequence[int], out: int) -> Any:
    """CTGAN's generator (Xu et al. 2019): residual blocks (Linear, BatchNorm1d, ReLU, concatenated input), then logits."""
    nn = torch.nn

    class Residual(nn.Module):  # type: ignore[name-defined,misc]
        def __init__(self, i: int, o: int) -> None:
            super().__init__()
            self.fc, self.bn, self.relu = nn.Linear(i, o), nn.BatchNorm1d(o), nn.ReLU()

        def forward(self, x: Any) -> Any:
            return torch.cat([self.relu(self.bn(self.fc(x))), x], dim=1)

    layers: list[Any] = []
    dim = inp
    for h in dims:
        layers.append(Residual(dim, h))
        dim += h
    layers.append(nn.Linear(dim, out))
    return nn.Sequential(*layers)


def ctgan_discriminator(torch: Any, inp: int, dims: Sequence[int]) -> Any:
    """CTGAN's discriminator with pac = 1: (Linear, LeakyReLU(0.2), Dropout(0.5)) per hidden layer, then a logit."""
    nn = torch.nn
    layers: list[Any] = []
    dim = inp
    for h in dims:
        layers += [nn.Linear(dim, h), nn.LeakyReLU(0.2), nn.Dropout(0.5)]
        dim = h
    layers.append(nn.Linear(dim, 1))
    return nn.Sequential(*layers)


def block_slices(shape: Sequence[int]) -> list[slice]:
    """The one-hot block of each column."""
    out, start = [], 0
    for k in shape:
        out.append(slice(start, start + int(k)))
        start += int(k)
    return out


def block_softmax(torch: Any, logits: Any, blocks: Sequence[slice], tau: float | None = None) -> Any:
    """Per-column softmax of generator logits; with ``tau``, Gumbel-softmax (CTGAN uses tau = 0.2)."""
    parts = []
    for s in blocks:
        x = logits[:, s]
        if tau is not None:
            u = torch.rand_like(x).clamp_(1e-10, 1.0 - 1e-7)
            x = (x - torch.log(-torch.log(u))) / tau
        parts.append(torch.softmax(x, dim=1))
    return torch.cat(parts, dim=1)


def sample_codes(probs: np.ndarray, shape: Sequence[int], rng: np.random.Generator) -> np.ndarray:
    """Codes drawn column by column from the per-block probabilities (post-processing)."""
    out = np.empty((probs.shape[0], len(shape)), dtype=np.int64)
    for j, s in enumerate(block_slices(shape)):
        p = np.clip(probs[:, s].astype(float), 0.0, None)
        p /= np.maximum(p.sum(axis=1, keepdims=True), 1e-300)
        c = np.cumsum(p, axis=1)
        u = np.asarray(rng.random(probs.shape[0]))[:, None] * c[:, -1:]
        out[:, j] = np.minimum((u > c).sum(axis=1), len(range(s.start, s.stop)) - 1)
    return out


# ----------------------------------------------------------------------
# DP-SGD on a discriminator
# ----------------------------------------------------------------------

class DPDiscriminatorStep:
    """One DP-SGD update of an MLP discriminator: per-row clipping and Gaussian noise from ``rng``.

    Per-row gradient norms use the rank-one structure of a linear layer's
    per-row gradient (``g_i a_i^T``, norm ``||g_i|| ||a_i||``; Goodfellow
    2015, "ghost clipping" of Li et al. 2022, as opacus' fast gradient
    clipping does), so no per-row gradient is materialised; the clipped sum
    is one matrix product per layer. ``tests/synth/test_gans.py`` checks the
    result against opacus' per-sample gradients (``GradSampleModule``).

    Parameters
    ----------
    torch : module
    module : torch.nn.Sequential
        The discriminator: ``Linear`` layers (with bias) and row-wise layers
        (activations, dropout) only.
    clip : float
        Per-row L2 clipping norm ``C`` (over all parameters of a row's gradient).
    sigma : float
        Standard deviation of the noise added to the sum of clipped gradients
        (``z * 2 C``).
    rng : numpy Generator
        Draws the noise: one ``rng.normal(0, sigma, size=n_params)`` per step.
    """

    def __init__(self, torch: Any, module: Any, clip: float, sigma: float, rng: np.random.Generator) -> None:
        nn = torch.nn
        for layer in module:
            if isinstance(layer, nn.Linear):
                if layer.bias is None:
                    raise TypeError("DPDiscriminatorStep: linear layers need a bias")
            elif not isinstance(layer, (nn.LeakyReLU, nn.ReLU, nn.Tanh, nn.Sigmoid, nn.Dropout)):
                raise TypeError(f"DPDiscriminatorStep: unsupported layer {type(layer).__name__}")
        self.torch, self.module, self.clip, self.sigma, self.rng = torch, module, float(clip), float(sigma), rng
        self.linears = [m for m in module if isinstance(m, nn.Linear)]
        self.size = int(sum(p.numel() for p in module.parameters()))
        self.steps = 0

    def clipped_sum(self, x: Any, per_row_loss: Callable[[Any], Any]) -> tuple[list[Any], Any]:
        """The sum over rows of the clipped per-row gradients (one tensor per parameter) and the row norms."""
        torch = self.torch
        acts, outs = [], []
        h = x
        for layer in self.module:
            if isinstance(layer, torch.nn.Linear):
                acts.append(h.detach())
                h = layer(h)
                outs.append(h)
            else:
                h = layer(h)
        grads = torch.autograd.grad(per_row_loss(h).sum(), outs)
        norm2 = sum((g * g).sum(dim=1) * ((a * a).sum(dim=1) + 1.0) for g, a in zip(grads, acts, strict=True))
        norms = torch.sqrt(norm2)
        factor = torch.clamp(self.clip / (norms + 1e-12), max=1.0)
        total: list[Any] = []
        for _layer, g, a in zip(self.linears, grads, acts, strict=True):
            fg = factor[:, None] * g
            total.append(fg.T @ a)             # weight: (out, in)
            total.append(fg.sum(dim=0))        # bias
        return total, norms

    def __call__(self, x: Any, per_row_loss: Callable[[Any], Any], n_real: int) -> None:
        """Set ``p.grad`` of every parameter to the noisy mean gradient of ``per_row_loss(module(x))``.

        ``x`` holds the ``n_real`` private rows first, then fake rows. Every
        row's gradient is clipped to ``C``; the noise is drawn once per call,
        and the sum is divided by ``n_real``.
        """
        torch = self.torch
        total, _ = self.clipped_sum(x, per_row_loss)
        noise = torch.from_numpy(self.rng.normal(0.0, self.sigma, size=self.size).astype(np.float32))
        start = 0
        params = [t for layer in self.linears for t in (layer.weight, layer.bias)]
        for p, t in zip(params, total, strict=True):
            k = p.numel()
            p.grad = ((t + noise[start:start + k].reshape(t.shape)) / n_real).detach()
            start += k
        self.steps += 1


# ----------------------------------------------------------------------
# conditional vectors (CTGAN)
# ----------------------------------------------------------------------

def noisy_marginals(data: DiscreteData, accountant: ZCDPAccountant, rho: float, rng: np.random.Generator,
                    prefix: str) -> list[np.ndarray]:
    """Every 1-way marginal with Gaussian noise, ``rho / d`` each (L2 sensitivity sqrt(2)); clipped, normalised."""
    from dpstats.synth.mechanisms.independent import noisy_probabilities

    d = len(data.domain)
    sigma = math.sqrt(2.0) / math.sqrt(2.0 * rho / d)
    out = []
    for j, name in enumerate(data.domain.names):
        counts = np.bincount(data.codes[:, j], minlength=data.domain.shape[j]).astype(float)
        noisy = accountant.gaussian(f"{prefix}:marginal:{name}", counts, sensitivity=math.sqrt(2.0), sigma=sigma,
                                    rng=rng, note="1-way marginal for the conditional sampler, replace-one L2 "
                                                  "sensitivity sqrt(2)")
        out.append(noisy_probabilities(noisy))
    return out


def cond_from_rows(codes: np.ndarray, shape: Sequence[int], rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Condition vectors of real rows: a column chosen uniformly (public), the row's own category in it.

    Returns the one-hot conditions (``len(codes) x sum(shape)``) and the columns.
    """
    offsets = np.concatenate([[0], np.cumsum(shape)[:-1]]).astype(np.int64)
    cols = np.asarray(rng.integers(0, len(shape), size=codes.shape[0]))
    cond = np.zeros((codes.shape[0], int(sum(shape))), dtype=np.float32)
    cond[np.arange(codes.shape[0]), offsets[cols] + codes[np.arange(codes.shape[0]), cols]] = 1.0
    return cond, cols


def cond_from_marginals(m: int, shape: Sequence[int], probs: Sequence[np.ndarray],
                        rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``m`` condition vectors for fake rows: column uniform, category from its noisy marginal (released values)."""
    offsets = np.concatenate([[0], np.cumsum(shape)[:-1]]).astype(np.int64)
    cols = np.asarray(rng.integers(0, len(shape), size=m))
    cats = np.empty(m, dtype=np.int64)
    for j in np.unique(cols):
        w = cols == j
        cats[w] = rng.choice(len(probs[j]), size=int(w.sum()), p=probs[j])
    cond = np.zeros((m, int(sum(shape))), dtype=np.float32)
    cond[np.arange(m), offsets[cols] + cats] = 1.0
    return cond, cols, offsets[cols] + cats


# ----------------------------------------------------------------------
# the base class
# ----------------------------------------------------------------------

def _positive_int(name: str, v: Any, lo: int = 1) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo:
        raise ValueError(f"hyperparameter {name} must be an integer >= {lo}, got {v!r}")
    return int(v)


def _positive_float(name: str, v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float, np.floating, np.integer)) or not (
            v > 0 and math.isfinite(float(v))):
        raise ValueError(f"hyperparameter {name} must be a finite number > 0, got {v!r}")
    return float(v)


class GANSynthesizer(Synthesizer):
    """Common parts: checks, torch seeding from ``rng``, one-hot input, the GAN family."""

    family = "GAN"
    interpretation = "standard"
    needs_numbers = True
    accountant = RDPAccountant
    _ints: tuple[str, ...] = ()
    _floats: tuple[str, ...] = ()

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        for k in self._ints:
            v = self.params[k]
            if v is not None:
                _positive_int(k, v)
        for k in self._floats:
            _positive_float(k, self.params[k])

    def _synthesize(self, data: DiscreteData, accountant: Accountant, rng: np.random.Generator,
                    n_rows: int) -> DiscreteData:
        if data.n < 2:
            raise ValueError(f"{self.name}: needs at least 2 rows, got {data.n}")
        torch = require_torch(self.name)
        seed = int(rng.integers(0, 2**63 - 1))
        threads = torch.get_num_threads()
        # the networks are small: one thread is faster than two, and much faster on a shared machine
        torch.set_num_threads(1)
        try:
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(seed)
                # synthesize() has checked that the accountant is an RDPAccountant (the class's accountant)
                probs = self._train_and_sample(torch, data, one_hot(data).astype(np.float32),
                                               cast(RDPAccountant, accountant), rng, n_rows)
        finally:
            torch.set_num_threads(threads)
        return data.with_codes(sample_codes(probs, data.domain.shape, rng))

    def _train_and_sample(self, torch: Any, data: DiscreteData, x: np.ndarray, accountant: RDPAccountant,
                          rng: np.random.Generator, n_rows: int) -> np.ndarray:
        """Spend the accountant's remaining budget training; return ``n_rows`` rows of per-column probabilities."""
        raise NotImplementedError  # pragma: no cover


def dpsgd_schedule(name: str, n: int, batch: int, z0: float, epochs: int, accountant: RDPAccountant
                   ) -> tuple[int, float, float, np.ndarray]:
    """Steps and noise multiplier of a DP-SGD run (smartnoise's rule: fixed noise, train until the budget is spent).

    ``T`` is the most steps (at most ``epochs * (n // batch)``) that noise
    multiplier ``z0`` affords with the ledger's earlier spends; at least one
    step. Then the noise is lowered (or, for one step, raised) to the ``z``
    at which those ``T`` steps spend the budget (to within 1e-3 in z, never above it). Returns
    ``(T, z, epsilon_rdp, rdp)`` with ``epsilon_rdp <= epsilon`` and ``rdp``
    the run's RDP curve. Depends on public facts only (``n``, the
    hyperparameters, the budget).
    """
    if batch > n:
        raise ValueError(f"{name}: batch_size {batch} exceeds the number of rows {n}")
    eps, delta, prior = accountant.epsilon, accountant.delta, accountant.spent
    cap = epochs * max(n // batch, 1)
    steps = max(dpsgd_max_steps(n, batch, z0, eps, delta, prior, cap), 1)
    z = calibrate_noise(n, batch, steps, eps, delta, prior)
    return steps, z, dpsgd_epsilon(n, batch, z, steps, delta, prior), steps * wor_rdp(n, batch, z)



# ----------------------------------------------------------------------
# PATE (PATE-GAN, PATE-CTGAN)
# ----------------------------------------------------------------------

#: smartnoise-synth's PATE noise: Laplace of scale 1 / lambda = 1 / 1e-3 on each vote count; the Gaussian
#: vote noise here starts from the same standard deviation, sqrt(2) * 1000.
SMARTNOISE_VOTE_SD = math.sqrt(2.0) * 1000.0


def pate_schedule(rho: float, queries_per_iteration: int, sd0: float, max_iterations: int | None) -> tuple[int, float]:
    """Iterations and vote-noise sd of a PATE run (smartnoise's rule: fixed noise, train until the budget is spent).

    Each query releases one vote count (sensitivity 1) with ``N(0, sd^2)``:
    ``1 / (2 sd^2)`` of zCDP. ``T`` is the most iterations that ``sd0``
    affords within ``rho`` (at least 1, at most ``max_iterations``); the sd
    is then set so that ``T`` iterations spend ``rho`` exactly. Public
    inputs only.
    """
    if not (rho > 0 and math.isfinite(rho)):
        raise ValueError("PATE: no budget left")
    per_it = queries_per_iteration / (2.0 * sd0 * sd0)
    t = max(int(math.floor(rho / per_it * (1 + 1e-12))), 1)
    if max_iterations is not None:
        t = min(t, int(max_iterations))
    return t, math.sqrt(t * queries_per_iteration / (2.0 * rho))


def pate_labels(torch: Any, teachers: Sequence[Any], x: Any, accountant: ZCDPAccountant, sd: float,
                rng: np.random.Generator, mechanism: str, last: bool) -> Any:
    """Noisy teacher votes on generated rows ``x``: label 1 where the noisy count of 'real' votes exceeds k / 2.

    Teacher ``t`` is trained only on partition ``t``; replacing one row
    changes one teacher, hence each of the ``m`` counts by at most 1: L2
    sensitivity ``sqrt(m)`` for the batch, released with the Gaussian
    mechanism through the accountant (the last call takes exactly what
    remains, its sd recorded in the ledger).
    """
    with torch.no_grad():
        votes = sum((t(x).squeeze(1) > 0).to(torch.float64) for t in teachers).numpy()
    m = votes.shape[0]
    sens = math.sqrt(m)
    if last:
        sd = sens / math.sqrt(2.0 * accountant.remaining)
    noisy = accountant.gaussian(mechanism, votes, sensitivity=sens, sigma=sd, rng=rng,
                                note=f"{len(teachers)} teachers' 'real' votes on {m} generated rows; replace-one "
                                     "changes one teacher: L2 sensitivity sqrt(m)")
    return torch.from_numpy((np.asarray(noisy) > len(teachers) / 2.0).astype(np.float32))


def partitions(n: int, k: int, rng: np.random.Generator) -> list[np.ndarray]:
    """``k`` disjoint parts of the row indices (a public random permutation)."""
    return [np.asarray(p) for p in np.array_split(rng.permutation(n), k)]
