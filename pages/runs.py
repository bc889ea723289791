"""Runs: the runs in the store (select some to open them in another screen), and importing."""

from __future__ import annotations

import streamlit as st

from rollscope.ui import (
    access,
    import_panel,
    mapping_panel,
    navigation,
    pull_panel,
    run_admin,
    store_access,
    view_state,
)
from rollscope.ui.runs_table import run_links, runs_table

st.title("Runs")
store = store_access.get_store()
runs = store_access.list_runs()

if runs.empty:
    if access.can_modify():
        import_panel.demo_offer(store)
else:
    table, columns = runs_table(runs)
    chosen = view_state.table_selection(
        "runs", table, list(table["run id"]), column_config=columns, hide_index=True
    )
    run_links(navigation.registered(), chosen)
    run_admin.delete_control(store, runs, chosen)

st.subheader("Import trace files")
import_panel.last_results()
if access.can_modify():
    import_panel.uploader(store)
    pull_panel.show(store)
    mapping_panel.show(store)
else:
    st.info(access.modify_denied_message(), icon=":material/lock:")
