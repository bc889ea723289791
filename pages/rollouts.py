"""Rollouts: filter, search and sort every rollout; open one in Replay, several in Compare."""

from __future__ import annotations

import tempfile
from pathlib import Path

import streamlit as st

from rollscope.ui import render, store_access, trajectory, view_state
from rollscope.ui.render import escape_markdown
from trace_store import replay
from trace_store.errors import TraceStoreError

PAGE_SIZE = 50
SORT_LABELS = {
    "step": "Step",
    "reward": "Reward",
    "latency": "Latency",
    "calls": "Tool calls",
    "turns": "Turns",
    "errors": "Tool errors",
}

bounds_of = store_access.cached_query(replay.filter_bounds)
list_of = store_access.cached_query(replay.list_rollouts)
count_of = store_access.cached_query(replay.count_rollouts)

st.title("Rollouts")
store = store_access.get_store()
runs = store_access.list_runs()
if runs.empty:
    st.info("No runs yet: import a trace file or load the demo on the Runs screen.")
    st.page_link("pages/runs.py", label="Runs", icon=":material/table_rows:")
    st.stop()

names = dict(zip(runs["run_id"], runs["name"].fillna(runs["run_id"]), strict=True))
chosen = view_state.multiselect(
    "Runs",
    "run",
    list(names),
    [],
    format_func=lambda r: str(names.get(r, r)),
    placeholder="every run",
)
bounds = bounds_of(tuple(chosen))
if not bounds["rollouts"]:
    st.info("These runs hold no rollouts.")
    st.stop()

search = st.text_input(
    "Search reasoning, tool calls, outputs and answers",
    key="q",
    bind="query-params",
    placeholder='words, or a "quoted phrase"',
    icon=":material/search:",
)
c1, c2, c3, c4 = st.columns(4)
with c1:
    steps = view_state.int_range_slider(
        "Steps", "steps", min_value=int(bounds["steps"][0]), max_value=int(bounds["steps"][1])
    )
with c2:
    max_calls = int(bounds["max_calls"] or 0)
    calls = view_state.int_range_slider("Tool calls", "calls", min_value=0, max_value=max_calls)
full_reward = (float(bounds["reward"][0] or 0.0), float(bounds["reward"][1] or 1.0))
with c3:
    reward_min = view_state.number_input(
        "Reward at least", "reward_min", default=full_reward[0], step=0.1
    )
with c4:
    reward_max = view_state.number_input(
        "Reward at most", "reward_max", default=full_reward[1], step=0.1
    )
c5, c6, c7, c8, c9 = st.columns(5)
with c5:
    split = view_state.selectbox("Split", "split", ["all", *bounds["splits"]], "all")
with c6:
    status = view_state.selectbox("Status", "status", ["all", *bounds["statuses"]], "all")
with c7:
    prompt = view_state.selectbox("Prompt", "prompt", ["all", *bounds["prompts"]], "all")
with c8:
    latency_max = view_state.number_input(
        "Latency at most (s)", "latency_max", default=0.0, min_value=0.0, help="0: no limit"
    )
with c9:
    sort = view_state.selectbox(
        "Sort by", "sort", list(SORT_LABELS), "step", format_func=SORT_LABELS.__getitem__
    )
descending = view_state.toggle("Highest first", "desc", sort != "step")

query = replay.RolloutQuery(
    runs=tuple(chosen),
    steps=steps,
    split=None if split == "all" else split,
    prompt_id=None if prompt == "all" else prompt,
    # The full range must not hide rollouts without a reward.
    reward=None if (reward_min, reward_max) == full_reward else (reward_min, reward_max),
    calls=calls,
    latency_ms=(0.0, latency_max * 1000) if latency_max > 0 else None,
    status=None if status == "all" else status,
    search=search or "",
    sort=sort,
    descending=descending,
)
try:
    if search and replay.search_index_state(store) != "fresh":
        with st.spinner("Updating the search index after the last import…"):
            indexed = replay.prepare_search_index(store)
        if not indexed and not store.read_only:
            st.warning(
                "The search index is catching up with the last import in the background: "
                "until it is done, search results leave out the newest rollouts.",
                icon=":material/hourglass_top:",
            )
    total = count_of(query)
except TraceStoreError as exc:
    render.show_error(exc)
    st.stop()

if total == 0:
    st.info("No rollout matches these filters.")
    st.stop()
pages = -(-total // PAGE_SIZE)
info_col, page_col = st.columns([4, 1], vertical_alignment="bottom")
with page_col:
    page = (
        view_state.number_input(
            f"Page (of {pages:,})", "page", default=1, min_value=1, max_value=pages
        )
        if pages > 1
        else 1
    )
rows = list_of(query, limit=PAGE_SIZE, offset=(page - 1) * PAGE_SIZE)
first = (page - 1) * PAGE_SIZE + 1
with info_col:
    st.caption(
        f"{total:,} rollouts · {first:,}–{first + len(rows) - 1:,} shown"
        + (f" · matching “{escape_markdown(search)}”" if search else "")
    )

table = rows.copy()
table.insert(
    0,
    "open",
    [trajectory.replay_url(r, i) for r, i in zip(rows["run_id"], rows["rollout_id"], strict=True)],
)
event = st.dataframe(
    table,
    hide_index=True,
    on_select="rerun",
    selection_mode="multi-row",
    key="rollouts.table",
    column_config={
        "open": st.column_config.LinkColumn("Replay", display_text="Open ↗", width="small"),
        "run_id": "Run",
        "rollout_id": "Rollout",
        "step": "Step",
        "prompt_id": "Prompt",
        "sample_index": "Sample",
        "split": "Split",
        "reward": st.column_config.NumberColumn("Reward", format="%.3f"),
        "latency_ms": st.column_config.NumberColumn("Latency (ms)", format="%.0f"),
        "n_tool_calls": "Calls",
        "n_turns": "Turns",
        "max_parallel_calls": "Max parallel",
        "n_tool_errors": "Tool errors",
        "status": "Status",
        "final_answer": st.column_config.TextColumn("Final answer", width="medium"),
        "prompt": st.column_config.TextColumn("Prompt text", width="medium"),
    },
)
selected = [int(i) for i in event.selection.rows] if event is not None else []
picked = [
    replay.CompareRef(str(rows.at[i, "run_id"]), str(rows.at[i, "rollout_id"])) for i in selected
]


def _export(fmt: str) -> bytes:
    with tempfile.TemporaryDirectory() as tmp:
        path = replay.export_rollouts(store, query, Path(tmp) / f"export.{fmt}", fmt)
        return path.read_bytes()


left, right = st.columns([3, 2])
with left:
    if len(picked) == 1 and st.button("Open the selected rollout", type="primary"):
        st.switch_page(
            "pages/replay.py",
            query_params={"run": picked[0].run_id, "rollout": picked[0].rollout_id},
        )
    if len(picked) >= 2 and st.button(f"Compare the {len(picked)} selected", type="primary"):
        runs_of = list(dict.fromkeys(r.run_id for r in picked))
        params = (
            {"run": runs_of[0]}
            if len(runs_of) == 1
            else {"runs": ",".join(r.run_id for r in picked)}
        )
        params["rollouts"] = ",".join(r.rollout_id for r in picked)
        st.switch_page("pages/compare.py", query_params=params)
    if not picked:
        st.caption("Select one row to open it, two or more to compare them.")
with right:
    e1, e2 = st.columns(2)
    e1.download_button(
        "Export JSONL",
        lambda: _export("jsonl"),
        file_name="rollouts.jsonl",
        mime="application/jsonl",
        icon=":material/download:",
        help="One canonical record a line, with items and grades: re-importable.",
    )
    e2.download_button(
        "Export Parquet",
        lambda: _export("parquet"),
        file_name="rollouts.parquet",
        mime="application/vnd.apache.parquet",
        icon=":material/download:",
        help="The rollouts table's columns, one row a rollout.",
    )
view_state.copy_link()
