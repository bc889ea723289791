"""Streamlit glue for the app's pages: cached store access, URL view state, safe rendering.

Everything Streamlit-aware that more than one page needs lives here, so that page scripts
stay thin. ``trace_store`` knows nothing of this package.
"""


def _leave_pages_directory_mode() -> None:
    """Make Streamlit route every request through app.py (and its sign-in gate).

    With a ``pages/`` folder beside app.py, a fresh server runs a requested ``/<page>`` script
    directly (Streamlit's first multipage mode), skipping app.py, until some script run calls
    ``st.navigation``. Every page imports this package, so the first page run of the process
    switches that mode off and starts over through app.py.
    """
    from streamlit.runtime.pages_manager import PagesManager
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    if PagesManager.uses_pages_directory and get_script_run_ctx() is not None:
        PagesManager.uses_pages_directory = False
        import streamlit as st

        st.rerun()


_leave_pages_directory_mode()
