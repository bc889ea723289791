"""The trace store: one DuckDB database, one connection per process, a cursor per thread."""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, TypeVar

import duckdb
import pandas as pd

from . import summary_state
from .backends import (
    LAKE,
    connect_ducklake,
    data_version,
    ducklake_ddl,
    is_conflict,
    is_ducklake,
    next_id,
    parse_target,
)
from .errors import IngestError, StoreLocked, TraceStoreError, UnknownFormatError
from .extensions import load_extension
from .ingest.canonical import CanonicalIngest, IngestResult
from .ingest.files import compression_of, head_bytes
from .ingest.registry import Importer, describe_formats, detect_format, get_importer
from .limits import guard_converter, translate_read_error
from .schema import migrate

ProgressCallback = Callable[[int, int], None]

DEFAULT_DB_ENV = "ROLLSCOPE_DB"
INGEST_MEMORY_ENV = "ROLLSCOPE_INGEST_MEMORY_LIMIT"
"""DuckDB's memory_limit while a file is imported (default 1536MB; beyond it the import spills to
disk). The JSON reader alone holds two buffers of twice the longest allowed line per thread."""
INGEST_MEMORY_DEFAULT = "1536MB"
DUCKLAKE_COMMIT_ATTEMPTS = 6

T = TypeVar("T")


def default_db_path() -> Path:
    """$ROLLSCOPE_DB, else a file in the user's data folder."""
    configured = os.environ.get(DEFAULT_DB_ENV)
    if configured:
        return Path(configured).expanduser()
    data_home = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return data_home / "rollscope" / "rollscope.duckdb"


class _AlreadyImported(Exception):
    """The file's content was imported before: the transaction is rolled back, nothing changes."""


def _imported_before(cur: duckdb.DuckDBPyConnection, content_hash: str) -> bool:
    found = cur.execute(
        "SELECT 1 FROM imports WHERE content_hash = ? AND outcome = 'ok' LIMIT 1", [content_hash]
    ).fetchone()
    return found is not None


class _BackgroundHash:
    """SHA-256 of a file or folder, computed in a side thread; `result()` waits for it."""

    def __init__(self, path: Path, name: str) -> None:
        self._name = name
        self._digest: str | None = None
        self._error: OSError | None = None
        self._thread = threading.Thread(target=self._run, args=(path,), daemon=True)
        self._thread.start()

    def _run(self, path: Path) -> None:
        try:
            self._digest = _hash_path(path)
        except OSError as exc:
            self._error = exc

    def result(self) -> str:
        self._thread.join()
        if self._error is not None:
            message = f"cannot read the file: {self._error.strerror or self._error}"
            raise IngestError(message, file=self._name) from self._error
        assert self._digest is not None
        return self._digest


def _hash_path(path: Path) -> str:
    digest = hashlib.sha256()
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for file in files:
        if path.is_dir():
            digest.update(str(file.relative_to(path)).encode())
        with file.open("rb") as handle:
            while chunk := handle.read(4 << 20):
                digest.update(chunk)
    return digest.hexdigest()


def _size_of(path: Path) -> int:
    if path.is_dir():
        return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    return path.stat().st_size


class Store:
    """A Rollscope store. Safe to share between threads; each query takes its own cursor."""

    def __init__(self, path: str | Path | None = None, *, read_only: bool = False) -> None:
        configured = os.environ.get(DEFAULT_DB_ENV)
        if path is None and is_ducklake(configured):
            path = configured
        self.target = parse_target(path if path is not None else default_db_path())
        self.ducklake = self.target.is_ducklake
        self.location = self.target.describe()
        """Where the store lives, for people (a file path, or the DuckLake without passwords)."""
        self.read_only = read_only
        self._write_lock = threading.Lock()
        if self.ducklake:
            # A shared DuckLake: an in-memory DuckDB with the lake attached; `path` is its data folder.
            self.path = Path(self.target.data_path or ".")
            self._con = connect_ducklake(self.target, read_only=read_only)
            self._con.execute("SET TimeZone = 'UTC'")
            self._con.execute("SET preserve_insertion_order = false")
            if not read_only:
                migrate(self._con, translate=ducklake_ddl)
            return
        assert self.target.path is not None
        self.path = self.target.path
        if not read_only:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._con = duckdb.connect(str(self.path), read_only=read_only)
        except duckdb.IOException as exc:
            if "lock" in str(exc).lower():
                raise StoreLocked(
                    f"{self.path} is open for writing in another process (a running `rollscope serve`?). "
                    "DuckDB's embedded file allows one writing process: stop that process, or import "
                    "through the app's Runs page."
                ) from exc
            raise TraceStoreError(f"cannot open {self.path}: {exc}") from exc
        self._write_lock = threading.Lock()
        self._con.execute("SET TimeZone = 'UTC'")
        self._con.execute("SET preserve_insertion_order = false")
        if not read_only:
            migrate(self._con)

    # -- connections -------------------------------------------------------------------------
    def cursor(self) -> duckdb.DuckDBPyConnection:
        """A cursor for the calling thread. DuckDB cursors must not be shared across threads."""
        cur = self._con.cursor()
        cur.execute("SET TimeZone = 'UTC'")
        if self.ducklake:
            cur.execute(f"USE {LAKE}")
        return cur

    def data_version(self) -> str:
        """A value that changes when committed data changes, also by another process (DuckLake):
        caches key on it, so a running app sees another process's import on its next rerun."""
        cur = self.cursor()
        try:
            return data_version(cur, ducklake=self.ducklake)
        finally:
            cur.close()

    def next_import_id(self, cur: duckdb.DuckDBPyConnection) -> int:
        """The next import id, inside the caller's write transaction (a sequence, or on DuckLake
        a counter row whose concurrent updates conflict, so one import is retried)."""
        return next_id(cur, "import_ids", ducklake=self.ducklake)

    def close(self) -> None:
        self._con.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def load_extension(self, name: str) -> None:
        load_extension(self._con, name)

    @contextmanager
    def transaction(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A write transaction, serialized within this process."""
        with self._write_lock:
            cur = self.cursor()
            cur.execute("BEGIN TRANSACTION")
            try:
                yield cur
                cur.execute("COMMIT")
            except BaseException:
                _rollback(cur)
                raise
            finally:
                cur.close()

    def write(self, work: Callable[[duckdb.DuckDBPyConnection], T]) -> T:
        """``work(cur)`` in one write transaction. On DuckLake a commit that lost a race with
        another writer is retried from the start, against the new snapshot: ``work`` must read
        what it depends on (such as "imported before?") inside the transaction."""

        def once() -> T:
            with self.transaction() as cur:
                return work(cur)

        return self.retry_conflicts(once)

    def retry_conflicts(self, attempt: Callable[[], T]) -> T:
        """``attempt()``; on DuckLake, again (with backoff) while its commit conflicts with
        another writer's."""
        attempts = DUCKLAKE_COMMIT_ATTEMPTS if self.ducklake else 1
        for number in range(1, attempts + 1):
            try:
                return attempt()
            except duckdb.Error as exc:
                if number == attempts or not is_conflict(exc):
                    raise
            time.sleep(random.uniform(0.05, 0.2) * 2**number)
        raise AssertionError("unreachable")

    # -- reading -----------------------------------------------------------------------------
    def query_df(self, sql: str, params: list[Any] | dict[str, Any] | None = None) -> pd.DataFrame:
        cur = self.cursor()
        try:
            return cur.execute(sql, params or []).df()
        finally:
            cur.close()

    def is_empty(self) -> bool:
        cur = self.cursor()
        try:
            row = cur.execute("SELECT count(*) FROM runs").fetchone()
        finally:
            cur.close()
        return not row or row[0] == 0

    def list_runs(self) -> pd.DataFrame:
        """One row a run: name, kind, model, rollouts, steps, mean reward, last import."""
        return self.query_df(
            """
            WITH last_import AS (
                SELECT run_id, max(imported_at) AS last_import
                FROM (SELECT unnest(run_ids) AS run_id, imported_at FROM imports) GROUP BY run_id
            ), stats AS (
                SELECT run_id, count(*) AS rollouts, count(DISTINCT step) AS steps,
                       min(step) AS min_step, max(step) AS max_step, avg(reward) AS mean_reward
                FROM rollouts GROUP BY run_id
            )
            SELECT r.run_id, r.name, r.kind, r.model,
                   coalesce(s.rollouts, 0) AS rollouts, coalesce(s.steps, 0) AS steps,
                   s.min_step, s.max_step, s.mean_reward,
                   (SELECT max(last_import) FROM last_import l WHERE l.run_id = r.run_id) AS last_import
            FROM runs r LEFT JOIN stats s USING (run_id)
            ORDER BY last_import DESC NULLS LAST, r.run_id
            """
        )

    def list_imports(self) -> pd.DataFrame:
        return self.query_df(
            "SELECT import_id, file_name, format, rollouts_added, events_added, duplicates_skipped,"
            " run_ids, imported_at FROM imports ORDER BY import_id DESC"
        )

    # -- writing -----------------------------------------------------------------------------
    def detect_format(self, path: str | Path, display_name: str | None = None) -> Importer | None:
        """The importer for a file, from its name (the user's, where given) and first bytes."""
        path = Path(path)
        return detect_format(display_name or path.name, head_bytes(path))

    def ingest_file(
        self,
        path: str | Path,
        *,
        display_name: str | None = None,
        format: str | None = None,
        progress: ProgressCallback | None = None,
    ) -> IngestResult:
        """Import one file (or a folder of per-step files) in one transaction.

        On any error the store is left exactly as it was and an IngestError says where.
        Importing the same content again changes nothing and says so.
        """
        path = Path(path)
        name = display_name or path.name
        if not path.exists():
            raise IngestError("no such file", file=name)
        if not (path.is_file() or path.is_dir()):
            # A FIFO would block the import forever; a device or socket is no trace file.
            raise IngestError("not a regular file or folder (a pipe, socket or device?)", file=name)
        try:
            total = max(_size_of(path), 1)
        except OSError as exc:
            raise IngestError(f"cannot read the file: {exc.strerror or exc}", file=name) from exc

        def report(done: float) -> None:
            if progress:
                progress(min(int(done), total), total)

        # The content hash is computed beside the import's first steps (it releases the GIL):
        # a canonical file is staged meanwhile and checked against earlier imports before
        # anything is written.
        hashing = _BackgroundHash(path, name)
        importer = get_importer(format) if format else self.detect_format(path, name)
        if importer is None:
            raise UnknownFormatError(
                f"cannot tell which format this is. Known formats: {describe_formats()}", file=name
            )
        if importer.convert is not None and self._imported_before(hashing.result()):
            report(total)
            return IngestResult(file=name, format=importer.name, already_imported=True)

        workdir = Path(tempfile.mkdtemp(prefix="rollscope-import-"))
        try:
            canonical_path = path
            if importer.convert is not None:
                canonical_path = workdir / "converted.jsonl"
                # Converters name runs and errors after the file: give them the name the user knows.
                source = path
                if name != path.name and "/" not in name:
                    source = workdir / name
                    source.symlink_to(path.resolve(), target_is_directory=path.is_dir())
                if importer.writes_step_metrics:
                    from .metrics import ingest_step_metrics

                    written = ingest_step_metrics(
                        self,
                        guard_converter(importer.convert(source), importer.label, name),
                        name,
                        hashing.result(),
                        format=importer.name,
                    )
                    report(total)
                    return written
                records = guard_converter(importer.convert(source), importer.label, name)
                count = _write_records(records, canonical_path)
                if count == 0:
                    raise IngestError(f"no rollouts found in this {importer.label} file", file=name)
            report(0.2 * total)
            result = self._ingest_canonical(canonical_path, name, importer, hashing, report, total)
        except _AlreadyImported:
            report(total)
            return IngestResult(file=name, format=importer.name, already_imported=True)
        except Exception as exc:  # a damaged, hostile or unreadable file: say so, store unchanged
            error = translate_read_error(exc, name)
            if error is exc:
                raise
            raise error from exc
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        report(total)
        return result

    def _imported_before(self, content_hash: str) -> bool:
        cur = self.cursor()
        try:
            return _imported_before(cur, content_hash)
        finally:
            cur.close()

    def _ingest_canonical(
        self,
        path: Path,
        name: str,
        importer: Importer,
        hashing: _BackgroundHash,
        report: Callable[[float], None],
        total: int,
    ) -> IngestResult:
        """One transaction; on DuckLake, a commit that lost a race with another writer is retried
        against the new snapshot (unless that writer imported this very file)."""
        tries = 0

        def attempt() -> IngestResult:
            nonlocal tries
            tries += 1
            # A retry: the writer that won the race may have imported this very file.
            if tries > 1 and self._imported_before(hashing.result()):
                return IngestResult(file=name, format=importer.name, already_imported=True)
            return self._ingest_canonical_once(path, name, importer, hashing, report, total)

        return self.retry_conflicts(attempt)

    def _ingest_canonical_once(
        self,
        path: Path,
        name: str,
        importer: Importer,
        hashing: _BackgroundHash,
        report: Callable[[float], None],
        total: int,
    ) -> IngestResult:
        with (
            self._write_lock,
            _memory_limit(self._con, os.environ.get(INGEST_MEMORY_ENV) or INGEST_MEMORY_DEFAULT),
        ):
            cur = self.cursor()
            job = CanonicalIngest(
                cur, path, name if importer.convert is None else f"{name} (as converted)"
            )
            job.display_name = name
            cur.execute("BEGIN TRANSACTION")
            try:
                import_id = self.next_import_id(cur)
                with _poll_progress(cur, lambda fraction: report((0.2 + 0.5 * fraction) * total)):
                    job.stage(compression_of(path))
                content_hash = hashing.result()
                if _imported_before(cur, content_hash):
                    raise _AlreadyImported
                job.validate()
                report(0.75 * total)
                result = job.write(import_id)
                result.format = importer.name
                nothing_new = not (
                    result.rollouts_added or result.events_added or result.rollouts_updated
                )
                if nothing_new and result.duplicates_skipped == 0:
                    raise IngestError("the file holds no rollouts", file=name)
                cur.execute(
                    "INSERT INTO imports (import_id, file_name, content_hash, format, rollouts_added,"
                    " events_added, duplicates_skipped, run_ids, outcome, message)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'ok', ?)",
                    [
                        import_id,
                        name,
                        content_hash,
                        importer.name,
                        result.rollouts_added,
                        result.events_added,
                        result.duplicates_skipped,
                        result.run_ids,
                        "; ".join(result.warnings) or None,
                    ],
                )
                cur.execute("COMMIT")
            except BaseException:
                _rollback(cur)
                raise
            finally:
                CanonicalIngest.cleanup(cur)
                cur.close()
        return result

    def ingest_records(
        self, records: Iterable[dict[str, Any]], *, display_name: str, format: str = "canonical"
    ) -> IngestResult:
        """Import canonical records held in memory (tests, generators, API pulls)."""
        workdir = Path(tempfile.mkdtemp(prefix="rollscope-records-"))
        try:
            target = workdir / f"{display_name}.jsonl"
            _write_records(records, target)
            return self.ingest_file(target, display_name=display_name, format=format)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)

    def load_demo(self, progress: ProgressCallback | None = None, **size: int) -> IngestResult:
        """Generate and import the demo runs (a baseline and a training run)."""
        from .demo import write_demo_file

        workdir = Path(tempfile.mkdtemp(prefix="rollscope-demo-"))
        try:
            path = write_demo_file(workdir / "demo.jsonl", **size)
            return self.ingest_file(
                path, display_name="demo run", format="canonical", progress=progress
            )
        finally:
            shutil.rmtree(workdir, ignore_errors=True)

    def delete_run(self, run_id: str) -> int:
        """Remove a run and every row of it. Returns the number of rollouts removed."""
        with self.transaction() as cur:
            row = cur.execute("SELECT count(*) FROM rollouts WHERE run_id = ?", [run_id]).fetchone()
            summaries_current = summary_state.is_current(cur)
            for table in ("events", "grades", "flags", "step_metrics", "rollouts", "runs"):
                cur.execute(f"DELETE FROM {table} WHERE run_id = ?", [run_id])
            # Derived tables (the dashboards' summaries, ...) hold the run's rows too.
            derived = cur.execute(
                "SELECT DISTINCT t.table_name FROM duckdb_tables() t JOIN duckdb_columns() c"
                " USING (database_name, schema_name, table_name)"
                " WHERE c.column_name = 'run_id' AND t.schema_name = 'main' AND NOT t.temporary"
                " AND t.database_name = current_database()"
            ).fetchall()
            for (table,) in derived:
                cur.execute(f'DELETE FROM "{table}" WHERE run_id = ?', [run_id])
            # Its summary rows went with it: summaries that were current still are.
            if summaries_current:
                summary_state.mark_current(cur)
            cur.execute("DELETE FROM imports WHERE len(run_ids) = 1 AND run_ids[1] = ?", [run_id])
        return int(row[0]) if row else 0


@contextmanager
def _memory_limit(con: duckdb.DuckDBPyConnection, limit: str) -> Iterator[None]:
    """DuckDB's memory limit lowered for a block (a big import spills instead of growing)."""
    if not re.fullmatch(r"\s*\d+(\.\d+)?\s*[KMGT]i?B\s*", limit, flags=re.I):
        yield
        return
    row = con.execute("SELECT current_setting('memory_limit')").fetchone()
    before = str(row[0]) if row else None
    con.execute(f"SET GLOBAL memory_limit = '{limit.strip()}'")
    try:
        yield
    finally:
        # The setting reads back rounded ("18.8 GiB"): reset to the default when that was it.
        con.execute("RESET GLOBAL memory_limit")
        row = con.execute("SELECT current_setting('memory_limit')").fetchone()
        if before and (not row or str(row[0]) != before):
            con.execute(f"SET GLOBAL memory_limit = '{before}'")


def _rollback(cur: duckdb.DuckDBPyConnection) -> None:
    """Roll back, unless the failure was the COMMIT itself (a full disk), which already ended
    the transaction: a second error must not hide the first."""
    with suppress(duckdb.TransactionException):
        cur.execute("ROLLBACK")


def _write_records(records: Iterable[dict[str, Any]], target: Path) -> int:
    count = 0
    with target.open("w", encoding="utf-8") as out:
        for record in records:
            out.write(json.dumps(record, ensure_ascii=False, allow_nan=False))
            out.write("\n")
            count += 1
    return count


@contextmanager
def _poll_progress(
    cur: duckdb.DuckDBPyConnection, report: Callable[[float], None]
) -> Iterator[None]:
    """Report DuckDB's own progress of the running query from a side thread."""
    stop = threading.Event()

    def poll() -> None:
        while not stop.wait(0.25):
            try:
                percent = cur.query_progress()
            except duckdb.Error:
                continue
            if percent is not None and percent >= 0:
                report(percent / 100.0)

    thread = threading.Thread(target=poll, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def open_store(path: str | Path | None = None, *, read_only: bool = False) -> Store:
    return Store(path, read_only=read_only)
