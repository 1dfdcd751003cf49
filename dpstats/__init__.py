"""dpstats: differentially private statistics for economists, benchmarked on replication data.

The public functions are thin; each returns a results object:

* :func:`load_corpus`, :func:`compute_baseline`: the replication corpus and
  its non-private baselines;
* :func:`private_coef`, :func:`private_ols`, :func:`private_mean`: private
  estimators on your own data frame.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__version__ = "0.1.0"

_LAZY = {
    "Corpus": "dpstats.data.corpus",
    "CorpusError": "dpstats.errors",
    "Instance": "dpstats.data.instance",
    "PublicFacts": "dpstats.data.instance",
    "Baseline": "dpstats.ols.baseline",
    "compute_baseline": "dpstats.ols.baseline",
    "PrivacyLeakWarning": "dpstats.privacy.accounting",
    "private_coef": "dpstats.api",
    "private_ols": "dpstats.api",
    "private_mean": "dpstats.api",
    "list_algorithms": "dpstats.algorithms",
}

__all__ = sorted(_LAZY) + ["load_corpus", "__version__"]


def load_corpus(path: str | None = None):
    """Load a replication corpus (default: the public corpus shipped with dpstats).

    Parameters
    ----------
    path : str, optional
        A corpus folder written to corpus format v1.

    Returns
    -------
    Corpus
    """
    from dpstats.data.corpus import Corpus

    return Corpus.public() if path is None else Corpus(path)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'dpstats' has no attribute {name!r}")


def __dir__() -> list[str]:
    return __all__
