"""Runs: the runs in the store, a link per screen for each, and importing trace files."""

from __future__ import annotations

import streamlit as st

from rollscope.ui import (
    import_panel,
    mapping_panel,
    navigation,
    pull_panel,
    store_access,
    view_state,
)
from rollscope.ui.runs_table import runs_table

st.title("Runs")
store = store_access.get_store()
runs = store_access.list_runs()

if runs.empty:
    import_panel.demo_offer(store)
else:
    table, columns = runs_table(
        runs,
        [v for v in navigation.registered() if v.run_param],
        lambda view, run_id: view_state.page_url(view.url_path, [(view.run_param or "", run_id)]),
    )
    st.dataframe(table, column_config=columns, hide_index=True, width="stretch")

st.subheader("Import trace files")
import_panel.last_results()
import_panel.uploader(store)
pull_panel.show(store)
mapping_panel.show(store)
