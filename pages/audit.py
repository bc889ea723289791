"""Audit: reward-hacking flags, RFT diagnostics, user rules and the LLM judge for one run."""

from __future__ import annotations

import streamlit as st

from rollscope.ui import audit_panels, render, store_access, view_state

st.title("Audit")
store = store_access.get_store()
runs = store_access.list_runs()
if runs.empty:
    st.info("No runs yet: import a trace export (or load the demo) on the Runs page.")
    st.stop()

run_id = audit_panels.run_choice(runs)
view = audit_panels.view_choice()

try:
    if view == "flags":
        audit_panels.flags_panel(store, run_id)
    elif view == "diagnostics":
        audit_panels.diagnostics_panel(store, run_id, runs)
    elif view == "rules":
        audit_panels.rules_panel(store)
    else:
        audit_panels.judge_panel(store, run_id)
except Exception as exc:  # Streamlit's rerun/stop are BaseExceptions and pass through
    render.show_error(exc, context=audit_panels.VIEWS[view])

view_state.copy_link()
