"""The canonical ingest on a real DuckDB file: shapes, derived counts, atomicity, idempotence."""

from __future__ import annotations

import gzip
import itertools
import json
from pathlib import Path

import pytest
import zstandard

from trace_store import IngestError, UnknownFormatError, open_store

DATA = Path(__file__).parent / "data" / "canonical"


def table_counts(store) -> dict[str, int]:
    cur = store.cursor()
    return {
        table: cur.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
        for table in ("runs", "rollouts", "events", "grades", "imports")
    }


def rollout(store, rollout_id: str) -> dict:
    df = store.query_df("SELECT * FROM rollouts WHERE rollout_id = ?", [rollout_id])
    assert len(df) == 1, f"expected one rollout {rollout_id}, got {len(df)}"
    return df.iloc[0].to_dict()


@pytest.fixture
def store(tmp_path):
    with open_store(tmp_path / "store.duckdb") as s:
        yield s


def test_rollout_lines_land_with_hand_checked_derived_counts(store):
    result = store.ingest_file(DATA / "rollouts_small.jsonl")
    assert (result.rollouts_added, result.events_added, result.duplicates_skipped) == (3, 20, 0)
    assert result.run_ids == ["run-a"]

    first = rollout(store, "a-1")
    # reasoning+call, call, call, final message: four model turns, one call each.
    assert (first["n_tool_calls"], first["n_turns"], first["max_parallel_calls"]) == (3, 4, 1)
    assert first["latency_ms"] == 4000  # ended_at - started_at
    assert first["final_answer"] == "Fixed add()."
    assert first["prompt"] == "Fix the failing test in utils.py"
    assert (first["input_tokens"], first["output_tokens"], first["reasoning_tokens"]) == (
        900,
        120,
        40,
    )

    second = rollout(store, "a-2")
    # three calls before any output: one turn of three parallel calls, then the answer.
    assert (second["n_tool_calls"], second["n_turns"], second["max_parallel_calls"]) == (3, 2, 3)
    assert second["n_tool_errors"] == 1
    assert second["final_answer"] == "I could not fix it."

    third = rollout(store, "a-3")
    assert third["reward"] == pytest.approx(0.75)  # no reward: grade scores weighted 3:1
    assert third["latency_ms"] == 1500  # epoch-millisecond timestamps
    assert (third["n_tool_calls"], third["n_turns"]) == (0, 1)

    latencies = store.query_df(
        "SELECT call_id, duration_ms FROM events WHERE kind = 'tool_call' AND rollout_id = 'a-1' ORDER BY seq"
    )
    # c1 from the gap between call and output timestamps; c2, c3 from the outputs' duration_ms.
    assert latencies["duration_ms"].tolist() == [250, 40, 1500]
    args = store.query_df(
        "SELECT arguments FROM events WHERE call_id = 'c2' AND kind = 'tool_call'"
    )
    assert json.loads(args["arguments"][0]) == {"path": "utils.py", "patch": "return a + b"}

    runs = store.list_runs()
    assert runs.loc[0, "name"] == "Run A" and runs.loc[0, "model"] == "policy-v1"
    assert runs.loc[0, "rollouts"] == 3 and runs.loc[0, "steps"] == 2


def test_grades_keep_weights_and_explanations(store):
    store.ingest_file(DATA / "rollouts_small.jsonl")
    grades = store.query_df(
        "SELECT grader, score, weight, explanation FROM grades WHERE rollout_id = 'a-1' ORDER BY grader"
    )
    assert grades.to_dict("records")[0] == {
        "grader": "correctness",
        "score": 1.0,
        "weight": 0.8,
        "explanation": "tests pass",
    }


def _trajectory(store) -> list[tuple]:
    cur = store.cursor()
    return cur.execute(
        "SELECT seq, turn, kind, call_id, duration_ms, coalesce(text, output) FROM events"
        " WHERE rollout_id = 's-1' ORDER BY seq"
    ).fetchall()


@pytest.mark.parametrize(
    "order",
    list(
        itertools.permutations(["events_policy.jsonl", "events_tools.jsonl", "events_grader.jsonl"])
    ),
)
def test_split_files_assemble_one_trajectory_in_any_order(tmp_path, order):
    with open_store(tmp_path / "split.duckdb") as store:
        for name in order:
            store.ingest_file(DATA / name)
        assert _trajectory(store) == [
            (0, 0, "message", None, None, "Find the capital of France"),
            (1, 1, "tool_call", "k1", 350.0, None),
            (2, 1, "tool_result", "k1", 350.0, "Paris is the capital of France."),
            (3, 2, "message", None, None, "Paris"),
        ]
        row = rollout(store, "s-1")
        assert (row["step"], row["prompt_id"], row["reward"]) == (4, "geo-1", 1.0)
        assert (row["n_tool_calls"], row["n_turns"], row["n_events"]) == (1, 2, 4)
        assert row["final_answer"] == "Paris"
        assert table_counts(store)["rollouts"] == 1


def test_reimporting_the_same_file_changes_nothing_and_says_so(store, tmp_path):
    store.ingest_file(DATA / "rollouts_small.jsonl")
    before = table_counts(store)
    again = store.ingest_file(DATA / "rollouts_small.jsonl")
    assert again.already_imported and "already imported" in again.summary()
    copy = tmp_path / "renamed.jsonl"
    copy.write_bytes((DATA / "rollouts_small.jsonl").read_bytes())
    assert store.ingest_file(copy).already_imported
    assert table_counts(store) == before


def test_same_rollouts_in_a_different_file_are_skipped_as_duplicates(store, tmp_path):
    store.ingest_file(DATA / "rollouts_small.jsonl")
    before = table_counts(store)
    changed = tmp_path / "rerun.jsonl"
    lines = (DATA / "rollouts_small.jsonl").read_text().splitlines()
    changed.write_text(
        "\n".join(lines[:2]) + "\n"
    )  # a different file holding the same two rollouts
    result = store.ingest_file(changed)
    assert (
        result.duplicates_skipped == 2 and result.rollouts_added == 0 and result.events_added == 0
    )
    counts = table_counts(store)
    assert {k: v for k, v in counts.items() if k != "imports"} == {
        k: v for k, v in before.items() if k != "imports"
    }


def test_a_bad_line_at_the_end_of_a_large_file_leaves_the_store_unchanged(store, tmp_path):
    store.ingest_file(DATA / "rollouts_small.jsonl")
    before = table_counts(store)
    big = tmp_path / "traces.jsonl"
    good = {
        "run_id": "big",
        "step": 1,
        "reward": 0.5,
        "items": [
            {"type": "function_call", "call_id": "c", "name": "t", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c", "output": "x" * 200},
        ],
    }
    with big.open("w") as out:
        for n in range(20_000):
            out.write(json.dumps({**good, "rollout_id": f"r{n}"}) + "\n")
        out.write('{"run_id": "big", "rollout_id": "last", "reward": "high"}\n')
    with pytest.raises(IngestError) as caught:
        store.ingest_file(big)
    assert str(caught.value) == 'traces.jsonl line 20001: `reward` must be a number, got "high"'
    assert (caught.value.line, caught.value.field) == (20001, "reward")
    assert table_counts(store) == before


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (
            '{"run_id": "r", "rollout_id": "a", "reward": 1}\n{"rollout_id": "b", "reward": 1}\n',
            "line 2: `run_id` is required and must be a non-empty string, got null",
        ),
        (
            '{"run_id": "r", "rollout_id": "a", "reward": 1}\n{"run_id": "r", "rollout_id": "b",\n',
            "line 2: not valid JSON",
        ),
        (
            '{"run_id": "r", "rollout_id": "a", "step": -3, "reward": 1}\n',
            "line 1: `step` must be an integer >= 0, got -3",
        ),
        (
            '{"run_id": "r", "rollout_id": "a", "split": "test", "reward": 1}\n',
            'line 1: `split` must be one of train, eval, got "test"',
        ),
        (
            '{"run_id": "r", "rollout_id": "a", "items": [{"type": "message", "role": "user", "content": 5}]}\n',
            "line 1: `items[0].content` must be a string or a list of parts, got 5",
        ),
        (
            '{"run_id": "r", "rollout_id": "a", "grades": {"correct": "yes"}}\n',
            'line 1: `grades.correct` must be a number, got "yes"',
        ),
        (
            '{"run_id": "r", "rollout_id": "a", "items": []}\n\n{"run_id": "r", "rollout_id": "a", "items": []}\n',
            "line 3: `rollout_id` 'a' appears on more than one rollout line (first on line 1)",
        ),
    ],
)
def test_malformed_files_name_the_line_and_field(store, tmp_path, content, expected):
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    with pytest.raises(IngestError) as caught:
        store.ingest_file(path, format="canonical")
    assert expected in str(caught.value)
    assert str(caught.value).startswith("bad.jsonl line")
    assert table_counts(store)["rollouts"] == 0


def test_the_shipped_bad_file_names_file_line_and_field(store):
    with pytest.raises(
        IngestError, match=r'^bad_reward.jsonl line 3: `reward` must be a number, got "high"$'
    ):
        store.ingest_file(DATA / "bad_reward.jsonl")
    assert table_counts(store)["rollouts"] == 0


@pytest.mark.parametrize("compression", ["gzip", "zstd"])
def test_compressed_files_read_the_same(store, tmp_path, compression):
    raw = (DATA / "rollouts_small.jsonl").read_bytes()
    if compression == "gzip":
        path = tmp_path / "traces.jsonl.gz"
        path.write_bytes(gzip.compress(raw))
    else:
        path = tmp_path / "traces.jsonl.zst"
        path.write_bytes(zstandard.ZstdCompressor().compress(raw))
    result = store.ingest_file(path)
    assert (result.format, result.rollouts_added, result.events_added) == ("canonical", 3, 20)


def test_unknown_format_lists_the_known_ones(store, tmp_path):
    path = tmp_path / "numbers.csv"
    path.write_text("a,b\n1,2\n")
    with pytest.raises(
        UnknownFormatError, match=r"numbers.csv: cannot tell which format.*canonical"
    ):
        store.ingest_file(path)


def test_progress_reports_bytes_up_to_the_file_size(store):
    seen: list[tuple[int, int]] = []
    store.ingest_file(
        DATA / "rollouts_small.jsonl", progress=lambda done, total: seen.append((done, total))
    )
    size = (DATA / "rollouts_small.jsonl").stat().st_size
    assert seen[-1] == (size, size)
    assert all(total == size for _, total in seen)
    assert [done for done, _ in seen] == sorted(done for done, _ in seen)


def test_delete_run_removes_all_its_rows(store):
    store.ingest_file(DATA / "rollouts_small.jsonl")
    store.ingest_file(DATA / "events_policy.jsonl")
    assert store.delete_run("run-a") == 3
    cur = store.cursor()
    for table in ("rollouts", "events", "grades", "runs"):
        assert (
            cur.execute(f"SELECT count(*) FROM {table} WHERE run_id = 'run-a'").fetchone()[0] == 0
        )
    assert (
        cur.execute("SELECT count(*) FROM rollouts WHERE run_id = 'run-split'").fetchone()[0] == 1
    )


def test_store_reopens_with_its_data_and_schema_version(tmp_path):
    path = tmp_path / "persist.duckdb"
    with open_store(path) as store:
        store.ingest_file(DATA / "rollouts_small.jsonl")
    with open_store(path) as store:
        assert table_counts(store)["rollouts"] == 3
        assert (
            store.cursor().execute("SELECT max(version) FROM schema_migrations").fetchone()[0] >= 1
        )


def _shape(store) -> tuple[list[tuple], list[tuple]]:
    cur = store.cursor()
    events = cur.execute(
        "SELECT rollout_id, seq, turn, kind, role, text, tool_name, call_id, arguments, output, error,"
        " duration_ms FROM events ORDER BY rollout_id, seq"
    ).fetchall()
    rollouts = cur.execute(
        "SELECT rollout_id, step, reward, latency_ms, n_tool_calls, n_turns, max_parallel_calls, n_events,"
        " n_tool_errors, final_answer, prompt FROM rollouts ORDER BY rollout_id"
    ).fetchall()
    return events, rollouts


def test_whole_rollout_lines_and_the_same_rollouts_as_event_lines_store_the_same(tmp_path):
    """The bulk path (whole new rollouts) and the merge path (events a line) must agree."""
    source = DATA / "rollouts_small.jsonl"
    with open_store(tmp_path / "bulk.duckdb") as bulk:
        bulk.ingest_file(source)
        expected = _shape(bulk)

    as_events = tmp_path / "as_events.jsonl"
    with as_events.open("w") as out:
        for line in source.read_text().splitlines():
            record = json.loads(line)
            items = record.pop("items")
            for seq, item in enumerate(items):
                out.write(
                    json.dumps(
                        {
                            "run_id": record["run_id"],
                            "rollout_id": record["rollout_id"],
                            "seq": seq,
                            "item": item,
                        }
                    )
                    + "\n"
                )
            out.write(json.dumps(record) + "\n")
    with open_store(tmp_path / "merged.duckdb") as merged:
        merged.ingest_file(as_events)
        assert _shape(merged) == expected

    with open_store(tmp_path / "graded_first.duckdb") as graded_first:
        grade_only = tmp_path / "grade_only.jsonl"
        grade_only.write_text('{"run_id": "run-a", "rollout_id": "a-1", "reward": 1.0}\n')
        graded_first.ingest_file(grade_only)
        graded_first.ingest_file(source)
        assert _shape(graded_first) == expected


def test_item_times_in_every_accepted_form_give_the_same_call_latency(store, tmp_path):
    """RFC 3339 in UTC, with an offset, and epoch milliseconds, mixed within one file and one
    rollout: each call's latency is the gap to its output. (A plain CAST in the time parser once
    failed here, because DuckDB evaluated it on the epoch-millisecond rows of the unnested items.)"""
    base_ms = 1_700_000_000_000
    forms = {
        "utc": lambda ms: f"2023-11-14T22:13:{(ms - base_ms) / 1000 + 20:06.3f}Z",
        "offset": lambda ms: f"2023-11-15T00:13:{(ms - base_ms) / 1000 + 20:06.3f}+02:00",
        "epoch_ms": lambda ms: ms,
    }
    lines = []
    expected: dict[str, float] = {}
    for n in range(60):
        items: list[dict] = [{"type": "message", "role": "user", "content": f"task {n}"}]
        for k, (name, form) in enumerate(forms.items()):
            call_id = f"r{n}-{name}"
            start = base_ms + 1000 * k
            gap = 10 * n + k + 1
            items.append(
                {
                    "type": "function_call",
                    "call_id": call_id,
                    "name": "t",
                    "arguments": "{}",
                    "started_at": form(start),
                }
            )
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": call_id,
                    "output": "ok",
                    "started_at": form(start + gap),
                }
            )
            expected[call_id] = gap
        lines.append(json.dumps({"run_id": "times", "rollout_id": f"r{n}", "items": items}))
    path = tmp_path / "times.jsonl"
    path.write_text("\n".join(lines) + "\n")

    store.ingest_file(path)
    got = store.query_df("SELECT call_id, duration_ms FROM events WHERE kind = 'tool_call'")
    assert dict(zip(got["call_id"], got["duration_ms"], strict=True)) == pytest.approx(expected)


@pytest.mark.parametrize("shape", ["rollout_line", "event_lines"])
def test_tool_outputs_and_arguments_become_text_the_same_way_on_both_paths(tmp_path, shape):
    parts = [{"type": "input_text", "text": "line one"}, {"type": "input_text", "text": "two"}]
    outputs = {
        "plain": ("just text", "just text"),
        "object": ({"rows": 2, "ok": True}, '{"rows":2,"ok":true}'),
        "parts": (parts, "line one\ntwo"),
        # MCP-style results often arrive as the JSON text of their parts: shown as their texts
        "parts_as_string": (json.dumps(parts), "line one\ntwo"),
        "list_without_text": ([1, {"a": 1}], '[1,{"a":1}]'),
        "bracketed_log": ("[INFO] started", "[INFO] started"),
        "number": (42, "42"),
    }
    items: list[dict] = [{"type": "message", "role": "user", "content": "go"}]
    for name, (output, _) in outputs.items():
        items.append(
            {"type": "function_call", "call_id": name, "name": "t", "arguments": {"q": name}}
        )
        items.append({"type": "function_call_output", "call_id": name, "output": output})
    path = tmp_path / "outputs.jsonl"
    if shape == "rollout_line":
        lines = [{"run_id": "o", "rollout_id": "r", "items": items}]
    else:
        lines = [
            {"run_id": "o", "rollout_id": "r", "seq": seq, "item": item}
            for seq, item in enumerate(items)
        ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    with open_store(tmp_path / "store.duckdb") as store:
        store.ingest_file(path)
        got = store.query_df(
            "SELECT call_id, kind, arguments, output FROM events WHERE call_id IS NOT NULL"
        )
    results = got[got["kind"] == "tool_result"].set_index("call_id")["output"].to_dict()
    assert results == {name: text for name, (_, text) in outputs.items()}
    calls = got[got["kind"] == "tool_call"].set_index("call_id")["arguments"].to_dict()
    assert calls == {name: json.dumps({"q": name}, separators=(",", ":")) for name in outputs}


def test_a_rollout_line_and_a_grade_line_for_it_in_one_file_make_one_rollout(store, tmp_path):
    path = tmp_path / "two_lines.jsonl"
    item = {"type": "message", "role": "user", "content": "hi"}
    path.write_text(
        json.dumps({"run_id": "t", "rollout_id": "r1", "items": [item], "grades": {"a": 1}})
        + "\n"
        + json.dumps({"run_id": "t", "rollout_id": "r1", "reward": 0.5, "grades": {"a": 0.5}})
        + "\n"
    )
    result = store.ingest_file(path)
    assert (result.rollouts_added, result.events_added) == (1, 1)
    assert store.query_df("SELECT rollout_id, reward FROM rollouts").values.tolist() == [
        ["r1", 0.5]
    ]
    grades = store.query_df("SELECT grader, score FROM grades")
    assert grades.values.tolist() == [["a", 0.5]]  # the later line wins


@pytest.mark.parametrize(
    ("bad_item", "field"),
    [
        ({"type": "function_call_output", "call_id": "c", "started_at": "yesterday"}, "started_at"),
        ({"type": "message", "role": "user", "content": 42}, "content"),
    ],
)
def test_a_bad_item_deep_in_a_file_of_whole_rollouts_names_its_line(
    store, tmp_path, bad_item, field
):
    good = {"type": "message", "role": "user", "content": "hi"}
    lines = [{"run_id": "big", "rollout_id": f"r{n}", "items": [good, good]} for n in range(3000)]
    lines[2499]["items"] = [good, bad_item]
    path = tmp_path / "big.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    before = table_counts(store)
    with pytest.raises(IngestError, match=rf"big\.jsonl line 2500: .*{field}"):
        store.ingest_file(path)
    assert table_counts(store) == before


def test_a_bad_item_in_a_rollout_already_stored_is_still_refused(store, tmp_path):
    good = {"type": "message", "role": "user", "content": "hi"}
    first = tmp_path / "first.jsonl"
    first.write_text(json.dumps({"run_id": "d", "rollout_id": "r0", "items": [good]}) + "\n")
    store.ingest_file(first)
    before = table_counts(store)
    again = tmp_path / "again.jsonl"  # r0 again (a duplicate, skipped), now with a bad item
    bad = {"type": "message", "role": "user", "content": "hi", "duration_ms": "slow"}
    again.write_text(
        json.dumps({"run_id": "d", "rollout_id": "r1", "items": [good]})
        + "\n"
        + json.dumps({"run_id": "d", "rollout_id": "r0", "items": [good, bad]})
        + "\n"
    )
    with pytest.raises(IngestError, match=r"again\.jsonl line 2"):
        store.ingest_file(again)
    assert table_counts(store) == before
