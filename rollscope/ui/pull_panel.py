"""The Runs screen's "Pull from the OpenAI API" panel: a fine-tuning job's metrics or an eval run's
output items, fetched with the `openai` client (trace_store.pull) and imported in one go."""

from __future__ import annotations

import os

import streamlit as st

from rollscope.ui import render, store_access
from trace_store import IngestResult, Store
from trace_store.pull import DEFAULT_BASE_URL, pull_eval_run, pull_finetune_metrics

RESULT = "runs.pull.result"  # the last pull's summary, shown after the rerun
FINETUNE = "Fine-tuning job metrics"
EVAL_RUN = "Eval run output items"


def show(store: Store) -> None:
    """An expander with the ids to pull, the key and base URL (defaults from the environment)."""
    done = st.session_state.pop(RESULT, None)
    with st.expander(
        "Pull from the OpenAI API", expanded=done is not None, icon=":material/cloud_download:"
    ):
        if done is not None:
            st.success(render.escape_markdown(done), icon=":material/check_circle:")
        source = st.radio(
            "What to pull",
            [FINETUNE, EVAL_RUN],
            horizontal=True,
            key="runs.pull.source",
            help="A fine-tuning job's `metrics` events give its per-step reward curves (no "
            "rollouts); an eval run's output items become rollouts with their grades.",
        )
        job_id = eval_id = run_id = ""
        if source == FINETUNE:
            job_id = st.text_input(
                "Fine-tuning job id", placeholder="ftjob-...", key="runs.pull.job"
            )
        else:
            left, right = st.columns(2)
            eval_id = left.text_input("Eval id", placeholder="eval_...", key="runs.pull.eval")
            run_id = right.text_input("Eval run id", placeholder="evalrun_...", key="runs.pull.run")
        key_col, url_col = st.columns(2)
        has_env_key = bool(os.environ.get("OPENAI_API_KEY"))
        api_key = key_col.text_input(
            "API key",
            type="password",
            key="runs.pull.api_key",
            placeholder="from OPENAI_API_KEY" if has_env_key else "sk-...",
            help="Kept in this browser session only. Empty: the app's OPENAI_API_KEY.",
        )
        base_url = url_col.text_input(
            "Base URL",
            key="runs.pull.base_url",
            placeholder=os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL,
            help="Empty: the app's OPENAI_BASE_URL, else the OpenAI API.",
        )
        ready = (
            bool(job_id.strip()) if source == FINETUNE else bool(eval_id.strip() and run_id.strip())
        )
        if not ready:
            st.caption("Enter the ids above (press Enter) and a Pull button appears.")
            return
        if not st.button("Pull", type="primary", icon=":material/download:", key="runs.pull.go"):
            return
        status = st.empty()

        def fetched(count: int) -> None:
            status.text(f"Fetched {count:,} objects…")

        key, url = api_key or None, base_url or None
        result: IngestResult
        try:
            with st.spinner("Pulling from the API…"):
                if source == FINETUNE:
                    result = pull_finetune_metrics(
                        store, job_id, api_key=key, base_url=url, progress=fetched
                    )
                else:
                    result = pull_eval_run(
                        store, eval_id, run_id, api_key=key, base_url=url, progress=fetched
                    )
        except Exception as exc:
            status.empty()
            render.show_error(exc, context="Pull from the OpenAI API")
            return
        store_access.after_import()
        st.session_state[RESULT] = result.summary()
        st.rerun()
