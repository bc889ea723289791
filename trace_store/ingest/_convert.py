"""Shared helpers of the format importers: reading JSON/JSONL sources, naming where a problem is,
turning message content into text, and normalizing times and ids.

Every importer is a pure converter (file -> canonical rollout dicts); nothing here touches the store.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from ..errors import IngestError
from ..limits import line_too_long, max_line_bytes
from .files import open_text, strip_compression_suffix

JSONDict = dict[str, Any]


@dataclass(frozen=True)
class Where:
    """A place in a source file: the file's name, a line (JSONL) and a field prefix (JSON arrays)."""

    file: str
    line: int | None = None
    prefix: str = ""

    def field(self, name: str) -> str:
        if not self.prefix:
            return name
        if not name:
            return self.prefix
        return f"{self.prefix}{name}" if name.startswith("[") else f"{self.prefix}.{name}"

    def error(self, field: str, message: str) -> IngestError:
        full = self.field(field)
        text = f"`{full}` {message}" if full else message
        return IngestError(text, file=self.file, line=self.line, field=full or None)

    def sub(self, prefix: str) -> Where:
        return Where(self.file, self.line, self.field(prefix))


def describe(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def source_stem(path: Path) -> str:
    """The file name without its compression and format suffixes, e.g. `run7` for run7.jsonl.gz."""
    name = strip_compression_suffix(path.name)
    for suffix in (".traj.json", ".jsonl", ".json", ".ndjson", ".traj", ".eval", ".parquet"):
        if name.lower().endswith(suffix):
            return name[: -len(suffix)] or name
    return name


def iter_json_records(
    path: Path, *, one_record: Callable[[list[Any]], bool] | None = None
) -> Iterator[tuple[Where, Any]]:
    """Yield each top-level record of a JSONL file, a JSON array, or a single JSON document.

    JSONL is streamed line by line, each line's value as it is. A JSON array or a document spread over
    several lines is loaded whole (the tools that write them hold them in memory too); an array's
    elements are the records, unless `one_record(array)` says the array is itself one record.
    """
    name = path.name
    with open_text(path) as stream:
        first_line = ""
        first_number = 0
        try:
            for number, line in _bounded_lines(stream, name, 1):
                if line.strip():
                    first_line, first_number = line, number
                    break
            else:
                return
            stripped = first_line.lstrip()
            try:
                first = json.loads(first_line)
                whole = False
            except json.JSONDecodeError as exc:
                if not stripped.startswith(("{", "[")):
                    raise IngestError(
                        f"not valid JSON ({exc.msg} at column {exc.colno})",
                        file=name,
                        line=first_number,
                    ) from None
                whole = True
            if whole:
                rest = stream.read()
                text = "\n" * (first_number - 1) + first_line + rest
                try:
                    document = json.loads(text)
                except json.JSONDecodeError as exc:
                    raise IngestError(
                        f"not valid JSON ({exc.msg} at column {exc.colno})",
                        file=name,
                        line=exc.lineno,
                    ) from None
                yield from _whole_document(name, document, one_record)
                return
            yield Where(name, first_number), first
            for number, line in _bounded_lines(stream, name, first_number + 1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise IngestError(
                        f"not valid JSON ({exc.msg} at column {exc.colno})", file=name, line=number
                    ) from None
                yield Where(name, number), record
        except UnicodeDecodeError as exc:
            raise IngestError(f"not valid UTF-8 ({exc.reason})", file=name) from None


def _bounded_lines(stream: IO[str], name: str, start: int) -> Iterator[tuple[int, str]]:
    """(number, line) from `stream`, refusing a line longer than the limit before it fills memory."""
    limit = max_line_bytes()
    number = start
    while line := stream.readline(limit + 1):
        if len(line) > limit and not line.endswith("\n"):
            raise line_too_long(name, number)
        yield number, line
        number += 1


def _whole_document(
    name: str, document: Any, one_record: Callable[[list[Any]], bool] | None
) -> Iterator[tuple[Where, Any]]:
    if isinstance(document, list) and not (one_record and one_record(document)):
        for index, element in enumerate(document):
            yield Where(name, None, f"[{index}]"), element
    else:
        yield Where(name, None, ""), document


def load_json_document(path: Path) -> Any:
    """Load a whole JSON document, naming the line of a syntax error."""
    try:
        with open_text(path) as stream:
            return json.load(stream)
    except json.JSONDecodeError as exc:
        raise IngestError(
            f"not valid JSON ({exc.msg} at column {exc.colno})", file=path.name, line=exc.lineno
        ) from None
    except UnicodeDecodeError as exc:
        raise IngestError(f"not valid UTF-8 ({exc.reason})", file=path.name) from None


def first_json_value(head: bytes) -> Any:
    """The first JSON record in the first bytes of a file (a JSONL line, an array's first element, or the
    document), or None when it cannot be parsed from the head alone."""
    try:
        text = head.decode("utf-8", errors="ignore").lstrip("\ufeff \t\r\n")
    except Exception:
        return None
    if not text:
        return None
    decoder = json.JSONDecoder()
    try:
        value, _ = decoder.raw_decode(text)
        return value
    except json.JSONDecodeError:
        pass
    if text.startswith("["):
        body = text[1:].lstrip()
        try:
            value, _ = decoder.raw_decode(body)
            return [value]
        except json.JSONDecodeError:
            return None
    return None


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def as_number(value: Any, where: Where, field: str) -> float | None:
    """A finite number, or None when absent; bools count as 1/0; a numeric string is accepted."""
    if value is None:
        return None
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if is_number(value):
        return float(value)
    if isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            number = math.nan
        if math.isfinite(number):
            return number
    raise where.error(field, f"must be a number, got {describe(value)}")


def as_int(value: Any, where: Where, field: str, *, minimum: int | None = None) -> int | None:
    if value is None:
        return None
    result: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        result = value
    elif isinstance(value, float) and value.is_integer():
        result = int(value)
    elif isinstance(value, str) and re.fullmatch(r"-?\d+", value.strip()):
        result = int(value.strip())
    if result is None or (minimum is not None and result < minimum):
        bound = f" >= {minimum}" if minimum is not None else ""
        raise where.error(field, f"must be an integer{bound}, got {describe(value)}")
    return result


def as_str(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return json.dumps(value, ensure_ascii=False, default=str)


def text_of(content: Any) -> str:
    """Message content as plain text: a string, or a list of parts (text, refusal, images as markers)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        content = [content]
    if not isinstance(content, list):
        return json.dumps(content, ensure_ascii=False, default=str)
    texts: list[str] = []
    for part in content:
        if isinstance(part, str):
            texts.append(part)
            continue
        if not isinstance(part, dict):
            texts.append(json.dumps(part, ensure_ascii=False, default=str))
            continue
        kind = str(part.get("type", ""))
        for key in ("text", "refusal", "content", "reasoning", "output"):
            value = part.get(key)
            if isinstance(value, str):
                texts.append(value)
                break
        else:
            if "image" in kind:
                texts.append("[image]")
            elif "audio" in kind:
                texts.append("[audio]")
            elif kind:
                texts.append(f"[{kind}]")
    return "\n".join(texts)


def iso_from_seconds(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, tz=UTC).isoformat().replace("+00:00", "Z")


def iso_from_nanos(nanos: int) -> str:
    seconds, rest = divmod(nanos, 1_000_000_000)
    stamp = datetime.fromtimestamp(seconds, tz=UTC).replace(microsecond=rest // 1000)
    return stamp.isoformat().replace("+00:00", "Z")


def parse_time(value: Any) -> datetime | None:
    """A datetime from RFC 3339 text or epoch seconds/milliseconds/nanoseconds; None when unreadable."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        number = float(value)
        if not math.isfinite(number):
            return None
        if number > 1e17:
            number /= 1e9
        elif number > 1e11:
            number /= 1e3
        return datetime.fromtimestamp(number, tz=UTC)
    if isinstance(value, str):
        text = value.strip()
        if re.fullmatch(r"\d+(\.\d+)?", text):
            return parse_time(float(text))
        try:
            stamp = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            return None
        return stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)
    return None


def iso(value: Any) -> str | None:
    stamp = parse_time(value)
    if stamp is None:
        return None
    return stamp.astimezone(UTC).isoformat().replace("+00:00", "Z")


def millis_between(start: Any, end: Any) -> float | None:
    a, b = parse_time(start), parse_time(end)
    if a is None or b is None:
        return None
    return max(0.0, (b - a).total_seconds() * 1000.0)


def arguments_text(value: Any, where: Where, field: str) -> str:
    """Tool-call arguments as JSON text, as the canonical format stores them."""
    if value is None:
        return "{}"
    if isinstance(value, str):
        return value
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False)
    raise where.error(field, f"must be a JSON string or an object, got {describe(value)}")


def drop_none(record: JSONDict) -> JSONDict:
    return {k: v for k, v in record.items() if v is not None}


def missing_fields(record: JSONDict) -> list[str]:
    """What the source lacked that the screens use, for `metadata.missing`."""
    missing = []
    if record.get("reward") is None and not record.get("grades"):
        missing.append("reward")
    if record.get("step") is None:
        missing.append("step")
    return missing


def finish(record: JSONDict, extra_missing: list[str] | None = None) -> JSONDict:
    """Drop empty fields and note in metadata.missing what the source did not have."""
    record = drop_none(record)
    metadata = dict(record.get("metadata") or {})
    missing = [*missing_fields(record), *(extra_missing or [])]
    if missing:
        metadata["missing"] = sorted(set(missing), key=missing.index)
    if metadata:
        record["metadata"] = metadata
    return record


def run_from_layout(path: Path) -> str:
    """The run a per-instance trajectory file belongs to: agent harnesses write
    `<run>/<instance>/<instance>.traj` or `<run>/<instance>.traj`; a lone file names its own run."""
    stem = source_stem(path)
    parent = path.parent
    if parent.name == stem and parent.parent.name:
        return parent.parent.name
    return parent.name or stem


def mapping(value: Any) -> JSONDict:
    """`value` if it is an object, else an empty one (for optional nested fields)."""
    return value if isinstance(value, dict) else {}
