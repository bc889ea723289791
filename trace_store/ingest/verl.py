"""verl rollout dumps (`trainer.rollout_data_dir` / `validation_data_dir`): one `{step}.jsonl` a step,
one line a sample: `{input, output, gts, score, step, <reward_extra_info keys>}`. A folder of them
imports as one run (named after the folder); a lone file too (named after its folder).

The prompt and response are decoded text (tool calls are inline chat-template text), so a rollout is
a user message and an assistant message; `score` is the reward, `gts` the reference, the extra keys
(acc, pred, ...) go to `metadata.extra`. Samples of one prompt in one step get `sample_index` 0..n-1.
"""

from __future__ import annotations

import hashlib
import re
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
    first_json_value,
    iter_json_records,
)
from .files import strip_compression_suffix
from .registry import Importer

_KNOWN = {"input", "output", "gts", "score", "step", "request_id"}


def _is_verl_record(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and isinstance(value.get("input"), str)
        and isinstance(value.get("output"), str)
        and "score" in value
        and "run_id" not in value
    )


def detect(name: str, head: bytes) -> bool:
    if not head:  # a folder: judged by its name only
        return bool(re.search(r"rollout|generation|validation", name.lower()))
    if not strip_compression_suffix(name.lower()).endswith(".jsonl"):
        return False
    return _is_verl_record(first_json_value(head))


def _files(path: Path) -> list[Path]:
    if not path.is_dir():
        return [path]

    def order(p: Path) -> tuple[int, str]:
        stem = strip_compression_suffix(p.name).removesuffix(".jsonl")
        return (int(stem), "") if stem.isdigit() else (1 << 62, p.name)

    return sorted(
        (
            p
            for p in path.rglob("*")
            if p.is_file() and ".jsonl" in p.name and not p.name.startswith(".")
        ),
        key=order,
    )


def convert(path: Path) -> Iterator[JSONDict]:
    files = _files(path)
    if not files:
        raise Where(path.name).error("", "the folder holds no .jsonl rollout files")
    run_id = path.name if path.is_dir() else (path.parent.name or path.stem)
    split = "eval" if re.search(r"val|eval|test", run_id.lower()) else "train"
    for file in files:
        stem = strip_compression_suffix(file.name).removesuffix(".jsonl")
        file_step = int(stem) if stem.isdigit() else None
        seen: dict[tuple[int | None, str], int] = {}
        for index, (where, record) in enumerate(iter_json_records(file)):
            if not _is_verl_record(record):
                raise where.error(
                    "",
                    f"a verl rollout line needs string `input` and `output` and a `score`, got {describe(record)}",
                )
            step = as_int(record.get("step"), where, "step", minimum=0)
            if step is None:
                step = file_step
            prompt = record["input"]
            prompt_id = hashlib.sha1(prompt.encode("utf-8")).hexdigest()[:16]
            key = (step, prompt_id)
            sample_index = seen.get(key, 0)
            seen[key] = sample_index + 1
            gts = record.get("gts")
            extras = {k: v for k, v in record.items() if k not in _KNOWN}
            metadata: JSONDict = {
                "source_format": "verl",
                "source_ids": {"file": file.name, "line": where.line},
            }
            if extras:
                metadata["extra"] = extras
            yield finish(
                {
                    "run_id": run_id,
                    "rollout_id": f"{stem}-{index:06d}",
                    "step": step,
                    "prompt_id": prompt_id,
                    "sample_index": sample_index,
                    "split": split,
                    "items": [
                        {"type": "message", "role": "user", "content": prompt},
                        {"type": "message", "role": "assistant", "content": record["output"]},
                    ],
                    "reward": as_number(record.get("score"), where, "score"),
                    "reference": as_str(gts) if gts is not None else None,
                    "final_answer": record["output"],
                    "metadata": metadata,
                }
            )


IMPORTER = Importer(
    name="verl",
    label="verl rollout dump (rollout_data_dir)",
    detect=detect,
    convert=convert,
    example="`trainer.rollout_data_dir=./rollouts` in verl's PPO/GRPO config (one {step}.jsonl a step)",
)
