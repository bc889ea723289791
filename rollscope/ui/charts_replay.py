"""Figures of the Replay and Compare screens. Pure builders: DataFrame in, go.Figure out.

Plotly reads a subset of HTML in text (``<b>``, ``<a href>``, entities), so trace content
(tool names) is HTML-escaped before it reaches a label or a hover text.
"""

from __future__ import annotations

import html

import pandas as pd
import plotly.graph_objects as go

COLORS = {"reasoning": "#b0b7c3", "tool_call": "#3b82f6", "failed": "#dc2626"}


def timeline_figure(spans: pd.DataFrame) -> go.Figure:
    """A Gantt-like chart: one bar a span (reasoning or tool call) from `tool_timeline`,
    laid out top to bottom in trajectory order, x = seconds since the rollout started.

    Parallel calls start together and stack; a serial chain steps down and to the right; a
    slow call is a long bar.
    """
    fig = go.Figure()
    if spans.empty:
        fig.update_layout(
            height=160,
            annotations=[
                {"text": "No tool calls or reasoning spans", "showarrow": False, "x": 0.5, "y": 0.5}
            ],
            xaxis={"visible": False},
            yaxis={"visible": False},
        )
        return fig
    rows = spans.reset_index(drop=True)
    labels = [
        f"{i + 1}. {html.escape(str(label))} (turn {int(turn)})"
        for i, (label, turn) in enumerate(zip(rows["label"], rows["turn"], strict=True))
    ]
    kinds = [
        "failed" if failed else ("tool_call" if kind == "tool_call" else "reasoning")
        for kind, failed in zip(rows["kind"], rows["failed"], strict=True)
    ]
    for kind, name in (
        ("tool_call", "tool call"),
        ("failed", "failed call"),
        ("reasoning", "reasoning"),
    ):
        mask = [k == kind for k in kinds]
        if not any(mask):
            continue
        part = rows[mask]
        part_labels = [label for label, m in zip(labels, mask, strict=True) if m]
        fig.add_trace(
            go.Bar(
                name=name,
                orientation="h",
                y=part_labels,
                base=part["start_ms"] / 1000.0,
                x=part["duration_ms"].clip(lower=1) / 1000.0,
                marker_color=COLORS[kind],
                customdata=part["duration_ms"],
                hovertemplate="%{y}<br>start %{base:.2f} s · %{customdata:.0f} ms<extra></extra>",
            )
        )
    fig.update_layout(
        barmode="overlay",
        height=max(220, 22 * len(rows) + 90),
        margin={"l": 10, "r": 10, "t": 30, "b": 40},
        xaxis_title="seconds since the rollout started",
        legend={"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 0},
    )
    fig.update_yaxes(categoryorder="array", categoryarray=labels[::-1], automargin=True)
    return fig


def deltas_figure(deltas: pd.DataFrame, run_a: str, run_b: str) -> go.Figure:
    """Per prompt: reward in run A (x) against run B (y); above the diagonal improved."""
    fig = go.Figure()
    colors = {"improved": "#16a34a", "regressed": "#dc2626", "same": "#6b7280"}
    for change, part in deltas.groupby("change", sort=True):
        fig.add_trace(
            go.Scatter(
                x=part["reward_a"],
                y=part["reward_b"],
                mode="markers",
                name=str(change),
                marker={"color": colors.get(str(change), "#6b7280"), "size": 9},
                text=[html.escape(str(p)) for p in part["prompt_id"]],
                hovertemplate="%{text}<br>A %{x:.3f} → B %{y:.3f}<extra></extra>",
            )
        )
    lo = float(min(deltas["reward_a"].min(), deltas["reward_b"].min(), 0.0)) if len(deltas) else 0
    hi = float(max(deltas["reward_a"].max(), deltas["reward_b"].max(), 1.0)) if len(deltas) else 1
    fig.add_shape(type="line", x0=lo, y0=lo, x1=hi, y1=hi, line={"dash": "dot", "color": "#999"})
    fig.update_layout(
        height=380,
        margin={"l": 10, "r": 10, "t": 30, "b": 40},
        xaxis_title=f"mean reward in {html.escape(run_a)}",
        yaxis_title=f"mean reward in {html.escape(run_b)}",
    )
    return fig
