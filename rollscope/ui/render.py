"""The one place that renders errors and untrusted text.

Trace content (prompts, model output, tool output, file names, run names) is untrusted:
it is shown as plain text (``st.text``/``st.code``/``st.dataframe``) or, where a Streamlit
API interprets Markdown (alerts, captions, widget labels), escaped with `escape_markdown`
first. Nothing here passes ``unsafe_allow_html``.
"""

from __future__ import annotations

import logging
import re

import streamlit as st

from trace_store.errors import TraceStoreError

log = logging.getLogger(__name__)

# Every ASCII punctuation character may be backslash-escaped in CommonMark, which makes
# it literal. Escaping all of them is simpler to get right than a list of the special ones.
_MD_SPECIAL = re.compile(r"([!-/:-@\[-`{-~])")


# GFM turns bare URLs and e-mail addresses in rendered text into links (after parsing, so
# backslash escapes do not stop it): an invisible word joiner inside them breaks the match.
_AUTOLINK = re.compile(r"(?i)(?<=http)(?=s?://)|(?<=\bwww)(?=\.)|(?<=@)(?=[-\w]+\.)")
_WORD_JOINER = "\u2060"


def escape_markdown(text: str) -> str:
    """`text` as Markdown source that renders as the same literal characters (no links)."""
    text = _AUTOLINK.sub(_WORD_JOINER, text)
    escaped = _MD_SPECIAL.sub(r"\\\1", text)
    # Newlines would start paragraphs, lists or headings; keep one logical line.
    return " ".join(escaped.splitlines())


def error_title_and_message(exc: BaseException) -> tuple[str, str]:
    """A short title and a one-paragraph message for `exc`, without a traceback."""
    if isinstance(exc, TraceStoreError):
        return exc.title, str(exc) or exc.title
    name = type(exc).__name__
    return "Unexpected error", f"Something went wrong ({name}). Details are below."


def show_error(exc: BaseException, *, context: str | None = None) -> None:
    """Render `exc` as an error box: the typed error's title and message, never a traceback.

    Errors the store raises on purpose (`TraceStoreError`) carry a message a user can act on.
    Anything else is unexpected: a short message, the exception text in an expander as plain
    text, and the full traceback in the server log for whoever runs the app.
    """
    title, message = error_title_and_message(exc)
    prefix = f"{escape_markdown(context)}: " if context else ""
    st.error(
        f"{prefix}**{escape_markdown(title)}**: {escape_markdown(message)}", icon=":material/error:"
    )
    if not isinstance(exc, TraceStoreError):
        log.error("Unexpected error in the app", exc_info=exc)
        with st.expander("Details"):
            st.text(f"{type(exc).__name__}: {exc}")


def show_text(text: str | None, *, empty: str = "(empty)") -> None:
    """Untrusted prose (a message, reasoning, an answer) as plain wrapped text."""
    st.text(text if text else empty)


def show_code(text: str | None, *, language: str | None = None) -> None:
    """Untrusted structured text (tool arguments, output, JSON) in a code block."""
    st.code(text if text is not None else "", language=language, wrap_lines=True)
