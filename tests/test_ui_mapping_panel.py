"""The Runs page's field-mapping panel under Streamlit's AppTest, on a real store file."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from trace_store import open_store
from trace_store.ingest.mapping import list_mappings

ROOT = Path(__file__).resolve().parent.parent


def record(index: int) -> dict[str, Any]:
    return {
        "id": f"conv-{index}",
        "messages": [
            {"role": "user", "content": f"2+{index}?"},
            {"role": "assistant", "content": str(2 + index)},
        ],
        "score": 1.0 if index % 2 else 0.0,
        "meta": {"round": index},
    }


def texts(elements: Any) -> list[str]:
    return [re.sub(r"\\(.)", r"\1", e.value) for e in elements]


def mapping_uploader(at: AppTest) -> Any:
    [found] = [u for u in at.file_uploader if (u.key or "").startswith("runs.mapping.upload")]
    return found


def test_map_preview_save_and_import(store_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROLLSCOPE_DB", str(store_path))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=600).run()
    assert not at.exception
    body = "".join(json.dumps(record(i)) + "\n" for i in range(8)).encode()
    mapping_uploader(at).set_value([("odd_logs.jsonl", body, "application/octet-stream")]).run()
    assert not at.exception, texts(at.exception)
    # suggested from the first record
    assert at.text_input(key="runs.mapping.rollout_id").value == "$.id"
    assert at.text_input(key="runs.mapping.messages").value == "$.messages"
    assert at.text_input(key="runs.mapping.reward").value == "$.score"
    preview = at.dataframe[-1].value
    assert preview["rollout_id"].tolist() == [f"conv-{i}" for i in range(5)]
    # a path that does not exist: the error names the line and the path
    at.text_input(key="runs.mapping.step").input("$.meta.step").run()
    assert "line 1" in " ".join(texts(at.error)) and "$.meta.step" in " ".join(texts(at.error))
    at.text_input(key="runs.mapping.step").input("$.meta.round").run()
    assert not at.error
    at.text_input(key="runs.mapping.name").input("odd logs").run()
    at.button(key="runs.mapping.save").click().run()
    with open_store(store_path) as store:
        assert list_mappings(store)["name"].tolist() == ["odd logs"]
    at.button(key="runs.mapping.import").click().run()
    assert not at.exception and not at.error, texts(at.error)
    assert "8 rollouts" in " ".join(texts(at.success))
    with open_store(store_path) as store:
        rows = store.query_df("SELECT run_id, step, reward FROM rollouts ORDER BY step")
        assert rows["run_id"].unique().tolist() == ["odd_logs"]
        assert rows["step"].tolist() == list(range(8))
