"""Importers: the canonical JSONL reader and one module per source format."""

from __future__ import annotations

from .canonical import IngestResult
from .registry import Importer, describe_formats, detect_format, get_importer, importers

__all__ = [
    "Importer",
    "IngestResult",
    "describe_formats",
    "detect_format",
    "get_importer",
    "importers",
]
