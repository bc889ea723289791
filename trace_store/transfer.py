"""Copy a whole store to another backend: how a team moves its embedded file to a shared DuckLake.

    rollscope migrate-store --db ~/.local/share/rollscope/rollscope.duckdb \\
        --to "ducklake:postgres:dbname=rollscope host=db DATA_PATH s3://bucket/rollscope/"

The target is created and migrated like any store, must be empty, and receives every table's rows
in one transaction (a failure leaves it empty). Derived search tables are left out: the replay
screen rebuilds its full-text index on first use. The source is only read.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import duckdb

from .backends import DUCKLAKE_PREFIX, counter_table, is_ducklake, parse_target
from .errors import TraceStoreError
from .extensions import load_extension
from .schema import MIGRATIONS
from .store import Store, open_store

SOURCE = "rollscope_source"
SKIPPED = {"schema_migrations"}
"""Tables not copied: the target has its own migrations record. Search tables (`search_*`) and the
dashboards' summary tables are derived: the screens rebuild them on first use."""


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _attach_source(cur: duckdb.DuckDBPyConnection, source: str | Path) -> None:
    target = parse_target(source)
    if target.is_ducklake:
        assert target.catalog is not None
        load_extension(cur, "ducklake")
        if target.catalog.lower().startswith("postgres:"):
            load_extension(cur, "postgres")
        sql = f"ATTACH {_quote(DUCKLAKE_PREFIX + target.catalog)} AS {SOURCE} (READ_ONLY)"
    else:
        assert target.path is not None
        if not target.path.exists():
            raise TraceStoreError(f"no store at {target.path}")
        sql = f"ATTACH {_quote(str(target.path))} AS {SOURCE} (READ_ONLY)"
    try:
        cur.execute(sql)
    except duckdb.Error as exc:
        if "lock" in str(exc).lower():
            raise TraceStoreError(
                f"{target.describe()} is open in another process (a running `rollscope serve`?): "
                "stop it, then migrate"
            ) from exc
        raise TraceStoreError(f"cannot open the source store {target.describe()}: {exc}") from exc


def _tables(cur: duckdb.DuckDBPyConnection, catalog: str) -> list[str]:
    rows = cur.execute(
        "SELECT table_name FROM duckdb_tables() WHERE database_name = ? AND schema_name = 'main'"
        " AND NOT temporary ORDER BY table_name",
        [catalog],
    ).fetchall()
    return [str(r[0]) for r in rows]


def copy_store(
    source: str | Path,
    target: str | Path,
    *,
    progress: Callable[[str, int], None] | None = None,
) -> dict[str, int]:
    """Copy every table of `source` into the empty store `target`; returns rows copied per table."""
    if str(source) == str(target):
        raise TraceStoreError("the source and the target are the same store")
    with open_store(target) as store:
        return _copy_into(store, source, progress)


def _copy_into(
    store: Store, source: str | Path, progress: Callable[[str, int], None] | None
) -> dict[str, int]:
    cur = store.cursor()
    try:
        if not store.is_empty() or _count(cur, "SELECT count(*) FROM imports"):
            raise TraceStoreError(
                f"the target {store.location} is not empty: migrate into a new store"
            )
        _attach_source(cur, source)
        source_version = _count(cur, f"SELECT max(version) FROM {SOURCE}.main.schema_migrations")
        newest = max(number for number, _, _ in MIGRATIONS)
        if source_version != newest:
            raise TraceStoreError(
                f"the source store is at schema version {source_version}, this Rollscope at "
                f"{newest}: open the source once with this version (it migrates), then copy"
            )
        target_catalog = str(cur.execute("SELECT current_database()").fetchone()[0])  # type: ignore[index]
        wanted = [
            t
            for t in _tables(cur, target_catalog)
            if t not in SKIPPED and not t.startswith("search_")
        ]
        present = set(_tables(cur, SOURCE))
        counters = {counter_table("import_ids")}
        copied: dict[str, int] = {}
        cur.execute("BEGIN TRANSACTION")
        try:
            for table in wanted:
                if table not in present or table in counters:
                    continue
                columns = [
                    str(r[0])
                    for r in cur.execute(
                        "SELECT column_name FROM duckdb_columns() WHERE database_name = ?"
                        " AND schema_name = 'main' AND table_name = ? ORDER BY column_index",
                        [SOURCE, table],
                    ).fetchall()
                ]
                names = ", ".join(f'"{c}"' for c in columns)
                cur.execute(
                    f'INSERT INTO "{table}" ({names}) SELECT {names} FROM {SOURCE}.main."{table}"'
                )
                copied[table] = _count(cur, f'SELECT count(*) FROM "{table}"')
                if progress:
                    progress(table, copied[table])
            last_id = _count(cur, "SELECT coalesce(max(import_id), 0) FROM imports")
            if store.ducklake:
                cur.execute(f"UPDATE {counter_table('import_ids')} SET value = ?", [last_id])
            cur.execute("COMMIT")
        except BaseException:
            cur.execute("ROLLBACK")
            raise
        if not store.ducklake and last_id:
            # DuckDB sequences cannot be set: recreate it past the copied ids.
            cur.execute("DROP SEQUENCE import_ids")
            cur.execute(f"CREATE SEQUENCE import_ids START {last_id + 1}")
        cur.execute(f"DETACH {SOURCE}")
        return copied
    finally:
        cur.close()


def _count(cur: duckdb.DuckDBPyConnection, sql: str) -> int:
    row = cur.execute(sql).fetchone()
    return int(row[0]) if row and row[0] is not None else 0


__all__ = ["copy_store", "is_ducklake"]
