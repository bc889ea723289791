"""The SQL screen's sandbox: read-only, no files, no extensions, a row cap and a time limit."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from trace_store import open_store
from trace_store.sql_console import QueryError, QueryRefused, QueryTimeout, SqlConsole

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT = 600  # AppTest needs a bound; not a timing test


@pytest.fixture
def console(demo_store_copy: Path, tmp_path: Path) -> Iterator[SqlConsole]:
    store = open_store(demo_store_copy)
    sql = SqlConsole(store, snapshot_dir=tmp_path / "snapshots")
    yield sql
    sql.close()
    store.close()


def test_select_reads_the_store(console: SqlConsole) -> None:
    result = console.run("SELECT kind, count(*) AS n FROM runs GROUP BY kind ORDER BY kind")
    assert list(result.frame.columns) == ["kind", "n"]
    assert set(result.frame["kind"]) == {"baseline", "train"}
    assert not result.truncated


@pytest.mark.parametrize(
    "sql",
    [
        "INSERT INTO runs (run_id) VALUES ('x')",
        "UPDATE rollouts SET reward = 1",
        "DELETE FROM events",
        "DROP TABLE runs",
        "CREATE TABLE t AS SELECT 1",
        "CREATE TEMP TABLE t AS SELECT 1",
        "ATTACH '/tmp/other.duckdb' AS other",
        "INSTALL httpfs",
        "LOAD fts",
        "COPY runs TO '/tmp/runs.csv'",
        "EXPORT DATABASE '/tmp/export'",
        "SET enable_external_access = true",
        "RESET lock_configuration",
        "PRAGMA enable_profiling",
        "CHECKPOINT",
        "SELECT 1; DELETE FROM runs",
    ],
)
def test_statements_that_are_not_queries_are_refused(console: SqlConsole, sql: str) -> None:
    with pytest.raises(QueryRefused):
        console.run(sql)
    assert len(console.run("SELECT * FROM runs").frame) == 2


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM read_csv('/etc/passwd')",
        "SELECT * FROM read_text('/etc/passwd')",
        "SELECT * FROM read_blob('/etc/hostname')",
        "SELECT * FROM '/etc/passwd'",
        "SELECT * FROM glob('/etc/*')",
        "SELECT * FROM read_json('/etc/os-release')",
        "SELECT * FROM read_parquet('https://example.com/x.parquet')",
        "SELECT * FROM sniff_csv('/etc/passwd')",
        "SELECT nextval('import_ids')",
        "SELECT * FROM secret_frame",  # a Python object in scope: no replacement scans
    ],
)
def test_queries_cannot_read_files_or_write(console: SqlConsole, sql: str) -> None:
    secret_frame = pd.DataFrame({"password": ["hunter2"]})  # noqa: F841
    with pytest.raises(QueryError) as caught:
        console.run(sql)
    assert "hunter2" not in str(caught.value)
    assert "root:" not in str(caught.value)


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("INSERT INTO runs (run_id) VALUES ('x')", "read-only"),
        ("CREATE TABLE t AS SELECT 1", "read-only"),
        ("ATTACH '/tmp/other.duckdb' AS other", "disabled by configuration"),
        ("INSTALL httpfs", "disabled by configuration"),
        ("LOAD fts", "disabled through configuration"),
        ("COPY runs TO '/tmp/runs.csv'", "disabled by configuration"),
        ("SET enable_external_access = true", "configuration has been locked"),
        ("SET memory_limit = '100GB'", "configuration has been locked"),
        ("SET lock_configuration = false", "configuration has been locked"),
    ],
)
def test_the_sandbox_itself_refuses_what_the_statement_check_stops(
    console: SqlConsole, sql: str, expected: str
) -> None:
    """Defence in depth: the connection refuses these even if a statement got past the check."""
    cur = console._connection().cursor()
    try:
        with pytest.raises(duckdb.Error, match=expected):
            cur.execute(sql)
    finally:
        cur.close()


def test_the_app_connection_keeps_its_file_access(console: SqlConsole, tmp_path: Path) -> None:
    console.run("SELECT 1")
    line = {"run_id": "after", "rollout_id": "a", "step": 0, "reward": 1.0}
    path = tmp_path / "after.jsonl"
    path.write_text(json.dumps(line) + "\n")
    assert console.store.ingest_file(path).rollouts_added == 1
    # ...and the next query sees the import (a fresh snapshot).
    runs = console.run("SELECT run_id FROM runs ORDER BY run_id").frame["run_id"].tolist()
    assert "after" in runs
    console.store.delete_run("after")
    runs = console.run("SELECT run_id FROM runs ORDER BY run_id").frame["run_id"].tolist()
    assert "after" not in runs


def test_the_row_cap(console: SqlConsole) -> None:
    result = console.run("SELECT * FROM range(100000)", max_rows=1000)
    assert len(result.frame) == 1000
    assert result.truncated
    exact = console.run("SELECT * FROM range(1000)", max_rows=1000)
    assert len(exact.frame) == 1000 and not exact.truncated


def test_a_slow_query_is_cancelled_and_the_console_goes_on(console: SqlConsole) -> None:
    with pytest.raises(QueryTimeout, match="longer than the limit of 1 s and was cancelled"):
        console.run(
            "SELECT count(*) FROM range(1000000) a, range(1000000) b WHERE a.range + b.range = -1",
            timeout_s=1,
        )
    assert console.run("SELECT 42 AS answer").frame["answer"].tolist() == [42]


def test_duckdb_errors_are_shown_as_duckdb_wrote_them(console: SqlConsole) -> None:
    with pytest.raises(QueryError) as caught:
        console.run("SELEC run_id FROM runs")
    message = str(caught.value)
    assert message.startswith("Parser Error: syntax error at or near")
    assert "LINE 1: SELEC run_id FROM runs" in message
    with pytest.raises(QueryError, match="Table with name nope does not exist"):
        console.run("SELECT * FROM nope")
    with pytest.raises(QueryRefused, match="empty"):
        console.run("   ")


# ---- the page ----------------------------------------------------------------------------------
def open_sql_page(db: Path, monkeypatch: pytest.MonkeyPatch, query: str | None) -> AppTest:
    monkeypatch.setenv("ROLLSCOPE_DB", str(db))
    at = AppTest.from_file(str(ROOT / "pages" / "sql.py"), default_timeout=TIMEOUT)
    if query is not None:
        at.query_params["q"] = query
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_page_runs_the_query_from_the_url(demo_store_path: Path, monkeypatch) -> None:
    at = open_sql_page(demo_store_path, monkeypatch, "SELECT run_id FROM runs ORDER BY run_id")
    assert at.text_area[0].value == "SELECT run_id FROM runs ORDER BY run_id"
    frame = at.dataframe[0].value
    assert sorted(frame["run_id"]) == ["demo-baseline", "demo-train"]
    assert "2 rows" in at.caption[-2].value or any("2 rows" in c.value for c in at.caption)


def test_page_shows_errors_plainly_and_the_cap(
    demo_store_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = open_sql_page(demo_store_path, monkeypatch, "SELEC 1")
    assert at.error and "Query failed" in at.error[0].value
    assert any("syntax error" in c.value for c in at.code)
    assert not at.dataframe

    monkeypatch.setenv("ROLLSCOPE_SQL_MAX_ROWS", "50")
    at = open_sql_page(demo_store_path, monkeypatch, "SELECT * FROM range(500)")
    assert len(at.dataframe[0].value) == 50
    assert "more than 50 rows" in at.warning[0].value

    at = open_sql_page(demo_store_path, monkeypatch, "DELETE FROM runs")
    assert "Query refused" in at.error[0].value
    at = open_sql_page(demo_store_path, monkeypatch, "SELECT count(*) AS n FROM runs")
    assert at.dataframe[0].value["n"].tolist() == [2]


def test_page_submitting_puts_the_query_in_the_url(
    demo_store_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = open_sql_page(demo_store_path, monkeypatch, None)
    assert not at.dataframe
    at.text_area[0].input("SELECT 7 AS seven")
    at.button[0].click().run()
    assert at.query_params["q"] in ("SELECT 7 AS seven", ["SELECT 7 AS seven"])
    assert at.dataframe[0].value["seven"].tolist() == [7]
