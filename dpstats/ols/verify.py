"""Check a corpus: load every instance, compute its baseline, compare with the published numbers.

Examples
--------
>>> from dpstats.data.corpus import Corpus
>>> from dpstats.ols.verify import verify_instance
>>> corpus = Corpus.public()
>>> row = verify_instance(corpus, corpus.spec("mroz87_lwage"))
>>> row.reproduces, row.reported
(True, {'coef': 0.107, 'se': 0.014})
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dpstats.data.corpus import Corpus, CorpusError, InstanceSpec
from dpstats.ols.baseline import Baseline, compute_baseline

__all__ = ["VerifyRow", "verify_instance", "verify_corpus"]


@dataclass(frozen=True)
class VerifyRow:
    """The outcome of verifying one instance."""

    study: str
    instance: str
    task: str
    n: int | None
    d: int | None
    se_type: str | None
    estimate: Any
    baseline: float | None
    reported: dict[str, float]
    reproduces: bool | None
    dropped_missing: int | None
    dropped_collinear: list[str] = field(default_factory=list)
    mismatches: list[str] = field(default_factory=list)
    error: str | None = None
    reported_text: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "study": self.study, "instance": self.instance, "task": self.task, "n": self.n, "d": self.d,
            "se_type": self.se_type, "estimate": self.estimate, "baseline": self.baseline,
            "reported": self.reported, "reproduces": self.reproduces, "dropped_missing": self.dropped_missing,
            "dropped_collinear": self.dropped_collinear, "mismatches": self.mismatches, "error": self.error,
        }


def _compare(spec: InstanceSpec, b: Baseline) -> tuple[bool | None, list[str]]:
    if not spec.reported:
        return None, []
    computed = {"coef": b.coef, "se": b.se}
    bad = [
        f"{k}: computed {computed[k]:.{r.decimals + 2}f}, reported {r}"
        for k, r in spec.reported.items()
        if not r.matches(computed[k])
    ]
    return not bad, bad


def verify_instance(corpus: Corpus, spec: InstanceSpec, engine: str = "python") -> VerifyRow:
    """Verify one instance; errors in the data are reported in the row, not raised."""
    reported = {k: v.value for k, v in spec.reported.items()}
    text = {k: str(v) for k, v in spec.reported.items()}
    try:
        inst = corpus.instance(spec.id)
        b = compute_baseline(inst, engine=engine)
    except CorpusError as exc:
        return VerifyRow(spec.study, spec.id, spec.task, None, None, spec.se if spec.task == "sce" else None,
                         None, None, reported, False if spec.reported else None, None, error=str(exc),
                         reported_text=text)
    ok, bad = _compare(spec, b)
    est = b.coef if spec.task == "sce" else [float(v) for v in b.estimate]
    return VerifyRow(
        spec.study, spec.id, spec.task, b.n, b.d, b.se_type, est, float(b.baseline), reported, ok,
        inst.dropped_missing, list(inst.dropped_collinear), bad, reported_text=text,
    )


def verify_corpus(corpus: Corpus, engine: str = "python") -> list[VerifyRow]:
    """Verify every instance of a corpus (each dataset is read once)."""
    return [verify_instance(corpus, s, engine) for s in corpus.specs()]
