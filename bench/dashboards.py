"""Dashboard queries at scale: each screen's queries on a store of 1M rollouts (~10M events).

    python bench/dashboards.py                # build bench/.data/dashboards-1000000.duckdb once, time
    python bench/dashboards.py --size 200000  # a smaller store
    python bench/dashboards.py --rebuild      # regenerate the store first
    python bench/dashboards.py --scaling 250000,1000000,5000000 --no-browser
                                              # the curve: each screen's time against rollouts

The store is filled with SQL (INSERT ... SELECT over range() with hash-based pseudo-random
values) straight into the store's tables through a Store cursor: this measures queries, not
ingest. One training run, 500 steps x 250 prompts x 8 samples; tool calls per rollout fall and
turn parallel as training goes on, latency is lognormal, some tool results are errors.

Each screen runs the queries its page runs with the default view (the whole run, split train),
cold (first call after the summaries were rebuilt) and warm (median of --repeat calls).
The summaries' rebuild (after each import) is timed on its own, and so is the first render of
each screen in headless Chromium (all charts drawn) on a fresh app server. The machine's load
average goes into the results: other processes on 2 cores inflate every wall-clock figure; the
CPU time of a screen's queries (this process, all DuckDB threads) is the figure they affect least. The reference,
timed in the same run, is a bare ``SELECT count(*), avg(reward) FROM rollouts``.
After the timings, one step of new rollouts (2,000, with their tool calls) is imported into a
copy of the store and the summaries' refresh after it is timed: only that step's rows are
recomputed. Results go to bench/results/dashboards.json (dashboards-<size>.json for another
--size; dashboards-scaling.json for --scaling).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from _common import BENCH_DIR, load_previous, median, print_table, row, save_results

from rollscope import server_script
from trace_store import Store, dashboards, open_store

NAME = "dashboards"
TARGET_MS = 300
RUN = "bench-train"
STEPS = 500
PER_STEP = 2000  # 250 prompts x 8 samples

# Uniform [0, 1) from a hash of the row number and a salt.
U = "((hash({i}, {salt}) % 1000003) / 1000003.0)"


def u(i: str, salt: int) -> str:
    return U.format(i=i, salt=salt)


def build(store: Store, size: int) -> None:
    steps = max(1, size // PER_STEP)
    cur = store.cursor()
    t0 = time.perf_counter()
    cur.execute("BEGIN TRANSACTION")
    cur.execute(
        "INSERT INTO runs (run_id, name, kind, model, source) VALUES (?, ?, 'train', ?, 'bench')",
        [RUN, "Bench: 1M rollouts", "bench-model"],
    )
    cur.execute(
        f"""
        CREATE TEMP TABLE gen AS
        SELECT i, 1 + i // {PER_STEP} AS step, (1 + i // {PER_STEP}) / {steps}.0 AS f,
               {u("i", 1)} AS u1, {u("i", 2)} AS u2, {u("i", 3)} AS u3, {u("i", 4)} AS u4,
               {u("i", 5)} AS u5, {u("i", 6)} AS u6, {u("i", 7)} AS u7
        FROM range({size}) t(i)
        """
    )
    cur.execute(
        """
        CREATE TEMP TABLE gen2 AS
        SELECT *, least(20, floor(-ln(1 - u1) * (5.0 - 3.0 * f)))::INTEGER AS n,
               CASE WHEN u2 < f THEN 3 ELSE 1 END AS par
        FROM gen
        """
    )
    cur.execute(
        f"""
        INSERT INTO rollouts (run_id, rollout_id, step, prompt_id, sample_index, split, reward,
            latency_ms, n_tool_calls, n_turns, max_parallel_calls, n_events, n_tool_errors, status,
            input_tokens, output_tokens, reasoning_tokens, import_id)
        SELECT '{RUN}', 'r' || i, step, 'p' || ((i // 8) % 250), (i % 8)::INTEGER,
               CASE WHEN (i // 8) % 250 < 10 THEN 'eval' ELSE 'train' END,
               CASE WHEN u3 < 0.25 - 0.15 * f THEN 0.0 WHEN u3 > 0.9 - 0.4 * f THEN 1.0
                    ELSE round(u4, 2) END,
               round(exp(9.8 - 0.4 * f + 0.9 * ((u5 + u6 + u7 - 1.5) * 2.0))),
               n, (ceil(n / par) + 1)::INTEGER, least(n, par), (2 + ceil(n / par) + 2 * n)::INTEGER,
               0, 'ok', 20000 + (u5 * 50000)::BIGINT, 500 + (u6 * 4000)::BIGINT,
               400 + (u6 * 3000)::BIGINT, 1
        FROM gen2
        """
    )
    cur.execute(
        f"""
        INSERT INTO grades (run_id, rollout_id, grader, score, weight)
        SELECT '{RUN}', 'r' || i, g.grader,
               CASE g.grader WHEN 'correctness' THEN (u3 > 0.5 - 0.3 * f)::INTEGER::DOUBLE
                             WHEN 'format' THEN round(u4 * 2) / 2
                             ELSE greatest(0, 1 - n / 20.0) END,
               g.weight
        FROM gen2, (VALUES ('correctness', 0.7), ('format', 0.2), ('efficiency', 0.1)) g(grader, weight)
        """
    )
    tools = "['search_code', 'read_file', 'edit_file', 'run_tests', 'web_search', 'fetch_url']"
    # Per rollout: the user message, then per tool call j (turn j // par + 1): its call and its
    # result; one reasoning item per tool turn; the final answer.
    cur.execute(
        f"""
        INSERT INTO events (run_id, rollout_id, seq, turn, kind, role, tool_name, call_id, output,
                            error, duration_ms, tokens, item_type)
        WITH calls AS (
            SELECT i, n, par, j, (j // par + 1)::INTEGER AS turn,
                   {tools}[(1 + hash(i, j, 11) % 6)::BIGINT] AS tool,
                   round(exp(5.0 + (hash(i, j, 11) % 6)::DOUBLE * 0.5
                             + 1.2 * (({u("i * 31 + j", 12)} + {u("i * 31 + j", 13)} - 1.0) * 2.4)), 1)
                       AS duration
            FROM gen2, range(gen2.n) r(j)
        )
        SELECT '{RUN}', 'r' || i, 0, 0, 'message', 'user', NULL, NULL, NULL, NULL, NULL, NULL,
               'message'
        FROM gen2
        UNION ALL
        SELECT '{RUN}', 'r' || i, (turn - 1) * (1 + 2 * par) + 1, turn, 'reasoning', 'assistant',
               NULL, NULL, NULL, NULL, 800, 120, 'reasoning'
        FROM calls WHERE j % par = 0
        UNION ALL
        SELECT '{RUN}', 'r' || i, (turn - 1) * (1 + 2 * par) + 2 + j % par, turn, 'tool_call',
               'assistant', tool, 'c' || j, NULL, NULL, duration, NULL, 'function_call'
        FROM calls
        UNION ALL
        SELECT '{RUN}', 'r' || i, (turn - 1) * (1 + 2 * par) + 2 + par + j % par, turn,
               'tool_result', 'tool', NULL, 'c' || j, 'ok',
               CASE WHEN hash(i, j, 14) % 100 < 6 THEN 'ToolError: failed' END, duration, NULL,
               'function_call_output'
        FROM calls
        UNION ALL
        SELECT '{RUN}', 'r' || i, 10000, (ceil(n / par) + 1)::INTEGER, 'message', 'assistant',
               NULL, NULL, NULL, NULL, 500, 60, 'message'
        FROM gen2
        """
    )
    cur.execute("DROP TABLE gen")
    cur.execute("DROP TABLE gen2")
    cur.execute("COMMIT")
    cur.execute("CHECKPOINT")
    cur.close()
    print(f"built {size:,} rollouts in {time.perf_counter() - t0:.1f} s", file=sys.stderr)


def screens(steps: int) -> dict[str, list[tuple[str, Callable[[Store], Any]]]]:
    """The queries each page runs for its default view: the whole run, split train."""
    runs = [RUN]
    kw: dict[str, Any] = {"steps": (1, steps), "split": "train"}
    early, late = (1, max(1, steps // 10)), (steps - steps // 10 + 1, steps)
    mid = steps // 2
    return {
        "rewards": [
            ("run_splits", lambda s: dashboards.run_splits(s, runs)),
            ("graders", lambda s: dashboards.graders(s, runs)),
            ("reward_by_step", lambda s: dashboards.reward_by_step(s, runs, **kw)),
            ("grader_by_step", lambda s: dashboards.grader_by_step(s, runs, **kw)),
            ("prompt_spread_by_step", lambda s: dashboards.prompt_spread_by_step(s, runs, **kw)),
            ("step_rollouts", lambda s: dashboards.step_rollouts(s, runs, mid, split="train")),
        ],
        "tools": [
            ("run_splits", lambda s: dashboards.run_splits(s, runs)),
            (
                "tool_calls_histogram",
                lambda s: dashboards.tool_calls_histogram(s, runs, [early, late], split="train"),
            ),
            ("tool_calls_by_step", lambda s: dashboards.tool_calls_by_step(s, runs, **kw)),
            ("tool_usage", lambda s: dashboards.tool_usage(s, runs, **kw)),
            ("tool_share_by_step", lambda s: dashboards.tool_share_by_step(s, runs, **kw)),
            ("budget_by_step", lambda s: dashboards.budget_by_step(s, runs, 10, **kw)),
            ("budget_reward", lambda s: dashboards.budget_reward(s, runs, 10, **kw)),
            ("reward_by_tool_calls", lambda s: dashboards.reward_by_tool_calls(s, runs, **kw)),
        ],
        "latency": [
            ("run_splits", lambda s: dashboards.run_splits(s, runs)),
            ("latency_by_step", lambda s: dashboards.latency_by_step(s, runs, **kw)),
            (
                "latency_ccdf",
                lambda s: dashboards.latency_ccdf(s, runs, [early, late], split="train"),
            ),
            ("tool_latency", lambda s: dashboards.tool_latency(s, runs, **kw)),
            ("slowest_rollouts", lambda s: dashboards.slowest_rollouts(s, runs, **kw)),
            ("tokens_by_step", lambda s: dashboards.tokens_by_step(s, runs, **kw)),
        ],
    }


def one_step_records(step: int) -> list[dict[str, Any]]:
    """A training step's worth of rollouts (PER_STEP) of the bench run, with tool calls."""
    records = []
    for n in range(PER_STEP):
        items: list[dict[str, Any]] = [{"type": "message", "role": "user", "content": "task"}]
        for c in range(n % 5):
            call_id = f"new-{step}-{n}-{c}"
            items.append({"type": "function_call", "call_id": call_id, "name": f"tool{c % 3}",
                          "arguments": "{}"})  # fmt: skip
            items.append({"type": "function_call_output", "call_id": call_id, "output": "ok",
                          "duration_ms": 50.0 * (c + 1)})  # fmt: skip
        items.append({"type": "message", "role": "assistant", "content": "done"})
        records.append({
            "run_id": RUN, "rollout_id": f"new-{step}-{n}", "step": step,
            "prompt_id": f"p{n // 8}", "sample_index": n % 8, "split": "train",
            "reward": (n % 10) / 10, "grades": {"tests": (n % 10) / 10},
            "latency_ms": 1000.0 + n, "items": items,
        })  # fmt: skip
    return records


def one_step_refresh(path: Path, steps: int) -> tuple[float, float]:
    """(import ms, summaries refresh ms) for one new step imported into a copy of the store."""
    import shutil
    import tempfile

    with tempfile.TemporaryDirectory(dir=path.parent) as tmp:
        copy = Path(tmp) / path.name
        shutil.copyfile(path, copy)
        with open_store(copy) as store:
            dashboards.refresh_summaries(store)
            records = one_step_records(steps + 1)
            imported = timed(lambda: store.ingest_records(records, display_name="one-step"))
            refreshed = timed(lambda: dashboards.refresh_summaries(store))
    return imported, refreshed


def scaling(sizes: list[int], repeat: int) -> None:
    """Each screen's warm query time at each store size, and its cost per million rollouts."""
    rows: list[dict[str, Any]] = []
    per_million: dict[str, list[float]] = {}
    for size in sizes:
        path = store_path(size)
        with open_store(path) as store:
            dashboards.refresh_summaries(store)
            for screen, queries in screens(max(1, size // PER_STEP)).items():
                for _, fn in queries:
                    fn(store)  # warm
                totals = [
                    sum(timed(lambda fn=fn: fn(store)) for _, fn in queries)  # type: ignore[misc]
                    for _ in range(repeat)
                ]
                warm = median(totals)
                target = TARGET_MS if size <= 1_000_000 else 1000
                rows.append(
                    row(f"{screen} @ {size:,} rollouts", warm, "ms", f"< {target}", warm < target)
                )
                per_million.setdefault(screen, []).append(warm / (size / 1e6))
    for screen, costs in per_million.items():
        rows.append(
            row(
                f"{screen}: ms per 1M rollouts at {sizes[0]:,} / {sizes[-1]:,}",
                costs[-1] / costs[0],
                "x",
                "<= 1 (no worse than linear)",
                costs[-1] <= costs[0],
            )
        )
    name = f"{NAME}-scaling"
    params = {"sizes": sizes, "repeat": repeat, "load_average_1min": round(os.getloadavg()[0], 1)}
    previous = load_previous(name)
    print_table(save_results(name, rows, params), previous)


def store_path(size: int) -> Path:
    path = BENCH_DIR / ".data" / f"dashboards-{size}.duckdb"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        with open_store(path) as store:
            build(store, size)
    return path


def timed(fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1000


PLOTLY_FETCHED = (
    "() => performance.getEntriesByType('resource')"
    ".some(entry => /\\/static\\/js\\/PlotlyChart\\.[^/]+\\.js$/.test(entry.name))"
)
SCREEN_CHARTS = {"rewards": ("Rewards", 4), "tools": ("Tool calls", 8), "latency": ("Latency", 5)}


@contextlib.contextmanager
def app_server(script: Path, env: dict[str, str]) -> Iterator[str]:
    """A Streamlit server on a free port, started as ``rollscope serve`` starts it; yields its
    URL once it answers its health check."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    command = [
        sys.executable, "-m", "streamlit", "run", str(script),
        "--server.headless", "true", "--server.port", str(port),
        "--server.address", "127.0.0.1", "--server.fileWatcherType", "none",
        "--browser.gatherUsageStats", "false",
    ]  # fmt: skip
    proc = subprocess.Popen(
        command, env={**os.environ, **env}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        for _ in range(600):
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2):
                    break
            except OSError:
                time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


DRAWN = (
    "n => document.querySelectorAll(\"[data-testid='stPlotlyChart'] .main-svg\").length"
    " >= 2 * n && !document.querySelector(\"[data-testid='stStatusWidget']\")"
)
SETTLED = "() => !document.querySelector(\"[data-testid='stStatusWidget']\")"
FOUR_CHARTS_PAGE = BENCH_DIR / "four_charts_page.py"
FOUR_CHARTS_REFERENCE = "reference: a bare Streamlit page with four one-line charts, new profile"
NEW_PROFILE = "rewards: shared link, new browser profile"


def first_renders(path: Path, steps: int) -> dict[str, float]:
    """Seconds until every chart of a screen is drawn in headless Chromium, on a fresh app
    server started as ``rollscope serve`` starts it, so each screen's queries run for the first
    time (Streamlit's query cache is empty). Browser caches differ between the cases:

    - *new browser profile*: nothing cached; the browser also loads Streamlit's own ~100
      scripts and Plotly. Two references bound that case: the Runs screen (no chart) in a new
      profile, and a bare Streamlit page that draws four one-line Plotly charts
      (bench/four_charts_page.py, on its own server): no page of this stack draws four
      charts in a new profile faster.
    - *browser that has opened Rollscope before*: Streamlit's scripts and Plotly are cached
      (the chart preload fetched Plotly on the Runs screen); the view's queries never ran.
    - *returning visitor*: the same link again; the queries are cached too.
    - *from the sidebar*: switching screens without a page load, as a user does.
    """
    from playwright.sync_api import sync_playwright

    times: dict[str, float] = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path="/usr/bin/chromium", args=["--no-sandbox"], headless=True
        )

        def new_profile() -> Any:
            page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
            page.set_default_timeout(300_000)
            return page

        def open_runs(page: Any, url: str) -> float:
            start = time.perf_counter()
            page.goto(url)
            page.wait_for_selector("[data-testid='stMain'] h1")
            page.wait_for_function(SETTLED)
            return time.perf_counter() - start

        def open_screen(page: Any, link: str, charts: int) -> float:
            start = time.perf_counter()
            page.goto(link)
            page.wait_for_function(DRAWN, arg=charts)
            return time.perf_counter() - start

        with app_server(FOUR_CHARTS_PAGE, {}) as url:
            open_screen(new_profile(), url, 4)  # the server process warms up (imports)
            times[FOUR_CHARTS_REFERENCE] = open_screen(new_profile(), url, 4)
        with app_server(server_script(), {"ROLLSCOPE_DB": str(path)}) as url:
            open_runs(new_profile(), url)  # the server process warms up (imports, store opened)
            page = new_profile()
            times["Runs screen, new browser profile (reference: no chart)"] = open_runs(page, url)
            # Its preload fetches Plotly once the screen is drawn: let that finish, so that it
            # does not share the 2 cores with the next case.
            page.wait_for_function(PLOTLY_FETCHED)
            page.wait_for_timeout(2_000)
            rewards_link = f"{url}/rewards?runs={RUN}&steps=1-{steps}&split=train"
            times[NEW_PROFILE] = open_screen(
                new_profile(), rewards_link, SCREEN_CHARTS["rewards"][1]
            )
            # Another step range than above: this view's queries have not run yet.
            unseen_link = f"{url}/rewards?runs={RUN}&steps=2-{steps}&split=train"
            times["rewards: shared link, browser that has opened Rollscope before"] = open_screen(
                page, unseen_link, SCREEN_CHARTS["rewards"][1]
            )
            times["rewards: the same link again (returning visitor)"] = open_screen(
                page, unseen_link, SCREEN_CHARTS["rewards"][1]
            )
            for screen in ("tools", "latency"):
                title, count = SCREEN_CHARTS[screen]
                start = time.perf_counter()
                page.get_by_test_id("stSidebarNav").get_by_role("link", name=title).click()
                page.wait_for_selector(f"[data-testid='stMain'] h1:has-text('{title}')")
                page.wait_for_function(DRAWN, arg=count)
                times[f"{screen}: from the sidebar"] = time.perf_counter() - start
        browser.close()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--rebuild", action="store_true")
    parser.add_argument("--verbose", action="store_true", help="time each query")
    parser.add_argument(
        "--no-browser", action="store_true", help="skip the first-render timing in Chromium"
    )
    parser.add_argument(
        "--render-repeat", type=int, default=3, help="fresh app servers per first-render case"
    )
    parser.add_argument(
        "--scaling", help="comma-separated store sizes: time every screen at each (the curve)"
    )
    args = parser.parse_args()
    if args.scaling:
        scaling([int(n) for n in args.scaling.split(",")], args.repeat)
        return

    path = BENCH_DIR / ".data" / f"dashboards-{args.size}.duckdb"
    if args.rebuild and path.exists():
        path.unlink()
    path = store_path(args.size)
    steps = max(1, args.size // PER_STEP)

    with open_store(path) as store:
        counts = store.query_df(
            "SELECT (SELECT count(*) FROM rollouts) AS rollouts, (SELECT count(*) FROM events)"
            " AS events, (SELECT count(*) FROM grades) AS grades"
        ).iloc[0]
        print(
            f"store: {int(counts.rollouts):,} rollouts, {int(counts.events):,} events, "
            f"{int(counts.grades):,} grades",
            file=sys.stderr,
        )

        def reference() -> Any:
            return store.query_df("SELECT count(*), avg(reward) FROM rollouts")

        def floor() -> Any:
            return store.query_df("SELECT 1")

        rows: list[dict[str, Any]] = []
        refresh_ms = timed(lambda: dashboards.refresh_summaries(store, force=True))
        rows.append(row("summaries: rebuild after an import (once)", refresh_ms, "ms"))
        per_screen = screens(steps)
        cold: dict[str, float] = {}
        for screen, queries in per_screen.items():
            cold[screen] = sum(timed(lambda fn=fn: fn(store)) for _, fn in queries)  # type: ignore[misc]
        ref = median([timed(reference) for _ in range(max(args.repeat, 9))])
        rows.append(row("reference: count(*), avg(reward) FROM rollouts", ref, "ms"))
        rows.append(
            row("floor: SELECT 1 on a Store cursor", median([timed(floor) for _ in range(9)]), "ms")
        )
        for screen, queries in per_screen.items():
            per_query: dict[str, list[float]] = {name: [] for name, _ in queries}
            totals, cpu_totals = [], []
            for _ in range(args.repeat):
                total = 0.0
                cpu_start = time.process_time()
                for name, fn in queries:
                    ms = timed(lambda fn=fn: fn(store))  # type: ignore[misc]
                    per_query[name].append(ms)
                    total += ms
                totals.append(total)
                cpu_totals.append((time.process_time() - cpu_start) * 1000)
            warm = median(totals)
            rows.append(
                row(f"{screen}: all queries (warm)", warm, "ms", f"< {TARGET_MS}", warm < TARGET_MS)
            )
            rows.append(row(f"{screen}: all queries (warm, best run)", min(totals), "ms"))
            rows.append(
                row(f"{screen}: CPU time of the queries (all threads)", median(cpu_totals), "ms")
            )
            rows.append(row(f"{screen}: ratio to reference", warm / ref, "x"))
            rows.append(row(f"{screen}: all queries (cold, first call)", cold[screen], "ms"))
            if args.verbose:
                for name, values in per_query.items():
                    rows.append(row(f"  {screen}.{name}", median(values), "ms"))
    imported, refreshed = one_step_refresh(path, steps)
    rows.append(row(f"one more step ({PER_STEP:,} rollouts): import", imported, "ms"))
    rows.append(row("one more step: summaries refresh after it", refreshed, "ms"))
    if not args.no_browser:
        # Each case's median over fresh servers: one page load varies by about ±0.3 s here.
        renders = [first_renders(path, steps) for _ in range(args.render_repeat)]
        for what in renders[0]:
            seconds = median([r[what] for r in renders])
            if "reference" in what:
                rows.append(row(f"first render, {what}", seconds, "s"))
            else:
                rows.append(row(f"first render, {what}", seconds, "s", "< 2", seconds < 2))
        ratio = median([r[NEW_PROFILE] / r[FOUR_CHARTS_REFERENCE] for r in renders])
        rows.append(row(f"first render, {NEW_PROFILE}: ratio to the four-chart page", ratio, "x"))
    params = {
        "size": args.size,
        "repeat": args.repeat,
        "steps": steps,
        "load_average_1min": round(os.getloadavg()[0], 1),
    }
    name = NAME if args.size == 1_000_000 else f"{NAME}-{args.size}"
    previous = load_previous(name)
    data = save_results(name, rows, params)
    print_table(data, previous)


if __name__ == "__main__":
    main()
