"""Fine-tuning job `metrics` events -> the step_metrics table, on a real store."""

from __future__ import annotations

from pathlib import Path

import pytest

from trace_store import IngestError, Store, open_store
from trace_store.ingest import openai_finetune
from trace_store.ingest.registry import detect_format
from trace_store.metrics import StepMetricsResult, step_metric_names, step_metrics_by_step

DATA = Path(__file__).parent / "data" / "importers" / "openai_finetune"


def table_rows(store_path: Path) -> int:
    with open_store(store_path) as store:
        return int(store.query_df("SELECT count(*) AS n FROM step_metrics")["n"][0])


@pytest.mark.parametrize("name", ["ftjob-rft7.jsonl", "ftjob-sft2.json", "ftjob-broken.jsonl"])
def test_registry_detects_metrics_events(name: str) -> None:
    importer = detect_format(name, (DATA / name).read_bytes()[:65536])
    assert importer is not None and importer.name == "openai_finetune"
    assert importer.writes_step_metrics


def test_rft_events_give_reward_curves_per_split_and_grader(store_path: Path) -> None:
    with open_store(store_path) as store:
        result = store.ingest_file(DATA / "ftjob-rft7.jsonl")
        assert result.format == "openai_finetune" and result.run_ids == ["ftjob-rft7"]
        assert result.rollouts_added == 0 and "step metrics added for 4 steps" in result.summary()
        runs = store.list_runs()
        assert runs["run_id"].tolist() == ["ftjob-rft7"] and runs["rollouts"].tolist() == [0]
        frame = step_metrics_by_step(store, ["ftjob-rft7"], metrics=["reward_mean"])
        train = frame[frame["split"] == "train"]
        assert train["step"].tolist() == [1, 2, 3, 4]
        assert train["value"].round(3).tolist() == [0.6, 0.65, 0.7, 0.75]
        assert set(train["source"]) == {f"ftevent-rft7-00{s}" for s in (1, 2, 3, 4)}
        valid = frame[frame["split"] == "eval"]
        assert valid["step"].tolist() == [2, 4]  # validation ran on even steps only
        middle = step_metrics_by_step(
            store, ["ftjob-rft7"], metrics=["reward_mean"], splits=["train"], steps=(2, 3)
        )
        assert middle["value"].round(3).tolist() == [0.65, 0.7]
        assert valid["value"].round(3).tolist() == [0.5, 0.7]
        per_grader = step_metrics_by_step(
            store, ["ftjob-rft7"], metrics=["reward_mean/answer_check"]
        )
        assert per_grader[per_grader["split"] == "train"]["value"].round(3).tolist() == [
            0.3,
            0.4,
            0.5,
            0.6,
        ]
        names = set(step_metric_names(store, ["ftjob-rft7"])["metric"])
        assert {
            "reasoning_tokens_mean",
            "step_seconds/sampling",
            "step_seconds/eval",
            "grader_execution_latency_mean/format",
            "grader_prompt_tokens_mean/answer_check",
            "grader_sample_parse_error_mean/format",
            "completion_tokens_mean",
        } <= names
        # the flat summary fields repeat `scores`: no second reward metric
        assert "mean_reward" not in names and "full_mean_reward" not in names
        timing = step_metrics_by_step(store, ["ftjob-rft7"], metrics=["step_seconds/training"])
        assert timing["split"].unique().tolist() == ["all"] and len(timing) == 4
        imports = store.list_imports()
        assert imports["format"].tolist() == ["openai_finetune"]


def test_reimport_is_a_no_op_and_a_newer_export_updates(store_path: Path, tmp_path: Path) -> None:
    with open_store(store_path) as store:
        first = store.ingest_file(DATA / "ftjob-rft7.jsonl")
        count = table_rows_in(store)
        again = store.ingest_file(DATA / "ftjob-rft7.jsonl")
        assert again.already_imported and table_rows_in(store) == count
        assert len(store.list_imports()) == 1
        # A later export of the same job (one more line) keeps one row per key and adds nothing twice.
        newer = tmp_path / "ftjob-rft7.jsonl"
        extra = (DATA / "ftjob-rft7.jsonl").read_text() + (
            '{"object": "fine_tuning.job.event", "id": "ftevent-x", "created_at": 1, "level": "info",'
            ' "message": "Step 5/5", "type": "metrics", "data": {"step": 5, "scores":'
            ' {"train_reward_mean": 0.9}}}\n'
        )
        newer.write_text(extra)
        later = store.ingest_file(newer)
        assert isinstance(later, StepMetricsResult) and not later.already_imported
        assert later.metrics_added == 1 and later.metrics_updated == count
        assert table_rows_in(store) == count + 1
        assert first.run_ids == later.run_ids


def table_rows_in(store: Store) -> int:
    frame = store.query_df("SELECT count(*) AS n FROM step_metrics")
    return int(frame["n"][0])


def test_saved_list_page_sft_metrics_untyped_events_and_unicode(store_path: Path) -> None:
    rows = list(openai_finetune.convert(DATA / "ftjob-sft2.json"))
    assert {r["run_id"] for r in rows} == {"ftjob-sft2"}
    by_key = {(r["step"], r["split"], r["metric"]): r["value"] for r in rows}
    assert by_key[(3, "train", "loss")] == 0.2
    assert by_key[(3, "eval", "loss")] == 0.25
    assert by_key[(3, "eval", "full_loss")] == 0.24
    assert by_key[(2, "train", "mean_token_accuracy")] == 0.85  # an event without `type`
    assert (2, "eval", "loss") not in by_key  # null values are absent, not zero
    assert by_key[(1, "train", "reward_mean/écriture ✓")] == 0.5
    assert all(r["step"] != 0 for r in rows)  # the message event is skipped
    with open_store(store_path) as store:
        result = store.ingest_file(DATA / "ftjob-sft2.json")
        assert result.run_ids == ["ftjob-sft2"]
        frame = step_metrics_by_step(store, ["ftjob-sft2"], splits=["eval"])
        assert set(frame["metric"]) == {
            "loss",
            "full_loss",
            "mean_token_accuracy",
            "full_mean_token_accuracy",
        }


def test_broken_file_names_line_and_field_and_leaves_store_untouched(store_path: Path) -> None:
    with open_store(store_path) as store:
        with pytest.raises(IngestError) as caught:
            store.ingest_file(DATA / "ftjob-broken.jsonl")
        error = caught.value
        assert error.line == 3 and error.file == "ftjob-broken.jsonl"
        assert error.field == "data.scores.graders[0].train_reward_mean"
        assert '"high"' in str(error)
        assert store.is_empty() and store.list_imports().empty
    assert table_rows(store_path) == 0


def test_file_without_metrics_events_is_refused(store_path: Path, tmp_path: Path) -> None:
    only_messages = tmp_path / "ftjob-empty.jsonl"
    only_messages.write_text(
        '{"object": "fine_tuning.job.event", "id": "e1", "created_at": 1, "level": "info",'
        ' "message": "Fine-tuning job started", "type": "message"}\n'
    )
    with open_store(store_path) as store:
        with pytest.raises(IngestError, match="no fine-tuning metrics events"):
            store.ingest_file(only_messages)
        assert store.list_imports().empty


def test_missing_step_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "ftjob-nostep.jsonl"
    path.write_text(
        '{"object": "fine_tuning.job.event", "id": "e1", "created_at": 1, "level": "info",'
        ' "message": "m", "type": "metrics", "data": {"train_loss": 1.0}}\n'
    )
    with pytest.raises(IngestError) as caught:
        list(openai_finetune.convert(path))
    assert caught.value.line == 1 and caught.value.field == "data.step"


def test_delete_run_removes_its_step_metrics(store_path: Path) -> None:
    with open_store(store_path) as store:
        store.ingest_file(DATA / "ftjob-rft7.jsonl")
        store.delete_run("ftjob-rft7")
        assert table_rows_in(store) == 0 and store.is_empty()
