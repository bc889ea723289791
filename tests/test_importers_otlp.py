"""OTLP/JSON trace exports -> one canonical rollout per trace."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from trace_store import IngestError, open_store
from trace_store.ingest import otlp_json
from trace_store.ingest.registry import detect_format
from trace_store.ingest.validate import check_record

DATA = Path(__file__).parent / "data" / "importers" / "otlp"
SAMPLES = Path(__file__).parents[2] / "shared" / "samples"


def convert(path: Path) -> list[dict[str, Any]]:
    records = list(otlp_json.convert(path))
    for record in records:
        assert list(check_record(record)) == [], record["rollout_id"]
    return records


def of_type(record: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [i for i in record["items"] if i["type"] == kind]


def test_detected_by_the_registry() -> None:
    for name in ("otlp_genai.jsonl", "otlp_openinference.json"):
        importer = detect_format(name, (DATA / name).read_bytes()[:65536])
        assert importer is not None and importer.name == "otlp_json"


def test_genai_trace_split_over_lines_becomes_one_rollout() -> None:
    first, second = convert(DATA / "otlp_genai.jsonl")
    assert first["rollout_id"] == "0af7651916cd43dd8448eb211c80319c"
    assert (first["run_id"], first["step"], first["prompt_id"]) == ("otel-run", 7, "p-12")
    assert first["reward"] == 0.5 and first["grades"] == {"correctness": 0.5}
    assert [i["type"] for i in first["items"]] == [
        "message",
        "message",
        "reasoning",
        "function_call",
        "function_call",
        "function_call_output",
        "function_call_output",
        "message",
    ]
    outputs = {o["call_id"]: o for o in of_type(first, "function_call_output")}
    assert outputs["call_p"]["duration_ms"] == 350.0 and outputs["call_p"]["output"] == "Paris: 18C"
    assert (
        outputs["call_r"]["duration_ms"] == 2000.0
        and outputs["call_r"]["error"] == "upstream timeout"
    )
    assert [c["call_id"] for c in of_type(first, "function_call")] == ["call_p", "call_r"]
    assert first["usage"] == {"input_tokens": 280, "output_tokens": 60, "reasoning_tokens": 12}
    assert first["latency_ms"] == 5000.0 and first["status"] == "ok"
    assert first["metadata"]["source_ids"]["root_span_id"] == "b7ad6b7169203331"
    assert first["metadata"]["conversation_id"] == "conv-9"
    assert second["items"][-1]["content"] == "I can't check the weather."
    assert second["metadata"]["missing"] == ["reward"]


def test_openinference_base64_ids_string_enums_unicode_no_reward() -> None:
    (record,) = convert(DATA / "otlp_openinference.json")
    assert record["rollout_id"] == "5b8efff798038103d269b633813fc60c"
    assert record["metadata"]["missing"] == ["reward", "step"]
    assert record["items"][1]["content"] == "Lis le fichier «notes.txt» 📄"
    (call,) = of_type(record, "function_call")
    (output,) = of_type(record, "function_call_output")
    assert call["call_id"] == output["call_id"] == "toolu_01"
    assert output["error"] == "FileNotFoundError: notes.txt" and output["duration_ms"] == 50.0
    assert record["items"][-1]["content"] == "Le fichier n'existe pas. 😕"
    assert record["usage"]["input_tokens"] == 130


def _snake(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            re.sub(r"([A-Z])", lambda m: "_" + m.group(1).lower(), k): _snake(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_snake(v) for v in value]
    return value


def test_snake_case_keys_and_tool_spans_without_llm_spans(tmp_path: Path) -> None:
    lines = (DATA / "otlp_genai.jsonl").read_text().splitlines()
    path = tmp_path / "snake.jsonl"
    path.write_text("\n".join(json.dumps(_snake(json.loads(line))) for line in lines) + "\n")
    assert [r["items"] for r in convert(path)] == [
        r["items"] for r in convert(DATA / "otlp_genai.jsonl")
    ]

    span = {
        "traceId": "ab" * 16,
        "spanId": "cd" * 8,
        "name": "bash",
        "startTimeUnixNano": 1_000_000_000,
        "endTimeUnixNano": 1_250_000_000,
        "attributes": [
            {"key": "openinference.span.kind", "value": {"stringValue": "TOOL"}},
            {"key": "tool.name", "value": {"stringValue": "bash"}},
            {"key": "input.value", "value": {"stringValue": '{"cmd": "ls"}'}},
            {"key": "output.value", "value": {"stringValue": "x" * 2_000_000}},
            {"key": "reward", "value": {"intValue": 1}},
        ],
    }
    lone = tmp_path / "lone.json"
    lone.write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}))
    (record,) = convert(lone)
    assert [i["type"] for i in record["items"]] == ["function_call", "function_call_output"]
    assert (
        record["items"][1]["duration_ms"] == 250.0
        and len(record["items"][1]["output"]) == 2_000_000
    )
    assert record["reward"] == 1.0


def test_broken_file_names_line_and_field() -> None:
    with pytest.raises(IngestError) as caught:
        list(otlp_json.convert(DATA / "otlp_broken.jsonl"))
    err = caught.value
    assert (
        err.line == 2 and err.field == "resourceSpans[0].scopeSpans[0].spans[0].startTimeUnixNano"
    )
    assert 'got "soon"' in str(err)


def test_not_a_trace_export(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_text('{"spans": []}')
    with pytest.raises(IngestError, match="resourceSpans"):
        list(otlp_json.convert(path))


@pytest.mark.skipif(not SAMPLES.is_dir(), reason="../shared/samples is absent")
def test_the_proto_repository_example() -> None:
    (record,) = convert(SAMPLES / "otlp" / "opentelemetry-proto_examples_trace.json")
    assert record["rollout_id"] == "5b8efff798038103d269b633813fc60c"
    assert record["latency_ms"] == 1000.0 and record["metadata"]["service_name"] == "my.service"


def test_end_to_end_counts(tmp_path: Path) -> None:
    store = open_store(tmp_path / "t.duckdb")
    try:
        result = store.ingest_file(DATA / "otlp_genai.jsonl")
        assert (result.format, result.rollouts_added) == ("otlp_json", 2)
        row = (
            store.cursor()
            .execute(
                "SELECT n_tool_calls, max_parallel_calls, n_tool_errors, reward FROM rollouts "
                "WHERE rollout_id = '0af7651916cd43dd8448eb211c80319c'"
            )
            .fetchone()
        )
        assert row == (2, 2, 1, 0.5)
        durations = (
            store.cursor()
            .execute(
                "SELECT call_id, duration_ms FROM events WHERE kind = 'tool_call' ORDER BY call_id"
            )
            .fetchall()
        )
        assert durations == [("call_p", 350.0), ("call_r", 2000.0)]
    finally:
        store.close()
