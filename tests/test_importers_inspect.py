"""Inspect AI eval logs -> one rollout per sample and epoch; with inspect_ai and with our own reader."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

import pytest

from trace_store import IngestError, open_store
from trace_store.ingest import inspect_log
from trace_store.ingest.registry import detect_format
from trace_store.ingest.validate import check_record

DATA = Path(__file__).parent / "data" / "importers" / "inspect"
SAMPLES = Path(__file__).parents[2] / "shared" / "samples" / "inspect"


def convert(path: Path, *, use_inspect_ai: bool = True) -> list[dict[str, Any]]:
    records = list(inspect_log.convert(path, use_inspect_ai=use_inspect_ai))
    for record in records:
        assert list(check_record(record)) == [], record["rollout_id"]
    return records


def of_type(record: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [i for i in record["items"] if i["type"] == kind]


def run_inspect(log_dir: Path, log_format: str) -> Path:
    """A real Inspect run, offline: the mockllm provider replays scripted outputs."""
    inspect_ai = pytest.importorskip("inspect_ai")
    from inspect_ai.dataset import Sample
    from inspect_ai.model import ChatMessageAssistant, ModelOutput, ModelUsage, get_model
    from inspect_ai.model._model_output import ChatCompletionChoice
    from inspect_ai.scorer import match
    from inspect_ai.solver import generate, use_tools
    from inspect_ai.tool import ToolCall, ToolError, tool

    @tool
    def add():  # type: ignore[no-untyped-def]
        async def execute(x: int, y: int) -> str:
            """Add two numbers.

            Args:
                x: the first number
                y: the second number
            """
            return str(x + y)

        return execute

    @tool
    def lookup():  # type: ignore[no-untyped-def]
        async def execute(key: str) -> str:
            """Look a key up.

            Args:
                key: the key
            """
            raise ToolError(f"no such key: {key}")

        return execute

    parallel = ModelOutput(
        model="mockllm/model",
        choices=[
            ChatCompletionChoice(
                message=ChatMessageAssistant(
                    content="Two calls at once.",
                    source="generate",
                    tool_calls=[
                        ToolCall(id="c_add", function="add", arguments={"x": 1, "y": 2}),
                        ToolCall(id="c_lookup", function="lookup", arguments={"key": "ключ"}),
                    ],
                ),
                stop_reason="tool_calls",
            )
        ],
        usage=ModelUsage(input_tokens=50, output_tokens=12, total_tokens=62),
    )

    def done() -> ModelOutput:
        output = ModelOutput.from_content(model="mockllm/model", content="3")
        output.usage = ModelUsage(
            input_tokens=80, output_tokens=1, total_tokens=81
        )  # no tokenizer download
        return output

    model = get_model("mockllm/model", custom_outputs=[parallel, done(), done()])
    task = inspect_ai.Task(
        dataset=[Sample(id="s1", input="What is 1+2? Résumé ✓", target="3")],
        solver=[use_tools(add(), lookup()), generate()],
        scorer=match(),
        epochs=2,
    )
    (log,) = inspect_ai.eval(
        task,
        model=model,
        log_dir=str(log_dir),
        display="none",
        log_format=log_format,
        max_samples=1,
    )
    assert log.status == "success", log.error
    return Path(log.location)


@pytest.fixture(scope="module")
def eval_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return run_inspect(tmp_path_factory.mktemp("inspect_eval"), "eval")


@pytest.fixture(scope="module")
def json_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return run_inspect(tmp_path_factory.mktemp("inspect_json"), "json")


def test_real_eval_log_detected_and_converted(eval_log: Path) -> None:
    importer = detect_format(eval_log.name, eval_log.read_bytes()[:65536])
    assert importer is not None and importer.name == "inspect"
    first, second = convert(eval_log)
    assert [first["rollout_id"], second["rollout_id"]] == ["s1_epoch_1", "s1_epoch_2"]
    assert [first["sample_index"], second["sample_index"]] == [0, 1]
    assert (
        first["run_kind"] == "eval"
        and first["run_name"] == "task"
        and first["model"] == "mockllm/model"
    )
    assert first["reward"] == 1.0 and first["grades"][0]["name"] == "match"
    assert first["items"][0]["content"] == "What is 1+2? Résumé ✓"
    calls = of_type(first, "function_call")
    assert [(c["call_id"], c["name"]) for c in calls] == [("c_add", "add"), ("c_lookup", "lookup")]
    outputs = {o["call_id"]: o for o in of_type(first, "function_call_output")}
    assert outputs["c_add"]["output"] == "3" and "error" not in outputs["c_add"]
    assert outputs["c_lookup"]["error"] == "no such key: ключ"
    assert all(o["duration_ms"] >= 0 and o["started_at"] for o in outputs.values())
    assert first["usage"]["input_tokens"] == 130
    assert len(second["items"]) == 2 and second["final_answer"] == "3"


def test_own_reader_reads_zstd_members_like_inspect_ai(eval_log: Path) -> None:
    methods = {info.compress_type for info in zipfile.ZipFile(eval_log).infolist()}
    assert methods == {93}, "Inspect writes zstd members; this test checks our reader of them"
    assert convert(eval_log, use_inspect_ai=False) == convert(eval_log)


def test_real_json_log(json_log: Path) -> None:
    assert detect_format(json_log.name, json_log.read_bytes()[:65536]).name == "inspect"  # type: ignore[union-attr]
    records = convert(json_log)
    assert [r["rollout_id"] for r in records] == ["s1_epoch_1", "s1_epoch_2"]
    assert convert(json_log, use_inspect_ai=False) == records


@pytest.mark.parametrize("use_inspect_ai", [True, False])
def test_handmade_edge_cases(use_inspect_ai: bool) -> None:
    if use_inspect_ai:
        pytest.importorskip("inspect_ai")
    first, crashed, limited = convert(DATA / "handmade.json", use_inspect_ai=use_inspect_ai)
    assert first["grades"] == [
        {"name": "model_graded/accuracy", "score": 1.0},
        {"name": "model_graded/style", "score": 0.5},
        {"name": "exact", "score": 0.0},
    ]
    assert first["reward"] == 0.75  # the first scorer: the mean of its parts
    assert first["reference"] == "4\nfour"
    assert first["items"][0]["content"] == "You are a careful engineer."  # attachment resolved
    reasoning = of_type(first, "reasoning")[0]
    assert reasoning["text"] == "I should run both tools." and reasoning["duration_ms"] == 2000.0
    outputs = of_type(first, "function_call_output")
    assert [o["duration_ms"] for o in outputs] == [1500.0, 60000.0]
    assert (
        outputs[0]["output"].startswith("1 passed, 1 failed") and len(outputs[0]["output"]) > 18000
    )
    assert outputs[1]["error"] == "Command timed out before completing."
    assert first["items"][-1]["tokens"] == 6 and first["latency_ms"] == 64000.0
    assert first["metadata"]["sample_metadata"] == {"difficulty": "hard"}
    assert crashed["status"] == "error" and crashed["metadata"]["missing"] == ["reward", "step"]
    assert crashed["metadata"]["error"] == "RuntimeError: sandbox died"
    assert limited["status"] == "timeout" and limited["reward"] == 0.0


def test_broken_logs(tmp_path: Path) -> None:
    with pytest.raises(IngestError) as caught:
        list(inspect_log.convert(DATA / "broken_sample.json", use_inspect_ai=False))
    assert caught.value.field == "samples[0].messages[0].role"
    assert "broken_sample.json" in str(caught.value)

    no_header = tmp_path / "x.eval"
    with zipfile.ZipFile(no_header, "w") as archive:
        archive.writestr("samples/1_epoch_1.json", "{}")
    with pytest.raises(IngestError, match=r"no header\.json"):
        list(inspect_log.convert(no_header, use_inspect_ai=False))

    bad_member = tmp_path / "y.eval"
    with zipfile.ZipFile(bad_member, "w") as archive:
        archive.writestr("header.json", json.dumps({"eval": {"run_id": "r", "task": "t"}}))
        archive.writestr("samples/1_epoch_1.json", "{not json")
    with pytest.raises(
        IngestError, match=r"y.eval: member samples/1_epoch_1.json is not readable JSON"
    ):
        list(inspect_log.convert(bad_member, use_inspect_ai=False))

    truncated = tmp_path / "z.eval"
    truncated.write_bytes(b"PK\x03\x04" + b"\0" * 100)
    for use in (True, False):
        with pytest.raises(IngestError, match=r"z\.eval"):
            list(inspect_log.convert(truncated, use_inspect_ai=use))


@pytest.mark.skipif(not SAMPLES.is_dir(), reason="../shared/samples is absent")
@pytest.mark.parametrize("use_inspect_ai", [True, False])
def test_real_logs_from_the_inspect_repository(use_inspect_ai: bool) -> None:
    if use_inspect_ai:
        pytest.importorskip("inspect_ai")
    browser = convert(
        SAMPLES / "2025-05-12T20-27-36-04-00_browser.json", use_inspect_ai=use_inspect_ai
    )
    (record,) = browser
    assert len(of_type(record, "function_call")) == 4 and record["reward"] == 1.0
    assert [round(o["duration_ms"]) for o in of_type(record, "function_call_output")] == [
        4318,
        1278,
        2995,
        1270,
    ]
    popularity = convert(
        SAMPLES / "2025-02-11T15-18-04-05-00_popularity_mj7khqpMM4GBCfVQozKgzB.eval",
        use_inspect_ai=use_inspect_ai,
    )
    assert len(popularity) == 10 and sum(r["reward"] for r in popularity) == 8.0  # accuracy 0.8
    (errors,) = convert(SAMPLES / "log_tool_call_error.json", use_inspect_ai=use_inspect_ai)
    assert len([o for o in of_type(errors, "function_call_output") if o.get("error")]) == 11
    (choice,) = convert(SAMPLES / "mmlu-summary-choices.eval", use_inspect_ai=use_inspect_ai)
    assert choice["reference"] == "A" and choice["reward"] == 0.0


def test_end_to_end_counts(eval_log: Path, tmp_path: Path) -> None:
    store = open_store(tmp_path / "t.duckdb")
    try:
        result = store.ingest_file(eval_log)
        assert (result.format, result.rollouts_added) == ("inspect", 2)
        rows = (
            store.cursor()
            .execute(
                "SELECT rollout_id, n_tool_calls, max_parallel_calls, n_tool_errors, reward FROM rollouts ORDER BY 1"
            )
            .fetchall()
        )
        assert rows == [("s1_epoch_1", 2, 2, 1, 1.0), ("s1_epoch_2", 0, 0, 0, 1.0)]
        assert store.ingest_file(eval_log).already_imported
    finally:
        store.close()
