"""Audit: reward-hacking flags, RFT diagnostics, user rules and the LLM judge for one run."""

from __future__ import annotations

import streamlit as st

from rollscope.ui import audit_panels, store_access, view_state

st.title("Audit")
store = store_access.get_store()
runs = store_access.list_runs()
if runs.empty:
    st.info("No runs yet: import a trace export (or load the demo) on the Runs page.")
    st.stop()

run_id = audit_panels.run_choice(runs)
view = audit_panels.view_choice()

if view == "flags":
    audit_panels.flags_panel(store, run_id)
elif view == "diagnostics":
    audit_panels.diagnostics_panel(store, run_id, runs)
elif view == "rules":
    audit_panels.rules_panel(store)
else:
    audit_panels.judge_panel(store, run_id)

view_state.copy_link()
