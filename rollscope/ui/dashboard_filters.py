"""The controls of the Rewards, Tool calls and Latency screens, every one bound to the URL.

Shared by the three screens (same parameter names, so a choice carries over):
``runs`` (repeated), ``steps=lo-hi``, ``split=all|train|eval``. Per screen: ``band``,
``ema``, ``grader``, ``step``, ``metric`` (Rewards), ``budget``, ``early``/``late`` (Tool calls, Latency).
A bad or stale value warns (through `view_state`) and falls back to a default.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import pandas as pd
import streamlit as st

from rollscope.ui import store_access, view_state
from trace_store import dashboards

SPLIT_CHOICES = ("all", "train", "eval")
BAND_CHOICES = {"10-90": (0.1, 0.9), "25-75": (0.25, 0.75), "5-95": (0.05, 0.95)}
_BOUNDS = "dash.step_bounds"  # session keys: the step bounds and `steps` value of the last run
_WRITTEN = "dash.steps_written"
_SEEN = "dash.seen"
_STEP_WRITTEN = "dash.step_written"  # a dashboard screen has run in this session


@dataclass(frozen=True)
class Filters:
    """What every dashboard query is asked for."""

    run_ids: tuple[str, ...]
    steps: tuple[int, int]
    split: str | None  # None: both splits
    bounds: tuple[int, int]  # the chosen runs' first and last step
    rollouts: int = 0  # the chosen runs' rollouts (none: only what a training job reported)
    names: dict[str, str] = field(default_factory=dict, hash=False, compare=False)

    @property
    def query(self) -> dict[str, object]:
        """Keyword arguments shared by the query functions."""
        return {"steps": self.steps, "split": self.split}


def _default_runs(runs: pd.DataFrame) -> list[str]:
    trained = runs[runs["kind"].fillna("") == "train"]
    pick = trained if len(trained) else runs
    return [str(pick["run_id"].iloc[0])]


def no_runs() -> None:
    st.info(
        "No runs in the store yet. Import trace files or load the demo run on the Runs page.",
        icon=":material/info:",
    )
    st.page_link("pages/runs.py", label="Go to the Runs page", icon=":material/table_rows:")


def _carry_steps_over(bounds: tuple[int, int]) -> None:
    """When the chosen runs change the step bounds, move the range this screen wrote with them
    (a link someone pasted is left alone, so its stale value still warns)."""
    state = st.session_state
    old = state.get(_BOUNDS)
    raw = view_state.raw_values("steps")
    if old is None or tuple(old) == bounds or raw != state.get(_WRITTEN):
        return
    try:
        lo, hi = (int(v) for v in raw[-1].split("-")) if raw else (old[0], old[1])
    except ValueError:
        return
    if (lo, hi) == tuple(old) or hi < bounds[0] or lo > bounds[1]:
        lo, hi = bounds  # the whole range stays the whole range
    view_state.write_param("steps", (max(lo, bounds[0]), min(hi, bounds[1])))


def shared_filters() -> Filters | None:
    """Runs, step range and split at the top of the screen; None (after saying why) if there
    is nothing to show."""
    runs = store_access.list_runs()
    if runs.empty:
        no_runs()
        return None
    options = [str(r) for r in runs["run_id"]]
    names = {
        str(r): str(n) if isinstance(n, str) and n else str(r)
        for r, n in zip(runs["run_id"], runs["name"], strict=True)
    }
    default_runs = _default_runs(runs)
    # Arriving without runs in the link, an empty choice carried over from another screen
    # (nothing selected on the Runs screen) would show nothing: start from the default.
    carried = st.session_state.get("view.runs")
    if not view_state.raw_values("runs") and not st.session_state.get(_SEEN) and not carried:
        view_state.write_param("runs", default_runs)
    st.session_state[_SEEN] = True
    run_col, step_col, split_col = st.columns([3, 3, 1])
    with run_col:
        chosen = view_state.multiselect(
            "Runs",
            "runs",
            options,
            default_runs,
            format_func=lambda r: names.get(r, r),
            help="Several runs are overlaid, one colour each.",
        )
    if not chosen:
        st.info("Choose at least one run to show.", icon=":material/info:")
        return None
    picked = runs[runs["run_id"].isin(chosen)]
    lo = int(
        pd.to_numeric(picked["min_step"]).min(skipna=True)
        if picked["min_step"].notna().any()
        else 0
    )
    hi = int(
        pd.to_numeric(picked["max_step"]).max(skipna=True)
        if picked["max_step"].notna().any()
        else 0
    )
    bounds = (lo, hi)
    _carry_steps_over(bounds)
    with step_col:
        steps = view_state.int_range_slider(
            "Steps", "steps", min_value=lo, max_value=hi, help="Only rollouts of these steps."
        )
    st.session_state[_BOUNDS] = bounds
    st.session_state[_WRITTEN] = view_state.raw_values("steps")
    splits = store_access.cached_query(dashboards.run_splits)(tuple(chosen))
    default_split = "train" if "train" in set(splits["split"]) else "all"
    with split_col:
        split = view_state.selectbox(
            "Split",
            "split",
            SPLIT_CHOICES,
            default_split,
            help="train, eval, or both together.",
        )
    return Filters(
        run_ids=tuple(chosen),
        steps=steps,
        split=None if split == "all" else split,
        bounds=bounds,
        rollouts=int(pd.to_numeric(picked["rollouts"]).fillna(0).sum()),
        names=names,
    )


# --- per-screen controls ---------------------------------------------------------------------------


def band_control() -> tuple[str, tuple[float, float]]:
    """The reward band: its label (``p10–p90``) and its quantiles."""
    key = view_state.selectbox(
        "Band",
        "band",
        list(BAND_CHOICES),
        "10-90",
        format_func=lambda k: "p" + k.replace("-", "–p"),
    )
    return "p" + key.replace("-", "–p"), BAND_CHOICES[key]


def ema_control() -> float:
    """EMA smoothing weight in [0, 0.95] (the URL holds percent: ``ema=60``)."""
    percent = view_state.int_slider(
        "Smoothing (EMA)",
        "ema",
        min_value=0,
        max_value=95,
        default=0,
        step=5,
        format="%d%%",
        help="Weight of the previous smoothed value; 0 shows the raw per-step values.",
    )
    return percent / 100.0


def grader_control(graders: list[str]) -> str | None:
    """One grader, or None for all of them."""
    choice = view_state.selectbox(
        "Grader",
        "grader",
        ["all", *graders],
        "all",
        format_func=lambda g: "all graders" if g == "all" else g,
    )
    return None if choice == "all" else choice


def trainer_metric_control(metrics: list[str]) -> str:
    """One of the metrics the training job reported; its mean reward by default."""
    default = "reward_mean" if "reward_mean" in metrics else metrics[0]
    return view_state.selectbox(
        "Job metric",
        "metric",
        metrics,
        default,
        help="What the fine-tuning job itself reported per step (an imported events file).",
    )


def budget_control(default: int = 10) -> int:
    return int(
        view_state.number_input(
            "Tool-call budget",
            "budget",
            default=default,
            min_value=0,
            max_value=10_000,
            step=1,
            help="Rollouts with more calls than this are over budget.",
        )
    )


def compare_ranges(filters: Filters) -> list[tuple[int, int]]:
    """The step ranges overlaid by the histogram and the latency tail: with one run, an early
    and a late range (``early=``, ``late=``, each a tenth of the steps by default); with several
    runs, the step filter's range for each run."""
    if len(filters.run_ids) > 1:
        st.caption("Several runs: each run's curve covers the chosen steps.")
        return [filters.steps]
    lo, hi = filters.bounds
    if lo == hi:
        return [(lo, hi)]
    tenth = max(1, (hi - lo + 1) // 10)
    early_col, late_col = st.columns(2)
    with early_col:
        early = view_state.int_range_slider(
            "Early steps", "early", min_value=lo, max_value=hi, default=(lo, lo + tenth - 1)
        )
    with late_col:
        late = view_state.int_range_slider(
            "Late steps", "late", min_value=lo, max_value=hi, default=(hi - tenth + 1, hi)
        )
    return [early, late]


def selected_step(filters: Filters, present: set[int]) -> int | None:
    """The step chosen by clicking the reward curve (``step=``), if it is one on screen."""

    def parse(raw: list[str]) -> int | None:
        text = raw[-1].strip()
        if text in ("", "none"):
            return None
        try:
            value = int(text)
        except ValueError:
            raise view_state.BadParam(f"“{text}” is not a step number") from None
        if value not in present:
            raise view_state.BadParam(f"step {value} has no rollouts in this view")
        return value

    raw = view_state.raw_values("step")
    if raw and raw == st.session_state.get(_STEP_WRITTEN):
        # The step this screen selected; if the filters changed so that it is gone, drop it
        # quietly (a pasted link with such a step still warns).
        try:
            if int(raw[-1]) not in present:
                view_state.write_param("step", None)
        except ValueError:
            pass
    value = view_state.read_param("step", parse, None, describe=lambda _: "no step")
    if value is None and view_state.raw_values("step"):
        view_state.write_param("step", None)
    st.session_state[_STEP_WRITTEN] = view_state.raw_values("step")
    return value


def select_step(step: int | None) -> None:
    """Put the step clicked on the reward curve (or none) in the URL."""
    view_state.write_param("step", step)
    st.session_state[_STEP_WRITTEN] = view_state.raw_values("step")


def clicked_step(event: object, current: int | None, key: str) -> int | None:
    """The step a new click on the chart selected; `current` when the selection is unchanged,
    None when it was cleared. Clicks are told apart from reruns by remembering the last one."""
    points: list[dict[str, object]] = []
    selection = getattr(event, "selection", None) or (
        event.get("selection") if isinstance(event, dict) else None
    )
    if selection:
        points = list(getattr(selection, "points", None) or selection.get("points", []) or [])
    steps = tuple(sorted({int(p["x"]) for p in points if isinstance(p.get("x"), int | float)}))  # type: ignore[call-overload]
    memory = f"{key}#last"
    last = st.session_state.get(memory, ())
    st.session_state[memory] = steps
    if steps == last:
        return current
    return steps[0] if steps else None


def linked(
    view: str, rows: pd.DataFrame, make: Callable[[pd.Series], list[tuple[str, object]]]
) -> list[str]:
    """A link to screen `view` for each row (its query from `make`)."""
    return [view_state.page_url(view, make(row)) for _, row in rows.iterrows()]
