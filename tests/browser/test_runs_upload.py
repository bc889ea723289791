"""Through the real page in Chromium: upload files on the Runs screen, see the run appear."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

DATA = Path(__file__).resolve().parents[1] / "data" / "app"

pytestmark = pytest.mark.browser


def table_cells(page) -> list[str]:  # type: ignore[no-untyped-def]
    # st.dataframe draws on a canvas; its accessible table holds the cell text.
    return page.locator("[data-testid='stDataFrame'] td").all_text_contents()


def test_uploading_a_canonical_file_adds_its_run_to_the_table(app_server, page, screenshot):
    page.goto(app_server)
    page.get_by_role("button", name="Load the demo run").wait_for()
    screenshot(page, "runs-empty")

    trace_files = page.get_by_test_id("stFileUploader").filter(has_text="Trace files")
    trace_files.locator("input[type='file']").set_input_files(
        [DATA / "two_rollouts.jsonl", DATA / "bad_reward.jsonl"]
    )
    page.get_by_role("button", name="Import 2 files").wait_for()
    # The detected format of each file is shown before anything is imported.
    formats = page.locator("[data-testid='stSelectbox'] input")
    expect(formats).to_have_count(2)
    for i in range(2):
        expect(formats.nth(i)).to_have_value("Rollscope canonical JSONL")
    page.get_by_role("button", name="Import 2 files").click()

    page.locator("[data-testid='stDataFrame'] td", has_text="Uploaded run").wait_for(
        state="attached"
    )
    screenshot(page, "runs-after-upload")
    cells = table_cells(page)
    assert cells[:4] == ["Uploaded run", "train", "2", "0–1 (2 steps)"], cells
    success = page.locator("[data-testid='stAlertContentSuccess']").inner_text()
    assert "two_rollouts.jsonl" in success and "2 rollouts and 6 events added" in success
    error = page.locator("[data-testid='stAlertContentError']").inner_text()
    assert 'bad_reward.jsonl line 2: `reward` must be a number, got "high"' in error
    assert "Traceback" not in page.locator("[data-testid='stMain']").inner_text()
    assert "1 run" in page.locator("[data-testid='stSidebar']").inner_text()


def test_loading_the_demo_from_the_empty_store(app_server, page, screenshot):
    page.goto(app_server)
    page.get_by_role("button", name="Load the demo run").click()

    cell = page.locator("[data-testid='stDataFrame'] td").filter(has_text=re.compile("^baseline$"))
    cell.wait_for(state="attached")
    screenshot(page, "runs-demo-loaded")
    cells = table_cells(page)
    assert "train" in cells and "baseline" in cells, cells
    assert "demo run" in page.locator("[data-testid='stAlertContentSuccess']").inner_text()
    assert page.get_by_role("button", name="Load the demo run").count() == 0
