"""Accepted tuned configurations (``dpstats/tuned/*.json``, written by ``dpstats tune``) as roster entries ``<algorithm>_tuned_eps<E>``."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any, Callable, Mapping

#: where tuned configurations live (shipped with the package)
TUNED_DIR = Path(__file__).resolve().parents[1] / "tuned"


def tuned_name(algorithm: str, epsilon: float) -> str:
    """``<algorithm>_tuned_eps<E>`` with ``E`` printed as ``%g`` (0.3, 1, 3, 10)."""
    return f"{algorithm}_tuned_eps{float(epsilon):g}"


def _variant(base: type, spec: Mapping[str, Any], path: Path) -> type:
    from dpstats.algorithms.base import Param

    eps = float(spec["epsilon"])
    params = dict(spec.get("params") or {})
    unknown = sorted(set(params) - set(base.defaults))
    if unknown:
        raise ValueError(f"{path.name}: hyperparameter(s) {unknown} are not among {base.name}'s")
    defaults = dict(base.defaults)
    for k, v in params.items():
        defaults[k] = Param(v, f"tuned at epsilon = {eps:g} on public studies, see dpstats/tuned/{path.name}")
    name = tuned_name(base.name, eps)
    return type(
        f"{base.__name__}TunedEps{str(eps).replace('.', 'p')}",
        (base,),
        {
            "name": name,
            "defaults": defaults,
            "summary": (base.summary + "; " if base.summary else "") + f"hyperparameters tuned for epsilon = {eps:g}",
            "tuned_epsilon": eps,
            "tuned_from": base.name,
            "tuned_file": path.name,
            "__module__": base.__module__,
            "__doc__": f"{base.name} with hyperparameters {params} tuned at epsilon = {eps:g} ({path.name}).",
        },
    )


def load_tuned(directory: str | Path | None = None, resolve: Callable[[str, str], type] | None = None) -> list[type]:
    """Build the classes of the accepted tuned configurations in a folder (not registered).

    Parameters
    ----------
    directory : path-like, optional
        Default: :data:`TUNED_DIR`. A missing or empty folder gives ``[]``.
    resolve : callable, optional
        ``(task, name) -> class`` for the base algorithms (default: the registry).

    Notes
    -----
    A file that cannot be read, or whose base algorithm is unknown, is
    skipped with a warning rather than breaking the registry.
    """
    d = Path(directory) if directory is not None else TUNED_DIR
    if not d.is_dir():
        return []
    if resolve is None:
        from dpstats.algorithms import get as resolve
    out = []
    for path in sorted(d.glob("*.json")):
        try:
            spec = json.loads(path.read_text(encoding="utf-8"))
            if not spec.get("accepted"):
                continue
            base = resolve(spec["task"], spec["algorithm"])
            out.append(_variant(base, spec, path))
        except Exception as exc:  # noqa: BLE001 - one bad file must not break the registry
            warnings.warn(f"skipping tuned configuration {path}: {exc}", RuntimeWarning, stacklevel=2)
    return out


def register_tuned(directory: str | Path | None = None) -> list[type]:
    """Register the accepted tuned variants as roster entries; idempotent; ``[]`` for an empty folder."""
    from dpstats.algorithms import _REGISTRY, register

    done = []
    for cls in load_tuned(directory):
        key = (cls.task, cls.name)
        if key in _REGISTRY:
            done.append(_REGISTRY[key])
            continue
        done.append(register(cls))
    return done
