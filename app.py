"""Rollscope: the Streamlit entry point (``rollscope serve``, or ``streamlit run app.py`` without
the chart preload of rollscope/chart_preload.py).

Routes over the screens in pages/ with stable URL paths (shared links depend on them) and
draws the shared sidebar. A screen is registered only if its script exists: to add one,
write ``pages/<name>.py`` and add its row to PAGES.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from rollscope.ui import access, render, store_access
from rollscope.ui.navigation import PageSpec, navigation

PAGES = [
    # url_path, title, script, icon, query parameter a run's row links with
    PageSpec("", "Runs", "pages/runs.py", ":material/table_rows:", default=True),
    PageSpec("rewards", "Rewards", "pages/rewards.py", ":material/trending_up:", "runs"),
    PageSpec("tools", "Tool calls", "pages/tools.py", ":material/build:", "runs"),
    PageSpec("latency", "Latency", "pages/latency.py", ":material/timer:", "runs"),
    PageSpec("rollouts", "Rollouts", "pages/rollouts.py", ":material/list:", "run"),
    PageSpec("replay", "Replay", "pages/replay.py", ":material/play_circle:", "run"),
    PageSpec("compare", "Compare", "pages/compare.py", ":material/compare:", "runs"),
    PageSpec("audit", "Audit", "pages/audit.py", ":material/policy:", "run"),
    PageSpec("sql", "SQL", "pages/sql.py", ":material/terminal:"),
]

st.set_page_config(page_title="Rollscope", layout="wide")
# Optional sign-in (off unless configured): nothing below runs for a visitor who is not signed in.
identity = access.require(PAGES, Path(__file__).parent)
page = navigation(PAGES, Path(__file__).parent)

with st.sidebar:
    try:
        store = store_access.get_store()
        runs = store_access.list_runs()
    except Exception as exc:
        render.show_error(exc, context="Opening the store")
        st.stop()
    st.caption(f"Store: {render.escape_markdown(str(store.path))}")
    st.caption(f"{len(runs):,} run{'s' if len(runs) != 1 else ''}")
    access.sidebar(identity)

page.run()
