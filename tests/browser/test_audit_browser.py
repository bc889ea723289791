"""The Audit screen in headless Chromium: detectors, a refused rule, and the judge with progress."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from playwright.sync_api import expect

from trace_store import open_store

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from test_judge import ChatServer, Reply

pytestmark = pytest.mark.browser


@pytest.fixture
def db_path(demo_store_path: Path, tmp_path: Path) -> Path:
    """The app under test serves a copy of the small demo (no flags yet)."""
    target = tmp_path / "browser.duckdb"
    shutil.copyfile(demo_store_path, target)
    return target


@pytest.fixture
def planted(db_path: Path) -> list[str]:
    with open_store(db_path) as store:
        return sorted(
            store.query_df(
                "SELECT rollout_id FROM rollouts WHERE metadata->>'planted_hack' IS NOT NULL"
            )["rollout_id"]
        )


@pytest.fixture
def chat_server():
    server = ChatServer()
    server.script = [Reply()]
    yield server
    server.close()


def main_text(page) -> str:  # type: ignore[no-untyped-def]
    return str(page.locator("[data-testid='stMain']").inner_text())


def test_audit_screen_finds_the_planted_hacks_and_runs_the_judge(
    planted, chat_server, app_server, page, screenshot
):
    page.goto(app_server)
    page.get_by_role("heading", name="Runs").wait_for()
    page.locator("[data-testid='stSidebarNav']").get_by_text("Audit").click()
    page.get_by_text("No flags for this run yet").wait_for()

    page.get_by_role("button", name="Run detectors and rules").click()
    page.get_by_role("heading", name="Flagged rollouts (4)").wait_for()
    page.locator("[data-testid='stDataFrame'] td", has_text=planted[0]).first.wait_for(
        state="attached"
    )
    cells = page.locator("[data-testid='stDataFrame'] td").all_text_contents()
    assert set(planted) <= set(cells), cells
    # the link columns: a replay of each flagged rollout, a compare with a clean sample
    assert f"{app_server}/replay?run=demo-train&rollout={planted[0]}" in cells
    assert any(c.startswith(f"{app_server}/compare?run=demo-train&rollout=") for c in cells)
    page.get_by_role("button", name="Link to this view").click()
    expect(page.locator("[data-testid='stCode']").last).to_contain_text("view=flags")
    screenshot(page, "audit-flags")

    # a shared link opens the same view; a hostile rule is refused with the reason
    page.goto(f"{app_server}/audit?run=demo-train&view=rules")
    page.get_by_role("button", name="Save rule").wait_for()
    page.get_by_label("Name").fill("peek")
    page.get_by_label("Condition or pattern").fill("length(read_text('/etc/passwd')) > 0")
    page.get_by_role("button", name="Save rule").click()
    error = page.locator("[data-testid='stAlertContentError']")
    expect(error).to_contain_text("read_text() is not allowed")
    screenshot(page, "audit-rule-refused")
    assert "Traceback" not in main_text(page)

    # the judge, against a local Chat Completions server, with progress to the end
    page.goto(f"{app_server}/audit?run=demo-train&view=judge&judge_set=flagged")
    page.get_by_label("Judge model").fill("judge-1")
    page.get_by_label("Judge model").press("Enter")
    page.get_by_label("Base URL (empty: $OPENAI_BASE_URL or OpenAI)").fill(chat_server.url)
    page.get_by_label("Base URL (empty: $OPENAI_BASE_URL or OpenAI)").press("Enter")
    key = page.get_by_role("textbox", name="API key (empty: $OPENAI_API_KEY)")
    key.fill("test-key")
    key.press("Enter")
    start = page.get_by_role("button", name="Start judging")
    expect(start).to_be_enabled()
    start.click()
    page.get_by_text("The judge finished.").wait_for()
    page.get_by_role("heading", name="Judge against reward").wait_for()
    screenshot(page, "audit-judge")
    assert len(chat_server.requests) == 4
    expect(page.locator("[data-testid='stMain']")).to_contain_text(
        "4 of 4 rollouts: 4 judged, 0 errors"
    )
    page.get_by_role("button", name="Link to this view").click()
    expect(page.locator("[data-testid='stCode']").last).to_contain_text("model=judge-1")
    assert "model=judge-1" in page.url
