"""Replay and Compare in Chromium: a shared compare link opens both columns, and a hostile
trace (HTML, script, Markdown link, LaTeX) shows its characters instead of acting on them."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import expect

from trace_store import open_store

pytestmark = pytest.mark.browser

SCRIPT = "<script>window.__pwned = 1; alert('script')</script>"
IMG = "<img src=x onerror=alert(1)>"
LINK = "[click me](javascript:alert(2))"
LATEX = "$x^2$"
HOSTILE = f"{SCRIPT} {IMG} {LINK} {LATEX}"


def hostile_rollout(rid: str, sample: int, reward: float) -> dict:
    return {
        "run_id": "hostile",
        "run_name": f"Run {IMG}",
        "rollout_id": rid,
        "step": 1,
        "prompt_id": "p1",
        "sample_index": sample,
        "items": [
            {"type": "message", "role": "user", "content": f"Prompt: {HOSTILE}"},
            {"type": "reasoning", "text": f"Thinking: {HOSTILE}"},
            {
                "type": "function_call",
                "call_id": "c1",
                "name": f"tool{IMG}",
                "arguments": {"q": HOSTILE},
            },
            {"type": "function_call_output", "call_id": "c1", "output": f"Output: {HOSTILE}"},
            {"type": "message", "role": "assistant", "content": f"Said: {HOSTILE}"},
        ],
        "reward": reward,
        "grades": [{"name": "judge", "score": reward, "explanation": f"Because {HOSTILE}"}],
        "final_answer": f"Answer {sample}: {HOSTILE}",
    }


@pytest.fixture
def hostile_store(db_path: Path) -> Path:
    with open_store(db_path) as store:
        store.ingest_records(
            [hostile_rollout("evil-1", 0, 1.0), hostile_rollout("evil-2", 1, 0.0)],
            display_name="hostile",
        )
    return db_path


def watch_dialogs(page) -> list[str]:  # type: ignore[no-untyped-def]
    fired: list[str] = []

    def on_dialog(dialog) -> None:  # type: ignore[no-untyped-def]
        fired.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", on_dialog)
    return fired


def assert_inert(page, fired: list[str]) -> None:  # type: ignore[no-untyped-def]
    main = page.locator("[data-testid='stMain']")
    text = main.inner_text()
    for part in (SCRIPT, IMG, LINK, LATEX):
        assert part in text, f"{part!r} is not shown as text"
    assert fired == [], fired
    assert page.evaluate("() => window.__pwned") is None
    assert page.locator("img[src='x']").count() == 0
    assert page.locator("a[href^='javascript']").count() == 0
    assert main.locator(".katex").count() == 0
    assert main.locator("script").count() == 0


def test_a_compare_link_opens_both_columns(hostile_store, app_server, page, screenshot):
    fired = watch_dialogs(page)
    page.goto(f"{app_server}/compare?run=hostile&rollouts=evil-1,evil-2")
    main = page.locator("[data-testid='stMain']")
    expect(main.get_by_text("A · evil-1")).to_be_visible()
    expect(main.get_by_text("B · evil-2")).to_be_visible()
    expect(
        main.get_by_text("Same tool calls with the same arguments in every turn.")
    ).to_be_visible()
    expect(main.get_by_text("Answer 0: ", exact=False).first).to_be_visible()
    expect(main.get_by_text("Answer 1: ", exact=False).first).to_be_visible()
    screenshot(page, "compare-two-columns")
    # The two columns sit side by side.
    a = main.get_by_text("A · evil-1").bounding_box()
    b = main.get_by_text("B · evil-2").bounding_box()
    assert a and b and b["x"] > a["x"] + 100 and abs(a["y"] - b["y"]) < 5
    assert_inert(page, fired)


def test_a_hostile_trace_renders_as_inert_text(hostile_store, app_server, page, screenshot):
    fired = watch_dialogs(page)
    # r1=true opens the reasoning item (seq 1) from the URL, so its text is on the page too.
    page.goto(f"{app_server}/replay?run=hostile&rollout=evil-1&r1=true")
    main = page.locator("[data-testid='stMain']")
    expect(main.get_by_text("Thinking: ", exact=False)).to_be_visible()
    expect(main.get_by_text("Output: ", exact=False)).to_be_visible()
    expect(main.get_by_text("Answer 0: ", exact=False)).to_be_visible()
    screenshot(page, "replay-hostile")
    assert_inert(page, fired)
    text = main.inner_text()
    assert f"Thinking: {HOSTILE}" in text
    assert f"Said: {HOSTILE}" in text
    assert f"tool{IMG}" in text  # a tool's name is trace content too
    assert f"Because {HOSTILE}" in text  # and so is a grader's explanation


def test_selecting_rows_in_the_rollout_list_opens_replay_or_compare(
    hostile_store, app_server, page, screenshot
):
    page.goto(f"{app_server}/rollouts?run=hostile")
    grid = page.locator("[data-testid='stDataFrame']")
    grid.locator("td", has_text="evil-2").first.wait_for(state="attached")
    # The grid is a canvas: click the row-marker column (header ~35 px, rows ~35 px tall).
    grid.click(position={"x": 14, "y": 35 + 17})
    page.get_by_role("button", name="Open the selected rollout").wait_for()
    grid.click(position={"x": 14, "y": 35 + 35 + 17})
    compare = page.get_by_role("button", name="Compare the 2 selected")
    compare.wait_for()
    screenshot(page, "rollouts-two-selected")
    compare.click()
    page.wait_for_url("**/compare?**")
    assert "rollouts=evil-1%2Cevil-2" in page.url
    main = page.locator("[data-testid='stMain']")
    expect(main.get_by_text("A · evil-1")).to_be_visible()
    expect(main.get_by_text("B · evil-2")).to_be_visible()
