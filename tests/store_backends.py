"""Run the store tests on either backend: the embedded DuckDB file or a DuckLake on PostgreSQL.

    python -m pytest tests/test_store_ingest.py                       # embedded file (default)
    python -m pytest tests/test_store_ingest.py --backend ducklake    # DuckLake + PostgreSQL
    ROLLSCOPE_TEST_BACKEND=ducklake python -m pytest tests/...         # the same

With `--backend ducklake` every store a test opens at a `*.duckdb` path becomes a DuckLake whose
catalog is a fresh PostgreSQL database (one per path) and whose data folder sits beside that path,
so the same tests run unchanged. PostgreSQL is a throwaway cluster this plugin starts once per
session (Debian's `initdb`/`pg_ctl` under /usr/lib/postgresql/*/bin, as the `postgres` user when
run as root) on a free port with its socket in a temp folder. `.ci/run` installs `postgresql`.
"""

from __future__ import annotations

import glob
import hashlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

BACKEND_ENV = "ROLLSCOPE_TEST_BACKEND"


def pg_bin() -> Path | None:
    """The newest Debian PostgreSQL bin folder with initdb and pg_ctl, if installed."""
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda p: (
            int(Path(p).parent.parent.name) if Path(p).parent.parent.name.isdigit() else 0
        ),
    )
    for initdb in reversed(found):
        folder = Path(initdb).parent
        if (folder / "pg_ctl").exists():
            return folder
    for name in ("initdb", "pg_ctl"):
        if shutil.which(name) is None:
            return None
    return Path(str(shutil.which("initdb"))).parent


class PgCluster:
    """A throwaway PostgreSQL cluster: its own data folder, port and socket folder."""

    def __init__(self, bin_dir: Path, root: Path) -> None:
        self.bin = bin_dir
        self.root = root
        self.data = root / "data"
        self.sockets = root / "sockets"
        self.port = _free_port()
        self.user: str | None = None
        if os.geteuid() == 0:  # initdb refuses to run as root
            self.user = "postgres"
        self._databases: set[str] = set()

    def _run(self, *args: str) -> subprocess.CompletedProcess[str]:
        cmd = [str(a) for a in args]
        if self.user:
            cmd = ["runuser", "-u", self.user, "--", *cmd]
        return subprocess.run(cmd, capture_output=True, text=True, check=False)

    def start(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.sockets.mkdir(exist_ok=True)
        if self.user:
            entry = pwd.getpwnam(self.user)
            for path in (self.root, self.sockets):
                os.chown(path, entry.pw_uid, entry.pw_gid)
        done = self._run(
            self.bin / "initdb", "-D", self.data, "-A", "trust", "-U", "postgres", "--no-sync"
        )
        if done.returncode != 0:
            raise RuntimeError(f"initdb failed: {done.stderr or done.stdout}")
        options = f"-p {self.port} -k {self.sockets} -c listen_addresses='' -c fsync=off"
        done = self._run(
            self.bin / "pg_ctl",
            "-D",
            self.data,
            "-o",
            options,
            "-l",
            self.root / "log",
            "-w",
            "start",
        )
        if done.returncode != 0:
            log = (self.root / "log").read_text() if (self.root / "log").exists() else ""
            raise RuntimeError(f"pg_ctl start failed: {done.stderr or done.stdout}\n{log}")

    def stop(self) -> None:
        self._run(self.bin / "pg_ctl", "-D", self.data, "-m", "immediate", "-w", "stop")

    def conninfo(self, dbname: str) -> str:
        return f"dbname={dbname} host={self.sockets} port={self.port} user=postgres"

    def create_database(self, name: str) -> str:
        if name not in self._databases:
            psql = self.bin / "psql"
            if not psql.exists():
                psql = Path(shutil.which("psql") or "psql")
            done = self._run(
                psql, "-h", self.sockets, "-p", str(self.port), "-U", "postgres", "-d", "postgres",
                "-v", "ON_ERROR_STOP=1", "-c", f'CREATE DATABASE "{name}"',
            )  # fmt: skip
            if done.returncode != 0:
                raise RuntimeError(f"CREATE DATABASE {name} failed: {done.stderr}")
            self._databases.add(name)
        return self.conninfo(name)

    def lake(self, dbname: str, data_path: Path) -> str:
        """A ROLLSCOPE_DB string for a DuckLake in a fresh database of this cluster."""
        return f"ducklake:postgres:{self.create_database(dbname)} DATA_PATH {data_path}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--backend",
        choices=("duckdb", "ducklake"),
        default=os.environ.get(BACKEND_ENV) or "duckdb",
        help="store backend for the store tests: the embedded DuckDB file (default) or DuckLake "
        f"on a throwaway PostgreSQL (also ${BACKEND_ENV})",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "embedded_only: a test about the embedded DuckDB file; not mapped to DuckLake"
    )


def pytest_report_header(config: pytest.Config) -> str:
    return f"rollscope store backend: {config.getoption('--backend')}"


@pytest.fixture(scope="session")
def pg_cluster(request: pytest.FixtureRequest) -> Iterator[PgCluster]:
    """A PostgreSQL server for this test session; skips (or fails under --backend ducklake) when
    PostgreSQL is not installed."""
    bin_dir = pg_bin()
    if bin_dir is None:
        message = "PostgreSQL is not installed (apt-get install postgresql): no initdb/pg_ctl"
        if request.config.getoption("--backend") == "ducklake":
            pytest.fail(message)
        pytest.skip(message)
    root = Path(tempfile.mkdtemp(prefix="rollscope-pg-"))
    cluster = PgCluster(bin_dir, root)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)


def lake_of(cluster: PgCluster, path: Path) -> str:
    """The ROLLSCOPE_DB string of the DuckLake that stands for the store file `path`: a database
    of its own, named after the path, and a data folder beside it."""
    name = "t_" + hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:20]
    return cluster.lake(name, path.parent / f"{path.name}.lake")


@pytest.fixture(scope="session")
def store_target(request: pytest.FixtureRequest) -> Callable[[Path], str]:
    """``store_target(path)``: what opening the store file `path` opens under this session's
    backend: the path itself, or under --backend ducklake the DuckLake that stands for it."""
    if request.config.getoption("--backend") != "ducklake":
        return str
    cluster: PgCluster = request.getfixturevalue("pg_cluster")
    return lambda path: lake_of(cluster, path)


@pytest.fixture(autouse=True)
def _store_backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Under --backend ducklake, stores opened at `*.duckdb` paths are DuckLakes instead."""
    if request.config.getoption("--backend") != "ducklake":
        return
    if request.node.get_closest_marker("embedded_only"):
        return
    cluster: PgCluster = request.getfixturevalue("pg_cluster")
    import trace_store.store as store_module
    from trace_store.backends import parse_target

    def lake_for(value: object) -> object:
        target = parse_target(value)  # type: ignore[arg-type]
        if target.is_ducklake or target.path is None or target.path.suffix != ".duckdb":
            return target
        return parse_target(lake_of(cluster, target.path))

    monkeypatch.setattr(store_module, "parse_target", lake_for)
