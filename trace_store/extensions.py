"""Loading DuckDB extensions on a machine that cannot download them.

DuckDB's own install is tried first; then the pip package `duckdb-extension-<name>`, which ships
the binary built for the pinned DuckDB version.
"""

from __future__ import annotations

import importlib.util
import os
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


# Pip packages whose file is named after the extension's alias: DuckDB derives the entry point
# from the file name, so such a file is loaded through a link under its real name.
_REAL_NAMES = {"postgres": "postgres_scanner"}


def _under_real_name(packaged: Path, name: str) -> Path:
    real = _REAL_NAMES.get(name)
    if real is None:
        return packaged
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    folder = cache / "rollscope" / "duckdb-extensions" / f"v{duckdb.__version__}"
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    link = folder / f"{real}.duckdb_extension"
    if not (link.is_symlink() and link.resolve() == packaged.resolve()):
        tmp = folder / f".{real}.{os.getpid()}.link"
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(packaged.resolve())
        tmp.replace(link)
    return link


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
        packaged = _under_real_name(packaged, name)
        con.execute(f"LOAD '{packaged.as_posix()}'")
    except (duckdb.Error, OSError) as exc:
        raise ExtensionUnavailable(f"DuckDB extension '{name}' failed to load: {exc}") from exc
