"""The paper's workloads of marginal queries.

Tao et al. (2021): all 2- and 3-way marginals that include the label when
there is one, all 2-way marginals otherwise.

Examples
--------
>>> paper_workload(["a", "b", "y"], label="y")
[('a', 'y'), ('b', 'y'), ('a', 'b', 'y')]
>>> paper_workload(["a", "b", "c"])
[('a', 'b'), ('a', 'c'), ('b', 'c')]
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations

__all__ = ["paper_workload", "all_kway"]


def all_kway(names: Sequence[str], k: int) -> list[tuple[str, ...]]:
    """Every set of ``k`` columns, in column order."""
    return list(combinations(list(names), k))


def paper_workload(names: Sequence[str], label: str | None = None) -> list[tuple[str, ...]]:
    """2- and 3-way marginals containing ``label`` (label last), or all 2-way marginals without one."""
    names = list(names)
    if label is None:
        return all_kway(names, 2)
    if label not in names:
        raise KeyError(f"label {label!r} is not a column; columns: {names}")
    others = [n for n in names if n != label]
    return [(a, label) for a in others] + [(a, b, label) for a, b in combinations(others, 2)]
