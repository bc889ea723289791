"""The chart preload middleware: it edits HTML pages only, and leaves every other response
(and every non-page request) byte for byte as the app sent it."""

from __future__ import annotations

import asyncio
import gzip
from pathlib import Path
from typing import Any

import pytest

from rollscope.chart_preload import ChartPreloadMiddleware, plotly_chunk, preload_script

PAGE = b"<!DOCTYPE html><html><head><title>t</title></head><body></body></html>"
CHUNK = "PlotlyChart.abc123.js"


@pytest.fixture
def js_dir(tmp_path: Path) -> Path:
    """A Streamlit asset folder with one Plotly chunk in it."""
    (tmp_path / CHUNK).write_text("export {}")
    (tmp_path / "index.xyz.js").write_text("export {}")
    return tmp_path


def respond(content_type: bytes, body: bytes, parts: int = 1, encoding: bytes | None = None):  # type: ignore[no-untyped-def]
    """An ASGI app that sends ``body`` in ``parts`` pieces and records what it was asked."""
    seen: dict[str, Any] = {}

    async def app(scope, receive, send):  # type: ignore[no-untyped-def]
        seen["type"] = scope["type"]
        seen["headers"] = dict(scope.get("headers", []))
        if scope["type"] != "http":
            return
        headers = [(b"content-type", content_type), (b"content-length", b"%d" % len(body))]
        if encoding:
            headers.append((b"content-encoding", encoding))
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        size = -(-len(body) // parts)
        pieces = [body[i : i + size] for i in range(0, len(body), size)]
        for i, piece in enumerate(pieces):
            await send({"type": "http.response.body", "body": piece, "more_body": i < parts - 1})

    return app, seen


def call(app, js_dir: Path, path: str, method: str = "GET", kind: str = "http"):  # type: ignore[no-untyped-def]
    """Send one request through the middleware; return the response's headers and body."""
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b""}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": kind,
        "method": method,
        "path": path,
        "headers": [(b"accept-encoding", b"gzip")],
    }
    asyncio.run(ChartPreloadMiddleware(app, js_dir)(scope, receive, send))
    starts = [m for m in sent if m["type"] == "http.response.start"]
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return (dict(starts[0]["headers"]) if starts else {}), body


@pytest.mark.parametrize("parts", [1, 3])
def test_a_page_gets_the_script_in_its_head_with_a_correct_length(js_dir: Path, parts: int) -> None:
    app, seen = respond(b"text/html; charset=utf-8", PAGE, parts)
    headers, body = call(app, js_dir, "/rewards")
    assert body.startswith(
        b"<!DOCTYPE html><html><head>" + preload_script(CHUNK, True) + b"<title>"
    )
    assert body.endswith(b"</head><body></body></html>")
    assert int(headers[b"content-length"]) == len(body)
    # Asked for uncompressed, so that it can be edited.
    assert b"accept-encoding" not in seen["headers"]


def test_the_script_imports_the_chunk_beside_the_page() -> None:
    for chart_page in (True, False):
        script = preload_script(CHUNK, chart_page).decode()
        assert script.startswith('<script type="module">') and script.endswith("</script>")
        assert 'import("./static/js/PlotlyChart.abc123.js")' in script


@pytest.mark.parametrize(
    ("path", "chart_page"),
    [
        ("/rewards", True),
        ("/base/latency/", True),
        ("/", False),
        ("/runs-like", False),
        ("/sql", False),
    ],
)
def test_chart_screens_load_at_once_and_others_when_drawn(
    js_dir: Path, path: str, chart_page: bool
) -> None:
    app, _ = respond(b"text/html", PAGE)
    _, body = call(app, js_dir, path)
    assert preload_script(CHUNK, chart_page) in body
    assert preload_script(CHUNK, not chart_page) not in body


@pytest.mark.parametrize(
    ("content_type", "path", "method"),
    [
        (b"application/javascript", "/static/js/index.js", "GET"),  # an asset
        (b"text/html", "/static/odd.html", "GET"),  # HTML, but under an asset prefix
        (b"application/json", "/_stcore/host-config", "GET"),
        (b"text/html", "/rewards", "HEAD"),
    ],
)
def test_anything_else_passes_through_untouched(
    js_dir: Path, content_type: bytes, path: str, method: str
) -> None:
    body = b"<head>" + b"x" * 5000
    app, _ = respond(content_type, body, 2)
    headers, sent = call(app, js_dir, path, method)
    assert sent == body
    assert headers[b"content-length"] == b"%d" % len(body)


def test_assets_are_still_asked_for_compressed(js_dir: Path) -> None:
    app, seen = respond(b"application/javascript", b"export {}")
    call(app, js_dir, "/static/js/index.js")
    assert seen["headers"][b"accept-encoding"] == b"gzip"


@pytest.mark.parametrize(
    "encoded",
    [gzip.compress(PAGE, mtime=0), b"<head> as bytes of another coding"],
    ids=["gzip", "other"],
)
def test_an_encoded_page_is_not_edited(js_dir: Path, encoded: bytes) -> None:
    app, _ = respond(b"text/html", encoded, encoding=b"gzip")
    _, body = call(app, js_dir, "/")
    assert body == encoded


def test_websockets_pass_through(js_dir: Path) -> None:
    app, seen = respond(b"", b"")
    call(app, js_dir, "/_stcore/stream", kind="websocket")
    assert seen["type"] == "websocket"


def test_without_a_known_chunk_pages_are_left_alone(tmp_path: Path) -> None:
    # A Streamlit that renamed (or split) its Plotly chunk: no script rather than a broken one.
    (tmp_path / "PlotlyChart.a.js").write_text("")
    (tmp_path / "PlotlyChart.b.js").write_text("")
    for folder in (tmp_path / "empty", tmp_path):
        folder.mkdir(exist_ok=True)
        assert plotly_chunk(folder) is None
        app, _ = respond(b"text/html", PAGE)
        assert call(app, folder, "/")[1] == PAGE


def test_the_installed_streamlit_has_the_chunk_the_preload_needs() -> None:
    # If a Streamlit upgrade renames it, the preload stops silently: this test says so.
    chunk = plotly_chunk()
    assert chunk is not None and chunk.startswith("PlotlyChart.")
