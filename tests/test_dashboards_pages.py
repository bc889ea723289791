"""The Rewards, Tool calls and Latency screens under AppTest, on the small demo store."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from trace_store import dashboards, open_store

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT = 600  # AppTest needs a bound; generous, this is not a timing test

CHARTS = {
    "rewards": [
        "Reward per step",
        "Grader scores per step",
        "Rollouts at zero and at full reward",
        "Per-prompt reward spread",
    ],
    "tools": [
        "Tool calls per rollout",
        "Tool calls per rollout over steps",
        "Turns and parallel calls",
        "Calls per tool",
        "Share of calls per tool · Demo RFT: bug-fix agent",
        "Rollouts over a budget of 10 calls",
        "Reward within vs over the budget",
        "Reward by tool-call count",
    ],
    "latency": [
        "Rollout latency over steps",
        "Latency tail (complementary CDF)",
        "Tool-call latency per tool",
        "Tokens per rollout",
        "Output tokens per unit of reward",
    ],
}


@pytest.fixture(scope="module")
def demo_db(demo_store_file, copy_store_file, store_target, tmp_path_factory) -> Path:
    """A copy of the demo store with its dashboard summaries built (the screens only read)."""
    path = copy_store_file(demo_store_file, tmp_path_factory.mktemp("dash-pages") / "demo.duckdb")
    with open_store(store_target(path)) as store:
        dashboards.refresh_summaries(store)
    return path


def open_screen(db: Path, monkeypatch: pytest.MonkeyPatch, screen: str, **params) -> AppTest:
    monkeypatch.setenv("ROLLSCOPE_DB", str(db))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT).run()
    at.query_params.update(params)
    at.switch_page(f"pages/{screen}.py").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def param(at: AppTest, key: str) -> list[str]:
    """The URL's values of `key` (AppTest gives one value as a string, several as a list)."""
    value = at.query_params.get(key, [])
    return [value] if isinstance(value, str) else list(value)


def figures(at: AppTest) -> list[dict]:
    return [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]


def titles(at: AppTest) -> list[str]:
    return [f["layout"]["title"]["text"] for f in figures(at)]


def trace_names(figure: dict) -> list[str]:
    return [t.get("name", "") for t in figure["data"]]


def plain(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text)


def widget(at: AppTest, kind: str, label: str):
    [found] = [w for w in getattr(at, kind) if w.label == label]
    return found


@pytest.mark.parametrize("screen", list(CHARTS))
def test_each_screen_draws_its_charts_on_the_demo_run(demo_db, monkeypatch, screen):
    at = open_screen(demo_db, monkeypatch, screen)

    assert titles(at) == CHARTS[screen]
    assert not at.warning
    # The default view is the training run's train split over every step, and it is in the URL.
    assert param(at, "runs") == ["demo-train"]
    assert param(at, "steps") == ["1-12"] and param(at, "split") == ["train"]
    [link] = [c.value for c in at.code]
    assert "runs=demo-train" in link and "steps=1-12" in link


def test_a_rewards_link_restores_the_whole_view(demo_db, monkeypatch):
    at = open_screen(
        demo_db,
        monkeypatch,
        "rewards",
        runs=["demo-baseline", "demo-train"],
        steps="0-8",
        split="all",
        band="25-75",
        ema="50",
        grader="format",
        step="4",
    )

    assert not at.warning, [w.value for w in at.warning]
    assert widget(at, "multiselect", "Runs").value == ["demo-baseline", "demo-train"]
    assert widget(at, "slider", "Steps").value == (0, 8)
    assert widget(at, "selectbox", "Split").value == "all"
    assert widget(at, "selectbox", "Band").value == "25-75"
    assert widget(at, "slider", "Smoothing (EMA)").value == 50
    assert widget(at, "selectbox", "Grader").value == "format"
    curve, graders, *_ = figures(at)
    names = trace_names(curve)
    assert (
        "Demo baseline: o4-mini p25–p75" in names and "Demo RFT: bug-fix agent mean (EMA)" in names
    )
    assert {n.split(" · ")[0] for n in trace_names(graders) if n} == {"format"}
    # The selected step's rollouts, best reward first, each linking to Replay.
    assert at.subheader[0].value.startswith("Step 4: ")
    [table] = at.dataframe
    rows = table.value
    assert set(rows["step"]) == {4} and len(rows) == 32 + 0  # 8 prompts x 4 samples, no baseline
    assert list(rows["reward"]) == sorted(rows["reward"], reverse=True)
    assert rows["open"].iloc[0] == (f"/replay?run=demo-train&rollout={rows['rollout_id'].iloc[0]}")


def test_bad_or_stale_values_warn_and_fall_back(demo_db, monkeypatch):
    at = open_screen(
        demo_db,
        monkeypatch,
        "rewards",
        runs="ghost",
        steps="9-3",
        split="validation",
        band="1-99",
        ema="lots",
        grader="style",
        step="77",
    )

    warnings = [plain(w.value) for w in at.warning]
    assert len(warnings) == 7, warnings
    for value in ("ghost", "9-3", "validation", "1-99", "lots", "style", "77"):
        assert any(f"“{value}”" in w for w in warnings), (value, warnings)
    assert "step 77 has no rollouts in this view" in " ".join(warnings)
    # The defaults are shown and written back, so a copied link is a good one.
    assert param(at, "runs") == ["demo-train"] and param(at, "band") == ["10-90"]
    assert "step" not in at.query_params
    assert titles(at) == CHARTS["rewards"]


def test_tool_calls_link_with_budget_and_two_step_ranges(demo_db, monkeypatch):
    at = open_screen(
        demo_db, monkeypatch, "tools", runs="demo-train", budget="4", early="1-2", late="11-12"
    )

    assert not at.warning
    by_title = dict(zip(titles(at), figures(at), strict=True))
    assert trace_names(by_title["Tool calls per rollout"]) == ["steps 1-2", "steps 11-12"]
    assert "Rollouts over a budget of 4 calls" in by_title
    assert widget(at, "number_input", "Tool-call budget").value == 4


def test_overlaid_runs_on_the_latency_screen_and_slowest_rollouts_link_to_replay(
    demo_db, monkeypatch
):
    at = open_screen(
        demo_db, monkeypatch, "latency", runs=["demo-train", "demo-baseline"], split="all"
    )

    assert not at.warning
    ccdf = figures(at)[1]
    assert set(trace_names(ccdf)) == {
        "Demo RFT: bug-fix agent · steps 0-12",
        "Demo baseline: o4-mini · steps 0-12",
    }
    [slowest] = at.dataframe
    rows = slowest.value
    assert len(rows) == 20
    assert list(rows["latency_ms"]) == sorted(rows["latency_ms"], reverse=True)
    assert all(link.startswith("/replay?run=demo-") for link in rows["open"])


def test_a_split_without_rollouts_says_so(demo_db, monkeypatch):
    at = open_screen(demo_db, monkeypatch, "latency", runs="demo-train", steps="1-9", split="eval")

    assert not at.exception
    assert "No rollouts with a latency in this view" in at.info[0].value
    assert not at.get("plotly_chart")


@pytest.mark.parametrize("screen", list(CHARTS))
def test_an_empty_store_points_to_the_runs_page(store_path, monkeypatch, screen):
    at = open_screen(store_path, monkeypatch, screen)

    assert "No runs in the store yet" in at.info[0].value
    assert "Runs page" in at.info[0].value
    assert not at.get("plotly_chart")


def test_changing_runs_moves_the_step_range_and_drops_a_vanished_step_quietly(demo_db, monkeypatch):
    at = open_screen(
        demo_db, monkeypatch, "rewards", runs=["demo-baseline", "demo-train"], split="all", step="0"
    )
    assert param(at, "steps") == ["0-12"] and param(at, "step") == ["0"]

    widget(at, "multiselect", "Runs").set_value(["demo-train"]).run()

    assert not at.warning, [w.value for w in at.warning]
    assert param(at, "steps") == ["1-12"]  # the whole range stays the whole range
    assert widget(at, "slider", "Steps").value == (1, 12)
    assert "step" not in at.query_params  # step 0 was the baseline's only
    widget(at, "slider", "Steps").set_value((3, 6)).run()
    widget(at, "multiselect", "Runs").set_value(["demo-baseline"]).run()
    assert not at.warning, [w.value for w in at.warning]
    assert param(at, "steps") == ["0-0"]


# --- what the training job reported (imported fine-tuning events) -----------------------------

JOB_EVENTS = ROOT / "tests" / "data" / "importers" / "openai_finetune" / "ftjob-rft7.jsonl"
JOB_RUN = "ftjob-rft7"
JOB_CHART = "Reported by the training job: "


@pytest.fixture(scope="module")
def job_db(demo_db, copy_store_file, store_target, tmp_path_factory) -> Path:
    """The demo plus a run that has only the metrics its fine-tuning job reported (no rollouts:
    the demo's summaries stay as they are)."""
    path = copy_store_file(demo_db, tmp_path_factory.mktemp("job-metrics") / "job.duckdb")
    with open_store(store_target(path)) as store:
        store.ingest_file(JOB_EVENTS)
    return path


def plotted(values: list | dict) -> list:
    """A trace's values: Plotly sends numeric arrays as base64 typed arrays."""
    if isinstance(values, dict):
        data = base64.b64decode(values["bdata"])
        return [round(float(v), 3) for v in np.frombuffer(data, dtype=values["dtype"])]
    return list(values)


def lines(figure: dict) -> dict[str, tuple[list, list]]:
    return {t["name"]: (plotted(t["x"]), plotted(t["y"])) for t in figure["data"]}


def test_a_run_with_only_job_metrics_shows_them_instead_of_nothing(job_db, monkeypatch):
    at = open_screen(job_db, monkeypatch, "rewards", runs=JOB_RUN)

    assert "no rollouts, only the metrics their training job reported" in at.info[0].value
    assert titles(at) == [JOB_CHART + "reward_mean"]
    # The events file's train and validation mean reward (validation ran on even steps).
    assert lines(figures(at)[0]) == {
        "train": ([1, 2, 3, 4], [0.6, 0.65, 0.7, 0.75]),
        "validation": ([2, 4], [0.5, 0.7]),
    }
    assert widget(at, "selectbox", "Job metric").value == "reward_mean"


def test_the_job_metric_and_split_come_from_the_link(job_db, monkeypatch):
    at = open_screen(
        job_db,
        monkeypatch,
        "rewards",
        runs=JOB_RUN,
        metric="reward_mean/answer_check",
        split="train",
    )

    assert not at.warning, [w.value for w in at.warning]
    assert titles(at) == [JOB_CHART + "reward_mean/answer_check"]
    assert lines(figures(at)[0]) == {"train": ([1, 2, 3, 4], [0.3, 0.4, 0.5, 0.6])}

    widget(at, "selectbox", "Job metric").set_value("reward_mean").run()
    assert param(at, "metric") == ["reward_mean"]
    # The screen's EMA smooths the job's curve too (weights 1, 1/2, 1/4, ... on older steps):
    # (0.65 + 0.6/2) / 1.5, (0.7 + 0.65/2 + 0.6/4) / 1.75, (0.75 + ... + 0.6/8) / 1.875
    at = open_screen(job_db, monkeypatch, "rewards", runs=JOB_RUN, split="train", ema="50")
    assert lines(figures(at)[0])["train"][1] == [0.6, 0.633, 0.671, 0.713]


def test_an_unknown_job_metric_in_the_link_warns_and_falls_back(job_db, monkeypatch):
    at = open_screen(job_db, monkeypatch, "rewards", runs=JOB_RUN, metric="<b>nope</b>")

    [warning] = [plain(w.value) for w in at.warning]
    assert "“<b>nope</b>”" in warning
    assert titles(at) == [JOB_CHART + "reward_mean"]


def test_job_metrics_sit_below_the_rollout_curves_when_both_exist(job_db, monkeypatch):
    at = open_screen(job_db, monkeypatch, "rewards", runs=["demo-train", JOB_RUN])

    assert titles(at) == [*CHARTS["rewards"], JOB_CHART + "reward_mean"]
    # Two runs chosen (one reported): its line is named after it; the split is train.
    assert lines(figures(at)[-1]) == {f"{JOB_RUN} train": ([1, 2, 3, 4], [0.6, 0.65, 0.7, 0.75])}

    # With rollouts chosen too, the step range applies to the job's steps as well.
    at = open_screen(job_db, monkeypatch, "rewards", runs=["demo-train", JOB_RUN], steps="3-8")
    assert lines(figures(at)[-1]) == {f"{JOB_RUN} train": ([3, 4], [0.7, 0.75])}
