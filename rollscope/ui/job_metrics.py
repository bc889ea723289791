"""The Rewards screen's section for what a run's training job reported per step.

An imported fine-tuning events file (`openai_finetune`, or `rollscope pull`) gives per-step
metrics without rollouts: the job's own mean reward, per grader, on train and validation. They
are drawn here, beside the curves computed from rollouts, or alone for a run that has none.
"""

from __future__ import annotations

import streamlit as st

from rollscope.ui import charts_dashboards as charts
from rollscope.ui import dashboard_filters as filters_ui
from rollscope.ui import store_access
from trace_store import metrics

q = store_access.cached_query


def no_rewards_then_job_metrics(view: filters_ui.Filters, smoothing: float) -> None:
    """What the screen shows when no rollout of the view has a reward: why, then the job's
    metrics if any."""
    if not view.rollouts and not q(metrics.step_metric_names)(list(view.run_ids)).empty:
        st.info(
            "These runs have no rollouts, only the metrics their training job reported (below). "
            "Import the job's rollout traces to see how the agent earned its reward.",
            icon=":material/info:",
        )
    else:
        st.info("No rollouts with a reward in this view: widen the steps or choose another split.")
    job_metrics_section(view, smoothing)


def job_metrics_section(view: filters_ui.Filters, smoothing: float) -> None:
    """A metric picker and its chart for the chosen runs; nothing if their jobs reported no
    metrics."""
    reported = q(metrics.step_metric_names)(list(view.run_ids))
    if reported.empty:
        return
    st.subheader("Reported by the training job")
    metric_col, _ = st.columns([1, 2])
    with metric_col:
        metric = filters_ui.trainer_metric_control(sorted(set(reported["metric"])))
    # Metrics not tied to a split (`all`, such as step timings) show under either split.
    splits = None if view.split is None else [view.split, "all"]
    # The step slider's bounds come from rollouts: runs with none have no range to apply.
    steps = view.steps if view.rollouts else None
    frame = q(metrics.step_metrics_by_step)(
        list(view.run_ids), metrics=[metric], splits=splits, steps=steps
    )
    if frame.empty:
        st.caption(f"The job reported {metric} for none of these steps in this split.")
        return
    figure = charts.trainer_metric(frame, view.names, metric, view.run_ids, smoothing=smoothing)
    st.plotly_chart(figure, width="stretch")
    st.caption(
        ("The steps chosen above" if steps else "Every step the job reported")
        + ", smoothed like the curves above. Validation is dashed."
    )
