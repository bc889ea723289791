"""TRL GRPO logged completions (`log_completions=True`): `{output_dir}/completions/completions_{step:05d}.parquet`
with columns `step, prompt, completion, <one column per reward function>, <extra logged columns>,
advantage`. A folder of them imports as one run (named after the training output folder).

Each row is one rollout: the prompt (text, or a list of chat messages) and the completion. Every
numeric column other than `step` and `advantage` is a reward function's score and becomes a grade;
the reward is their sum (TRL's default reward weights are 1; custom `reward_weights` are not logged,
which `metadata.missing` notes as `reward_weights`).
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
from ._convert import JSONDict, Where, as_int, as_str, describe, finish, text_of
from ._openai import ItemBuilder
from .registry import Importer

_NAME = re.compile(r"completions_(\d+)\.parquet$")
_NOT_GRADES = {"step", "advantage", "prompt", "completion"}


def detect(name: str, head: bytes) -> bool:
    if not head:
        return name.lower() == "completions"
    return bool(_NAME.search(name.lower())) and head.startswith(b"PAR1")


def _files(path: Path) -> list[Path]:
    if not path.is_dir():
        return [path]
    found = [p for p in path.rglob("*.parquet") if p.is_file()]

    def order(p: Path) -> tuple[int, str]:
        match = _NAME.search(p.name)
        return (int(match.group(1)), p.name) if match else (1 << 62, p.name)

    return sorted(found, key=order)


def _items(value: Any, role: str, where: Where, field: str) -> list[JSONDict]:
    if isinstance(value, str):
        return [{"type": "message", "role": role, "content": value}]
    if isinstance(value, list | tuple):
        builder = ItemBuilder(where)
        builder.add_all([dict(m) if isinstance(m, dict) else m for m in value], field)
        return builder.items
    if value is None:
        return []
    raise where.error(field, f"must be text or a list of chat messages, got {describe(value)}")


def convert(path: Path) -> Iterator[JSONDict]:
    import pyarrow.parquet as pq

    files = _files(path)
    if not files:
        raise Where(path.name).error("", "the folder holds no completions_*.parquet files")
    if path.is_dir():
        run_id = path.parent.name if path.name == "completions" and path.parent.name else path.name
    else:
        parent = path.parent
        run_id = (
            parent.parent.name
            if parent.name == "completions" and parent.parent.name
            else parent.name
        )
    for file in files:
        try:
            table = pq.ParquetFile(file)
        except Exception as exc:
            raise IngestError(f"not a readable Parquet file ({exc})", file=file.name) from None
        columns = set(table.schema_arrow.names)
        for required in ("prompt", "completion"):
            if required not in columns:
                raise Where(file.name).error(
                    required, "column is missing: not a TRL completions file"
                )
        match = _NAME.search(file.name)
        file_step = int(match.group(1)) if match else None
        seen: dict[tuple[int | None, str], int] = {}
        row_number = 0
        for batch in table.iter_batches(batch_size=1024):
            for row in batch.to_pylist():
                where = Where(file.name, None, f"row {row_number}")
                step = as_int(row.get("step"), where, "step", minimum=0)
                step = file_step if step is None else step
                prompt_items = _items(row.get("prompt"), "user", where, "prompt")
                completion_items = _items(row.get("completion"), "assistant", where, "completion")
                prompt_text = next(
                    (text_of(i.get("content")) for i in prompt_items if i.get("role") == "user"), ""
                )
                prompt_id = hashlib.sha1(
                    json.dumps(row.get("prompt"), ensure_ascii=False, default=str).encode()
                ).hexdigest()[:16]
                key = (step, prompt_id)
                sample_index = seen.get(key, 0)
                seen[key] = sample_index + 1
                grades: dict[str, float] = {}
                extras: JSONDict = {}
                for name, value in row.items():
                    if name in _NOT_GRADES:
                        continue
                    if isinstance(value, int | float) and not isinstance(value, bool):
                        if math.isfinite(value):
                            grades[name] = float(value)
                    elif value is not None:
                        extras[name] = value if isinstance(value, str | bool) else as_str(value)
                metadata: JSONDict = {
                    "source_format": "trl",
                    "source_ids": {"file": file.name, "row": row_number},
                    "prompt_text": prompt_text[:200] if prompt_text else None,
                }
                advantage = row.get("advantage")
                if isinstance(advantage, int | float) and math.isfinite(advantage):
                    metadata["advantage"] = float(advantage)
                if extras:
                    metadata["extra"] = extras
                yield finish(
                    {
                        "run_id": run_id,
                        "rollout_id": f"{file.stem}-{row_number:06d}",
                        "step": step,
                        "prompt_id": prompt_id,
                        "sample_index": sample_index,
                        "split": "train",
                        "items": prompt_items + completion_items,
                        "reward": sum(grades.values()) if grades else None,
                        "grades": grades or None,
                        "metadata": {k: v for k, v in metadata.items() if v is not None},
                    },
                    extra_missing=["reward_weights"] if len(grades) > 1 else [],
                )
                row_number += 1


IMPORTER = Importer(
    name="trl",
    label="TRL GRPO completions (Parquet)",
    detect=detect,
    convert=convert,
    example="GRPOConfig(log_completions=True, output_dir='out') writes out/completions/completions_00010.parquet",
)
