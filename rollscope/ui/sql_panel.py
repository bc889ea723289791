"""The SQL screen: read-only queries over a sandboxed snapshot of the store (trace_store.sql_console).

The query text lives in the URL (``/sql?q=...``), so a link opens the same query and runs it.
Limits come from the environment: ``ROLLSCOPE_SQL_MAX_ROWS`` (default 10,000 rows shown) and
``ROLLSCOPE_SQL_TIMEOUT_S`` (default 30 s, after which the query is cancelled).
"""

from __future__ import annotations

import os

import streamlit as st

from rollscope.ui import render, store_access, view_state
from trace_store.sql_console import (
    DEFAULT_MAX_ROWS,
    DEFAULT_TIMEOUT_S,
    QueryError,
    QueryResult,
    SqlConsole,
)

PARAM = "q"
EXAMPLES = {
    "Runs": "SELECT run_id, name, kind, model FROM runs ORDER BY run_id",
    "Mean reward by step": (
        "SELECT run_id, step, count(*) AS rollouts, avg(reward) AS mean_reward\n"
        "FROM rollouts GROUP BY ALL ORDER BY run_id, step"
    ),
    "Slowest tools": (
        "SELECT tool_name, count(*) AS calls, quantile_cont(duration_ms, 0.95) AS p95_ms\n"
        "FROM events WHERE kind = 'tool_call' GROUP BY ALL ORDER BY p95_ms DESC LIMIT 20"
    ),
    "Tables": "SHOW TABLES",
}


def _env_number(name: str, default: float) -> float:
    try:
        value = float(os.environ.get(name, "") or default)
    except ValueError:
        return default
    return value if value > 0 else default


def limits() -> tuple[int, float]:
    """(row cap, time limit in seconds)."""
    rows = int(_env_number("ROLLSCOPE_SQL_MAX_ROWS", DEFAULT_MAX_ROWS))
    return rows, _env_number("ROLLSCOPE_SQL_TIMEOUT_S", DEFAULT_TIMEOUT_S)


@st.cache_resource(show_spinner=False)
def _console(store_path: str) -> SqlConsole:
    return SqlConsole(store_access.get_store())


def console() -> SqlConsole:
    store = store_access.get_store()
    return _console(str(store.path))


def _query_from_url() -> str:
    values = view_state.raw_values(PARAM)
    return values[0] if values else ""


def show_result(result: QueryResult, max_rows: int) -> None:
    rows = len(result.frame)
    if result.truncated:
        st.warning(
            f"The query returned more than {max_rows:,} rows: the first {max_rows:,} are shown. "
            "Add a LIMIT or an aggregate to see the rest.",
            icon=":material/warning:",
        )
    st.caption(
        f"{rows:,} row{'s' if rows != 1 else ''} in {result.seconds:.2f} s, on a snapshot of the "
        f"store taken {result.snapshot_age_s:,.0f} s ago"
    )
    st.dataframe(result.frame, hide_index=True, width="stretch")


def show_query_error(exc: QueryError) -> None:
    """DuckDB's message as it wrote it, in a code block (its caret lines up; nothing renders)."""
    st.error(f"**{render.escape_markdown(exc.title)}**", icon=":material/error:")
    st.code(str(exc), language=None, wrap_lines=True)


def render_page() -> None:
    st.title("SQL")
    max_rows, timeout_s = limits()
    st.caption(
        "Read-only SQL (DuckDB dialect) over a snapshot of the store: no writes, no files, no "
        f"extensions. At most {max_rows:,} rows are shown; a query is cancelled after "
        f"{timeout_s:g} s. Tables: runs, rollouts, events, grades, imports, flags."
    )
    with st.expander("Examples"):
        for title, sql in EXAMPLES.items():
            st.caption(title)
            st.code(sql, language="sql")

    current = _query_from_url()
    with st.form("sql.form", border=False):
        text = st.text_area("Query", value=current, height=160, placeholder="SELECT * FROM runs")
        submitted = st.form_submit_button("Run", type="primary", icon=":material/play_arrow:")
    if submitted and text != current:
        view_state.write_param(PARAM, text.strip() or None)
        current = text.strip()
    if not current.strip():
        return
    try:
        with st.spinner("Running the query…"):
            result = console().run(current, max_rows=max_rows, timeout_s=timeout_s)
    except QueryError as exc:
        show_query_error(exc)
    except Exception as exc:  # never a traceback in the page
        render.show_error(exc, context="Running the query")
    else:
        show_result(result, max_rows)
    view_state.copy_link()
