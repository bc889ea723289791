"""Shared fixtures: real DuckDB store files in tmp folders (never a mock of the store)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from trace_store import open_store
from trace_store.transfer import copy_store

# --backend duckdb|ducklake for the store tests, and the session's PostgreSQL (pg_cluster).
pytest_plugins = ["store_backends"]

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"

#: A demo small enough to build in seconds, big enough for every screen to draw something.
DEMO_SIZE = {"steps": 12, "prompts": 8, "samples": 4}


@pytest.fixture(scope="session")
def copy_store_file(store_target: Callable[[Path], str]) -> Callable[..., Path]:
    """``copy_store_file(source, target)``: `target` holding what the store file `source`
    holds, for a test to open. Under --backend ducklake a `*.duckdb` path opens as a DuckLake,
    which a file copy cannot fill, so the rows are copied into that lake instead (`copy_store`,
    as `rollscope migrate-store` does), unless `embedded` (a test marked embedded_only). Each
    target is filled once."""
    filled: set[Path] = set()

    def copy(source: Path, target: Path, embedded: bool = False) -> Path:
        if target not in filled:
            if embedded or store_target(target) == str(target):
                shutil.copyfile(source, target)
            else:  # the source may itself stand for a lake (a copy of a copy)
                copy_store(
                    source if source.exists() else store_target(source), store_target(target)
                )
            filled.add(target)
        return target

    return copy


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    """A fresh, migrated, empty store file."""
    path = tmp_path / "store.duckdb"
    open_store(path).close()
    return path


@pytest.fixture(scope="session")
def demo_store_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The small demo in an embedded store file, built once per session."""
    path = tmp_path_factory.mktemp("demo-store") / "demo-source.duckdb"
    with open_store(path) as store:
        store.load_demo(**DEMO_SIZE)
    return path


@pytest.fixture(scope="session")
def demo_store_path(demo_store_file: Path, copy_store_file: Callable[..., Path]) -> Path:
    """A store holding the small demo, shared by the session. Read it; do not write to it
    (use `demo_store_copy` for that)."""
    return copy_store_file(demo_store_file, demo_store_file.with_name("demo.duckdb"))


@pytest.fixture
def demo_store_copy(
    demo_store_file: Path,
    tmp_path: Path,
    copy_store_file: Callable[..., Path],
    request: pytest.FixtureRequest,
) -> Path:
    """A private copy of the demo store that a test may change."""
    embedded = request.node.get_closest_marker("embedded_only") is not None
    return copy_store_file(demo_store_file, tmp_path / "demo-copy.duckdb", embedded)
