"""Where a store lives: an embedded DuckDB file (the default) or a shared DuckLake.

A store is named by one string, the `ROLLSCOPE_DB` setting or `--db`:

- a file path, e.g. ``~/.local/share/rollscope/rollscope.duckdb``: the embedded DuckDB file. One
  process may write it at a time.
- ``ducklake:<catalog>[ DATA_PATH <folder or URL>]``: a DuckLake, e.g.
  ``ducklake:postgres:dbname=rollscope host=db.internal DATA_PATH s3://team-bucket/rollscope/``.
  ``<catalog>`` is what DuckDB's ``ATTACH 'ducklake:<catalog>'`` takes: ``postgres:<libpq
  connection string>`` (several app servers and importers at once), ``sqlite:<file>``, or a
  ``<file>.ducklake`` DuckDB catalog (one process; handy for trying it out). ``DATA_PATH`` (the
  word in capitals, after a space) is where the Parquet files go; it is needed when the lake is
  created and remembered by the catalog after that. Keep passwords out of the string: libpq reads
  ``PGPASSWORD`` / ``~/.pgpass``.

DuckLake has no primary keys, unique constraints, indexes or sequences, so the schema's
migrations are translated (`ducklake_ddl`) and the import-id sequence becomes a one-row counter
table that every import updates: two imports committing at the same time then conflict, and the
later one is retried against the new snapshot (`Store` does that), so nothing is lost or doubled.
"""

from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

import duckdb

from .errors import TraceStoreError
from .extensions import load_extension

DUCKLAKE_PREFIX = "ducklake:"
LAKE = "rollscope_lake"
"""The name the lake is attached under in the store's in-memory DuckDB."""

COUNTER_TABLE = "import_id_counter"


@dataclass(frozen=True)
class StoreTarget:
    """A parsed store location."""

    kind: str  # "duckdb" | "ducklake"
    path: Path | None = None  # embedded: the database file
    catalog: str | None = None  # ducklake: what follows "ducklake:" in ATTACH
    data_path: str | None = None  # ducklake: where the data files go

    @property
    def is_ducklake(self) -> bool:
        return self.kind == "ducklake"

    def describe(self) -> str:
        """The location for people: no passwords."""
        if self.path is not None:
            return str(self.path)
        catalog = re.sub(r"(password\s*=\s*)\S+", r"\1***", self.catalog or "", flags=re.I)
        data = f" DATA_PATH {self.data_path}" if self.data_path else ""
        return f"{DUCKLAKE_PREFIX}{catalog}{data}"


def is_ducklake(value: str | os.PathLike[str] | None) -> bool:
    return isinstance(value, str) and value.strip().lower().startswith(DUCKLAKE_PREFIX)


def parse_target(value: str | os.PathLike[str]) -> StoreTarget:
    """A store location from a path or a ``ducklake:...`` string."""
    if not is_ducklake(value):
        return StoreTarget("duckdb", path=Path(value).expanduser())
    text = str(value).strip()[len(DUCKLAKE_PREFIX) :]
    parts = re.split(r"\s+DATA_PATH\s+", text, maxsplit=1)
    catalog = parts[0].strip()
    data_path = parts[1].strip() if len(parts) == 2 else None
    if not catalog:
        raise TraceStoreError(
            "ROLLSCOPE_DB: a DuckLake store needs its catalog, e.g. "
            "'ducklake:postgres:dbname=rollscope host=db DATA_PATH /srv/rollscope/data'"
        )
    if data_path is not None and not data_path:
        raise TraceStoreError("ROLLSCOPE_DB: DATA_PATH is empty")
    if data_path and "://" not in data_path:
        data_path = str(Path(data_path).expanduser())
    return StoreTarget("ducklake", catalog=catalog, data_path=data_path)


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def connect_ducklake(target: StoreTarget, *, read_only: bool = False) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB with the lake attached and in use (catalog `LAKE`)."""
    assert target.catalog is not None
    con = duckdb.connect(":memory:")
    try:
        load_extension(con, "ducklake")
        if target.catalog.lower().startswith("postgres:"):
            load_extension(con, "postgres")
        # Spill space for big imports: an in-memory database has none by default.
        spill = Path(tempfile.gettempdir()) / f"rollscope-spill-{os.getpid()}"
        con.execute(f"SET temp_directory = {_quote(str(spill))}")
        options = []
        if target.data_path:
            if "://" not in target.data_path:
                Path(target.data_path).mkdir(parents=True, exist_ok=True)
            options.append(f"DATA_PATH {_quote(target.data_path)}")
        if read_only:
            options.append("READ_ONLY")
        with_options = f" ({', '.join(options)})" if options else ""
        con.execute(f"ATTACH {_quote(DUCKLAKE_PREFIX + target.catalog)} AS {LAKE}{with_options}")
        con.execute(f"USE {LAKE}")
    except duckdb.Error as exc:
        con.close()
        raise TraceStoreError(f"cannot open the DuckLake {target.describe()}: {exc}") from exc
    except BaseException:
        con.close()
        raise
    return con


_COLUMN_KEY = re.compile(r"\s+(PRIMARY\s+KEY|UNIQUE)\b", re.I)
_TABLE_KEY = re.compile(r",\s*(PRIMARY\s+KEY|UNIQUE)\s*\([^)]*\)", re.I)
_INDEX = re.compile(r"CREATE\s+(UNIQUE\s+)?INDEX\b[^;]*;", re.I)
_SEQUENCE = re.compile(r"CREATE\s+SEQUENCE\s+(\w+)[^;]*;", re.I)


def ducklake_ddl(sql: str) -> str:
    """A migration's SQL for DuckLake: keys, unique constraints and indexes dropped; a sequence
    becomes a one-row counter table (see `next_id`)."""
    sql = _TABLE_KEY.sub("", sql)
    sql = _COLUMN_KEY.sub("", sql)
    sql = _INDEX.sub("", sql)

    def counter(match: re.Match[str]) -> str:
        table = counter_table(match.group(1))
        return f"CREATE TABLE {table} (value BIGINT NOT NULL); INSERT INTO {table} VALUES (0);"

    return _SEQUENCE.sub(counter, sql)


def counter_table(sequence: str) -> str:
    return COUNTER_TABLE if sequence == "import_ids" else f"{sequence}_counter"


def next_id(con: duckdb.DuckDBPyConnection, sequence: str, *, ducklake: bool) -> int:
    """The next value of a sequence, inside the caller's transaction.

    On DuckLake this updates the counter row: concurrent writers conflict at commit, and one of
    them is retried, so ids stay unique and increasing.
    """
    if not ducklake:
        row = con.execute(f"SELECT nextval({_quote(sequence)})").fetchone()
    else:
        table = counter_table(sequence)
        con.execute(f"UPDATE {table} SET value = value + 1")
        row = con.execute(f"SELECT max(value) FROM {table}").fetchone()
    if row is None or row[0] is None:
        raise TraceStoreError(f"the id counter {sequence!r} is missing")
    return int(row[0])


def is_conflict(exc: BaseException) -> bool:
    """A DuckLake commit that lost a race with another writer (worth retrying)."""
    text = str(exc).lower()
    return isinstance(exc, duckdb.Error) and "conflict" in text


def data_version(con: duckdb.DuckDBPyConnection, *, ducklake: bool) -> str:
    """A cheap value that changes whenever committed data changes (for caches)."""
    if ducklake:
        row = con.execute(f"SELECT max(snapshot_id) FROM {LAKE}.snapshots()").fetchone()
        return f"snapshot:{row[0] if row else 0}"
    row = con.execute(
        "SELECT coalesce(max(import_id), 0), count(*), (SELECT count(*) FROM runs) FROM imports"
    ).fetchone()
    return "imports:" + ":".join(str(v) for v in (row or ()))
