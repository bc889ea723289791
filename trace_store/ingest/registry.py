"""Which importer reads a file: detected from its name and first bytes.

An importer module in this package exposes a module-level ``IMPORTER``; it is found without
being listed here. The canonical format is always tried first.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from ..errors import UnknownFormatError

Detector = Callable[[str, bytes], bool]
Converter = Callable[[Path], Iterator[dict[str, Any]]]


@dataclass(frozen=True)
class Importer:
    """One source format.

    ``convert`` yields canonical records (rollout-a-line or event-a-line dicts); it is None only
    for the canonical format itself, which the store reads directly with DuckDB.
    """

    name: str
    label: str
    detect: Detector
    convert: Converter | None
    example: str
    #: ``convert`` yields step-metric rows (run_id, step, split, metric, value, source) for the
    #: `step_metrics` table instead of rollouts (fine-tuning job metrics events).
    writes_step_metrics: bool = False


def _first_line(head: bytes) -> dict[str, Any] | None:
    line = head.lstrip().split(b"\n", 1)[0]
    try:
        value = json.loads(line)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _detect_canonical(name: str, head: bytes) -> bool:
    record = _first_line(head)
    if record is None:
        # A first line longer than the head: fall back to the keys in its opening bytes.
        text = head[:4096]
        return head.lstrip().startswith(b"{") and b'"rollout_id"' in text and b'"run_id"' in text
    return (
        isinstance(record.get("run_id"), str)
        and isinstance(record.get("rollout_id"), str)
        and any(
            key in record for key in ("items", "item", "reward", "grades", "final_answer", "step")
        )
    )


CANONICAL = Importer(
    name="canonical",
    label="Rollscope canonical JSONL",
    detect=_detect_canonical,
    convert=None,
    example='{"run_id": "r1", "rollout_id": "a", "step": 3, "items": [...], "reward": 1.0}',
)


@cache
def importers() -> tuple[Importer, ...]:
    """Every known importer, canonical first, then the format modules of this package by name."""
    found: list[Importer] = [CANONICAL]
    package = importlib.import_module(__package__ or "trace_store.ingest")
    for module_info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        if module_info.name in {"registry", "canonical", "validate", "files"}:
            continue
        module = importlib.import_module(f"{package.__name__}.{module_info.name}")
        candidate = getattr(module, "IMPORTER", None)
        if isinstance(candidate, Importer):
            found.append(candidate)
    return tuple(found)


def get_importer(name: str) -> Importer:
    for importer in importers():
        if importer.name == name:
            return importer
    known = ", ".join(i.name for i in importers())
    raise UnknownFormatError(f"unknown format {name!r}; known formats: {known}")


def detect_format(name: str, head: bytes) -> Importer | None:
    """The first importer that claims the file, or None."""
    for importer in importers():
        try:
            if importer.detect(name, head):
                return importer
        except Exception:  # a detector must never break detection of the others
            continue
    return None


def describe_formats() -> str:
    return "; ".join(f"{i.label} ({i.name})" for i in importers())
