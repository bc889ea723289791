"""Rollscope: the command line and the Streamlit glue around the trace store."""

from __future__ import annotations

from pathlib import Path

__version__ = "0.1.0"


def app_script() -> Path:
    """The Streamlit entry point, beside this package both in the repo and when installed."""
    return Path(__file__).resolve().parent.parent / "app.py"


def server_script() -> Path:
    """What ``rollscope serve`` hands to ``streamlit run``: app.py behind the chart preload
    (rollscope/chart_preload.py), or app.py itself on a Streamlit without ``st.App``."""
    import streamlit

    if hasattr(streamlit, "App"):
        return Path(__file__).resolve().parent / "rollscope_asgi.py"
    return app_script()
