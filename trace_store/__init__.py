"""Rollscope's trace store: rollouts of agent RFT runs in DuckDB. No UI code lives here."""

from __future__ import annotations

from .errors import (
    ExtensionUnavailable,
    IngestError,
    RolloutNotFound,
    RunNotFound,
    StoreLocked,
    TraceStoreError,
    UnknownFormatError,
)
from .ingest import IngestResult, detect_format
from .store import Store, default_db_path, open_store

__all__ = [
    "ExtensionUnavailable",
    "IngestError",
    "IngestResult",
    "RolloutNotFound",
    "RunNotFound",
    "Store",
    "StoreLocked",
    "TraceStoreError",
    "UnknownFormatError",
    "default_db_path",
    "detect_format",
    "open_store",
]
