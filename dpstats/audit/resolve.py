"""What an audit runs: a roster name, a named configuration, a ``module:object`` plugin or a class, resolved.

:func:`resolve_algorithm` finds the class (with the error messages the
command line shows); :func:`resolve_configuration` the roster entry, so that
a named configuration such as ``fwl_score[api]`` is audited as its algorithm
with its params, under its own name.
"""

from __future__ import annotations

from dpstats.algorithms import (
    Algorithm,
    Configuration,
    get,
    get_configuration,
    list_algorithms,
    list_configurations,
    load_plugin,
)

__all__ = ["resolve_algorithm", "resolve_configuration"]


def resolve_algorithm(spec: str | type, task: str | None = None) -> type:
    """The algorithm class for a registry name or ``module:object`` plugin (or a class).

    Raises
    ------
    ValueError
        Naming ``algorithm`` or ``--task``: unknown name, plugin that cannot be
        imported (or raises on import), a task the algorithm does not have, a
        name that exists for several tasks without ``task``.
    """
    from dpstats.algorithms import TASKS

    if task is not None and task not in TASKS:
        raise ValueError(f"--task: unknown task {task!r}; choose one of {', '.join(TASKS)}")
    if isinstance(spec, type):
        if not issubclass(spec, Algorithm):
            raise ValueError(f"algorithm: {spec!r} is not a dpstats Algorithm subclass")
        cls = spec
    elif ":" in str(spec):
        try:
            cls = load_plugin(str(spec))
        except ValueError as exc:
            raise ValueError(f"algorithm: {exc}") from None
        except Exception as exc:  # noqa: BLE001 - a plugin that raises on import is bad input
            raise ValueError(f"algorithm: plugin {spec!r} raised on import: {type(exc).__name__}: {exc}") from None
    else:
        tasks = [a.task for a in list_algorithms(opt_in=True) if a.name == spec]  # opt-in ones by name too
        if not tasks:
            known = ", ".join(sorted({a.name for a in list_algorithms(task)}))
            raise ValueError(f"algorithm: unknown algorithm {spec!r}{'' if task is None else ' for task ' + task}; "
                             f"known: {known}")
        if task is None:
            if len(tasks) > 1:
                raise ValueError(f"--task: algorithm {spec!r} exists for tasks {', '.join(tasks)}; choose one with --task")
            task = tasks[0]
        if task not in tasks:
            raise ValueError(f"--task: algorithm {spec!r} has no task {task!r} (it has: {', '.join(tasks)})")
        cls = get(task, str(spec))
    if task is not None and cls.task != task:
        raise ValueError(f"--task: algorithm {getattr(cls, 'name', spec)!r} is for task {cls.task!r}, not {task!r}")
    return cls


def resolve_configuration(spec: str | type, task: str | None = None) -> Configuration:
    """The roster entry for a name (a registered algorithm or a named configuration), a plugin or a class.

    A named configuration (``fwl_score[api]``, ``<algorithm>_tuned_eps<E>``)
    is its algorithm with its params; anything else is
    :func:`resolve_algorithm`'s class at its defaults.

    Raises
    ------
    ValueError
        As :func:`resolve_algorithm`.
    """
    if isinstance(spec, str) and ":" not in spec:
        tasks = [c.task for c in list_configurations(opt_in=True, named=True) if c.name == spec]
        if tasks:
            if task is None and len(tasks) > 1:
                raise ValueError(f"--task: algorithm {spec!r} exists for tasks {', '.join(tasks)}; choose one with --task")
            if task is not None and task not in tasks:
                raise ValueError(f"--task: algorithm {spec!r} has no task {task!r} (it has: {', '.join(tasks)})")
            return get_configuration(task or tasks[0], spec)
    cls = resolve_algorithm(spec, task)
    return Configuration.of(cls, spec if isinstance(spec, str) else None)
