"""Chat Completions and Responses API conversation logs -> canonical rollouts."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from trace_store import IngestError, open_store
from trace_store.ingest import chat_completions, responses
from trace_store.ingest.registry import detect_format
from trace_store.ingest.validate import check_record

DATA = Path(__file__).parent / "data" / "importers" / "openai"


def convert(module: ModuleType, name: str) -> list[dict[str, Any]]:
    records = list(module.convert(DATA / name))
    for record in records:
        assert list(check_record(record)) == [], record["rollout_id"]
    return records


def kinds(record: dict[str, Any]) -> list[str]:
    return [item["type"] for item in record["items"]]


def head(path: Path) -> bytes:
    return path.read_bytes()[:65536]


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("chat_typical.jsonl", "chat_completions"),
        ("chat_edge.json", "chat_completions"),
        ("responses_typical.jsonl", "responses"),
        ("responses_edge.json", "responses"),
    ],
)
def test_registry_detects_the_shape(name: str, expected: str) -> None:
    importer = detect_format(name, head(DATA / name))
    assert importer is not None and importer.name == expected


def test_chat_typical_keeps_ids_rewards_and_joins_calls() -> None:
    records = convert(chat_completions, "chat_typical.jsonl")
    assert [r["rollout_id"] for r in records] == ["conv-001", "conv-002", "conv-003"]
    first = records[0]
    assert first["run_id"] == "grpo-7" and first["step"] == 12 and first["reward"] == 1.0
    assert first["reference"] == "42" and first["model"] == "gpt-4.1-mini"
    assert first["usage"] == {"input_tokens": 120, "output_tokens": 30, "reasoning_tokens": 8}
    assert kinds(first) == [
        "message",
        "message",
        "function_call",
        "function_call_output",
        "message",
    ]
    assert first["items"][2]["call_id"] == first["items"][3]["call_id"] == "call_a1"
    assert first["metadata"]["source_ids"] == {"id": "conv-001"}
    assert "missing" not in first["metadata"]
    third = records[2]
    assert third["reward"] == 0.5  # `score` is read as the reward
    assert kinds(third)[:5] == ["message", "reasoning", "message", "function_call", "function_call"]
    outputs = {
        i["call_id"]: i["output"] for i in third["items"] if i["type"] == "function_call_output"
    }
    assert outputs == {"call_p": "Paris: 18C", "call_r": "Rome: 24C"}
    assert third["metadata"]["extra"] == {"acc": 1}


def test_chat_edge_cases() -> None:
    records = convert(chat_completions, "chat_edge.json")
    assert len(records) == 3
    parallel = records[0]
    calls = [i for i in parallel["items"] if i["type"] == "function_call"]
    assert [c["call_id"] for c in calls] == ["t1", "t2", "t3"]
    assert json.loads(calls[0]["arguments"]) == {"text": "résumé", "to": "ja"}
    errors = [i for i in parallel["items"] if i.get("error")]
    assert [(e["call_id"], e["error"]) for e in errors] == [
        ("t2", "ToolError: lookup service unavailable")
    ]
    assert parallel["items"][-1]["content"] == "履歴書 (rirekisho) 🙂"
    assert parallel["metadata"]["missing"] == ["reward", "step"]
    assert "reward" not in parallel and "step" not in parallel
    legacy = records[1]
    call, output = legacy["items"][1], legacy["items"][2]
    assert call["name"] == "get_time" and output["call_id"] == call["call_id"]
    no_ids = records[2]
    outs = [i for i in no_ids["items"] if i["type"] == "function_call_output"]
    assert [(o["call_id"], o["output"]) for o in outs] == [("x1", "first"), ("x2", "second")]
    assert no_ids["items"][-1] == {
        "type": "message",
        "role": "assistant",
        "content": "I can't help with that.",
    }


def test_chat_huge_output_and_bare_message_lines(tmp_path: Path) -> None:
    big = "x" * 3_000_000
    lines = [
        [{"role": "user", "content": "dump"}, {"role": "assistant", "content": big}],
        [{"role": "user", "content": "again"}, {"role": "assistant", "content": "ok"}],
    ]
    path = tmp_path / "bare.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    records = list(chat_completions.convert(path))
    assert len(records) == 2
    assert records[0]["items"][1]["content"] == big
    assert records[0]["rollout_id"] != records[1]["rollout_id"]
    assert records[1]["metadata"]["source_line"] == 2


def test_chat_broken_names_file_line_and_field() -> None:
    with pytest.raises(IngestError) as caught:
        list(chat_completions.convert(DATA / "chat_broken.jsonl"))
    err = caught.value
    assert err.file == "chat_broken.jsonl" and err.line == 3
    assert err.field == "messages[1].tool_calls[0].function.name"
    assert "chat_broken.jsonl line 3" in str(err)


def test_chat_not_json_and_not_a_conversation(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"messages": [{"role": "user", "content": "a"}]}\n{"messages": [oops]}\n')
    with pytest.raises(IngestError, match=r"bad.jsonl line 2: not valid JSON"):
        list(chat_completions.convert(path))
    path.write_text('{"prompt": "a", "reward": 1}\n')
    with pytest.raises(IngestError, match="has no conversation"):
        list(chat_completions.convert(path))
    path.write_text('{"messages": [{"content": "no role"}]}\n')
    with pytest.raises(IngestError) as caught:
        list(chat_completions.convert(path))
    assert caught.value.field == "messages[0].type"


def test_responses_typical() -> None:
    records = convert(responses, "responses_typical.jsonl")
    first, second = records
    assert first["rollout_id"] == "resp_001" and first["grades"] == {"correct": 1.0, "format": 1.0}
    assert kinds(first) == [
        "message",
        "message",
        "reasoning",
        "function_call",
        "function_call_output",
        "reasoning",
        "message",
    ]
    assert first["items"][2]["summary"] == [{"text": "Need the weather tool."}]
    assert first["items"][1]["content"] == "Weather in Oslo?"
    assert first["usage"] == {"input_tokens": 200, "output_tokens": 50, "reasoning_tokens": 20}
    assert first["metadata"]["source_format"] == "responses"
    assert kinds(second) == ["message", "custom_tool_call", "custom_tool_call_output", "message"]
    assert second["items"][1]["input"].startswith("*** Begin Patch")
    assert second["items"][2]["call_id"] == "call_patch"


def test_responses_edge_parallel_hosted_and_errors() -> None:
    par, mcp = convert(responses, "responses_edge.json")
    assert par["rollout_id"] == "resp_par" and par["model"] == "o4-mini" and par["status"] == "ok"
    names = [i["name"] for i in par["items"] if i["type"] == "function_call"]
    assert names == ["docs.search", "search", "web_search"]
    assert json.loads(par["items"][2]["arguments"]) == {"type": "search", "query": "γ news"}
    assert par["metadata"]["missing"] == ["reward", "step"]
    assert mcp["items"][2] == {
        "type": "function_call_output",
        "call_id": "mcp_1",
        "output": "",
        "error": "401 Unauthorized",
    }
    assert mcp["items"][-1]["content"] == "I could not access GitHub."


def test_responses_broken_reward() -> None:
    with pytest.raises(IngestError) as caught:
        list(responses.convert(DATA / "responses_broken.jsonl"))
    assert (caught.value.line, caught.value.field) == (2, "reward")
    assert 'got "high"' in str(caught.value)


def test_unknown_item_type_is_named(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_text(json.dumps([{"input": [], "output": [{"type": "telepathy_call"}]}]))
    with pytest.raises(IngestError) as caught:
        list(responses.convert(path))
    assert (caught.value.field, caught.value.line) == ("[0].output[0].type", 1)


def test_end_to_end_counts(tmp_path: Path) -> None:
    store = open_store(tmp_path / "t.duckdb")
    try:
        result = store.ingest_file(DATA / "chat_typical.jsonl")
        assert (result.format, result.rollouts_added) == ("chat_completions", 3)
        store.ingest_file(DATA / "responses_edge.json")
        rows = (
            store.cursor()
            .execute(
                "SELECT rollout_id, n_tool_calls, max_parallel_calls, n_tool_errors FROM rollouts ORDER BY 1"
            )
            .fetchall()
        )
        assert rows == [
            ("conv-001", 1, 1, 0),
            ("conv-002", 0, 0, 0),
            ("conv-003", 2, 2, 0),
            ("mcp-1", 1, 1, 1),
            ("resp_par", 3, 3, 0),
        ]
        again = store.ingest_file(DATA / "chat_typical.jsonl")
        assert again.already_imported and again.rollouts_added == 0
        with pytest.raises(IngestError):
            store.ingest_file(DATA / "chat_broken.jsonl")
        assert store.cursor().execute("SELECT count(*) FROM rollouts").fetchone() == (5,)
    finally:
        store.close()
