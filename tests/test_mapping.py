"""User-defined field mappings for unknown JSONL: paths, preview, saved mappings, import."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from trace_store import IngestError, open_store
from trace_store.ingest.mapping import (
    FieldMapping,
    MappingError,
    delete_mapping,
    first_record,
    format_path,
    ingest_with_mapping,
    list_mappings,
    load_mapping,
    parse_path,
    preview,
    preview_table,
    save_mapping,
    suggest,
)
from trace_store.ingest.validate import check_record

SPEC = {
    "rollout_id": "$.meta.uid",
    "run_id": "$.meta.experiment",
    "step": "$.meta.iter",
    "reward": "$.scores.total",
    "messages": "$.conversation.turns",
    "final_answer": '$.result["final answer"]',
    "prompt_id": "$.meta.task",
}


def line(index: int, **overrides: Any) -> dict[str, Any]:
    record: dict[str, Any] = {
        "meta": {
            "uid": f"r-{index}",
            "experiment": "exp-a",
            "iter": index // 2,
            "task": f"t{index % 2}",
        },
        "scores": {"total": index / 10},
        "conversation": {
            "turns": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": f"What is {index} × 2? ✓"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": f"c{index}a",
                            "type": "function",
                            "function": {"name": "calc", "arguments": '{"x": 1}'},
                        },
                        {
                            "id": f"c{index}b",
                            "type": "function",
                            "function": {"name": "calc", "arguments": '{"x": 2}'},
                        },
                    ],
                },
                {"role": "tool", "tool_call_id": f"c{index}a", "content": str(index * 2)},
                {"role": "tool", "tool_call_id": f"c{index}b", "content": "error: overflow"},
                {"role": "assistant", "content": str(index * 2)},
            ]
        },
        "result": {"final answer": str(index * 2)},
    }
    record.update(overrides)
    return record


def write(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8"
    )
    return path


def test_paths_parse_and_print() -> None:
    assert parse_path('$.a.b[0]["x.y"]') == ("a", "b", 0, "x.y")
    assert parse_path("a.b") == ("a", "b")
    assert format_path(("a", 0, "x y")) == '$.a[0]["x y"]'
    with pytest.raises(MappingError, match="not valid at character"):
        parse_path("$.a..b", "reward")
    with pytest.raises(MappingError, match="needs a path for `messages`"):
        FieldMapping(rollout_id="$.id", messages="")
    with pytest.raises(MappingError, match="unknown mapping field"):
        FieldMapping.from_spec({"rollout_id": "$.id", "messages": "$.m", "rewrd": "$.r"})


def test_good_mapping_converts_and_imports(tmp_path: Path, store_path: Path) -> None:
    source = write(tmp_path / "custom_logs.jsonl", [line(i) for i in range(6)])
    mapping = FieldMapping.from_spec(SPEC)
    records = preview(source, mapping, n=10)
    assert len(records) == 6
    for record in records:
        assert list(check_record(record)) == []
    first = records[1]
    assert first["run_id"] == "exp-a" and first["rollout_id"] == "r-1" and first["step"] == 0
    assert first["reward"] == 0.1 and first["final_answer"] == "2" and first["prompt_id"] == "t1"
    assert [i["type"] for i in first["items"]] == [
        "message",
        "message",
        "function_call",
        "function_call",
        "function_call_output",
        "function_call_output",
        "message",
    ]
    with open_store(store_path) as store:
        result = ingest_with_mapping(store, source, mapping, mapping_name="my-logs")
        assert result.rollouts_added == 6 and result.run_ids == ["exp-a"]
        assert result.format == "mapping:my-logs"
        rows = store.query_df(
            "SELECT step, max_parallel_calls, reward FROM rollouts ORDER BY rollout_id"
        )
        assert rows["step"].tolist() == [0, 0, 1, 1, 2, 2] and set(rows["max_parallel_calls"]) == {
            2
        }
        again = ingest_with_mapping(store, source, mapping, mapping_name="my-logs")
        assert again.already_imported
        assert store.query_df("SELECT count(*) AS n FROM rollouts")["n"][0] == 6


def test_a_missing_path_names_the_line_and_the_path(tmp_path: Path, store_path: Path) -> None:
    records = [line(0), line(1), line(2, scores={"partial": 0.5}), line(3)]
    source = write(tmp_path / "logs.jsonl", records)
    mapping = FieldMapping.from_spec(SPEC)
    with pytest.raises(IngestError) as caught:
        preview(source, mapping)
    error = caught.value
    assert error.line == 3 and error.file == "logs.jsonl" and error.field == "$.scores.total"
    assert "`reward` path $.scores.total not found" in str(error)
    assert "no key 'total' in $.scores" in str(error)
    with open_store(store_path) as store:
        with pytest.raises(IngestError, match="line 3"):
            ingest_with_mapping(store, source, mapping)
        assert store.is_empty() and store.list_imports().empty
    # allow_missing: optional fields may be absent; the reward is then recorded as missing
    lenient = FieldMapping.from_spec({**SPEC, "allow_missing": True})
    third = preview(source, lenient)[2]
    assert "reward" not in third and "reward" in third["metadata"]["missing"]
    # ... but never the required ones
    broken = write(tmp_path / "broken.jsonl", [line(0), {"meta": {"uid": "x"}}])
    with pytest.raises(IngestError) as caught:
        preview(broken, lenient)
    assert caught.value.line == 2 and caught.value.field == "$.conversation.turns"
    # a value of the wrong type names its path too
    typed = write(tmp_path / "typed.jsonl", [line(0, scores={"total": "high"})])
    with pytest.raises(IngestError, match=r"\$\.scores\.total.*must be a number"):
        preview(typed, mapping)


def test_preview_returns_the_first_rollouts_and_a_table(tmp_path: Path) -> None:
    source = write(tmp_path / "many.jsonl", [line(i) for i in range(50)] + [{"broken": True}])
    mapping = FieldMapping.from_spec(SPEC)
    records = preview(source, mapping, n=3)  # the bad last line is never read
    assert [r["rollout_id"] for r in records] == ["r-0", "r-1", "r-2"]
    table = preview_table(records)
    assert table.columns.tolist() == [
        "run_id",
        "rollout_id",
        "step",
        "reward",
        "messages",
        "tool_calls",
        "prompt",
        "final_answer",
        "missing",
    ]
    assert table["tool_calls"].tolist() == [2, 2, 2]
    assert table["prompt"][1] == "What is 1 × 2? ✓"
    # a JSON array file and suggestions from the first record
    array = tmp_path / "array.json"
    array.write_text(
        json.dumps([{"id": 7, "messages": [{"role": "user", "content": "hi"}], "score": 1}])
    )
    guessed = suggest(first_record(array))
    assert guessed == {"rollout_id": "$.id", "messages": "$.messages", "reward": "$.score"}
    [only] = preview(array, FieldMapping.from_spec(guessed))
    assert only["rollout_id"] == "7" and only["run_id"] == "array" and only["reward"] == 1.0


def test_saved_mappings_round_trip(store_path: Path) -> None:
    mapping = FieldMapping.from_spec({**SPEC, "run_name": "fallback", "split": "eval"})
    with open_store(store_path) as store:
        save_mapping(store, "my-logs", mapping)
        assert list_mappings(store)["name"].tolist() == ["my-logs"]
        loaded = load_mapping(store, "my-logs")
        assert loaded == mapping and loaded.split == "eval"
        save_mapping(store, "my-logs", FieldMapping.from_spec(SPEC))  # replace
        assert load_mapping(store, "my-logs").split == "train"
        with pytest.raises(MappingError, match="no saved mapping named 'other'"):
            load_mapping(store, "other")
        with pytest.raises(MappingError, match="give the mapping a name"):
            save_mapping(store, "  ", mapping)
        delete_mapping(store, "my-logs")
        assert list_mappings(store).empty
