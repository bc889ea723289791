"""Rollout tables of the dashboards, each row linking to the rollout on the Replay screen."""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from rollscope.ui import navigation, view_state
from rollscope.ui.dashboard_filters import Filters, select_step


def replay_links(rows: pd.DataFrame) -> list[str]:
    return [
        view_state.page_url("replay", [("run", run), ("rollout", rollout)])
        for run, rollout in zip(rows["run_id"], rows["rollout_id"], strict=True)
    ]


def _table(rows: pd.DataFrame, view: Filters, columns: dict[str, Any]) -> None:
    table = rows.copy()
    table.insert(0, "open", replay_links(rows))
    table["run_id"] = [view.names.get(r, r) for r in table["run_id"]]
    config: dict[str, Any] = {
        "open": st.column_config.LinkColumn("Replay", display_text="Replay ↗"),
        "run_id": st.column_config.TextColumn("Run"),
        "rollout_id": st.column_config.TextColumn("Rollout"),
        "reward": st.column_config.NumberColumn("Reward", format="%.3f"),
        "latency_ms": st.column_config.NumberColumn("Latency (s)", format="%.1f"),
        "n_tool_calls": st.column_config.NumberColumn("Tool calls"),
        "n_turns": st.column_config.NumberColumn("Turns"),
        "step": st.column_config.NumberColumn("Step"),
        "split": st.column_config.TextColumn("Split"),
        "prompt_id": st.column_config.TextColumn("Prompt"),
        "status": st.column_config.TextColumn("Status"),
        **columns,
    }
    if "latency_ms" in table:
        table["latency_ms"] = table["latency_ms"] / 1000.0
    st.dataframe(table, column_config=config, hide_index=True, width="stretch")


def step_rollouts_table(view: Filters, step: int, rows: pd.DataFrame) -> None:
    """The rollouts of the selected step, best reward first."""
    head, clear = st.columns([5, 1], vertical_alignment="bottom")
    head.subheader(f"Step {step}: {len(rows):,} rollouts, best reward first")
    if clear.button("Clear", icon=":material/close:", key="rewards.clear_step"):
        select_step(None)
        st.rerun()
    if len(view.run_ids) == 1 and any(s.url_path == "rollouts" for s in navigation.registered()):
        st.link_button(
            "Open this step on the Rollouts screen",
            view_state.page_url(
                "rollouts",
                [
                    ("run", view.run_ids[0]),
                    ("steps", (step, step)),
                    ("sort", "reward"),
                    ("desc", 1),
                ],
            ),
            icon=":material/list:",
        )
    _table(rows, view, {"sample_index": st.column_config.NumberColumn("Sample")})


def slowest_table(view: Filters, rows: pd.DataFrame) -> None:
    _table(rows, view, {})
