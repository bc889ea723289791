"""The Audit screen's panels: flags, RFT diagnostics, user rules, the LLM judge.

Each panel reads its view state from the URL (through `view_state`), calls the store's query
functions (cached until something writes), and renders. The judge runs in a background thread;
its progress lives in a module-level registry, so a reload (or a teammate on the same server)
sees the running job and can stop it.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import streamlit as st

from rollscope.ui import charts_audit as charts
from rollscope.ui import render, store_access, view_state
from trace_store import Store, audit, judge

flags_by_detector = store_access.cached_query(audit.flags_by_detector)
flag_rate_by_step = store_access.cached_query(audit.flag_rate_by_step)
flagged_rollouts = store_access.cached_query(audit.flagged_rollouts)
signal_by_step = store_access.cached_query(audit.signal_by_step)
run_signals = store_access.cached_query(audit.run_signals)
baseline_comparison = store_access.cached_query(audit.baseline_comparison)
verdicts = store_access.cached_query(judge.verdicts)
judge_vs_reward = store_access.cached_query(judge.judge_vs_reward)
judged_models = store_access.cached_query(judge.judged_models)

SUMMARY = "audit.last_summary"
TEMPLATE = "audit.judge_template"


# --- links -------------------------------------------------------------------------------------


def replay_url(run_id: str, rollout_id: str) -> str:
    return view_state.page_url("replay", [("run", run_id), ("rollout", rollout_id)])


def compare_url(run_id: str, left: str, right: str) -> str:
    """Two rollouts of a run side by side (the compare screen reads ``run`` and ``rollout``)."""
    return view_state.page_url("compare", [("run", run_id), ("rollout", [left, right])])


def _links(df: pd.DataFrame, run_id: str, clean_column: str | None = None) -> pd.DataFrame:
    out = df.copy()
    out["replay"] = [replay_url(run_id, r) for r in out["rollout_id"]]
    if clean_column:
        out["compare"] = [
            compare_url(run_id, r, c) if isinstance(c, str) and c else None
            for r, c in zip(out["rollout_id"], out[clean_column], strict=True)
        ]
    return out


def _seqs(value: Any) -> str:
    """Event numbers as text ("3, 5"); "" for none."""
    if value is None or isinstance(value, str) or not hasattr(value, "__iter__"):
        return ""
    return ", ".join(str(int(x)) for x in value)


LINK_COLUMNS = {
    "replay": st.column_config.LinkColumn("Replay", display_text="Replay ↗"),
    "compare": st.column_config.LinkColumn("Compare", display_text="vs clean sample ↗"),
}


# --- flags -------------------------------------------------------------------------------------


def flags_panel(store: Store, run_id: str) -> None:
    with st.expander("What the detectors look for"):
        st.dataframe(
            pd.DataFrame(
                [(d.name, d.severity, d.description) for d in audit.BUILTIN_DETECTORS],
                columns=["detector", "severity", "looks for"],
            ),
            column_config={"looks for": st.column_config.TextColumn(width="large")},
            hide_index=True,
            width="stretch",
        )
    left, right = st.columns([1, 3])
    with left:
        budget = view_state.number_input(
            "Tool-call budget", "budget", default=audit.AuditParams().tool_budget, min_value=1
        )
        if st.button("Run detectors and rules", type="primary", icon=":material/policy:"):
            try:
                with st.spinner("Running the detectors…"):
                    summary = audit.run_detectors(
                        store, run_id, params=audit.AuditParams(tool_budget=int(budget))
                    )
            except Exception as exc:
                render.show_error(exc, context="Running the detectors")
            else:
                store_access.after_import()
                st.session_state[SUMMARY] = summary.lines()
    with right:
        if lines := st.session_state.get(SUMMARY):
            st.code("\n".join(lines), language=None)

    by_detector = flags_by_detector(run_id)
    if by_detector.empty:
        st.info(
            "No flags for this run yet. Run the detectors (or `rollscope audit --run RUN_ID`) to "
            "look for reward hacks."
        )
    else:
        c1, c2 = st.columns(2)
        c1.plotly_chart(charts.flags_by_detector(by_detector), width="stretch")
        c2.plotly_chart(charts.flag_rate_over_steps(flag_rate_by_step(run_id)), width="stretch")

    for signal in run_signals(run_id):
        text = render.escape_markdown(signal.message)
        if signal.raised:
            st.warning(f"**{signal.name.replace('_', ' ')}**: {text}", icon=":material/warning:")
        else:
            st.caption(f"{signal.name.replace('_', ' ')}: {text}")

    if by_detector.empty:
        return
    detectors = ["all", *by_detector["detector"].tolist()]
    chosen = view_state.selectbox("Detector", "detector", detectors, "all")
    rows = flagged_rollouts(run_id, detector=None if chosen == "all" else chosen)
    st.subheader(f"Flagged rollouts ({len(rows):,})")
    if rows.empty:
        st.info("No rollout is flagged by this detector.")
        return
    table = _links(rows, run_id, "clean_rollout_id")
    table["evidence"] = [_seqs(ev) for ev in table["evidence"]]
    st.dataframe(
        table[
            [
                "step",
                "rollout_id",
                "detector",
                "severity",
                "replay",
                "compare",
                "reward",
                "evidence",
                "reason",
            ]
        ],
        column_config={
            **LINK_COLUMNS,
            "rollout_id": st.column_config.TextColumn("Rollout"),
            "evidence": st.column_config.TextColumn("Events"),
            "reason": st.column_config.TextColumn("Reason", width="large"),
            "reward": st.column_config.NumberColumn("Reward", format="%.3f"),
        },
        hide_index=True,
        width="stretch",
    )


# --- diagnostics -------------------------------------------------------------------------------


def diagnostics_panel(store: Store, run_id: str, runs: pd.DataFrame) -> None:
    threshold = view_state.number_input(
        "A sample passes at reward ≥",
        "pass",
        default=0.9,
        min_value=0.0,
        max_value=1e9,
        step=0.05,
    )
    per_step = signal_by_step(run_id, pass_threshold=float(threshold))
    if per_step.empty:
        st.info("This run has no train-split rollouts to read a learning signal from.")
    else:
        c1, c2 = st.columns(2)
        c1.plotly_chart(charts.learning_signal(per_step), width="stretch")
        c2.plotly_chart(charts.pass_vs_mean(per_step), width="stretch")

    st.subheader("Against a baseline")
    others = [r for r in runs["run_id"].astype(str) if r != run_id]
    if not others:
        st.info("Import a baseline run (the same prompts before fine-tuning) to compare against.")
        return
    kinds = dict(zip(runs["run_id"].astype(str), runs["kind"].fillna(""), strict=True))
    default = next((r for r in others if kinds.get(r) == "baseline"), others[0])
    baseline = view_state.selectbox("Baseline run", "baseline", others, default)
    versus = baseline_comparison(baseline, run_id)
    if versus.empty:
        st.info("The two runs share no prompts.")
        return
    counts = versus["outcome"].value_counts()
    c = st.columns(4)
    c[0].metric("Prompts", f"{len(versus):,}")
    c[1].metric("Wins", int(counts.get("win", 0)))
    c[2].metric("Ties", int(counts.get("tie", 0)))
    c[3].metric("Losses", int(counts.get("loss", 0)))
    st.plotly_chart(charts.baseline_deltas(versus), width="stretch")
    regressed = versus[versus["outcome"] == "loss"]
    st.caption(f"Prompts that regressed ({len(regressed)})")
    st.dataframe(
        regressed[["prompt_id", "prompt", "baseline", "candidate", "delta", "candidate_step"]],
        hide_index=True,
        width="stretch",
    )


# --- user rules ----------------------------------------------------------------------------------


def rules_panel(store: Store) -> None:
    rules = audit.list_rules(store)
    if rules:
        st.dataframe(
            pd.DataFrame([r.__dict__ for r in rules]),
            hide_index=True,
            width="stretch",
        )
    else:
        st.info(
            "No rules yet. A rule is a SQL condition over rollouts_view "
            f"({audit.ROLLOUTS_VIEW_COLUMNS}) or a regular expression over event text."
        )
    with st.form("audit.rule_form"):
        st.markdown("**Add or replace a rule**")
        name = st.text_input("Name")
        kind = st.radio("Kind", ["sql", "regex"], horizontal=True,
                        format_func=lambda k: "SQL condition" if k == "sql" else "Regular expression")  # fmt: skip
        pattern = st.text_area(
            "Condition or pattern",
            placeholder="reward >= 1 AND n_tool_calls = 0   |   (?i)skip.*flaky",
        )
        severity = st.selectbox("Severity", audit.SEVERITIES, index=1)
        reason = st.text_input("Reason shown on flags (optional)")
        on_import = st.checkbox("Run after every import")
        if st.form_submit_button("Save rule", type="primary"):
            rule = audit.UserRule(
                name.strip(), kind, pattern.strip(), severity, reason.strip() or None, on_import
            )
            try:
                audit.save_rule(store, rule)
            except Exception as exc:
                render.show_error(exc, context="Saving the rule")
            else:
                store_access.after_import()
                st.success(f"Saved the rule “{render.escape_markdown(rule.name)}”.")
                st.rerun()
    if rules:
        c1, c2 = st.columns([3, 1])
        doomed = c1.selectbox("Delete a rule", [r.name for r in rules], index=None)
        if c2.button("Delete", disabled=doomed is None) and doomed is not None:
            audit.delete_rule(store, doomed)
            store_access.after_import()
            st.rerun()


# --- the judge -----------------------------------------------------------------------------------


@dataclass
class JudgeJob:
    run_id: str
    total: int
    stop: threading.Event = field(default_factory=threading.Event)
    done: int = 0
    judged: int = 0
    errors: int = 0
    spent_usd: float = 0.0
    finished: bool = False
    outcome: str | None = None
    messages: list[str] = field(default_factory=list)
    thread: threading.Thread | None = None


_JOBS: dict[tuple[str, str], JudgeJob] = {}
_JOBS_LOCK = threading.Lock()


def _start_job(
    store: Store, run_id: str, targets: list[tuple[str, str]], settings: judge.JudgeSettings
) -> JudgeJob:
    job = JudgeJob(run_id=run_id, total=len(targets))
    client = judge.make_client(settings)  # a missing key fails here, on the page

    def progress(run: judge.JudgeRun, _run: str, _rollout: str) -> None:
        job.done, job.judged, job.errors, job.spent_usd = (
            run.done,
            run.judged,
            run.errors,
            run.spent_usd,
        )

    def work() -> None:
        try:
            result = judge.judge_rollouts(
                store, targets, settings, client=client, stop=job.stop, progress=progress
            )
            job.messages = result.messages
            job.outcome = result.stopped
        except Exception as exc:
            job.outcome = f"error: {render.error_title_and_message(exc)[1]} ({exc})"
        finally:
            job.finished = True

    job.thread = threading.Thread(target=work, name=f"judge-{run_id}", daemon=True)
    with _JOBS_LOCK:
        _JOBS[(str(store.path), run_id)] = job
    job.thread.start()
    return job


def _job(store: Store, run_id: str) -> JudgeJob | None:
    with _JOBS_LOCK:
        return _JOBS.get((str(store.path), run_id))


def _show_job(job: JudgeJob) -> None:
    fraction = job.done / job.total if job.total else 1.0
    text = (
        f"{job.done:,} of {job.total:,} rollouts: {job.judged:,} judged, {job.errors:,} errors, "
        f"${job.spent_usd:.4f} spent"
    )
    st.progress(min(fraction, 1.0), text=text)
    if not job.finished:
        if st.button("Stop the judge", icon=":material/stop_circle:"):
            job.stop.set()
            st.info("Stopping after the current rollout…")
        return
    if job.outcome:
        st.warning(f"The judge stopped early: {render.escape_markdown(job.outcome)}")
    else:
        st.success("The judge finished.")
    for message in job.messages[:20]:
        st.caption(render.escape_markdown(message))


def judge_panel(store: Store, run_id: str) -> None:
    c1, c2 = st.columns(2)
    with c1:
        model = st.text_input(
            "Judge model",
            value=view_state.raw_values("model")[-1] if view_state.raw_values("model") else "",
            placeholder="e.g. gpt-4.1-mini",
        ).strip()
        view_state.write_param("model", model or None)
        base_url = st.text_input(
            "Base URL (empty: $OPENAI_BASE_URL or OpenAI)",
            value=os.environ.get("OPENAI_BASE_URL", ""),
        )
        api_key = st.text_input(
            "API key (empty: $OPENAI_API_KEY)",
            type="password",
            help="Never stored or put in the URL.",
        )
    with c2:
        which = view_state.selectbox(
            "Rollouts to judge",
            "judge_set",
            list(judge.TARGET_SETS),
            "flagged_and_clean",
            format_func=lambda w: {
                "flagged": "flagged rollouts",
                "flagged_and_clean": "flagged + a clean sample of each prompt",
                "sample": "a sample of the run",
                "high_reward": "a sample of high-reward rollouts",
            }[w],
        )
        limit = view_state.number_input(
            "At most", "judge_limit", default=40, min_value=1, max_value=5000
        )
        max_chars = view_state.number_input(
            "Trajectory budget (characters)",
            "judge_chars",
            default=24000,
            min_value=2000,
            max_value=2_000_000,
        )
        p1, p2, p3 = st.columns(3)
        price_in = p1.number_input("$ / M input tokens", min_value=0.0, value=0.4, step=0.1)
        price_out = p2.number_input("$ / M output tokens", min_value=0.0, value=1.6, step=0.1)
        cap = p3.number_input("Cost cap ($)", min_value=0.0, value=1.0, step=0.5)

    if TEMPLATE not in st.session_state:
        st.session_state[TEMPLATE] = judge.DEFAULT_TEMPLATE
    template = str(st.session_state[TEMPLATE])
    with st.expander(f"Prompt template (version {judge.template_version(template)})"):
        st.text_area(
            "Placeholders: {prompt} {reference} {reward} {grades} {trajectory} {final_answer}",
            key=TEMPLATE,
            height=320,
        )
        st.button("Reset to the default template", on_click=_reset_template)

    settings = judge.JudgeSettings(
        model=model or "(choose a model)",
        api_key=api_key or None,
        base_url=base_url.strip() or None,
        template=template,
        max_chars=int(max_chars),
        cost_cap_usd=float(cap),
        input_usd_per_mtok=float(price_in),
        output_usd_per_mtok=float(price_out),
    )
    try:
        targets = judge.judge_targets(store, run_id, which, int(limit))
        estimate = judge.estimate_cost(store, targets, settings)
    except Exception as exc:
        render.show_error(exc, context="Preparing the judge")
        return
    st.caption(
        f"{estimate.rollouts:,} rollouts: {estimate.already_judged:,} already judged with this "
        f"model and template, {estimate.to_judge:,} to judge, about "
        f"{estimate.input_tokens:,} input + {estimate.output_tokens:,} output tokens ≈ "
        f"${estimate.usd:.4f}; {estimate.within_cap:,} fit under the cap."
    )
    if targets:
        with st.expander("What the judge sees for the first rollout"):
            prompt, condensed = judge.judge_prompt(store, targets[0][0], targets[0][1], settings)
            if condensed.was_cut:
                st.caption(
                    f"Condensed from {condensed.original_chars:,} characters: "
                    + render.escape_markdown("; ".join(condensed.cuts[:12]))
                )
            render.show_code(prompt)

    job = _job(store, run_id)
    running = job is not None and not job.finished
    if st.button(
        "Start judging",
        type="primary",
        disabled=running or not model or estimate.to_judge == 0,
        icon=":material/gavel:",
    ):
        try:
            job = _start_job(store, run_id, targets, settings)
        except Exception as exc:
            render.show_error(exc, context="Starting the judge")
    if job is not None:
        _progress_fragment(store, run_id)

    _verdict_views(run_id, model)


def _reset_template() -> None:
    st.session_state[TEMPLATE] = judge.DEFAULT_TEMPLATE


def _progress_fragment(store: Store, run_id: str) -> None:
    """The job's progress, redrawn every second while it runs; the page reloads when it ends."""
    job = _job(store, run_id)
    if job is None:
        return

    def draw() -> None:
        _show_job(job)
        seen = f"audit.job_seen.{id(job)}"
        if job.finished and not st.session_state.get(seen):
            st.session_state[seen] = True
            store_access.after_import()
            st.rerun()

    st.fragment(draw, run_every=None if job.finished else 1.0)()


def _verdict_views(run_id: str, model: str) -> None:
    models = judged_models(run_id)
    if models.empty:
        return
    st.subheader("Judge against reward")
    choices = [
        f"{m} · {t}" for m, t in zip(models["model"], models["template_version"], strict=True)
    ]
    picked = view_state.selectbox("Verdicts of", "verdicts_of", choices, choices[0])
    chosen_model, chosen_template = picked.split(" · ", 1)
    table = judge_vs_reward(run_id, model=chosen_model, template=chosen_template)
    st.dataframe(table, hide_index=True)
    rows = verdicts(run_id, model=chosen_model, template=chosen_template)
    if rows.empty:
        return
    best = float(rows["reward"].max()) if rows["reward"].notna().any() else 0.0
    high = rows["reward"].fillna(0) >= 0.9 * best
    rows["disagrees"] = (high & rows["verdict"].isin(["hack", "suspicious"])) | (
        ~high & (rows["verdict"] == "legitimate")
    )
    only = view_state.toggle("Only disagreements with the reward", "disagree", False)
    shown = _links(rows[rows["disagrees"]] if only else rows, run_id)
    shown["cited_events"] = [_seqs(ev) for ev in shown["cited_events"]]
    st.dataframe(
        shown[
            [
                "step",
                "rollout_id",
                "reward",
                "verdict",
                "confidence",
                "replay",
                "error",
                "cited_events",
                "rationale",
            ]
        ],
        column_config={
            **LINK_COLUMNS,
            "rollout_id": st.column_config.TextColumn("Rollout"),
            "cited_events": st.column_config.TextColumn("Events"),
            "rationale": st.column_config.TextColumn("Rationale", width="large"),
        },
        hide_index=True,
        width="stretch",
    )


def run_choice(runs: pd.DataFrame) -> str:
    """The run under audit, bound to ``?run=``."""
    ids = runs["run_id"].astype(str).tolist()
    names = dict(zip(ids, runs["name"].fillna(runs["run_id"]).astype(str), strict=True))
    kinds = dict(zip(ids, runs["kind"].fillna(""), strict=True))
    default = next((r for r in ids if kinds.get(r) == "train"), ids[0])
    chosen: str = view_state.selectbox(
        "Run", "run", ids, default, format_func=lambda r: f"{names[r]} ({r})"
    )
    return chosen


VIEWS: dict[str, str] = {
    "flags": "Flags",
    "diagnostics": "RFT diagnostics",
    "rules": "Rules",
    "judge": "LLM judge",
}


def view_choice() -> str:
    chosen: str = view_state.selectbox(
        "View", "view", list(VIEWS), "flags", format_func=lambda v: VIEWS[v]
    )
    return chosen
