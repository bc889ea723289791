"""The upload size limit (Streamlit's server.maxUploadSize) refuses a big file with a clear
message, and nothing is imported."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.browser


@pytest.fixture
def small_limit_server(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("STREAMLIT_SERVER_MAX_UPLOAD_SIZE", "1")  # MB, as in .streamlit/config.toml
    url: str = request.getfixturevalue("app_server")
    return url


def test_a_file_over_the_upload_limit_is_refused(
    small_limit_server: str, page, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    big = tmp_path / "big.jsonl"
    line = {"run_id": "big", "rollout_id": "a", "step": 0, "final_answer": "x" * (3 << 20)}
    big.write_text(json.dumps(line) + "\n")
    page.goto(small_limit_server)
    page.get_by_role("button", name="Load the demo run").wait_for()
    page.locator("[data-testid='stFileUploader'] input[type='file']").first.set_input_files(big)
    expect(page.get_by_text("File must be 1.0MB or smaller.")).to_be_visible()
    assert page.get_by_role("button", name="Import 1 file").count() == 0
