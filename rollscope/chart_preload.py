"""Start loading the browser's chart library while the server is still running the page.

Streamlit's frontend loads Plotly (its ``PlotlyChart`` chunk: 4.7 MB, about a second of
script evaluation on one slow core) only when the first chart arrives, that is after the
page's queries ran. Its evaluation and the page's queries then happen one after the other.
An ASGI middleware adds a small script to the HTML page that imports the chunk as soon as the
page's first element is drawn, so both happen at once: the first render of a dashboard from
a shared link fell from about 2.9 s to 1.5 s (bench/dashboards.py).

It depends on two Streamlit internals, the chunk's file name and the main block's test id.
If either changes, the script finds nothing to do and the page works as before, only slower.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any

import streamlit

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

STREAMLIT_JS = Path(streamlit.__file__).parent / "static" / "static" / "js"
# The screens that draw charts at once (their url_path in app.py's PAGES).
CHART_PAGES = frozenset({"rewards", "tools", "latency", "replay", "compare", "audit"})
# Requests for these are never the HTML page (Streamlit's own prefixes).
NOT_PAGES = ("/static/", "/_stcore/", "/media/", "/component/", "/app/static/", "/favicon")


def plotly_chunk(js_dir: Path = STREAMLIT_JS) -> str | None:
    """File name of the installed Streamlit's Plotly chunk, or None if it has none we know."""
    found = sorted(p.name for p in js_dir.glob("PlotlyChart.*.js"))
    return found[0] if len(found) == 1 else None


def preload_script(chunk: str, chart_page: bool) -> bytes:
    """The ``<script>`` added to the page's head. It waits for the main block's first element:
    by then the app has connected and the server is running the page, so the evaluation does
    not delay the connection. On a screen with charts it imports at once, to overlap the
    page's queries; on any other screen only once that screen is drawn (no "running" status
    for half a second), so it readies the next screen without slowing this one (by 0.9 s on
    the Runs screen). A failed import only loses the head start."""
    src = json.dumps(f"./static/js/{chunk}")
    return (
        '<script type="module">'
        f"const loadCharts = () => import({src}).catch(() => {{}});"
        "const running = () => document.querySelector(\"[data-testid='stStatusWidget']\");"
        "const whenIdle = (quiet = 0) => running() ? setTimeout(whenIdle, 250, 0)"
        " : quiet >= 2 ? loadCharts() : setTimeout(whenIdle, 250, quiet + 1);"
        "const firstElement = new MutationObserver(() => {"
        " if (document.querySelector(\"[data-testid='stMain'] [data-testid='stElementContainer']\"))"
        f" {{ firstElement.disconnect(); {'setTimeout(loadCharts, 0)' if chart_page else 'whenIdle()'}; }}"
        "});"
        "firstElement.observe(document.documentElement, {childList: true, subtree: true});"
        "</script>"
    ).encode()


class ChartPreloadMiddleware:
    """Adds :func:`preload_script` to every HTML page the app serves; passes the rest through.

    Page requests are sent on without ``Accept-Encoding``, so the HTML arrives uncompressed
    (it is a few kilobytes) and can be edited here; its ``Content-Length`` is corrected.
    """

    def __init__(self, app: ASGIApp, js_dir: Path = STREAMLIT_JS) -> None:
        self.app = app
        self.chunk = plotly_chunk(js_dir)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if (
            self.chunk is None
            or scope["type"] != "http"
            or scope.get("method") != "GET"
            or any(part in path for part in NOT_PAGES)
        ):
            await self.app(scope, receive, send)
            return
        scope = dict(scope)
        scope["headers"] = [(k, v) for k, v in scope["headers"] if k.lower() != b"accept-encoding"]
        # The last path segment: a base URL path may come before the screen's url_path.
        chart_page = path.rstrip("/").rsplit("/", 1)[-1] in CHART_PAGES
        script = preload_script(self.chunk, chart_page)
        await self.app(scope, receive, _HeadEditor(send, script).send)


class _HeadEditor:
    """Holds back an HTML response until its body is complete, then adds ``script`` to its
    ``<head>``. Any other response streams through untouched."""

    def __init__(self, send: Send, script: bytes) -> None:
        self._send = send
        self._script = script
        self._start: Message | None = None
        self._passthrough = False
        self._body: list[bytes] = []

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = dict(message.get("headers", []))
            is_html = headers.get(b"content-type", b"").startswith(b"text/html")
            if not is_html or b"content-encoding" in headers:
                self._passthrough = True
                await self._send(message)
            else:
                self._start = message
            return
        if self._passthrough or message["type"] != "http.response.body" or self._start is None:
            await self._send(message)
            return
        self._body.append(message.get("body", b""))
        if message.get("more_body", False):
            return
        html = b"".join(self._body).replace(b"<head>", b"<head>" + self._script, 1)
        headers = [(k, v) for k, v in self._start.get("headers", []) if k != b"content-length"]
        headers.append((b"content-length", str(len(html)).encode()))
        await self._send({**self._start, "headers": headers})
        await self._send({"type": "http.response.body", "body": html, "more_body": False})
