"""OpenAI Agents SDK trace exports -> one rollout per trace.

The SDK exports `{object: "trace", id, workflow_name, group_id, metadata}` and
`{object: "trace.span", id, trace_id, parent_id, started_at, ended_at, span_data, error}` items; its
backend exporter POSTs them as `{"data": [...]}`. Accepted: one item a line, one `{"data": [...]}` batch a
line, a JSON array, or one document. Generation spans (Chat Completions models) give the messages and
tool calls; function spans give each call's arguments, output, duration and error (joined to the
model's call by tool name, oldest first); response spans give only token usage (the SDK does not export
Responses output items). Reward: `metadata.reward` (or `rollscope.reward`) on the trace, or a custom span
named `reward` with `data.reward`/`data.score`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from ._convert import (
    JSONDict,
    Where,
    describe,
    first_json_value,
    iter_json_records,
    mapping,
    parse_time,
    source_stem,
)
from .files import strip_compression_suffix
from .otlp_json import Span, rollout_of_spans
from .registry import Importer


def _is_item(value: Any) -> bool:
    return isinstance(value, dict) and value.get("object") in ("trace", "trace.span")


def detect(name: str, head: bytes) -> bool:
    lowered = strip_compression_suffix(name.lower())
    if not lowered.endswith((".json", ".jsonl", ".ndjson")):
        return False
    value = first_json_value(head)
    if isinstance(value, dict) and isinstance(value.get("data"), list):
        value = value["data"][0] if value["data"] else None
    if isinstance(value, list):
        value = value[0] if value else None
    if value is None:
        return b'"object": "trace' in head[:4096] or b'"object":"trace' in head[:4096]
    return _is_item(value)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _nanos(value: Any) -> int:
    stamp = parse_time(value)
    return (stamp - _EPOCH) // timedelta(microseconds=1) * 1000 if stamp else 0


def _items(path: Path) -> Iterator[tuple[Where, Any]]:
    for where, value in iter_json_records(path):
        if isinstance(value, dict) and isinstance(value.get("data"), list) and not _is_item(value):
            for index, item in enumerate(value["data"]):
                yield where.sub(f"data[{index}]"), item
        elif isinstance(value, list):
            for index, item in enumerate(value):
                yield where.sub(f"[{index}]"), item
        else:
            yield where, value


def _span(item: JSONDict, where: Where, order: int) -> Span:
    data = item.get("span_data")
    if not isinstance(data, dict):
        raise where.error("span_data", f"must be an object, got {describe(data)}")
    kind = data.get("type")
    attrs: JSONDict = {"agents.span_type": kind}
    if kind == "generation":
        attrs["openinference.span.kind"] = "LLM"
        attrs["llm.input_messages"] = json.dumps(data.get("input") or [])
        attrs["llm.output_messages"] = json.dumps(data.get("output") or [])
        if data.get("model"):
            attrs["llm.model_name"] = data["model"]
    elif kind == "function":
        attrs["openinference.span.kind"] = "TOOL"
        attrs["tool.name"] = data.get("name")
        attrs["input.value"] = data.get("input") or "{}"
        attrs["output.value"] = data.get("output")
    elif kind == "response" and data.get("response_id"):
        attrs["response_id"] = data["response_id"]
    elif kind == "agent" and data.get("name"):
        attrs["agent.name"] = data["name"]
    elif kind == "custom" and str(data.get("name", "")).lower() in ("reward", "rollscope.reward"):
        custom = mapping(data.get("data"))
        for key in ("reward", "score", "value"):
            if custom.get(key) is not None:
                attrs["rollscope.reward"] = custom[key]
                break
    usage = data.get("usage")
    if isinstance(usage, dict) and kind in ("generation", "response"):
        attrs["openinference.span.kind"] = "LLM"
        attrs["llm.token_count.prompt"] = usage.get("input_tokens", usage.get("prompt_tokens"))
        attrs["llm.token_count.completion"] = usage.get(
            "output_tokens", usage.get("completion_tokens")
        )
        details = usage.get("output_tokens_details")
        if isinstance(details, dict):
            attrs["llm.token_count.completion_details.reasoning"] = details.get("reasoning_tokens")
    error = item.get("error")
    message = None
    if isinstance(error, dict):
        message = str(error.get("message") or "error")
        detail = error.get("data")
        if isinstance(detail, dict) and detail.get("error"):
            message = f"{message}: {detail['error']}"
    start = _nanos(item.get("started_at"))
    return Span(
        trace_id=str(item.get("trace_id")),
        span_id=str(item.get("id") or f"span_{order}"),
        parent_id=str(item.get("parent_id") or ""),
        name=str(data.get("name") or kind or "span"),
        start=start,
        end=_nanos(item.get("ended_at")) or start,
        attrs={k: v for k, v in attrs.items() if v is not None},
        events=[],
        error=message,
        resource={},
        order=order,
    )


def convert(path: Path) -> Iterator[JSONDict]:
    traces: dict[str, JSONDict] = {}
    spans: dict[str, list[Span]] = {}
    order = 0
    for where, item in _items(path):
        if not _is_item(item):
            raise where.error("object", f'must be "trace" or "trace.span", got {describe(item)}')
        if item["object"] == "trace":
            if not isinstance(item.get("id"), str):
                raise where.error("id", f"is required, got {describe(item.get('id'))}")
            traces[item["id"]] = item
            spans.setdefault(item["id"], [])
            continue
        if not isinstance(item.get("trace_id"), str):
            raise where.error("trace_id", f"is required, got {describe(item.get('trace_id'))}")
        spans.setdefault(item["trace_id"], []).append(_span(item, where, order))
        order += 1
    default_run = source_stem(path)
    for trace_id, members in spans.items():
        trace = traces.get(trace_id, {})
        metadata = mapping(trace.get("metadata"))
        starts = [s.start for s in members if s.start] or [0]
        ends = [s.end for s in members if s.end] or starts
        attrs: JSONDict = {"agents.workflow_name": trace.get("workflow_name")}
        for key in ("reward", "rollscope.reward"):
            if metadata.get(key) is not None:
                attrs["rollscope.reward"] = metadata[key]
        for key in ("run_id", "step", "prompt_id", "sample_index", "split"):
            if metadata.get(key) is not None:
                attrs[f"rollscope.{key}"] = metadata[key]
        if trace.get("group_id"):
            attrs["gen_ai.conversation.id"] = trace["group_id"]
        root = Span(
            trace_id=trace_id,
            span_id=trace_id,
            parent_id="",
            name=str(trace.get("workflow_name") or "trace"),
            start=min(starts),
            end=max(ends),
            attrs={k: v for k, v in attrs.items() if v is not None},
            events=[],
            error=None,
            resource={},
            order=-1,
        )
        for span in members:
            if not span.parent_id:
                span.parent_id = trace_id
        record = rollout_of_spans([root, *members], path.name, default_run, "openai_agents")
        record["rollout_id"] = trace_id
        if "gen_ai.conversation.id" in attrs:
            record["metadata"]["group_id"] = attrs["gen_ai.conversation.id"]
        if metadata:
            record["metadata"]["trace_metadata"] = metadata
        yield record


IMPORTER = Importer(
    name="openai_agents",
    label="OpenAI Agents SDK trace export",
    detect=detect,
    convert=convert,
    example="a TracingProcessor whose on_trace_start/on_span_end write `json.dumps(x.export())` a line",
)
