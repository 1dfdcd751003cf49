"""What an audit found: :class:`AuditResult`, its JSON form and its plain-text report."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["AuditResult"]


@dataclass
class AuditResult:
    """What an audit found. :meth:`to_dict` is the ``--json`` output."""

    algorithm: str
    task: str
    interpretation: str
    epsilon_claimed: float
    delta: float
    epsilon_lower: float
    confidence: float
    trials: int
    violation: bool
    reasons: list[str]
    bounds: list[dict[str, Any]]
    ledger: dict[str, Any]
    exposure: dict[str, Any]
    #: ``{side: {kind: runs}}``; a merged audit of several designs (``design="both"``) nests it by design
    outcomes: dict[str, dict[str, Any]]
    errors: dict[str, Any]
    data: dict[str, Any]
    seconds: float
    seconds_per_release: float
    workers: int
    seed: int
    notes: list[str] = field(default_factory=list)
    #: what the audit could have seen (:mod:`dpstats.audit.power`): ``gaussian_bound``, the lower bound an ideal
    #: attack typically reaches with these trials on a mechanism that spends exactly the claim, and
    #: ``trials_for_half``, the trials with which that bound would reach half the claim
    power: dict[str, Any] = field(default_factory=dict)
    #: releases spent on the pilots of a design search (not in ``trials``, which the bound rests on)
    trials_pilot: int = 0

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    def summary(self) -> str:
        """A plain-text report."""
        k = self.data.get("clusters")
        clusters = f" in {k} clusters, the canary in a new one" if k else ""
        lines = [
            f"audit of {self.algorithm} ({self.task}, {self.interpretation}) on {self.data['source']} data "
            f"(n = {self.data['n']}{clusters}, canary {self.data['mode']} the bounds)",
            f"claimed epsilon = {self.epsilon_claimed:g}, delta = {self.delta:g}; ledger: {self.ledger['summary']}",
            f"trials = {self.trials} releases in {self.seconds:.1f} s ({1000 * self.seconds_per_release:.2f} ms each, "
            f"{self.workers} worker(s)); outcomes {self.outcomes}",
        ]
        e = self.errors
        if e["count"]:
            lines.append(f"errors: {e['count']} of {self.trials} runs raised, gave a non-finite estimate or lost their "
                         f"worker ({e.get('worker_deaths', 0)} worker deaths); first: "
                         f"{(e['messages'] + e.get('limit_messages', []))[:1]}")
        if e.get("timeouts") or e.get("memory"):
            lines.append(f"limits: {e['timeouts']} time-outs and {e['memory']} memory overruns of {self.trials} runs "
                         f"(per release: {e['limits']['time']:g} s, {e['limits']['memory_mb']:g} MB), scored as "
                         f"outcomes like declines; first: {e['limit_messages'][:1]}")
        if e.get("declined"):
            lines.append(f"declines: {e['declined']} of {self.trials} runs; reasons {e['declines']}")
        if e.get("fallback"):
            lines.append(f"fallbacks: {e['fallback']} of {self.trials} runs released a fallback (scored as a category "
                         f"like a decline); reasons {e['fallbacks']}")
        lines.append(f"epsilon lower bounds at confidence {self.confidence:g} (Bonferroni over the counted estimators):")
        for b in self.bounds:
            tag = "counts" if b["counts"] else "info"
            lines.append(f"  {b['estimator']:<16} {b['epsilon']:8.4f}   claim {b['claim_epsilon']:.4f}   [{tag}] "
                         f"{b.get('statistic', '')} {b.get('note', '')}".rstrip())
        e = self.exposure
        if e:
            lines.append(f"exposure of the canary runs: median {e['median']:.3f} (random guessing {e['baseline_median']:.3f}), "
                         f"mean {e['mean']:.3f} ({e['baseline_mean']:.3f}), p75 {e['p75']:.3f} ({e['baseline_p75']:.3f}); "
                         f"median-canary bound {e['median_bound']:.4f} (heuristic)")
        pw = self.power
        if pw:
            half = pw.get("trials_for_half")
            lines.append(f"power: on a mechanism that spends exactly the claim ({pw['mechanism']}), these {self.trials} "
                         f"releases typically give a lower bound of {pw['gaussian_bound']:.4f} of a possible "
                         f"{self.epsilon_claimed:g}; about {half} would give {self.epsilon_claimed / 2:g}"
                         if half else f"power: on a mechanism that spends exactly the claim ({pw['mechanism']}), "
                         f"these {self.trials} releases typically give a lower bound of {pw['gaussian_bound']:.4f} "
                         f"of a possible {self.epsilon_claimed:g}")
        lines.append(f"epsilon_lower = {self.epsilon_lower:.4f} vs claimed {self.epsilon_claimed:g}: "
                     + ("VIOLATION: " + "; ".join(self.reasons) if self.violation else "no violation found "
                        "(a lower bound below the claim is not a proof of privacy)"))
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)
