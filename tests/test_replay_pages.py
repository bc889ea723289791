"""The Rollouts, Replay and Compare screens under AppTest, on the demo store (a real file)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from trace_store import open_store

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT = 600  # AppTest needs a bound; generous, this is not a timing test


def open_page(db: Path, monkeypatch: pytest.MonkeyPatch, screen: str, **params: str) -> AppTest:
    monkeypatch.setenv("ROLLSCOPE_DB", str(db))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    at.switch_page(f"pages/{screen}.py")
    at.query_params.update(params)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def plain(text: str) -> str:
    """Markdown source as a user reads it (escapes removed)."""
    return re.sub(r"\\(.)", r"\1", text.replace("**", ""))


def texts(elements) -> list[str]:
    return [plain(str(e.value)) for e in elements]


def metric(at: AppTest, label: str) -> str:
    [found] = [m for m in at.metric if m.label == label]
    return str(found.value)


def one_value(db: Path | str, sql: str, params: list | None = None):
    # Not read-only: the app in this process holds the file with the default configuration.
    with open_store(db) as store:
        row = store.cursor().execute(sql, params or []).fetchone()
    assert row is not None, sql
    return row[0] if len(row) == 1 else row


@pytest.fixture(scope="module")
def hack_rollout(demo_store_path: Path, store_target) -> str:
    return one_value(
        store_target(demo_store_path),
        "SELECT rollout_id FROM rollouts WHERE run_id = 'demo-train'"
        " AND json_extract_string(metadata, '$.planted_hack') = 'no_tool_calls_full_reward' ORDER BY rollout_id LIMIT 1",
    )


@pytest.fixture(scope="module")
def parallel_rollout(demo_store_path: Path, store_target) -> str:
    return one_value(
        store_target(demo_store_path),
        "SELECT rollout_id FROM rollouts WHERE run_id = 'demo-train' AND max_parallel_calls >= 3"
        " AND split = 'train'"
        " AND status = 'ok' ORDER BY rollout_id LIMIT 1",
    )


# --- Replay -------------------------------------------------------------------------------------


def test_the_planted_hack_replay_shows_full_reward_earned_without_tool_calls(
    demo_store_path, monkeypatch, hack_rollout
):
    at = open_page(demo_store_path, monkeypatch, "replay", run="demo-train", rollout=hack_rollout)

    assert metric(at, "Reward") == "1.000"
    assert metric(at, "Tool calls") == "0"
    assert "no_tool_calls_full_reward" in " ".join(texts(at.warning))
    # Every grader gave full marks, and the verdicts sit next to the answer they judged.
    grades = at.dataframe[0].value
    assert grades["score"].tolist() == [1.0, 1.0, 1.0]
    assert any(t.startswith("Grader correctness: 1") for t in texts(at.info))
    # The trajectory: the prompt and one turn that answers straight away, no call anywhere.
    labels = texts(at.markdown)
    assert "Prompt" in labels and "Turn 1 · no tool calls" in labels
    assert not [t for t in labels if "build:" in t]
    assert [t for t in labels if t.startswith("Turn ")] == ["Turn 1 · no tool calls"]
    answer = one_value(
        demo_store_path, "SELECT final_answer FROM rollouts WHERE rollout_id = ?", [hack_rollout]
    )
    assert answer in [t.value for t in at.text]


def test_a_turn_of_parallel_calls_is_shown_together_with_arguments_and_outputs(
    demo_store_path, monkeypatch, parallel_rollout
):
    at = open_page(
        demo_store_path, monkeypatch, "replay", run="demo-train", rollout=parallel_rollout
    )

    labels = texts(at.markdown)
    parallel = [t for t in labels if re.search(r"Turn \d+ · [3-9] calls in parallel", t)]
    assert parallel, labels
    code = [c.value for c in at.code]
    assert any(c.startswith('{\n  "') for c in code)  # pretty-printed JSON arguments
    # Reasoning is collapsed: its text is not sent until opened.
    reasoning = [e for e in at.expander if e.label.startswith("Reasoning")]
    assert reasoning
    assert all(len(e.children) == 0 for e in reasoning)


def test_an_expanded_item_in_the_url_opens_it(demo_store_path, monkeypatch, parallel_rollout):
    seq = one_value(
        demo_store_path,
        "SELECT min(seq) FROM events WHERE rollout_id = ? AND kind = 'reasoning' AND text <> ''",
        [parallel_rollout],
    )
    text = one_value(
        demo_store_path,
        "SELECT text FROM events WHERE rollout_id = ? AND seq = ?",
        [parallel_rollout, seq],
    )
    at = open_page(
        demo_store_path,
        monkeypatch,
        "replay",
        run="demo-train",
        rollout=parallel_rollout,
        **{f"r{seq}": "true"},
    )
    assert text in [t.value for t in at.text]


def test_unknown_ids_in_the_url_say_so(demo_store_path, monkeypatch):
    at = open_page(demo_store_path, monkeypatch, "replay", run="nope", rollout="x")
    assert "There is no run “nope” in this store." in texts(at.error)[0]

    at = open_page(demo_store_path, monkeypatch, "replay", run="demo-train", rollout="nope")
    assert "Run “demo-train” has no rollout “nope”." in texts(at.error)[0]

    at = open_page(demo_store_path, monkeypatch, "replay", run="demo-train")
    assert "names no rollout" in texts(at.info)[0]


def test_timeline_group_and_prompt_history_views(demo_store_path, monkeypatch, parallel_rollout):
    prompt, step = one_value(
        demo_store_path,
        "SELECT prompt_id, step FROM rollouts WHERE rollout_id = ?",
        [parallel_rollout],
    )
    base = {"run": "demo-train", "rollout": parallel_rollout}

    at = open_page(demo_store_path, monkeypatch, "replay", view="Timeline", **base)
    assert len(at.get("plotly_chart")) == 1
    assert "slowest" in " ".join(texts(at.caption))

    at = open_page(demo_store_path, monkeypatch, "replay", view="Group", **base)
    group = at.dataframe[-1].value
    assert len(group) == 4 and parallel_rollout in group["rollout_id"].tolist()
    assert abs(group["advantage"].sum()) < 1e-9  # advantages centre on the group mean

    at = open_page(demo_store_path, monkeypatch, "replay", view="Prompt over steps", **base)
    history = at.dataframe[-1].value
    assert history["step"].tolist() == list(range(1, 13))
    assert int(step) in history["step"].tolist() and prompt in " ".join(texts(at.caption))


def test_a_group_without_variance_is_marked(demo_store_path, monkeypatch):
    rollout = one_value(
        demo_store_path,
        """SELECT min(rollout_id) FROM rollouts WHERE run_id = 'demo-train' AND split = 'train'
           GROUP BY step, prompt_id HAVING min(reward) = max(reward) ORDER BY 1 LIMIT 1""",
    )
    at = open_page(
        demo_store_path, monkeypatch, "replay", run="demo-train", rollout=rollout, view="Group"
    )
    assert "no learning signal" in " ".join(texts(at.warning))


def test_find_within_a_rollout_keeps_the_matching_turns(
    demo_store_path, monkeypatch, parallel_rollout
):
    tool = one_value(
        demo_store_path,
        "SELECT tool_name FROM events WHERE rollout_id = ? AND kind = 'tool_call' ORDER BY seq"
        " LIMIT 1",
        [parallel_rollout],
    )
    at = open_page(
        demo_store_path,
        monkeypatch,
        "replay",
        run="demo-train",
        rollout=parallel_rollout,
        find=tool,
    )
    assert f"“{tool}” occurs in" in " ".join(texts(at.caption))
    hits = at.dataframe[-1].value
    assert len(hits) >= 1 and set(hits["Field"]) <= {"text", "tool", "arguments", "output", "error"}


def test_long_outputs_are_cut_and_blobs_replaced(demo_store_copy, monkeypatch):
    blob = "data:image/png;base64," + "iVBORw0KGgo" * 3000
    long_output = "line\n" * 3000
    with open_store(demo_store_copy) as store:
        store.ingest_records(
            [
                {
                    "run_id": "big",
                    "rollout_id": "r1",
                    "items": [
                        {
                            "type": "function_call",
                            "call_id": "c1",
                            "name": "shot",
                            "arguments": "{}",
                        },
                        {"type": "function_call_output", "call_id": "c1", "output": blob},
                        {
                            "type": "function_call",
                            "call_id": "c2",
                            "name": "cat",
                            "arguments": "{}",
                        },
                        {"type": "function_call_output", "call_id": "c2", "output": long_output},
                    ],
                    "reward": 0.5,
                }
            ],
            display_name="big",
        )
    at = open_page(demo_store_copy, monkeypatch, "replay", run="big", rollout="r1")
    code = [c.value for c in at.code]
    assert any(
        re.fullmatch(r"\[data URI, at least \d+\.\d KB, not shown\]\n… [\d,]+ more characters", c)
        for c in code
    ), code
    assert not any("iVBORw0KGgoiVBOR" in c for c in code)
    [show_all] = [t for t in at.toggle if t.label.startswith("Show all") and "15,000" in t.label]
    show_all.set_value(True).run()
    assert long_output.strip() in [c.value.strip() for c in at.code]


# --- Rollouts ------------------------------------------------------------------------------------


def test_rollout_list_filters_sorts_and_links_to_replay(demo_store_copy, monkeypatch):
    at = open_page(demo_store_copy, monkeypatch, "rollouts", run="demo-train", sort="reward")
    table = at.dataframe[0].value
    assert len(table) == 50
    assert table["reward"].is_monotonic_decreasing  # "highest first" is the default for reward
    assert (
        table["open"]
        .iloc[0]
        .endswith(f"/replay?run=demo-train&rollout={table['rollout_id'].iloc[0]}")
    )
    assert "400 rollouts" in " ".join(texts(at.caption))

    at = open_page(demo_store_copy, monkeypatch, "rollouts", run="demo-train", q="terminated")
    found = at.dataframe[0].value
    expected = one_value(
        demo_store_copy,
        "SELECT count(DISTINCT rollout_id) FROM events WHERE run_id = 'demo-train'"
        " AND regexp_matches(lower(concat_ws(' ', text, output, error, arguments)), '\\bterminated\\b')",
    )
    assert 0 < len(found) == expected

    at = open_page(demo_store_copy, monkeypatch, "rollouts", run="demo-train", calls="0-0")
    zero = at.dataframe[0].value
    assert (zero["n_tool_calls"] == 0).all() and len(zero) >= 1


# --- Compare ------------------------------------------------------------------------------------


def test_compare_link_shows_both_columns_and_the_divergence(
    demo_store_path, monkeypatch, hack_rollout, parallel_rollout
):
    at = open_page(
        demo_store_path,
        monkeypatch,
        "compare",
        run="demo-train",
        rollouts=f"{parallel_rollout},{hack_rollout}",
    )
    labels = texts(at.markdown)
    assert f"A · {parallel_rollout}" in labels and f"B · {hack_rollout}" in labels
    assert "First divergence at turn 1" in texts(at.warning)[-1]
    assert [m.value for m in at.metric if m.label == "Calls"][1] == "0"


def test_compare_presets(demo_store_path, monkeypatch):
    at = open_page(
        demo_store_path,
        monkeypatch,
        "compare",
        preset="best-worst",
        run="demo-train",
        prompt="task-000",
        step="2",
        split="train",
    )
    rewards = [m.value for m in at.metric if m.label == "Reward"]
    assert len(rewards) == 2 and float(rewards[0]) > float(rewards[1])

    at = open_page(
        demo_store_path, monkeypatch, "compare", preset="steps", run="demo-train",
        prompt="task-001", steps="1,12",
    )  # fmt: skip
    labels = texts(at.markdown)
    assert "A · train-s0001-task-001-0" in labels and "B · train-s0012-task-001-0" in labels

    at = open_page(
        demo_store_path, monkeypatch, "compare", preset="runs",
        runs="demo-baseline,demo-train", prompt="task-002",
    )  # fmt: skip
    captions = " ".join(texts(at.caption))
    assert "Demo baseline" in captions and "Demo RFT" in captions


def test_per_prompt_view_between_two_runs(demo_store_path, monkeypatch):
    at = open_page(
        demo_store_path, monkeypatch, "compare", preset="prompts", runs="demo-baseline,demo-train"
    )
    table = at.dataframe[0].value
    assert len(table) == 8
    assert set(table["change"]) <= {"improved", "regressed", "same"}
    assert table["compare"].iloc[0].startswith("/compare?runs=demo-baseline%2Cdemo-train&rollouts=")
    assert "8 prompts in both runs" in " ".join(texts(at.caption))


def test_bad_compare_links_say_what_is_wrong(demo_store_path, monkeypatch):
    at = open_page(demo_store_path, monkeypatch, "compare", preset="nope")
    assert "Unknown preset “nope”" in texts(at.error)[0]
    at = open_page(demo_store_path, monkeypatch, "compare", preset="best-worst", run="demo-train")
    assert "lacks prompt, step" in texts(at.error)[0]
    at = open_page(
        demo_store_path, monkeypatch, "compare", runs="demo-train", rollouts="a,b", run=""
    )
    assert "Run “demo-train” has no rollout “a”." in texts(at.error)[0]
    at = open_page(demo_store_path, monkeypatch, "compare", runs="x,y,z", rollouts="a,b")
    assert "names 2 rollouts but 3 runs" in texts(at.error)[0]


def test_a_runs_screen_link_with_one_run_compares_it_with_the_baseline(
    demo_store_path, monkeypatch
):
    at = open_page(demo_store_path, monkeypatch, "compare", runs="demo-train")
    assert at.query_params["runs"] == ["demo-baseline", "demo-train"]
    assert len(at.dataframe[0].value) == 8
    assert at.multiselect[0].value == ["demo-baseline", "demo-train"]


def test_blobs_become_placeholders_and_arguments_are_pretty_printed():
    from rollscope.ui.trajectory import pretty_arguments, strip_blobs

    b64 = "QUJD" * 1000  # 4,000 base64 characters = 3,000 bytes
    assert strip_blobs(f"img: data:image/jpeg;base64,{b64} done") == (
        "img: [data URI, 3.0 KB, not shown] done"
    )
    assert strip_blobs(f"raw {b64}") == "raw [base64 data, 3.0 KB, not shown]"
    assert strip_blobs(f"cut {b64}", cut=True) == "cut [base64 data, at least 3.0 KB, not shown]"
    assert (
        strip_blobs("short QUJD and a_long_identifier_name")
        == "short QUJD and a_long_identifier_name"
    )
    assert pretty_arguments('{"b": 1, "a": [1, 2]}') == (
        '{\n  "b": 1,\n  "a": [\n    1,\n    2\n  ]\n}',
        "json",
    )
    assert pretty_arguments("not json") == ("not json", None)


def test_a_long_rollout_is_paged_by_turns_and_the_page_is_in_the_url(demo_store_copy, monkeypatch):
    items = [{"type": "message", "role": "user", "content": "go"}]
    for t in range(1, 61):
        items += [
            {"type": "reasoning", "text": f"step {t}"},
            {"type": "function_call", "call_id": f"c{t}", "name": "ls", "arguments": "{}"},
            {"type": "function_call_output", "call_id": f"c{t}", "output": f"out {t}"},
        ]
    with open_store(demo_store_copy) as store:
        store.ingest_records(
            [{"run_id": "long", "rollout_id": "r", "items": items, "reward": 1.0}],
            display_name="long",
        )
        pages = replay_pages(store)
    assert len(pages) == 2
    at = open_page(demo_store_copy, monkeypatch, "replay", run="long", rollout="r", page="2")
    assert at.selectbox[0].value == 2
    first, last = pages[1]
    assert f"Turns {first}–{last} of this rollout." in texts(at.caption)
    turns = [t for t in texts(at.markdown) if t.startswith("Turn ")]
    assert turns[0] == f"Turn {first} · 1 call" and turns[-1] == f"Turn {last} · 1 call"


def replay_pages(store) -> list[tuple[int, int]]:
    from trace_store import replay

    return replay.turn_pages(store, "long", "r")
