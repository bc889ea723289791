"""SWE-agent trajectories (`<instance>.traj`): v1 files with `history[].tool_calls` and
`trajectory[].execution_time`, and legacy 0.x files without them. One file is one rollout: the
instance id (the file's stem) is the rollout id, the run is the folder the harness wrote it into."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ._convert import (
    JSONDict,
    Where,
    as_number,
    as_str,
    describe,
    finish,
    load_json_document,
    run_from_layout,
    source_stem,
    text_of,
)
from ._openai import ItemBuilder
from .files import strip_compression_suffix
from .registry import Importer


def detect(name: str, head: bytes) -> bool:
    lowered = strip_compression_suffix(name.lower())
    if not head.lstrip().startswith(b"{") or b'"trajectory_format"' in head:
        return False
    if lowered.endswith(".traj"):
        return b'"trajectory"' in head or b'"history"' in head or b'"environment"' in head
    return lowered.endswith(".json") and b'"trajectory"' in head and b'"environment"' in head


def status_of(exit_status: str | None) -> str | None:
    if not exit_status:
        return None
    lowered = exit_status.lower()
    if lowered.startswith("submitted") and "(" not in lowered:
        return "ok"
    if any(k in lowered for k in ("cost", "context", "timeout", "time", "limit", "step")):
        return "timeout"
    if lowered.startswith("submitted"):
        return "ok"
    return "error"


def _replay_model(replay: Any) -> str | None:
    if isinstance(replay, str):
        try:
            replay = json.loads(replay)
        except ValueError:
            return None
    if not isinstance(replay, dict):
        return None
    agent = replay.get("agent") or {}
    model = (agent.get("model") or {}) if isinstance(agent, dict) else {}
    name = model.get("name") if isinstance(model, dict) else None
    if name is None:
        name = replay.get("model_name")
    return as_str(name)


def _assistant_turns(history: list[Any]) -> list[JSONDict]:
    return [
        h
        for h in history
        if isinstance(h, dict) and h.get("role") == "assistant" and not h.get("is_demo")
    ]


def convert(path: Path) -> Iterator[JSONDict]:
    document = load_json_document(path)
    where = Where(path.name)
    if not isinstance(document, dict):
        raise where.error(
            "", f"a SWE-agent trajectory must be a JSON object, got {describe(document)}"
        )
    trajectory = document.get("trajectory")
    if not isinstance(trajectory, list):
        raise where.error("trajectory", f"must be a list of steps, got {describe(trajectory)}")
    history = document.get("history") or []
    if not isinstance(history, list):
        raise where.error("history", f"must be a list of messages, got {describe(history)}")
    info = document.get("info") or {}
    if not isinstance(info, dict):
        raise where.error("info", f"must be an object, got {describe(info)}")
    stem = source_stem(path)
    builder = ItemBuilder(where, id_prefix=f"{stem}_step")

    # The prompt: everything before the agent's first own action (system prompt, demonstrations, issue).
    for index, message in enumerate(history):
        if not isinstance(message, dict):
            raise where.error(f"history[{index}]", f"must be an object, got {describe(message)}")
        if message.get("role") == "assistant" and not message.get("is_demo"):
            break
        role = as_str(message.get("role")) or "user"
        builder.items.append(
            {"type": "message", "role": role, "content": text_of(message.get("content"))}
        )

    actions = _assistant_turns(history)
    for index, step in enumerate(trajectory):
        at = f"trajectory[{index}]"
        if not isinstance(step, dict):
            raise where.error(at, f"must be an object, got {describe(step)}")
        thought = as_str(step.get("thought"))
        if thought is None:
            thought = as_str(step.get("response")) or ""
        action = as_str(step.get("action")) or ""
        observation = step.get("observation")
        seconds = as_number(step.get("execution_time"), where, f"{at}.execution_time")
        if thought.strip():
            builder.items.append({"type": "message", "role": "assistant", "content": thought})
        turn = actions[index] if index < len(actions) else {}
        calls = turn.get("tool_calls") if isinstance(turn.get("tool_calls"), list) else []
        first_call: str | None = None
        for c_index, call in enumerate(calls or []):
            function = call.get("function") if isinstance(call, dict) else None
            if not isinstance(function, dict) or not isinstance(function.get("name"), str):
                raise where.error(
                    f"history[assistant {index}].tool_calls[{c_index}].function.name",
                    "is required and must be a string",
                )
            args = function.get("arguments")
            args_text = (
                args if isinstance(args, str) else json.dumps(args or {}, ensure_ascii=False)
            )
            item = builder.add_call(as_str(call.get("id")), function["name"], args_text)
            first_call = first_call or item["call_id"]
        if first_call is None and action.strip():
            name = action.strip().split()[0]
            args_text = json.dumps({"command": action.rstrip("\n")}, ensure_ascii=False)
            first_call = builder.add_call(None, name, args_text)["call_id"]
        if first_call is not None:
            extra: JSONDict = {}
            if seconds is not None:
                extra["duration_ms"] = seconds * 1000.0
            builder.add_output(first_call, text_of(observation), extra=extra)
        elif observation:
            builder.items.append(
                {"type": "message", "role": "user", "content": text_of(observation)}
            )

    stats = info.get("model_stats") or {}
    if not isinstance(stats, dict):
        stats = {}
    exit_status = as_str(info.get("exit_status"))
    usage = None
    sent, received = stats.get("tokens_sent"), stats.get("tokens_received")
    if isinstance(sent, int) and isinstance(received, int) and (sent or received):
        usage = {"input_tokens": sent, "output_tokens": received, "reasoning_tokens": 0}
    metadata: JSONDict = {
        "source_format": "swe_agent",
        "source_ids": {"instance_id": stem, "file": path.name},
        "exit_status": exit_status,
        "format_version": "v1"
        if any("message_type" in h for h in history if isinstance(h, dict))
        else "legacy",
    }
    for key in ("instance_cost", "api_calls"):
        if stats.get(key) is not None:
            metadata[key] = stats[key]
    for key in ("swe_agent_version", "swe_rex_version"):
        if info.get(key):
            metadata[key] = info[key]
    if isinstance(document.get("environment"), str):
        metadata["environment"] = document["environment"]
    yield finish(
        {
            "run_id": run_from_layout(path),
            "rollout_id": stem,
            "prompt_id": stem,
            "split": "eval",
            "items": builder.items,
            "final_answer": as_str(info.get("submission")),
            "status": status_of(exit_status),
            "usage": usage,
            "model": _replay_model(document.get("replay_config")),
            "metadata": {k: v for k, v in metadata.items() if v is not None},
            "run_kind": "eval",
        }
    )


IMPORTER = Importer(
    name="swe_agent",
    label="SWE-agent trajectory (.traj)",
    detect=detect,
    convert=convert,
    example="`sweagent run ...` writes trajectories/<user>/<run>/<instance>/<instance>.traj",
)
