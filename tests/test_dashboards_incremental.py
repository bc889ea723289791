"""The dashboards' summaries after each import or deletion recompute only the marked steps, and
every screen's query then answers exactly what a from-scratch computation answers.

The from-scratch answer is the same store after a forced full rebuild of its summaries.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from trace_store import dashboards as d
from trace_store import open_store


def _rollout(run: str, rid: str, step: int, reward: float, calls: int, **extra: Any) -> dict:
    items: list[dict[str, Any]] = [{"type": "message", "role": "user", "content": f"task {rid}"}]
    for n in range(calls):
        call_id = f"{rid}-c{n}"
        items.append({"type": "function_call", "call_id": call_id, "name": f"tool{n % 3}",
                      "arguments": "{}"})  # fmt: skip
        output: dict[str, Any] = {"type": "function_call_output", "call_id": call_id,
                                  "output": "ok", "duration_ms": 10.0 * (n + 1) * (step + 1)}  # fmt: skip
        if n == 2:
            output["error"] = "failed"
        items.append(output)
    items.append({"type": "message", "role": "assistant", "content": "done"})
    return {
        "run_id": run,
        "rollout_id": rid,
        "step": step,
        "prompt_id": f"p{int(rid[-1]) % 2}",
        "split": "eval" if rid.endswith("9") else "train",
        "reward": reward,
        "grades": {"tests": reward, "format": 1.0},
        "latency_ms": 1000.0 * (calls + 1),
        "usage": {"output_tokens": 100 * (calls + 1)},
        "items": items,
        **extra,
    }


def _write(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _screens(store) -> dict[str, Any]:
    runs = store.list_runs()["run_id"].tolist()
    ranges = [(0, 1), (2, 9)]
    return {
        "reward_by_step": d.reward_by_step(store, runs),
        "reward_by_step_train": d.reward_by_step(store, runs, split="train", steps=(1, 3)),
        "grader_by_step": d.grader_by_step(store, runs),
        "graders": d.graders(store, runs),
        "prompt_spread_by_step": d.prompt_spread_by_step(store, runs),
        "tool_calls_by_step": d.tool_calls_by_step(store, runs),
        "tool_calls_histogram": d.tool_calls_histogram(store, runs, ranges),
        "reward_by_tool_calls": d.reward_by_tool_calls(store, runs),
        "budget_by_step": d.budget_by_step(store, runs, 2),
        "budget_reward": d.budget_reward(store, runs, 2),
        "tool_usage": d.tool_usage(store, runs),
        "tool_share_by_step": d.tool_share_by_step(store, runs),
        "tool_latency": d.tool_latency(store, runs),
        "tool_latency_steps": d.tool_latency(store, runs, steps=(1, 2)),
        "latency_by_step": d.latency_by_step(store, runs),
        "latency_ccdf": d.latency_ccdf(store, runs, ranges),
        "slowest_rollouts": d.slowest_rollouts(store, runs),
        "tokens_by_step": d.tokens_by_step(store, runs),
        "run_splits": d.run_splits(store, runs),
    }


def _assert_same(got: dict[str, Any], expected: dict[str, Any], after: str) -> None:
    for name, frame in expected.items():
        if isinstance(frame, pd.DataFrame):
            pd.testing.assert_frame_equal(
                got[name].reset_index(drop=True),
                frame.reset_index(drop=True),
                check_dtype=False,
                obj=f"{name} after {after}",
            )
        else:
            assert got[name] == frame, f"{name} after {after}"


@pytest.fixture
def full_rebuilds(monkeypatch) -> list[int]:
    """Counts the refreshes that rebuilt everything."""
    calls: list[int] = []
    rebuild_all = d._rebuild_all

    def counted(tx):
        calls.append(1)
        rebuild_all(tx)

    monkeypatch.setattr(d, "_rebuild_all", counted)
    return calls


def test_each_change_recomputes_only_its_steps_and_matches_a_full_computation(
    tmp_path, full_rebuilds
):
    db = tmp_path / "store.duckdb"

    def check(after: str, change) -> None:
        with open_store(db) as store:
            change(store)
            rebuilt_before = len(full_rebuilds)
            got = _screens(store)  # brings the summaries up to date first
            if after != "the first import":
                assert len(full_rebuilds) == rebuilt_before, f"a full rebuild after {after}"
            d.refresh_summaries(store, force=True)  # from scratch
            _assert_same(got, _screens(store), after)

    first = [
        _rollout("A", f"a{s}{n}", s, 0.1 * n + 0.1 * s, n % 4) for s in (0, 1) for n in range(5)
    ]
    check("the first import", lambda s: s.ingest_file(_write(tmp_path / "1.jsonl", first)))

    # A later step with a new best reward: the earlier steps' full-reward share drops to 0.
    later = [_rollout("A", f"a2{n}", 2, 0.9 + 0.05 * n, 5 - n) for n in range(3)]
    check(
        "a new step with a new best", lambda s: s.ingest_file(_write(tmp_path / "2.jsonl", later))
    )

    # Built while the best is 1.0: its own best (0.6) is below that.
    step3 = [_rollout("A", f"a3{n}", 3, 0.3 * n, n + 1) for n in range(3)]
    check("a step under the best", lambda s: s.ingest_file(_write(tmp_path / "2b.jsonl", step3)))

    other = [_rollout("B", f"b0{n}", 0, 0.5, n) for n in range(4)]
    check("a second run", lambda s: s.ingest_file(_write(tmp_path / "3.jsonl", other)))

    # A regrade lowers run A's best to step 3's: steps built with the old best are recomputed.
    regrade = [
        {"run_id": "A", "rollout_id": f"a2{n}", "reward": 0.2, "grades": {"tests": 0.2}}
        for n in range(3)
    ]
    check(
        "a regrade below the best", lambda s: s.ingest_file(_write(tmp_path / "4.jsonl", regrade))
    )

    # A rollout moved to another step: both steps change.
    moved = [{"run_id": "A", "rollout_id": "a03", "step": 2}]
    check(
        "a rollout moved between steps",
        lambda s: s.ingest_file(_write(tmp_path / "5.jsonl", moved)),
    )

    check("deleting a run", lambda s: s.delete_run("B"))

    with open_store(db) as store:
        assert not d.refresh_summaries(store), "nothing changed: nothing to recompute"


def test_a_change_no_writer_marked_rebuilds_everything(tmp_path):
    db = tmp_path / "store.duckdb"
    with open_store(db) as store:
        store.ingest_file(_write(tmp_path / "1.jsonl", [_rollout("A", "a01", 0, 0.5, 2)]))
        assert d.refresh_summaries(store)
        with store.transaction() as tx:  # a writer that forgot to mark its change
            tx.execute("DELETE FROM rollouts WHERE rollout_id = 'a01'")
        assert d.refresh_summaries(store)
        assert d.reward_by_step(store, ["A"]).empty
