"""Drawing a trajectory, turn by turn, with trace content kept inert.

Every piece of trace text goes through ``st.text``/``st.code``/``st.dataframe``, or through
`escape_markdown` where Streamlit interprets Markdown (labels, captions). Reasoning sits in
collapsed expanders that render only when opened; long fields show a preview with a "show all"
toggle; base64 blobs and data URIs are replaced by a placeholder that says their size. The
expanded items and "show all" toggles are bound to the URL (``r<seq>=true``, ``all<seq>=true``),
so a copied link opens them again.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
import streamlit as st

from rollscope.ui import view_state
from rollscope.ui.render import escape_markdown
from trace_store import Store, replay
from trace_store.replay import Turn

#: Characters of a field drawn before "show all" (the store sends a longer preview).
SHOWN_CHARS = 2000

_BLOB = re.compile(
    r"data:[\w.+-]+/[\w.+-]+(?:;[\w.+-]+=[\w.+-]+)*;base64,[A-Za-z0-9+/]+={0,2}"
    r"|(?<![A-Za-z0-9+/])[A-Za-z0-9+/]{400,}={0,2}(?![A-Za-z0-9+/=])"
)

FetchField = Callable[[int, str], str]
"""``fetch(seq, field)`` -> the whole text of one field of one item."""


@dataclass(frozen=True)
class Source:
    """Where a trajectory's full fields come from, and the prefix of its URL keys (two
    trajectories on one screen need different ones)."""

    fetch: FetchField | None = None
    prefix: str = ""


def human_size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} GB"


def strip_blobs(text: str, *, cut: bool = False) -> str:
    """`text` with base64 data (data URIs, long base64 runs) replaced by a placeholder.

    `cut`: `text` is the start of a longer field, so a blob running to its end is bigger
    than what is seen here.
    """

    def placeholder(match: re.Match[str]) -> str:
        body = match.group(0)
        kind = "data URI" if body.startswith("data:") else "base64 data"
        size = human_size(len(re.sub(r"\s", "", body.split(",", 1)[-1])) * 3 // 4)
        if cut and match.end() == len(text):
            size = f"at least {size}"
        return f"[{kind}, {size}, not shown]"

    return _BLOB.sub(placeholder, text)


def pretty_arguments(arguments: str | None) -> tuple[str, str | None]:
    """Tool arguments as indented JSON (language "json"), or as given when not JSON."""
    if not arguments:
        return "", None
    try:
        return json.dumps(json.loads(arguments), indent=2, ensure_ascii=False), "json"
    except (ValueError, TypeError):
        return arguments, None


def duration_text(ms: Any) -> str:
    if ms is None or pd.isna(ms):
        return "duration unknown"
    ms = float(ms)
    return f"{ms:.0f} ms" if ms < 1000 else f"{ms / 1000:.1f} s"


def _field(
    item: Mapping[str, Any],
    name: str,
    src: Source,
    *,
    language: str | None = None,
    prose: bool = False,
) -> None:
    """One text field: a preview, and a URL-bound "show all" toggle when it is longer."""
    text = item.get(name)
    if text is None:
        return
    total = int(item.get(f"{name}_chars") or len(text))
    shown = text[:SHOWN_CHARS]
    full = False
    if total > len(shown) and src.fetch is not None:
        full = st.toggle(
            f"Show all {human_size(total)} ({total:,} characters)",
            key=f"{src.prefix}all{item['seq']}{name[0]}",
            bind="query-params",
        )
    if full and src.fetch is not None:
        body = strip_blobs(src.fetch(int(item["seq"]), name))
    elif total > len(shown):
        body = strip_blobs(shown, cut=True) + f"\n… {total - len(shown):,} more characters"
    else:
        body = strip_blobs(shown)
    if prose:
        st.text(body if body else "(empty)")
    else:
        st.code(body, language=language, wrap_lines=True)


def _verdicts(grades: Sequence[Mapping[str, Any]]) -> None:
    for g in grades:
        score = "—" if g.get("score") is None or pd.isna(g["score"]) else f"{g['score']:.3g}"
        explanation = g.get("explanation")
        text = f"**Grader {escape_markdown(str(g['grader']))}**: {score}"
        if explanation is not None and not pd.isna(explanation):
            text += f" — {escape_markdown(str(explanation))}"
        st.info(text, icon=":material/gavel:")


def render_item(item: Mapping[str, Any], src: Source) -> None:
    """A reasoning item, a message, or a result without a call."""
    kind = item["kind"]
    if kind == "reasoning":
        tokens = item.get("tokens")
        extra = f" · {int(tokens):,} tokens" if tokens is not None and not pd.isna(tokens) else ""
        expander = st.expander(
            f"Reasoning{extra}",
            key=f"{src.prefix}r{item['seq']}",
            bind="query-params",
            icon=":material/psychology:",
        )
        with expander:
            if expander.open:
                _field(item, "text", src, prose=True)
        return
    if kind == "tool_result":
        st.caption("Tool result (no matching call)")
        _field(item, "output", src)
        _error(item, src)
        return
    role = str(item.get("role") or "message")
    st.caption(escape_markdown(role.capitalize()))
    _field(item, "text", src, prose=True)


def _error(item: Mapping[str, Any] | None, src: Source) -> None:
    if item and item.get("error"):
        st.markdown(":red[**Error**]")
        _field(item, "error", src)


def render_call(
    call: Mapping[str, Any],
    result: Mapping[str, Any] | None,
    src: Source,
    verdicts: Sequence[Mapping[str, Any]] = (),
) -> None:
    """One tool call: name, duration, pretty-printed arguments, output, error."""
    failed = bool(result and result.get("error"))
    status = " · :red[failed]" if failed else ""
    st.markdown(
        f":material/build: **{escape_markdown(str(call.get('tool_name') or '?'))}**"
        f" · {duration_text(call.get('duration_ms'))}{status}"
    )
    text, language = pretty_arguments(call.get("arguments"))
    if len(text) > SHOWN_CHARS and src.fetch is not None:
        # Long arguments (a file body): preview the raw text with "show all".
        _field(call, "arguments", src, language=language)
    else:
        st.code(strip_blobs(text) or "(no arguments)", language=language, wrap_lines=True)
    if result is None:
        st.caption("No result recorded")
    else:
        st.caption("Output")
        _field(result, "output", src)
        _error(result, src)
    _verdicts(verdicts)


def render_turn(
    turn: Turn,
    src: Source,
    verdicts: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
    *,
    side_by_side: bool = True,
) -> None:
    """One turn in a bordered box; parallel calls of the turn shown together (side by side,
    unless the turn is itself in a narrow column)."""
    verdicts = verdicts or {}
    label = "Prompt" if turn.number == 0 else f"Turn {turn.number}"
    if turn.parallel:
        label += f" · {len(turn.calls)} calls in parallel"
    elif turn.calls:
        label += " · 1 call"
    elif turn.number > 0:
        label += " · no tool calls"
    with st.container(border=True):
        st.markdown(f"**{label}**")
        thoughts = [i for i in turn.items if i["kind"] == "reasoning"]
        said = [i for i in turn.items if i["kind"] != "reasoning"]
        for item in thoughts:
            render_item(item, src)
        if turn.calls:
            wide = turn.parallel and side_by_side
            columns = st.columns(min(len(turn.calls), 3)) if wide else [st.container()]
            for i, (call, result) in enumerate(turn.calls):
                with columns[i % len(columns)]:
                    render_call(call, result, src, verdicts.get(f"call:{call.get('call_id')}", ()))
        for item in said:
            render_item(item, src)
        _verdicts(verdicts.get(f"turn:{turn.number}", ()))


def verdicts_by_anchor(
    grades: pd.DataFrame, anchors: Mapping[str, str], events: pd.DataFrame
) -> dict[str, list[dict[str, Any]]]:
    """Grades keyed by where they are shown: ``call:<id>``, ``turn:<n>`` or ``answer``.

    A grade anchored at a tool is shown at that tool's last call in `events` (the whole
    trajectory's index, so the anchor does not depend on the page on screen).
    """
    last_call: dict[str, str] = {}
    calls = events[events["kind"] == "tool_call"] if len(events) else events
    for name, call_id in zip(calls.get("tool_name", []), calls.get("call_id", []), strict=True):
        last_call[str(name)] = f"call:{call_id}"
    out: dict[str, list[dict[str, Any]]] = {}
    for grade in grades.to_dict("records"):
        anchor = anchors.get(str(grade["grader"]), "answer")
        if anchor.startswith("tool:"):
            anchor = last_call.get(anchor[5:], "answer")
        out.setdefault(anchor, []).append({str(k): v for k, v in grade.items()})
    return out


def render_trajectory(
    turns: Sequence[Turn],
    src: Source,
    verdicts: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
) -> None:
    for turn in turns:
        render_turn(turn, src, verdicts)


def render_final_answer(answer: str | None, verdicts: Sequence[Mapping[str, Any]] = ()) -> None:
    st.markdown("**Final answer**")
    st.text(strip_blobs(answer) if answer else "(no final answer)")
    _verdicts(verdicts)


def call_lines(calls: Sequence[str] | None) -> str:
    """A turn's calls in the compare table, one per line."""
    if calls is None:
        return "(ended)"
    return "\n".join(calls) if calls else "(no calls)"


# --- the Replay screen's sections ----------------------------------------------------------


def replay_url(run_id: str, rollout_id: str) -> str:
    return view_state.page_url("replay", [("run", run_id), ("rollout", rollout_id)])


def _number(value: Any, fmt: str = "{:.3g}") -> str:
    return "—" if value is None or pd.isna(value) else fmt.format(value)


def render_header(
    header: Mapping[str, Any], grades: pd.DataFrame, answer_verdicts: Sequence[Mapping[str, Any]]
) -> None:
    """Who, where, how it scored (with each grader), and the final answer."""
    run = str(header.get("run_name") or header["run_id"])
    st.subheader(escape_markdown(str(header["rollout_id"])))
    st.caption(
        " · ".join(
            escape_markdown(part)
            for part in (
                f"run {run} ({header['run_id']})",
                f"step {header['step']}",
                f"prompt {header.get('prompt_id') or '—'}",
                f"sample {_number(header.get('sample_index'), '{:.0f}')}",
                f"split {header.get('split')}",
                f"model {header.get('model') or '—'}",
            )
        )
    )
    cols = st.columns(6)
    cols[0].metric("Reward", _number(header.get("reward"), "{:.3f}"))
    cols[1].metric("Status", str(header.get("status")))
    cols[2].metric("Tool calls", f"{int(header.get('n_tool_calls') or 0)}")
    cols[3].metric("Turns", f"{int(header.get('n_turns') or 0)}")
    cols[4].metric("Tool errors", f"{int(header.get('n_tool_errors') or 0)}")
    latency = header.get("latency_ms")
    cols[5].metric("Latency", duration_text(latency) if latency is not None else "—")
    hack = (header.get("metadata") or {}).get("planted_hack")
    if hack:
        st.warning(
            f"Planted reward hack (demo data): {escape_markdown(str(hack))}",
            icon=":material/bug_report:",
        )
    left, right = st.columns([3, 2])
    with left:
        st.markdown("**Final answer**")
        answer = header.get("final_answer")
        st.text(strip_blobs(str(answer)) if answer else "(no final answer)")
        _verdicts(answer_verdicts)
    with right:
        st.markdown("**Grades**")
        if grades.empty:
            st.caption("No grader breakdown recorded.")
        else:
            st.dataframe(
                grades,
                hide_index=True,
                column_config={
                    "grader": "Grader",
                    "score": st.column_config.NumberColumn("Score", format="%.3f"),
                    "weight": st.column_config.NumberColumn("Weight", format="%.2f"),
                    "weighted": st.column_config.NumberColumn("Score × weight", format="%.3f"),
                    "explanation": st.column_config.TextColumn("Explanation", width="large"),
                },
            )


def render_neighbour_links(header: Mapping[str, Any], near: Mapping[str, str | None]) -> None:
    """Previous/next sample of the prompt at this step, previous/next step, the group."""
    run_id = str(header["run_id"])
    cols = st.columns(5)
    for col, key, label, icon in (
        (cols[0], "prev_sample", "Previous sample", ":material/arrow_back:"),
        (cols[1], "next_sample", "Next sample", ":material/arrow_forward:"),
        (cols[2], "prev_step", "Previous step", ":material/skip_previous:"),
        (cols[3], "next_step", "Next step", ":material/skip_next:"),
    ):
        target = near.get(key)
        with col:
            st.page_link(
                "pages/replay.py",
                label=label,
                icon=icon,
                disabled=target is None,
                query_params={"run": run_id, "rollout": target or ""},
            )
    with cols[4]:
        st.page_link(
            "pages/compare.py",
            label="Best vs worst sample",
            icon=":material/compare:",
            disabled=not header.get("prompt_id"),
            query_params={
                "preset": "best-worst",
                "run": run_id,
                "prompt": str(header.get("prompt_id") or ""),
                "step": str(header["step"]),
                "split": str(header.get("split") or ""),
            },
        )


def render_timeline_summary(spans: pd.DataFrame) -> None:
    calls = spans[spans["kind"] == "tool_call"]
    if calls.empty:
        st.caption("No tool calls in this rollout.")
        return
    slowest = calls.sort_values("duration_ms", ascending=False).iloc[0]
    st.caption(
        f"{len(calls)} calls in {calls['turn'].nunique()} turns; slowest: "
        f"{escape_markdown(str(slowest['label']))} in turn {int(slowest['turn'])}, "
        f"{duration_text(slowest['duration_ms'])}."
    )


def render_group(group: pd.DataFrame, header: Mapping[str, Any]) -> None:
    """All samples of the prompt at this step, with their advantage within the group."""
    if group.empty:
        st.info("No other samples of this prompt at this step.")
        return
    run_id = str(header["run_id"])
    mean, std = group["group_mean"].iloc[0], group["group_std"].iloc[0]
    st.caption(
        f"{len(group)} samples of prompt {escape_markdown(str(header.get('prompt_id')))} at step "
        f"{header['step']}: mean reward {_number(mean, '{:.3f}')}, std {_number(std, '{:.3f}')}. "
        "Advantage = (reward − group mean) / group std."
    )
    if bool(group["no_signal"].iloc[0]):
        st.warning(
            "Every sample scored the same: this group gives no learning signal (advantage 0).",
            icon=":material/block:",
        )
    st.page_link(
        "pages/compare.py",
        label="Compare the best and the worst sample",
        icon=":material/compare:",
        disabled=len(group) < 2,
        query_params={
            "preset": "best-worst",
            "run": run_id,
            "prompt": str(header.get("prompt_id") or ""),
            "step": str(header["step"]),
            "split": str(header.get("split") or ""),
        },
    )
    table = group[
        ["rollout_id", "sample_index", "reward", "advantage", "n_tool_calls", "n_turns", "status"]
    ].copy()
    table["open"] = [replay_url(run_id, str(r)) for r in group["rollout_id"]]
    table["this"] = group["rollout_id"] == header["rollout_id"]
    st.dataframe(
        table,
        hide_index=True,
        column_config={
            "rollout_id": "Rollout",
            "sample_index": "Sample",
            "reward": st.column_config.NumberColumn("Reward", format="%.3f"),
            "advantage": st.column_config.NumberColumn("Advantage", format="%+.2f"),
            "n_tool_calls": "Tool calls",
            "n_turns": "Turns",
            "status": "Status",
            "open": st.column_config.LinkColumn("Replay", display_text="Open ↗"),
            "this": st.column_config.CheckboxColumn("This one"),
        },
    )


def render_history(history: pd.DataFrame, header: Mapping[str, Any]) -> None:
    """The prompt step by step: reward, calls, length and the best sample's answer."""
    if history.empty:
        st.info("This prompt appears at no other step.")
        return
    run_id = str(header["run_id"])
    st.caption(
        f"Prompt {escape_markdown(str(header.get('prompt_id')))} over {len(history)} steps "
        f"({escape_markdown(str(header.get('split')))} split)."
    )
    st.line_chart(
        history.set_index("step")[["mean_reward", "max_reward", "min_reward"]], height=220
    )
    st.line_chart(history.set_index("step")[["mean_calls", "mean_turns"]], height=180)
    table = history.copy()
    table["open"] = [replay_url(run_id, str(r)) for r in history["best_rollout"]]
    st.dataframe(
        table[
            [
                "step",
                "samples",
                "mean_reward",
                "mean_calls",
                "mean_output_tokens",
                "best_answer",
                "open",
            ]
        ],
        hide_index=True,
        column_config={
            "step": "Step",
            "samples": "Samples",
            "mean_reward": st.column_config.NumberColumn("Mean reward", format="%.3f"),
            "mean_calls": st.column_config.NumberColumn("Mean tool calls", format="%.1f"),
            "mean_output_tokens": st.column_config.NumberColumn(
                "Mean output tokens", format="%.0f"
            ),
            "best_answer": st.column_config.TextColumn("Best sample's answer", width="large"),
            "open": st.column_config.LinkColumn("Best sample", display_text="Open ↗"),
        },
    )


def render_find_hits(hits: pd.DataFrame, term: str) -> None:
    if hits.empty:
        st.caption(f"“{escape_markdown(term)}” does not occur in this rollout.")
        return
    st.caption(
        f"“{escape_markdown(term)}” occurs in {len(hits)} places in {hits['turn'].nunique()} "
        "turns; only those turns are shown below. Clear the box to see every turn."
    )
    st.dataframe(
        hits.rename(
            columns={
                "seq": "Item",
                "turn": "Turn",
                "kind": "Kind",
                "field": "Field",
                "snippet": "Context",
            }
        ),
        hide_index=True,
        height=min(300, 38 + 35 * len(hits)),
    )


def render_exports(store: Store, run_id: str, rollout_id: str) -> None:
    """One-click downloads, generated when clicked."""
    cols = st.columns([1, 1.3, 3])
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", rollout_id)[:80] or "rollout"
    cols[0].download_button(
        "Download JSON",
        lambda: json.dumps(
            replay.export_rollout_json(store, run_id, rollout_id), indent=2, default=str
        ),
        file_name=f"{safe}.json",
        mime="application/json",
        icon=":material/download:",
    )
    cols[1].download_button(
        "Download Markdown",
        lambda: replay.export_rollout_markdown(store, run_id, rollout_id),
        file_name=f"{safe}.md",
        mime="text/markdown",
        icon=":material/download:",
    )


# --- the Compare screen's sections ---------------------------------------------------------


def compare_url(refs: Sequence[replay.CompareRef]) -> str:
    runs = list(dict.fromkeys(r.run_id for r in refs))
    params: list[tuple[str, object]] = (
        [("run", runs[0])] if len(runs) == 1 else [("runs", ",".join(r.run_id for r in refs))]
    )
    params.append(("rollouts", ",".join(r.rollout_id for r in refs)))
    return view_state.page_url("compare", params)


def render_compare_headers(
    headers: Sequence[Mapping[str, Any]], grades: Sequence[pd.DataFrame]
) -> None:
    """One column a rollout: where it is from, its score, grader breakdown and answer."""
    cols = st.columns(len(headers))
    for i, (col, h, g) in enumerate(zip(cols, headers, grades, strict=True)):
        with col, st.container(border=True):
            st.markdown(f"**{chr(65 + i)} · {escape_markdown(str(h['rollout_id']))}**")
            st.caption(
                escape_markdown(
                    f"{h.get('run_name') or h['run_id']} · step {h['step']} · "
                    f"prompt {h.get('prompt_id') or '—'} · sample {h.get('sample_index')}"
                )
            )
            # Two by two: four metrics in a narrow column cut their values.
            m = st.columns(2 if len(headers) > 1 else 4)
            m[0].metric("Reward", _number(h.get("reward"), "{:.3f}"))
            m[1 % len(m)].metric("Calls", f"{int(h.get('n_tool_calls') or 0)}")
            m[2 % len(m)].metric("Turns", f"{int(h.get('n_turns') or 0)}")
            m[3 % len(m)].metric("Status", str(h.get("status")))
            hack = (h.get("metadata") or {}).get("planted_hack")
            if hack:
                st.warning(
                    f"Planted reward hack: {escape_markdown(str(hack))}",
                    icon=":material/bug_report:",
                )
            st.page_link(
                "pages/replay.py",
                label="Open replay",
                icon=":material/play_circle:",
                query_params={"run": str(h["run_id"]), "rollout": str(h["rollout_id"])},
            )
            if not g.empty:
                st.dataframe(
                    g[["grader", "score", "weight", "explanation"]],
                    hide_index=True,
                    column_config={
                        "score": st.column_config.NumberColumn("score", format="%.3f"),
                        "weight": st.column_config.NumberColumn("weight", format="%.2f"),
                    },
                )
            st.markdown("**Final answer**")
            answer = h.get("final_answer")
            st.text(strip_blobs(str(answer)) if answer else "(no final answer)")


def render_aligned(
    turn_numbers: Sequence[int],
    per_rollout: Sequence[Sequence[Turn]],
    sources: Sequence[Source],
    divergence: int | None,
) -> None:
    """Turn by turn, one column a rollout; the first divergence marked above its row."""
    by_number = [{t.number: t for t in turns} for turns in per_rollout]
    for number in turn_numbers:
        if number == divergence:
            st.error(
                f"The trajectories diverge at turn {number}: different tools or arguments.",
                icon=":material/call_split:",
            )
        cols = st.columns(len(per_rollout))
        for col, turns, src in zip(cols, by_number, sources, strict=True):
            with col:
                turn = turns.get(number)
                if turn is None:
                    st.caption(f"(no turn {number})")
                else:
                    render_turn(turn, src, side_by_side=len(per_rollout) == 1)
