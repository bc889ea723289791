"""Compare: rollouts side by side, aligned by turn; or every prompt of two runs.

Addresses: ``/compare?run=R&rollouts=a,b`` (``runs=A,B&rollouts=a,b`` across runs), the presets
``preset=best-worst&run=R&prompt=P&step=N``, ``preset=steps&run=R&prompt=P&steps=1,200``,
``preset=runs&runs=A,B&prompt=P``, and the per-prompt view ``preset=prompts&runs=A,B``.
"""

from __future__ import annotations

import streamlit as st

from rollscope.ui import charts_replay, navigation, render, store_access, trajectory, view_state
from rollscope.ui.render import escape_markdown
from trace_store import replay
from trace_store.errors import TraceStoreError

header_of = store_access.cached_query(replay.rollout_header)
grades_of = store_access.cached_query(replay.rollout_grades)
signatures_of = store_access.cached_query(replay.turn_signatures)
events_of = store_access.cached_query(replay.rollout_events)
best_worst = store_access.cached_query(replay.best_worst_pair)
step_refs = store_access.cached_query(replay.step_pair_refs)
run_refs = store_access.cached_query(replay.run_pair_refs)
deltas_of = store_access.cached_query(replay.prompt_deltas)

TURNS_PER_PAGE = 20
PRESETS = ("best-worst", "steps", "runs", "prompts")

st.title("Compare")
store = store_access.get_store()


def listed(key: str) -> list[str]:
    """``?key=a,b`` or ``?key=a&key=b`` -> ["a", "b"]."""
    return [v.strip() for raw in view_state.raw_values(key) for v in raw.split(",") if v.strip()]


def one(key: str) -> str:
    values = view_state.raw_values(key)
    return values[-1].strip() if values else ""


def need(*keys: str) -> None:
    missing = [k for k in keys if not one(k)]
    if missing:
        st.error(
            f"This compare link lacks {escape_markdown(', '.join(missing))}: "
            f"preset {escape_markdown(one('preset'))} needs {escape_markdown(', '.join(keys))}.",
            icon=":material/link_off:",
        )
        st.stop()


def whole_number(key: str) -> int:
    try:
        return int(one(key))
    except ValueError:
        st.error(
            f"The link's {escape_markdown(key)} “{escape_markdown(one(key))}” is not a whole number.",
            icon=":material/link_off:",
        )
        st.stop()


def per_prompt_view(run_ids: list[str]) -> None:
    runs = store_access.list_runs()
    if len(runs) < 2:
        st.info("Comparing runs prompt by prompt needs two runs in the store.")
        st.stop()
    names = dict(zip(runs["run_id"], runs["name"].fillna(runs["run_id"]), strict=True))
    options = list(names)
    given = [r for r in run_ids if r in names][:2]
    if len(given) == 1:
        # One run (a link from the Runs screen): set it against a baseline, else another run.
        kinds = dict(zip(runs["run_id"], runs["kind"], strict=True))
        others = sorted((r for r in options if r != given[0]), key=lambda r: kinds[r] != "baseline")
        given = [*others[:1], given[0]]
    default = given or options[:2]
    first_view = f"w.{navigation.current_url_path()}.runs" not in st.session_state
    if first_view and view_state.raw_values("runs") != default:
        st.query_params["runs"] = default
    elif any("," in v for v in view_state.raw_values("runs")):
        st.query_params["runs"] = listed("runs")  # the links' a,b form -> repeated parameters
    chosen = view_state.multiselect(
        "Runs to compare: A (before), then B (after)",
        "runs",
        options,
        default,
        format_func=lambda r: str(names.get(r, r)),
        max_selections=2,
    )
    view_state.write_param("preset", "prompts")
    if len(chosen) != 2:
        st.info("Pick two runs.")
        st.stop()
    split = view_state.selectbox("Split", "split", ["all", "train", "eval"], "all")
    run_a, run_b = chosen
    deltas = deltas_of(run_a, run_b, None if split == "all" else split)
    if deltas.empty:
        st.info("The two runs share no prompt (in this split).")
        return
    counts = deltas["change"].value_counts()
    st.caption(
        f"{len(deltas)} prompts in both runs, each at its run's last step: "
        f"{counts.get('improved', 0)} improved, {counts.get('regressed', 0)} regressed, "
        f"{counts.get('same', 0)} unchanged."
    )
    st.plotly_chart(charts_replay.deltas_figure(deltas, run_a, run_b), width="stretch")
    table = deltas.copy()
    table["compare"] = [
        trajectory.compare_url([replay.CompareRef(run_a, a), replay.CompareRef(run_b, b)])
        for a, b in zip(deltas["rollout_a"], deltas["rollout_b"], strict=True)
    ]
    st.dataframe(
        table[
            ["prompt_id", "reward_a", "reward_b", "delta", "change", "step_a", "step_b", "compare"]
        ],
        hide_index=True,
        column_config={
            "prompt_id": "Prompt",
            "reward_a": st.column_config.NumberColumn("Reward A", format="%.3f"),
            "reward_b": st.column_config.NumberColumn("Reward B", format="%.3f"),
            "delta": st.column_config.NumberColumn("B − A", format="%+.3f"),
            "change": "Change",
            "step_a": "Step A",
            "step_b": "Step B",
            "compare": st.column_config.LinkColumn("Best samples", display_text="Compare ↗"),
        },
    )


def resolve_refs() -> list[replay.CompareRef] | None:
    """The rollouts the link names, or None for the per-prompt view."""
    preset = one("preset")
    if preset and preset not in PRESETS:
        st.error(
            f"Unknown preset “{escape_markdown(preset)}”: use one of {', '.join(PRESETS)}.",
            icon=":material/link_off:",
        )
        st.stop()
    if preset == "best-worst":
        need("run", "prompt", "step")
        ids = best_worst(one("run"), one("prompt"), whole_number("step"), one("split") or None)
        return [replay.CompareRef(one("run"), i) for i in ids]
    if preset == "steps":
        need("run", "prompt", "steps")
        try:
            steps = [int(s) for s in listed("steps")]
        except ValueError:
            st.error("The link's steps must be whole numbers, like steps=1,200.")
            st.stop()
        sample = whole_number("sample") if one("sample") else 0
        return list(step_refs(one("run"), one("prompt"), steps, sample))
    if preset == "runs":
        need("runs", "prompt")
        return list(run_refs(listed("runs"), one("prompt")))
    rollouts = listed("rollouts")
    if preset == "prompts" or not rollouts:
        return None
    runs = listed("runs") or ([one("run")] if one("run") else [])
    if len(runs) == 1:
        runs = runs * len(rollouts)
    if len(runs) != len(rollouts):
        st.error(
            "This compare link names "
            f"{len(rollouts)} rollouts but {len(runs)} runs: give one run (run=R) or one "
            "run per rollout (runs=A,B).",
            icon=":material/link_off:",
        )
        st.stop()
    return [replay.CompareRef(r, i) for r, i in zip(runs, rollouts, strict=True)]


try:
    refs = resolve_refs()
    if refs is None:
        per_prompt_view(listed("runs") or listed("run"))
        view_state.copy_link()
        st.stop()
    headers = [header_of(r.run_id, r.rollout_id) for r in refs]
    grades = [grades_of(r.run_id, r.rollout_id) for r in refs]
    signatures = [signatures_of(r.run_id, r.rollout_id) for r in refs]
    divergence = replay.divergence_of(signatures)
except TraceStoreError as exc:
    render.show_error(exc)
    st.stop()

if len(refs) < 2:
    st.info(
        "Only one rollout to show: this group has a single sample."
        if one("preset") == "best-worst"
        else "Only one rollout to show: name two or more (rollouts=a,b) to compare them.",
        icon=":material/info:",
    )
trajectory.render_compare_headers(headers, grades)

if divergence is None:
    st.success("Same tool calls with the same arguments in every turn.", icon=":material/check:")
else:
    st.warning(
        f"First divergence at turn {divergence}: a different tool or different arguments.",
        icon=":material/call_split:",
    )
if len(refs) == 2:
    with st.expander("Diff of the final answers", icon=":material/difference:"):
        diff = replay.answer_diff(headers[0].get("final_answer"), headers[1].get("final_answer"))
        st.code(diff or "(the final answers are the same)", language="diff", wrap_lines=True)

numbers = sorted({int(t) for s in signatures for t in s["turn"]} | {0})
pages = [numbers[i : i + TURNS_PER_PAGE] for i in range(0, len(numbers), TURNS_PER_PAGE)]
shown = pages[0] if pages else []
if len(pages) > 1:
    page = st.selectbox(
        f"Page (of {len(pages)})", list(range(1, len(pages) + 1)), key="page", bind="query-params"
    )
    shown = pages[(page or 1) - 1]
    st.caption(f"Turns {shown[0]}–{shown[-1]}.")
span = (shown[0], shown[-1]) if shown else (0, 0)
per_rollout = [replay.group_turns(events_of(r.run_id, r.rollout_id, turns=span)) for r in refs]
sources = [
    trajectory.Source(
        fetch=lambda seq, name, r=r: replay.event_field(store, r.run_id, r.rollout_id, seq, name),
        prefix=f"c{i}.",
    )
    for i, r in enumerate(refs)
]
trajectory.render_aligned(shown, per_rollout, sources, divergence)
view_state.copy_link()
