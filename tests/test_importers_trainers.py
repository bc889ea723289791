"""RL trainer dumps: verl rollout JSONL folders and TRL GRPO completions Parquet folders."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from trace_store import IngestError, open_store
from trace_store.ingest import trl, verl
from trace_store.ingest.files import head_bytes
from trace_store.ingest.registry import detect_format
from trace_store.ingest.validate import check_record

DATA = Path(__file__).parent / "data" / "importers" / "verl"


def checked(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for record in records:
        assert list(check_record(record)) == [], record["rollout_id"]
    return records


def test_verl_folder_is_one_run_of_steps() -> None:
    folder = DATA / "grpo_rollouts"
    assert detect_format(folder.name, b"").name == "verl"  # type: ignore[union-attr]
    file = folder / "1.jsonl"
    assert detect_format(file.name, head_bytes(file)).name == "verl"  # type: ignore[union-attr]
    records = checked(list(verl.convert(folder)))
    assert len(records) == 5 and {r["run_id"] for r in records} == {"grpo_rollouts"}
    assert [r["step"] for r in records] == [1, 1, 1, 2, 2]
    assert [r["reward"] for r in records] == [1.0, 0.0, 0.5, 1.0, -1.0]
    first, second, third, fourth, fifth = records
    assert first["prompt_id"] == second["prompt_id"] == fifth["prompt_id"] != third["prompt_id"]
    assert [first["sample_index"], second["sample_index"], fifth["sample_index"]] == [0, 1, 0]
    assert first["reference"] == "5" and first["metadata"]["extra"] == {"acc": True, "pred": "5"}
    assert first["items"][1]["content"].startswith("<think>")
    assert (
        fourth["items"][1]["content"] == "bonjour 👋"
        and fourth["reference"] == '["bonjour", "Bonjour"]'
    )
    assert len(fifth["final_answer"]) == 100000
    assert first["metadata"]["source_ids"] == {"file": "1.jsonl", "line": 1}
    assert "missing" not in first["metadata"]


def test_verl_broken_line() -> None:
    with pytest.raises(IngestError) as caught:
        list(verl.convert(DATA / "broken"))
    assert (caught.value.file, caught.value.line, caught.value.field) == ("3.jsonl", 2, "score")


def write_completions(folder: Path, step: int, rows: dict[str, list[Any]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"completions_{step:05d}.parquet"
    pq.write_table(pa.table(rows), path)
    return path


def test_trl_completions_folder(tmp_path: Path) -> None:
    folder = tmp_path / "qwen-grpo" / "completions"
    write_completions(
        folder,
        10,
        {
            "step": [10, 10, 10],
            "prompt": ["Solve 1+1", "Solve 1+1", "Dis «salut»"],
            "completion": ["2", "3", "salut 👋"],
            "accuracy_reward": [1.0, 0.0, 1.0],
            "format_reward": [0.5, 0.5, None],
            "advantage": [0.7, -0.7, 0.0],
        },
    )
    write_completions(
        folder,
        20,
        {
            "step": [20],
            "prompt": [
                [
                    {"role": "system", "content": "Be brief."},
                    {"role": "user", "content": "Solve 2+2"},
                ]
            ],
            "completion": [[{"role": "assistant", "content": "4"}]],
            "accuracy_reward": [1.0],
            "format_reward": [1.0],
            "advantage": [0.0],
        },
    )
    assert detect_format("completions", b"").name == "trl"  # type: ignore[union-attr]
    file = folder / "completions_00010.parquet"
    assert detect_format(file.name, head_bytes(file)).name == "trl"  # type: ignore[union-attr]
    records = checked(list(trl.convert(folder)))
    assert [r["run_id"] for r in records] == ["qwen-grpo"] * 4
    assert [r["step"] for r in records] == [10, 10, 10, 20]
    assert [r["reward"] for r in records] == [1.5, 0.5, 1.0, 2.0]
    assert records[0]["grades"] == {"accuracy_reward": 1.0, "format_reward": 0.5}
    assert records[2]["grades"] == {"accuracy_reward": 1.0}  # a reward function that returned None
    assert [r["sample_index"] for r in records[:2]] == [0, 1]
    assert records[0]["metadata"]["advantage"] == 0.7
    assert "reward_weights" in records[0]["metadata"]["missing"]
    assert [i["role"] for i in records[3]["items"]] == ["system", "user", "assistant"]
    assert records[2]["items"][1]["content"] == "salut 👋"


def test_trl_broken_files(tmp_path: Path) -> None:
    folder = tmp_path / "completions"
    write_completions(folder, 1, {"step": [1], "prompt": ["p"], "reward": [1.0]})
    with pytest.raises(IngestError) as caught:
        list(trl.convert(folder))
    assert caught.value.field == "completion" and caught.value.file == "completions_00001.parquet"
    junk = tmp_path / "completions_00002.parquet"
    junk.write_bytes(b"PAR1 not really")
    with pytest.raises(IngestError, match="not a readable Parquet file"):
        list(trl.convert(junk))


def test_end_to_end_verl_folder(tmp_path: Path) -> None:
    store = open_store(tmp_path / "t.duckdb")
    try:
        result = store.ingest_file(DATA / "grpo_rollouts")
        assert (result.format, result.rollouts_added, result.run_ids) == (
            "verl",
            5,
            ["grpo_rollouts"],
        )
        steps = (
            store.cursor()
            .execute("SELECT step, count(*), avg(reward) FROM rollouts GROUP BY step ORDER BY step")
            .fetchall()
        )
        assert steps == [(1, 3, 0.5), (2, 2, 0.0)]
    finally:
        store.close()
