"""Tool calls: calls per rollout (early vs late, or run vs run), their quantiles over steps,
turns and parallel calls, calls and errors per tool, a budget, and reward by call count."""

from __future__ import annotations

import streamlit as st

from rollscope.ui import charts_dashboards as charts
from rollscope.ui import dashboard_filters as filters_ui
from rollscope.ui import store_access, view_state
from trace_store import dashboards

q = store_access.cached_query
MAX_BIN = 30

st.title("Tool calls")
view = filters_ui.shared_filters()
if view is None:
    st.stop()

per_step = q(dashboards.tool_calls_by_step)(view.run_ids, **view.query)
if per_step.empty:
    st.info("No rollouts in this view: widen the steps or choose another split.")
    view_state.copy_link()
    st.stop()

st.subheader("Calls per rollout")
ranges = filters_ui.compare_ranges(view)
histogram = q(dashboards.tool_calls_histogram)(view.run_ids, tuple(ranges), split=view.split)
hist_col, quant_col = st.columns(2)
with hist_col:
    if histogram.empty:
        st.caption("No rollouts in these step ranges.")
    else:
        st.plotly_chart(
            charts.calls_histogram(histogram, view.names, view.run_ids), width="stretch"
        )
with quant_col:
    st.plotly_chart(charts.calls_quantiles(per_step, view.names, view.run_ids), width="stretch")

turns_col, usage_col = st.columns(2)
with turns_col:
    st.plotly_chart(charts.turns_and_parallel(per_step, view.names, view.run_ids), width="stretch")
usage = q(dashboards.tool_usage)(view.run_ids, **view.query)
with usage_col:
    if usage.empty:
        st.caption("These rollouts made no tool calls.")
    else:
        st.plotly_chart(charts.tool_usage(usage, view.names, view.run_ids), width="stretch")

if not usage.empty:
    shares = q(dashboards.tool_share_by_step)(view.run_ids, **view.query)
    for run_id in view.run_ids:
        if (shares["run_id"] == run_id).any():
            st.plotly_chart(charts.tool_share(shares, view.names, run_id), width="stretch")

st.subheader("Tool-call budget")
budget_col, _ = st.columns([1, 3])
with budget_col:
    budget = filters_ui.budget_control()
over_col, reward_col = st.columns(2)
with over_col:
    over = q(dashboards.budget_by_step)(view.run_ids, budget, **view.query)
    st.plotly_chart(charts.budget_over(over, view.names, budget, view.run_ids), width="stretch")
with reward_col:
    sides = q(dashboards.budget_reward)(view.run_ids, budget, **view.query)
    st.plotly_chart(charts.budget_reward(sides, view.names, budget, view.run_ids), width="stretch")

by_calls = q(dashboards.reward_by_tool_calls)(view.run_ids, max_bin=MAX_BIN, **view.query)
if not by_calls.empty:
    st.plotly_chart(
        charts.reward_vs_calls(by_calls, view.names, MAX_BIN, view.run_ids), width="stretch"
    )

view_state.copy_link()
