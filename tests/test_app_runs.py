"""The Runs screen under Streamlit's AppTest, on a real store file."""

from __future__ import annotations

import re
import shutil
import tomllib
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from trace_store import open_store

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"

GOOD = DATA / "app" / "two_rollouts.jsonl"
BAD = DATA / "app" / "bad_reward.jsonl"
TIMEOUT = 600  # AppTest needs a bound; generous, this is not a timing test


def upload(path: Path, name: str | None = None) -> tuple[str, bytes, str]:
    return (name or path.name, path.read_bytes(), "application/octet-stream")


def open_app(db: Path, monkeypatch: pytest.MonkeyPatch, app: Path = ROOT / "app.py") -> AppTest:
    monkeypatch.setenv("ROLLSCOPE_DB", str(db))
    at = AppTest.from_file(str(app), default_timeout=TIMEOUT).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def uploader(at: AppTest):
    [found] = [u for u in at.file_uploader if u.label == "Trace files"]
    return found


def button(at: AppTest, label: str):
    [found] = [b for b in at.button if b.label == label]
    return found


def run_ids(db: Path) -> list[str]:
    with open_store(db) as store:
        return sorted(store.list_runs()["run_id"])


def texts(elements) -> list[str]:
    """The elements' text as a user reads it (Markdown escapes removed)."""
    return [re.sub(r"\\(.)", r"\1", e.value) for e in elements]


def test_empty_store_explains_and_offers_the_demo(store_path, monkeypatch):
    at = open_app(store_path, monkeypatch)

    assert at.title[0].value == "Runs"
    assert "store is empty" in at.info[0].value
    assert [b.label for b in at.button] == ["Load the demo run"]
    assert len(at.dataframe) == 0
    sidebar = " ".join(texts(at.sidebar.caption))
    assert "0 runs" in sidebar
    assert str(store_path) in sidebar


def test_loading_the_demo_fills_the_runs_table(store_path, monkeypatch):
    at = open_app(store_path, monkeypatch)

    at.button[0].click().run()

    assert not at.exception, texts(at.exception)
    assert not at.error, texts(at.error)
    table = at.dataframe[0].value
    assert len(table) >= 2, table
    assert {"baseline", "train"} <= set(table["kind"])
    assert (table["rollouts"] > 0).all()
    assert table["mean reward"].between(0, 1).all()
    assert "demo run" in texts(at.success)[0]
    assert not [b for b in at.button if b.label == "Load the demo run"]
    # A fresh session (a teammate opening the app) sees the runs in the sidebar count.
    again = open_app(store_path, monkeypatch)
    assert f"{len(table)} runs" in " ".join(texts(again.sidebar.caption))


def test_upload_of_a_good_and_a_bad_file_reports_each(store_path, monkeypatch):
    at = open_app(store_path, monkeypatch)

    uploader(at).set_value([upload(GOOD), upload(BAD)]).run()
    # Each file is listed with its detected format before anything is imported.
    assert texts(at.text)[0::2] == ["two_rollouts.jsonl", "bad_reward.jsonl"]
    assert [s.value for s in at.selectbox] == ["canonical", "canonical"]
    assert run_ids(store_path) == []

    button(at, "Import 2 files").click().run()

    assert not at.exception, texts(at.exception)
    [ok] = texts(at.success)
    assert "two_rollouts.jsonl" in ok and "2 rollouts and 6 events added" in ok
    [failed] = texts(at.error)
    assert "bad_reward.jsonl line 2" in failed and "reward" in failed and "high" in failed
    assert "Traceback" not in failed
    # The bad file changed nothing; the good one is in the table.
    assert run_ids(store_path) == ["upload-run"]
    table = at.dataframe[0].value
    assert list(table["name"]) == ["Uploaded run"]
    assert list(table["rollouts"]) == [2]
    assert list(table["steps"]) == ["0–1 (2 steps)"]
    # The uploader was emptied so the files are not imported twice by accident.
    assert not uploader(at).value


def test_uploading_the_same_file_again_says_nothing_changed(store_path, monkeypatch):
    at = open_app(store_path, monkeypatch)
    for _ in range(2):
        uploader(at).set_value([upload(GOOD)]).run()
        button(at, "Import 1 file").click().run()

    assert "already imported; nothing changed" in texts(at.success)[0]
    assert list(at.dataframe[0].value["rollouts"]) == [2]


def test_an_unrecognised_file_asks_for_a_format_and_fails_clearly(
    store_path, tmp_path, monkeypatch
):
    odd = tmp_path / "notes.json"
    odd.write_text('{"hello": "world"}\n')
    at = open_app(store_path, monkeypatch)

    uploader(at).set_value([upload(odd)]).run()
    assert at.selectbox[0].value is None
    button(at, "Import 1 file").click().run()

    assert not at.exception
    [failed] = texts(at.error)
    assert "notes.json" in failed and "Unknown format" in failed
    assert run_ids(store_path) == []


def test_a_chosen_format_overrides_detection(store_path, monkeypatch):
    at = open_app(store_path, monkeypatch)
    uploader(at).set_value([upload(GOOD)]).run()

    at.selectbox[0].set_value("responses")
    button(at, "Import 1 file").click().run()

    # The file was read by the chosen importer, not the detected one.
    [ok] = texts(at.success)
    assert "two_rollouts.jsonl (as responses)" in ok


def app_with_screens(tmp_path: Path, *screens: str) -> Path:
    """A copy of the app where only `screens` (besides Runs) exist, each a stub page."""
    app_dir = tmp_path / "app"
    (app_dir / "pages").mkdir(parents=True)
    shutil.copy(ROOT / "app.py", app_dir / "app.py")
    shutil.copy(ROOT / "pages" / "runs.py", app_dir / "pages" / "runs.py")
    for name in screens:
        (app_dir / "pages" / f"{name}.py").write_text(
            f"import streamlit as st\nst.title({name!r})\n"
            "st.text(repr(st.query_params.to_dict()))\n"
        )
    return app_dir / "app.py"


def links(at: AppTest) -> dict[str, tuple[bool, str]]:
    """Page link label -> (enabled, query string)."""
    return {p.value: (not p.proto.disabled, p.proto.query_string) for p in at.page_link}


def test_selected_runs_open_in_each_screen_that_exists(store_path, tmp_path, monkeypatch):
    # Only the screens whose script exists are registered and offered.
    app = app_with_screens(tmp_path, "rewards", "rollouts")
    with open_store(store_path) as store:
        store.ingest_file(GOOD)
        store.ingest_records(
            [{"run_id": "second", "rollout_id": "x", "step": 0, "reward": 0.5}],
            display_name="second.jsonl",
        )

    at = open_app(store_path, monkeypatch, app)
    assert links(at) == {"Rewards": (False, ""), "Rollouts": (False, "")}
    assert "Select runs in the table" in at.caption[0].value

    at.query_params["runs"] = ["upload-run", "second"]
    at.run()
    # Rewards overlays several runs; the rollout list needs exactly one.
    assert links(at) == {
        "Rewards": (True, "runs=second&runs=upload-run"),  # in table order: newest first
        "Rollouts": (False, ""),
    }

    at.query_params["runs"] = "second"
    at.run()
    assert links(at) == {"Rewards": (True, "runs=second"), "Rollouts": (True, "run=second")}
    at.switch_page("pages/rewards.py").run()
    assert at.title[0].value == "rewards"


def test_a_stale_run_in_the_runs_link_warns(store_path, monkeypatch):
    with open_store(store_path) as store:
        store.ingest_file(GOOD)
    monkeypatch.setenv("ROLLSCOPE_DB", str(store_path))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    at.query_params["runs"] = "deleted-run"
    at.run()

    assert not at.exception
    [warning] = texts(at.warning)
    assert "deleted-run" in warning and "not one of upload-run" in warning
    assert at.query_params.get("runs") is None  # the URL now says what is shown: nothing selected


def test_the_upload_limit_is_raised_for_streamlit_run_and_for_serve():
    from rollscope import cli

    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert config["server"]["maxUploadSize"] == cli.DEFAULT_UPLOAD_LIMIT_MB >= 10240
