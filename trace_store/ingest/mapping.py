"""A user-defined mapping for JSONL that no importer knows: which field of each line is the rollout id,
the run, the step, the reward, the message list (chat or Responses format) and the final answer.

Paths are JSON paths in a small, strict dialect: `$.a.b[0]["key with.dots"]` (the `$.` is optional).
Mappings are saved in the store (`field_mappings`) by name. `preview` converts the first lines;
`convert` applies a mapping to a whole file (streaming); `ingest_with_mapping` imports it with the
canonical path's guarantees (one transaction, re-import a no-op, a bad line names itself).
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from ..errors import IngestError
from ._convert import (
    JSONDict,
    Where,
    as_int,
    as_number,
    as_str,
    describe,
    finish,
    iter_json_records,
    source_stem,
    text_of,
)
from ._openai import ItemBuilder

if TYPE_CHECKING:
    import duckdb

    from ..store import Store
    from .canonical import IngestResult

#: The fields a mapping can fill, in the order the UI shows them; the first two are required.
FIELDS = ("rollout_id", "messages", "run_id", "step", "reward", "final_answer", "prompt_id")
REQUIRED = ("rollout_id", "messages")
_TOKEN = re.compile(r"""\.?([A-Za-z_][\w-]*)|\[(\d+)\]|\[\s*"((?:[^"\\]|\\.)*)"\s*\]""")
Segment = str | int


class MappingError(IngestError):
    """A mapping that cannot be used (bad path syntax, a required field left out)."""

    title = "Invalid mapping"


def parse_path(text: str, field_name: str = "path") -> tuple[Segment, ...]:
    """`$.a.b[0]["x.y"]` -> ("a", "b", 0, "x.y"). Raises MappingError naming the bad character."""
    source = text.strip()
    body = source[1:] if source.startswith("$") else source
    segments: list[Segment] = []
    position = 0
    while position < len(body):
        match = _TOKEN.match(body, position)
        if match is None or match.end() == position:
            raise MappingError(
                f"`{field_name}` path {source!r} is not valid at character {position + 1 + (len(source) - len(body))}"
                ' (use names, [0] indexes and ["quoted keys"], e.g. $.meta.id)',
                field=field_name,
            )
        if match.group(1) is not None:
            segments.append(match.group(1))
        elif match.group(2) is not None:
            segments.append(int(match.group(2)))
        else:
            segments.append(json.loads(f'"{match.group(3)}"'))
        position = match.end()
    if not segments:
        raise MappingError(f"`{field_name}` path is empty", field=field_name)
    return tuple(segments)


def format_path(segments: tuple[Segment, ...]) -> str:
    out = "$"
    for segment in segments:
        if isinstance(segment, int):
            out += f"[{segment}]"
        elif re.fullmatch(r"[A-Za-z_][\w-]*", segment):
            out += f".{segment}"
        else:
            out += f"[{json.dumps(segment, ensure_ascii=False)}]"
    return out


_MISSING = object()


def lookup(record: Any, segments: tuple[Segment, ...]) -> tuple[Any, str | None]:
    """The value at `segments`, or (_MISSING, why) naming the first step that is not there."""
    value = record
    for depth, segment in enumerate(segments):
        here = format_path(segments[:depth])
        if isinstance(segment, int):
            if not isinstance(value, list):
                return _MISSING, f"{here} is not a list"
            if segment >= len(value):
                return _MISSING, f"{here} has {len(value)} elements"
            value = value[segment]
        else:
            if not isinstance(value, dict):
                return _MISSING, f"{here} is not an object"
            if segment not in value:
                return _MISSING, f"no key {segment!r} in {here}"
            value = value[segment]
    return value, None


@dataclass(frozen=True)
class FieldMapping:
    """Paths per field (None: not mapped). `run_name` names the run when no `run_id` path is given;
    `split` is 'train' or 'eval' for every line; `allow_missing` lets optional paths be absent."""

    rollout_id: str
    messages: str
    run_id: str | None = None
    step: str | None = None
    reward: str | None = None
    final_answer: str | None = None
    prompt_id: str | None = None
    run_name: str | None = None
    split: str = "train"
    allow_missing: bool = False
    parsed: dict[str, tuple[Segment, ...]] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        for name in REQUIRED:
            if not (getattr(self, name) or "").strip():
                raise MappingError(f"the mapping needs a path for `{name}`", field=name)
        if self.split not in ("train", "eval"):
            raise MappingError(f"`split` must be train or eval, got {self.split!r}", field="split")
        for name in FIELDS:
            text = getattr(self, name)
            if text is not None and text.strip():
                self.parsed[name] = parse_path(text, name)

    @classmethod
    def from_spec(cls, spec: Any) -> FieldMapping:
        if isinstance(spec, str):
            try:
                spec = json.loads(spec)
            except json.JSONDecodeError as exc:
                raise MappingError(f"the mapping is not valid JSON ({exc.msg})") from None
        if not isinstance(spec, dict):
            raise MappingError(f"a mapping is an object of field paths, got {describe(spec)}")
        known = {*FIELDS, "run_name", "split", "allow_missing"}
        unknown = sorted(set(spec) - known)
        if unknown:
            raise MappingError(
                f"unknown mapping field(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}"
            )
        paths: dict[str, str | None] = {}
        for name in (*FIELDS, "run_name"):
            value = spec.get(name)
            if value is not None and not isinstance(value, str):
                raise MappingError(
                    f"`{name}` must be a path (text), got {describe(value)}", field=name
                )
            paths[name] = value.strip() or None if isinstance(value, str) else None
        allow_missing = spec.get("allow_missing", False)
        if not isinstance(allow_missing, bool):
            raise MappingError("`allow_missing` must be true or false", field="allow_missing")
        return cls(
            rollout_id=paths["rollout_id"] or "",
            messages=paths["messages"] or "",
            run_id=paths["run_id"],
            step=paths["step"],
            reward=paths["reward"],
            final_answer=paths["final_answer"],
            prompt_id=paths["prompt_id"],
            run_name=paths["run_name"],
            split=str(spec.get("split") or "train"),
            allow_missing=allow_missing,
        )

    def to_spec(self) -> JSONDict:
        spec = asdict(self)
        spec.pop("parsed")
        return {k: v for k, v in spec.items() if v is not None and v != ""}


def _get(
    mapping: FieldMapping, record: Any, name: str, where: Where, *, required: bool = False
) -> Any:
    segments = mapping.parsed.get(name)
    if segments is None:
        return None
    value, why = lookup(record, segments)
    if value is _MISSING:
        if mapping.allow_missing and not required and name not in REQUIRED:
            return None
        shown = format_path(segments)
        record = f" of record {where.prefix}" if where.prefix else ""
        raise IngestError(
            f"`{name}` path {shown} not found{record}: {why}",
            file=where.file,
            line=where.line,
            field=shown,
        )
    return value


def _record(
    mapping: FieldMapping, value: Any, where: Where, default_run: str, mapping_name: str | None
) -> JSONDict:
    rollout_id = _get(mapping, value, "rollout_id", where, required=True)
    if rollout_id is None or isinstance(rollout_id, dict | list) or rollout_id == "":
        raise where.error(
            mapping.rollout_id,
            f"the rollout id must be text or a number, got {describe(rollout_id)}",
        )
    messages = _get(mapping, value, "messages", where, required=True)
    builder = ItemBuilder(where)
    builder.add_all(messages, mapping.messages)
    if not builder.items:
        raise where.error(mapping.messages, "the message list is empty")
    run_value = _get(mapping, value, "run_id", where)
    step = as_int(_get(mapping, value, "step", where), where, mapping.step or "step", minimum=0)
    reward = as_number(_get(mapping, value, "reward", where), where, mapping.reward or "reward")
    final = _get(mapping, value, "final_answer", where)
    prompt_id = _get(mapping, value, "prompt_id", where)
    prompt = next(
        (text_of(i.get("content")) for i in builder.items if i.get("role") == "user"), None
    )
    return finish(
        {
            "run_id": as_str(run_value) or mapping.run_name or default_run,
            "rollout_id": as_str(rollout_id),
            "step": step,
            "prompt_id": as_str(prompt_id),
            "split": mapping.split,
            "items": builder.items,
            "reward": reward,
            "final_answer": text_of(final) if final is not None else None,
            "model": builder.models[0] if builder.models else None,
            "usage": builder.usage.as_dict(),
            "metadata": {
                "source_format": "mapping",
                "mapping": mapping_name,
                "prompt_text": prompt[:200] if prompt else None,
            },
        }
    )


def _records(path: Path) -> Iterator[tuple[Where, Any]]:
    """Each record: a JSONL line, or the elements of a JSON array (one document or one line)."""
    for where, value in iter_json_records(path):
        if isinstance(value, list):
            for index, element in enumerate(value):
                yield where.sub(f"[{index}]"), element
        else:
            yield where, value


def convert(
    path: Path, mapping: FieldMapping, *, mapping_name: str | None = None, limit: int | None = None
) -> Iterator[JSONDict]:
    """Canonical rollout records from `path` (JSONL, a JSON array or one document), streaming."""
    default_run = mapping.run_name or source_stem(path)
    for count, (where, value) in enumerate(_records(path)):
        if limit is not None and count >= limit:
            return
        yield _record(mapping, value, where, default_run, mapping_name)


def preview(path: Path, mapping: FieldMapping, n: int = 5) -> list[JSONDict]:
    """The first `n` rollouts the mapping gives (raises IngestError at the first bad line)."""
    return list(convert(path, mapping, limit=n))


def preview_table(records: list[JSONDict]) -> pd.DataFrame:
    """One row a previewed rollout, for a table: ids, step, reward, counts, prompt, answer."""
    rows = []
    for r in records:
        items = r.get("items") or []
        rows.append(
            {
                "run_id": r.get("run_id"),
                "rollout_id": r.get("rollout_id"),
                "step": r.get("step"),
                "reward": r.get("reward"),
                "messages": sum(1 for i in items if i.get("type") == "message"),
                "tool_calls": sum(1 for i in items if i.get("type") == "function_call"),
                "prompt": (r.get("metadata") or {}).get("prompt_text"),
                "final_answer": r.get("final_answer"),
                "missing": ", ".join((r.get("metadata") or {}).get("missing") or []),
            }
        )
    return pd.DataFrame(rows)


_GUESSES: dict[str, tuple[str, ...]] = {
    "rollout_id": ("rollout_id", "id", "uuid", "sample_id", "custom_id", "trajectory_id"),
    "messages": ("messages", "conversation", "trajectory", "history", "items", "chat"),
    "run_id": ("run_id", "run", "experiment", "job_id"),
    "step": ("step", "global_step", "iteration", "epoch"),
    "reward": ("reward", "score", "return", "rewards"),
    "final_answer": ("final_answer", "answer", "prediction", "output", "response"),
    "prompt_id": ("prompt_id", "question_id", "task_id", "problem_id", "instance_id"),
}


def suggest(record: Any) -> dict[str, str]:
    """Paths guessed from one record's top-level keys (a starting point for the user)."""
    if not isinstance(record, dict):
        return {}
    found: dict[str, str] = {}
    for name, keys in _GUESSES.items():
        for key in keys:
            value = record.get(key)
            if value is None:
                continue
            if name == "messages" and not isinstance(value, list):
                continue
            if name in ("step", "reward") and (
                isinstance(value, bool) or not isinstance(value, int | float)
            ):
                continue
            found[name] = format_path((key,))
            break
    return found


def first_record(path: Path) -> Any:
    for _, value in _records(path):
        return value
    return None


# ---- saved mappings ---------------------------------------------------------------------------------
def save_mapping(store: Store, name: str, mapping: FieldMapping) -> None:
    name = name.strip()
    if not name:
        raise MappingError("give the mapping a name")
    spec = json.dumps(mapping.to_spec(), ensure_ascii=False)

    def write(cur: duckdb.DuckDBPyConnection) -> None:
        # Delete, then insert: DuckLake has no keys for INSERT OR REPLACE.
        cur.execute("DELETE FROM field_mappings WHERE name = ?", [name])
        cur.execute(
            "INSERT INTO field_mappings (name, spec, created_at) VALUES (?, ?, current_timestamp)",
            [name, spec],
        )

    store.write(write)


def list_mappings(store: Store) -> pd.DataFrame:
    """name, spec (JSON text), created_at; newest first."""
    return store.query_df(
        "SELECT name, spec, created_at FROM field_mappings ORDER BY created_at DESC, name"
    )


def load_mapping(store: Store, name: str) -> FieldMapping:
    cur = store.cursor()
    try:
        row = cur.execute("SELECT spec FROM field_mappings WHERE name = ?", [name]).fetchone()
    finally:
        cur.close()
    if row is None:
        raise MappingError(f"no saved mapping named {name!r}")
    return FieldMapping.from_spec(row[0])


def delete_mapping(store: Store, name: str) -> None:
    with store.transaction() as cur:
        cur.execute("DELETE FROM field_mappings WHERE name = ?", [name])


def ingest_with_mapping(
    store: Store,
    path: str | Path,
    mapping: FieldMapping,
    *,
    display_name: str | None = None,
    mapping_name: str | None = None,
) -> IngestResult:
    """Convert `path` with `mapping` and import the rollouts in one transaction. Importing the same
    file with the same mapping again changes nothing."""
    path = Path(path)
    name = display_name or path.name
    workdir = Path(tempfile.mkdtemp(prefix="rollscope-mapping-"))
    try:
        source = path
        if name != path.name and "/" not in name:
            source = workdir / "source" / name
            source.parent.mkdir()
            source.symlink_to(path.resolve())
        target = workdir / "mapped.jsonl"
        count = 0
        with target.open("w", encoding="utf-8") as out:
            for record in convert(source, mapping, mapping_name=mapping_name):
                out.write(json.dumps(record, ensure_ascii=False, allow_nan=False))
                out.write("\n")
                count += 1
        if count == 0:
            raise IngestError("the file holds no records", file=name)
        result = store.ingest_file(target, display_name=f"{name} (mapped)", format="canonical")
        result.format = f"mapping:{mapping_name}" if mapping_name else "mapping"
        return result
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
