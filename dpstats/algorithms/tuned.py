"""Roster variants: an algorithm with other default hyperparameters, registered under its own name.

* Accepted tuned configurations (``dpstats/tuned/*.json``, written by
  ``dpstats tune``) become ``<algorithm>_tuned_eps<E>`` (:func:`register_tuned`).
* The configuration the economist API runs by default becomes
  ``<algorithm>[api]`` (:func:`register_api_variants`): the default method of
  each task (:data:`API_DEFAULTS`) with its ``interval_params``, the budget
  split between the estimate and its interval that ``inference=True`` uses.

A variant is a subclass of its base algorithm that changes only ``name``,
``defaults`` and descriptive attributes; hyperparameters are public, so it
keeps the base algorithm's privacy argument and interpretation class.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any, Callable, Mapping

from dpstats.algorithms.base import Param
from dpstats.algorithms.registry import _REGISTRY, get, register

#: where tuned configurations live (shipped with the package)
TUNED_DIR = Path(__file__).resolve().parents[1] / "tuned"


def tuned_name(algorithm: str, epsilon: float) -> str:
    """``<algorithm>_tuned_eps<E>`` with ``E`` printed as ``%g`` (0.3, 1, 3, 10)."""
    return f"{algorithm}_tuned_eps{float(epsilon):g}"


def _derive(base: type, cls_name: str, name: str, params: Mapping[str, Any], source: str, **attrs: Any) -> type:
    """The subclass ``cls_name`` of ``base`` named ``name``, with ``params`` as defaults (each citing ``source``)."""
    unknown = sorted(set(params) - set(base.defaults))
    if unknown:
        raise ValueError(f"hyperparameter(s) {unknown} are not among {base.name}'s")
    defaults = dict(base.defaults)
    for k, v in params.items():
        defaults[k] = Param(v, source)
    body = {"name": name, "defaults": defaults, "__module__": base.__module__, **attrs}
    return type(cls_name, (base,), body)


def _variant(base: type, spec: Mapping[str, Any], path: Path) -> type:
    eps = float(spec["epsilon"])
    params = dict(spec.get("params") or {})
    try:
        return _derive(
            base, f"{base.__name__}TunedEps{str(eps).replace('.', 'p')}", tuned_name(base.name, eps), params,
            f"tuned at epsilon = {eps:g} on public studies, see dpstats/tuned/{path.name}",
            summary=(base.summary + "; " if base.summary else "") + f"hyperparameters tuned for epsilon = {eps:g}",
            tuned_epsilon=eps, tuned_from=base.name, tuned_file=path.name,
            __doc__=f"{base.name} with hyperparameters {params} tuned at epsilon = {eps:g} ({path.name}).",
        )
    except ValueError as exc:
        raise ValueError(f"{path.name}: {exc}") from None


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
        resolve = get
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
    done = []
    for cls in load_tuned(directory):
        key = (cls.task, cls.name)
        if key in _REGISTRY:
            done.append(_REGISTRY[key])
            continue
        done.append(register(cls))
    return done


# --------------------------------------------------------------------------
# The API's configurations: <algorithm>[api]
# --------------------------------------------------------------------------

#: The economist API's default method of each task. It must equal ``dpstats.api.DEFAULT_METHODS`` (the
#: algorithms layer cannot import the API, which sits above it; ``tests/bench/test_leaderboard_api.py``
#: checks that they agree). Each gets the roster entry :func:`api_name` ``(name)``.
API_DEFAULTS: dict[str, str] = {"sce": "fwl_score", "linreg": "dpnewton", "mean": "adaptive_whiten"}


def api_name(algorithm: str) -> str:
    """``<algorithm>[api]``: the roster name of the configuration the API runs."""
    return f"{algorithm}[api]"


def api_variant(base: type) -> type:
    """``base`` as the API runs it with ``inference=True``: its ``interval_params`` as its defaults (not registered).

    The release is the one ``dpstats.private_coef`` (``private_ols``,
    ``private_mean``) gives with ``method=None``: the point estimate gets
    only what the interval leaves of the budget. The variant declares
    ``intervals = False``: the coverage benchmark already runs ``base`` with
    these hyperparameters, so a second entry there would repeat it; and as a
    method of the API it is not needed (the API's default is the same
    configuration, with its interval).
    """
    params = dict(base.interval_params)
    if not base.intervals or not params:
        raise ValueError(f"{base.name!r} declares no interval_params: the API runs it with its defaults")
    return _derive(
        base, f"{base.__name__}API", api_name(base.name), params,
        f"the economist API's setting with inference=True ({base.name}.interval_params)",
        summary=(base.summary + "; " if base.summary else "") + f"as the economist API runs it (inference=True: "
        f"{params})",
        api_from=base.name, intervals=False, __module__=__name__,
        __doc__=f"{base.name} with its interval_params {params}, as dpstats.api runs it by default.",
    )


def register_api_variants() -> list[type]:
    """Register ``<algorithm>[api]`` for each task's :data:`API_DEFAULTS`; idempotent."""
    done = []
    for task, name in API_DEFAULTS.items():
        key = (task, api_name(name))
        done.append(_REGISTRY[key] if key in _REGISTRY else register(api_variant(get(task, name))))
    return done
