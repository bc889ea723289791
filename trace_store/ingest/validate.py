"""The slow, exact path: find the first bad line of a canonical file and say what is wrong with it.

Only run after the fast DuckDB reader rejected a file, so a Python loop per line is fine here.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..errors import IngestError
from ..limits import line_too_long, max_line_bytes
from .files import open_binary

_ITEM_TYPES = {
    "reasoning",
    "message",
    "function_call",
    "function_call_output",
    "custom_tool_call",
    "custom_tool_call_output",
}
SPLITS = ("train", "eval")
STATUSES = ("ok", "error", "timeout")


def _describe(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 60 else text[:57] + "..."


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_time(value: Any) -> bool:
    if _is_number(value):
        return True
    if not isinstance(value, str):
        return False
    from datetime import datetime

    try:
        datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return False
    return True


def _check_item(item: Any, where: str) -> Iterator[tuple[str, str]]:
    if not isinstance(item, dict):
        yield where, f"must be an object, got {_describe(item)}"
        return
    kind = item.get("type")
    if not isinstance(kind, str):
        yield f"{where}.type", f"is required and must be a string, got {_describe(kind)}"
        return
    for field in ("duration_ms",):
        if field in item and item[field] is not None and not _is_number(item[field]):
            yield f"{where}.{field}", f"must be a number, got {_describe(item[field])}"
    if "tokens" in item and item["tokens"] is not None and not _is_int(item["tokens"]):
        yield f"{where}.tokens", f"must be an integer, got {_describe(item['tokens'])}"
    if "started_at" in item and item["started_at"] is not None and not _is_time(item["started_at"]):
        yield (
            f"{where}.started_at",
            f"must be an RFC 3339 time or epoch milliseconds, got {_describe(item['started_at'])}",
        )
    if kind == "message":
        content = item.get("content")
        if content is not None and not isinstance(content, str | list):
            yield (
                f"{where}.content",
                f"must be a string or a list of parts, got {_describe(content)}",
            )
    for field in ("call_id", "name", "role"):
        value = item.get(field)
        if value is not None and not isinstance(value, str):
            yield f"{where}.{field}", f"must be a string, got {_describe(value)}"
    if "seq" in item and item["seq"] is not None and not _is_int(item["seq"]):
        yield f"{where}.seq", f"must be an integer, got {_describe(item['seq'])}"


def check_record(record: Any) -> Iterator[tuple[str, str]]:
    """Yield (field, problem) for each problem of one canonical line."""
    if not isinstance(record, dict):
        yield "", f"each line must be a JSON object, got {_describe(record)}"
        return
    for field in ("run_id", "rollout_id"):
        value = record.get(field)
        if not isinstance(value, str) or not value:
            yield field, f"is required and must be a non-empty string, got {_describe(value)}"
    step = record.get("step")
    if step is not None and (not _is_int(step) or step < 0):
        yield "step", f"must be an integer >= 0, got {_describe(step)}"
    sample = record.get("sample_index")
    if sample is not None and not _is_int(sample):
        yield "sample_index", f"must be an integer, got {_describe(sample)}"
    for field, allowed in (("split", SPLITS), ("status", STATUSES)):
        value = record.get(field)
        if value is not None and value not in allowed:
            yield field, f"must be one of {', '.join(allowed)}, got {_describe(value)}"
    for field in ("reward", "latency_ms"):
        value = record.get(field)
        if value is not None and not _is_number(value):
            yield field, f"must be a number, got {_describe(value)}"
    for field in ("prompt_id", "final_answer", "reference", "run_name", "run_kind", "model"):
        value = record.get(field)
        if value is not None and not isinstance(value, str):
            yield field, f"must be a string, got {_describe(value)}"
    for field in ("started_at", "ended_at"):
        value = record.get(field)
        if value is not None and not _is_time(value):
            yield field, f"must be an RFC 3339 time or epoch milliseconds, got {_describe(value)}"
    usage = record.get("usage")
    if usage is not None:
        if not isinstance(usage, dict):
            yield "usage", f"must be an object, got {_describe(usage)}"
        else:
            for key in ("input_tokens", "output_tokens", "reasoning_tokens"):
                if usage.get(key) is not None and not _is_int(usage[key]):
                    yield f"usage.{key}", f"must be an integer, got {_describe(usage[key])}"
    metadata = record.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        yield "metadata", f"must be an object, got {_describe(metadata)}"
    yield from _check_grades(record.get("grades"))
    items = record.get("items")
    if items is not None:
        if not isinstance(items, list):
            yield "items", f"must be a list of items, got {_describe(items)}"
        else:
            for index, item in enumerate(items):
                yield from _check_item(item, f"items[{index}]")
    if "item" in record:
        if items is not None:
            yield (
                "item",
                "a line carries either `items` (a whole rollout) or `item` (one event), not both",
            )
        yield from _check_item(record["item"], "item")
    seq = record.get("seq")
    if seq is not None and not _is_int(seq):
        yield "seq", f"must be an integer, got {_describe(seq)}"


def _check_grades(grades: Any) -> Iterator[tuple[str, str]]:
    if grades is None:
        return
    if isinstance(grades, dict):
        for name, score in grades.items():
            if score is not None and not _is_number(score):
                yield f"grades.{name}", f"must be a number, got {_describe(score)}"
        return
    if not isinstance(grades, list):
        yield "grades", f"must be an object or a list, got {_describe(grades)}"
        return
    for index, grade in enumerate(grades):
        where = f"grades[{index}]"
        if not isinstance(grade, dict):
            yield where, f"must be an object with name and score, got {_describe(grade)}"
            continue
        if not isinstance(grade.get("name"), str):
            yield (
                f"{where}.name",
                f"is required and must be a string, got {_describe(grade.get('name'))}",
            )
        for key in ("score", "weight"):
            if grade.get(key) is not None and not _is_number(grade[key]):
                yield f"{where}.{key}", f"must be a number, got {_describe(grade[key])}"
        explanation = grade.get("explanation")
        if explanation is not None and not isinstance(explanation, str):
            yield f"{where}.explanation", f"must be a string, got {_describe(explanation)}"


def _decode(raw: bytes, display_name: str, number: int) -> str | IngestError:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        hint = ""
        if number == 1 and raw.startswith((b"\xff\xfe", b"\xfe\xff")):
            hint = "; it looks like UTF-16: save it as UTF-8"
        return IngestError(
            f"not valid UTF-8 ({exc.reason} at column {exc.start + 1}){hint}",
            file=display_name,
            line=number,
        )


def first_problem(path: Path, display_name: str) -> IngestError | None:
    """Scan the file line by line; return an error for the first bad line, or None."""
    limit = max_line_bytes()
    with open_binary(path) as stream:
        number = 0
        while raw := stream.readline(limit + 1):
            number += 1
            if len(raw) > limit and not raw.endswith(b"\n"):
                return line_too_long(display_name, number)
            line = _decode(raw, display_name, number)
            if isinstance(line, IngestError):
                return line
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                return IngestError(
                    f"not valid JSON ({exc.msg} at column {exc.colno})",
                    file=display_name,
                    line=number,
                )
            except RecursionError:
                return IngestError(
                    "JSON nested too deeply to read (thousands of levels of [ or {)",
                    file=display_name,
                    line=number,
                )
            for field, problem in check_record(record):
                message = f"`{field}` {problem}" if field else problem
                return IngestError(message, file=display_name, line=number, field=field or None)
    return None


def physical_line(path: Path, record_number: int) -> int:
    """Map the n-th JSON record (1-based, blank lines skipped) to its line number in the file."""
    seen = 0
    with open_binary(path) as lines:
        for number, line in enumerate(lines, start=1):
            if line.strip():
                seen += 1
                if seen == record_number:
                    return number
    return record_number
