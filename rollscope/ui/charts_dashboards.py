"""Plotly figures of the Rewards, Tool calls and Latency screens: a frame in, a figure out.

The frames are those of `trace_store.dashboards`; `names` maps a run id to the name shown in
legends (trace content: Plotly renders legend and hover text as text, and `_label` strips the
few HTML-like characters Plotly would interpret). Runs keep one colour across every chart.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd
import plotly.graph_objects as go
from plotly.colors import qualitative
from plotly.subplots import make_subplots

PALETTE = qualitative.Plotly
TOOL_PALETTE = qualitative.Set2 + qualitative.Pastel1
HEIGHT = 420


def _label(text: object) -> str:
    """Plotly interprets a few HTML tags in labels; show them as typed instead."""
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def run_color(run_id: str, order: Sequence[str]) -> str:
    index = list(order).index(run_id) if run_id in order else len(order)
    return PALETTE[index % len(PALETTE)]


def _fade(color: str, alpha: float) -> str:
    color = color.lstrip("#")
    r, g, b = (int(color[i : i + 2], 16) for i in (0, 2, 4))
    return f"rgba({r},{g},{b},{alpha})"


def _layout(fig: go.Figure, title: str, *, x: str = "step", y: str = "", **kw: object) -> go.Figure:
    fig.update_layout(
        title={"text": title, "font": {"size": 15}},
        height=HEIGHT,
        margin={"l": 10, "r": 10, "t": 40, "b": 10},
        legend={"orientation": "h", "yanchor": "top", "y": -0.2 if x else -0.1, "x": 0},
        hovermode="closest",
        **kw,
    )
    fig.update_xaxes(title_text=x)
    fig.update_yaxes(title_text=y)
    return fig


def _runs(frame: pd.DataFrame) -> list[str]:
    return list(dict.fromkeys(frame["run_id"])) if "run_id" in frame else []


def _series(frame: pd.DataFrame, names: Mapping[str, str], run_id: str, what: str) -> str:
    """A trace's legend entry: `what`, after the run's name when several runs are shown."""
    if len(_runs(frame)) <= 1:
        return what
    return f"{_label(names.get(run_id, run_id))} {what}"


def _mode(rows: pd.DataFrame) -> str:
    """Lines, with markers where a run has a single step (a line of one point is invisible)."""
    return "lines+markers" if len(rows) <= 1 else "lines"


def ema(values: pd.Series, weight: float) -> pd.Series:
    """Exponential moving average: each point keeps `weight` of the previous smoothed value
    (0 = no smoothing). Gaps (NaN) are skipped."""
    if weight <= 0:
        return values
    return values.ewm(alpha=1.0 - weight, ignore_na=True).mean()


# --- rewards -----------------------------------------------------------------------------------


def reward_curve(
    frame: pd.DataFrame,
    names: Mapping[str, str],
    *,
    band_label: str = "p10–p90",
    smoothing: float = 0.0,
    selected_step: int | None = None,
    order: Sequence[str] = (),
) -> go.Figure:
    """Mean reward per step (click a point to open that step) with a quantile band and the
    median; with `smoothing` > 0 the mean and median are EMA-smoothed and the raw means shown
    as faint points (still clickable)."""
    fig = go.Figure()
    order = list(order) or _runs(frame)
    for run_id in _runs(frame):
        rows = frame[frame["run_id"] == run_id].sort_values("step")
        name = _label(names.get(run_id, run_id))
        color = run_color(run_id, order)
        steps = rows["step"]
        fig.add_trace(
            go.Scatter(
                x=pd.concat([steps, steps[::-1]]),
                y=pd.concat(
                    [ema(rows["band_hi"], smoothing), ema(rows["band_lo"], smoothing)[::-1]]
                ),
                fill="toself",
                fillcolor=_fade(color, 0.15),
                line={"width": 0},
                hoverinfo="skip",
                name=f"{name} {band_label}",
                legendgroup=run_id,
                showlegend=True,
            )
        )
        fig.add_trace(
            go.Scatter(
                x=steps,
                y=ema(rows["median"], smoothing),
                mode="lines",
                line={"color": color, "dash": "dot", "width": 1.5},
                name=f"{name} median",
                legendgroup=run_id,
                hovertemplate="step %{x}<br>median %{y:.3f}<extra></extra>",
            )
        )
        smoothed = smoothing > 0
        fig.add_trace(
            go.Scatter(
                x=steps,
                y=rows["mean"],
                mode="markers" if smoothed else "lines+markers",
                marker={
                    "color": color,
                    "size": 5 if smoothed else 6,
                    "opacity": 0.35 if smoothed else 1,
                },
                line={"color": color, "width": 2},
                name=f"{name} mean",
                legendgroup=run_id,
                customdata=[[run_id]] * len(rows),
                hovertemplate="step %{x}<br>mean %{y:.3f}<br>click to open the step<extra></extra>",
            )
        )
        if smoothed:
            fig.add_trace(
                go.Scatter(
                    x=steps,
                    y=ema(rows["mean"], smoothing),
                    mode="lines",
                    line={"color": color, "width": 2.5},
                    name=f"{name} mean (EMA)",
                    legendgroup=run_id,
                    hoverinfo="skip",
                )
            )
    if selected_step is not None:
        fig.add_vline(x=selected_step, line={"color": "#888", "dash": "dash", "width": 1})
    _layout(fig, "Reward per step", y="reward", clickmode="event+select", dragmode="zoom")
    return fig


def grader_curves(
    frame: pd.DataFrame,
    names: Mapping[str, str],
    *,
    smoothing: float = 0.0,
    order: Sequence[str] = (),
    single: bool = False,
) -> go.Figure:
    """Mean score per step of each grader (colour: grader; dash: run). For one grader
    (`single`), each run's p10–p90 band too."""
    fig = go.Figure()
    order = list(order) or _runs(frame)
    grader_names = sorted(frame["grader"].unique()) if len(frame) else []
    dashes = ["solid", "dash", "dot", "dashdot", "longdash"]
    for run_index, run_id in enumerate(_runs(frame)):
        for g_index, grader in enumerate(grader_names):
            rows = frame[(frame["run_id"] == run_id) & (frame["grader"] == grader)].sort_values(
                "step"
            )
            if rows.empty:
                continue
            color = run_color(run_id, order) if single else PALETTE[(g_index + 3) % len(PALETTE)]
            label = _label(grader)
            if len(_runs(frame)) > 1:
                label += f" · {_label(names.get(run_id, run_id))}"
            if single:
                fig.add_trace(
                    go.Scatter(
                        x=pd.concat([rows["step"], rows["step"][::-1]]),
                        y=pd.concat(
                            [ema(rows["p90"], smoothing), ema(rows["p10"], smoothing)[::-1]]
                        ),
                        fill="toself",
                        fillcolor=_fade(color, 0.15),
                        line={"width": 0},
                        hoverinfo="skip",
                        showlegend=False,
                    )
                )
            fig.add_trace(
                go.Scatter(
                    x=rows["step"],
                    y=ema(rows["mean"], smoothing),
                    mode=_mode(rows),
                    line={"color": color, "dash": dashes[run_index % len(dashes)], "width": 2},
                    name=label,
                    customdata=rows[["weight", "contribution"]].to_numpy(),
                    hovertemplate=(
                        f"{label}<br>step %{{x}}<br>mean score %{{y:.3f}}<br>weight "
                        "%{customdata[0]:.2f}, contributes %{customdata[1]:.3f}<extra></extra>"
                    ),
                )
            )
    return _layout(fig, "Grader scores per step", y="mean score")


def reward_shares(
    frame: pd.DataFrame, names: Mapping[str, str], order: Sequence[str] = ()
) -> go.Figure:
    """Share of rollouts at zero and at full reward per step."""
    fig = go.Figure()
    order = list(order) or _runs(frame)
    for run_id in _runs(frame):
        rows = frame[frame["run_id"] == run_id].sort_values("step")
        color = run_color(run_id, order)
        for column, label, dash in (("zero_share", "zero", "dot"), ("full_share", "full", "solid")):
            fig.add_trace(
                go.Scatter(
                    x=rows["step"],
                    y=rows[column],
                    mode=_mode(rows),
                    line={"color": color, "dash": dash, "width": 2},
                    name=_series(frame, names, run_id, f"at {label} reward"),
                    hovertemplate=f"step %{{x}}<br>{label} reward %{{y:.1%}}<extra></extra>",
                )
            )
    fig.update_yaxes(tickformat=".0%", rangemode="tozero")
    return _layout(fig, "Rollouts at zero and at full reward", y="share of rollouts")


SPLIT_DASH = {"train": "solid", "eval": "dash", "all": "dot"}


def trainer_metric(
    frame: pd.DataFrame,
    names: Mapping[str, str],
    metric: str,
    order: Sequence[str] = (),
    *,
    smoothing: float = 0.0,
) -> go.Figure:
    """One metric the training job reported per step (`trace_store.metrics`), a line per run
    and split: validation dashed. `smoothing`: EMA weight, as on the rollout curves."""
    fig = go.Figure()
    order = list(order) or _runs(frame)
    for run_id in _runs(frame):
        color = run_color(run_id, order)
        of_run = frame[frame["run_id"] == run_id]
        for split in dict.fromkeys(of_run["split"]):
            rows = of_run[of_run["split"] == split].sort_values("step")
            shown = "validation" if split == "eval" else str(split)
            fig.add_trace(
                go.Scatter(
                    x=rows["step"],
                    y=ema(rows["value"], smoothing),
                    mode=_mode(rows),
                    line={"color": color, "dash": SPLIT_DASH.get(str(split), "solid"), "width": 2},
                    # Named after its run whenever several are chosen, even if one reported.
                    name=f"{_label(names.get(run_id, run_id))} {shown}"
                    if len(order) > 1
                    else shown,
                    hovertemplate=f"step %{{x}}<br>{shown} %{{y:.4g}}<extra></extra>",
                )
            )
    if not frame.empty and frame["step"].max() - frame["step"].min() <= 10:
        fig.update_xaxes(dtick=1)  # a short job: whole steps, not 1.5
    return _layout(fig, f"Reported by the training job: {_label(metric)}", y=_label(metric))


def prompt_spread(
    frame: pd.DataFrame, names: Mapping[str, str], order: Sequence[str] = ()
) -> go.Figure:
    """Prompts whose samples all got the same reward (no learning signal), per step."""
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    order = list(order) or _runs(frame)
    for run_id in _runs(frame):
        rows = frame[frame["run_id"] == run_id].sort_values("step")
        color = run_color(run_id, order)
        fig.add_trace(
            go.Bar(
                x=rows["step"],
                y=rows["prompts_same"],
                marker={"color": _fade(color, 0.55)},
                name=_series(frame, names, run_id, "prompts whose samples all scored the same"),
                customdata=rows[["prompts", "same_share"]].to_numpy(),
                hovertemplate=(
                    "step %{x}<br>%{y} of %{customdata[0]} prompts (%{customdata[1]:.0%}) have "
                    "every sample at the same reward<extra></extra>"
                ),
            ),
            secondary_y=False,
        )
        fig.add_trace(
            go.Scatter(
                x=rows["step"],
                y=rows["mean_spread"],
                mode=_mode(rows),
                line={"color": color, "width": 2},
                name=_series(frame, names, run_id, "mean reward spread"),
                hovertemplate="step %{x}<br>mean max−min per prompt %{y:.3f}<extra></extra>",
            ),
            secondary_y=True,
        )
    fig.update_layout(barmode="overlay")
    fig.update_yaxes(title_text="prompts with no spread", secondary_y=False, rangemode="tozero")
    fig.update_yaxes(
        title_text="mean spread (max − min)", secondary_y=True, rangemode="tozero", tickformat=".2f"
    )
    return _layout(fig, "Per-prompt reward spread")


# --- tool calls --------------------------------------------------------------------------------


def _group_label(run_id: str, steps: str, names: Mapping[str, str], many_runs: bool) -> str:
    return f"{_label(names.get(run_id, run_id))} · {steps}" if many_runs else steps


def calls_histogram(
    frame: pd.DataFrame, names: Mapping[str, str], order: Sequence[str] = ()
) -> go.Figure:
    """Share of rollouts per tool-call count, one overlaid histogram per (run, step range)."""
    fig = go.Figure()
    order = list(order) or _runs(frame)
    many = len(_runs(frame)) > 1
    groups = list(dict.fromkeys(zip(frame["run_id"], frame["steps"], strict=True)))
    for n, (run_id, steps) in enumerate(groups):
        rows = frame[(frame["run_id"] == run_id) & (frame["steps"] == steps)]
        color = run_color(run_id, order) if many else PALETTE[n % len(PALETTE)]
        fig.add_trace(
            go.Bar(
                x=rows["n_tool_calls"],
                y=rows["share"],
                name=_group_label(run_id, steps, names, many),
                marker={"color": _fade(color, 0.55), "line": {"color": color, "width": 1}},
                customdata=rows[["rollouts"]].to_numpy(),
                hovertemplate="%{x} calls<br>%{y:.1%} of rollouts (%{customdata[0]})<extra></extra>",
            )
        )
    fig.update_layout(barmode="overlay", bargap=0.05)
    fig.update_yaxes(tickformat=".0%")
    return _layout(
        fig, "Tool calls per rollout", x="tool calls in the rollout", y="share of rollouts"
    )


def calls_quantiles(
    frame: pd.DataFrame, names: Mapping[str, str], order: Sequence[str] = ()
) -> go.Figure:
    """Tool calls per rollout over steps: p50, p90, p99 and max."""
    fig = go.Figure()
    order = list(order) or _runs(frame)
    for run_id in _runs(frame):
        rows = frame[frame["run_id"] == run_id].sort_values("step")
        color = run_color(run_id, order)
        for column, label, dash in (
            ("calls_p50", "p50", "solid"),
            ("calls_p90", "p90", "dash"),
            ("calls_p99", "p99", "dot"),
            ("calls_max", "max", "longdashdot"),
        ):
            fig.add_trace(
                go.Scatter(
                    x=rows["step"],
                    y=rows[column],
                    mode=_mode(rows),
                    line={"color": color, "dash": dash, "width": 1.5 if label != "p50" else 2.5},
                    name=_series(frame, names, run_id, label),
                    hovertemplate=f"step %{{x}}<br>{label} %{{y:.1f}} calls<extra></extra>",
                )
            )
    fig.update_yaxes(rangemode="tozero")
    return _layout(fig, "Tool calls per rollout over steps", y="tool calls")


def turns_and_parallel(
    frame: pd.DataFrame, names: Mapping[str, str], order: Sequence[str] = ()
) -> go.Figure:
    """Mean turns per rollout, and the share of calls made in parallel (right axis)."""
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    order = list(order) or _runs(frame)
    for run_id in _runs(frame):
        rows = frame[frame["run_id"] == run_id].sort_values("step")
        color = run_color(run_id, order)
        fig.add_trace(
            go.Scatter(
                x=rows["step"],
                y=rows["turns_mean"],
                mode=_mode(rows),
                line={"color": color, "width": 2.5},
                name=_series(frame, names, run_id, "turns per rollout"),
                hovertemplate="step %{x}<br>%{y:.2f} turns per rollout<extra></extra>",
            ),
            secondary_y=False,
        )
        fig.add_trace(
            go.Scatter(
                x=rows["step"],
                y=rows["parallel_share"],
                mode=_mode(rows),
                line={"color": color, "width": 1.5, "dash": "dot"},
                name=_series(frame, names, run_id, "calls in parallel"),
                hovertemplate="step %{x}<br>%{y:.1%} of calls made in parallel<extra></extra>",
            ),
            secondary_y=True,
        )
    fig.update_yaxes(title_text="turns per rollout (mean)", secondary_y=False, rangemode="tozero")
    fig.update_yaxes(
        title_text="share of calls in parallel turns",
        secondary_y=True,
        tickformat=".0%",
        range=[0, 1],
    )
    return _layout(fig, "Turns and parallel calls")


def tool_usage(
    frame: pd.DataFrame, names: Mapping[str, str], order: Sequence[str] = ()
) -> go.Figure:
    """Calls per tool (bars) with each tool's error rate (points, right axis)."""
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    order = list(order) or _runs(frame)
    many = len(_runs(frame)) > 1
    for run_id in _runs(frame):
        rows = frame[frame["run_id"] == run_id]
        name = _label(names.get(run_id, run_id))
        color = run_color(run_id, order)
        tools = [_label(t) for t in rows["tool_name"]]
        fig.add_trace(
            go.Bar(
                x=tools,
                y=rows["calls"],
                name=f"{name} calls" if many else "calls",
                marker={"color": _fade(color, 0.6)},
                customdata=rows[["share", "errors"]].to_numpy(),
                hovertemplate=(
                    "%{x}<br>%{y:,} calls (%{customdata[0]:.1%} of all), %{customdata[1]:,} "
                    "errors<extra></extra>"
                ),
            ),
            secondary_y=False,
        )
        fig.add_trace(
            go.Scatter(
                x=tools,
                y=rows["error_rate"],
                mode="markers",
                marker={"color": "#d62728", "symbol": "diamond", "size": 10},
                name=f"{name} error rate" if many else "error rate",
                hovertemplate="%{x}<br>%{y:.1%} of calls errored<extra></extra>",
            ),
            secondary_y=True,
        )
    fig.update_layout(barmode="group")
    fig.update_yaxes(title_text="calls", secondary_y=False)
    fig.update_yaxes(
        title_text="error rate", tickformat=".0%", secondary_y=True, rangemode="tozero"
    )
    return _layout(fig, "Calls per tool", x="tool")


def tool_share(frame: pd.DataFrame, names: Mapping[str, str], run_id: str) -> go.Figure:
    """Each tool's share of one run's calls over steps (stacked areas)."""
    rows = frame[frame["run_id"] == run_id]
    fig = go.Figure()
    for n, tool in enumerate(sorted(rows["tool_name"].unique())):
        part = rows[rows["tool_name"] == tool].sort_values("step")
        if rows["step"].nunique() <= 1:  # one step: an area of one point is invisible
            fig.add_trace(
                go.Bar(
                    x=part["step"],
                    y=part["share"],
                    name=_label(tool),
                    marker={"color": TOOL_PALETTE[n % len(TOOL_PALETTE)]},
                    hovertemplate=f"{_label(tool)}<br>%{{y:.1%}} of calls<extra></extra>",
                )
            )
            continue
        fig.add_trace(
            go.Scatter(
                x=part["step"],
                y=part["share"],
                mode="lines",
                stackgroup="tools",
                line={"width": 0.5, "color": TOOL_PALETTE[n % len(TOOL_PALETTE)]},
                name=_label(tool),
                customdata=part[["calls"]].to_numpy(),
                hovertemplate=f"{_label(tool)}<br>step %{{x}}<br>%{{y:.1%}} of calls (%{{customdata[0]}})<extra></extra>",
            )
        )
    fig.update_yaxes(tickformat=".0%", range=[0, 1])
    return _layout(
        fig, f"Share of calls per tool · {_label(names.get(run_id, run_id))}", y="share of calls"
    )


def budget_over(
    frame: pd.DataFrame, names: Mapping[str, str], budget: int, order: Sequence[str] = ()
) -> go.Figure:
    """Share of rollouts over the tool-call budget, per step."""
    fig = go.Figure()
    order = list(order) or _runs(frame)
    for run_id in _runs(frame):
        rows = frame[frame["run_id"] == run_id].sort_values("step")
        fig.add_trace(
            go.Scatter(
                x=rows["step"],
                y=rows["over_share"],
                mode=_mode(rows),
                line={"color": run_color(run_id, order), "width": 2},
                name=_label(names.get(run_id, run_id)),
                customdata=rows[["over", "rollouts"]].to_numpy(),
                hovertemplate=(
                    "step %{x}<br>%{y:.1%} over budget (%{customdata[0]} of %{customdata[1]})"
                    "<extra></extra>"
                ),
            )
        )
    fig.update_yaxes(tickformat=".0%", rangemode="tozero")
    return _layout(fig, f"Rollouts over a budget of {budget} calls", y="share of rollouts")


def budget_reward(
    frame: pd.DataFrame, names: Mapping[str, str], budget: int, order: Sequence[str] = ()
) -> go.Figure:
    """Mean reward of rollouts within and over the budget, per run."""
    fig = go.Figure()
    order = list(order) or _runs(frame)
    for run_id in _runs(frame):
        rows = frame[frame["run_id"] == run_id]
        fig.add_trace(
            go.Bar(
                x=[
                    f"within (≤ {budget})" if s == "within" else f"over (> {budget})"
                    for s in rows["side"]
                ],
                y=rows["mean_reward"],
                name=_label(names.get(run_id, run_id)),
                marker={"color": run_color(run_id, order)},
                customdata=rows[["rollouts"]].to_numpy(),
                hovertemplate="%{x}<br>mean reward %{y:.3f}<br>%{customdata[0]:,} rollouts<extra></extra>",
            )
        )
    fig.update_layout(barmode="group")
    return _layout(fig, "Reward within vs over the budget", x="", y="mean reward")


def reward_vs_calls(
    frame: pd.DataFrame, names: Mapping[str, str], max_bin: int, order: Sequence[str] = ()
) -> go.Figure:
    """Mean reward (± one standard deviation) by tool-call count; marker area ~ rollouts."""
    fig = go.Figure()
    order = list(order) or _runs(frame)
    for run_id in _runs(frame):
        rows = frame[frame["run_id"] == run_id]
        size = 6 + 18 * (rows["rollouts"] / max(1, rows["rollouts"].max())) ** 0.5
        fig.add_trace(
            go.Scatter(
                x=rows["n_tool_calls"],
                y=rows["mean_reward"],
                mode="lines+markers",
                marker={"color": run_color(run_id, order), "size": size},
                line={"color": run_color(run_id, order), "width": 1},
                error_y={"type": "data", "array": rows["std_reward"], "thickness": 1, "width": 0},
                name=_label(names.get(run_id, run_id)),
                customdata=rows[["rollouts"]].to_numpy(),
                hovertemplate="%{x} calls<br>mean reward %{y:.3f}<br>%{customdata[0]:,} rollouts<extra></extra>",
            )
        )
    ticks = [*range(0, max_bin, 5), max_bin]
    fig.update_xaxes(tickvals=ticks, ticktext=[*map(str, ticks[:-1]), f"{max_bin}+"])
    return _layout(fig, "Reward by tool-call count", x="tool calls in the rollout", y="reward")


# --- latency -----------------------------------------------------------------------------------


def _seconds(ms: pd.Series) -> pd.Series:
    return ms / 1000.0


def latency_quantiles(
    frame: pd.DataFrame, names: Mapping[str, str], order: Sequence[str] = ()
) -> go.Figure:
    """Rollout latency p50/p90/p99/max over steps, log scale."""
    fig = go.Figure()
    order = list(order) or _runs(frame)
    for run_id in _runs(frame):
        rows = frame[frame["run_id"] == run_id].sort_values("step")
        color = run_color(run_id, order)
        for column, dash in (
            ("p50", "solid"),
            ("p90", "dash"),
            ("p99", "dot"),
            ("max", "longdashdot"),
        ):
            fig.add_trace(
                go.Scatter(
                    x=rows["step"],
                    y=_seconds(rows[column]),
                    mode=_mode(rows),
                    line={"color": color, "dash": dash, "width": 2.5 if column == "p50" else 1.5},
                    name=_series(frame, names, run_id, column),
                    hovertemplate=f"step %{{x}}<br>{column} %{{y:.1f}} s<extra></extra>",
                )
            )
    fig.update_yaxes(type="log")
    return _layout(fig, "Rollout latency over steps", y="seconds (log)")


def latency_ccdf(
    frame: pd.DataFrame, names: Mapping[str, str], order: Sequence[str] = ()
) -> go.Figure:
    """Share of rollouts at least as slow as x, log-log: the tail is what one sees."""
    fig = go.Figure()
    order = list(order) or _runs(frame)
    many = len(_runs(frame)) > 1
    groups = list(dict.fromkeys(zip(frame["run_id"], frame["steps"], strict=True)))
    for n, (run_id, steps) in enumerate(groups):
        rows = frame[(frame["run_id"] == run_id) & (frame["steps"] == steps)].sort_values(
            "latency_ms"
        )
        color = run_color(run_id, order) if many else PALETTE[n % len(PALETTE)]
        fig.add_trace(
            go.Scatter(
                x=_seconds(rows["latency_ms"]),
                y=rows["ccdf"],
                mode="lines",
                line={"color": color, "width": 2, "shape": "hv"},
                name=_group_label(run_id, steps, names, many),
                hovertemplate="%{y:.2%} of rollouts took ≥ %{x:.1f} s<extra></extra>",
            )
        )
    fig.update_xaxes(type="log", dtick=1)
    fig.update_yaxes(type="log", tickformat=".1%", dtick=1)
    return _layout(fig, "Latency tail (complementary CDF)", x="rollout latency, seconds (log)",
                   y="share at least this slow (log)")  # fmt: skip


def tool_latency(
    frame: pd.DataFrame, names: Mapping[str, str], order: Sequence[str] = ()
) -> go.Figure:
    """Per-tool call latency: p50 bar with p90/p99/max marks, log scale."""
    fig = go.Figure()
    order = list(order) or _runs(frame)
    many = len(_runs(frame)) > 1
    for run_id in _runs(frame):
        rows = frame[frame["run_id"] == run_id]
        name = _label(names.get(run_id, run_id))
        color = run_color(run_id, order)
        tools = [_label(t) for t in rows["tool_name"]]
        fig.add_trace(
            go.Bar(
                x=tools,
                y=_seconds(rows["p50"]),
                name=f"{name} p50" if many else "p50",
                marker={"color": _fade(color, 0.6)},
                offsetgroup=run_id,
                hovertemplate="%{x}<br>p50 %{y:.2f} s<extra></extra>",
            )
        )
        for column, symbol in (("p90", "line-ew-open"), ("p99", "diamond"), ("max", "x")):
            fig.add_trace(
                go.Scatter(
                    x=tools,
                    y=_seconds(rows[column]),
                    mode="markers",
                    marker={"color": color, "symbol": symbol, "size": 11,
                            "line": {"width": 2, "color": color}},
                    name=f"{name} {column}" if many else column,
                    offsetgroup=run_id,
                    hovertemplate=f"%{{x}}<br>{column} %{{y:.2f}} s<extra></extra>",
                )
            )  # fmt: skip
    fig.update_layout(barmode="group", scattermode="group")
    fig.update_yaxes(type="log", dtick=1)
    return _layout(fig, "Tool-call latency per tool", x="tool", y="seconds (log)")


def tokens_over_steps(
    frame: pd.DataFrame, names: Mapping[str, str], order: Sequence[str] = ()
) -> go.Figure:
    """Output and reasoning tokens per rollout (p50 and p90) over steps."""
    fig = go.Figure()
    order = list(order) or _runs(frame)
    for run_id in _runs(frame):
        rows = frame[frame["run_id"] == run_id].sort_values("step")
        color = run_color(run_id, order)
        for column, label, dash, width in (
            ("output_p50", "output p50", "solid", 2.5),
            ("output_p90", "output p90", "dash", 1.5),
            ("reasoning_p50", "reasoning p50", "dot", 2.0),
            ("reasoning_p90", "reasoning p90", "dashdot", 1.2),
        ):
            if rows[column].isna().all():
                continue
            fig.add_trace(
                go.Scatter(
                    x=rows["step"],
                    y=rows[column],
                    mode=_mode(rows),
                    line={"color": color, "dash": dash, "width": width},
                    name=_series(frame, names, run_id, label),
                    hovertemplate=f"step %{{x}}<br>{label} %{{y:,.0f}} tokens<extra></extra>",
                )
            )
    fig.update_yaxes(rangemode="tozero")
    return _layout(fig, "Tokens per rollout", y="tokens")


def tokens_per_reward(
    frame: pd.DataFrame, names: Mapping[str, str], order: Sequence[str] = ()
) -> go.Figure:
    """Output tokens spent per unit of reward earned, per step."""
    fig = go.Figure()
    order = list(order) or _runs(frame)
    for run_id in _runs(frame):
        rows = frame[frame["run_id"] == run_id].sort_values("step")
        fig.add_trace(
            go.Scatter(
                x=rows["step"],
                y=rows["tokens_per_reward"],
                mode=_mode(rows),
                line={"color": run_color(run_id, order), "width": 2},
                name=_label(names.get(run_id, run_id)),
                hovertemplate="step %{x}<br>%{y:,.0f} output tokens per unit of reward<extra></extra>",
            )
        )
    fig.update_yaxes(rangemode="tozero")
    return _layout(fig, "Output tokens per unit of reward", y="tokens / reward")
