"""Escaped trace text must not become a link: GFM autolinks bare URLs even when escaped."""

from __future__ import annotations

from rollscope.ui.render import escape_markdown

WJ = "\u2060"


def test_bare_urls_and_addresses_are_broken_invisibly() -> None:
    text = "see https://evil.example/x, HTTP://a.b, www.evil.example and bob@evil.example"
    escaped = escape_markdown(text)
    assert "https://" not in escaped.replace("\\", "")
    assert f"http{WJ}s" in escaped and f"HTTP{WJ}" in escaped
    assert f"www{WJ}" in escaped and f"@{WJ}" in escaped
    # What a reader sees is the same characters, less the invisible joiners and escapes.
    assert escaped.replace(WJ, "").replace("\\", "") == text


def test_text_without_links_is_unchanged_but_for_escapes() -> None:
    assert escape_markdown("a_b (c)") == r"a\_b \(c\)"
