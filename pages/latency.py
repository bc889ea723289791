"""Latency: rollout latency quantiles over steps and its tail (complementary CDF), per-tool
call latency, the slowest rollouts (linked to Replay), and token usage."""

from __future__ import annotations

import streamlit as st

from rollscope.ui import charts_dashboards as charts
from rollscope.ui import dashboard_filters as filters_ui
from rollscope.ui import store_access, view_state
from rollscope.ui.dashboard_tables import slowest_table
from trace_store import dashboards

q = store_access.cached_query
SLOWEST = 20

st.title("Latency")
view = filters_ui.shared_filters()
if view is None:
    st.stop()

per_step = q(dashboards.latency_by_step)(view.run_ids, **view.query)
if per_step.empty:
    st.info("No rollouts with a latency in this view: widen the steps or choose another split.")
    view_state.copy_link()
    st.stop()

st.plotly_chart(charts.latency_quantiles(per_step, view.names, view.run_ids), width="stretch")

st.subheader("The tail")
ranges = filters_ui.compare_ranges(view)
tail_col, tools_col = st.columns(2)
with tail_col:
    ccdf = q(dashboards.latency_ccdf)(view.run_ids, tuple(ranges), split=view.split)
    if ccdf.empty:
        st.caption("No rollouts in these step ranges.")
    else:
        st.plotly_chart(charts.latency_ccdf(ccdf, view.names, view.run_ids), width="stretch")
with tools_col:
    tools = q(dashboards.tool_latency)(view.run_ids, **view.query)
    if tools.empty:
        st.caption("No tool call in this view has a duration.")
    else:
        st.plotly_chart(charts.tool_latency(tools, view.names, view.run_ids), width="stretch")

st.subheader(f"The {SLOWEST} slowest rollouts")
slowest_table(view, q(dashboards.slowest_rollouts)(view.run_ids, limit=SLOWEST, **view.query))

st.subheader("Tokens")
tokens = q(dashboards.tokens_by_step)(view.run_ids, **view.query)
if tokens.empty:
    st.caption("These traces carry no token counts.")
else:
    out_col, per_reward_col = st.columns(2)
    with out_col:
        st.plotly_chart(charts.tokens_over_steps(tokens, view.names, view.run_ids), width="stretch")
    with per_reward_col:
        st.plotly_chart(charts.tokens_per_reward(tokens, view.names, view.run_ids), width="stretch")

view_state.copy_link()
