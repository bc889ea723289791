"""Whether the dashboards' summary tables (see `dashboards`) match the store.

They are current when `dash_meta` holds the key of the store as it is now and no (run, step) is
marked in `summary_dirty`. Writers mark what they change in the same transaction; the key (row
counts of what the summaries read) catches a change that no writer marked.
"""

from __future__ import annotations

from typing import Any

import duckdb

#: Bump when a summary's SQL changes, so stores built by older code are rebuilt.
SUMMARY_VERSION = 5

KEY_SQL = f"""
    SELECT 'v' || {SUMMARY_VERSION} || ':' || (SELECT count(*) FROM rollouts)
           || '/' || (SELECT count(*) FROM events) || '/' || (SELECT count(*) FROM grades)
"""


def is_current(cur: Any) -> bool:
    """Whether the summary tables were built from the store as it is now (one cheap query)."""
    try:
        row = cur.execute(
            f"SELECT ({KEY_SQL}) = (SELECT max(key) FROM dash_meta)"
            " AND NOT EXISTS (SELECT 1 FROM summary_dirty)"
        ).fetchone()
    except duckdb.CatalogException:
        return False
    return bool(row and row[0])


def built_by_this_version(cur: Any) -> bool:
    try:
        row = cur.execute("SELECT max(key) FROM dash_meta").fetchone()
    except duckdb.CatalogException:
        return False
    return bool(row and row[0] and str(row[0]).startswith(f"v{SUMMARY_VERSION}:"))


def mark_current(cur: Any) -> None:
    """Record that the summaries match the store now (inside the writer's transaction)."""
    cur.execute("DELETE FROM summary_dirty")
    cur.execute(f"CREATE OR REPLACE TABLE dash_meta AS SELECT ({KEY_SQL}) AS key")
