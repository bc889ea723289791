"""Hostile URL parameter values on every screen: never a crash, never SQL text.

Each screen of app.py is opened (through app.py, as a link would) with every known parameter set
to one hostile value at a time: SQL fragments, NaN, huge numbers, control and RTL characters, a
very long value. The page must render without an exception, and the store must be unchanged.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from streamlit.runtime.pages_manager import PagesManager
from streamlit.testing.v1 import AppTest

from rollscope.ui import access

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT = 600  # AppTest needs a bound; not a timing test

PARAMS = [
    "run", "runs", "rollout", "step", "steps", "split", "status", "prompt", "baseline",
    "detector", "verdicts_of", "calls", "desc", "disagree", "band", "ema", "grader", "sort",
    "q", "preset", "sample", "page", "tool", "search", "turn", "bins", "metric", "view",
]  # fmt: skip
VALUES = [
    "'; DROP TABLE runs; --",
    "demo-train' OR '1'='1",
    "-1",
    "1e309",
    "NaN",
    "99999999999999999999999",
    "3-1",
    "\u202e<script>alert(1)</script>",
    "a\x00b",
    "x" * 5000,
]


def screens() -> list[str]:
    tree = ast.parse((ROOT / "app.py").read_text())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "PageSpec":
            script = node.args[2]
            if isinstance(script, ast.Constant) and (ROOT / str(script.value)).is_file():
                found.append(str(script.value))
    return found


@pytest.fixture(autouse=True)
def _through_app_py(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (access.TOKEN_ENV, access.USER_TOKENS_ENV, access.UPLOADERS_ENV):
        monkeypatch.delenv(name, raising=False)
    original = PagesManager.__init__

    def init(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        original(self, *args, **kwargs)
        PagesManager.uses_pages_directory = False  # as on a served app (see test_access.py)

    monkeypatch.setattr(PagesManager, "__init__", init)


def counts(at: AppTest) -> str:
    return " ".join(c.value for c in at.sidebar.caption)


@pytest.mark.parametrize("script", screens())
def test_hostile_url_values_never_crash_a_screen(
    script: str, demo_store_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ROLLSCOPE_DB", str(demo_store_path))
    baseline = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT).run()
    runs_caption = counts(baseline)
    for value in VALUES:
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
        for key in PARAMS:
            at.query_params[key] = value
        at.switch_page(script).run()
        assert not at.exception, (script, value[:40], [e.value for e in at.exception])
        assert counts(at) == runs_caption, (script, value[:40])  # nothing dropped or added
