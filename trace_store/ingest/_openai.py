"""OpenAI message shapes -> canonical items, shared by the Chat Completions, Responses, mini-swe-agent
and OTLP importers.

Accepts, in one list and mixed: Chat Completions messages (`tool_calls`, `tool` messages, legacy
`function_call`/`function` messages, provider `reasoning_content`), Responses API items (`message`,
`reasoning`, `function_call(_output)`, `custom_tool_call(_output)`, the hosted tool calls) and whole
`Response` objects (their `output` items). A call is joined to its output by `call_id`; an output that
names no call id is joined to the oldest call still waiting for one.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._convert import (
    JSONDict,
    Where,
    arguments_text,
    as_int,
    as_str,
    describe,
    first_json_value,
    iter_json_records,
    text_of,
)
from .files import strip_compression_suffix

# Responses API hosted-tool items that have no separate output item: (name, argument keys, output keys).
_HOSTED_CALLS: dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]] = {
    "web_search_call": ("web_search", ("action",), ("results",)),
    "file_search_call": ("file_search", ("queries",), ("results",)),
    "code_interpreter_call": ("code_interpreter", ("code", "container_id"), ("outputs",)),
    "image_generation_call": ("image_generation", ("revised_prompt",), ()),
    "mcp_call": ("", ("arguments",), ("output",)),
    "local_shell_call": ("local_shell", ("action",), ()),
    "shell_call": ("shell", ("action",), ()),
    "apply_patch_call": ("apply_patch", ("operation",), ()),
    "computer_call": ("computer", ("action",), ()),
    "tool_search_call": ("tool_search", ("arguments",), ()),
}
_OUTPUT_TYPES = {
    "function_call_output",
    "computer_call_output",
    "local_shell_call_output",
    "shell_call_output",
    "apply_patch_call_output",
    "tool_search_output",
}
_SKIPPED_TYPES = {
    "item_reference",
    "mcp_list_tools",
    "mcp_approval_request",
    "mcp_approval_response",
}
_TIMING_KEYS = ("started_at", "duration_ms", "tokens")

RESPONSES_ITEM_TYPES = {
    "message",
    "reasoning",
    "function_call",
    "custom_tool_call",
    "custom_tool_call_output",
    *_HOSTED_CALLS,
    *_OUTPUT_TYPES,
}


@dataclass
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    seen: bool = False

    def add(self, usage: Any) -> None:
        """Add a Chat Completions (`prompt_tokens`) or Responses (`input_tokens`) usage object."""
        if not isinstance(usage, dict):
            return
        inp = usage.get("input_tokens", usage.get("prompt_tokens"))
        out = usage.get("output_tokens", usage.get("completion_tokens"))
        details = usage.get("output_tokens_details") or usage.get("completion_tokens_details") or {}
        reasoning = usage.get("reasoning_tokens")
        if reasoning is None and isinstance(details, dict):
            reasoning = details.get("reasoning_tokens")
        for name, value in (
            ("input_tokens", inp),
            ("output_tokens", out),
            ("reasoning_tokens", reasoning),
        ):
            if isinstance(value, int) and not isinstance(value, bool):
                setattr(self, name, getattr(self, name) + value)
                self.seen = True

    def as_dict(self) -> JSONDict | None:
        if not self.seen:
            return None
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "reasoning_tokens": self.reasoning_tokens,
        }


@dataclass
class ItemBuilder:
    """Accumulates canonical items from OpenAI-shaped entries, joining calls to their outputs."""

    where: Where
    id_prefix: str = "call"
    items: list[JSONDict] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    models: list[str] = field(default_factory=list)
    # call_id -> tool name, for calls still waiting for an output (oldest first)
    pending: OrderedDict[str, str] = field(default_factory=OrderedDict)
    _synthetic: int = 0

    # ---- public -------------------------------------------------------------------------------------
    def add_all(self, entries: Any, field_name: str) -> None:
        if entries is None:
            return
        if isinstance(entries, str):
            self.items.append({"type": "message", "role": "user", "content": entries})
            return
        if isinstance(entries, dict):
            entries = [entries]
        if not isinstance(entries, list):
            raise self.where.error(
                field_name, f"must be a list of messages or items, got {describe(entries)}"
            )
        for index, entry in enumerate(entries):
            self.add(entry, f"{field_name}[{index}]")

    def add(self, entry: Any, at: str) -> None:
        if not isinstance(entry, dict):
            raise self.where.error(
                at, f"must be an object (a message or an item), got {describe(entry)}"
            )
        if entry.get("object") == "response" or (
            "output" in entry and isinstance(entry.get("output"), list) and "type" not in entry
        ):
            self._response(entry, at)
        elif ("type" in entry and entry["type"] != "message") or "role" not in entry:
            self._responses_item(entry, at)
        else:
            self._message(entry, at)

    def add_output(
        self,
        call_id: str | None,
        output: Any,
        *,
        name: str | None = None,
        error: str | None = None,
        extra: JSONDict | None = None,
    ) -> JSONDict:
        """A tool result; joined to `call_id`, else to the oldest waiting call (of `name` if given)."""
        resolved = self._join(call_id, name)
        item: JSONDict = {
            "type": "function_call_output",
            "call_id": resolved,
            "output": text_of(output),
        }
        if error:
            item["error"] = error
        if extra:
            item.update({k: v for k, v in extra.items() if v is not None})
        self.items.append(item)
        return item

    def add_call(
        self, call_id: str | None, name: str, arguments: str, extra: JSONDict | None = None
    ) -> JSONDict:
        cid = call_id or self._new_id()
        item: JSONDict = {
            "type": "function_call",
            "call_id": cid,
            "name": name,
            "arguments": arguments,
        }
        if extra:
            item.update({k: v for k, v in extra.items() if v is not None})
        self.pending[cid] = name
        self.items.append(item)
        return item

    # ---- chat completions --------------------------------------------------------------------------
    def _message(self, msg: JSONDict, at: str) -> None:
        role = msg.get("role")
        if not isinstance(role, str) or not role:
            raise self.where.error(
                f"{at}.role", f"is required and must be a string, got {describe(role)}"
            )
        timing = {k: msg[k] for k in _TIMING_KEYS if k in msg}
        if role == "assistant":
            self._assistant(msg, at, timing)
        elif role == "tool":
            call_id = as_str(msg.get("tool_call_id"))
            error = msg.get("error")
            self.add_output(
                call_id,
                msg.get("content"),
                name=as_str(msg.get("name")),
                error=text_of(error) if error else None,
                extra=timing,
            )
        elif role == "function":
            self.add_output(None, msg.get("content"), name=as_str(msg.get("name")), extra=timing)
        else:
            item: JSONDict = {
                "type": "message",
                "role": role,
                "content": text_of(msg.get("content")),
            }
            item.update(timing)
            self.items.append(item)

    def _assistant(self, msg: JSONDict, at: str, timing: JSONDict) -> None:
        if isinstance(msg.get("model"), str):
            self.models.append(msg["model"])
        for key in ("reasoning_content", "reasoning", "thinking"):
            value = msg.get(key)
            if isinstance(value, str) and value.strip():
                self.items.append({"type": "reasoning", "text": value})
                break
        blocks = msg.get("thinking_blocks")
        if isinstance(blocks, list):
            for block in blocks:
                if isinstance(block, dict) and isinstance(block.get("thinking"), str):
                    self.items.append({"type": "reasoning", "text": block["thinking"]})
        content = msg.get("content")
        text = text_of(content)
        refusal = msg.get("refusal")
        if isinstance(refusal, str) and refusal and not text:
            text = refusal
        tool_calls = msg.get("tool_calls") or []
        legacy = msg.get("function_call")
        if text or not (tool_calls or legacy):
            item: JSONDict = {"type": "message", "role": "assistant", "content": text}
            item.update(timing)
            self.items.append(item)
        if not isinstance(tool_calls, list):
            raise self.where.error(
                f"{at}.tool_calls", f"must be a list, got {describe(tool_calls)}"
            )
        for index, call in enumerate(tool_calls):
            where = f"{at}.tool_calls[{index}]"
            if not isinstance(call, dict):
                raise self.where.error(where, f"must be an object, got {describe(call)}")
            function = call.get("function")
            if not isinstance(function, dict):
                function = call  # some providers flatten {id, name, arguments}
            name = function.get("name")
            if not isinstance(name, str) or not name:
                field_name = f"{where}.function.name" if "function" in call else f"{where}.name"
                raise self.where.error(
                    field_name, f"is required and must be a string, got {describe(name)}"
                )
            args = arguments_text(
                function.get("arguments"), self.where, f"{where}.function.arguments"
            )
            extra = {"started_at": timing.get("started_at")}
            self.add_call(as_str(call.get("id")), name, args, extra)
        if isinstance(legacy, dict):
            name = legacy.get("name")
            if not isinstance(name, str) or not name:
                raise self.where.error(
                    f"{at}.function_call.name", "is required and must be a string"
                )
            args = arguments_text(
                legacy.get("arguments"), self.where, f"{at}.function_call.arguments"
            )
            self.add_call(None, name, args)

    # ---- responses API -----------------------------------------------------------------------------
    def _response(self, response: JSONDict, at: str) -> None:
        if isinstance(response.get("model"), str):
            self.models.append(response["model"])
        self.usage.add(response.get("usage"))
        output = response.get("output")
        if not isinstance(output, list):
            raise self.where.error(
                f"{at}.output", f"must be a list of items, got {describe(output)}"
            )
        for index, entry in enumerate(output):
            self.add(entry, f"{at}.output[{index}]")

    def _responses_item(self, item: JSONDict, at: str) -> None:
        kind = item.get("type")
        if not isinstance(kind, str):
            raise self.where.error(
                f"{at}.type", f"is required (or `role` for a chat message), got {describe(kind)}"
            )
        timing = {k: item[k] for k in _TIMING_KEYS if k in item}
        if kind == "message":
            self._message(item, at)
        elif kind == "reasoning":
            out: JSONDict = {"type": "reasoning"}
            summary = item.get("summary")
            if isinstance(summary, list):
                out["summary"] = [{"text": text_of(part)} for part in summary if text_of(part)]
            content = item.get("content")
            if isinstance(item.get("text"), str):
                out["text"] = item["text"]
            elif content:
                out["text"] = text_of(content)
            elif not out.get("summary"):
                out["text"] = "[encrypted reasoning]" if item.get("encrypted_content") else ""
            out.update(timing)
            self.items.append(out)
        elif kind == "function_call":
            name = item.get("name")
            if not isinstance(name, str) or not name:
                raise self.where.error(
                    f"{at}.name", f"is required and must be a string, got {describe(name)}"
                )
            namespace = item.get("namespace")
            if isinstance(namespace, str) and namespace:
                name = f"{namespace}.{name}"
            call_id = as_str(item.get("call_id")) or as_str(item.get("id"))
            args = arguments_text(item.get("arguments"), self.where, f"{at}.arguments")
            self.add_call(call_id, name, args, timing)
        elif kind == "custom_tool_call":
            name = item.get("name")
            if not isinstance(name, str) or not name:
                raise self.where.error(
                    f"{at}.name", f"is required and must be a string, got {describe(name)}"
                )
            call_id = as_str(item.get("call_id")) or as_str(item.get("id")) or self._new_id()
            self.pending[call_id] = name
            out = {
                "type": "custom_tool_call",
                "call_id": call_id,
                "name": name,
                "input": text_of(item.get("input")),
            }
            out.update(timing)
            self.items.append(out)
        elif kind == "custom_tool_call_output":
            call_id = self._join(as_str(item.get("call_id")), None)
            out = {
                "type": "custom_tool_call_output",
                "call_id": call_id,
                "output": text_of(item.get("output")),
            }
            out.update(timing)
            self.items.append(out)
        elif kind in _OUTPUT_TYPES:
            output = item.get("output")
            error = item.get("error")
            status = item.get("status")
            self.add_output(
                as_str(item.get("call_id")),
                output if not isinstance(output, dict) else json.dumps(output, ensure_ascii=False),
                error=text_of(error)
                if error
                else ("tool call incomplete" if status == "incomplete" else None),
                extra=timing,
            )
        elif kind in _HOSTED_CALLS:
            self._hosted(item, kind, at, timing)
        elif kind in _SKIPPED_TYPES:
            return
        else:
            raise self.where.error(
                f"{at}.type", f"is not a known message or item type: {describe(kind)}"
            )

    def _hosted(self, item: JSONDict, kind: str, at: str, timing: JSONDict) -> None:
        name, arg_keys, out_keys = _HOSTED_CALLS[kind]
        if kind == "mcp_call":
            server = as_str(item.get("server_label")) or "mcp"
            name = f"{server}.{item.get('name') or 'call'}"
        args: Any
        if len(arg_keys) == 1 and isinstance(item.get(arg_keys[0]), str | dict):
            single = item[arg_keys[0]]
            args = single if isinstance(single, str) else json.dumps(single, ensure_ascii=False)
        else:
            args = json.dumps({k: item[k] for k in arg_keys if k in item}, ensure_ascii=False)
        call_id = as_str(item.get("call_id")) or as_str(item.get("id"))
        self.add_call(call_id, name, args, timing)
        outputs = {k: item[k] for k in out_keys if item.get(k) is not None}
        error = item.get("error")
        if (
            outputs
            or error
            or kind in ("web_search_call", "file_search_call", "image_generation_call")
        ):
            value: Any = next(iter(outputs.values())) if len(outputs) == 1 else outputs
            text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
            if not outputs:
                text = as_str(item.get("status")) or ""
            self.add_output(
                self.items[-1]["call_id"],
                text,
                error=text_of(error)
                if error
                else ("failed" if item.get("status") == "failed" else None),
            )

    # ---- joining ------------------------------------------------------------------------------------
    def _new_id(self) -> str:
        self._synthetic += 1
        return f"{self.id_prefix}_{self._synthetic}"

    def _join(self, call_id: str | None, name: str | None) -> str:
        if call_id:
            self.pending.pop(call_id, None)
            return call_id
        for waiting, waiting_name in self.pending.items():
            if name is None or waiting_name == name:
                del self.pending[waiting]
                return waiting
        return self._new_id()


def looks_like_messages(value: Any) -> bool:
    """A list of chat messages or Responses items (one conversation), rather than a list of records."""
    if not isinstance(value, list) or not value:
        return False
    for entry in value:
        if not isinstance(entry, dict):
            return False
        kind = entry.get("type")
        if "role" not in entry and not (isinstance(kind, str) and kind in RESPONSES_ITEM_TYPES):
            return False
    return True


def int_usage(usage: Any, where: Where) -> JSONDict | None:
    """A canonical usage object from a record's own `usage` field (either naming)."""
    if usage is None:
        return None
    if not isinstance(usage, dict):
        raise where.error("usage", f"must be an object, got {describe(usage)}")
    tally = Usage()
    checked: JSONDict = {}
    for key in (
        "input_tokens",
        "prompt_tokens",
        "output_tokens",
        "completion_tokens",
        "reasoning_tokens",
    ):
        if key in usage:
            checked[key] = as_int(usage[key], where, f"usage.{key}", minimum=0)
    for key in ("output_tokens_details", "completion_tokens_details"):
        if isinstance(usage.get(key), dict):
            checked[key] = usage[key]
    tally.add(checked)
    return tally.as_dict()


# ---- a record of a conversation log --------------------------------------------------------------------
_ID_KEYS = ("rollout_id", "id", "custom_id", "conversation_id", "trace_id", "uuid")
_REFERENCE_KEYS = ("reference", "ground_truth", "answer", "target", "expected", "gts")
_KNOWN_KEYS = {
    *_ID_KEYS,
    *_REFERENCE_KEYS,
    "run_id",
    "run_name",
    "run_kind",
    "model",
    "step",
    "global_step",
    "prompt_id",
    "sample_index",
    "split",
    "reward",
    "score",
    "grades",
    "scores",
    "final_answer",
    "status",
    "started_at",
    "ended_at",
    "latency_ms",
    "usage",
    "metadata",
    "messages",
    "input",
    "output",
    "items",
    "choices",
    "response",
    "request",
    "completion",
    "tools",
    "object",
    "created_at",
    "created",
    "instructions",
}


def conversation_entries(record: JSONDict, where: Where, builder: ItemBuilder) -> None:
    """Feed a record's conversation into `builder`, whichever shape it has."""
    found = False
    request = record.get("request")
    if isinstance(request, dict) and "body" in request and isinstance(request["body"], dict):
        request = request["body"]
    response = record.get("response")
    if isinstance(response, dict) and "body" in response and isinstance(response["body"], dict):
        response = response["body"]  # Batch API output line
    instructions = record.get("instructions")
    if isinstance(instructions, str) and instructions:
        builder.items.append({"type": "message", "role": "system", "content": instructions})
    if isinstance(request, dict):
        for key in ("messages", "input"):
            if key in request:
                builder.add_all(request[key], f"request.{key}")
                found = True
    for key in ("messages", "items", "input"):
        if key in record:
            builder.add_all(record[key], key)
            found = True
    for key in ("output", "completion"):
        value = record.get(key)
        if value is None:
            continue
        if isinstance(value, str):
            builder.items.append({"type": "message", "role": "assistant", "content": value})
        else:
            builder.add_all(value, key)
        found = True
    for source, at in ((record, "choices"), (response, "response.choices")):
        if isinstance(source, dict) and isinstance(source.get("choices"), list):
            builder.usage.add(source.get("usage"))
            if isinstance(source.get("model"), str):
                builder.models.append(source["model"])
            choices = source["choices"]
            if choices:
                choice = choices[0]
                message = choice.get("message") if isinstance(choice, dict) else None
                if not isinstance(message, dict):
                    raise where.error(
                        f"{at}[0].message", f"must be an object, got {describe(message)}"
                    )
                builder.add(message, f"{at}[0].message")
            found = True
    if isinstance(response, dict) and response.get("object") == "response":
        builder.add(response, "response")
        found = True
    if not found:
        raise where.error(
            "",
            "has no conversation: expected `messages` (Chat Completions), `input`/`output` "
            "(Responses API), `items` or `choices`",
        )


def convert_record(
    value: Any, where: Where, *, index: int, default_run: str, source_format: str
) -> JSONDict:
    """One conversation (a bare message list or a record with reward fields beside it) -> a rollout."""
    from ._convert import as_number, finish, iso

    record: JSONDict = {"messages": value} if isinstance(value, list) else value
    if not isinstance(record, dict):
        raise where.error(
            "", f"each record must be an object or a list of messages, got {describe(value)}"
        )
    builder = ItemBuilder(where)
    conversation_entries(record, where, builder)

    source_id = next((as_str(record[k]) for k in _ID_KEYS if record.get(k) not in (None, "")), None)
    run_id = as_str(record.get("run_id")) or default_run
    rollout_id = as_str(record.get("rollout_id")) or source_id or f"{default_run}-{index:06d}"
    step = record.get("step", record.get("global_step"))
    reward_value = record.get("reward", record.get("score"))
    reward_field = "reward" if "reward" in record else "score"
    grades = record.get("grades", record.get("scores"))
    reward: float | None = None
    if isinstance(reward_value, dict) and grades is None:
        grades, reward_value = reward_value, None
    reward = as_number(reward_value, where, reward_field)
    grades_out: Any = None
    if isinstance(grades, dict):
        grades_out = {str(k): as_number(v, where, f"grades.{k}") for k, v in grades.items()}
    elif isinstance(grades, list):
        grades_out = grades
    elif grades is not None:
        raise where.error("grades", f"must be an object or a list, got {describe(grades)}")
    reference = next((record[k] for k in _REFERENCE_KEYS if record.get(k) is not None), None)
    usage = int_usage(record.get("usage"), where) or builder.usage.as_dict()
    metadata = record.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise where.error("metadata", f"must be an object, got {describe(metadata)}")
    meta: JSONDict = dict(metadata or {})
    extras = {
        k: v for k, v in record.items() if k not in _KNOWN_KEYS and not isinstance(v, dict | list)
    }
    if extras:
        meta.setdefault("extra", extras)
    meta["source_format"] = source_format
    if source_id:
        meta["source_ids"] = {"id": source_id}
    if where.line:
        meta["source_line"] = where.line
    model = as_str(record.get("model")) or (builder.models[-1] if builder.models else None)
    split = record.get("split")
    if split is not None and split not in ("train", "eval"):
        raise where.error("split", f"must be train or eval, got {describe(split)}")
    status = record.get("status")
    if status is not None and status not in ("ok", "error", "timeout"):
        status = {
            "completed": "ok",
            "success": "ok",
            "failed": "error",
            "incomplete": "timeout",
        }.get(str(status).lower())
    out: JSONDict = {
        "run_id": run_id,
        "rollout_id": rollout_id,
        "step": as_int(step, where, "step", minimum=0),
        "prompt_id": as_str(record.get("prompt_id")),
        "sample_index": as_int(record.get("sample_index"), where, "sample_index"),
        "split": split,
        "items": builder.items,
        "reward": reward,
        "grades": grades_out or None,
        "final_answer": as_str(record.get("final_answer")),
        "reference": as_str(reference),
        "status": status,
        "started_at": iso(record.get("started_at")),
        "ended_at": iso(record.get("ended_at")),
        "latency_ms": as_number(record.get("latency_ms"), where, "latency_ms"),
        "usage": usage,
        "metadata": meta,
        "model": model,
        "run_name": as_str(record.get("run_name")),
        "run_kind": as_str(record.get("run_kind")),
    }
    return finish(out)


def classify(value: Any) -> str | None:
    """'chat' or 'responses' for the first record of a conversation log; None when it is neither."""
    if isinstance(value, list):
        if not value:
            return None
        if looks_like_messages(value):
            return (
                "responses"
                if any("type" in e and e.get("type") != "message" for e in value)
                else "chat"
            )
        return classify(value[0])
    if not isinstance(value, dict):
        return None
    if "trajectory_format" in value or ("info" in value and "messages" in value):
        return None  # mini-swe-agent
    if (
        "resourceSpans" in value
        or "resource_spans" in value
        or ("eval" in value and "samples" in value)
    ):
        return None
    if value.get("object") == "response" or (
        isinstance((value.get("response") or {}), dict)
        and ((value.get("response") or {}).get("object") == "response")
    ):
        return "responses"
    messages = value.get("messages")
    if looks_like_messages(messages):
        return classify(messages)
    for key in ("input", "output", "items"):
        entries = value.get(key)
        if looks_like_messages(entries):
            return classify(entries) if key == "items" else "responses"
    if isinstance(value.get("choices"), list) or isinstance(value.get("request"), dict):
        return "chat"
    return None


def detect_kind(name: str, head: bytes) -> str | None:
    from ._convert import first_json_value

    lowered = name.lower()
    for suffix in (".gz", ".zst", ".zstd"):
        lowered = lowered.removesuffix(suffix)
    if not lowered.endswith((".json", ".jsonl", ".ndjson")) or lowered.endswith(".traj.json"):
        return None
    value = first_json_value(head)
    if value is None:
        # A first record longer than the head: judge by its opening keys.
        text = head[:4096].decode("utf-8", errors="ignore")
        if '"messages"' in text and '"role"' in text and "trajectory_format" not in text:
            return "chat"
        if '"type": "function_call"' in text or '"type":"function_call"' in text:
            return "responses"
        return None
    return classify(value)


def _first_listed(value: Any) -> Any:
    """The first object of an API list page, a JSON array, or the value itself."""
    if isinstance(value, dict) and isinstance(value.get("data"), list):
        return value["data"][0] if value["data"] else None
    if isinstance(value, list):
        return value[0] if value else None
    return value


def detect_api_objects(name: str, head: bytes, object_name: str) -> bool:
    """A JSON/JSONL file of API objects of one kind, bare or as saved list pages."""
    lowered = strip_compression_suffix(name.lower())
    if not lowered.endswith((".json", ".jsonl", ".ndjson")):
        return False
    value = _first_listed(first_json_value(head))
    if value is None:
        return f'"object": "{object_name}"'.encode() in head[:8192]
    return isinstance(value, dict) and value.get("object") == object_name


def iter_api_objects(path: Path) -> Iterator[tuple[Where, Any]]:
    """Each object of a file of API objects: one a line, JSON arrays, or saved list pages."""
    for where, value in iter_json_records(path):
        if (
            isinstance(value, dict)
            and value.get("object") == "list"
            and isinstance(value.get("data"), list)
        ):
            for index, item in enumerate(value["data"]):
                yield where.sub(f"data[{index}]"), item
        elif isinstance(value, list):
            for index, item in enumerate(value):
                yield where.sub(f"[{index}]"), item
        else:
            yield where, value
