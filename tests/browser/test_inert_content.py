"""Trace content renders inert on every screen: a hostile run opened everywhere in Chromium.

The run's names, prompts, model output, tool calls, grades and metadata carry script tags, an
img onerror, Markdown and HTML links, LaTeX, RTL overrides, a base64 blob and very long lines.
On each screen that exists (the rows of app.py's PAGES whose script is present) no dialog
opens, no element or script of the payload appears in the DOM, and the characters show as text.
"""

from __future__ import annotations

import ast
import json
import shutil
from pathlib import Path
from urllib.parse import urlencode

import pytest

from trace_store import open_store

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
RUN = "hostile-run"
ROLLOUT = "r-<b id=pwned-rollout>0</b>"

SCRIPT = "<script>window.__pwned = 'script'</script>"
IMG = "<img src=x id=pwned-img onerror=\"window.__pwned = 'img'\">"
HTML_LINK = '<a id=pwned-a href="https://example.com/pwned">pwned-html-link</a>'
MD_LINK = (
    "[pwned-md-link](javascript:window.__pwned='md') ![pwned-md-img](https://example.com/p.png)"
)
LATEX = "$$\\text{pwned-latex}\\frac{1}{2}$$ and $x^2$"
RTL = "safe\u202eexe.txt\u202c"
BLOB = "data:text/html;base64," + "PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==" * 40
LONG = "x" * 20_000
PAYLOAD = f"{SCRIPT} {IMG} {HTML_LINK} {MD_LINK} {LATEX} {RTL} **bold** <b id=pwned-b>b</b>"


def hostile_records() -> list[dict[str, object]]:
    records: list[dict[str, object]] = []
    for step in range(3):
        for sample in range(2):
            items = [
                {"type": "message", "role": "system", "content": PAYLOAD},
                {"type": "message", "role": "user", "content": f"{PAYLOAD}\n{BLOB}"},
                {"type": "reasoning", "text": f"{PAYLOAD} {LONG}"},
                {
                    "type": "function_call",
                    "call_id": "c1",
                    "name": "<img src=x id=pwned-tool onerror=alert(1)>",
                    "arguments": json.dumps({"cmd": PAYLOAD, "blob": BLOB}),
                },
                {
                    "type": "function_call_output",
                    "call_id": "c1",
                    "output": f"{PAYLOAD}\n{LONG}",
                    "error": SCRIPT if sample else None,
                },
                {"type": "message", "role": "assistant", "content": PAYLOAD},
            ]
            records.append(
                {
                    "run_id": RUN,
                    "rollout_id": f"{ROLLOUT}-{step}-{sample}",
                    "step": step,
                    "prompt_id": f"<i id=pwned-prompt>{PAYLOAD}</i>",
                    "sample_index": sample,
                    "items": items,
                    "reward": 0.5 * sample,
                    "grades": [
                        {
                            "name": f"<u id=pwned-grader>{RTL}</u>",
                            "score": 1.0,
                            "explanation": PAYLOAD,
                        }
                    ],
                    "final_answer": PAYLOAD,
                    "reference": MD_LINK,
                    "metadata": {"note": PAYLOAD, "planted_hack": SCRIPT},
                    "run_name": f"<b id=pwned-run>{PAYLOAD}</b>",
                    "model": IMG,
                }
            )
    return records


def screens() -> list[tuple[str, str | None]]:
    """(url_path, run query parameter) of every screen in app.py whose script exists."""
    tree = ast.parse((ROOT / "app.py").read_text())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "PageSpec":
            args = [a.value if isinstance(a, ast.Constant) else None for a in node.args]
            url_path, script = str(args[0]), str(args[2])
            param = args[4] if len(args) > 4 else None
            if (ROOT / script).is_file():
                found.append((url_path, param if isinstance(param, str) else None))
    return found


def url_for(base: str, url_path: str, param: str | None) -> str:
    params: list[tuple[str, str]] = []
    if param:
        params.append((param, RUN))
    if url_path in ("replay", "compare", "rollouts"):
        params += [("run", RUN), ("rollout", f"{ROLLOUT}-1-1")]
    if url_path == "sql":
        params.append(("q", "SELECT * FROM rollouts r JOIN runs USING (run_id) LIMIT 5"))
    query = f"?{urlencode(params)}" if params else ""
    return f"{base}/{url_path}{query}"


INJECTED = """() => {
  const hits = [];
  for (const el of document.querySelectorAll('[id^="pwned"]')) hits.push(el.outerHTML.slice(0, 80));
  for (const a of document.querySelectorAll('a'))
    if (a.href.startsWith('javascript:') || a.hostname === 'example.com'
        || /pwned-(md|html)-link/.test(a.textContent)) hits.push('link ' + a.outerHTML.slice(0, 80));
  for (const img of document.querySelectorAll('img[src="x"], img[src*="example.com"]'))
    hits.push('img ' + img.outerHTML.slice(0, 80));
  for (const k of document.querySelectorAll('.katex'))
    if (k.textContent.includes('pwned')) hits.push('latex ' + k.textContent.slice(0, 40));
  for (const a of document.querySelectorAll('svg a'))  // Plotly renders <a href> in chart text
    if ((a.getAttribute('href') || a.getAttribute('xlink:href') || '').includes('example.com'))
      hits.push('chart link ' + a.outerHTML.slice(0, 80));
  for (const t of document.querySelectorAll('svg tspan'))  // Plotly's <b>/<i> in a run name
    if (/pwned/.test(t.textContent) && !/&lt;|</.test(t.textContent)) hits.push('chart tag ' + t.textContent.slice(0, 40));
  if (window.__pwned) hits.push('script ran: ' + window.__pwned);
  return hits;
}"""


@pytest.fixture
def hostile_server(request: pytest.FixtureRequest, db_path: Path, demo_store_path: Path) -> str:
    shutil.copyfile(demo_store_path, db_path)
    with open_store(db_path) as store:
        store.ingest_records(hostile_records(), display_name="hostile.jsonl")
    url: str = request.getfixturevalue("app_server")
    return url


def test_every_screen_renders_the_hostile_run_inert(hostile_server: str, page, screenshot) -> None:  # type: ignore[no-untyped-def]
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    visited = []
    shown_as_text = []
    for url_path, param in screens():
        page.goto(url_for(hostile_server, url_path, param))
        page.wait_for_selector("[data-testid='stMain']")
        page.wait_for_function("() => !document.querySelector(\"[data-testid='stStatusWidget']\")")
        page.wait_for_timeout(1500)  # let charts and late elements draw
        screenshot(page, f"inert-{url_path or 'runs'}")
        hits = page.evaluate(INJECTED)
        assert hits == [], (url_path, hits)
        assert dialogs == [], (url_path, dialogs)
        text = page.locator("[data-testid='stApp']").inner_text()
        cells = " ".join(page.locator("[data-testid='stDataFrame'] td").all_text_contents())
        assert "Traceback" not in text, url_path
        if "<script>" in text + cells or "<b id=pwned" in text + cells:
            shown_as_text.append(url_path or "runs")
        visited.append(url_path or "runs")
    print(f"\nvisited: {visited}; payload shown as literal text on: {shown_as_text}")
    assert len(visited) >= 2
    # The payload is shown as characters (tables draw on a canvas, so count the text screens).
    assert len(shown_as_text) >= len(visited) // 2, shown_as_text
    if "replay" in visited:
        assert "replay" in shown_as_text
