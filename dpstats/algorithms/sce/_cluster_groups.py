"""Groups of sampling clusters, and the delete-a-group jackknife over them.

fwl_score's cluster-robust interval releases its stage-2 sums once per group
of clusters and takes the spread of the delete-one-group estimates. The
groups are either the levels of an absorbed fixed effect (level mod ``J``,
when the clusters are those levels) or the clusters' own labels, mapped to a
group by :func:`cluster_groups`: a fixed public function of one row's label,
so replacing a row moves only that row between groups, and the released
per-group sums keep the sensitivities stated where they are drawn. How
many groups the labels can fill is decided on a noisy count of the clusters
(:func:`noisy_cluster_count`), never on the count itself.
"""

from __future__ import annotations

import math
import zlib

import numpy as np

from dpstats.privacy.accounting import Accountant

__all__ = ["cluster_groups", "group_jackknife", "noisy_cluster_count", "groups_for_count"]


def _label_key(label: object) -> bytes:
    """A canonical byte string of a cluster label: equal labels give equal keys (``3``, ``3.0``, ``np.int64(3)``)."""
    if isinstance(label, (int, np.integer, np.bool_)):  # bool is an int
        return str(int(label)).encode()
    if isinstance(label, (float, np.floating)):
        v = float(label)
        return (str(int(v)) if v.is_integer() else repr(v)).encode()
    return str(label).encode()


def cluster_groups(labels: np.ndarray, J: int) -> np.ndarray:
    """The group ``0 .. J - 1`` of each row: CRC-32 of its cluster label's canonical form, mod ``J``.

    The map from a label to its group is fixed and public (it does not depend
    on the other rows, their order or the set of labels present), so all
    rows of a cluster share a group and a replaced row changes its own group
    only. With many more clusters than groups the groups hold about equal
    numbers of clusters; with few clusters some groups may be empty, so the
    number of groups is set from a noisy count of the clusters
    (:func:`groups_for_count`) to make that rare.

    Parameters
    ----------
    labels : array_like, shape (n,)
        Cluster labels (numbers or strings).
    J : int
        Number of groups, at least 1.
    """
    if J < 1:
        raise ValueError(f"J must be at least 1, got {J}")
    group: dict[bytes, int] = {}
    out = np.empty(np.asarray(labels).size, dtype=np.int64)
    for i, v in enumerate(np.asarray(labels, dtype=object).reshape(-1).tolist()):
        key = _label_key(v)
        if key not in group:
            group[key] = zlib.crc32(key) % J
        out[i] = group[key]
    return out


def noisy_cluster_count(labels: np.ndarray, acc: Accountant, rho: float,
                        rng: np.random.Generator) -> tuple[float, float]:
    """The number of distinct cluster labels with Gaussian noise, charged to ``acc``; returns ``(count, sigma)``.

    Sensitivity 1 under replace-one: the replaced row's old cluster loses a
    row (and the count 1 if it was its only row) while its new label may be
    new (adding 1), so the count moves by at most 1 either way.
    """
    count = float(len({_label_key(v) for v in np.asarray(labels, dtype=object).reshape(-1).tolist()}))
    sigma = 1.0 / math.sqrt(2.0 * rho)
    noisy = acc.gaussian("Gaussian count of clusters", count, sensitivity=1.0, sigma=sigma, rng=rng,
                         note="distinct cluster labels; a replaced row leaves one cluster and may start another")
    return float(noisy), sigma


def groups_for_count(count: float, sigma: float, J_max: int, per_group: float) -> int:
    """Groups the clusters can fill: ``min(J_max, floor((count - 3 sigma) / per_group))`` (post-processing).

    With ``per_group`` clusters or more per group on average, a group is empty
    with probability about ``J exp(-per_group)``; fewer than three groups
    give no jackknife.
    """
    return int(max(0, min(int(J_max), math.floor((count - 3.0 * sigma) / per_group))))


def group_jackknife(theta0: float, S_k: np.ndarray, T_k: np.ndarray, sig_T_k: float) -> float:
    """Delete-a-group jackknife variance of ``theta0 + sum S_k / sum T_k`` (post-processing of the released sums).

    With independent clusters the groups' sums are independent, so the
    spread of the delete-one estimates holds both the sampling error between
    clusters and the privacy noise of the sums; the interval uses
    ``t(J - 1)``. ``inf`` with fewer than three groups, or when a
    denominator lies within three noise sd of 0.
    """
    S_k, T_k = np.asarray(S_k, dtype=float), np.asarray(T_k, dtype=float)
    J = S_k.size
    S, T = float(S_k.sum()), float(T_k.sum())
    den = T - T_k
    if J < 3 or np.any(den <= 3.0 * sig_T_k * math.sqrt(J - 1)):
        return math.inf
    th = theta0 + (S - S_k) / den
    return (J - 1) / J * float(np.sum((th - th.mean()) ** 2))
