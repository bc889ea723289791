"""mini-swe-agent trajectories (`<instance>.traj.json`): the `mini-swe-agent-1.1` format
(`{info, messages, trajectory_format}`, messages with `extra`: actions, timestamps, return codes; a
final `exit` message) including tool-calling models (chat `tool_calls` or raw Responses objects), and
the old format, a bare list of chat messages with commands in ```bash blocks."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ._convert import (
    JSONDict,
    Where,
    as_str,
    describe,
    finish,
    iso,
    load_json_document,
    millis_between,
    run_from_layout,
    source_stem,
    text_of,
)
from ._openai import ItemBuilder
from .files import strip_compression_suffix
from .registry import Importer

_COMMAND = re.compile(r"```(?:mswea_bash_command|bash)\s*\n(.*?)\n```", re.DOTALL)


def detect(name: str, head: bytes) -> bool:
    lowered = strip_compression_suffix(name.lower())
    start = head.lstrip()[:1]
    if start not in (b"{", b"["):
        return False
    if b'"trajectory_format": "mini-swe-agent' in head or b'"mini_version"' in head:
        return True
    return lowered.endswith(".traj.json") and b'"role"' in head and b'"trajectory"' not in head


def status_of(exit_status: str | None) -> str | None:
    if not exit_status:
        return None
    lowered = exit_status.lower()
    if lowered == "submitted":
        return "ok"
    if "limit" in lowered or "timeout" in lowered:
        return "timeout"
    return "error"


def _mapping(value: Any) -> JSONDict:
    return value if isinstance(value, dict) else {}


def _extra(message: JSONDict) -> JSONDict:
    extra = message.get("extra")
    return extra if isinstance(extra, dict) else {}


def _stamp(message: JSONDict) -> Any:
    return _extra(message).get("timestamp")


def convert(path: Path) -> Iterator[JSONDict]:
    document = load_json_document(path)
    where = Where(path.name)
    info: JSONDict = {}
    if isinstance(document, list):
        messages: Any = document
        field = ""
    elif isinstance(document, dict):
        messages = document.get("messages")
        raw_info = document.get("info")
        info = raw_info if isinstance(raw_info, dict) else {}
        field = "messages"
    else:
        raise where.error(
            "", f"a mini-swe-agent trajectory is an object or a list, got {describe(document)}"
        )
    if not isinstance(messages, list):
        raise where.error(
            field or "messages", f"must be a list of messages, got {describe(messages)}"
        )

    stem = source_stem(path)
    builder = ItemBuilder(where, id_prefix=f"{stem}_action")
    waiting: list[
        tuple[str, Any]
    ] = []  # text-based calls waiting for their observation: (call_id, timestamp)
    exit_status = as_str(info.get("exit_status"))
    submission = as_str(info.get("submission"))
    for index, message in enumerate(messages):
        at = f"{field}[{index}]" if field else f"[{index}]"
        if not isinstance(message, dict):
            raise where.error(at, f"must be an object, got {describe(message)}")
        extra = _extra(message)
        role = message.get("role")
        started = iso(_stamp(message))
        if role == "exit":
            exit_status = exit_status or as_str(extra.get("exit_status"))
            submission = (
                submission or as_str(extra.get("submission")) or text_of(message.get("content"))
            )
            continue
        tool_calling = (
            "tool_calls" in message
            or role == "tool"
            or "type" in message
            or message.get("object") == "response"
        )
        if tool_calling:
            before = len(builder.items)
            builder.add(message, at)
            for item in builder.items[before:]:
                if started and item["type"] != "function_call_output":
                    item.setdefault("started_at", started)
            if role == "tool" and builder.items[before:]:
                _observation_fields(builder.items[-1], message, None)
            continue
        if role == "assistant":
            builder.add(message, at)
            if started:
                builder.items[-1].setdefault("started_at", started)
            actions = extra.get("actions")
            commands: list[tuple[str | None, str]] = []
            if isinstance(actions, list):
                for action in actions:
                    if isinstance(action, dict) and isinstance(action.get("command"), str):
                        commands.append((as_str(action.get("tool_call_id")), action["command"]))
            else:
                found = _COMMAND.findall(text_of(message.get("content")))
                if (
                    len(found) == 1
                ):  # mini-swe-agent runs exactly one block; otherwise a format error
                    commands.append((None, found[0].strip()))
            waiting = []
            for call_id, command in commands:
                call = builder.add_call(
                    call_id,
                    "bash",
                    json.dumps({"command": command}, ensure_ascii=False),
                    {"started_at": started},
                )
                waiting.append((call["call_id"], _stamp(message)))
            continue
        if waiting and role == "user":
            call_id, call_stamp = waiting.pop(0)
            item = builder.add_output(
                call_id, message.get("content"), extra={"started_at": started}
            )
            _observation_fields(item, message, call_stamp)
            continue
        builder.add(message, at)
        if started:
            builder.items[-1].setdefault("started_at", started)

    if not submission and builder.items and builder.items[-1]["type"] == "function_call_output":
        calls = {i["call_id"]: i for i in builder.items if i["type"] == "function_call"}
        last_call = calls.get(builder.items[-1]["call_id"], {})
        if "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT" in str(last_call.get("arguments", "")):
            submission = text_of(
                builder.items[-1]["output"]
            )  # old files: the submit command's output
    stats = _mapping(info.get("model_stats"))
    model_config = _mapping(_mapping(info.get("config")).get("model"))
    metadata: JSONDict = {
        "source_format": "mini_swe_agent",
        "source_ids": {"instance_id": stem, "file": path.name},
        "trajectory_format": as_str(document.get("trajectory_format"))
        if isinstance(document, dict)
        else "legacy-list",
        "exit_status": exit_status,
        "mini_version": as_str(info.get("mini_version")),
        "instance_cost": stats.get("instance_cost"),
        "api_calls": stats.get("api_calls"),
    }
    stamps = [_stamp(m) for m in messages if isinstance(m, dict) and _stamp(m) is not None]
    yield finish(
        {
            "run_id": run_from_layout(path),
            "rollout_id": stem,
            "prompt_id": stem,
            "split": "eval",
            "items": builder.items,
            "final_answer": submission or None,
            "status": status_of(exit_status),
            "started_at": iso(stamps[0]) if stamps else None,
            "ended_at": iso(stamps[-1]) if stamps else None,
            "model": as_str(model_config.get("model_name"))
            or (builder.models[-1] if builder.models else None),
            "usage": builder.usage.as_dict(),
            "metadata": {k: v for k, v in metadata.items() if v is not None},
            "run_kind": "eval",
        }
    )


def _observation_fields(item: JSONDict, message: JSONDict, call_stamp: Any) -> None:
    """Duration (call -> observation timestamps) and errors (timeouts, exceptions) of one result."""
    extra = _extra(message)
    if call_stamp is not None and "duration_ms" not in item:
        duration = millis_between(call_stamp, extra.get("timestamp"))
        if duration is not None:
            item["duration_ms"] = duration
    exception = extra.get("exception_info")
    if exception:
        item["error"] = text_of(exception)
    elif "timed out and has been killed" in text_of(message.get("content")):
        item["error"] = "command timed out"


IMPORTER = Importer(
    name="mini_swe_agent",
    label="mini-swe-agent trajectory (.traj.json)",
    detect=detect,
    convert=convert,
    example="`mini -t TASK -o run/task.traj.json` or `mini-extra swebench --output run/` (one .traj.json per instance)",
)
