"""OpenAI Chat Completions conversation logs: one conversation a line (a message list, or a record with
`messages` and reward fields beside it: reward/score, run_id, step, ...), or a JSON array of them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from ._convert import JSONDict, iter_json_records, source_stem
from ._openai import convert_record, detect_kind, looks_like_messages
from .registry import Importer


def detect(name: str, head: bytes) -> bool:
    return detect_kind(name, head) == "chat"


def convert(path: Path, *, source_format: str = "chat_completions") -> Iterator[JSONDict]:
    default_run = source_stem(path)
    index = 0
    for where, value in iter_json_records(path, one_record=looks_like_messages):
        if isinstance(value, list) and value and not looks_like_messages(value):
            # A one-line JSON array of records.
            for offset, element in enumerate(value):
                yield convert_record(
                    element,
                    where.sub(f"[{offset}]"),
                    index=index,
                    default_run=default_run,
                    source_format=source_format,
                )
                index += 1
            continue
        yield convert_record(
            value, where, index=index, default_run=default_run, source_format=source_format
        )
        index += 1


IMPORTER = Importer(
    name="chat_completions",
    label="OpenAI Chat Completions messages",
    detect=detect,
    convert=convert,
    example='one JSON object a line: {"messages": [...chat messages...], "reward": 1.0, "step": 3}',
)
