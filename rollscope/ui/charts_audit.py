"""Figures of the Audit screen: DataFrame in, ``go.Figure`` out (no Streamlit here)."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

SEVERITY_COLORS = {"high": "#d62728", "medium": "#ff7f0e", "low": "#7f7f7f"}
OUTCOME_COLORS = {"win": "#2ca02c", "tie": "#9e9e9e", "loss": "#d62728"}


def _layout(fig: go.Figure, title: str, height: int = 320) -> go.Figure:
    fig.update_layout(
        title=title,
        height=height,
        margin={"l": 10, "r": 10, "t": 50, "b": 10},
        legend={"orientation": "h", "y": -0.3},
    )
    return fig


def flags_by_detector(df: pd.DataFrame) -> go.Figure:
    """Horizontal bars: flagged rollouts per detector, colored by severity."""
    fig = go.Figure(
        go.Bar(
            x=df["flagged"],
            y=df["detector"],
            orientation="h",
            marker_color=[SEVERITY_COLORS.get(s, "#1f77b4") for s in df["severity"]],
            customdata=df[["severity", "share"]],
            hovertemplate="%{y}<br>%{x} flagged (%{customdata[1]:.2%})"
            "<br>severity %{customdata[0]}<extra></extra>",
        )
    )
    fig.update_yaxes(autorange="reversed")
    fig.update_xaxes(title="flagged rollouts")
    return _layout(fig, "Flags by detector", height=max(220, 60 + 36 * len(df)))


def flag_rate_over_steps(df: pd.DataFrame) -> go.Figure:
    """Share of rollouts flagged per step (one line a detector, `any` thick) against mean reward:
    is hacking rising as reward rises?"""
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    for detector, part in df.groupby("detector", sort=True):
        fig.add_trace(
            go.Scatter(
                x=part["step"],
                y=part["rate"],
                name=str(detector),
                mode="lines",
                line={"width": 3 if detector == "any" else 1.5},
                hovertemplate="step %{x}: %{y:.2%} flagged<extra>" + str(detector) + "</extra>",
            ),
            secondary_y=False,
        )
    reward = df.drop_duplicates("step").sort_values("step")
    fig.add_trace(
        go.Scatter(
            x=reward["step"],
            y=reward["mean_reward"],
            name="mean reward",
            mode="lines",
            line={"color": "#444", "dash": "dot"},
        ),
        secondary_y=True,
    )
    fig.update_yaxes(title="flagged share", tickformat=".1%", secondary_y=False)
    fig.update_yaxes(title="mean reward", secondary_y=True)
    fig.update_xaxes(title="step")
    return _layout(fig, "Flag rate over steps")


def learning_signal(df: pd.DataFrame) -> go.Figure:
    """Per step: share of prompts with no reward variance, and the mean within-prompt spread."""
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    fig.add_trace(
        go.Scatter(x=df["step"], y=df["no_signal_share"], name="prompts with no signal"),
        secondary_y=False,
    )
    fig.add_trace(
        go.Scatter(x=df["step"], y=df["mean_spread"], name="mean within-prompt spread"),
        secondary_y=True,
    )
    fig.update_yaxes(title="share of prompts", tickformat=".0%", secondary_y=False)
    fig.update_yaxes(title="reward std within a prompt", secondary_y=True)
    fig.update_xaxes(title="step")
    return _layout(fig, "Learning signal per step")


def pass_vs_mean(df: pd.DataFrame) -> go.Figure:
    """pass@k against mean@k per step: the gap is what more samples can find."""
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=df["step"], y=df["pass_at_k"], name="pass@k", mode="lines"))
    fig.add_trace(go.Scatter(x=df["step"], y=df["mean_at_k"], name="mean@k", mode="lines"))
    fig.update_yaxes(title="share of prompts", tickformat=".0%", range=[0, 1.02])
    fig.update_xaxes(title="step")
    return _layout(fig, "pass@k against mean@k")


def baseline_deltas(df: pd.DataFrame) -> go.Figure:
    """Per prompt: fine-tuned minus baseline mean reward, colored win / tie / loss."""
    fig = go.Figure(
        go.Bar(
            x=df["prompt_id"],
            y=df["delta"],
            marker_color=[OUTCOME_COLORS.get(o, "#1f77b4") for o in df["outcome"]],
            customdata=df[["baseline", "candidate", "outcome"]],
            hovertemplate="%{x}: %{y:+.3f}<br>baseline %{customdata[0]:.3f} → "
            "%{customdata[1]:.3f} (%{customdata[2]})<extra></extra>",
        )
    )
    fig.update_yaxes(title="reward delta", zeroline=True)
    fig.update_xaxes(title="prompt", type="category")
    return _layout(fig, "Fine-tuned against baseline, per prompt")
