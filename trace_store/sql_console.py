"""Read-only SQL over the store for power users: a sandboxed DuckDB on a snapshot of the store.

The app's own connection can write and read files (imports need both), and DuckDB will not open
a second connection to the same file in one process with a different configuration. So user SQL
runs on a separate DuckDB instance over a *snapshot* of the store file, opened

- read-only (no INSERT/UPDATE/DELETE/CREATE on the store's tables),
- with ``enable_external_access`` off (no files, no URLs, no ATTACH, INSTALL or LOAD, no COPY,
  no replacement scans of Python objects),
- unsigned and community extensions refused, extension auto-install/-load off,
- its memory and threads capped, and ``lock_configuration`` on so no SET can undo any of this.

Only SELECT-like statements (SELECT, WITH, VALUES, EXPLAIN, SHOW/DESCRIBE/SUMMARIZE) are run.
The snapshot is a copy of the store file (and its WAL, when a CHECKPOINT is not possible because
another write is under way) taken under the store's write lock; it is taken again when the store
file changed since (a copy runs at disk speed: about 20 ms for a 20 MB store).
Each query has a row cap and a time limit that interrupts it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pandas as pd

from .errors import TraceStoreError
from .store import Store

DEFAULT_MAX_ROWS = 10_000
DEFAULT_TIMEOUT_S = 30.0

SANDBOX_CONFIG: dict[str, str | bool | int] = {
    "enable_external_access": False,
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
    "allow_unsigned_extensions": False,
    "allow_community_extensions": False,
    "memory_limit": "1GB",
    "threads": 2,
    "lock_configuration": True,
}

_ALLOWED_STATEMENTS = {"SELECT", "EXPLAIN"}


class QueryError(TraceStoreError):
    """The query could not run; the message is DuckDB's own, or says why it was refused."""

    title = "Query failed"


class QueryRefused(QueryError):
    title = "Query refused"


class QueryTimeout(QueryError):
    title = "Query cancelled"


@dataclass
class QueryResult:
    frame: pd.DataFrame
    truncated: bool  # the query returned more rows than the cap; `frame` holds the first ones
    seconds: float
    snapshot_age_s: float  # how old the snapshot the query ran on is


def _file_version(path: Path) -> tuple[int, ...]:
    """Changes whenever a write is committed (to the WAL) or checkpointed (to the file)."""
    parts: list[int] = []
    for candidate in (path, path.with_name(path.name + ".wal")):
        try:
            stat = candidate.stat()
        except FileNotFoundError:
            parts += [0, 0]
        else:
            parts += [stat.st_mtime_ns, stat.st_size]
    return tuple(parts)


class SqlConsole:
    """Runs user SQL on a locked-down snapshot of `store`. Safe to share between threads."""

    def __init__(
        self,
        store: Store,
        *,
        snapshot_dir: Path | None = None,
        config: dict[str, str | bool | int] | None = None,
    ) -> None:
        self.store = store
        key = hashlib.sha256(str(store.path.resolve()).encode()).hexdigest()[:16]
        base = snapshot_dir or Path(tempfile.gettempdir())
        self._dir = base / f"rollscope-sql-{key}"
        self._config = {**SANDBOX_CONFIG, **(config or {})}
        self._lock = threading.Lock()
        self._con: duckdb.DuckDBPyConnection | None = None
        self._version: tuple[int, ...] | None = None
        self._taken_at = 0.0
        self._generation = 0

    # -- the snapshot --------------------------------------------------------------------------
    def _connection(self) -> duckdb.DuckDBPyConnection:
        with self._lock:
            version = _file_version(self.store.path)
            if self._con is None or version != self._version:
                self._refresh()
            assert self._con is not None
            return self._con

    def _refresh(self) -> None:
        if getattr(self.store, "ducklake", False):
            raise QueryRefused(
                "the SQL screen reads a DuckDB store file; this app serves a shared DuckLake "
                "(query it with DuckDB's own client, read-only)"
            )
        self._dir.mkdir(mode=0o700, parents=True, exist_ok=True)  # a copy of the data
        self._generation += 1
        target = self._dir / f"snapshot-{os.getpid()}-{self._generation}.duckdb"
        wal = self.store.path.with_name(self.store.path.name + ".wal")
        target_wal = target.with_name(target.name + ".wal")
        with self.store._write_lock:  # no import of this process is half-way through
            # Fold the WAL into the file when no one else is writing; otherwise copy the WAL
            # too (a read-only open replays it in memory).
            cur = self.store.cursor()
            try:
                cur.execute("CHECKPOINT")
            except duckdb.Error:
                pass
            finally:
                cur.close()
            version = _file_version(self.store.path)
            shutil.copyfile(self.store.path, target)
            if wal.exists():
                shutil.copyfile(wal, target_wal)
        old = self._con
        try:
            self._con = duckdb.connect(str(target), read_only=True, config=dict(self._config))
        except duckdb.Error as exc:
            self._con = old
            raise QueryError(f"the store is busy, try again in a moment ({exc})") from exc
        self._version = version
        self._taken_at = time.monotonic()
        if old is not None:
            old.close()
        for stale in self._dir.glob(f"snapshot-{os.getpid()}-*.duckdb*"):
            if stale.name != target.name:
                stale.unlink(missing_ok=True)

    def close(self) -> None:
        with self._lock:
            if self._con is not None:
                self._con.close()
                self._con = None
        shutil.rmtree(self._dir, ignore_errors=True)

    # -- queries -------------------------------------------------------------------------------
    def run(
        self,
        sql: str,
        *,
        max_rows: int = DEFAULT_MAX_ROWS,
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ) -> QueryResult:
        """Run one read-only statement; at most `max_rows` rows, cancelled after `timeout_s`."""
        if not sql.strip():
            raise QueryRefused("the query is empty")
        cur = self._connection().cursor()
        try:
            self._check_statement(cur, sql)
            timed_out = threading.Event()

            def cancel() -> None:
                timed_out.set()
                cur.interrupt()

            timer = threading.Timer(timeout_s, cancel)
            started = time.monotonic()
            timer.start()
            try:
                cur.execute(sql)
                rows = cur.fetchmany(max_rows + 1)
                columns = [d[0] for d in cur.description or []]
            except duckdb.Error as exc:
                if timed_out.is_set():
                    raise QueryTimeout(
                        f"the query ran longer than the limit of {timeout_s:g} s and was cancelled"
                    ) from None
                raise QueryError(_plain(exc)) from None
            finally:
                timer.cancel()
            seconds = time.monotonic() - started
        finally:
            cur.close()
        frame = pd.DataFrame.from_records(rows[:max_rows], columns=_unique(columns))
        return QueryResult(
            frame=frame,
            truncated=len(rows) > max_rows,
            seconds=seconds,
            snapshot_age_s=time.monotonic() - self._taken_at,
        )

    @staticmethod
    def _check_statement(cur: duckdb.DuckDBPyConnection, sql: str) -> None:
        try:
            statements = cur.extract_statements(sql)
        except duckdb.Error as exc:
            raise QueryError(_plain(exc)) from None
        if len(statements) != 1:
            raise QueryRefused(f"run one statement at a time (this text holds {len(statements)})")
        kind = statements[0].type.name
        if kind not in _ALLOWED_STATEMENTS:
            raise QueryRefused(
                f"only read-only queries run here (SELECT, WITH, VALUES, EXPLAIN, DESCRIBE, "
                f"SUMMARIZE); this is a {kind} statement"
            )


def _plain(exc: duckdb.Error) -> str:
    """DuckDB's message as it wrote it (with its LINE/caret hint), minus trailing blank lines."""
    return str(exc).strip()


def _unique(columns: list[str]) -> list[str]:
    seen: dict[str, int] = {}
    result = []
    for name in columns:
        count = seen.get(name, 0)
        seen[name] = count + 1
        result.append(name if count == 0 else f"{name}_{count}")
    return result
