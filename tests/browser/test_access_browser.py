"""Sign-in on a real server: a fresh server's first request, a deep link, a link with a token.

Streamlit runs a ``pages/`` script directly (past app.py's gate) until some script run calls
st.navigation; these tests start a fresh server each, so the very first request is a deep link.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.browser

TOKEN = "s3cret-for-tests"


@pytest.fixture
def gated_server(
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    db_path: Path,
    demo_store_path: Path,
) -> str:
    shutil.copyfile(demo_store_path, db_path)
    monkeypatch.setenv("ROLLSCOPE_TOKEN", TOKEN)
    url: str = request.getfixturevalue("app_server")
    return url


def main_text(page) -> str:  # type: ignore[no-untyped-def]
    return str(page.locator("[data-testid='stApp']").inner_text())


def test_a_deep_link_asks_for_the_token_then_opens_the_linked_view(
    gated_server: str, page, screenshot
) -> None:  # type: ignore[no-untyped-def]
    page.goto(f"{gated_server}/rewards?runs=demo-train")
    page.get_by_label("Access token").wait_for()
    screenshot(page, "access-prompt")
    text = main_text(page)
    assert "sign in to see it" in text
    for leaked in ("Rewards", "Store:", "demo-train", "Runs"):
        assert leaked not in text, (leaked, text)

    page.get_by_label("Access token").fill("wrong")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_text("That token is not right.")).to_be_visible()
    assert "Store:" not in main_text(page)

    page.get_by_label("Access token").fill(TOKEN)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Rewards")).to_be_visible()
    assert "/rewards" in page.url and "runs=demo-train" in page.url
    expect(page.get_by_text("Signed in as token user")).to_be_visible()


def test_a_link_with_the_token_opens_directly_and_forgets_the_token(
    gated_server: str, page
) -> None:  # type: ignore[no-untyped-def]
    page.goto(f"{gated_server}/sql?q=SELECT%2042%20AS%20answer&token={TOKEN}")
    expect(page.get_by_role("heading", name="SQL")).to_be_visible()
    expect(page.locator("[data-testid='stDataFrame']")).to_be_visible()
    assert "token=" not in page.url
    assert "q=SELECT" in page.url
    assert TOKEN not in main_text(page)
