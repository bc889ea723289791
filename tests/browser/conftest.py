"""Browser-test harness: the real app in a subprocess, driven by Debian's Chromium.

``app_server`` starts the app as ``rollscope serve`` does on a free port against a tmp store and yields
its base URL; ``page`` is a fresh Playwright page in headless Chromium. Screenshots go to
test-artifacts/screenshots/ (git-ignored) for a reviewer to look at.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from rollscope import server_script

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
SCREENSHOTS = ROOT / "test-artifacts" / "screenshots"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# A guard against a server that never comes up (a hung test run), not a timing assertion.
STARTUP_GUARD_SECONDS = 120


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if Path(str(item.fspath)).is_relative_to(Path(__file__).parent):
            item.add_marker(pytest.mark.browser)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_until_up(url: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + STARTUP_GUARD_SECONDS
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the app exited with {proc.returncode}:\n{log.read_text()}")
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=5) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"the app did not answer on {url}:\n{log.read_text()}")


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    """The store the app under test serves (empty unless a test fills it first)."""
    return tmp_path / "browser.duckdb"


@pytest.fixture
def app_server(db_path: Path, tmp_path: Path) -> Iterator[str]:
    """Start the app on `db_path`; yield its base URL (``http://127.0.0.1:PORT``)."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    log = tmp_path / "streamlit.log"
    env = {**os.environ, "ROLLSCOPE_DB": str(db_path)}
    command = [
        sys.executable, "-m", "streamlit", "run", str(server_script()),  # as `rollscope serve`
        "--server.headless", "true",
        "--server.port", str(port),
        "--server.address", "127.0.0.1",
        "--server.fileWatcherType", "none",
        "--browser.gatherUsageStats", "false",
    ]  # fmt: skip
    with log.open("wb") as out:
        proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        _wait_until_up(url, proc, log)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="session")
def browser() -> Iterator[object]:
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: install Debian's chromium (apt-get install chromium)")
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=60_000)  # a slow CI machine, not a timing assertion

    with sync_playwright() as p:
        chromium = p.chromium.launch(
            executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True
        )
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser) -> Iterator[object]:  # type: ignore[no-untyped-def]
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(60_000)
    yield page
    context.close()


def _settled(page) -> None:  # type: ignore[no-untyped-def]
    """Wait until Streamlit has finished the script run (its "Running..." status is gone)."""
    page.wait_for_selector("[data-testid='stApp']")
    page.wait_for_function("() => !document.querySelector(\"[data-testid='stStatusWidget']\")")


@pytest.fixture
def screenshot() -> Callable[[object, str], Path]:
    """``screenshot(page, name)``: once the app is idle, save test-artifacts/screenshots/<name>.png."""

    def take(page, name: str) -> Path:  # type: ignore[no-untyped-def]
        _settled(page)
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        path = SCREENSHOTS / f"{re.sub(r'[^A-Za-z0-9_.-]+', '_', name)}.png"
        page.screenshot(path=str(path), full_page=True)
        return path

    return take
