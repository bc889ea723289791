"""Through the real page in Chromium: runs selected on the Runs screen open in another screen."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import expect

from trace_store import open_store

GOOD = Path(__file__).resolve().parents[1] / "data" / "app" / "two_rollouts.jsonl"

pytestmark = pytest.mark.browser


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    """A store holding one uploaded run, written before the app opens it."""
    path = tmp_path / "browser.duckdb"
    with open_store(path) as store:
        store.ingest_file(GOOD)
    return path


def test_a_runs_link_selects_the_run_and_opens_it_in_rewards(app_server, page, screenshot):
    page.goto(f"{app_server}/?runs=upload-run")

    rewards = page.get_by_test_id("stMain").get_by_role("link", name="Rewards")
    expect(rewards).to_have_attribute("href", "rewards?runs=upload-run")
    screenshot(page, "runs-selected")
    # A screen that shows one run at a time is offered too, since exactly one is selected.
    rollouts = page.get_by_test_id("stMain").get_by_role("link", name="Rollouts")
    expect(rollouts).to_have_attribute("href", "rollouts?run=upload-run")
    expect(rollouts).not_to_have_attribute("disabled", "")

    rewards.click()
    expect(page.get_by_role("heading", name="Rewards")).to_be_visible()
    # page.url misses history.replaceState; the document's own location does not.
    href = page.evaluate("location.href")
    assert href.startswith(f"{app_server}/rewards?") and "runs=upload-run" in href, href
