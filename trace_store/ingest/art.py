"""OpenPipe ART trajectory files: `{art_path}/{project}/models/{model}/trajectories/{split}/{step:04d}.parquet`
(current versions), and the older `{step:04d}.jsonl` / `{step:04d}.yaml` (trajectory groups).

Parquet (art/utils/trajectory_logging.py): one row per trajectory, columns `group_index`,
`group_metadata`, `group_metrics` (JSON text), `group_logs`, `reward`, `metrics`, `metadata`, `tools`
(JSON text), `logs`, `messages` (list of {role, content, tool_calls (JSON text), tool_call_id,
trainable}). JSONL: one group a line, `{"trajectories": [{reward, metrics, metadata,
messages_and_choices, tools, logs}]}` where a model output is a Choice (`{finish_reason, message}`);
YAML: a list of such groups.

A trajectory is a rollout: the run is the model folder, the step the file's number, the split the
split folder (`val`/`test` are eval), `sample_index` its place in its group; the prompt id is a hash
of the messages before the first model output (the same prompt in every step). Trajectory metrics
go to `metadata.metrics` (their `duration`, seconds, is the latency). ART keeps no reasoning and no
per-message timing.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..errors import IngestError
from ._convert import (
    JSONDict,
    Where,
    as_number,
    describe,
    finish,
    first_json_value,
    iter_json_records,
)
from ._openai import ItemBuilder
from .files import open_text, strip_compression_suffix
from .registry import Importer

_NAME = re.compile(r"^(\d+)\.(parquet|jsonl|ya?ml)$")
_SPLITS = {"train": "train", "val": "eval", "test": "eval", "eval": "eval"}
_MAX_LOGS = 50


def _is_group(value: Any) -> bool:
    if not isinstance(value, dict) or not isinstance(value.get("trajectories"), list):
        return False
    first = value["trajectories"][0] if value["trajectories"] else {}
    return isinstance(first, dict) and "messages_and_choices" in first


def detect(name: str, head: bytes) -> bool:
    lowered = strip_compression_suffix(name.lower())
    if not head:  # a folder: ART's own folder name
        return lowered == "trajectories"
    match = _NAME.match(lowered)
    if match is None:
        return False
    kind = match.group(2)
    if kind == "parquet":
        return head.startswith(b"PAR1")
    if kind == "jsonl":
        return _is_group(first_json_value(head))
    return b"trajectories:" in head and b"messages_and_choices" in head


def _files(path: Path) -> list[Path]:
    if not path.is_dir():
        return [path]
    found = [
        p
        for p in path.rglob("*")
        if p.is_file() and _NAME.match(strip_compression_suffix(p.name.lower()))
    ]
    return sorted(found, key=lambda p: (str(p.parent), _step_of(p), p.name))


def _step_of(path: Path) -> int:
    match = _NAME.match(strip_compression_suffix(path.name.lower()))
    return int(match.group(1)) if match else 0


def _run_of(path: Path) -> str:
    """The model folder of `.../models/{model}/trajectories/{split}/` or of a folder in it."""
    folder = path if path.is_dir() else path.parent
    parts = [folder, *folder.parents]
    for index, part in enumerate(parts):
        if part.name == "trajectories" and index + 1 < len(parts) and parts[index + 1].name:
            return parts[index + 1].name
    return folder.name or strip_compression_suffix(path.name)


def _split_of(file: Path) -> str:
    return _SPLITS.get(file.parent.name.lower(), "train")


def _json_field(value: Any, where: Where, field: str) -> Any:
    if value is None or isinstance(value, dict | list):
        return value
    if isinstance(value, str):
        if not value:
            return None
        try:
            return json.loads(value)
        except json.JSONDecodeError as exc:
            raise where.error(field, f"must be JSON text ({exc.msg})") from None
    raise where.error(field, f"must be JSON text, got {describe(value)}")


def _message(entry: Any, where: Where, field: str) -> tuple[JSONDict, bool]:
    """A chat message dict from a parquet message struct, a message or a Choice; and whether the
    model produced it."""
    if not isinstance(entry, dict):
        raise where.error(field, f"must be a message object, got {describe(entry)}")
    if "finish_reason" in entry or isinstance(entry.get("message"), dict):
        inner = entry.get("message")
        if not isinstance(inner, dict):
            raise where.error(f"{field}.message", f"must be an object, got {describe(inner)}")
        return {k: v for k, v in inner.items() if v is not None}, True
    message = {k: v for k, v in entry.items() if v is not None and k != "trainable"}
    if isinstance(message.get("tool_calls"), str):
        message["tool_calls"] = _json_field(message["tool_calls"], where, f"{field}.tool_calls")
    return message, bool(entry.get("trainable")) or message.get("role") == "assistant"


def _trajectory(
    raw: JSONDict,
    where: Where,
    *,
    run_id: str,
    step: int,
    split: str,
    file: Path,
    group_index: int,
    sample_index: int,
    group: JSONDict,
) -> JSONDict:
    messages_field = "messages" if "messages" in raw else "messages_and_choices"
    entries = raw.get(messages_field) or []
    if not isinstance(entries, list):
        raise where.error(messages_field, f"must be a list of messages, got {describe(entries)}")
    messages: list[JSONDict] = []
    prompt: list[JSONDict] = []
    answered = False
    for index, entry in enumerate(entries):
        message, from_model = _message(entry, where, f"{messages_field}[{index}]")
        messages.append(message)
        answered = answered or from_model
        if not answered:
            prompt.append(message)
    builder = ItemBuilder(where)
    builder.add_all(messages, messages_field)
    reward = as_number(raw.get("reward"), where, "reward")
    if reward is not None and not math.isfinite(reward):
        reward = None
    metrics = _json_field(raw.get("metrics"), where, "metrics") or {}
    if not isinstance(metrics, dict):
        raise where.error("metrics", f"must be an object, got {describe(metrics)}")
    duration = metrics.get("duration")
    latency_ms = float(duration) * 1000.0 if isinstance(duration, int | float) else None
    source_metadata = _json_field(raw.get("metadata"), where, "metadata")
    tools = _json_field(raw.get("tools"), where, "tools")
    logs = raw.get("logs") or []
    prompt_key = json.dumps(prompt, ensure_ascii=False, sort_keys=True, default=str)
    metadata: JSONDict = {
        "source_format": "art",
        "source_ids": {
            "file": file.name,
            "split_folder": file.parent.name,
            "group_index": group_index,
            "trajectory": sample_index,
        },
        "metrics": metrics or None,
        "art_metadata": source_metadata or None,
        "group": {k: v for k, v in group.items() if v} or None,
        "tools": [t.get("function", {}).get("name") for t in tools if isinstance(t, dict)]
        if isinstance(tools, list)
        else None,
        "logs": [str(line) for line in logs[:_MAX_LOGS]]
        if isinstance(logs, list) and logs
        else None,
    }
    return finish(
        {
            "run_id": run_id,
            "rollout_id": f"{split}-{step:04d}-g{group_index}-t{sample_index}",
            "step": step,
            "prompt_id": hashlib.sha1(prompt_key.encode()).hexdigest()[:16] if prompt else None,
            "sample_index": sample_index,
            "split": split,
            "items": builder.items,
            "reward": reward,
            "latency_ms": latency_ms,
            "metadata": {k: v for k, v in metadata.items() if v is not None},
        },
        extra_missing=["reasoning", "timing"],
    )


def _parquet(file: Path, run_id: str, step: int, split: str) -> Iterator[JSONDict]:
    import pyarrow.parquet as pq

    try:
        table = pq.ParquetFile(file)
    except Exception as exc:
        raise IngestError(f"not a readable Parquet file ({exc})", file=file.name) from None
    columns = set(table.schema_arrow.names)
    for required in ("reward", "messages"):
        if required not in columns:
            raise Where(file.name).error(required, "column is missing: not an ART trajectory file")
    counts: dict[int, int] = {}
    row_number = 0
    for batch in table.iter_batches(batch_size=512):
        for row in batch.to_pylist():
            where = Where(file.name, None, f"row {row_number}")
            group_index = row.get("group_index")
            group_index = group_index if isinstance(group_index, int) else 0
            sample_index = counts.get(group_index, 0)
            counts[group_index] = sample_index + 1
            group = {
                "metadata": _json_field(row.get("group_metadata"), where, "group_metadata"),
                "metrics": _json_field(row.get("group_metrics"), where, "group_metrics"),
                "logs": row.get("group_logs"),
            }
            yield _trajectory(
                row,
                where,
                run_id=run_id,
                step=step,
                split=split,
                file=file,
                group_index=group_index,
                sample_index=sample_index,
                group=group,
            )
            row_number += 1


def _groups(
    groups: Iterator[tuple[Where, Any]], file: Path, run_id: str, step: int, split: str
) -> Iterator[JSONDict]:
    for group_index, (where, group) in enumerate(groups):
        if not isinstance(group, dict) or not isinstance(group.get("trajectories"), list):
            raise where.error(
                "trajectories", f"must be a list of trajectories, got {describe(group)}"
            )
        extra = {k: group.get(k) for k in ("metadata", "metrics", "logs")}
        for index, trajectory in enumerate(group["trajectories"]):
            at = where.sub(f"trajectories[{index}]")
            if not isinstance(trajectory, dict):
                raise at.error("", f"must be an object, got {describe(trajectory)}")
            yield _trajectory(
                trajectory,
                at,
                run_id=run_id,
                step=step,
                split=split,
                file=file,
                group_index=group_index,
                sample_index=index,
                group=extra,
            )


def _yaml_groups(file: Path) -> Iterator[tuple[Where, Any]]:
    import yaml

    try:
        with open_text(file) as stream:
            document = yaml.safe_load(stream)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        raise IngestError(
            f"not valid YAML ({getattr(exc, 'problem', exc)})", file=file.name, line=line
        ) from None
    if not isinstance(document, list):
        raise IngestError("must be a YAML list of trajectory groups", file=file.name)
    for index, group in enumerate(document):
        yield Where(file.name, None, f"[{index}]"), group


def convert(path: Path) -> Iterator[JSONDict]:
    files = _files(path)
    if not files:
        raise IngestError(
            "the folder holds no ART trajectory files (0000.parquet, ...)", file=path.name
        )
    run_id = _run_of(path)
    for file in files:
        step, split = _step_of(file), _split_of(file)
        kind = strip_compression_suffix(file.name.lower()).rsplit(".", 1)[-1]
        if kind == "parquet":
            yield from _parquet(file, run_id, step, split)
        elif kind == "jsonl":
            yield from _groups(iter_json_records(file), file, run_id, step, split)
        else:
            yield from _groups(_yaml_groups(file), file, run_id, step, split)


IMPORTER = Importer(
    name="art",
    label="OpenPipe ART trajectories",
    detect=detect,
    convert=convert,
    example="`await model.log(groups, split='train')` writes .art/<project>/models/<model>/trajectories/train/0007.parquet; import the trajectories/ folder",
)
