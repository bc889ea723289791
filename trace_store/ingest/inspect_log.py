"""Inspect AI eval logs (`.eval` zip and `.json`) -> one rollout per sample and epoch.

Read with the `inspect_ai` package when it is installed (the `inspect` extra: it knows every log
version, expands condensed events and attachments); otherwise with a reader of our own: stdlib
`zipfile`, plus `zstandard` for the zstd members (ZIP method 93) that Inspect writes since 0.3.206,
and `attachment://` references resolved from the sample's `attachments`.

Messages become items; tool events give each call's start and duration (by tool call id), model
events the assistant turns' duration and tokens; scores become grades (C/I/P/N as 1/0/0.5/0, a dict
score one grade per key); the first scorer's value is the reward.
"""

from __future__ import annotations

import json
import re
import struct
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..errors import IngestError
from ..limits import check_zip_member
from ._convert import (
    JSONDict,
    Where,
    as_str,
    describe,
    finish,
    iso,
    load_json_document,
    mapping,
    millis_between,
    text_of,
)
from .files import strip_compression_suffix
from .registry import Importer

_ZSTD_METHOD = 93
_LETTER_SCORES = {"C": 1.0, "I": 0.0, "P": 0.5, "N": 0.0}
_WORD_SCORES = {"yes": 1.0, "no": 0.0, "true": 1.0, "false": 0.0, "correct": 1.0, "incorrect": 0.0}


def detect(name: str, head: bytes) -> bool:
    lowered = strip_compression_suffix(name.lower())
    if lowered.endswith(".eval"):
        return head.startswith(b"PK")
    if not lowered.endswith(".json") or not head.lstrip().startswith(b"{"):
        return False
    text = head[:8192]
    return b'"eval"' in text and (b'"plan"' in text or b'"version"' in text) and b'"task"' in text


# ---- reading ----------------------------------------------------------------------------------------
def _with_inspect_ai(path: Path) -> tuple[JSONDict, Iterator[JSONDict]] | None:
    try:
        from inspect_ai.log import read_eval_log, read_eval_log_samples
    except ImportError:
        return None
    if not zipfile.is_zipfile(path):
        # A .json log is one document: read it whole (the sample streamer skips some older ones).
        log = read_eval_log(str(path), resolve_attachments=True)
        header = log.model_dump(mode="json", exclude_none=True, exclude={"samples"})
        loaded = [s.model_dump(mode="json", exclude_none=True) for s in log.samples or []]
        return header, iter(loaded)
    header = read_eval_log(str(path), header_only=True).model_dump(mode="json", exclude_none=True)

    def samples() -> Iterator[JSONDict]:
        for sample in read_eval_log_samples(
            str(path), all_samples_required=False, resolve_attachments=True
        ):
            yield sample.model_dump(mode="json", exclude_none=True)

    return header, samples()


def _read_member(archive: zipfile.ZipFile, handle: Any, info: zipfile.ZipInfo) -> bytes:
    if info.compress_type != _ZSTD_METHOD:
        return archive.read(info)
    import zstandard

    handle.seek(info.header_offset)
    local = handle.read(30)
    if local[:4] != b"PK\x03\x04":
        raise zipfile.BadZipFile(f"bad local header for {info.filename}")
    name_length, extra_length = struct.unpack("<HH", local[26:30])
    handle.seek(info.header_offset + 30 + name_length + extra_length)
    compressed = handle.read(info.compress_size)
    with zstandard.ZstdDecompressor().stream_reader(compressed) as reader:
        # Never more than the member declares (checked against the limits before reading).
        data: bytes = reader.read(info.file_size + 1)
    if len(data) > info.file_size:
        raise zipfile.BadZipFile(f"{info.filename} is larger than its zip entry declares")
    return data


def _sample_order(name: str) -> tuple[int, str, int]:
    match = re.fullmatch(r"samples/(.+)_epoch_(\d+)\.json", name)
    if not match:
        return (1, name, 0)
    return (0, match.group(1).zfill(12), int(match.group(2)))


def _own_eval_reader(path: Path) -> tuple[JSONDict, Iterator[JSONDict]]:
    archive = zipfile.ZipFile(path)
    handle = path.open("rb")
    names = {info.filename: info for info in archive.infolist()}

    def member(name: str) -> Any:
        try:
            return json.loads(_read_member(archive, handle, names[name]))
        except (ValueError, zipfile.BadZipFile) as exc:
            raise IngestError(
                f"member {name} is not readable JSON ({exc})", file=path.name
            ) from None

    if "header.json" in names:
        header = member("header.json")
    elif "_journal/start.json" in names:  # a log still being written, or cut short
        header = member("_journal/start.json")
    else:
        raise IngestError("not an Inspect .eval log: no header.json in the zip", file=path.name)
    sample_names = sorted((n for n in names if n.startswith("samples/")), key=_sample_order)

    def samples() -> Iterator[JSONDict]:
        try:
            for name in sample_names:
                yield _resolve(member(name))
        finally:
            handle.close()
            archive.close()

    return header, samples()


def _resolve(sample: Any) -> Any:
    attachments = sample.get("attachments") if isinstance(sample, dict) else None
    if not attachments:
        return sample

    def walk(value: Any) -> Any:
        if isinstance(value, str) and value.startswith("attachment://"):
            return attachments.get(value[len("attachment://") :], value)
        if isinstance(value, list):
            return [walk(v) for v in value]
        if isinstance(value, dict):
            return {k: walk(v) for k, v in value.items() if k != "attachments"}
        return value

    resolved: JSONDict = walk(sample)
    return resolved


def _own_json_reader(path: Path) -> tuple[JSONDict, Iterator[JSONDict]]:
    document = load_json_document(path)
    if not isinstance(document, dict) or not isinstance(document.get("eval"), dict):
        raise Where(path.name).error("eval", "is missing: not an Inspect eval log")
    samples = document.pop("samples", None) or []
    if not isinstance(samples, list):
        raise Where(path.name).error("samples", f"must be a list, got {describe(samples)}")
    return document, (_resolve(s) for s in samples)


def _check_sizes(path: Path) -> None:
    """Refuse a zip bomb before any member is decompressed (by the sizes the zip declares;
    both readers stop at a member's declared size)."""
    try:
        with zipfile.ZipFile(path) as archive:
            infos = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError):
        return  # the reader below reports the damaged zip
    for info in infos:
        check_zip_member(path.name, info.filename, info.file_size, info.compress_size)


def read_log(path: Path, *, use_inspect_ai: bool = True) -> tuple[JSONDict, Iterator[JSONDict]]:
    """The log's header (eval spec, results, stats) and its samples as plain dicts, streamed."""
    is_zip = zipfile.is_zipfile(path)
    if is_zip:
        _check_sizes(path)
    try:
        if use_inspect_ai:
            found = _with_inspect_ai(path)
            if found is not None:
                return found
        return _own_eval_reader(path) if is_zip else _own_json_reader(path)
    except IngestError:
        raise
    except Exception as exc:  # inspect_ai and zipfile raise many kinds; say which file and why
        raise IngestError(
            f"not a readable Inspect log ({type(exc).__name__}: {exc})", file=path.name
        ) from None


# ---- converting -------------------------------------------------------------------------------------
def score_value(value: Any) -> float | None:
    """Inspect's value_to_float: numbers, bools, C/I/P/N, yes/no, numeric strings."""
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        text = value.strip()
        if text in _LETTER_SCORES:
            return _LETTER_SCORES[text]
        if text.lower() in _WORD_SCORES:
            return _WORD_SCORES[text.lower()]
        try:
            return float(text)
        except ValueError:
            return None
    return None


def _grades(scores: Any) -> tuple[list[JSONDict], float | None]:
    grades: list[JSONDict] = []
    reward: float | None = None
    if not isinstance(scores, dict):
        return grades, reward
    for scorer, score in scores.items():
        if not isinstance(score, dict):
            continue
        value = score.get("value")
        explanation = as_str(score.get("explanation"))
        if isinstance(value, dict):
            parts = [(f"{scorer}/{key}", score_value(v)) for key, v in value.items()]
            numbers = [v for _, v in parts if v is not None]
            for name, number in parts:
                if number is not None:
                    grades.append({"name": name, "score": number})
            first = sum(numbers) / len(numbers) if numbers else None
        else:
            first = score_value(value)
            if first is not None:
                grade: JSONDict = {"name": str(scorer), "score": first}
                if explanation:
                    grade["explanation"] = explanation
                grades.append(grade)
        if reward is None:
            reward = first
    return grades, reward


def _content_items(content: Any, role: str) -> tuple[list[JSONDict], str]:
    """Reasoning items and the text of an Inspect message's content."""
    if isinstance(content, str) or content is None:
        return [], content or ""
    reasoning: list[JSONDict] = []
    texts: list[str] = []
    for part in content if isinstance(content, list) else [content]:
        if isinstance(part, dict) and part.get("type") == "reasoning":
            text = part.get("reasoning") or ""
            if part.get("redacted"):
                text = part.get("summary") or "[redacted reasoning]"
            item: JSONDict = {"type": "reasoning", "text": text}
            if part.get("summary") and not part.get("redacted"):
                item["summary"] = [{"text": part["summary"]}]
            reasoning.append(item)
        else:
            texts.append(text_of([part]))
    return reasoning, "\n".join(t for t in texts if t)


def _timings(events: Any) -> tuple[dict[str, JSONDict], list[JSONDict]]:
    tools: dict[str, JSONDict] = {}
    models: list[JSONDict] = []
    if not isinstance(events, list):
        return tools, models
    for event in events:
        if not isinstance(event, dict):
            continue
        kind = event.get("event")
        if kind == "tool" and event.get("id"):
            duration = millis_between(event.get("timestamp"), event.get("completed"))
            if duration is None and isinstance(event.get("working_time"), int | float):
                duration = float(event["working_time"]) * 1000.0
            error = event.get("error")
            tools[str(event["id"])] = {
                "started_at": iso(event.get("timestamp")),
                "duration_ms": duration,
                "error": text_of(error.get("message")) if isinstance(error, dict) else None,
            }
        elif kind == "model":
            output = mapping(event.get("output"))
            choices = output.get("choices") or []
            message = choices[0].get("message") if choices and isinstance(choices[0], dict) else {}
            usage = mapping(output.get("usage"))
            seconds = output.get("time")
            models.append(
                {
                    "message_id": (message or {}).get("id"),
                    "started_at": iso(event.get("timestamp")),
                    "duration_ms": float(seconds) * 1000.0
                    if isinstance(seconds, int | float)
                    else millis_between(event.get("timestamp"), event.get("completed")),
                    "tokens": usage.get("output_tokens")
                    if isinstance(usage.get("output_tokens"), int)
                    else None,
                }
            )
    return tools, models


def _items(sample: JSONDict, where: Where) -> list[JSONDict]:
    messages = sample.get("messages") or []
    if not isinstance(messages, list):
        raise where.error("messages", f"must be a list, got {describe(messages)}")
    tools, models = _timings(sample.get("events"))
    by_id = {m["message_id"]: m for m in models if m.get("message_id")}
    assistants = [m for m in messages if isinstance(m, dict) and m.get("role") == "assistant"]
    by_order = len(assistants) == len(models)
    items: list[JSONDict] = []
    turn = 0
    for index, message in enumerate(messages):
        at = f"messages[{index}]"
        if not isinstance(message, dict):
            raise where.error(at, f"must be an object, got {describe(message)}")
        role = message.get("role")
        if not isinstance(role, str):
            raise where.error(f"{at}.role", f"is required, got {describe(role)}")
        reasoning, text = _content_items(message.get("content"), role)
        if role == "assistant":
            timing = by_id.get(message.get("id")) or (models[turn] if by_order else None)
            turn += 1
            produced = [*reasoning]
            calls = message.get("tool_calls") or []
            if text or not calls:
                produced.append({"type": "message", "role": "assistant", "content": text})
            for c_index, call in enumerate(calls):
                if not isinstance(call, dict) or not isinstance(call.get("function"), str):
                    raise where.error(
                        f"{at}.tool_calls[{c_index}].function", "is required and must be a string"
                    )
                call_id = as_str(call.get("id")) or f"{at}_call_{c_index}"
                arguments = call.get("arguments")
                item: JSONDict = {
                    "type": "function_call",
                    "call_id": call_id,
                    "name": call["function"],
                    "arguments": arguments
                    if isinstance(arguments, str)
                    else json.dumps(arguments or {}, ensure_ascii=False),
                }
                started = (tools.get(call_id) or {}).get("started_at")
                if started:
                    item["started_at"] = started
                produced.append(item)
            if timing and produced:
                first = produced[0]
                if timing.get("started_at") and first["type"] != "function_call":
                    first["started_at"] = timing["started_at"]
                if first["type"] != "function_call":
                    for key in ("duration_ms", "tokens"):
                        if timing.get(key) is not None:
                            first[key] = timing[key]
            items.extend(produced)
        elif role == "tool":
            call_id = as_str(message.get("tool_call_id")) or ""
            timing = tools.get(call_id, {})
            error = message.get("error")
            out: JSONDict = {"type": "function_call_output", "call_id": call_id, "output": text}
            if isinstance(error, dict):
                out["error"] = text_of(error.get("message")) or as_str(error.get("type")) or "error"
            elif timing.get("error"):
                out["error"] = timing["error"]
            for key in ("started_at", "duration_ms"):
                if timing.get(key) is not None:
                    out[key] = timing[key]
            items.extend(reasoning)
            items.append(out)
        else:
            items.extend(reasoning)
            items.append({"type": "message", "role": role, "content": text})
    return items


def _usage(model_usage: Any) -> JSONDict | None:
    if not isinstance(model_usage, dict) or not model_usage:
        return None
    total = {"input_tokens": 0, "output_tokens": 0, "reasoning_tokens": 0}
    for usage in model_usage.values():
        if isinstance(usage, dict):
            for key in total:
                value = usage.get(key)
                if isinstance(value, int) and not isinstance(value, bool):
                    total[key] += value
    return total


def sample_record(header: JSONDict, sample: JSONDict, file_name: str, index: int = 0) -> JSONDict:
    spec = mapping(header.get("eval"))
    sample_id = as_str(sample.get("id"))
    raw_epoch = sample.get("epoch")
    epoch = raw_epoch if isinstance(raw_epoch, int) else 1
    rollout_id = f"{sample_id}_epoch_{epoch}"
    where = Where(file_name, None, f"samples[{index}]")
    grades, reward = _grades(sample.get("scores"))
    output = mapping(sample.get("output"))
    target = sample.get("target")
    reference = "\n".join(str(t) for t in target) if isinstance(target, list) else as_str(target)
    status = "ok"
    if sample.get("error"):
        status = "error"
    elif sample.get("limit"):
        status = "timeout"
    total_time = sample.get("total_time")
    metadata: JSONDict = {
        "source_format": "inspect",
        "source_ids": {
            k: v
            for k, v in {
                "sample_id": sample_id,
                "epoch": epoch,
                "uuid": sample.get("uuid"),
                "eval_id": spec.get("eval_id"),
                "task_id": spec.get("task_id"),
            }.items()
            if v is not None
        },
        "task": spec.get("task"),
    }
    if isinstance(sample.get("metadata"), dict) and sample["metadata"]:
        metadata["sample_metadata"] = sample["metadata"]
    if sample.get("error"):
        error = sample["error"]
        metadata["error"] = (
            text_of(error.get("message")) if isinstance(error, dict) else text_of(error)
        )
    if sample.get("limit"):
        metadata["limit"] = sample["limit"]
    return finish(
        {
            "run_id": as_str(spec.get("run_id"))
            or as_str(spec.get("eval_id"))
            or Path(file_name).stem,
            "run_name": as_str(spec.get("task")),
            "run_kind": "eval",
            "model": as_str(spec.get("model")),
            "rollout_id": rollout_id,
            "prompt_id": sample_id,
            "sample_index": epoch - 1,
            "split": "eval",
            "items": _items(sample, where),
            "reward": reward,
            "grades": grades or None,
            "final_answer": as_str(output.get("completion")) or None,
            "reference": reference,
            "status": status,
            "started_at": iso(sample.get("started_at")),
            "ended_at": iso(sample.get("completed_at")),
            "latency_ms": float(total_time) * 1000.0
            if isinstance(total_time, int | float)
            else None,
            "usage": _usage(sample.get("model_usage")),
            "metadata": metadata,
        },
        extra_missing=[],
    )


def convert(path: Path, *, use_inspect_ai: bool = True) -> Iterator[JSONDict]:
    header, samples = read_log(path, use_inspect_ai=use_inspect_ai)
    count = 0
    try:
        for sample in samples:
            if not isinstance(sample, dict):
                raise Where(path.name).error(
                    "samples", f"must hold objects, got {describe(sample)}"
                )
            yield sample_record(header, sample, path.name, count)
            count += 1
    except IngestError:
        raise
    except Exception as exc:
        raise IngestError(
            f"sample {count + 1} is not readable ({type(exc).__name__}: {exc})", file=path.name
        ) from None
    if count == 0:
        raise IngestError(
            "the log holds no samples (was it written with --no-log-samples?)", file=path.name
        )


IMPORTER = Importer(
    name="inspect",
    label="Inspect AI eval log (.eval, .json)",
    detect=detect,
    convert=convert,
    example="`inspect eval task.py --model openai/gpt-4o` writes logs/<time>_<task>_<id>.eval",
)
