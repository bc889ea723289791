"""In Chromium, against the app as ``rollscope serve`` runs it: the chart library starts loading
while a screen is still being built, even on a screen without charts, and nothing breaks."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.browser

PLOTLY_FETCHED = (
    "() => performance.getEntriesByType('resource')"
    ".some(entry => /\\/static\\/js\\/PlotlyChart\\.[^/]+\\.js$/.test(entry.name))"
)


def test_a_screen_without_charts_loads_the_chart_library_for_the_next_one(app_server, page):
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(app_server)

    # The Runs screen on an empty store has no chart, so only the preload asks for Plotly.
    expect(page.get_by_role("heading", name="Runs")).to_be_visible()
    page.wait_for_function(PLOTLY_FETCHED)
    assert page.locator("[data-testid='stPlotlyChart']").count() == 0
    assert errors == []


def test_the_page_html_carries_the_preload_only_once(app_server, page):
    html = page.request.get(f"{app_server}/rewards").text()
    assert html.count("PlotlyChart.") == 1
    chunk = html.split("./static/js/", 1)[1].split('"', 1)[0]
    assert page.request.get(f"{app_server}/static/js/{chunk}").ok
