"""Deleting a run from the Runs screen: asks first, removes every row of it, allowed users only."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from streamlit.runtime.pages_manager import PagesManager
from streamlit.testing.v1 import AppTest

from rollscope.ui import access
from trace_store import audit, open_store

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT = 600  # AppTest needs a bound; not a timing test


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (access.TOKEN_ENV, access.USER_TOKENS_ENV, access.UPLOADERS_ENV):
        monkeypatch.delenv(name, raising=False)
    # As in test_access.py: every run through app.py, as on a served app.
    original = PagesManager.__init__

    def init(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        original(self, *args, **kwargs)
        PagesManager.uses_pages_directory = False

    monkeypatch.setattr(PagesManager, "__init__", init)


def run_id_counts(db: Path, run_id: str) -> dict[str, int]:
    """Rows of `run_id` in every table that has a run_id column."""
    with open_store(db) as store:
        cur = store.cursor()
        tables = [
            r[0]
            for r in cur.execute(
                "SELECT DISTINCT table_name FROM information_schema.columns"
                " WHERE column_name = 'run_id' AND table_schema = 'main'"
                " AND table_name IN (SELECT table_name FROM information_schema.tables"
                "                    WHERE table_type = 'BASE TABLE')"
            ).fetchall()
        ]
        counts = {}
        for table in tables:
            row = cur.execute(f'SELECT count(*) FROM "{table}" WHERE run_id = ?', [run_id])
            counts[table] = int(row.fetchone()[0])  # type: ignore[index]
        return counts


def buttons(at: AppTest) -> list[str]:
    return [b.label for b in at.button]


def click(at: AppTest, label: str) -> AppTest:
    [button] = [b for b in at.button if b.label == label]
    return button.click().run()


def texts(elements) -> list[str]:  # type: ignore[no-untyped-def]
    return [re.sub(r"\\(.)", r"\1", e.value) for e in elements]


def open_runs(db: Path, monkeypatch: pytest.MonkeyPatch, **params: str) -> AppTest:
    monkeypatch.setenv("ROLLSCOPE_DB", str(db))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    for key, value in params.items():
        at.query_params[key] = value
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_delete_asks_then_removes_every_row_of_the_run(
    demo_store_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with open_store(demo_store_copy) as store:
        audit.run_detectors(store)  # flags, too
    before = run_id_counts(demo_store_copy, "demo-train")
    assert before["rollouts"] > 0 and before["events"] > 0 and before["flags"] > 0
    kept = run_id_counts(demo_store_copy, "demo-baseline")

    at = open_runs(demo_store_copy, monkeypatch, runs="demo-train")
    assert "Delete 1 selected run…" in buttons(at)
    at = click(at, "Delete 1 selected run…")
    assert "This cannot be undone" in at.warning[0].value
    assert f"{before['rollouts']:,} rollouts" in at.warning[0].value
    at = click(at, "Cancel")
    assert "Yes, delete" not in buttons(at)
    assert run_id_counts(demo_store_copy, "demo-train") == before

    at = click(at, "Delete 1 selected run…")
    at = click(at, "Yes, delete")
    assert not at.exception, [e.value for e in at.exception]
    assert any("Deleted" in s and "rollouts" in s for s in texts(at.success))
    assert set(at.dataframe[0].value["run id"]) == {"demo-baseline"}
    assert all(n == 0 for n in run_id_counts(demo_store_copy, "demo-train").values())
    assert run_id_counts(demo_store_copy, "demo-baseline") == kept


def test_without_a_selection_there_is_no_delete_button(
    demo_store_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = open_runs(demo_store_path, monkeypatch)
    assert not [b for b in buttons(at) if b.startswith("Delete")]


def test_only_listed_users_may_delete_or_upload(
    demo_store_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(access.USER_TOKENS_ENV, "alice=tok-a,bob=tok-b")
    monkeypatch.setenv(access.UPLOADERS_ENV, "alice")

    bob = open_runs(demo_store_path, monkeypatch, token="tok-b", runs="demo-train")
    assert [t.value for t in bob.title] == ["Runs"]
    assert not [b for b in buttons(bob) if b.startswith("Delete")]
    assert not bob.get("file_uploader")
    assert any("limited to the users listed in ROLLSCOPE_UPLOADERS" in i for i in texts(bob.info))

    alice = open_runs(demo_store_path, monkeypatch, token="tok-a", runs="demo-train")
    assert "Delete 1 selected run…" in buttons(alice)
    assert alice.get("file_uploader")
