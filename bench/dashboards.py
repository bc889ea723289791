"""Dashboard queries at scale: each screen's queries on a store of 1M rollouts (~10M events).

    python bench/dashboards.py                # build bench/.data/dashboards-1000000.duckdb once, time
    python bench/dashboards.py --size 200000  # a smaller store
    python bench/dashboards.py --rebuild      # regenerate the store first

The store is filled with SQL (INSERT ... SELECT over range() with hash-based pseudo-random
values) straight into the store's tables through a Store cursor: this measures queries, not
ingest. One training run, 500 steps x 250 prompts x 8 samples; tool calls per rollout fall and
turn parallel as training goes on, latency is lognormal, some tool results are errors.

Each screen runs the queries its page runs with the default view (the whole run, split train),
cold (first call after the summaries were rebuilt) and warm (median of --repeat calls).
The summaries' rebuild (after each import) is timed on its own. The reference,
timed in the same run, is a bare ``SELECT count(*), avg(reward) FROM rollouts``.
Results go to bench/results/dashboards.json.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from _common import BENCH_DIR, load_previous, median, print_table, row, save_results

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


def timed(fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--rebuild", action="store_true")
    parser.add_argument("--verbose", action="store_true", help="time each query")
    args = parser.parse_args()

    path = BENCH_DIR / ".data" / f"dashboards-{args.size}.duckdb"
    if args.rebuild and path.exists():
        path.unlink()
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        with open_store(path) as store:
            build(store, args.size)
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

        rows: list[dict[str, Any]] = []
        refresh_ms = timed(lambda: dashboards.refresh_summaries(store, force=True))
        rows.append(row("summaries: rebuild after an import (once)", refresh_ms, "ms"))
        per_screen = screens(steps)
        cold: dict[str, float] = {}
        for screen, queries in per_screen.items():
            cold[screen] = sum(timed(lambda fn=fn: fn(store)) for _, fn in queries)  # type: ignore[misc]
        ref = median([timed(reference) for _ in range(max(args.repeat, 9))])
        rows.append(row("reference: count(*), avg(reward) FROM rollouts", ref, "ms"))
        for screen, queries in per_screen.items():
            per_query: dict[str, list[float]] = {name: [] for name, _ in queries}
            totals = []
            for _ in range(args.repeat):
                total = 0.0
                for name, fn in queries:
                    ms = timed(lambda fn=fn: fn(store))  # type: ignore[misc]
                    per_query[name].append(ms)
                    total += ms
                totals.append(total)
            warm = median(totals)
            rows.append(
                row(f"{screen}: all queries (warm)", warm, "ms", f"< {TARGET_MS}", warm < TARGET_MS)
            )
            rows.append(row(f"{screen}: ratio to reference", warm / ref, "x"))
            rows.append(row(f"{screen}: all queries (cold, first call)", cold[screen], "ms"))
            if args.verbose:
                for name, values in per_query.items():
                    rows.append(row(f"  {screen}.{name}", median(values), "ms"))
    params = {"size": args.size, "repeat": args.repeat, "steps": steps}
    previous = load_previous(NAME)
    data = save_results(NAME, rows, params)
    print_table(data, previous)


if __name__ == "__main__":
    main()
