"""Dashboard queries on a real store, against answers worked out by hand on small fixed data.

Run A (the one worked out): step 1 has four train rollouts (prompts p1, p2 x two samples),
step 2 two train rollouts of p1 and one eval rollout of p3. Run B has one rollout, to show the
run filter keeps runs apart. Tool calls, in turns (calls in one turn were made in parallel):

    a1  s1 p1  reward 0    turn 1: search 100 ms, read 200 ms (error)       latency 1000
    a2  s1 p1  reward 0    no calls                                          latency 2000
    a3  s1 p2  reward 1    search 300 | read 400 | run_tests 500 (3 turns)   latency 3000
    a4  s1 p2  reward 0.5  no calls                                          latency 4000
    a5  s2 p1  reward 1    turn 1: search 150, read 250, fetch 350 (error) | run_tests 600
                                                                             latency 10000
    a6  s2 p1  reward 1    read 50                                           latency 20000
    a7  s2 p3  reward 0.25 eval, no calls                                    latency 500
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from trace_store import dashboards as d
from trace_store import open_store


def call(call_id: str, name: str, ms: float, error: str | None = None) -> list[dict[str, Any]]:
    """A function call item and its output item."""
    output: dict[str, Any] = {"type": "function_call_output", "call_id": call_id, "output": "x"}
    if error:
        output["error"] = error
    return [
        {"type": "function_call", "call_id": call_id, "name": name, "arguments": "{}",
         "duration_ms": ms},
        output,
    ]  # fmt: skip


def turn(*calls: tuple[str, str, float] | tuple[str, str, float, str]) -> list[dict[str, Any]]:
    """One model turn: its calls (made in parallel), then their outputs."""
    items = [c for spec in calls for c in call(*spec)]
    return [i for i in items if i["type"] == "function_call"] + [
        i for i in items if i["type"] == "function_call_output"
    ]


def rollout(
    rid: str,
    step: int,
    prompt: str,
    sample: int,
    reward: float,
    latency: float,
    turns: list[list[dict[str, Any]]],
    *,
    run: str = "A",
    split: str = "train",
    grades: dict[str, float] | None = None,
    tokens: tuple[int, int] | None = None,
) -> dict[str, Any]:
    items: list[dict[str, Any]] = [{"type": "message", "role": "user", "content": "task"}]
    for t in turns:
        items += t
    items.append({"type": "message", "role": "assistant", "content": "done"})
    record: dict[str, Any] = {
        "run_id": run,
        "rollout_id": rid,
        "step": step,
        "prompt_id": prompt,
        "sample_index": sample,
        "split": split,
        "items": items,
        "reward": reward,
        "latency_ms": latency,
        "status": "ok",
    }
    if grades:
        record["grades"] = [
            {"name": name, "score": score, "weight": {"correctness": 0.7, "format": 0.3}[name]}
            for name, score in grades.items()
        ]
    if tokens:
        record["usage"] = {"output_tokens": tokens[0], "reasoning_tokens": tokens[1]}
    return record


RECORDS = [
    rollout("a1", 1, "p1", 0, 0.0, 1000, [turn(("c1", "search", 100), ("c2", "read", 200, "ENOENT"))],
            grades={"correctness": 0.0, "format": 1.0}, tokens=(100, 10)),
    rollout("a2", 1, "p1", 1, 0.0, 2000, [], grades={"correctness": 0.0, "format": 0.0},
            tokens=(200, 20)),
    rollout("a3", 1, "p2", 0, 1.0, 3000,
            [turn(("c1", "search", 300)), turn(("c2", "read", 400)), turn(("c3", "run_tests", 500))],
            grades={"correctness": 1.0, "format": 1.0}, tokens=(300, 30)),
    rollout("a4", 1, "p2", 1, 0.5, 4000, [], grades={"correctness": 0.5, "format": 0.5},
            tokens=(400, 40)),
    rollout("a5", 2, "p1", 0, 1.0, 10000,
            [turn(("c1", "search", 150), ("c2", "read", 250), ("c3", "fetch", 350, "timeout")),
             turn(("c4", "run_tests", 600))]),
    rollout("a6", 2, "p1", 1, 1.0, 20000, [turn(("c1", "read", 50))]),
    rollout("a7", 2, "p3", 0, 0.25, 500, [], split="eval"),
    rollout("b1", 1, "p1", 0, 0.3, 7000, [turn(("c1", "search", 9000))], run="B"),
]  # fmt: skip


@pytest.fixture
def db(tmp_path: Path) -> Path:
    # Per test, not per module: with --backend ducklake the store must be opened inside the
    # test's own DuckLake mapping.
    path = tmp_path / "dash.duckdb"
    with open_store(path) as store:
        store.ingest_records(RECORDS, display_name="dash.jsonl")
    return path


@pytest.fixture
def store(db: Path):
    with open_store(db) as s:
        yield s


def rows(frame: pd.DataFrame, *columns: str) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in frame[list(columns)].itertuples(index=False)]


def test_reward_by_step_mean_quantiles_and_zero_and_full_shares(store):
    frame = d.reward_by_step(store, ["A"])
    # step 1 rewards 0, 0, 0.5, 1: median between 0 and 0.5; p90 at rank 2.7 = 0.5 + 0.7 * 0.5
    # step 2 rewards 1, 1, 0.25 (one eval): the run's best reward is 1
    assert rows(frame, "step", "rollouts", "mean", "median", "band_lo", "band_hi") == [
        (1, 4, 0.375, 0.25, 0.0, pytest.approx(0.85)),
        (2, 3, 0.75, 1.0, pytest.approx(0.4), 1.0),
    ]
    assert rows(frame, "zero_share", "full_share") == [(0.5, 0.25), (0.0, pytest.approx(2 / 3))]


def test_reward_by_step_filters_split_steps_runs_and_band(store):
    train = d.reward_by_step(store, ["A"], split="train", steps=(2, 2), band=(0.25, 0.75))
    assert rows(train, "run_id", "step", "rollouts", "mean", "full_share") == [
        ("A", 2, 2, 1.0, 1.0)
    ]
    both = d.reward_by_step(store, ["A", "B"], steps=(1, 1))
    assert rows(both, "run_id", "mean") == [("A", 0.375), ("B", pytest.approx(0.3))]
    # B's best reward is its own 0.3: its one rollout is at full reward.
    assert both.loc[both.run_id == "B", "full_share"].item() == 1.0
    with pytest.raises(ValueError, match="band"):
        d.reward_by_step(store, ["A"], band=(0.2, 0.8))
    with pytest.raises(ValueError, match="split"):
        d.reward_by_step(store, ["A"], split="validation")


def test_grader_means_and_weighted_contributions(store):
    frame = d.grader_by_step(store, ["A"], steps=(1, 1))
    assert rows(frame, "grader", "rollouts", "mean", "weight") == [
        ("correctness", 4, 0.375, 0.7),
        ("format", 4, 0.625, 0.3),
    ]
    assert frame["contribution"].tolist() == pytest.approx([0.7 * 0.375, 0.3 * 0.625])
    only = d.grader_by_step(store, ["A"], grader="format")
    assert set(only["grader"]) == {"format"}
    assert d.graders(store, ["A"]) == ["correctness", "format"]
    assert d.graders(store, ["B"]) == []


def test_prompt_spread_counts_prompts_where_every_sample_scores_the_same(store):
    frame = d.prompt_spread_by_step(store, ["A"])
    # step 1: p1 (0, 0) same, p2 (1, 0.5) spread 0.5 std 0.25; step 2: p1 (1, 1) same, p3 alone.
    assert rows(frame, "step", "prompts", "prompts_same", "same_share", "mean_spread") == [
        (1, 2, 1, 0.5, 0.25),
        (2, 1, 1, 1.0, 0.0),
    ]
    assert frame["mean_std"].tolist() == [0.125, 0.0]


def test_step_rollouts_are_sorted_by_reward(store):
    frame = d.step_rollouts(store, ["A"], 1)
    assert frame["rollout_id"].tolist() == ["a3", "a4", "a1", "a2"]
    assert d.step_rollouts(store, ["A"], 2, split="eval")["rollout_id"].tolist() == ["a7"]


def test_tool_calls_by_step_quantiles_turns_and_parallel_share(store):
    frame = d.tool_calls_by_step(store, ["A"], split="train")
    # step 1 calls per rollout 2, 0, 3, 0: p50 = 1, p90 = 2 + 0.7 * 1; a1's two calls shared a turn
    # step 2: a5 made 3 calls in one turn and 1 in the next, a6 one call
    assert rows(frame, "step", "rollouts", "calls_p50", "calls_p90", "calls_max") == [
        (1, 4, 1.0, pytest.approx(2.7), 3),
        (2, 2, 2.5, pytest.approx(3.7), 4),
    ]
    assert rows(frame, "calls", "parallel_calls", "parallel_share") == [(5, 2, 0.4), (5, 3, 0.6)]
    # a turn per round of calls plus the final answer
    assert frame["turns_mean"].tolist() == [(2 + 1 + 4 + 1) / 4, (3 + 2) / 2]


def test_tool_usage_counts_errors_by_the_calls_result(store):
    frame = d.tool_usage(store, ["A"])
    assert rows(frame, "tool_name", "calls", "errors") == [
        ("read", 4, 1),
        ("search", 3, 0),
        ("run_tests", 2, 0),
        ("fetch", 1, 1),
    ]
    assert frame["error_rate"].tolist() == [0.25, 0.0, 0.0, 1.0]
    assert frame["share"].tolist() == [0.4, 0.3, 0.2, 0.1]
    share = d.tool_share_by_step(store, ["A"], steps=(2, 2))
    assert rows(share, "tool_name", "calls", "share") == [
        ("fetch", 1, 0.2),
        ("read", 2, 0.4),
        ("run_tests", 1, 0.2),
        ("search", 1, 0.2),
    ]


def test_tool_call_histogram_for_two_step_ranges(store):
    frame = d.tool_calls_histogram(store, ["A"], [(1, 1), (2, 2)])
    assert rows(frame, "steps", "n_tool_calls", "rollouts", "share") == [
        ("steps 1-1", 0, 2, 0.5),
        ("steps 1-1", 2, 1, 0.25),
        ("steps 1-1", 3, 1, 0.25),
        ("steps 2-2", 0, 1, pytest.approx(1 / 3)),
        ("steps 2-2", 1, 1, pytest.approx(1 / 3)),
        ("steps 2-2", 4, 1, pytest.approx(1 / 3)),
    ]


def test_budget_shares_and_reward_within_and_over(store):
    per_step = d.budget_by_step(store, ["A"], 2)
    assert rows(per_step, "step", "rollouts", "over") == [(1, 4, 1), (2, 3, 1)]
    assert per_step["over_share"].tolist() == [0.25, pytest.approx(1 / 3)]
    sides = d.budget_reward(store, ["A"], 2)
    # within: a1 0, a2 0, a4 0.5, a6 1, a7 0.25; over: a3 1, a5 1
    assert rows(sides, "side", "rollouts") == [("within", 5), ("over", 2)]
    assert sides["mean_reward"].tolist() == [pytest.approx(0.35), 1.0]
    none_over = d.budget_reward(store, ["A"], 10)
    assert rows(none_over, "side", "rollouts") == [("within", 7), ("over", 0)]
    assert math.isnan(none_over["mean_reward"].iloc[1])


def test_reward_by_tool_call_count(store):
    frame = d.reward_by_tool_calls(store, ["A"], max_bin=3)
    # 0 calls: a2 0, a4 0.5, a7 0.25; 1: a6; 2: a1; 3+: a3 (3) and a5 (4)
    assert rows(frame, "n_tool_calls", "rollouts") == [(0, 3), (1, 1), (2, 1), (3, 2)]
    assert frame["mean_reward"].tolist() == pytest.approx([0.25, 1.0, 0.0, 1.0])
    assert frame["std_reward"].tolist() == pytest.approx([math.sqrt(1 / 24), 0, 0, 0], abs=1e-9)


def test_latency_quantiles_per_step(store):
    frame = d.latency_by_step(store, ["A"], split="train")
    assert rows(frame, "step", "p50", "p90", "p99", "max") == [
        (1, 2500.0, pytest.approx(3700.0), pytest.approx(3970.0), 4000.0),
        (2, 15000.0, pytest.approx(19000.0), pytest.approx(19900.0), 20000.0),
    ]


def test_latency_ccdf_is_the_share_at_least_as_slow(store):
    frame = d.latency_ccdf(store, ["A"], [(1, 1)])
    # Latencies 1000, 2000, 3000, 4000: just above each, 3/4, 2/4, 1/4 are at least as slow;
    # the last point is the slowest rollout.
    assert frame["ccdf"].tolist() == [0.75, 0.5, 0.25, 0.25]
    xs = frame["latency_ms"].tolist()
    for x, value in zip(xs, [1000, 2000, 3000], strict=False):
        assert value < x <= value * (1 + d.BIN_WIDTH)
    assert xs[-1] == 4000.0
    assert set(frame["steps"]) == {"steps 1-1"} and set(frame["rollouts"]) == {4}


def test_tool_latency_percentiles_within_a_bin_and_exact_max(store):
    frame = d.tool_latency(store, ["A"]).set_index("tool_name")
    # search: 100, 300, 150 -> the median call is 150, p90 and p99 the slowest (300)
    search = frame.loc["search"]
    assert search["calls"] == 3
    assert 150 <= search["p50"] <= 150 * (1 + d.BIN_WIDTH)
    assert search["p90"] == search["p99"] == search["max"] == 300.0
    assert frame.loc["read", "max"] == 400.0
    assert list(frame.index[:1]) == ["run_tests"]  # slowest p99 first


def test_tool_latency_over_part_of_the_steps(store):
    step_2 = d.tool_latency(store, ["A"], steps=(2, 2)).set_index("tool_name")
    # step 2: read 250 and 50, search 150, fetch 350, run_tests 600
    assert step_2["calls"].to_dict() == {"run_tests": 1, "fetch": 1, "read": 2, "search": 1}
    assert step_2.loc["read", "max"] == 250.0
    assert 50 <= step_2.loc["read", "p50"] <= 50 * (1 + d.BIN_WIDTH)
    # a range holding every step reads the all-steps histogram: the same answer as no range
    pd.testing.assert_frame_equal(
        d.tool_latency(store, ["A"], steps=(0, 5)), d.tool_latency(store, ["A"])
    )


def test_slowest_rollouts_and_tokens(store):
    slow = d.slowest_rollouts(store, ["A", "B"], limit=3)
    assert slow["rollout_id"].tolist() == ["a6", "a5", "b1"]
    assert d.slowest_rollouts(store, ["A"], split="eval")["rollout_id"].tolist() == ["a7"]
    tokens = d.tokens_by_step(store, ["A"])
    # only step 1 reports tokens: output 100..400, reasoning 10..40, total reward 1.5
    assert rows(tokens, "step", "rollouts", "output_p50", "reasoning_p50") == [(1, 4, 250.0, 25.0)]
    assert tokens["tokens_per_reward"].item() == pytest.approx(1000 / 1.5)


def test_run_splits(store):
    frame = d.run_splits(store, ["A", "B"])
    assert rows(frame, "run_id", "split", "rollouts", "min_step", "max_step") == [
        ("A", "eval", 1, 2, 2),
        ("A", "train", 6, 1, 2),
        ("B", "train", 1, 1, 1),
    ]


QUERIES = [
    lambda s: d.reward_by_step(s, ["A", "B"]),
    lambda s: d.grader_by_step(s, ["A"]),
    lambda s: d.prompt_spread_by_step(s, ["A"]),
    lambda s: d.tool_calls_by_step(s, ["A"]),
    lambda s: d.tool_usage(s, ["A", "B"]),
    lambda s: d.tool_calls_histogram(s, ["A"], [(1, 2)]),
    lambda s: d.budget_reward(s, ["A"], 1),
    lambda s: d.latency_ccdf(s, ["A"], [(1, 2)]),
    lambda s: d.tool_latency(s, ["A"]),
    lambda s: d.tool_latency(s, ["A"], steps=(2, 2), split="train"),
    lambda s: d.slowest_rollouts(s, ["A"]),
]


def test_a_store_opened_read_only_gives_the_same_answers_without_summary_tables(tmp_path):
    path = tmp_path / "ro.duckdb"
    with open_store(path) as store:
        store.ingest_records(RECORDS, display_name="dash.jsonl")
    with open_store(path, read_only=True) as store:
        direct = [q(store) for q in QUERIES]
        assert (
            store.query_df(
                "SELECT count(*) AS n FROM duckdb_tables() WHERE table_name LIKE 'dash_%'"
            ).n.item()
            == 0
        )
    with open_store(path) as store:
        from_tables = [q(store) for q in QUERIES]
    for a, b in zip(direct, from_tables, strict=True):
        pd.testing.assert_frame_equal(a, b, check_dtype=False)


def test_summaries_are_rebuilt_after_an_import_and_a_deleted_run(tmp_path):
    path = tmp_path / "fresh.duckdb"
    with open_store(path) as store:
        store.ingest_records(RECORDS[:4], display_name="first.jsonl")
        assert d.reward_by_step(store, ["A"])["step"].tolist() == [1]
        assert d.refresh_summaries(store) is False  # current: nothing to do
        store.ingest_records(RECORDS[4:], display_name="second.jsonl")
        assert d.reward_by_step(store, ["A"])["step"].tolist() == [1, 2]
        store.delete_run("B")
        assert d.run_splits(store, ["A", "B"])["run_id"].unique().tolist() == ["A"]


def test_deleting_a_run_removes_its_rows_from_the_summaries_at_once(tmp_path):
    path = tmp_path / "delete.duckdb"
    with open_store(path) as store:
        store.ingest_records(RECORDS, display_name="dash.jsonl")
        assert not d.slowest_rollouts(store, ["B"]).empty  # summaries built
        store.delete_run("B")
        for table in ("dash_steps", "dash_slowest", "dash_tool_bins", "dash_calls"):
            n = store.query_df(f"SELECT count(*) AS n FROM {table} WHERE run_id = 'B'").n.item()
            assert n == 0, table
        assert store.query_df("SELECT count(*) AS n FROM dash_steps").n.item() != 0  # A stays


def test_an_empty_store_or_unknown_run_gives_empty_frames(store_path):
    with open_store(store_path) as store:
        assert d.reward_by_step(store, ["nope"]).empty
        assert d.tool_usage(store, ["nope"]).empty
        assert d.latency_ccdf(store, ["nope"], [(0, 10)]).empty
        assert d.budget_reward(store, ["nope"], 5).empty
