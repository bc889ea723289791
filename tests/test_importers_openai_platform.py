"""OpenAI Agents SDK trace exports and Evals API run output items."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from trace_store import IngestError, open_store
from trace_store.ingest import openai_agents, openai_evals
from trace_store.ingest.registry import detect_format
from trace_store.ingest.validate import check_record

DATA = Path(__file__).parent / "data" / "importers"
AGENTS = DATA / "openai_agents" / "agents_traces.jsonl"
EVALS = DATA / "openai_evals" / "output_items.jsonl"


def checked(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for record in records:
        assert list(check_record(record)) == [], record["rollout_id"]
    return records


def of_type(record: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [i for i in record["items"] if i["type"] == kind]


@pytest.mark.parametrize(("path", "expected"), [(AGENTS, "openai_agents"), (EVALS, "openai_evals")])
def test_detected(path: Path, expected: str) -> None:
    importer = detect_format(path.name, path.read_bytes()[:65536])
    assert importer is not None and importer.name == expected


def test_agents_trace_with_generation_and_function_spans() -> None:
    chat, responses_model = checked(list(openai_agents.convert(AGENTS)))
    assert chat["rollout_id"] == "trace_0123456789abcdef0123456789abcdef"
    assert (chat["reward"], chat["step"], chat["prompt_id"]) == (0.5, 3, "trip-7")
    assert chat["metadata"]["group_id"] == "chat-42" and chat["model"] == "gpt-4.1-mini"
    calls = of_type(chat, "function_call")
    assert [c["call_id"] for c in calls] == [
        "call_k",
        "call_z",
    ]  # parallel, from the generation span
    outputs = {o["call_id"]: o for o in of_type(chat, "function_call_output")}
    assert set(outputs) == {"call_k", "call_z"} and len(of_type(chat, "function_call_output")) == 2
    assert outputs["call_k"]["duration_ms"] == 500.0 and "error" not in outputs["call_k"]
    assert outputs["call_z"]["duration_ms"] == 2000.0
    assert outputs["call_z"]["error"] == "Error running tool (non-fatal): 503 Service Unavailable"
    assert chat["items"][-1]["content"] == "Kyōto: KIX 09:00. Zürich search failed."
    assert chat["usage"] == {"input_tokens": 320, "output_tokens": 55, "reasoning_tokens": 0}
    # A Responses model: the SDK exports no output items, only usage; function spans still give calls.
    assert [i["type"] for i in responses_model["items"]] == [
        "function_call",
        "function_call_output",
    ]
    assert responses_model["items"][1]["duration_ms"] == 250.0
    assert responses_model["reward"] == 1.0  # from the custom `reward` span
    assert responses_model["usage"]["reasoning_tokens"] == 4


def test_agents_broken() -> None:
    with pytest.raises(IngestError) as caught:
        list(openai_agents.convert(DATA / "openai_agents" / "agents_broken.jsonl"))
    assert (caught.value.line, caught.value.field) == (2, "trace_id")


def test_eval_output_items() -> None:
    passed, failed, errored = checked(list(openai_evals.convert(EVALS)))
    assert passed["run_id"] == "evalrun_123" and passed["rollout_id"] == "outputitem_0"
    assert (
        passed["reward"] == 1.0 and passed["reference"] == "Vienna" and passed["prompt_id"] == "0"
    )
    assert [i.get("role") for i in passed["items"]] == ["system", "user", "assistant"]
    assert failed["grades"] == [
        {"name": "string_check", "score": 0.0},
        {"name": "model_grader", "score": 0.5},
    ]
    assert failed["reward"] == 0.25 and failed["items"][-1]["content"] == "Wien 🇦🇹"
    assert errored["status"] == "error" and errored["metadata"]["missing"] == ["reward", "step"]
    assert errored["reference"] == "Vienna"
    assert passed["usage"] == {"input_tokens": 20, "output_tokens": 3, "reasoning_tokens": 0}


def test_eval_output_items_broken() -> None:
    with pytest.raises(IngestError) as caught:
        list(openai_evals.convert(DATA / "openai_evals" / "output_items_broken.jsonl"))
    assert (caught.value.line, caught.value.field) == (2, "results[0].score")


def test_end_to_end(tmp_path: Path) -> None:
    store = open_store(tmp_path / "t.duckdb")
    try:
        assert store.ingest_file(AGENTS).rollouts_added == 2
        assert store.ingest_file(EVALS).rollouts_added == 3
        rows = (
            store.cursor()
            .execute(
                "SELECT run_id, count(*), sum(n_tool_calls), sum(n_tool_errors) FROM rollouts GROUP BY 1 ORDER BY 1"
            )
            .fetchall()
        )
        assert rows == [("agents_traces", 2, 3, 1), ("evalrun_123", 3, 0, 0)]
    finally:
        store.close()
