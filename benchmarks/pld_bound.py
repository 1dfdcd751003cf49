"""What exact accounting would give a release: its ledger composed as privacy loss distributions.

A measurement, not a mechanism: the package accounts in zCDP. This script
takes the ledger of an ``fwl_score`` interval release (and of the other API
defaults) and composes its mechanisms exactly with ``dp-accounting``'s
privacy loss distributions (PLDs):

* a Gaussian mechanism by its own PLD (noise sd over sensitivity);
* an exponential mechanism charged as ``eps``-bounded-range by a dominating
  pair of the whole class of ``eps``-bounded-range pairs (:func:`br_pld`).
  Dong, Durfee and Rogers (2020) show that the pairs of an
  ``eps``-bounded-range mechanism are dominated by two-point pairs whose
  privacy loss takes the values ``(1 - t) eps`` and ``-t eps`` for some
  ``t`` in ``[0, 1]``; the pointwise maximum over ``t`` of their hockey-stick
  curves is convex and is the curve of one pair, built here on a grid
  (chords above the curve: pessimistic), which dominates every
  bounded-range pair in both directions.

Dominating pairs compose under adaptive composition (Zhu, Dong and Wang
2022), so the composed PLD bounds the release's (epsilon, delta). The script
prints that epsilon at the release's delta, and the factor by which every
noise scale could shrink if the budget were calibrated to it (all zCDP
charges scaled by one factor ``c`` until the PLD epsilon meets the target:
Gaussian noise sd times ``1 / sqrt(c)``).

Usage (a few seconds; needs ``dp-accounting``, part of the ``gan`` extra)::

    PYTHONPATH=. .venv/bin/python benchmarks/pld_bound.py
"""

from __future__ import annotations

import argparse
import functools
import math
import warnings
from collections.abc import Iterable
from typing import Any

import numpy as np

#: the PLDs' discretisation of the privacy loss
STEP = 1e-4
#: points of the grid of x = e^(eps') on which a bounded-range curve is built, and of t it is maximised over
X_POINTS, T_POINTS = 400, 2001


def two_point_curve(eps: float, t: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Hockey-stick ``E_Q[(e^L - x)^+]`` of the two-point pairs with losses ``(1 - t) eps`` and ``-t eps``.

    Rows are values of ``t``, columns values of ``x``. The mass ``q`` of the
    upper loss under ``Q`` makes ``E_Q[e^L] = 1``.
    """
    t = np.asarray(t, float)[:, None]
    hi, lo = np.exp((1.0 - t) * eps), np.exp(-t * eps)
    with np.errstate(invalid="ignore", divide="ignore"):
        q = np.where(hi > lo, (1.0 - lo) / (hi - lo), 0.0)
    return q * np.maximum(hi - x, 0.0) + (1.0 - q) * np.maximum(lo - x, 0.0)


def br_pair(eps: float, x_points: int = X_POINTS, t_points: int = T_POINTS) -> tuple[np.ndarray, np.ndarray]:
    """Probability masses ``(P, Q)`` of one pair whose curve lies above every ``eps``-bounded-range pair's.

    The curve ``H(x) = max_t`` of :func:`two_point_curve` on a grid of
    ``x`` in ``[e^-eps, e^eps]`` (1 - x below, 0 above), joined by chords
    (above the convex curve). A convex, piecewise-linear ``H`` with
    ``H(x) = 1 - x`` near 0 is ``E_Q[(Y - x)^+]`` for ``Y`` on the grid points
    with ``Q(Y = x_k)`` the jump of the slope at ``x_k``; ``P = Y Q``.
    """
    x = np.exp(np.linspace(-eps, eps, x_points))
    t = np.linspace(0.0, 1.0, t_points)
    curves = two_point_curve(eps, t, x)
    h, best = curves.max(axis=0), curves.argmax(axis=0)
    h[0], h[-1] = 1.0 - x[0], 0.0
    # the grid maximum over t can sit below the true one; rescan the best t's neighbourhood
    for k in range(1, x_points - 1):
        fine = np.linspace(t[max(best[k] - 1, 0)], t[min(best[k] + 1, t_points - 1)], 201)
        h[k] = max(h[k], float(two_point_curve(eps, fine, x[k:k + 1]).max()))
    slopes = np.diff(h) / np.diff(x)
    slopes = np.maximum.accumulate(slopes)  # a convex curve: slopes never fall (guards rounding)
    jumps = np.diff(np.concatenate([[-1.0], slopes, [0.0]]))
    q = np.maximum(jumps, 0.0)
    q = q / q.sum()
    return q * x, q


@functools.lru_cache(maxsize=256)
def br_pld(eps: float, step: float = STEP) -> Any:
    """The PLD of :func:`br_pair` for one ``eps``-bounded-range mechanism (cached: a ledger repeats its epsilons)."""
    from dp_accounting.pld import privacy_loss_distribution as pldm

    p, q = br_pair(eps)
    keep = (p > 0) & (q > 0)
    upper = {k: math.log(v) for k, v in enumerate(p) if keep[k]}
    lower = {k: math.log(v) for k, v in enumerate(q) if keep[k]}
    return pldm.from_two_probability_mass_functions(lower, upper, value_discretization_interval=step)


def ledger_pld(ledger: Iterable[Any], scale: float = 1.0, step: float = STEP) -> Any:
    """Compose a release's ledger as PLDs, every zCDP charge multiplied by ``scale``."""
    from dp_accounting.pld import privacy_loss_distribution as pldm

    out = None
    for e in ledger:
        if e.kind == "gaussian":
            p = pldm.from_gaussian_mechanism(standard_deviation=e.scale / e.sensitivity / math.sqrt(scale),
                                             value_discretization_interval=step)
        elif e.kind == "gaussian_joint":
            p = pldm.from_gaussian_mechanism(standard_deviation=1.0 / e.sensitivity / math.sqrt(scale),
                                             value_discretization_interval=step)
        elif e.kind == "exponential":
            p = br_pld(e.scale * math.sqrt(scale), step)
        else:
            raise ValueError(f"no PLD for a {e.kind!r} entry ({e.mechanism})")
        out = p if out is None else out.compose(p)
    return out


def two_point_pld(eps: float, t: float, step: float = STEP) -> Any:
    """The PLD of the two-point pair with losses ``(1 - t) eps`` and ``-t eps`` (``0 < t < 1``)."""
    from dp_accounting.pld import privacy_loss_distribution as pldm

    hi, lo = math.exp((1.0 - t) * eps), math.exp(-t * eps)
    q = (1.0 - lo) / (hi - lo)
    return pldm.from_two_probability_mass_functions({0: math.log(q), 1: math.log(1.0 - q)},
                                                    {0: math.log(q * hi), 1: math.log((1.0 - q) * lo)},
                                                    value_discretization_interval=step)


def compare_homogeneous(k: int, eps: float, delta: float, t_points: int = 25) -> dict[str, float]:
    """Epsilon at ``delta`` of ``k`` ``eps``-bounded-range mechanisms, three ways.

    ``pair``: :func:`br_pld` composed; ``common_t``: the worst two-point pair
    with one ``t`` for all (Dong, Durfee and Rogers's optimal composition of
    equal mechanisms, on a grid of ``t``); ``zcdp``: the epsilon whose zCDP
    budget is their charge ``k eps^2 / 8``.
    """
    from dpstats.privacy.conversions import zcdp_rho

    def power(p: Any) -> Any:
        out = p
        for _ in range(k - 1):
            out = out.compose(p)
        return out

    pair = power(br_pld(eps)).get_epsilon_for_delta(delta)
    common = max(power(two_point_pld(eps, float(t))).get_epsilon_for_delta(delta)
                 for t in np.linspace(0.02, 0.98, t_points))
    rho, lo, hi = k * eps * eps / 8.0, 1e-6, 100.0
    while hi - lo > 1e-7 * hi:
        mid = (lo + hi) / 2.0
        lo, hi = (mid, hi) if zcdp_rho(mid, delta) < rho else (lo, mid)
    return {"pair": float(pair), "common_t": float(common), "zcdp": lo}


def calibration_factor(ledger: list[Any], epsilon: float, delta: float, tol: float = 1e-3) -> float:
    """The largest ``c`` with the ledger's charges times ``c`` within ``(epsilon, delta)`` by PLD (bisection)."""
    lo, hi = 1.0, 1.0
    while ledger_pld(ledger, hi).get_epsilon_for_delta(delta) <= epsilon:
        lo, hi = hi, hi * 2.0
    if lo == hi:  # already above at c = 1
        lo = 0.0
    while hi - lo > tol * hi:
        mid = (lo + hi) / 2.0
        if ledger_pld(ledger, mid).get_epsilon_for_delta(delta) <= epsilon:
            lo = mid
        else:
            hi = mid
    return lo


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--epsilon", type=float, nargs="+", default=[1.0])
    ap.add_argument("--delta", type=float, default=1e-6)
    ap.add_argument("--instance", nargs="+", default=["mroz87_lwage", "card95_ols_full", "mean_mroz87_lwage",
                                                       "mroz87_lwage_linreg"])
    ap.add_argument("--homogeneous", nargs=2, type=float, metavar=("K", "EPS"),
                    help="instead: K mechanisms of EPS-bounded range, by the dominating pair, one common t and zCDP")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    if args.homogeneous:
        k, e = int(args.homogeneous[0]), float(args.homogeneous[1])
        r = compare_homogeneous(k, e, args.delta)
        print(f"{k} mechanisms of {e:g}-bounded range, epsilon at delta {args.delta:g}: dominating pair "
              f"{r['pair']:.3f}, common t {r['common_t']:.3f}, zCDP {r['zcdp']:.3f}")
        return 0
    from dpstats.algorithms.configurations import API_DEFAULTS, get_configuration
    from dpstats.algorithms.release import Budget, release
    from dpstats.data.corpus import Corpus

    corpus = Corpus.public()
    for eps in args.epsilon:
        for iid in args.instance:
            inst = corpus.instance(iid)
            task = inst.facts.task
            spec = get_configuration(task, f"{API_DEFAULTS[task]}[api]").spec()
            rel = release(spec, inst.task_data(), inst.facts, Budget(eps, args.delta), np.random.default_rng(0))
            kinds: dict[str, float] = {}
            for e in rel.ledger:
                kinds[e.kind] = kinds.get(e.kind, 0.0) + e.cost
            pld_eps = ledger_pld(rel.ledger).get_epsilon_for_delta(args.delta)
            c = calibration_factor(list(rel.ledger), eps, args.delta)
            print(f"{iid} ({task}, {API_DEFAULTS[task]}[api]) epsilon {eps:g}: {len(rel.ledger)} mechanisms, zCDP rho "
                  + ", ".join(f"{k} {v:.4g}" for k, v in sorted(kinds.items()))
                  + f"; PLD epsilon at delta {args.delta:g}: {pld_eps:.3f}; charges could be {c:.3f} times as large, "
                  f"noise sd times {1.0 / math.sqrt(c):.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
