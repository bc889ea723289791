"""ATIF, the Agent Trajectory Interchange Format (Harbor, `docs/rfcs/0001-trajectory-format.md`, v1.0-v1.7):
`{schema_version: "ATIF-v1.x", session_id?, trajectory_id?, agent{name, version, model_name?,
tool_definitions?, extra?}, steps[], notes?, final_metrics?{total_prompt_tokens, total_completion_tokens,
total_cached_tokens, total_cost_usd, total_steps, extra}, extra?, subagent_trajectories?}`.

A step: `{step_id, timestamp?, source: system|user|agent, model_name?, message: str | [ContentPart],
reasoning_content?, tool_calls?[{tool_call_id, function_name, arguments{}}], observation?{results[
{source_call_id?, content?, subagent_trajectory_ref?}]}, metrics?{prompt_tokens, completion_tokens,
cached_tokens, cost_usd, extra}, extra?, is_copied_context?}`.

One trajectory is one rollout (a `.json` file, or one a line in `.jsonl`). Items in step order: the
system/user messages, then per agent step its reasoning, its message, its tool calls and their
observation results (joined by `source_call_id`; a result without one is an environment message).
Timestamps give each item's start and the rollout's span; per-step token metrics are summed.
ATIF has no reward: it is read from `extra.reward` (or `final_metrics.extra.reward`), else from a
Harbor trial's verifier output beside the file (`<trial>/agent/trajectory.json` with
`<trial>/verifier/reward.txt` or `reward.json`). The run is the Harbor job folder (`<job>/<trial>/agent/`)
or the file's folder; the rollout id the trial folder, `trajectory_id` or `session_id`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ._convert import (
    JSONDict,
    Where,
    as_int,
    as_number,
    as_str,
    describe,
    finish,
    iso,
    iter_json_records,
    mapping,
    millis_between,
    source_stem,
    text_of,
)
from .files import head_bytes, strip_compression_suffix
from .registry import Importer

_SOURCES = {"system", "user", "agent"}


def detect(name: str, head: bytes) -> bool:
    lowered = strip_compression_suffix(name.lower())
    if not lowered.endswith((".json", ".jsonl")):
        return False
    start = head[:8192]
    return b'"ATIF-v' in start and b'"steps"' in head and b'"schema_version"' in start


def _harbor_layout(path: Path) -> tuple[str | None, str | None]:
    """(run, trial) of `<job>/<trial>/agent/trajectory.json`, else (None, None)."""
    if path.parent.name == "agent" and path.parent.parent.name:
        trial = path.parent.parent
        return (trial.parent.name or None), trial.name
    return None, None


def _verifier_reward(path: Path) -> tuple[float | None, dict[str, float]]:
    """Harbor's verifier output beside a trial's trajectory: reward.txt (one number) or
    reward.json (name -> number)."""
    if path.parent.name != "agent":
        return None, {}
    verifier = path.parent.parent / "verifier"
    text_file, json_file = verifier / "reward.txt", verifier / "reward.json"
    try:
        if json_file.is_file():
            data = json.loads(json_file.read_text(encoding="utf-8"))
            if isinstance(data, dict):
                grades = {
                    str(k): float(v)
                    for k, v in data.items()
                    if isinstance(v, int | float) and not isinstance(v, bool)
                }
                reward = grades.get("reward")
                if reward is None and grades:
                    reward = sum(grades.values()) / len(grades)
                return reward, grades
            if isinstance(data, int | float) and not isinstance(data, bool):
                return float(data), {}
        if text_file.is_file():
            return float(text_file.read_text(encoding="utf-8").strip()), {}
    except (OSError, ValueError):
        return None, {}
    return None, {}


def _arguments(value: Any, where: Where, field: str) -> str:
    if value is None:
        return "{}"
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, str):
        return value
    raise where.error(field, f"must be an object of arguments, got {describe(value)}")


def _convert_one(value: Any, where: Where, path: Path, *, index: int, default_run: str) -> JSONDict:
    if not isinstance(value, dict):
        raise where.error("", f"must be an ATIF trajectory object, got {describe(value)}")
    version = value.get("schema_version")
    if not isinstance(version, str) or not version.upper().startswith("ATIF"):
        raise where.error(
            "schema_version", f'must name an ATIF version ("ATIF-v1.6"), got {describe(version)}'
        )
    steps = value.get("steps")
    if not isinstance(steps, list):
        raise where.error("steps", f"must be a list of steps, got {describe(steps)}")
    agent = mapping(value.get("agent"))
    items: list[JSONDict] = []
    stamps: list[str] = []
    tokens = {"input_tokens": 0, "output_tokens": 0, "reasoning_tokens": 0}
    seen_tokens = False
    cost = 0.0
    models: list[str] = []
    final_answer: str | None = None
    prompt_done = False
    for number, step in enumerate(steps):
        field = f"steps[{number}]"
        if not isinstance(step, dict):
            raise where.error(field, f"must be an object, got {describe(step)}")
        as_int(step.get("step_id"), where, f"{field}.step_id", minimum=0)
        source = step.get("source")
        if not isinstance(source, str) or source not in _SOURCES:
            raise where.error(
                f"{field}.source", f"must be system, user or agent, got {describe(source)}"
            )
        started = iso(step.get("timestamp"))
        if step.get("timestamp") is not None and started is None:
            raise where.error(
                f"{field}.timestamp",
                f"must be an ISO 8601 time, got {describe(step.get('timestamp'))}",
            )
        if started:
            stamps.append(started)
        timing = {"started_at": started} if started else {}
        message = text_of(step.get("message"))
        if source != "agent":
            role = "system" if source == "system" else "user"
            if message or role == "user":
                items.append({"type": "message", "role": role, "content": message, **timing})
        else:
            prompt_done = True
            model = as_str(step.get("model_name"))
            if model and model not in models:
                models.append(model)
            metrics = mapping(step.get("metrics"))
            completion = as_int(
                metrics.get("completion_tokens"),
                where,
                f"{field}.metrics.completion_tokens",
                minimum=0,
            )
            prompt_tokens = as_int(
                metrics.get("prompt_tokens"), where, f"{field}.metrics.prompt_tokens", minimum=0
            )
            reasoning_tokens = as_int(
                mapping(metrics.get("extra")).get("reasoning_tokens"),
                where,
                f"{field}.metrics.extra.reasoning_tokens",
                minimum=0,
            )
            for key, count in (
                ("input_tokens", prompt_tokens),
                ("output_tokens", completion),
                ("reasoning_tokens", reasoning_tokens),
            ):
                if count is not None:
                    tokens[key] += count
                    seen_tokens = True
            cost += as_number(metrics.get("cost_usd"), where, f"{field}.metrics.cost_usd") or 0.0
            reasoning = step.get("reasoning_content")
            if isinstance(reasoning, str) and reasoning:
                items.append({"type": "reasoning", "text": reasoning, **timing})
            if message:
                item: JSONDict = {
                    "type": "message",
                    "role": "assistant",
                    "content": message,
                    **timing,
                }
                if completion is not None:
                    item["tokens"] = completion
                items.append(item)
                final_answer = message
            calls = step.get("tool_calls") or []
            if not isinstance(calls, list):
                raise where.error(f"{field}.tool_calls", f"must be a list, got {describe(calls)}")
            for call_number, call in enumerate(calls):
                at = f"{field}.tool_calls[{call_number}]"
                if not isinstance(call, dict):
                    raise where.error(at, f"must be an object, got {describe(call)}")
                name = call.get("function_name")
                if not isinstance(name, str) or not name:
                    raise where.error(
                        f"{at}.function_name", f"must name the tool, got {describe(name)}"
                    )
                call_id = as_str(call.get("tool_call_id")) or f"step{number}-call{call_number}"
                items.append(
                    {
                        "type": "function_call",
                        "call_id": call_id,
                        "name": name,
                        "arguments": _arguments(call.get("arguments"), where, f"{at}.arguments"),
                        **timing,
                    }
                )
        observation = step.get("observation")
        if observation is None:
            continue
        results = mapping(observation).get("results")
        if not isinstance(results, list):
            raise where.error(
                f"{field}.observation.results", f"must be a list, got {describe(results)}"
            )
        for result_number, result in enumerate(results):
            at = f"{field}.observation.results[{result_number}]"
            if not isinstance(result, dict):
                raise where.error(at, f"must be an object, got {describe(result)}")
            content = text_of(result.get("content"))
            refs = result.get("subagent_trajectory_ref") or []
            if not content and isinstance(refs, list) and refs:
                names = [
                    as_str(mapping(r).get("trajectory_id") or mapping(r).get("trajectory_path"))
                    or "?"
                    for r in refs
                ]
                content = "[subagent trajectory: " + ", ".join(names) + "]"
            answered = as_str(result.get("source_call_id"))
            if answered:
                items.append(
                    {"type": "function_call_output", "call_id": answered, "output": content}
                )
            else:
                items.append(
                    {
                        "type": "message",
                        "role": "user" if prompt_done else "system",
                        "content": content,
                    }
                )
    final_metrics = mapping(value.get("final_metrics"))
    extra = mapping(value.get("extra"))
    reward = as_number(extra.get("reward"), where, "extra.reward")
    if reward is None:
        reward = as_number(
            mapping(final_metrics.get("extra")).get("reward"), where, "final_metrics.extra.reward"
        )
    grades: dict[str, float] = {}
    if reward is None:
        reward, grades = _verifier_reward(path)
    total_in = as_int(
        final_metrics.get("total_prompt_tokens"),
        where,
        "final_metrics.total_prompt_tokens",
        minimum=0,
    )
    total_out = as_int(
        final_metrics.get("total_completion_tokens"),
        where,
        "final_metrics.total_completion_tokens",
        minimum=0,
    )
    if total_in is not None or total_out is not None:
        tokens["input_tokens"] = total_in if total_in is not None else tokens["input_tokens"]
        tokens["output_tokens"] = total_out if total_out is not None else tokens["output_tokens"]
        seen_tokens = True
    total_cost = as_number(
        final_metrics.get("total_cost_usd"), where, "final_metrics.total_cost_usd"
    )
    job, trial = _harbor_layout(path)
    rollout_id = (
        trial
        or as_str(value.get("trajectory_id"))
        or as_str(value.get("session_id"))
        or (source_stem(path) if index == 0 else f"{source_stem(path)}-{index}")
    )
    if trial and index:
        rollout_id = f"{trial}-{index}"
    subagents = value.get("subagent_trajectories")
    metadata: JSONDict = {
        "source_format": "atif",
        "schema_version": version,
        "source_ids": {
            k: v
            for k, v in {
                "session_id": as_str(value.get("session_id")),
                "trajectory_id": as_str(value.get("trajectory_id")),
                "file": path.name,
            }.items()
            if v
        },
        "agent": {k: agent.get(k) for k in ("name", "version") if agent.get(k) is not None} or None,
        "cost_usd": total_cost if total_cost is not None else (cost or None),
        "notes": as_str(value.get("notes")),
        "subagent_trajectories": len(subagents)
        if isinstance(subagents, list) and subagents
        else None,
        "continued_trajectory_ref": as_str(value.get("continued_trajectory_ref")),
    }
    return finish(
        {
            "run_id": job or default_run,
            "rollout_id": rollout_id,
            "prompt_id": trial,
            "items": items,
            "reward": reward,
            "grades": grades or None,
            "final_answer": final_answer,
            "started_at": stamps[0] if stamps else None,
            "ended_at": stamps[-1] if stamps else None,
            "latency_ms": millis_between(stamps[0], stamps[-1]) if len(stamps) > 1 else None,
            "model": as_str(agent.get("model_name")) or (models[0] if models else None),
            "usage": tokens if seen_tokens else None,
            "metadata": {k: v for k, v in metadata.items() if v is not None},
        }
    )


def convert(path: Path) -> Iterator[JSONDict]:
    job, _ = _harbor_layout(path)
    default_run = job or path.parent.name or source_stem(path)
    for index, (where, value) in enumerate(iter_json_records(path)):
        yield _convert_one(value, where, path, index=index, default_run=default_run)


def convert_folder(path: Path) -> Iterator[JSONDict]:
    """A Harbor job folder: every `<trial>/agent/trajectory.json` in it."""
    if not path.is_dir():
        yield from convert(path)
        return
    files = sorted(p for p in path.rglob("*.json") if p.is_file() and detect(p.name, head_bytes(p)))
    if not files:
        raise Where(path.name).error("", "the folder holds no ATIF trajectory files")
    for file in files:
        yield from convert(file)


IMPORTER = Importer(
    name="atif",
    label="ATIF agent trajectories (Harbor)",
    detect=detect,
    convert=convert_folder,
    example="`harbor run ...` writes jobs/<job>/<trial>/agent/trajectory.json; `rollscope import --format atif jobs/<job>`",
)
