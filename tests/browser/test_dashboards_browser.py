"""The dashboards in Chromium: a shared link opens the view it describes, and each screen draws
its charts on the demo run. Screenshots of the three screens go to test-artifacts/screenshots/."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.browser


@pytest.fixture
def demo_db(db_path: Path, demo_store_path: Path) -> Path:
    """The app under test serves a copy of the small demo store."""
    shutil.copyfile(demo_store_path, db_path)
    return db_path


def main_text(page) -> str:  # type: ignore[no-untyped-def]
    return page.locator("[data-testid='stMain']").inner_text()


def charts(page):  # type: ignore[no-untyped-def]
    return page.locator("[data-testid='stPlotlyChart']")


def full_screenshot(page, screenshot, name: str) -> None:  # type: ignore[no-untyped-def]
    """Streamlit scrolls inside its main block: make the window as tall as the screen's
    content so one screenshot holds all of it."""
    height = page.evaluate(
        "() => document.querySelector(\"[data-testid='stMainBlockContainer']\").scrollHeight"
    )
    page.set_viewport_size({"width": 1400, "height": int(height) + 200})
    page.wait_for_timeout(500)  # let Plotly redraw at the new size
    screenshot(page, name)


def test_a_shared_rewards_link_opens_that_run_and_view(demo_db, app_server, page, screenshot):
    page.goto(
        f"{app_server}/rewards?runs=demo-train&steps=2-11&split=train&band=25-75&ema=40&step=5"
    )

    # The chart of that run: its legend names the run, the band is the one in the link.
    curve = charts(page).first
    expect(curve.locator(".legend")).to_contain_text(
        "Demo RFT: bug-fix agent mean", timeout=120_000
    )
    expect(curve.locator(".legend")).to_contain_text("p25–p75")
    expect(page.get_by_text("Step 5: 32 rollouts, best reward first")).to_be_visible()
    # The rollout table links each rollout to Replay.
    expect(page.locator("[data-testid='stDataFrame']")).to_have_count(1)
    expect(charts(page)).to_have_count(4)
    full_screenshot(page, screenshot, "dashboards-rewards")

    assert "Traceback" not in main_text(page)
    # Every control of the view is in the address bar.
    assert page.url.endswith(
        "/rewards?runs=demo-train&steps=2-11&split=train&band=25-75&ema=40&step=5&grader=all"
    )


def test_the_copy_link_is_the_address_of_the_view(demo_db, app_server, page):
    page.goto(f"{app_server}/tools?runs=demo-baseline&split=eval&budget=12")
    expect(charts(page).first).to_be_visible(timeout=120_000)
    page.get_by_role("button", name="Link to this view").click()
    link = page.locator("[data-testid='stCode']").last.inner_text()
    assert link.startswith(f"{app_server}/tools?runs=demo-baseline&split=eval&budget=12"), link
    assert "steps=0-0" in link


def test_tools_and_latency_screens_draw_their_charts(demo_db, app_server, page, screenshot):
    page.goto(f"{app_server}/tools?runs=demo-train&runs=demo-baseline&split=all&budget=8")
    expect(charts(page)).to_have_count(9, timeout=120_000)
    expect(page.get_by_text("Rollouts over a budget of 8 calls")).to_be_visible()
    full_screenshot(page, screenshot, "dashboards-tools")
    assert "Traceback" not in main_text(page)

    page.goto(f"{app_server}/latency?runs=demo-train&early=1-3&late=10-12")
    expect(charts(page)).to_have_count(5, timeout=120_000)
    expect(page.locator("[data-testid='stPlotlyChart']").nth(1).locator(".legend")).to_contain_text(
        "steps 10-12"
    )
    slowest = page.locator("[data-testid='stDataFrame']")
    expect(slowest).to_have_count(1)
    full_screenshot(page, screenshot, "dashboards-latency")
    assert "Traceback" not in main_text(page)


def test_a_bad_link_warns_and_falls_back(demo_db, app_server, page):
    page.goto(f"{app_server}/latency?runs=ghost&steps=abc")
    warnings = page.locator("[data-testid='stAlertContentWarning']")
    expect(warnings).to_have_count(2, timeout=120_000)
    expect(warnings.first).to_contain_text("ghost")
    expect(charts(page).first).to_be_visible()
    assert "Traceback" not in main_text(page)


def test_clicking_a_point_of_the_reward_curve_opens_that_step(demo_db, app_server, page):
    page.goto(f"{app_server}/rewards?runs=demo-train&steps=1-12&split=train")
    curve = charts(page).first
    points = curve.locator(".scatterlayer .trace").nth(2).locator(".points path")
    expect(points).to_have_count(12, timeout=120_000)
    points.nth(6).click(force=True)  # step 7

    expect(page.get_by_text("Step 7: 32 rollouts, best reward first")).to_be_visible()
    page.wait_for_url("**step=7**")
    expect(page.locator("[data-testid='stDataFrame']")).to_have_count(1)

    page.get_by_role("button", name="Clear", exact=True).click()
    expect(page.get_by_text("Click a point of a mean-reward line")).to_be_visible()
    assert "step=" not in page.url
