"""Store backends: the ROLLSCOPE_DB syntax, the embedded file's one-writer rule, and a shared
DuckLake with concurrent writer processes and a reader that must always see a consistent snapshot.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from store_backends import PgCluster

from trace_store import open_store
from trace_store.backends import ducklake_ddl, parse_target
from trace_store.demo import iter_demo_records
from trace_store.errors import StoreLocked, TraceStoreError

ROOT = Path(__file__).resolve().parent.parent


def write_run(path: Path, run_id: str, *, steps: int = 3, prompts: int = 8) -> int:
    """A canonical file of one run (demo rollouts re-keyed); returns its rollouts."""
    count = 0
    with path.open("w") as out:
        for record in iter_demo_records(steps=steps, prompts=prompts, samples=4):
            if record["run_id"] != "demo-train":
                continue
            record["run_id"] = run_id
            record["run_name"] = run_id
            out.write(json.dumps(record) + "\n")
            count += 1
    return count


def python(code: str, *args: str, **kwargs: object) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("ROLLSCOPE_DB", None)
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        env=env,
        text=True,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        **kwargs,  # type: ignore[arg-type]
    )


# -- the setting -----------------------------------------------------------------------------
def test_a_path_is_the_embedded_file(tmp_path):
    target = parse_target(str(tmp_path / "x.duckdb"))
    assert (target.kind, target.path) == ("duckdb", tmp_path / "x.duckdb")


def test_a_ducklake_setting_names_catalog_and_data_path_and_hides_passwords():
    target = parse_target(
        "ducklake:postgres:dbname=rs host=db password=s3cret DATA_PATH s3://bucket/rollscope/"
    )
    assert target.is_ducklake
    assert target.catalog == "postgres:dbname=rs host=db password=s3cret"
    assert target.data_path == "s3://bucket/rollscope/"
    assert "s3cret" not in target.describe()
    assert parse_target("DuckLake:meta.ducklake").data_path is None
    with pytest.raises(TraceStoreError, match="needs its catalog"):
        parse_target("ducklake: DATA_PATH /tmp/x")


def test_migrations_translate_for_ducklake():
    sql = ducklake_ddl(
        "CREATE TABLE a (id VARCHAR PRIMARY KEY, b INT);"
        " CREATE TABLE m (r VARCHAR, s INT, PRIMARY KEY (r, s));"
        " CREATE SEQUENCE import_ids START 1; CREATE UNIQUE INDEX ix ON a (b);"
    )
    assert "PRIMARY" not in sql and "SEQUENCE" not in sql and "INDEX" not in sql
    assert "CREATE TABLE import_id_counter (value BIGINT NOT NULL)" in sql


def test_the_backend_option_decides_what_a_store_path_opens(tmp_path, request):
    with open_store(tmp_path / "which.duckdb") as store:
        assert store.ducklake == (request.config.getoption("--backend") == "ducklake")
        assert store.data_version() == store.data_version()
        before = store.data_version()
        store.ingest_file(ROOT / "tests" / "data" / "canonical" / "rollouts_small.jsonl")
        assert store.data_version() != before


# -- the embedded file: one writing process ----------------------------------------------------
HOLDER = """
    import sys
    from trace_store import open_store
    store = open_store(sys.argv[1])
    print("open", flush=True)
    sys.stdin.read()
    store.close()
"""


@pytest.mark.embedded_only
def test_a_second_process_is_refused_clearly_while_the_app_holds_the_file(tmp_path):
    path = tmp_path / "held.duckdb"
    holder = python(HOLDER, str(path))
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "open"
        with pytest.raises(StoreLocked, match="open for writing in another process"):
            open_store(path)
        cli = subprocess.run(
            [sys.executable, "-m", "rollscope.cli", "import", "--db", str(path),
             str(ROOT / "tests" / "data" / "canonical" / "rollouts_small.jsonl")],
            capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)},
        )  # fmt: skip
        assert cli.returncode != 0
        assert "open for writing in another process" in cli.stderr
        assert "Traceback" not in cli.stderr
    finally:
        holder.communicate("")
    with open_store(path) as store:  # released: writable again
        assert store.is_empty()


# -- DuckLake: concurrent writers, consistent readers -----------------------------------------
WRITER = """
    import sys
    from trace_store import open_store
    lake, file = sys.argv[1], sys.argv[2]
    store = open_store(lake)
    print("ready", flush=True)
    sys.stdin.readline()
    result = store.ingest_file(file)
    print(result.rollouts_added, result.events_added, flush=True)
    store.close()
"""

READER = """
    import json, sys
    from trace_store import open_store
    store = open_store(sys.argv[1], read_only=True)
    cur = store.cursor()
    print("ready", flush=True)
    seen = []
    while True:
        cur.execute("BEGIN TRANSACTION")
        row = cur.execute(
            "SELECT (SELECT count(*) FROM rollouts), (SELECT coalesce(sum(n_events), 0) FROM rollouts),"
            " (SELECT count(*) FROM events), (SELECT count(*) FROM imports),"
            " (SELECT coalesce(sum(rollouts_added), 0) FROM imports)"
        ).fetchone()
        cur.execute("COMMIT")
        seen.append([int(v) for v in row])
        if row[3] >= 2:
            break
    print(json.dumps(seen), flush=True)
"""


def test_two_writer_processes_and_a_reader_share_one_ducklake(pg_cluster: PgCluster, tmp_path):
    lake = pg_cluster.lake("concurrency", tmp_path / "lake-data")
    with open_store(lake) as store:  # create and migrate once
        assert store.ducklake and store.is_empty()
    files = [tmp_path / "run-a.jsonl", tmp_path / "run-b.jsonl"]
    sizes = [write_run(files[0], "run-a", steps=4), write_run(files[1], "run-b", steps=3)]

    reader = python(READER, lake)
    writers = [python(WRITER, lake, str(f)) for f in files]
    try:
        added = _run_writers(reader, writers, sizes)
    finally:
        for proc in (reader, *writers):
            if proc.poll() is None:
                proc.kill()
                proc.wait()

    with open_store(lake) as store:
        cur = store.cursor()
        assert cur.execute("SELECT count(*) FROM rollouts").fetchone()[0] == sum(sizes)
        assert cur.execute("SELECT count(*) FROM events").fetchone()[0] == sum(a[1] for a in added)
        ids = [r[0] for r in cur.execute("SELECT import_id FROM imports ORDER BY 1").fetchall()]
        assert len(ids) == 2 and len(set(ids)) == 2
        runs = store.list_runs()
        assert sorted(runs["run_id"]) == ["run-a", "run-b"]
        assert dict(zip(runs["run_id"], runs["rollouts"], strict=True)) == {
            "run-a": sizes[0],
            "run-b": sizes[1],
        }


def _run_writers(
    reader: subprocess.Popen[str], writers: list[subprocess.Popen[str]], sizes: list[int]
) -> list[tuple[int, ...]]:
    for proc in (reader, *writers):
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        assert line == "ready", proc.stderr.read() if proc.stderr else line
    for proc in writers:  # both start importing at once
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    outputs = [proc.communicate() for proc in writers]
    for (_, err), proc in zip(outputs, writers, strict=True):
        assert proc.returncode == 0, err
    added = [tuple(int(v) for v in out.split()) for out, _ in outputs]
    assert [a[0] for a in added] == sizes

    out, err = reader.communicate()
    assert reader.returncode == 0, err
    snapshots = json.loads(out)
    allowed = {0, sizes[0], sizes[1], sum(sizes)}
    for rollouts, n_events, events, imports, imported in snapshots:
        # a snapshot holds whole imports: rollouts, their events and the imports row together
        assert rollouts in allowed
        assert n_events == events
        assert imported == rollouts
        assert imports == {0: 0, sum(sizes): 2}.get(rollouts, 1)
    assert len(snapshots) >= 1
    return added


def test_cached_screens_see_another_processs_import_on_the_next_rerun(
    pg_cluster: PgCluster, tmp_path, monkeypatch
):
    from rollscope.ui import store_access

    lake = pg_cluster.lake("cache", tmp_path / "cache-data")
    monkeypatch.setenv("ROLLSCOPE_DB", lake)
    store_access.after_import()
    try:
        assert store_access.list_runs().empty  # cached: the store is empty
        file = tmp_path / "run-c.jsonl"
        write_run(file, "run-c", steps=1, prompts=2)
        writer = python(WRITER, lake, str(file))
        _, err = writer.communicate("go\n")
        assert writer.returncode == 0, err
        time.sleep(store_access.DATA_VERSION_TTL_S + 0.2)
        assert list(store_access.list_runs()["run_id"]) == ["run-c"]  # no after_import needed
    finally:
        store_access.get_store().close()
        store_access._open.clear()
        store_access.after_import()


# -- moving an embedded store to DuckLake ------------------------------------------------------
@pytest.mark.embedded_only
def test_migrate_store_copies_an_embedded_store_into_a_new_ducklake(demo_store_copy, tmp_path):
    lake = f"ducklake:{tmp_path / 'meta.ducklake'} DATA_PATH {tmp_path / 'lake-data'}"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("ROLLSCOPE_DB", None)
    cli = [sys.executable, "-m", "rollscope.cli", "migrate-store", "--db", str(demo_store_copy)]
    done = subprocess.run([*cli, "--to", lake], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    assert "rollouts:" in done.stdout and "ROLLSCOPE_DB=" in done.stdout

    tables = ("runs", "rollouts", "events", "grades", "imports", "flags")
    with open_store(demo_store_copy) as source, open_store(lake) as target:
        assert target.ducklake
        for table in tables:
            count = f"SELECT count(*) FROM {table}"
            assert (
                target.cursor().execute(count).fetchone()
                == source.cursor().execute(count).fetchone()
            ), table
        columns = ["run_id", "name", "kind", "rollouts", "steps", "mean_reward"]
        assert target.list_runs()[columns].equals(source.list_runs()[columns])
        order = "ORDER BY run_id, rollout_id, seq"
        events = (
            f"SELECT run_id, rollout_id, seq, turn, kind, text, duration_ms FROM events {order}"
        )
        assert target.query_df(events).equals(source.query_df(events))
        # the copy is a working store: a new import gets the next import id
        before = int(target.list_imports()["import_id"].max())
        target.ingest_file(ROOT / "tests" / "data" / "canonical" / "rollouts_small.jsonl")
        assert int(target.list_imports()["import_id"].max()) == before + 1

    again = subprocess.run([*cli, "--to", lake], capture_output=True, text=True, env=env)
    assert again.returncode != 0 and "not empty" in again.stderr


def test_an_import_lowers_the_memory_limit_only_while_it_runs(tmp_path, monkeypatch):
    seen: list[str] = []
    with open_store(tmp_path / "limit.duckdb") as store:
        before = store.cursor().execute("SELECT current_setting('memory_limit')").fetchone()[0]
        monkeypatch.setenv("ROLLSCOPE_INGEST_MEMORY_LIMIT", "700MB")

        def progress(done: int, total: int) -> None:
            cur = store.cursor()
            seen.append(cur.execute("SELECT current_setting('memory_limit')").fetchone()[0])
            cur.close()

        store.ingest_file(
            ROOT / "tests" / "data" / "canonical" / "rollouts_small.jsonl", progress=progress
        )
        after = store.cursor().execute("SELECT current_setting('memory_limit')").fetchone()[0]
    assert after == before
    assert any(value.startswith("667") or value.startswith("700") for value in seen), seen


def test_files_too_big_for_memory_are_numbered_by_ordinality_with_the_same_results(
    tmp_path, monkeypatch
):
    import trace_store.ingest.canonical as canonical

    good = ROOT / "tests" / "data" / "canonical" / "rollouts_small.jsonl"
    lines = good.read_text().splitlines()
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join([lines[0], lines[1], lines[0]]))  # a rollout id twice
    results = []
    for fits in (True, False):
        monkeypatch.setattr(canonical, "_fits_in_memory", lambda *_, fits=fits: fits)
        with open_store(tmp_path / f"fits-{fits}.duckdb") as store:
            with pytest.raises(Exception, match=r"line 3: .* \(first on line 1\)"):
                store.ingest_file(bad, format="canonical")
            store.ingest_file(good)
            results.append(
                store.query_df(
                    "SELECT e.*, r.n_turns FROM events e JOIN rollouts r USING (run_id, rollout_id)"
                    " ORDER BY run_id, rollout_id, seq"
                ).drop(columns=["import_id"])
            )
    assert results[0].equals(results[1])
