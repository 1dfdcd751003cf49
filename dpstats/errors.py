"""Error types that name the file, instance and field at fault."""

from __future__ import annotations

from pathlib import Path

__all__ = ["CorpusError", "InstanceError"]


class CorpusError(ValueError):
    """A corpus, manifest or instance is invalid.

    The message names the manifest file, the instance and the field, e.g.
    ``replication/card1995/study.toml: instance 'card95_ols_full': field 'formula': ...``.
    """

    def __init__(self, message: str, *, file: str | Path | None = None, instance: str | None = None,
                 field: str | None = None) -> None:
        self.file = Path(file) if file is not None else None
        self.instance = instance
        self.field = field
        self.message = message
        parts = []
        if self.file is not None:
            parts.append(str(self.file))
        if instance is not None:
            parts.append(f"instance {instance!r}")
        if field is not None:
            parts.append(f"field {field!r}")
        parts.append(message)
        super().__init__(": ".join(parts))


class InstanceError(CorpusError):
    """An instance's data cannot give a valid design (rank-deficient, n <= d, ...)."""
