"""Deleting runs from the Runs screen: a two-step confirmation, for allowed users only."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import streamlit as st

from rollscope.ui import access, navigation, render, store_access
from trace_store import Store

_ASKING = "runs.delete.asking"  # the run ids a confirmation is shown for
_DONE = "runs.delete.done"  # the outcome of the last deletion, shown after the rerun


def _names(runs: pd.DataFrame, run_ids: Sequence[str]) -> dict[str, tuple[str, int]]:
    """run id -> (name, rollouts)."""
    found: dict[str, tuple[str, int]] = {}
    for row in runs.itertuples(index=False):
        run_id = str(row.run_id)
        if run_id in run_ids:
            name = row.name if isinstance(row.name, str) and row.name else run_id
            found[run_id] = (name, int(row.rollouts))
    return found


def delete_control(store: Store, runs: pd.DataFrame, chosen: Sequence[str]) -> None:
    """Under the runs table: delete the selected runs, after an explicit second click."""
    done = st.session_state.pop(_DONE, None)
    if done:
        st.success(render.escape_markdown(done), icon=":material/delete:")
    selected = _names(runs, chosen)
    if not selected:
        st.session_state.pop(_ASKING, None)
        return
    if not access.can_modify():
        return
    asking = st.session_state.get(_ASKING)
    if asking != sorted(selected):
        count = len(selected)
        label = f"Delete {count} selected run{'s' if count > 1 else ''}…"
        if st.button(label, icon=":material/delete:", key="runs.delete.ask"):
            st.session_state[_ASKING] = sorted(selected)
            st.rerun()
        return
    rollouts = sum(n for _, n in selected.values())
    with st.container(border=True):
        st.warning(
            f"Delete {len(selected)} run{'s' if len(selected) > 1 else ''} and every rollout, "
            f"event, grade and flag of {'them' if len(selected) > 1 else 'it'} "
            f"({rollouts:,} rollouts)? This cannot be undone.",
            icon=":material/warning:",
        )
        for run_id, (name, count) in selected.items():
            st.text(f"{name}  ({run_id}, {count:,} rollouts)")
        yes, no = st.columns(2)
        confirmed = yes.button("Yes, delete", type="primary", key="runs.delete.yes")
        cancelled = no.button("Cancel", key="runs.delete.no")
    if cancelled:
        st.session_state.pop(_ASKING, None)
        st.rerun()
    if confirmed:
        st.session_state.pop(_ASKING, None)
        removed = 0
        try:
            for run_id in selected:
                removed += store.delete_run(run_id)
        except Exception as exc:
            render.show_error(exc, context="Deleting runs")
            return
        finally:
            store_access.after_import()
        names = ", ".join(name for name, _ in selected.values())
        st.session_state[_DONE] = f"Deleted {names} ({removed:,} rollouts)."
        # Forget the selection (URL, the table's widget state, the value shared across screens).
        st.query_params.pop("runs", None)
        for key in (f"w.{navigation.current_url_path()}.runs", "view.runs"):
            st.session_state.pop(key, None)
        st.rerun()
