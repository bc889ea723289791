"""Shared fixtures: real DuckDB store files in tmp folders (never a mock of the store)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from trace_store import open_store

# --backend duckdb|ducklake for the store tests, and the session's PostgreSQL (pg_cluster).
pytest_plugins = ["store_backends"]

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"

#: A demo small enough to build in seconds, big enough for every screen to draw something.
DEMO_SIZE = {"steps": 12, "prompts": 8, "samples": 4}


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    """A fresh, migrated, empty store file."""
    path = tmp_path / "store.duckdb"
    open_store(path).close()
    return path


@pytest.fixture(scope="session")
def demo_store_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store holding the small demo, built once per session. Read it; do not write to it
    (use `demo_store_copy` for that)."""
    path = tmp_path_factory.mktemp("demo-store") / "demo.duckdb"
    with open_store(path) as store:
        store.load_demo(**DEMO_SIZE)
    return path


@pytest.fixture
def demo_store_copy(demo_store_path: Path, tmp_path: Path) -> Iterator[Path]:
    """A private copy of the demo store that a test may change."""
    target = tmp_path / "demo-copy.duckdb"
    shutil.copyfile(demo_store_path, target)
    yield target
