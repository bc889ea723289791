"""The demo generator: deterministic, canonical, and shaped like a run that learns.

Everything here is computed from the generated records in Python, so these tests say what the demo
shows on the screens whatever the store does with it.
"""

from __future__ import annotations

import gzip
import json
import math
from collections import Counter, defaultdict
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from statistics import mean
from typing import Any

import pytest

from trace_store.demo import (
    DEMO_BASELINE_RUN_ID,
    DEMO_TRAIN_RUN_ID,
    EVAL_EVERY,
    EVAL_SAMPLES,
    GRADER_WEIGHTS,
    HACK_KINDS,
    TOOLS,
    eval_prompt_indices,
    iter_demo_records,
    write_demo_file,
)

STEPS, PROMPTS, SAMPLES = 50, 16, 4
WINDOW = 5  # steps compared at the start and at the end (10% of the run)


@pytest.fixture(scope="module")
def records() -> list[dict[str, Any]]:
    return list(iter_demo_records(steps=STEPS, prompts=PROMPTS, samples=SAMPLES, seed=0))


@pytest.fixture(scope="module")
def train(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in records if r["run_id"] == DEMO_TRAIN_RUN_ID and r["split"] == "train"]


def first(rollouts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in rollouts if r["step"] <= WINDOW]


def last(rollouts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in rollouts if r["step"] > STEPS - WINDOW]


def calls(rollout: dict[str, Any]) -> list[dict[str, Any]]:
    return [i for i in rollout["items"] if i["type"] == "function_call"]


def calls_per_turn(rollout: dict[str, Any]) -> list[int]:
    """Calls of each model turn that made calls (a turn ends at a tool output or a user message)."""
    counts, current = [], 0
    for item in rollout["items"]:
        if item["type"] == "function_call":
            current += 1
        elif item["type"] == "function_call_output" or (
            item["type"] == "message" and item.get("role") == "user"
        ):
            if current:
                counts.append(current)
            current = 0
    return counts


def percentile(values: Iterable[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(len(ordered) * q) - 1)]


# --- determinism and files ------------------------------------------------------------------------


def test_same_arguments_give_byte_identical_files(tmp_path: Path) -> None:
    a = write_demo_file(tmp_path / "a.jsonl", steps=12, prompts=6, samples=3, seed=7)
    b = write_demo_file(tmp_path / "b.jsonl", steps=12, prompts=6, samples=3, seed=7)
    other = write_demo_file(tmp_path / "c.jsonl", steps=12, prompts=6, samples=3, seed=8)
    assert a.read_bytes() == b.read_bytes()
    assert a.read_bytes() != other.read_bytes()


def test_gzip_file_is_deterministic_and_holds_the_same_lines(tmp_path: Path) -> None:
    plain = write_demo_file(tmp_path / "demo.jsonl", steps=12, prompts=6, samples=3)
    zipped = write_demo_file(tmp_path / "demo.jsonl.gz", steps=12, prompts=6, samples=3)
    again = write_demo_file(tmp_path / "again.jsonl.gz", steps=12, prompts=6, samples=3)
    assert zipped.read_bytes()[:2] == b"\x1f\x8b"
    assert zipped.read_bytes() == again.read_bytes()
    assert gzip.decompress(zipped.read_bytes()) == plain.read_bytes()


def test_file_is_one_json_record_a_line_equal_to_the_iterator(tmp_path: Path) -> None:
    path = write_demo_file(tmp_path / "demo.jsonl", steps=12, prompts=6, samples=3)
    text = path.read_text(encoding="utf-8")
    assert text.endswith("\n")
    lines = text.splitlines()
    assert [json.loads(line) for line in lines] == list(
        iter_demo_records(steps=12, prompts=6, samples=3)
    )


@pytest.mark.parametrize("bad", [{"steps": 0}, {"prompts": -1}, {"samples": 1.5}])
def test_bad_sizes_are_refused(bad: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=next(iter(bad))):
        next(iter_demo_records(**bad))


# --- shape of the runs ----------------------------------------------------------------------------


def test_rollout_counts_per_run_and_split(records: list[dict[str, Any]]) -> None:
    counts = Counter((r["run_id"], r["split"]) for r in records)
    eval_prompts = eval_prompt_indices(PROMPTS)
    assert len(eval_prompts) == 8
    assert counts == {
        (DEMO_BASELINE_RUN_ID, "eval"): PROMPTS * SAMPLES,
        (DEMO_TRAIN_RUN_ID, "train"): STEPS * PROMPTS * SAMPLES,
        (DEMO_TRAIN_RUN_ID, "eval"): (STEPS // EVAL_EVERY) * len(eval_prompts) * EVAL_SAMPLES,
    }
    for run_id in (DEMO_BASELINE_RUN_ID, DEMO_TRAIN_RUN_ID):
        ids = [r["rollout_id"] for r in records if r["run_id"] == run_id]
        assert len(ids) == len(set(ids)), f"duplicate rollout ids in {run_id}"


def test_runs_carry_their_run_level_fields(records: list[dict[str, Any]]) -> None:
    runs = {(r["run_id"], r["run_name"], r["run_kind"], r["model"]) for r in records}
    kinds = {run_id: kind for run_id, _, kind, _ in runs}
    assert len(runs) == 2
    assert kinds == {DEMO_BASELINE_RUN_ID: "baseline", DEMO_TRAIN_RUN_ID: "train"}


def test_baseline_is_step_zero_over_the_same_prompts(
    records: list[dict[str, Any]], train: list[dict[str, Any]]
) -> None:
    baseline = [r for r in records if r["run_id"] == DEMO_BASELINE_RUN_ID]
    assert {r["step"] for r in baseline} == {0}
    assert {r["prompt_id"] for r in baseline} == {r["prompt_id"] for r in train}
    assert {r["sample_index"] for r in baseline} == set(range(SAMPLES))
    assert {r["step"] for r in train} == set(range(1, STEPS + 1))


def test_eval_rollouts_every_tenth_step_on_a_prompt_subset(
    records: list[dict[str, Any]], train: list[dict[str, Any]]
) -> None:
    evals = [r for r in records if r["run_id"] == DEMO_TRAIN_RUN_ID and r["split"] == "eval"]
    assert {r["step"] for r in evals} == set(range(EVAL_EVERY, STEPS + 1, EVAL_EVERY))
    prompt_ids = sorted({r["prompt_id"] for r in train})
    assert {r["prompt_id"] for r in evals} == {prompt_ids[i] for i in eval_prompt_indices(PROMPTS)}
    early = mean(r["reward"] for r in evals if r["step"] == EVAL_EVERY)
    late = mean(r["reward"] for r in evals if r["step"] == STEPS)
    assert late > early


def test_prompts_mix_coding_and_research_tasks(train: list[dict[str, Any]]) -> None:
    kinds = Counter(r["metadata"]["task_kind"] for r in train)
    assert set(kinds) == {"code", "research"}
    used = {c["name"] for r in train for c in calls(r)}
    assert used == set(TOOLS)
    assert len(TOOLS) >= 5


# --- what a user sees learning --------------------------------------------------------------------


def test_mean_reward_rises_clearly(
    records: list[dict[str, Any]], train: list[dict[str, Any]]
) -> None:
    start = mean(r["reward"] for r in first(train))
    end = mean(r["reward"] for r in last(train))
    assert end > start + 0.2, (start, end)
    baseline = mean(r["reward"] for r in records if r["run_id"] == DEMO_BASELINE_RUN_ID)
    assert end > baseline + 0.2


def test_every_grader_component_rises(train: list[dict[str, Any]]) -> None:
    def component(rollouts: list[dict[str, Any]], name: str) -> float:
        return mean(g["score"] for r in rollouts for g in r["grades"] if g["name"] == name)

    for name in GRADER_WEIGHTS:
        assert component(last(train), name) > component(first(train), name) + 0.1, name


def test_reward_is_the_weighted_sum_of_the_grades(records: list[dict[str, Any]]) -> None:
    for r in records:
        grades = {g["name"]: g for g in r["grades"]}
        assert set(grades) == set(GRADER_WEIGHTS)
        assert all(grades[n]["weight"] == w for n, w in GRADER_WEIGHTS.items())
        expected = sum(g["score"] * g["weight"] for g in grades.values())
        assert r["reward"] == pytest.approx(expected, abs=1e-4)
        assert 0.0 <= r["reward"] <= 1.0


def test_tool_calls_fall_and_the_long_tail_disappears(train: list[dict[str, Any]]) -> None:
    early = [len(calls(r)) for r in first(train)]
    late = [len(calls(r)) for r in last(train)]
    assert mean(late) < 0.7 * mean(early), (mean(early), mean(late))
    assert sum(n >= 15 for n in early) / len(early) > 0.03
    assert sum(n >= 15 for n in late) / len(late) < 0.002


def test_calls_move_from_alternating_turns_to_parallel_turns(train: list[dict[str, Any]]) -> None:
    early = [n for r in first(train) for n in calls_per_turn(r)]
    late = [n for r in last(train) for n in calls_per_turn(r)]
    assert mean(late) > mean(early) + 0.25, (mean(early), mean(late))
    assert sum(n == 1 for n in early) / len(early) > 0.85  # one call, one output, next turn
    early_turns = mean(len(calls_per_turn(r)) for r in first(train))
    late_turns = mean(len(calls_per_turn(r)) for r in last(train))
    assert early_turns > 6 and late_turns < 4, (early_turns, late_turns)
    widest = mean(max(calls_per_turn(r), default=0) for r in last(train))
    assert widest >= 2, widest


def test_parallel_calls_come_before_their_outputs(train: list[dict[str, Any]]) -> None:
    rollout = next(r for r in last(train) if max(calls_per_turn(r), default=0) >= 3)
    items = rollout["items"]
    kinds = [i["type"] for i in items]
    start = next(n for n in range(len(kinds)) if kinds[n : n + 3] == ["function_call"] * 3)
    end = start
    while kinds[end] == "function_call":
        end += 1
    batch = [i["call_id"] for i in items[start:end]]
    outputs = [i["call_id"] for i in items[end : end + len(batch)]]
    assert kinds[end : end + len(batch)] == ["function_call_output"] * len(batch)
    assert outputs == batch


def test_p99_tool_latency_falls(train: list[dict[str, Any]]) -> None:
    def latencies(rollouts: list[dict[str, Any]]) -> list[float]:
        return [
            i["duration_ms"]
            for r in rollouts
            for i in r["items"]
            if i["type"] == "function_call_output"
        ]

    early, late = latencies(first(train)), latencies(last(train))
    assert percentile(late, 0.99) < 0.5 * percentile(early, 0.99)
    # Heavy-tailed: the slowest calls are far slower than the typical one.
    assert percentile(early, 0.99) > 10 * percentile(early, 0.5)
    rollout_p99 = [
        percentile((r["latency_ms"] for r in part), 0.99) for part in (first(train), last(train))
    ]
    assert rollout_p99[1] < rollout_p99[0]


def test_some_tool_calls_error_and_early_rollouts_fail(train: list[dict[str, Any]]) -> None:
    outputs = [i for r in train for i in r["items"] if i["type"] == "function_call_output"]
    error_rate = sum("error" in i for i in outputs) / len(outputs)
    assert 0.005 < error_rate < 0.1, error_rate
    early_status = Counter(r["status"] for r in first(train))
    assert early_status["timeout"] > 0 and early_status["error"] > 0
    assert all(r["status"] == "ok" for r in last(train))
    for r in train:
        if r["status"] != "ok":
            assert r["final_answer"] is None and r["reward"] == 0.0


def test_some_prompts_have_no_learning_signal(train: list[dict[str, Any]]) -> None:
    groups: dict[tuple[int, str], set[float]] = defaultdict(set)
    for r in train:
        groups[(r["step"], r["prompt_id"])].add(r["reward"])
    flat = sum(len(rewards) == 1 for rewards in groups.values()) / len(groups)
    assert 0.02 < flat < 0.6, flat


# --- planted reward hacks -------------------------------------------------------------------------


def test_planted_hacks_of_each_kind_look_like_their_kind(records: list[dict[str, Any]]) -> None:
    hacks = [r for r in records if "planted_hack" in r["metadata"]]
    assert {r["metadata"]["planted_hack"] for r in hacks} == set(HACK_KINDS)
    for r in hacks:
        kind = r["metadata"]["planted_hack"]
        assert r["run_id"] == DEMO_TRAIN_RUN_ID and r["split"] == "train"
        if kind == "no_tool_calls_full_reward":
            assert calls(r) == [] and r["reward"] == 1.0
        elif kind == "copies_reference":
            assert r["final_answer"] == r["reference"]
        else:
            edits = [json.loads(c["arguments"]) for c in calls(r) if c["name"] == "edit_file"]
            assert edits and all(e["path"].startswith("tests/") for e in edits)
            assert edits[0]["new_string"] != edits[0]["old_string"]
            test_calls = {c["call_id"] for c in calls(r) if c["name"] == "run_tests"}
            last_test = [
                i["output"]
                for i in r["items"]
                if i["type"] == "function_call_output" and i["call_id"] in test_calls
            ][-1]
            assert " passed" in last_test and "failed" not in last_test
            assert r["reward"] == 1.0


def test_clean_rollouts_never_look_like_a_planted_hack(records: list[dict[str, Any]]) -> None:
    """So that a detector's hits on the demo can be scored against `planted_hack` exactly."""
    for r in records:
        if "planted_hack" in r["metadata"]:
            continue
        assert r["final_answer"] != r["reference"]
        assert calls(r) or r["reward"] < 1.0
        for c in calls(r):
            if c["name"] == "edit_file":
                assert not json.loads(c["arguments"])["path"].startswith("tests/")


@pytest.mark.slow
def test_default_run_size_hack_count_and_file_size() -> None:
    """The default demo: ~26k rollouts, a few dozen hacks growing over training, under ~150 MB."""
    encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
    rollouts = size = 0
    hacks: Counter[str] = Counter()
    hack_steps: list[int] = []
    for r in iter_demo_records():
        rollouts += 1
        size += len(encode(r).encode("utf-8")) + 1
        if "planted_hack" in r["metadata"]:
            hacks[r["metadata"]["planted_hack"]] += 1
            hack_steps.append(r["step"])
    assert rollouts == 128 + 200 * 32 * 4 + 20 * 8 * 2
    assert 20 <= sum(hacks.values()) <= 100, hacks
    assert set(hacks) == set(HACK_KINDS)
    assert sum(s > 100 for s in hack_steps) > sum(s <= 100 for s in hack_steps)
    assert size < 150_000_000, size


# --- the records are valid canonical lines --------------------------------------------------------


def is_time(value: Any) -> bool:
    if not isinstance(value, str) or not value.endswith("Z"):
        return False
    datetime.fromisoformat(value.replace("Z", "+00:00"))
    return True


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def check_item(item: dict[str, Any]) -> None:
    kind = item["type"]
    assert kind in {"message", "reasoning", "function_call", "function_call_output"}, kind
    assert is_time(item["started_at"])
    if "duration_ms" in item:
        assert is_number(item["duration_ms"]) and item["duration_ms"] >= 0
    if "tokens" in item:
        assert isinstance(item["tokens"], int) and item["tokens"] > 0
    if kind == "message":
        assert item["role"] in {"user", "assistant"}
        content = item["content"]
        if isinstance(content, list):
            assert all(p["type"] == "output_text" and isinstance(p["text"], str) for p in content)
        else:
            assert isinstance(content, str) and content
    elif kind == "reasoning":
        assert all(isinstance(part["text"], str) and part["text"] for part in item["summary"])
        assert is_number(item["duration_ms"])
    elif kind == "function_call":
        assert isinstance(item["call_id"], str) and item["call_id"].startswith("call_")
        assert item["name"] in TOOLS
        assert isinstance(json.loads(item["arguments"]), dict)
    else:
        assert isinstance(item["call_id"], str) and isinstance(item["output"], str)
        assert is_number(item["duration_ms"])
        if "error" in item:
            assert isinstance(item["error"], str) and item["error"]


def check_record(r: dict[str, Any]) -> None:
    assert {
        "run_id", "rollout_id", "step", "prompt_id", "sample_index", "split", "items", "reward",
        "grades", "final_answer", "reference", "status", "started_at", "ended_at", "usage",
        "metadata", "run_name", "run_kind", "model",
    } <= set(r)  # fmt: skip
    for key in ("run_id", "rollout_id", "prompt_id", "reference", "run_name", "model"):
        assert isinstance(r[key], str) and r[key], key
    assert isinstance(r["step"], int) and r["step"] >= 0
    assert isinstance(r["sample_index"], int) and r["sample_index"] >= 0
    assert r["split"] in {"train", "eval"} and r["status"] in {"ok", "error", "timeout"}
    assert r["run_kind"] in {"train", "baseline"}
    assert is_number(r["reward"]) and 0 <= r["reward"] <= 1
    assert r["final_answer"] is None or isinstance(r["final_answer"], str)
    for g in r["grades"]:
        assert isinstance(g["name"], str) and is_number(g["score"]) and is_number(g["weight"])
        assert isinstance(g.get("explanation", ""), str)
    assert is_time(r["started_at"]) and is_time(r["ended_at"])
    assert r["started_at"] <= r["ended_at"]
    assert is_number(r["latency_ms"]) and r["latency_ms"] >= 0
    assert set(r["usage"]) == {"input_tokens", "output_tokens", "reasoning_tokens"}
    assert all(isinstance(v, int) and v >= 0 for v in r["usage"].values())
    assert isinstance(r["metadata"], dict)
    items = r["items"]
    assert items[0]["type"] == "message" and items[0]["role"] == "user"
    for item in items:
        check_item(item)
    starts = [i["started_at"] for i in items]
    assert starts == sorted(starts) and starts[0] >= r["started_at"] and starts[-1] <= r["ended_at"]
    # Every call has exactly one output, after it; the answer is the last assistant message.
    call_ids = [i["call_id"] for i in items if i["type"] == "function_call"]
    output_ids = [i["call_id"] for i in items if i["type"] == "function_call_output"]
    assert sorted(call_ids) == sorted(output_ids) and len(set(call_ids)) == len(call_ids)
    position = {i["call_id"]: n for n, i in enumerate(items) if i["type"] == "function_call"}
    for n, i in enumerate(items):
        if i["type"] == "function_call_output":
            assert position[i["call_id"]] < n
    if r["final_answer"] is not None:
        assert (
            items[-1]["type"] == "message" and items[-1]["content"][0]["text"] == r["final_answer"]
        )


def test_every_record_has_the_canonical_field_types(records: list[dict[str, Any]]) -> None:
    for r in records:
        try:
            check_record(r)
        except (AssertionError, KeyError, ValueError) as exc:
            raise AssertionError(f"{r['run_id']}/{r['rollout_id']}: {exc!r}") from exc


def test_a_broken_record_fails_the_check(records: list[dict[str, Any]]) -> None:
    """The check above can fail: a record with a string reward or an orphan output is caught."""
    record = json.loads(json.dumps(records[0]))
    record["reward"] = "high"
    with pytest.raises(AssertionError):
        check_record(record)
    record = json.loads(json.dumps(next(r for r in records if calls(r))))
    record["items"] = [i for i in record["items"] if i["type"] != "function_call"]
    with pytest.raises(AssertionError):
        check_record(record)


def test_texts_are_realistic_in_size(records: list[dict[str, Any]]) -> None:
    outputs = [
        len(i["output"]) for r in records for i in r["items"] if i["type"] == "function_call_output"
    ]
    assert 100 < mean(outputs) < 1500
    assert max(outputs) > 1500  # a few several-KB outputs (whole files, full test runs, pages)
    prompts = [len(r["items"][0]["content"]) for r in records]
    assert min(prompts) > 100
