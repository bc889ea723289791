"""Typed errors of the store. Each carries a message a user can act on."""

from __future__ import annotations


class TraceStoreError(Exception):
    """Base of every error the store raises on purpose."""

    title = "Store error"


class IngestError(TraceStoreError):
    """A file could not be imported. Nothing from it was stored.

    `file`, `line` and `field` say where; `str(err)` is the whole sentence, e.g.
    ``traces.jsonl line 8123: `reward` must be a number, got "high"``.
    """

    title = "Import failed"

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        line: int | None = None,
        field: str | None = None,
    ) -> None:
        self.file = file
        self.line = line
        self.field = field
        self.reason = message
        where = " ".join(p for p in (file or "", f"line {line}" if line else "") if p)
        super().__init__(f"{where}: {message}" if where else message)


class UnknownFormatError(IngestError):
    """The file's format could not be detected."""

    title = "Unknown format"


class RunNotFound(TraceStoreError):
    title = "Run not found"


class RolloutNotFound(TraceStoreError):
    title = "Rollout not found"


class ExtensionUnavailable(TraceStoreError):
    title = "DuckDB extension unavailable"


class StoreLocked(TraceStoreError):
    """Another process holds the embedded DuckDB file for writing."""

    title = "Store in use"
