"""The Audit screen under Streamlit's AppTest, on a real store file."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest
from test_judge import ChatServer, Reply

from trace_store import open_store
from trace_store.audit import run_detectors

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT = 600  # AppTest needs a bound; generous, this is not a timing test


def open_audit(db: Path, monkeypatch: pytest.MonkeyPatch, **params: str) -> AppTest:
    monkeypatch.setenv("ROLLSCOPE_DB", str(db))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    at.switch_page("pages/audit.py")
    for key, value in params.items():
        at.query_params[key] = value
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def button(at: AppTest, label: str):
    [found] = [b for b in at.button if b.label == label]
    return found


def selectbox(at: AppTest, label: str):
    [found] = [s for s in at.selectbox if s.label == label]
    return found


def table_with(at: AppTest, column: str):
    """The first table on screen that has `column`."""
    return next(d.value for d in at.dataframe if column in d.value.columns)


def plain(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text)


def planted(db: Path) -> set[str]:
    with open_store(db) as store:  # the app holds it open in this process
        return set(
            store.query_df(
                "SELECT rollout_id FROM rollouts WHERE metadata->>'planted_hack' IS NOT NULL"
            )["rollout_id"]
        )


def test_an_empty_store_says_what_to_do(store_path, monkeypatch):
    at = open_audit(store_path, monkeypatch)
    assert at.title[0].value == "Audit"
    assert "No runs yet" in at.info[0].value


def test_running_the_detectors_lists_the_planted_hacks_with_links(demo_store_copy, monkeypatch):
    at = open_audit(demo_store_copy, monkeypatch)
    assert selectbox(at, "Run").value == "demo-train"
    assert any("No flags for this run yet" in i.value for i in at.info)

    button(at, "Run detectors and rules").click().run()
    assert not at.exception
    assert "no_tool_calls_high_reward" in at.code[0].value
    table = table_with(at, "rollout_id")
    hacks = planted(demo_store_copy)
    assert hacks <= set(table["rollout_id"])
    row = table[table["rollout_id"] == sorted(hacks)[0]].iloc[0]
    assert row["replay"] == f"/replay?run=demo-train&rollout={row['rollout_id']}"
    assert row["compare"].startswith(
        f"/compare?run=demo-train&rollout={row['rollout_id']}&rollout="
    )
    assert at.query_params["view"] in ("flags", ["flags"])


def test_the_view_is_in_the_url(demo_store_copy, monkeypatch):
    with open_store(demo_store_copy) as store:
        run_detectors(store)
    at = open_audit(demo_store_copy, monkeypatch, run="demo-train", detector="edits_tests")
    table = table_with(at, "rollout_id")
    assert set(table["detector"]) == {"edits_tests"}
    assert "detector=edits_tests" in at.code[-1].value  # the copy-link box


def test_a_bad_link_warns_and_falls_back(demo_store_copy, monkeypatch):
    at = open_audit(demo_store_copy, monkeypatch, run="no-such-run", view="nonsense")
    warnings = " ".join(plain(w.value) for w in at.warning)
    assert "no-such-run" in warnings and "nonsense" in warnings
    assert selectbox(at, "Run").value == "demo-train"


def test_rules_are_managed_on_the_screen(demo_store_copy, monkeypatch):
    at = open_audit(demo_store_copy, monkeypatch, view="rules")
    at.text_input[0].input("one-liners")
    at.text_area[0].input("length(final_answer) < 12 AND reward >= 1")
    button(at, "Save rule").click().run()
    assert not at.exception and not at.error
    assert list(at.dataframe[0].value["name"]) == ["one-liners"]

    at.text_input[0].input("sneaky")
    at.text_area[0].input("1=1; DROP TABLE rollouts")
    button(at, "Save rule").click().run()
    assert not at.exception
    assert "is not allowed" in plain(at.error[0].value)
    assert list(at.dataframe[0].value["name"]) == ["one-liners"]


def test_diagnostics_compare_with_the_baseline(demo_store_copy, monkeypatch):
    at = open_audit(demo_store_copy, monkeypatch, view="diagnostics")
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Prompts"] == "8"
    assert int(metrics["Wins"]) + int(metrics["Ties"]) + int(metrics["Losses"]) == 8
    assert selectbox(at, "Baseline run").value == "demo-baseline"


def test_the_judge_runs_from_the_screen(demo_store_copy, monkeypatch):
    with open_store(demo_store_copy) as store:
        run_detectors(store)
    server = ChatServer()
    server.script = [Reply(), Reply(content="I cannot tell."), Reply()]
    try:
        at = open_audit(demo_store_copy, monkeypatch, view="judge", judge_set="flagged")
        assert button(at, "Start judging").disabled  # no model yet
        at.text_input[0].input("judge-1")
        at.text_input[1].input(server.url)
        at.text_input[2].input("test-key")
        at.run()
        assert "4 to judge" in plain(at.caption[0].value)
        button(at, "Start judging").click().run()
        assert not at.exception
        for _ in range(600):  # until the background job is done (not a timing assertion)
            if any("judge finished" in s.value for s in at.success):
                break
            time.sleep(0.1)
            at.run()
        assert any("judge finished" in s.value for s in at.success)
        assert len(server.requests) == 4
        assert any("malformed answer" in plain(c.value) for c in at.caption)
        confusion = at.dataframe[0].value.set_index("reward")
        assert confusion.loc["high reward", "hack"] == 3
        rows = at.dataframe[1].value
        assert len(rows) == 4 and rows["error"].notna().sum() == 1
        assert set(rows["cited_events"]) == {"3, 5", ""}
        assert at.query_params["model"] in ("judge-1", ["judge-1"])
    finally:
        server.close()


def test_figures_are_built_from_the_query_results(demo_store_copy):
    from rollscope.ui import charts_audit
    from trace_store.audit import (
        baseline_comparison,
        flag_rate_by_step,
        flags_by_detector,
        signal_by_step,
    )

    with open_store(demo_store_copy) as store:
        run_detectors(store)
        by_detector = flags_by_detector(store, "demo-train")
        rates = flag_rate_by_step(store, "demo-train")
        per_step = signal_by_step(store, "demo-train")
        versus = baseline_comparison(store, "demo-baseline", "demo-train")
    bars = charts_audit.flags_by_detector(by_detector)
    assert list(bars.data[0].y) == list(by_detector["detector"])
    lines = charts_audit.flag_rate_over_steps(rates)
    assert {t.name for t in lines.data} == {*rates["detector"], "mean reward"}
    assert len(charts_audit.pass_vs_mean(per_step).data) == 2
    assert len(charts_audit.learning_signal(per_step).data) == 2
    deltas = charts_audit.baseline_deltas(versus)
    assert list(deltas.data[0].x) == list(versus["prompt_id"])


def test_the_tool_budget_from_the_link_is_used(demo_store_copy, monkeypatch):
    at = open_audit(demo_store_copy, monkeypatch, budget="3")
    button(at, "Run detectors and rules").click().run()
    assert not at.exception
    with open_store(demo_store_copy) as store:
        over = store.query_df(
            "SELECT count(*) AS n FROM rollouts WHERE run_id = 'demo-train' AND n_tool_calls > 3"
        )["n"][0]
    assert over > 0
    assert f"tool_budget_exceeded             low    {over:,} flagged" in at.code[0].value
