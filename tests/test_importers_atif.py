"""ATIF (Agent Trajectory Interchange Format, Harbor RFC 0001) trajectories -> rollouts."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from trace_store import IngestError, open_store
from trace_store.ingest import atif
from trace_store.ingest.files import head_bytes
from trace_store.ingest.registry import detect_format
from trace_store.ingest.validate import check_record

DATA = Path(__file__).parent / "data" / "importers" / "atif"


def convert(path: Path) -> list[dict[str, Any]]:
    records = list(atif.convert_folder(path))
    for record in records:
        assert list(check_record(record)) == [], record["rollout_id"]
    return records


@pytest.mark.parametrize("name", ["typical.json", "edge.jsonl", "broken.json"])
def test_detected(name: str) -> None:
    importer = detect_format(name, head_bytes(DATA / name))
    assert importer is not None and importer.name == "atif"


def test_typical_trajectory(store_path: Path) -> None:
    [record] = convert(DATA / "typical.json")
    assert record["run_id"] == "atif" and record["rollout_id"] == "sess-7f3a"
    assert [i["type"] for i in record["items"]] == [
        "message",
        "message",
        "reasoning",
        "message",
        "function_call",
        "function_call",
        "function_call_output",
        "function_call_output",
        "message",
    ]
    calls = [i for i in record["items"] if i["type"] == "function_call"]
    assert [json.loads(c["arguments"]) for c in calls] == [
        {"cmd": "wc -l data.csv"},
        {"cmd": "wc -l head.txt"},
    ]
    assert calls[0]["started_at"] == "2026-03-01T10:00:03Z"
    assert record["reward"] == 1.0 and record["model"] == "gpt-5-mini"
    assert record["final_answer"] == "data.csv has 120 lines and head.txt has 5."
    assert record["latency_ms"] == 9500.0
    assert record["usage"] == {"input_tokens": 2100, "output_tokens": 180, "reasoning_tokens": 40}
    assert record["metadata"]["cost_usd"] == 0.0031
    assert record["metadata"]["agent"] == {"name": "terminus-2", "version": "2.1.0"}
    assert record["metadata"]["missing"] == ["step"]
    with open_store(store_path) as store:
        result = store.ingest_file(DATA / "typical.json")
        assert result.format == "atif" and result.rollouts_added == 1
        row = store.query_df(
            "SELECT n_tool_calls, max_parallel_calls, n_turns, reward FROM rollouts"
        ).iloc[0]
        assert row["n_tool_calls"] == 2 and row["max_parallel_calls"] == 2 and row["reward"] == 1.0
        assert store.ingest_file(DATA / "typical.json").already_imported


def test_edge_cases_multimodal_errors_environment_subagents_no_reward() -> None:
    records = convert(DATA / "edge.jsonl")
    assert [r["rollout_id"] for r in records] == ["traj-0", "traj-1"]
    first = records[0]
    assert first["items"][0]["content"] == "Décris cette image ✓\n[image]"
    outputs = [i for i in first["items"] if i["type"] == "function_call_output"]
    assert outputs == [
        {"type": "function_call_output", "call_id": "t0", "output": "Error: permission denied"}
    ]
    env = [i["content"] for i in first["items"] if i["type"] == "message" and i["role"] == "user"]
    assert "[environment] container restarted" in env and "[subagent trajectory: sub-1]" in env
    assert "reward" not in first and first["metadata"]["missing"] == ["reward", "step"]
    assert first["metadata"]["subagent_trajectories"] == 1
    assert first["metadata"]["source_ids"]["session_id"] == "shared-run"


def test_harbor_job_folder_with_verifier_rewards(tmp_path: Path, store_path: Path) -> None:
    job = tmp_path / "jobs" / "2026-03-01__10-00-00"
    for trial, reward in (("task-a__x1", "1"), ("task-b__x2", "0.25")):
        agent = job / trial / "agent"
        agent.mkdir(parents=True)
        document = json.loads((DATA / "typical.json").read_text())
        del document["extra"]
        document["steps"][3]["observation"] = {
            "results": [{"source_call_id": None, "content": "x" * 250_000}]  # a huge output
        }
        (agent / "trajectory.json").write_text(json.dumps(document))
        (job / trial / "verifier").mkdir()
        (job / trial / "verifier" / "reward.txt").write_text(reward + "\n")
    (job / "task-b__x2" / "verifier" / "reward.json").write_text('{"tests": 0.5, "style": 0.0}')
    records = convert(job)
    assert [(r["run_id"], r["rollout_id"], r.get("reward")) for r in records] == [
        ("2026-03-01__10-00-00", "task-a__x1", 1.0),
        ("2026-03-01__10-00-00", "task-b__x2", 0.25),
    ]
    assert records[1]["grades"] == {"tests": 0.5, "style": 0.0}
    assert len(records[0]["items"][-1]["content"]) == 250_000
    with open_store(store_path) as store:
        result = store.ingest_file(job, format="atif")
        assert result.rollouts_added == 2 and result.run_ids == ["2026-03-01__10-00-00"]


def test_broken_file_names_the_field_and_changes_nothing(tmp_path: Path, store_path: Path) -> None:
    with open_store(store_path) as store:
        with pytest.raises(IngestError) as caught:
            store.ingest_file(DATA / "broken.json")
        assert caught.value.file == "broken.json"
        assert caught.value.field == "steps[2].tool_calls[1].function_name"
        bad_line = tmp_path / "two.jsonl"
        lines = (DATA / "edge.jsonl").read_text().splitlines()
        second = json.loads(lines[1])
        second["steps"][0]["source"] = "robot"
        bad_line.write_text(lines[0] + "\n" + json.dumps(second) + "\n")
        with pytest.raises(IngestError) as caught:
            store.ingest_file(bad_line)
        assert caught.value.line == 2 and caught.value.field == "steps[0].source"
        assert store.is_empty() and store.list_imports().empty
    not_atif = tmp_path / "other.json"
    not_atif.write_text('{"schema_version": "2.0", "steps": []}')
    with pytest.raises(IngestError, match="must name an ATIF version"):
        list(atif.convert(not_atif))
    shutil.rmtree(tmp_path / "empty", ignore_errors=True)
    (tmp_path / "empty").mkdir()
    with pytest.raises(IngestError, match="no ATIF trajectory files"):
        list(atif.convert_folder(tmp_path / "empty"))
