"""SWE-agent and mini-swe-agent trajectory files -> one canonical rollout per file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from trace_store import IngestError, open_store
from trace_store.ingest import mini_swe_agent, swe_agent
from trace_store.ingest.registry import detect_format
from trace_store.ingest.validate import check_record

DATA = Path(__file__).parent / "data" / "importers"
SAMPLES = Path(__file__).parents[2] / "shared" / "samples"
SWE_V1 = DATA / "swe_agent" / "run-gpt5" / "astropy__astropy-1" / "astropy__astropy-1.traj"
MINI = DATA / "mini_swe_agent" / "batch-7" / "django__django-2" / "django__django-2.traj.json"


def one(module: Any, path: Path) -> dict[str, Any]:
    (record,) = list(module.convert(path))
    assert list(check_record(record)) == []
    return record


def of_type(record: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [i for i in record["items"] if i["type"] == kind]


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        (SWE_V1, "swe_agent"),
        (DATA / "swe_agent" / "legacy_case.traj", "swe_agent"),
        (MINI, "mini_swe_agent"),
        (DATA / "mini_swe_agent" / "toolcalling.traj.json", "mini_swe_agent"),
    ],
)
def test_detected_by_the_registry(path: Path, expected: str) -> None:
    importer = detect_format(path.name, path.read_bytes()[:65536])
    assert importer is not None and importer.name == expected


def test_swe_agent_v1_calls_durations_and_run_layout() -> None:
    record = one(swe_agent, SWE_V1)
    assert (record["run_id"], record["rollout_id"]) == ("run-gpt5", "astropy__astropy-1")
    assert (
        record["model"] == "gpt-5" and record["status"] == "timeout"
    )  # submitted on the cost limit
    assert record["items"][1]["content"].endswith("空 input 🙁")
    calls = of_type(record, "function_call")
    assert [(c["call_id"], c["name"]) for c in calls] == [
        ("call_1", "find_file"),
        ("call_2", "edit"),
        ("call_3", "submit"),
    ]
    assert json.loads(calls[1]["arguments"]) == {
        "start": 3,
        "end": 3,
        "replacement": "    return 0",
    }
    outputs = of_type(record, "function_call_output")
    assert [o["duration_ms"] for o in outputs] == [250.0, 1500.0, 125.0]
    assert [o["call_id"] for o in outputs] == ["call_1", "call_2", "call_3"]
    assert record["final_answer"].startswith("diff --git")
    assert record["usage"] == {"input_tokens": 12000, "output_tokens": 800, "reasoning_tokens": 0}
    assert record["metadata"]["exit_status"] == "submitted (exit_cost)"
    assert record["metadata"]["missing"] == ["reward", "step"]


def test_swe_agent_legacy_demo_and_format_error() -> None:
    record = one(swe_agent, DATA / "swe_agent" / "legacy_case.traj")
    assert record["status"] == "error" and record["metadata"]["format_version"] == "legacy"
    assert [i["type"] for i in record["items"]] == [
        "message",  # system
        "message",  # demonstration
        "message",  # issue
        "message",  # thought
        "function_call",
        "function_call_output",
        "message",  # thought without a command
        "message",  # the format-error observation
    ]
    (call,) = of_type(record, "function_call")
    assert call["name"] == "ls" and json.loads(call["arguments"]) == {"command": "ls"}
    assert "duration_ms" not in of_type(record, "function_call_output")[0]


def test_swe_agent_broken() -> None:
    with pytest.raises(IngestError) as caught:
        list(swe_agent.convert(DATA / "swe_agent" / "broken.traj"))
    assert caught.value.field == "trajectory" and "broken.traj" in str(caught.value)


def test_mini_swe_agent_text_based() -> None:
    record = one(mini_swe_agent, MINI)
    assert (record["run_id"], record["rollout_id"]) == ("batch-7", "django__django-2")
    assert record["model"] == "anthropic/claude-sonnet-4-5" and record["status"] == "ok"
    assert record["final_answer"] == "diff --git a/x b/x"
    calls = of_type(record, "function_call")
    assert [json.loads(c["arguments"])["command"] for c in calls] == [
        "pytest -q",
        "sleep 1000",
        "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git diff",
    ]
    outputs = of_type(record, "function_call_output")
    assert [o.get("duration_ms") for o in outputs] == [3500.0, 60000.0]
    assert outputs[1]["error"].startswith("TimeoutExpired")
    assert "error" not in outputs[0]  # a non-zero return code is output, not a tool failure
    # the command-less reply and the format-error message stay plain messages
    assert (
        record["items"][-3]["content"]
        == "Please always provide EXACTLY ONE action in triple backticks."
    )
    assert record["started_at"] == "2025-10-09T08:53:20Z"


def test_mini_swe_agent_tool_calling_and_responses_objects() -> None:
    record = one(mini_swe_agent, DATA / "mini_swe_agent" / "toolcalling.traj.json")
    assert record["status"] == "timeout" and record["model"] == "gpt-5-mini"
    calls = of_type(record, "function_call")
    assert [c["call_id"] for c in calls] == ["tc_1", "tc_2", "fc_9"]
    outputs = {o["call_id"]: o for o in of_type(record, "function_call_output")}
    assert outputs["tc_2"]["error"] == "FileNotFoundError" and outputs["fc_9"]["output"] == "clean"
    assert record["usage"] == {"input_tokens": 100, "output_tokens": 40, "reasoning_tokens": 30}
    assert of_type(record, "reasoning")[0]["summary"] == [{"text": "Check git."}]


def test_mini_swe_agent_broken() -> None:
    with pytest.raises(IngestError) as caught:
        list(mini_swe_agent.convert(DATA / "mini_swe_agent" / "broken.traj.json"))
    assert caught.value.field == "messages[1]"


def test_mini_swe_agent_huge_observation(tmp_path: Path) -> None:
    big = "line\n" * 400_000
    messages = [
        {"role": "user", "content": "task"},
        {"role": "assistant", "content": "```bash\ncat big.log\n```"},
        {"role": "user", "content": big},
    ]
    path = tmp_path / "huge.traj.json"
    path.write_text(json.dumps(messages))
    record = one(mini_swe_agent, path)
    assert of_type(record, "function_call_output")[0]["output"] == big


@pytest.mark.skipif(not SAMPLES.is_dir(), reason="../shared/samples is absent")
def test_real_swe_agent_files() -> None:
    folder = SAMPLES / "swe_agent"
    v1 = one(swe_agent, folder / "6e44b9__sweagenttestrepo-1c2844.traj")
    assert len(of_type(v1, "function_call")) == 5
    assert all(o["duration_ms"] > 0 for o in of_type(v1, "function_call_output"))
    assert v1["usage"]["input_tokens"] == 7141
    replay = one(swe_agent, folder / "marshmallow-code__marshmallow-1867.function_calling.traj")
    assert len(of_type(replay, "function_call")) == 11
    legacy = one(swe_agent, folder / "pydicom__pydicom-1458.legacy_v0.traj")
    assert len(of_type(legacy, "function_call")) == 12 and legacy["final_answer"].startswith(
        "\ndiff"
    )
    for record in (v1, replay, legacy):
        calls = {c["call_id"] for c in of_type(record, "function_call")}
        assert calls == {o["call_id"] for o in of_type(record, "function_call_output")}


@pytest.mark.skipif(not SAMPLES.is_dir(), reason="../shared/samples is absent")
def test_real_mini_swe_agent_legacy_list() -> None:
    path = SAMPLES / "mini_swe_agent" / "github_issue.traj.json"
    assert detect_format(path.name, path.read_bytes()[:65536]).name == "mini_swe_agent"  # type: ignore[union-attr]
    record = one(mini_swe_agent, path)
    assert len(of_type(record, "function_call")) == 10
    assert record["final_answer"].startswith("diff --git a/tests/missing_colon.py")


def test_end_to_end_counts(tmp_path: Path) -> None:
    store = open_store(tmp_path / "t.duckdb")
    try:
        assert store.ingest_file(SWE_V1).rollouts_added == 1
        assert store.ingest_file(MINI).rollouts_added == 1
        rows = (
            store.cursor()
            .execute(
                "SELECT run_id, n_tool_calls, n_tool_errors, status FROM rollouts ORDER BY run_id"
            )
            .fetchall()
        )
        assert rows == [("batch-7", 3, 1, "ok"), ("run-gpt5", 3, 0, "timeout")]
    finally:
        store.close()
