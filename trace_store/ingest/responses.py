"""OpenAI Responses API item lists: one conversation a line as `{input: [...], output: [...]}` (or a
`Response` object, or a bare item list) with reward fields beside it, or a JSON array of them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from ._convert import JSONDict
from ._openai import detect_kind
from .chat_completions import convert as _convert_conversations
from .registry import Importer


def detect(name: str, head: bytes) -> bool:
    return detect_kind(name, head) == "responses"


def convert(path: Path) -> Iterator[JSONDict]:
    # Items and chat messages are read by the same builder; only the detected shape differs.
    return _convert_conversations(path, source_format="responses")


IMPORTER = Importer(
    name="responses",
    label="OpenAI Responses API items",
    detect=detect,
    convert=convert,
    example='one JSON object a line: {"input": [...], "output": response.output (model_dump()), "reward": 1}',
)
