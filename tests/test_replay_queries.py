"""Replay and compare queries on a real store holding a small, hand-written set of rollouts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq
import pytest

from trace_store import RolloutNotFound, RunNotFound, open_store
from trace_store import replay as R


def call(call_id: str, name: str, args: dict[str, Any] | str, **extra: Any) -> dict[str, Any]:
    arguments = args if isinstance(args, str) else json.dumps(args)
    return {
        "type": "function_call",
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
        **extra,
    }


def result(call_id: str, output: str, **extra: Any) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": output, **extra}


def rollout(
    run: str, rid: str, step: int, prompt: str, sample: int, reward: float, items: list, **kw: Any
) -> dict[str, Any]:
    return {
        "run_id": run,
        "run_name": f"Run {run}",
        "run_kind": "baseline" if run == "base" else "train",
        "rollout_id": rid,
        "step": step,
        "prompt_id": prompt,
        "sample_index": sample,
        "split": kw.pop("split", "eval" if run == "base" else "train"),
        "items": [{"type": "message", "role": "user", "content": f"Solve {prompt}"}, *items],
        "reward": reward,
        "final_answer": kw.pop("answer", f"answer of {rid}"),
        "status": "ok",
        **kw,
    }


def say(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "assistant", "content": text}


T0 = "2025-01-01T00:00:00Z"


def records() -> list[dict[str, Any]]:
    return [
        # p1 at step 1: three samples, rewards 1.0 / 0.5 / 0.0 -> advantages 1, 0, -1.
        rollout(
            "rft",
            "p1-s1-0",
            1,
            "p1",
            0,
            1.0,
            [
                {"type": "reasoning", "text": "look first"},
                call("a", "search", {"q": "bug", "path": "."}, started_at=T0, duration_ms=100),
                call("b", "read", {"path": "x.py"}, started_at=T0, duration_ms=300),
                result("a", "x.py:1"),
                result("b", "def f(): pass"),
                call("c", "run_tests", {"path": "tests"}, duration_ms=2000),
                result("c", "3 passed"),
                say("Fixed it."),
            ],
            answer="Summary: fixed f\nTests: 3 passed",
            grades=[
                {"name": "correctness", "score": 1.0, "weight": 0.7, "explanation": "tests pass"},
                {
                    "name": "efficiency",
                    "score": 1.0,
                    "weight": 0.3,
                    "explanation": "call c was quick",
                },
            ],
        ),
        rollout(
            "rft",
            "p1-s1-1",
            1,
            "p1",
            1,
            0.5,
            [
                # Same first turn, arguments with keys in another order: not a divergence.
                call("a", "search", '{"path": ".", "q": "bug"}'),
                call("b", "read", {"path": "x.py"}),
                result("a", "x.py:1 zebrafish"),
                result("b", "def f(): pass"),
                call("c", "edit_file", {"path": "tests/test_x.py"}),
                result("c", "edited", error="permission denied"),
                say("Done."),
            ],
            answer="Summary: edited the tests\nTests: 3 passed",
        ),
        rollout("rft", "p1-s1-2", 1, "p1", 2, 0.0, [say("No idea.")], answer="I give up"),
        # p2 at step 1: every sample scores the same: no learning signal.
        *[
            rollout("rft", f"p2-s1-{i}", 1, "p2", i, 1.0, [say("easy")], answer="42")
            for i in range(3)
        ],
        rollout("rft", "p1-s2-0", 2, "p1", 0, 1.0, [call("d", "search", {"q": "bug"})]),
        rollout("rft", "p1-s2-1", 2, "p1", 1, 0.8, [say("from memory")]),
        rollout("rft", "p1-s3-0", 3, "p1", 0, 0.9, [say("again")], split="eval"),
        # The baseline: p1 worse, p2 the same, p3 only here.
        rollout("base", "b-p1", 0, "p1", 0, 0.2, [say("hmm")]),
        rollout("base", "b-p2", 0, "p2", 0, 1.0, [say("42")]),
        rollout("base", "b-p3", 0, "p3", 0, 0.4, [say("?")]),
    ]


@pytest.fixture(scope="module")
def store_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("replay") / "replay.duckdb"
    with open_store(path) as store:
        store.ingest_records(records(), display_name="fixed")
    return path


@pytest.fixture
def store(store_file: Path, tmp_path: Path, copy_store_file):
    # A private copy: searching builds the index, which writes.
    copy = copy_store_file(store_file, tmp_path / "copy.duckdb")
    with open_store(copy) as s:
        yield s


def ref(rid: str, run: str = "rft") -> R.CompareRef:
    return R.CompareRef(run, rid)


def ids(df: pd.DataFrame) -> list[str]:
    return df["rollout_id"].tolist()


# --- list, filters, search -------------------------------------------------------------------


def test_list_filters_sorts_and_pages(store):
    q = R.RolloutQuery(runs=("rft",), prompt_id="p1", sort="reward", descending=True)
    assert R.count_rollouts(store, q) == 6
    first = R.list_rollouts(store, q, limit=2)
    assert first["reward"].tolist() == [1.0, 1.0]
    rest = R.list_rollouts(store, q, limit=10, offset=2)
    assert rest["reward"].tolist() == [0.9, 0.8, 0.5, 0.0]
    assert not set(ids(first)) & set(ids(rest))

    calls = R.RolloutQuery(runs=("rft",), calls=(2, 10))
    assert sorted(ids(R.list_rollouts(store, calls))) == ["p1-s1-0", "p1-s1-1"]
    assert ids(R.list_rollouts(store, R.RolloutQuery(runs=("rft",), split="eval"))) == ["p1-s3-0"]
    assert R.count_rollouts(store, R.RolloutQuery(steps=(2, 3), reward=(0.85, 1.0))) == 2


def test_filter_bounds_describe_the_runs(store):
    bounds = R.filter_bounds(store, ["rft"])
    assert bounds["steps"] == (1, 3)
    assert bounds["prompts"] == ["p1", "p2"]
    assert bounds["splits"] == ["eval", "train"]
    assert R.filter_bounds(store)["rollouts"] == 12


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("zebrafish", ["p1-s1-1"]),  # a tool output
        ("ZEBRAFISH", ["p1-s1-1"]),  # any case
        ("permission denied", ["p1-s1-1"]),  # a tool error, two words
        ("test_x", ["p1-s1-1"]),  # tool arguments
        ("give up", ["p1-s1-2"]),  # the final answer
        ('"passed Tests"', []),  # a phrase must occur as typed
        ("look first", ["p1-s1-0"]),  # reasoning
        ("zebra", []),  # whole words only
    ],
)
def test_full_text_search(store, text, expected):
    q = R.RolloutQuery(search=text)
    assert sorted(ids(R.list_rollouts(store, q))) == expected
    assert R.count_rollouts(store, q) == len(expected)


def test_search_index_is_rebuilt_after_an_import(store):
    assert R.search_index_state(store) == "missing"
    assert R.count_rollouts(store, R.RolloutQuery(search="okapi")) == 0
    assert R.search_index_state(store) == "fresh"
    store.ingest_records(
        [rollout("rft", "late", 4, "p1", 0, 1.0, [say("an okapi appears")])], display_name="late"
    )
    assert R.search_index_state(store) == "stale"
    assert ids(R.list_rollouts(store, R.RolloutQuery(search="okapi"))) == ["late"]
    assert R.search_index_state(store) == "fresh"


def test_the_index_follows_new_changed_and_deleted_rollouts_incrementally(store):
    def docs() -> dict[str, int]:
        rows = store.cursor().execute("SELECT rollout_id, doc_id FROM search_docs").fetchall()
        return dict(rows)

    assert R.count_rollouts(store, R.RolloutQuery(search="platypus")) == 0
    before = docs()
    assert len(before) == 12
    # Items merged into an existing rollout by an event-a-line upload: that rollout is re-indexed.
    store.ingest_records(
        [
            {
                "run_id": "rft",
                "rollout_id": "p2-s1-0",
                "item": {"type": "message", "role": "assistant", "content": "a platypus!"},
            }
        ],
        display_name="late items",
    )
    assert R.search_index_state(store) == "stale"
    assert ids(R.list_rollouts(store, R.RolloutQuery(search="Platypus"))) == ["p2-s1-0"]
    after = docs()
    assert after["p2-s1-0"] != before["p2-s1-0"]
    assert {k: v for k, v in after.items() if k != "p2-s1-0"} == {
        k: v for k, v in before.items() if k != "p2-s1-0"
    }  # the others were not touched
    # A deleted run leaves the index.
    store.delete_run("base")
    assert R.count_rollouts(store, R.RolloutQuery(search="hmm")) == 0
    assert not {"b-p1", "b-p2", "b-p3"} & set(docs())
    orphans = (
        store.cursor()
        .execute(
            "SELECT count(*) FROM search_terms WHERE doc_id NOT IN (SELECT doc_id FROM search_docs)"
        )
        .fetchone()
    )
    assert orphans == (0,)
    # A rollout indexed after the deletion does not inherit the deleted rollouts' words.
    store.ingest_records(
        [rollout("rft", "after", 5, "p1", 0, 1.0, [say("a walrus")])], display_name="after"
    )
    assert ids(R.list_rollouts(store, R.RolloutQuery(search="walrus"))) == ["after"]
    assert R.count_rollouts(store, R.RolloutQuery(search="hmm")) == 0


def test_a_big_update_runs_in_the_background_while_the_old_index_answers(store, monkeypatch):
    monkeypatch.setattr(R, "SYNC_INDEX_MAX_ROLLOUTS", 0)  # every update counts as big
    zebra = R.RolloutQuery(search="zebrafish")
    okapi = R.RolloutQuery(search="okapi")
    assert ids(R.list_rollouts(store, zebra)) == []  # the first index is being built
    R._UPDATES[store].join()
    assert ids(R.list_rollouts(store, zebra)) == ["p1-s1-1"]
    store.ingest_records(
        [rollout("rft", "late", 4, "p1", 0, 1.0, [say("an okapi appears")])], display_name="late"
    )
    with store.transaction():  # hold the writer's lock: the background update must wait
        assert R.list_rollouts(store, okapi).empty  # the index as it was
        assert ids(R.list_rollouts(store, zebra)) == ["p1-s1-1"]
        assert R.search_index_rebuilding(store)
    R._UPDATES[store].join()
    assert R.search_index_state(store) == "fresh"
    assert ids(R.list_rollouts(store, okapi)) == ["late"]


def test_a_read_only_store_is_searched_by_scanning(store_file, tmp_path, copy_store_file):
    unindexed = copy_store_file(store_file, tmp_path / "unindexed.duckdb")
    with open_store(unindexed, read_only=True) as ro:
        assert ids(R.list_rollouts(ro, R.RolloutQuery(search="zebrafish"))) == ["p1-s1-1"]
        assert R.count_rollouts(ro, R.RolloutQuery(search="zebra")) == 0
        assert R.count_rollouts(ro, R.RolloutQuery(search='"denied permission"')) == 0


# --- one rollout ------------------------------------------------------------------------------


def test_header_grades_and_unknown_ids(store):
    header = R.rollout_header(store, "rft", "p1-s1-0")
    assert (header["run_name"], header["n_tool_calls"], header["reward"]) == ("Run rft", 3, 1.0)
    grades = R.rollout_grades(store, "rft", "p1-s1-0")
    assert grades["grader"].tolist() == ["correctness", "efficiency"]
    assert grades["weighted"].round(2).tolist() == [0.7, 0.3]
    with pytest.raises(RunNotFound, match="no run “nope”"):
        R.rollout_header(store, "nope", "p1-s1-0")
    with pytest.raises(RolloutNotFound, match="has no rollout “nope”"):
        R.rollout_header(store, "rft", "nope")


def test_turns_pair_calls_with_results_and_keep_parallel_calls_together(store):
    turns = R.group_turns(R.rollout_events(store, "rft", "p1-s1-0"))
    assert [t.number for t in turns] == [0, 1, 2, 3]
    first = turns[1]
    assert first.parallel
    assert [(c["tool_name"], r["output"]) for c, r in first.calls] == [
        ("search", "x.py:1"),
        ("read", "def f(): pass"),
    ]
    assert [i["kind"] for i in first.items] == ["reasoning"]
    assert not turns[2].parallel
    assert [i["text"] for i in turns[3].items] == ["Fixed it."]


def test_long_fields_are_cut_and_fetched_whole_on_request(store):
    big = "x" * 50_000
    store.ingest_records(
        [rollout("rft", "big", 9, "p9", 0, 0.0, [call("z", "dump", {}), result("z", big)])],
        display_name="big",
    )
    events = R.rollout_events(store, "rft", "big", preview_chars=100)
    row = events[events["kind"] == "tool_result"].iloc[0]
    assert len(row["output"]) == 100 and row["output_chars"] == 50_000
    assert R.event_field(store, "rft", "big", int(row["seq"]), "output") == big


def test_turn_pages_never_split_a_turn(store):
    pages = R.turn_pages(store, "rft", "p1-s1-0", items_per_page=3)
    assert pages == [(0, 1), (2, 3)]
    assert R.turn_pages(store, "rft", "p1-s1-0", items_per_page=1000) == [(0, 3)]


def test_find_in_rollout_lists_the_items(store):
    hits = R.find_in_rollout(store, "rft", "p1-s1-1", "DENIED")
    assert hits[["kind", "field"]].values.tolist() == [["tool_result", "error"]]
    assert "permission denied" in hits["snippet"].iloc[0]


def test_timeline_has_one_bar_a_call(store):
    tl = R.tool_timeline(store, "rft", "p1-s1-0")
    calls = tl[tl["kind"] == "tool_call"]
    assert calls["label"].tolist() == ["search", "read", "run_tests"]
    assert calls["duration_ms"].tolist() == [100, 300, 2000]
    assert calls["start_ms"].iloc[0] == calls["start_ms"].iloc[1]  # parallel: same start


def test_neighbours_of_a_rollout(store):
    n = R.rollout_neighbours(store, "rft", "p1-s1-1")
    assert n == {
        "prev_sample": "p1-s1-0",
        "next_sample": "p1-s1-2",
        "prev_step": None,
        "next_step": "p1-s2-1",  # same sample index at the next step
    }
    # The eval rollout at step 3 is not the train prompt's next step.
    assert R.rollout_neighbours(store, "rft", "p1-s2-0")["next_step"] is None


def test_grade_anchors_point_at_what_they_judged(store):
    grades = R.rollout_grades(store, "rft", "p1-s1-0")
    events = R.rollout_events(store, "rft", "p1-s1-0")
    assert R.grade_anchors(grades, events) == {"correctness": "answer", "efficiency": "call:c"}


# --- groups, prompts over time ---------------------------------------------------------------


def test_group_advantage_and_no_signal(store):
    group = R.prompt_group(store, "rft", "p1", 1)
    assert ids(group) == ["p1-s1-0", "p1-s1-1", "p1-s1-2"]
    assert group["advantage"].round(6).tolist() == [1.0, 0.0, -1.0]
    assert not group["no_signal"].any()
    flat = R.prompt_group(store, "rft", "p2", 1)
    assert flat["advantage"].tolist() == [0.0, 0.0, 0.0]
    assert flat["no_signal"].all()
    assert R.best_worst_pair(store, "rft", "p1", 1) == ["p1-s1-0", "p1-s1-2"]
    assert R.best_worst_pair(store, "rft", "p2", 1) == ["p2-s1-0", "p2-s1-2"]
    with pytest.raises(RolloutNotFound):
        R.best_worst_pair(store, "rft", "p1", 99)


def test_prompt_history_follows_a_prompt_over_steps(store):
    history = R.prompt_history(store, "rft", "p1", split="train")
    assert history["step"].tolist() == [1, 2]
    assert history["mean_reward"].round(3).tolist() == [0.5, 0.9]
    assert history["best_rollout"].tolist() == ["p1-s1-0", "p1-s2-0"]
    assert history["best_answer"].iloc[0].startswith("Summary: fixed f")


# --- compare -----------------------------------------------------------------------------------


def test_alignment_by_turn_and_first_divergence(store):
    pair = [ref("p1-s1-0"), ref("p1-s1-1")]
    aligned = R.aligned_turns(store, pair)
    assert aligned["turn"].tolist() == [1, 2, 3]
    assert aligned["calls_0"].iloc[0] == ['search({"path":".","q":"bug"})', 'read({"path":"x.py"})']
    assert aligned["same"].tolist() == [True, False, True]
    # Turn 1 is the same (arguments' key order does not matter); turn 2 runs another tool.
    assert R.first_divergence(store, pair) == 2
    assert R.first_divergence(store, [ref("p1-s1-0"), ref("p1-s1-0")]) is None
    # Other arguments to the same tool diverge too, as does stopping early.
    assert R.first_divergence(store, [ref("p1-s1-0"), ref("p1-s2-0")]) == 1
    assert R.first_divergence(store, [ref("p1-s1-0"), ref("p1-s1-2")]) == 1


def test_presets_pick_the_rollouts(store):
    steps = R.step_pair_refs(store, "rft", "p1", [1, 2], sample=1)
    assert [r.rollout_id for r in steps] == ["p1-s1-1", "p1-s2-1"]
    runs = R.run_pair_refs(store, ["base", "rft"], "p1")
    assert [(r.run_id, r.rollout_id) for r in runs] == [("base", "b-p1"), ("rft", "p1-s3-0")]
    with pytest.raises(RolloutNotFound, match="p3"):
        R.run_pair_refs(store, ["base", "rft"], "p3")
    with pytest.raises(RunNotFound):
        R.step_pair_refs(store, "nope", "p1", [1])


def test_per_prompt_deltas_between_runs(store):
    deltas = R.prompt_deltas(store, "base", "rft", split=None)
    by_prompt = deltas.set_index("prompt_id")
    assert list(by_prompt.index) == ["p2", "p1"]  # p3 is in one run only
    assert by_prompt.loc["p1", "step_b"] == 3  # the run's last step with the prompt
    assert round(by_prompt.loc["p1", "delta"], 3) == 0.7
    assert by_prompt.loc["p1", "change"] == "improved"
    assert by_prompt.loc["p2", "change"] == "same"
    assert by_prompt.loc["p1", ["rollout_a", "rollout_b"]].tolist() == ["b-p1", "p1-s3-0"]
    train = R.prompt_deltas(store, "base", "rft", split="train").set_index("prompt_id")
    assert train.empty  # the baseline has no train split
    regress = R.prompt_deltas(store, "rft", "base").set_index("prompt_id")
    assert regress.loc["p1", "change"] == "regressed"


def test_answer_diff():
    diff = R.answer_diff("a\nb\nc", "a\nB\nc")
    assert "-b" in diff and "+B" in diff
    assert R.answer_diff("same", "same") == ""


# --- export ------------------------------------------------------------------------------------


def test_one_rollout_exports_as_a_reimportable_record(store, tmp_path):
    record = R.export_rollout_json(store, "rft", "p1-s1-1")
    assert [i["type"] for i in record["items"]][:3] == ["message", "function_call", "function_call"]
    assert record["items"][6]["error"] == "permission denied"
    record["run_id"] = "copy"
    with open_store(tmp_path / "other.duckdb") as other:
        other.ingest_records([record], display_name="export")
        again = R.export_rollout_json(other, "copy", "p1-s1-1")
    assert again["items"] == record["items"]
    assert again["reward"] == 0.5


def test_markdown_export_fences_trace_text(store):
    md = R.export_rollout_markdown(store, "rft", "p1-s1-0")
    assert md.startswith("# Rollout p1-s1-0")
    assert "```json\n" in md and "- correctness: score 1.0 weight 0.7 — tests pass" in md


def test_filtered_list_exports(store, tmp_path):
    q = R.RolloutQuery(runs=("rft",), prompt_id="p2")
    jsonl = R.export_rollouts(store, q, tmp_path / "l.jsonl", "jsonl")
    lines = [json.loads(line) for line in jsonl.read_text().splitlines()]
    assert [r["rollout_id"] for r in lines] == ["p2-s1-0", "p2-s1-1", "p2-s1-2"]
    # Batched export gives the same records as one rollout's export, across batches too.
    everything = R.RolloutQuery(runs=("rft",), sort="reward")
    batched = list(R._iter_export_records(store, everything, batch=4))
    assert len(batched) == 9
    for record in batched:
        assert record == R.export_rollout_json(store, "rft", record["rollout_id"])
    table = pq.read_table(R.export_rollouts(store, q, tmp_path / "l.parquet", "parquet"))
    assert table.num_rows == 3 and "reward" in table.column_names
