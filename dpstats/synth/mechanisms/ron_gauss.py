"""RON-GAUSS (Chanyaswad, Liu, Mittal 2019): random orthonormal projection and a Gaussian generative model.

Privacy argument (full version: ``docs/synth/ron_gauss.md``)
-----------------------------------------------------------
zCDP, replace-one neighbours, ``n`` and the domain public. Every row is
one-hot encoded over the public domain (the label, when there is one, is
kept apart) and scaled to unit L2 norm by the public constant
``1 / sqrt(d)`` (a one-hot row over ``d`` columns has norm ``sqrt(d)``), so
the paper's pre-normalisation needs no data-dependent scaling.

Without a label (the paper's Algorithm 1):

1. the sum of the normalised rows with Gaussian noise, L2 sensitivity 2
   (two unit vectors differ by at most 2): ``sigma_mu = 2 / sqrt(2 rho_mu)``;
   the mean is the noisy sum over the public ``n``;
2. every row centred at that released mean and re-normalised to unit norm
   (a per-row map fixed by released values), projected by a random
   orthonormal ``p x D`` matrix drawn from ``rng`` (data-independent): rows
   of norm at most 1;
3. the scatter matrix ``sum_i x_i x_i^T`` of the projected rows, released as
   its upper triangle with off-diagonal entries times ``sqrt(2)`` (so the
   Euclidean norm of the vector is the Frobenius norm of the matrix) with
   Gaussian noise; ``||x x^T - y y^T||_F^2 = ||x||^4 + ||y||^4 - 2 (x.y)^2 <= 2``:
   L2 sensitivity ``sqrt(2)``, ``sigma_S = sqrt(2) / sqrt(2 rho_S)``.

With a label (the paper's Gaussian-mixture variant for classification):
noisy class counts (L2 sensitivity ``sqrt(2)``), then steps 1-3 per class
with the per-class sums released as one vector (a replaced row changes at
most two classes' sums, by at most 2 in total L2 norm) and the per-class
scatter matrices as one vector (sensitivity ``sqrt(2)`` whether the two rows
share a class or not). Per-class means and covariances divide by the noisy
counts (post-processing). The shares of ``rho`` are the ``budget_split``.

Sampling ``N(0, S / n)`` (the released scatter projected on the positive
semi-definite cone), reconstructing ``W^T z + mean`` and taking the arg-max of
each column's one-hot block post-process the releases.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dpstats.privacy.accounting import Accountant, ZCDPAccountant
from dpstats.synth.base import DiscreteData, Param, Synthesizer
from dpstats.synth.discretize import from_one_hot, one_hot

__all__ = ["RONGauss", "random_orthonormal", "sym_to_vec", "vec_to_sym"]


def random_orthonormal(p: int, m: int, rng: np.random.Generator) -> np.ndarray:
    """A ``p x m`` matrix with orthonormal rows: the first ``p`` rows of the Q factor of a uniform random matrix.

    As the reference code (``_generate_rand_onproj``: QR of a uniform
    ``m x m`` matrix); data-independent.
    """
    if not 1 <= p <= m:
        raise ValueError(f"projection dimension must lie in [1, {m}], got {p}")
    q, _ = np.linalg.qr(rng.random((m, m)))
    out: np.ndarray = q[:p]
    return out


def sym_to_vec(s: np.ndarray) -> np.ndarray:
    """Upper triangle of a symmetric matrix, off-diagonal entries times sqrt(2): ``||v||_2 = ||S||_F``."""
    iu = np.triu_indices(s.shape[0])
    w = np.where(iu[0] == iu[1], 1.0, math.sqrt(2.0))
    out: np.ndarray = s[iu] * w
    return out


def vec_to_sym(v: np.ndarray, p: int) -> np.ndarray:
    """Inverse of :func:`sym_to_vec`."""
    iu = np.triu_indices(p)
    w = np.where(iu[0] == iu[1], 1.0, math.sqrt(2.0))
    s = np.zeros((p, p))
    s[iu] = v / w
    out: np.ndarray = s + np.triu(s, 1).T
    return out


def _psd(s: np.ndarray) -> np.ndarray:
    """Nearest positive semi-definite matrix in Frobenius norm (negative eigenvalues set to 0)."""
    vals, vecs = np.linalg.eigh((s + s.T) / 2.0)
    out: np.ndarray = (vecs * np.clip(vals, 0.0, None)) @ vecs.T
    return out


def _unit_rows(x: np.ndarray) -> np.ndarray:
    """Rows scaled to unit L2 norm (a zero row stays zero): a per-row map."""
    nrm = np.linalg.norm(x, axis=1, keepdims=True)
    out: np.ndarray = np.divide(x, nrm, out=np.zeros_like(x), where=nrm > 0)
    return out


class RONGauss(Synthesizer):
    """RON-GAUSS: noisy mean, random orthonormal projection, noisy scatter matrix, Gaussian (mixture) sampling.

    Examples
    --------
    >>> import numpy as np
    >>> from dpstats.synth.base import DiscreteData, Domain
    >>> x = np.random.default_rng(0).integers(0, 3, size=(400, 3))
    >>> res = RONGauss().synthesize(DiscreteData(x, Domain(("a", "b", "c"), (3, 3, 3))), 1.0, 1e-6,
    ...                             np.random.default_rng(1))
    >>> res.data.n, [s.mechanism for s in res.ledger]
    (400, ['ron_gauss:sum', 'ron_gauss:scatter'])
    """

    name = "ron_gauss"
    family = "other"
    interpretation = "standard"
    citation = ("Chanyaswad, Liu, Mittal (2019). RON-Gauss: Enhancing utility in non-interactive private data "
                "release. Proceedings on Privacy Enhancing Technologies 2019(1) (reference code "
                "inspire-group/RON-Gauss).")
    summary = ("one-hot rows normalised by a public constant, noisy mean, random orthonormal projection, "
               "noisy scatter matrix, Gaussian (per-class mixture with a label) sampling, arg-max decoding")
    defaults = {
        "dimension": Param(0.5, "projection dimension p: an int, or a fraction of the one-hot width D "
                                "(rounded up). The paper (Sec. 5) varies p per data set; its reference code "
                                "has no default. dpstats: D / 2"),
        "label": Param(None, "label column: the paper's Gaussian-mixture variant for classification "
                             "(one Gaussian per class); None: its unsupervised Algorithm 1"),
        "budget_split": Param((0.1, 0.45, 0.45),
                              "shares of rho for (class counts, means, scatter); the reference code's default "
                              "epsilon_mean = epsilon_cov = 1 splits mean and covariance equally; the counts' "
                              "0.1 is dpstats' (the reference takes them as public). Without a label the "
                              "count share is unused and the other two are renormalised"),
    }
    accountant = ZCDPAccountant

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        dim = self.params["dimension"]
        if isinstance(dim, bool) or not isinstance(dim, (int, float)) or not (
                (isinstance(dim, int) and dim >= 1) or (isinstance(dim, float) and 0 < dim <= 1)):
            raise ValueError(f"RONGauss: dimension must be an int >= 1 or a float in (0, 1], got {dim!r}")
        split = tuple(self.params["budget_split"])
        if len(split) != 3 or not all(isinstance(s, (int, float)) and s >= 0 for s in split) \
                or split[1] <= 0 or split[2] <= 0:
            raise ValueError(f"RONGauss: budget_split must be three shares >= 0 (means and scatter > 0), "
                             f"got {self.params['budget_split']!r}")
        self.params["budget_split"] = split

    def _dim(self, width: int) -> int:
        dim = self.params["dimension"]
        p = int(dim) if isinstance(dim, int) else int(math.ceil(dim * width))
        if p > width:
            raise ValueError(f"RONGauss: dimension {p} exceeds the one-hot width {width}")
        return max(p, 1)

    def _synthesize(self, data: DiscreteData, accountant: Accountant, rng: np.random.Generator,
                    n_rows: int) -> DiscreteData:
        label = self.params["label"]
        dom = data.domain
        if label is not None and label not in dom:
            raise KeyError(f"RONGauss: label {label!r} is not a column; columns: {list(dom.names)}")
        feats = [c for c in dom.names if c != label]
        if not feats:
            raise ValueError("RONGauss: needs at least one column besides the label")
        fdom = dom.project(feats)
        fdata = data.project(feats)
        width = int(sum(fdom.shape))
        p = self._dim(width)
        rho = accountant.remaining
        s_count, s_mean, s_cov = self.params["budget_split"]
        if label is None:
            s_count = 0.0
        total = s_count + s_mean + s_cov
        rho_n, rho_mu = rho * s_count / total, rho * s_mean / total
        # public normalisation: every one-hot row has norm sqrt(len(feats))
        x = one_hot(fdata) / math.sqrt(len(feats))
        w = random_orthonormal(p, width, rng)
        if label is None:
            classes = np.zeros(data.n, dtype=np.int64)
            k = 1
            counts = np.array([float(data.n)])
        else:
            classes = data.column(label)
            k = dom[label]
            sigma_n = math.sqrt(2.0) / math.sqrt(2.0 * rho_n)
            counts = np.asarray(accountant.gaussian(
                "ron_gauss:class_counts", np.bincount(classes, minlength=k).astype(float),
                sensitivity=math.sqrt(2.0), sigma=sigma_n, rng=rng,
                note="label counts, replace-one L2 sensitivity sqrt(2)"))
        # 1. per-class sums of the unit rows (one vector): L2 sensitivity 2
        sums = np.zeros((k, width))
        np.add.at(sums, classes, x)
        sigma_mu = 2.0 / math.sqrt(2.0 * rho_mu)
        tag = "ron_gauss:sum" if label is None else "ron_gauss:class_sums"
        noisy_sums = np.asarray(accountant.gaussian(
            tag, sums.ravel(), sensitivity=2.0, sigma=sigma_mu, rng=rng,
            note="sums of unit-norm one-hot rows, replace-one L2 sensitivity 2")).reshape(k, width)
        denom = np.maximum(counts, 1.0)
        means = noisy_sums / denom[:, None]
        # 2. centre at the released mean, re-normalise (per row), project
        xt = _unit_rows(x - means[classes]) @ w.T
        # 3. per-class scatter matrices (one vector): L2 sensitivity sqrt(2); the rest of the budget
        scat = np.stack([sym_to_vec(xt[classes == c].T @ xt[classes == c]) for c in range(k)])
        sigma_s = math.sqrt(2.0) / math.sqrt(2.0 * accountant.remaining)
        tag = "ron_gauss:scatter" if label is None else "ron_gauss:class_scatter"
        noisy_scat = np.asarray(accountant.gaussian(
            tag, scat.ravel(), sensitivity=math.sqrt(2.0), sigma=sigma_s, rng=rng,
            note="scatter of projected unit rows (Frobenius), replace-one L2 sensitivity sqrt(2)")).reshape(k, -1)
        # post-processing: how many rows per class, sample, reconstruct, decode
        if label is None:
            per_class = np.array([n_rows])
        else:
            pc = np.clip(counts, 0.0, None)
            prob = pc / pc.sum() if pc.sum() > 0 else np.full(k, 1.0 / k)
            per_class = rng.multinomial(n_rows, prob)
        out = np.empty((n_rows, len(dom)), dtype=np.int64)
        fidx = [dom.names.index(c) for c in feats]
        start = 0
        for c in range(k):
            m = int(per_class[c])
            if not m:
                continue
            cov = _psd(vec_to_sym(noisy_scat[c], p)) / denom[c]
            z = rng.multivariate_normal(np.zeros(p), cov, size=m, method="eigh")
            recon = z @ w + means[c]
            out[start:start + m][:, fidx] = from_one_hot(recon, fdom)
            if label is not None:
                out[start:start + m, dom.names.index(label)] = c
            start += m
        if label is not None:
            out = out[rng.permutation(n_rows)]
        self.details = {"dimension": p, "sigma_mean": sigma_mu, "sigma_scatter": sigma_s,
                        "classes": int(k), "rows_per_class": per_class.tolist()}
        return data.with_codes(out)
