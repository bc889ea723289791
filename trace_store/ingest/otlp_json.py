"""OpenTelemetry OTLP/JSON trace exports -> one rollout per trace.

Reads one `ExportTraceServiceRequest` a line (the collector's file exporter) or a single JSON document,
with hex or base64 ids, enums as ints or strings, int64 as strings or numbers, lowerCamelCase or
snake_case keys. LLM spans (GenAI semconv `gen_ai.*`, OpenInference `llm.*`, OpenLLMetry
`gen_ai.prompt.N.*`) give messages, reasoning and tool calls; tool spans give tool calls with their
duration and errors. Reward: a `rollscope.reward` (or `reward`) span attribute, else the one
`gen_ai.evaluation.result` event; every evaluation event becomes a grade.

Spans of one trace can be spread over many lines, so spans are held (compactly) until the file ends.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
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
    iso_from_nanos,
    iter_json_records,
    source_stem,
)
from ._openai import ItemBuilder
from .registry import Importer

_LLM_OPERATIONS = {"chat", "text_completion", "generate_content", "responses", "completion"}
_STATUS_ERROR = {2, "2", "STATUS_CODE_ERROR", "ERROR"}


@dataclass
class Span:
    trace_id: str
    span_id: str
    parent_id: str
    name: str
    start: int
    end: int
    attrs: JSONDict
    events: list[tuple[int, str, JSONDict]]
    error: str | None
    resource: JSONDict
    order: int

    @property
    def duration_ms(self) -> float:
        return max(0, self.end - self.start) / 1e6


def _get(obj: JSONDict, camel: str) -> Any:
    if camel in obj:
        return obj[camel]
    snake = re.sub(r"([A-Z])", lambda m: "_" + m.group(1).lower(), camel)
    return obj.get(snake)


def _hex_id(value: Any) -> str:
    if not isinstance(value, str) or not value:
        return ""
    if re.fullmatch(r"[0-9a-fA-F]{16}|[0-9a-fA-F]{32}", value):
        return value.lower()
    try:
        return base64.b64decode(value, validate=True).hex()
    except (binascii.Error, ValueError):
        return value


def _any_value(value: Any) -> Any:
    """An OTLP AnyValue as a Python value."""
    if not isinstance(value, dict):
        return value
    for key in ("stringValue", "string_value"):
        if key in value:
            return value[key]
    for key in ("intValue", "int_value"):
        if key in value:
            raw = value[key]
            try:
                return int(raw)
            except (TypeError, ValueError):
                return raw
    for key in ("doubleValue", "double_value"):
        if key in value:
            raw = value[key]
            try:
                return float(raw)
            except (TypeError, ValueError):
                return raw
    for key in ("boolValue", "bool_value"):
        if key in value:
            return value[key]
    for key in ("arrayValue", "array_value"):
        if key in value:
            return [_any_value(v) for v in (value[key] or {}).get("values", [])]
    for key in ("kvlistValue", "kvlist_value"):
        if key in value:
            return _attributes((value[key] or {}).get("values", []))
    for key in ("bytesValue", "bytes_value"):
        if key in value:
            return value[key]
    return None


def _attributes(raw: Any) -> JSONDict:
    if isinstance(raw, dict):  # already a mapping (some exporters)
        return dict(raw)
    out: JSONDict = {}
    if isinstance(raw, list):
        for kv in raw:
            if isinstance(kv, dict) and isinstance(kv.get("key"), str):
                out[kv["key"]] = _any_value(kv.get("value"))
    return out


def _nanos(value: Any, where: Where, field_name: str) -> int:
    if value is None:
        return 0
    number = as_int(value, where, field_name, minimum=0)
    return number or 0


def _spans_of(request: Any, where: Where, order: int) -> Iterator[Span]:
    if not isinstance(request, dict):
        raise where.error(
            "", f"must be an ExportTraceServiceRequest object, got {describe(request)}"
        )
    resource_spans = _get(request, "resourceSpans")
    if resource_spans is None:
        raise where.error("resourceSpans", "is missing: not an OTLP/JSON trace export")
    if not isinstance(resource_spans, list):
        raise where.error("resourceSpans", f"must be a list, got {describe(resource_spans)}")
    for r_index, rs in enumerate(resource_spans):
        if not isinstance(rs, dict):
            raise where.error(f"resourceSpans[{r_index}]", "must be an object")
        resource = _attributes((rs.get("resource") or {}).get("attributes"))
        scopes = _get(rs, "scopeSpans") or _get(rs, "instrumentationLibrarySpans") or []
        for s_index, scope in enumerate(scopes):
            spans = scope.get("spans") if isinstance(scope, dict) else None
            for index, raw in enumerate(spans or []):
                at = f"resourceSpans[{r_index}].scopeSpans[{s_index}].spans[{index}]"
                yield _span(raw, where, at, resource, order)
                order += 1


def _span(raw: Any, where: Where, at: str, resource: JSONDict, order: int) -> Span:
    if not isinstance(raw, dict):
        raise where.error(at, f"must be an object, got {describe(raw)}")
    trace_id = _hex_id(_get(raw, "traceId"))
    if not trace_id:
        raise where.error(f"{at}.traceId", f"is required, got {describe(_get(raw, 'traceId'))}")
    start = _nanos(_get(raw, "startTimeUnixNano"), where, f"{at}.startTimeUnixNano")
    end = _nanos(_get(raw, "endTimeUnixNano"), where, f"{at}.endTimeUnixNano") or start
    attrs = _attributes(raw.get("attributes"))
    events: list[tuple[int, str, JSONDict]] = []
    for e_index, event in enumerate(raw.get("events") or []):
        if isinstance(event, dict):
            when = _nanos(
                _get(event, "timeUnixNano"), where, f"{at}.events[{e_index}].timeUnixNano"
            )
            events.append((when, str(event.get("name", "")), _attributes(event.get("attributes"))))
    status = raw.get("status") or {}
    error = None
    code = status.get("code") if isinstance(status, dict) else None
    if isinstance(code, int | str) and code in _STATUS_ERROR:
        error = as_str(status.get("message")) or ""
        for _, name, event_attrs in events:
            if name == "exception":
                error = error or as_str(event_attrs.get("exception.message")) or ""
                kind = as_str(event_attrs.get("exception.type"))
                if kind and kind not in error:
                    error = f"{kind}: {error}" if error else kind
        error = error or "error"
    return Span(
        trace_id=trace_id,
        span_id=_hex_id(_get(raw, "spanId")),
        parent_id=_hex_id(_get(raw, "parentSpanId")),
        name=str(raw.get("name", "")),
        start=start,
        end=end,
        attrs=attrs,
        events=events,
        error=error,
        resource={k: v for k, v in resource.items() if k in ("service.name", "service.version")},
        order=order,
    )


# ---- messages on LLM spans ----------------------------------------------------------------------------
def _json_value(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _unflatten(attrs: JSONDict, prefix: str) -> list[JSONDict]:
    """`prefix.0.a.b` keys -> [{"a.b": ...}] in index order."""
    rows: dict[int, JSONDict] = {}
    for key, value in attrs.items():
        if not key.startswith(prefix):
            continue
        head, _, rest = key[len(prefix) :].partition(".")
        if head.isdigit() and rest:
            rows.setdefault(int(head), {})[rest] = value
    return [rows[i] for i in sorted(rows)]


def _indexed(flat: JSONDict, prefix: str) -> list[JSONDict]:
    return _unflatten(flat, prefix)


def _openinference_messages(attrs: JSONDict, key: str) -> list[JSONDict]:
    packed = attrs.get(key)
    if packed is not None:  # a JSON list (Phoenix dataframes) rather than flattened keys
        value = _json_value(packed)
        if isinstance(value, list):
            return [m.get("message", m) for m in value if isinstance(m, dict)]
    messages = []
    for flat in _unflatten(attrs, key + "."):
        msg: JSONDict = {"role": flat.get("message.role") or "user"}
        content = flat.get("message.content")
        if content is None:
            parts = _indexed(flat, "message.contents.")
            texts = [p.get("message_content.text") for p in parts if p.get("message_content.text")]
            content = "\n".join(str(t) for t in texts)
        msg["content"] = content
        calls = []
        for call in _indexed(flat, "message.tool_calls."):
            calls.append(
                {
                    "id": call.get("tool_call.id"),
                    "function": {
                        "name": call.get("tool_call.function.name"),
                        "arguments": call.get("tool_call.function.arguments"),
                    },
                }
            )
        if calls:
            msg["tool_calls"] = calls
        if flat.get("message.tool_call_id"):
            msg["tool_call_id"] = flat["message.tool_call_id"]
        if flat.get("message.name"):
            msg["name"] = flat["message.name"]
        messages.append(msg)
    return messages


def _openllmetry_messages(attrs: JSONDict, prefix: str) -> list[JSONDict]:
    messages = []
    for flat in _unflatten(attrs, prefix):
        msg: JSONDict = {"role": flat.get("role") or "assistant", "content": flat.get("content")}
        calls = [
            {
                "id": c.get("id"),
                "function": {"name": c.get("name"), "arguments": c.get("arguments")},
            }
            for c in _indexed(flat, "tool_calls.")
        ]
        if calls:
            msg["tool_calls"] = calls
        if flat.get("tool_call_id"):
            msg["tool_call_id"] = flat["tool_call_id"]
        messages.append(msg)
    return messages


def _genai_messages(value: Any) -> list[JSONDict]:
    """GenAI semconv `gen_ai.input.messages`/`gen_ai.output.messages` -> chat messages."""
    value = _json_value(value)
    if not isinstance(value, list):
        return []
    out: list[JSONDict] = []
    for message in value:
        if not isinstance(message, dict):
            continue
        role = str(message.get("role") or "user")
        parts = message.get("parts")
        if not isinstance(parts, list):
            out.append({"role": role, "content": message.get("content")})
            continue
        texts, reasoning, calls = [], [], []
        for part in parts:
            if not isinstance(part, dict):
                continue
            kind = part.get("type")
            if kind == "text":
                texts.append(str(part.get("content", "")))
            elif kind == "reasoning":
                reasoning.append(str(part.get("content", "")))
            elif kind == "tool_call":
                calls.append(
                    {
                        "id": part.get("id"),
                        "function": {"name": part.get("name"), "arguments": part.get("arguments")},
                    }
                )
            elif kind == "tool_call_response":
                response = part.get("response")
                text = (
                    response
                    if isinstance(response, str)
                    else json.dumps(response, ensure_ascii=False)
                )
                out.append({"role": "tool", "tool_call_id": part.get("id"), "content": text})
            elif kind in ("blob", "uri", "file"):
                texts.append(f"[{part.get('modality') or kind}]")
        if texts or reasoning or calls:
            msg: JSONDict = {"role": role, "content": "\n".join(texts)}
            if reasoning:
                msg["reasoning_content"] = "\n".join(reasoning)
            if calls:
                msg["tool_calls"] = calls
            out.append(msg)
    return out


def _io_messages(value: Any, output: bool) -> list[JSONDict]:
    """`input.value`/`output.value` holding an OpenAI request or response body."""
    body = _json_value(value)
    if isinstance(body, dict):
        if output and isinstance(body.get("choices"), list) and body["choices"]:
            message = body["choices"][0].get("message")
            return [message] if isinstance(message, dict) else []
        if output and isinstance(body.get("output"), list):
            return [body]  # a Response object; the builder reads its items
        for key in ("messages", "input"):
            if isinstance(body.get(key), list):
                return list(body[key])
    if isinstance(body, list):
        return [m for m in body if isinstance(m, dict)]
    return []


def _llm_messages(span: Span) -> tuple[list[JSONDict], list[JSONDict]]:
    attrs = span.attrs
    inputs: list[JSONDict] = []
    system = _json_value(attrs.get("gen_ai.system_instructions"))
    if system:
        text = (
            system
            if isinstance(system, str)
            else "\n".join(str(p.get("content", "")) for p in system if isinstance(p, dict))
        )
        inputs.append({"role": "system", "content": text})
    if "gen_ai.input.messages" in attrs or "gen_ai.output.messages" in attrs:
        inputs += _genai_messages(attrs.get("gen_ai.input.messages"))
        outputs = _genai_messages(attrs.get("gen_ai.output.messages"))
    elif any(k.startswith(("llm.input_messages", "llm.output_messages")) for k in attrs):
        inputs += _openinference_messages(attrs, "llm.input_messages")
        outputs = _openinference_messages(attrs, "llm.output_messages")
    elif any(k.startswith(("gen_ai.prompt.", "gen_ai.completion.")) for k in attrs):
        inputs += _openllmetry_messages(attrs, "gen_ai.prompt.")
        outputs = _openllmetry_messages(attrs, "gen_ai.completion.")
    else:
        inputs += _io_messages(attrs.get("input.value"), output=False)
        outputs = _io_messages(attrs.get("output.value"), output=True)
    return inputs, outputs


def _span_kind(span: Span) -> str:
    attrs = span.attrs
    oi = str(attrs.get("openinference.span.kind") or "").upper()
    op = str(attrs.get("gen_ai.operation.name") or "").lower()
    if oi == "TOOL" or op == "execute_tool":
        return "tool"
    if oi == "LLM" or op in _LLM_OPERATIONS:
        return "llm"
    if any(
        k.startswith(("gen_ai.input.messages", "llm.input_messages", "gen_ai.prompt."))
        for k in attrs
    ):
        return "llm"
    return "other"


# ---- one trace -> one rollout ---------------------------------------------------------------------------
@dataclass
class _Trajectory:
    where: Where
    trace_id: str
    builder: ItemBuilder = field(init=False)
    emitted_calls: set[str] = field(default_factory=set)
    emitted_outputs: set[str] = field(default_factory=set)
    claimed: set[str] = field(default_factory=set)
    previous_count: int = 0
    seen_llm: bool = False

    def __post_init__(self) -> None:
        self.builder = ItemBuilder(self.where, id_prefix=f"{self.trace_id[:8]}_call")

    def convert(self, messages: list[JSONDict], at: str) -> list[JSONDict]:
        scratch = ItemBuilder(self.where, id_prefix=self.builder.id_prefix)
        scratch.pending = self.builder.pending.copy()
        scratch._synthetic = self.builder._synthetic
        scratch.add_all(messages, at)
        self.builder._synthetic = scratch._synthetic
        self.builder.models += scratch.models
        return scratch.items

    def emit(self, items: list[JSONDict]) -> None:
        for item in items:
            call_id = item.get("call_id")
            if item["type"] in ("function_call", "custom_tool_call"):
                if call_id in self.emitted_calls:
                    continue
                self.emitted_calls.add(str(call_id))
                self.builder.pending[str(call_id)] = str(item.get("name"))
            elif item["type"] in ("function_call_output", "custom_tool_call_output"):
                if call_id in self.emitted_outputs:
                    continue
                self.emitted_outputs.add(str(call_id))
                self.builder.pending.pop(str(call_id), None)
            self.builder.items.append(item)

    def llm_input(self, span: Span, inputs: list[JSONDict]) -> None:
        items = self.convert(inputs, f"span {span.span_id} input messages")
        new = items[self.previous_count :] if len(items) >= self.previous_count else items
        if not self.seen_llm:
            new = items
        self.seen_llm = True
        self.previous_count = len(items)
        self.emit(new)

    def llm_output(self, span: Span, outputs: list[JSONDict]) -> None:
        items = self.convert(outputs, f"span {span.span_id} output messages")
        self.previous_count += len(items)
        stamp = iso_from_nanos(span.start) if span.start else None
        tokens = _first_int(span.attrs, "gen_ai.usage.output_tokens", "llm.token_count.completion")
        timed = False
        for item in items:
            if stamp:
                item.setdefault("started_at", stamp)
            if not timed and item["type"] in ("message", "reasoning"):
                item["duration_ms"] = span.duration_ms
                if tokens is not None:
                    item["tokens"] = tokens
                timed = True
        self.emit(items)

    def tool_call(self, span: Span) -> str:
        attrs = span.attrs
        name = as_str(attrs.get("gen_ai.tool.name") or attrs.get("tool.name")) or span.name
        call_id = as_str(
            attrs.get("gen_ai.tool.call.id")
            or attrs.get("tool_call.id")
            or attrs.get("tool.call_id")
        )
        if not call_id:
            # Join to the model's oldest call of this tool not yet claimed by another tool span.
            for waiting, waiting_name in self.builder.pending.items():
                if waiting_name == name and waiting not in self.claimed:
                    call_id = waiting
                    break
        call_id = call_id or f"span_{span.span_id}"
        self.claimed.add(call_id)
        if call_id not in self.emitted_calls:
            args = attrs.get("gen_ai.tool.call.arguments", attrs.get("input.value"))
            arguments = (
                args if isinstance(args, str) else json.dumps(args or {}, ensure_ascii=False)
            )
            self.emit(
                [
                    {
                        "type": "function_call",
                        "call_id": call_id,
                        "name": name,
                        "arguments": arguments,
                        "started_at": iso_from_nanos(span.start),
                    }
                ]
            )
        return call_id

    def tool_result(self, span: Span, call_id: str) -> None:
        attrs = span.attrs
        result = attrs.get("gen_ai.tool.call.result", attrs.get("output.value"))
        output = result if isinstance(result, str) or result is None else json.dumps(result)
        item: JSONDict = {
            "type": "function_call_output",
            "call_id": call_id,
            "output": output or "",
            "started_at": iso_from_nanos(span.start),
            "duration_ms": span.duration_ms,
        }
        if span.error is not None:
            item["error"] = span.error
        self.emitted_outputs.discard(call_id)  # the span's timing wins over a message copy
        self.emit([item])


def _first_int(attrs: JSONDict, *keys: str) -> int | None:
    for key in keys:
        value = attrs.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, str) and value.isdigit():
            return int(value)
    return None


def rollout_of_spans(
    spans: list[Span], file_name: str, default_run: str, source_format: str = "otlp_json"
) -> JSONDict:
    """One trace's spans -> one canonical rollout (also used by the Agents SDK importer)."""
    spans.sort(key=lambda s: (s.start, s.order))
    trace_id = spans[0].trace_id
    where = Where(file_name, None, f"trace {trace_id}")
    ids = {s.span_id for s in spans}
    roots = [s for s in spans if not s.parent_id or s.parent_id not in ids]
    root = roots[0]
    trajectory = _Trajectory(where, trace_id)

    steps: list[tuple[int, int, int, str, Span, Any]] = []
    for span in spans:
        kind = _span_kind(span)
        if kind == "llm":
            inputs, outputs = _llm_messages(span)
            # At one instant: ends first, then starts; a zero-length span's output after its input.
            steps.append((span.start, 3, span.order, "llm_in", span, inputs))
            steps.append(
                (span.end, 1 if span.end > span.start else 4, span.order, "llm_out", span, outputs)
            )
        elif kind == "tool":
            steps.append((span.start, 2, span.order, "tool_start", span, None))
            steps.append((span.end, 1, span.order, "tool_end", span, None))
    steps.sort(key=lambda s: (s[0], s[1], s[2]))
    tool_ids: dict[str, str] = {}
    for _, _, _, action, span, payload in steps:
        if action == "llm_in":
            trajectory.llm_input(span, payload)
        elif action == "llm_out":
            trajectory.llm_output(span, payload)
        elif action == "tool_start":
            tool_ids[span.span_id] = trajectory.tool_call(span)
        else:
            trajectory.tool_result(span, tool_ids[span.span_id])

    # Rollout fields: root attributes first, then any span's.
    ordered = [root, *(s for s in spans if s is not root)]

    def attr(*keys: str) -> Any:
        for span in ordered:
            for key in keys:
                if span.attrs.get(key) is not None:
                    return span.attrs[key]
        return None

    grades: dict[str, float] = {}
    for span in spans:
        for _, name, event_attrs in span.events:
            if name != "gen_ai.evaluation.result":
                continue
            grader = as_str(event_attrs.get("gen_ai.evaluation.name")) or "evaluation"
            score = event_attrs.get("gen_ai.evaluation.score.value")
            if score is None:
                label = str(event_attrs.get("gen_ai.evaluation.score.label", "")).lower()
                score = {"pass": 1.0, "passed": 1.0, "true": 1.0, "fail": 0.0, "failed": 0.0}.get(
                    label
                )
            if score is not None:
                grades[grader] = (
                    as_number(score, where, f"{grader} gen_ai.evaluation.score.value") or 0.0
                )
        for key, value in span.attrs.items():
            if key.startswith("rollscope.grade."):
                grades[key.removeprefix("rollscope.grade.")] = as_number(value, where, key) or 0.0
    reward_key = next(
        (k for k in ("rollscope.reward", "reward") if any(k in s.attrs for s in spans)), None
    )
    reward = as_number(attr(reward_key), where, reward_key) if reward_key else None
    if reward is None and len(grades) == 1:
        reward = next(iter(grades.values()))

    usage_in = usage_out = usage_reasoning = 0
    seen_usage = False
    for span in spans:
        if _span_kind(span) != "llm":
            continue
        values = (
            _first_int(
                span.attrs,
                "gen_ai.usage.input_tokens",
                "llm.token_count.prompt",
                "gen_ai.usage.prompt_tokens",
            ),
            _first_int(
                span.attrs,
                "gen_ai.usage.output_tokens",
                "llm.token_count.completion",
                "gen_ai.usage.completion_tokens",
            ),
            _first_int(
                span.attrs,
                "gen_ai.usage.reasoning.output_tokens",
                "llm.token_count.completion_details.reasoning",
            ),
        )
        if any(v is not None for v in values):
            seen_usage = True
            usage_in += values[0] or 0
            usage_out += values[1] or 0
            usage_reasoning += values[2] or 0

    model = attr("gen_ai.response.model", "gen_ai.request.model", "llm.model_name")
    starts = [s.start for s in spans if s.start]
    ends = [s.end for s in spans if s.end]
    metadata: JSONDict = {
        "source_format": source_format,
        "source_ids": {"trace_id": trace_id, "root_span_id": root.span_id},
        "root_span": root.name,
        "n_spans": len(spans),
    }
    for key, out_key in (
        ("gen_ai.conversation.id", "conversation_id"),
        ("session.id", "session_id"),
        ("gen_ai.agent.name", "agent_name"),
        ("agent.name", "agent_name"),
    ):
        value = attr(key)
        if value is not None:
            metadata.setdefault(out_key, value)
    if root.resource.get("service.name"):
        metadata["service_name"] = root.resource["service.name"]
    split = as_str(attr("rollscope.split"))
    record: JSONDict = {
        "run_id": as_str(attr("rollscope.run_id")) or default_run,
        "rollout_id": trace_id,
        "step": as_int(attr("rollscope.step"), where, "rollscope.step", minimum=0),
        "prompt_id": as_str(attr("rollscope.prompt_id")),
        "sample_index": as_int(attr("rollscope.sample_index"), where, "rollscope.sample_index"),
        "split": split if split in ("train", "eval") else None,
        "items": trajectory.builder.items,
        "reward": reward,
        "grades": grades or None,
        "status": "error" if root.error is not None else "ok",
        "started_at": iso_from_nanos(min(starts)) if starts else None,
        "ended_at": iso_from_nanos(max(ends)) if ends else None,
        "latency_ms": (max(ends) - min(starts)) / 1e6 if starts and ends else None,
        "usage": {
            "input_tokens": usage_in,
            "output_tokens": usage_out,
            "reasoning_tokens": usage_reasoning,
        }
        if seen_usage
        else None,
        "model": as_str(model),
        "metadata": metadata,
    }
    return finish(record)


def detect(name: str, head: bytes) -> bool:
    lowered = name.lower()
    for suffix in (".gz", ".zst", ".zstd"):
        lowered = lowered.removesuffix(suffix)
    if not lowered.endswith((".json", ".jsonl", ".ndjson", ".otlp")):
        return False
    start = head.lstrip()[:1]
    return start in (b"{", b"[") and (b'"resourceSpans"' in head or b'"resource_spans"' in head)


def convert(path: Path) -> Iterator[JSONDict]:
    traces: dict[str, list[Span]] = {}
    order = 0
    for where, request in iter_json_records(path):
        for span in _spans_of(request, where, order):
            traces.setdefault(span.trace_id, []).append(span)
            order += 1
    if not traces:
        raise Where(path.name).error("resourceSpans", "holds no spans")
    default_run = source_stem(path)
    for spans in traces.values():
        yield rollout_of_spans(spans, path.name, default_run)


IMPORTER = Importer(
    name="otlp_json",
    label="OpenTelemetry OTLP/JSON traces",
    detect=detect,
    convert=convert,
    example="the OpenTelemetry Collector's `file` exporter (format: json), one request a line",
)
