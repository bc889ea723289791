"""Replay: one rollout, turn by turn; its timeline, its group, and its prompt over the steps.

Address: ``/replay?run=RUN_ID&rollout=ROLLOUT_ID`` (then ``view``, ``find``, ``page`` and the
expanded items, ``r<seq>=true``).
"""

from __future__ import annotations

import streamlit as st

from rollscope.ui import charts_replay, render, store_access, trajectory, view_state
from trace_store import replay
from trace_store.errors import TraceStoreError

header_of = store_access.cached_query(replay.rollout_header)
grades_of = store_access.cached_query(replay.rollout_grades)
neighbours_of = store_access.cached_query(replay.rollout_neighbours)
pages_of = store_access.cached_query(replay.turn_pages)
events_of = store_access.cached_query(replay.rollout_events)
index_of = store_access.cached_query(replay.rollout_index)
timeline_of = store_access.cached_query(replay.tool_timeline)
group_of = store_access.cached_query(replay.prompt_group)
history_of = store_access.cached_query(replay.prompt_history)
find_of = store_access.cached_query(replay.find_in_rollout)

st.title("Replay")
store = store_access.get_store()
run_id = st.query_params.get("run", "")
rollout_id = st.query_params.get("rollout", "")
if not run_id or not rollout_id:
    missing = " and ".join(k for k, v in (("run", run_id), ("rollout", rollout_id)) if not v)
    st.info(
        f"This address names no {missing}. Pick a rollout on the Rollouts screen; a replay's "
        "address is /replay?run=RUN\\_ID&rollout=ROLLOUT\\_ID.",
        icon=":material/info:",
    )
    st.page_link("pages/rollouts.py", label="Open the rollout list", icon=":material/list:")
    st.stop()

try:
    header = header_of(run_id, rollout_id)
    grades = grades_of(run_id, rollout_id)
    near = neighbours_of(run_id, rollout_id)
except TraceStoreError as exc:
    render.show_error(exc)
    st.page_link("pages/rollouts.py", label="Open the rollout list", icon=":material/list:")
    st.stop()

index = index_of(run_id, rollout_id)
verdicts = trajectory.verdicts_by_anchor(grades, replay.grade_anchors(grades, index), index)
trajectory.render_header(header, grades, verdicts.get("answer", ()))
trajectory.render_neighbour_links(header, near)


def fetch(seq: int, name: str) -> str:
    return replay.event_field(store, run_id, rollout_id, seq, name)


views = ["Trajectory", "Timeline", "Group", "Prompt over steps"]
view = st.segmented_control(
    "View", views, default="Trajectory", key="view", bind="query-params", required=True
)

if view == "Timeline":
    spans = timeline_of(run_id, rollout_id)
    st.plotly_chart(charts_replay.timeline_figure(spans), width="stretch")
    trajectory.render_timeline_summary(spans)
elif view == "Group":
    group = group_of(run_id, header["prompt_id"], int(header["step"]), header["split"])
    trajectory.render_group(group, header)
elif view == "Prompt over steps":
    history = history_of(run_id, header["prompt_id"], header["split"])
    trajectory.render_history(history, header)
else:
    term = st.text_input(
        "Find in this rollout", key="find", bind="query-params", placeholder="a word or a phrase"
    )
    turn_range: tuple[int, int] | None = None
    only: set[int] | None = None
    pages = pages_of(run_id, rollout_id)
    if term:
        hits = find_of(run_id, rollout_id, term)
        only = set(hits["turn"].astype(int))
        trajectory.render_find_hits(hits, term)
    elif len(pages) > 1:
        page = st.selectbox(
            f"Page (of {len(pages)})",
            list(range(1, len(pages) + 1)),
            key="page",
            bind="query-params",
        )
        turn_range = pages[(page or 1) - 1]
        st.caption(f"Turns {turn_range[0]}–{turn_range[1]} of this rollout.")
    events = events_of(run_id, rollout_id, turns=turn_range)
    turns = replay.group_turns(events)
    if only is not None:
        turns = [t for t in turns if t.number in only]
    src = trajectory.Source(fetch=fetch)
    trajectory.render_trajectory(turns, src, verdicts)
    if not turns:
        st.info("No items match." if term else "This rollout has no recorded items.")

trajectory.render_exports(store, run_id, rollout_id)
view_state.copy_link()
