"""OpenPipe ART trajectory files -> rollouts. The files are written here, with pyarrow/json/yaml,
to the schema ART's writer uses (art/utils/trajectory_logging.py in openpipe-art 0.5.18)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from trace_store import IngestError, open_store
from trace_store.ingest import art
from trace_store.ingest.files import head_bytes
from trace_store.ingest.registry import detect_format, importers
from trace_store.ingest.validate import check_record

MESSAGE = pa.struct(
    [
        ("role", pa.string()),
        ("content", pa.string()),
        ("tool_calls", pa.string()),
        ("tool_call_id", pa.string()),
        ("trainable", pa.bool_()),
    ]
)
SCHEMA = pa.schema(
    [
        ("group_index", pa.int64()),
        ("group_metadata", pa.string()),
        ("group_metrics", pa.string()),
        ("group_logs", pa.list_(pa.string())),
        ("reward", pa.float64()),
        ("metrics", pa.string()),
        ("metadata", pa.string()),
        ("tools", pa.string()),
        ("logs", pa.list_(pa.string())),
        ("messages", pa.list_(MESSAGE)),
    ]
)
TOOLS = [{"type": "function", "function": {"name": "search", "parameters": {"type": "object"}}}]


def msg(role: str, content: str | None, **extra: Any) -> dict[str, Any]:
    row = {"role": role, "content": content, "tool_calls": None, "tool_call_id": None}
    row["trainable"] = role == "assistant"
    row.update(extra)
    return row


def call(call_id: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args)},
    }


def trajectory_rows(step: int, *, edge: bool = False) -> list[dict[str, Any]]:
    rows = []
    for group in range(2):
        question = f"Question {group}: where is the ✓ café?"
        for sample in range(3):
            messages = [
                msg("system", "You are a search agent."),
                msg("user", question),
                msg(
                    "assistant",
                    None,
                    tool_calls=json.dumps([call(f"c{sample}a", "search", {"q": "café"})]),
                ),
                msg("tool", "Rue de Rivoli", tool_call_id=f"c{sample}a"),
                msg("assistant", f"Answer {sample}"),
            ]
            rows.append(
                {
                    "group_index": group,
                    "group_metadata": json.dumps({"scenario": f"s{group}"}),
                    "group_metrics": None,
                    "group_logs": None,
                    "reward": (sample + group) / 4 + step / 100,
                    "metrics": json.dumps({"duration": 1.5 + sample, "correct": sample % 2}),
                    "metadata": json.dumps({"scenario_id": f"s{group}"}),
                    "tools": json.dumps(TOOLS),
                    "logs": ["started", "done"],
                    "messages": messages,
                }
            )
    if edge:
        parallel = [
            msg("user", "Compare Paris and 東京"),
            msg(
                "assistant",
                None,
                tool_calls=json.dumps(
                    [
                        call("p1", "weather", {"city": "Paris"}),
                        call("p2", "weather", {"city": "東京"}),
                    ]
                ),
            ),
            msg("tool", "x" * 300_000, tool_call_id="p2"),  # a huge output, answered out of order
            msg("tool", "Error: city not found", tool_call_id="p1"),
            msg("assistant", "Paris is unknown; 東京 is warm."),
        ]
        rows.append(
            {
                "group_index": 2,
                "group_metadata": None,
                "group_metrics": json.dumps({"difficulty": 0.5}),
                "group_logs": ["g"],
                "reward": None,  # missing reward
                "metrics": None,
                "metadata": None,
                "tools": None,
                "logs": None,
                "messages": parallel,
            }
        )
    return rows


def write_parquet(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=SCHEMA), path, compression="zstd")
    return path


@pytest.fixture
def art_model(tmp_path: Path) -> Path:
    """A model folder as ART writes it: trajectories/train/000{0,1,2}.parquet, trajectories/val/0002.parquet."""
    model = tmp_path / ".art" / "proj" / "models" / "agent-7"
    for step in range(3):
        write_parquet(
            model / "trajectories" / "train" / f"{step:04d}.parquet", trajectory_rows(step)
        )
    write_parquet(model / "trajectories" / "val" / "0002.parquet", trajectory_rows(2, edge=True))
    (model / "history.jsonl").write_text('{"step": 2, "train/reward": 0.5}\n')
    return model


def convert_all(path: Path) -> list[dict[str, Any]]:
    records = list(art.convert(path))
    for record in records:
        assert list(check_record(record)) == [], record["rollout_id"]
    return records


def test_detection_of_files_and_the_trajectories_folder(art_model: Path, tmp_path: Path) -> None:
    folder = art_model / "trajectories"
    file = folder / "train" / "0001.parquet"
    for path in (folder, file):
        claimed = [i.name for i in importers() if i.detect(path.name, head_bytes(path))]
        assert claimed == ["art"], path
    importer = detect_format(file.name, head_bytes(file))
    assert importer is not None and importer.name == "art"


def test_folder_imports_as_one_run_with_steps_splits_and_groups(
    art_model: Path, store_path: Path
) -> None:
    records = convert_all(art_model / "trajectories")
    assert {r["run_id"] for r in records} == {"agent-7"}
    assert len(records) == 3 * 6 + 7
    first = records[0]
    assert (
        first["rollout_id"] == "train-0000-g0-t0"
        and first["step"] == 0
        and first["split"] == "train"
    )
    assert [i["type"] for i in first["items"]] == [
        "message",
        "message",
        "function_call",
        "function_call_output",
        "message",
    ]
    assert first["items"][2]["name"] == "search" and json.loads(first["items"][2]["arguments"]) == {
        "q": "café"
    }
    assert first["latency_ms"] == 1500.0
    assert first["metadata"]["metrics"] == {"duration": 1.5, "correct": 0}
    assert first["metadata"]["art_metadata"] == {"scenario_id": "s0"}
    assert first["metadata"]["tools"] == ["search"]
    # one prompt id per group, the same in every step; sample_index is the place in the group
    group0 = [
        r
        for r in records
        if r["rollout_id"].endswith(("g0-t0", "g0-t1", "g0-t2")) and r["split"] == "train"
    ]
    assert len({r["prompt_id"] for r in group0}) == 1 and len(group0) == 9
    assert sorted({r["sample_index"] for r in group0}) == [0, 1, 2]
    val = [r for r in records if r["split"] == "eval"]
    assert len(val) == 7 and {r["step"] for r in val} == {2}
    with open_store(store_path) as store:
        result = store.ingest_file(art_model / "trajectories")
        assert (
            result.format == "art" and result.rollouts_added == 25 and result.run_ids == ["agent-7"]
        )
        runs = store.list_runs().set_index("run_id")
        assert runs.loc["agent-7", "min_step"] == 0 and runs.loc["agent-7", "max_step"] == 2
        again = store.ingest_file(art_model / "trajectories")
        assert again.already_imported
        assert store.query_df("SELECT count(*) AS n FROM rollouts")["n"][0] == 25


def test_edge_cases_parallel_calls_errors_missing_reward_huge_output(
    art_model: Path, store_path: Path
) -> None:
    [edge] = [
        r
        for r in convert_all(art_model / "trajectories" / "val" / "0002.parquet")
        if "g2" in r["rollout_id"]
    ]
    assert edge["run_id"] == "agent-7" and edge["split"] == "eval"
    assert "reward" not in edge and "reward" in edge["metadata"]["missing"]
    calls = [i for i in edge["items"] if i["type"] == "function_call"]
    outputs = {
        i["call_id"]: i["output"] for i in edge["items"] if i["type"] == "function_call_output"
    }
    assert [c["call_id"] for c in calls] == ["p1", "p2"]
    assert len(outputs["p2"]) == 300_000 and outputs["p1"].startswith("Error")
    assert edge["metadata"]["group"]["metrics"] == {"difficulty": 0.5}
    with open_store(store_path) as store:
        store.ingest_file(art_model / "trajectories" / "val" / "0002.parquet")
        row = store.query_df(
            "SELECT max_parallel_calls, n_tool_calls, reward FROM rollouts WHERE rollout_id = 'eval-0002-g2-t0'"
        ).iloc[0]
        assert row["max_parallel_calls"] == 2 and row["n_tool_calls"] == 2
        assert row["reward"] != row["reward"]  # NULL -> NaN


def legacy_group(step: int) -> dict[str, Any]:
    return {
        "trajectories": [
            {
                "reward": 0.5 * i,
                "metrics": {"duration": 2.0},
                "metadata": {},
                "messages_and_choices": [
                    {"role": "user", "content": "2+2?"},
                    {
                        "finish_reason": "tool_calls",
                        "index": 0,
                        "message": {
                            "role": "assistant",
                            "content": None,
                            "tool_calls": [call("k1", "calc", {"expr": "2+2"})],
                        },
                    },
                    {"role": "tool", "tool_call_id": "k1", "content": "4"},
                    {
                        "finish_reason": "stop",
                        "index": 0,
                        "message": {"role": "assistant", "content": "4"},
                    },
                ],
                "tools": None,
                "additional_histories": [],
                "logs": [],
            }
            for i in range(2)
        ]
    }


def test_older_jsonl_and_yaml_files(tmp_path: Path, store_path: Path) -> None:
    train = tmp_path / "models" / "old-model" / "trajectories" / "train"
    train.mkdir(parents=True)
    jsonl = train / "0003.jsonl"
    jsonl.write_text("\n".join(json.dumps(legacy_group(3)) for _ in range(2)) + "\n")
    yml = train / "0004.yaml"
    yml.write_text(yaml.safe_dump([legacy_group(4)], allow_unicode=True))
    for path in (jsonl, yml):
        importer = detect_format(path.name, head_bytes(path))
        assert importer is not None and importer.name == "art", path
    records = convert_all(jsonl)
    assert len(records) == 4 and {r["run_id"] for r in records} == {"old-model"}
    assert [r["rollout_id"] for r in records][:3] == [
        "train-0003-g0-t0",
        "train-0003-g0-t1",
        "train-0003-g1-t0",
    ]
    assert [i["type"] for i in records[1]["items"]] == [
        "message",
        "function_call",
        "function_call_output",
        "message",
    ]
    assert records[1]["reward"] == 0.5
    yaml_records = convert_all(yml)
    assert len(yaml_records) == 2 and yaml_records[0]["step"] == 4
    with open_store(store_path) as store:
        result = store.ingest_file(train.parent)
        assert result.rollouts_added == 6 and result.run_ids == ["old-model"]


def test_broken_files_say_where_and_change_nothing(
    art_model: Path, tmp_path: Path, store_path: Path
) -> None:
    rows = trajectory_rows(5)
    rows[4]["messages"][2]["tool_calls"] = '[{"id": "c1", "function": '  # truncated JSON
    bad = write_parquet(tmp_path / "broken" / "trajectories" / "train" / "0005.parquet", rows)
    with pytest.raises(IngestError) as caught:
        list(art.convert(bad))
    assert caught.value.file == "0005.parquet"
    assert caught.value.field == "row 4.messages[2].tool_calls"
    rows = trajectory_rows(6)
    rows[1]["reward"] = None
    rows[1]["metrics"] = '{"duration": "long"'
    bad_metrics = write_parquet(tmp_path / "broken2" / "0006.parquet", rows)
    with pytest.raises(IngestError, match=r"row 1\.metrics"):
        list(art.convert(bad_metrics))
    not_parquet = tmp_path / "broken3" / "0007.parquet"
    not_parquet.parent.mkdir()
    not_parquet.write_bytes(b"PAR1 this is not a parquet file")
    jsonl = tmp_path / "broken4" / "0008.jsonl"
    jsonl.parent.mkdir()
    jsonl.write_text(
        json.dumps(legacy_group(8))
        + "\n"
        + '{"trajectories": [{"reward": "high", "messages_and_choices": []}]}\n'
    )
    with open_store(store_path) as store:
        with pytest.raises(IngestError, match="not a readable Parquet file"):
            store.ingest_file(not_parquet)
        with pytest.raises(IngestError) as caught:
            store.ingest_file(jsonl)
        assert caught.value.line == 2 and caught.value.field == "trajectories[0].reward"
        with pytest.raises(IngestError):
            store.ingest_file(bad.parent.parent)
        assert store.is_empty() and store.list_imports().empty
