"""Faults during an import: the process killed mid-way, a full disk, a file that cannot be read.

Each leaves the store as it was before the import (no partial rows), openable, and the same
import retried lands whole.
"""

from __future__ import annotations

import os
import pty
import re
import select
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from trace_store import open_store
from trace_store.demo import write_demo_file

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"
SMALL = DATA / "canonical" / "rollouts_small.jsonl"
TABLES = ("runs", "rollouts", "events", "grades", "imports")


def counts(db: Path) -> dict[str, int]:
    with open_store(db) as store:
        cur = store.cursor()
        result = {}
        for table in TABLES:
            row = cur.execute(f"SELECT count(*) FROM {table}").fetchone()
            result[table] = int(row[0]) if row else 0
        return result


def rollscope(*args: str) -> list[str]:
    return [sys.executable, "-c", "from rollscope.cli import main; raise SystemExit(main())", *args]


@pytest.fixture(scope="module")
def big_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """About 16 MB of canonical JSONL: an import of several seconds."""
    return write_demo_file(tmp_path_factory.mktemp("big") / "big.jsonl", steps=20)


@pytest.fixture(scope="module")
def complete_counts(big_file: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, int]:
    """The counts of a store holding the small file and then the big one, imported cleanly."""
    db = tmp_path_factory.mktemp("reference") / "reference.duckdb"
    with open_store(db) as store:
        store.ingest_file(SMALL)
        store.ingest_file(big_file)
    return counts(db)


def _progress_fraction(buffer: str) -> float:
    """The last fraction the CLI's progress bar drew (``[####......]``)."""
    bars = re.findall(r"\[([#.]{30})\]", buffer)
    return bars[-1].count("#") / 30 if bars else 0.0


@pytest.mark.slow
@pytest.mark.parametrize("kill_at", [0.35, 0.7])
def test_import_killed_midway_leaves_the_store_consistent_and_retryable(
    tmp_path: Path, big_file: Path, complete_counts: dict[str, int], kill_at: float
) -> None:
    db = tmp_path / "store.duckdb"
    with open_store(db) as store:
        store.ingest_file(SMALL)
    before = counts(db)

    # The CLI draws its progress bar only on a terminal: give its stderr a pseudo-terminal.
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        rollscope("import", str(big_file), "--db", str(db)),
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=slave,
    )
    os.close(slave)
    seen = ""
    try:
        while proc.poll() is None and _progress_fraction(seen) < kill_at:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    seen += os.read(master, 65536).decode(errors="replace")
                except OSError:
                    break
        assert proc.poll() is None, f"the import finished before it could be killed: {seen!r}"
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    assert proc.returncode == -signal.SIGKILL
    assert _progress_fraction(seen) >= kill_at

    after = counts(db)  # reopening works (DuckDB replays or drops the WAL)
    assert after == before, f"partial rows after the kill: {after} (before: {before})"

    result = subprocess.run(
        rollscope("import", str(big_file), "--db", str(db)),
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "rollouts added" in result.stdout and "already imported" not in result.stdout
    assert counts(db) == complete_counts


# ---- a full disk: RLIMIT_FSIZE caps every file the import process writes -------------------------
FULL_DISK = textwrap.dedent(
    """
    import resource, signal, sys
    from trace_store import IngestError, open_store
    store = open_store(sys.argv[1])
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes then fail with EFBIG, as on a full disk
    limit = int(sys.argv[3])
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    try:
        store.ingest_file(sys.argv[2], format=sys.argv[4] if len(sys.argv) > 4 else None)
    except IngestError as exc:
        print("IngestError:", exc)
        raise SystemExit(3)
    print("imported")
    """
)


@pytest.mark.parametrize(
    ("source", "fmt"),
    [("big", None), ("chat", "chat_completions")],
    ids=["canonical-commit", "converter-tempfile"],
)
def test_a_full_disk_gives_a_clear_error_and_leaves_the_store_intact(
    tmp_path: Path, big_file: Path, source: str, fmt: str | None
) -> None:
    db = tmp_path / "store.duckdb"
    with open_store(db) as store:
        store.ingest_file(SMALL)
    before = counts(db)
    size = db.stat().st_size
    path = big_file
    if source == "chat":
        path = tmp_path / "chat.jsonl"
        line = (DATA / "importers" / "openai" / "chat_typical.jsonl").read_text().splitlines()[0]
        path.write_text("\n".join(line.replace('"conv-001"', f'"conv-{i}"') for i in range(5000)))
    args = [sys.executable, "-c", FULL_DISK, str(db), str(path), str(size + 300_000)]
    result = subprocess.run(
        args + ([fmt] if fmt else []), cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert result.returncode == 3, (result.stdout, result.stderr)
    assert "the disk is full" in result.stdout, result.stdout
    assert "Traceback" not in result.stdout + result.stderr
    assert counts(db) == before
    with open_store(db) as store:
        assert store.ingest_file(path, format=fmt).rollouts_added > 0


# ---- unreadable files through the command line ---------------------------------------------------
def test_the_cli_names_an_unreadable_file_and_goes_on(tmp_path: Path) -> None:
    db = tmp_path / "store.duckdb"
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)  # a reader would block forever
    dangling = tmp_path / "moved.jsonl"
    dangling.symlink_to(tmp_path / "elsewhere.jsonl")
    folder = tmp_path / "folder.jsonl"
    folder.mkdir()
    result = subprocess.run(
        rollscope("import", str(fifo), str(dangling), str(folder), str(SMALL), "--db", str(db)),
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,  # a guard against the hang this test is about, not a timing assertion
    )
    assert result.returncode == 1
    errors = result.stderr
    assert "pipe.jsonl: not a regular file or folder" in errors
    assert "moved.jsonl: no such file" in errors
    assert "folder.jsonl: cannot tell which format" in errors
    assert "Traceback" not in errors
    assert "rollouts_small.jsonl (canonical)" in result.stdout
    assert counts(db)["rollouts"] > 0
