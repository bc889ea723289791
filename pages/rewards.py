"""Rewards: the reward curve per step (click a point to open the step), graders, zero/full
reward shares and per-prompt spread, for one run or several overlaid; then what the training
job itself reported, where its events were imported."""

from __future__ import annotations

import streamlit as st

from rollscope.ui import charts_dashboards as charts
from rollscope.ui import dashboard_filters as filters_ui
from rollscope.ui import store_access, view_state
from rollscope.ui.dashboard_tables import step_rollouts_table
from rollscope.ui.job_metrics import job_metrics_section, no_rewards_then_job_metrics
from trace_store import dashboards

q = store_access.cached_query
CURVE = "rewards.curve"

st.title("Rewards")
view = filters_ui.shared_filters()
if view is None:
    st.stop()

band_col, ema_col, _ = st.columns([1, 2, 3])
with band_col:
    band_label, band = filters_ui.band_control()
with ema_col:
    smoothing = filters_ui.ema_control()

rewards = q(dashboards.reward_by_step)(view.run_ids, band=band, **view.query)
if rewards.empty:
    no_rewards_then_job_metrics(view, smoothing)
    view_state.copy_link()
    st.stop()

step = filters_ui.selected_step(view, set(rewards["step"].astype(int)))
event = st.plotly_chart(
    charts.reward_curve(
        rewards, view.names, band_label=band_label, smoothing=smoothing, order=view.run_ids
    ),
    on_select="rerun",
    selection_mode="points",
    key=CURVE,
    width="stretch",
)
clicked = filters_ui.clicked_step(event, step, CURVE)
if clicked != step:
    filters_ui.select_step(clicked)
    st.rerun()

if step is None:
    st.caption("Click a point of a mean-reward line to list that step's rollouts, best first.")
else:
    step_rollouts_table(
        view, step, q(dashboards.step_rollouts)(view.run_ids, step, split=view.split)
    )

st.subheader("Grader components")
grader_col, _ = st.columns([1, 2])
with grader_col:
    grader = filters_ui.grader_control(q(dashboards.graders)(view.run_ids))
grades = q(dashboards.grader_by_step)(view.run_ids, grader=grader, **view.query)
if grades.empty:
    st.caption("These rollouts carry no per-grader scores.")
else:
    st.plotly_chart(
        charts.grader_curves(
            grades, view.names, smoothing=smoothing, order=view.run_ids, single=grader is not None
        ),
        width="stretch",
    )

shares_col, spread_col = st.columns(2)
with shares_col:
    st.plotly_chart(charts.reward_shares(rewards, view.names, view.run_ids), width="stretch")
with spread_col:
    spread = q(dashboards.prompt_spread_by_step)(view.run_ids, **view.query)
    if spread.empty:
        st.caption("No prompt has two or more scored samples at one step: nothing to compare.")
    else:
        st.plotly_chart(charts.prompt_spread(spread, view.names, view.run_ids), width="stretch")

job_metrics_section(view, smoothing)
view_state.copy_link()
