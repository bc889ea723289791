"""The Runs screen's table: one row a run, with a link per screen that can show it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pandas as pd
import streamlit as st

from rollscope.ui.navigation import PageSpec

LinkFor = Callable[[PageSpec, str], str]


def _steps(row: pd.Series) -> str:
    lo, hi, n = row.get("min_step"), row.get("max_step"), row.get("steps")
    if pd.isna(lo) or pd.isna(hi):
        return "—"
    if lo == hi:
        return f"{int(lo)}"
    count = f" ({int(n)} steps)" if pd.notna(n) else ""
    return f"{int(lo)}–{int(hi)}{count}"


def runs_table(
    runs: pd.DataFrame, views: Sequence[PageSpec], link_for: LinkFor
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The frame and ``column_config`` for ``st.dataframe``: run facts, then one link column
    per screen in `views` (its URL from ``link_for(view, run_id)``)."""
    table = pd.DataFrame(
        {
            "name": runs["name"].fillna(runs["run_id"]).astype(str),
            "kind": runs["kind"].fillna("").astype(str),
            "rollouts": runs["rollouts"].astype("int64"),
            "steps": runs.apply(_steps, axis=1) if len(runs) else pd.Series(dtype=str),
            "mean reward": pd.to_numeric(runs["mean_reward"], errors="coerce"),
            "last import": pd.to_datetime(runs["last_import"]),
            "run id": runs["run_id"].astype(str),
        }
    )
    config: dict[str, Any] = {
        "name": st.column_config.TextColumn("Run"),
        "kind": st.column_config.TextColumn("Kind"),
        "rollouts": st.column_config.NumberColumn("Rollouts", format="localized"),
        "steps": st.column_config.TextColumn("Steps"),
        "mean reward": st.column_config.NumberColumn("Mean reward", format="%.3f"),
        "last import": st.column_config.DatetimeColumn("Last import", format="YYYY-MM-DD HH:mm"),
        "run id": st.column_config.TextColumn("Run id"),
    }
    for view in views:
        column = f"view:{view.url_path}"
        table[column] = [link_for(view, run_id) for run_id in runs["run_id"].astype(str)]
        config[column] = st.column_config.LinkColumn(view.title, display_text=f"{view.title} ↗")
    return table, config
