"""After `rollscope import`: the dashboards' summaries are current and the audit rules marked
"run after every import" have flagged the imported runs."""

from __future__ import annotations

import json

from rollscope.cli import main
from trace_store import open_store, summary_state
from trace_store.audit import UserRule, save_rule


def _file(path, run_id: str, rewards: list[float]):
    path.write_text(
        "".join(
            json.dumps({"run_id": run_id, "rollout_id": f"r{n}", "step": n, "reward": reward,
                        "items": [{"type": "message", "role": "user", "content": "hi"}]}) + "\n"
            for n, reward in enumerate(rewards)
        )
    )  # fmt: skip
    return path


def test_cli_import_leaves_current_summaries_and_runs_on_import_rules(tmp_path, capsys):
    db = tmp_path / "store.duckdb"
    assert main(["import", "--db", str(db), str(_file(tmp_path / "a.jsonl", "A", [0.5]))]) == 0
    with open_store(db) as store:
        assert summary_state.is_current(store.cursor())
        save_rule(store, UserRule("perfect", "sql", "reward >= 1", on_import=True))

    second = _file(tmp_path / "b.jsonl", "B", [1.0, 0.2, 1.0])
    assert main(["import", "--db", str(db), str(second)]) == 0
    assert "audit rule 'perfect' flagged 2 rollouts" in capsys.readouterr().out
    with open_store(db) as store:
        assert summary_state.is_current(store.cursor())
        flags = store.query_df("SELECT run_id, rollout_id FROM flags ORDER BY rollout_id")
    assert flags.values.tolist() == [["B", "r0"], ["B", "r2"]]
