"""Loading DuckDB extensions on a machine that cannot download them.

DuckDB's own install is tried first; then the pip package `duckdb-extension-<name>`, which ships
the binary built for the pinned DuckDB version.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import duckdb

from .errors import ExtensionUnavailable


def _packaged_extension(name: str) -> Path | None:
    spec = importlib.util.find_spec(f"duckdb_extension_{name}")
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        wanted = (
            Path(location) / "extensions" / f"v{duckdb.__version__}" / f"{name}.duckdb_extension"
        )
        if wanted.exists():
            return wanted
    return None


def load_extension(con: duckdb.DuckDBPyConnection, name: str) -> None:
    try:
        con.execute(f"LOAD {name}")
        return
    except duckdb.Error:
        pass
    packaged = _packaged_extension(name)
    if packaged is None:
        raise ExtensionUnavailable(
            f"DuckDB extension '{name}' is not installed for DuckDB {duckdb.__version__}: "
            f"pip install duckdb-extension-{name}=={duckdb.__version__}"
        )
    try:
        con.execute(f"LOAD '{packaged.as_posix()}'")
    except duckdb.Error as exc:
        raise ExtensionUnavailable(f"DuckDB extension '{name}' failed to load: {exc}") from exc
