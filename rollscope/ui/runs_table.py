"""The Runs screen's table: one row a run; the selected runs open in the other screens."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd
import streamlit as st

from rollscope.ui.navigation import PageSpec


def _steps(row: pd.Series) -> str:
    lo, hi, n = row.get("min_step"), row.get("max_step"), row.get("steps")
    if pd.isna(lo) or pd.isna(hi):
        return "—"
    if lo == hi:
        return f"{int(lo)}"
    count = f" ({int(n)} steps)" if pd.notna(n) else ""
    return f"{int(lo)}–{int(hi)}{count}"


def runs_table(runs: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The frame and ``column_config`` for ``st.dataframe``: one row a run, in `runs` order."""
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
    return table, config


def run_links(views: Sequence[PageSpec], chosen: Sequence[str]) -> None:
    """A link per screen that opens the chosen runs there (same tab, parameters in its URL).

    A screen that reads several runs (``runs``) gets all of them, overlaid; one that reads a
    single run (``run``) needs exactly one chosen.
    """
    if not chosen:
        st.caption(
            "Select runs in the table to open them in another screen; select several to "
            "compare them."
        )
    with st.container(horizontal=True, gap="small"):
        for view in views:
            if not view.run_param:
                continue
            several = view.run_param == "runs"
            usable = bool(chosen) and (several or len(chosen) == 1)
            params: dict[str, str | list[str]] = (
                {view.run_param: list(chosen) if several else chosen[0]} if usable else {}
            )
            st.page_link(
                view.script,
                label=view.title,
                icon=view.icon,
                query_params=params or None,
                disabled=not usable,
                help=None if usable else ("Select one run" if not several else "Select runs"),
            )
