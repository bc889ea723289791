"""The app's screens: which exist, at which URL, and how to link a run to them.

``app.py`` holds the table of screens (`PageSpec` rows) and calls `navigation`; a screen is
registered only if its script exists, so a later screen is added by writing its script and
one table row. URL paths are stable: shared links depend on them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import streamlit as st
from streamlit.navigation.page import StreamlitPage

_CURRENT = "nav.current_url_path"  # session key: the url_path of the screen being run


@dataclass(frozen=True)
class PageSpec:
    """One screen. `script` is relative to app.py's folder."""

    url_path: str
    title: str
    script: str
    icon: str | None = None
    #: query parameter this screen reads runs from: ``runs`` (several, repeated:
    #: ``/rewards?runs=A&runs=B``) or ``run`` (exactly one: ``/rollouts?run=A``); None if the
    #: Runs screen should not offer to open runs here.
    run_param: str | None = None
    default: bool = False


_registered: tuple[PageSpec, ...] = ()


def available(specs: Sequence[PageSpec], app_dir: Path) -> list[PageSpec]:
    """The screens whose script exists."""
    return [s for s in specs if (app_dir / s.script).is_file()]


def navigation(specs: Sequence[PageSpec], app_dir: Path) -> StreamlitPage:
    """Register the screens that exist with ``st.navigation`` and return the one to run."""
    global _registered
    present = available(specs, app_dir)
    _registered = tuple(present)
    pages = [
        st.Page(
            s.script,
            title=s.title,
            icon=s.icon,
            url_path=s.url_path or None,
            default=s.default,
        )
        for s in present
    ]
    current = st.navigation(pages, position="sidebar")
    st.session_state[_CURRENT] = current.url_path
    return current


def registered() -> tuple[PageSpec, ...]:
    """The screens registered by the latest `navigation` call."""
    return _registered


def current_url_path() -> str:
    """The url_path of the screen being run ("" for the default screen)."""
    value = st.session_state.get(_CURRENT, "")
    return value if isinstance(value, str) else ""
