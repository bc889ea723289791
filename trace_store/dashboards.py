"""Queries behind the Rewards, Tool calls and Latency screens.

Every function takes the store and typed filters and returns a small frame aggregated in
DuckDB: one row per (run, step), per tool, per histogram bin, ... never one row per rollout
(except the short rollout tables). The filters are the same on every screen:

- ``run_ids``: the runs to show (overlaid); rows carry ``run_id``.
- ``steps``: an inclusive ``(lo, hi)`` step range, or None for every step.
- ``split``: ``"train"`` or ``"eval"``, or None for both.

Summaries. At a million rollouts (ten million events) the screens cannot scan events per view,
so the store keeps derived tables, one row per (run, step, split) and finer, built in one pass
by `refresh_summaries` and rebuilt whenever the store changed (an import, a deleted run):

- ``dash_steps``: per-step reward, tool-call, turn, latency, token and prompt-spread statistics;
- ``dash_graders``: per-step grader scores;
- ``dash_calls``: rollouts and reward sums per tool-call count (histograms, budgets);
- ``dash_tools``: tool calls, errors and slowest call per tool;
- ``dash_tool_bins`` and ``dash_latency_bins``: log-spaced duration histograms (tool calls,
  rollouts), from which percentiles over any step range (to within `BIN_WIDTH`) and the exact
  complementary CDF at bin edges are read; ``dash_tool_bins_all``: the tool histogram over
  all steps (the default view), a thousand times smaller;
- ``dash_slowest``: the slowest rollouts of each step.

Each split's rows are stored under its name, and the union of splits under ``*``. The queries
read these tables (a store opened read-only reads the same SELECTs as subqueries instead).
All SQL is parameterized; nothing a user typed is formatted into SQL text.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import pandas as pd

from . import summary_state
from .store import Store

__all__ = [
    "BANDS",
    "BINS_PER_E",
    "BIN_WIDTH",
    "REWARD_QUANTILES",
    "SLOWEST_KEPT",
    "SPLITS",
    "budget_by_step",
    "budget_reward",
    "grader_by_step",
    "graders",
    "latency_by_step",
    "latency_ccdf",
    "prompt_spread_by_step",
    "refresh_summaries",
    "reward_by_step",
    "reward_by_tool_calls",
    "run_splits",
    "slowest_rollouts",
    "step_rollouts",
    "tokens_by_step",
    "tool_calls_by_step",
    "tool_calls_histogram",
    "tool_latency",
    "tool_share_by_step",
    "tool_usage",
]

SPLITS = ("train", "eval")
ALL_SPLITS = "*"

#: Reward quantiles kept per step; a reward band is a pair of them.
REWARD_QUANTILES: tuple[float, ...] = (0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95)
BANDS: tuple[tuple[float, float], ...] = ((0.1, 0.9), (0.25, 0.75), (0.05, 0.95))

#: Duration histograms: bin b holds durations d (ms) with b <= ln(d) * BINS_PER_E < b + 1,
#: so a bin's upper edge is 1/BINS_PER_E (2%) above its lower edge. Durations under 1 ms go
#: to bin 0.
BINS_PER_E = 50
BIN_WIDTH = math.exp(1 / BINS_PER_E) - 1


Steps = tuple[int, int] | None


def _bin(expr: str) -> str:
    return f"floor(ln(greatest({expr}, 1.0)) * {BINS_PER_E})::INTEGER"


def _edge(expr: str) -> str:
    """The upper edge (ms) of bin `expr`."""
    return f"exp(({expr} + 1) / {BINS_PER_E}.0)"


# --- summaries ---------------------------------------------------------------------------------

# Per (run, step, split), then the union of splits as '*'.
_GROUPS = "GROUPING SETS ((run_id, step, split), (run_id, step))"
_SPLIT_KEY = "coalesce(split, '*')"

_CALLS = """
    SELECT e.run_id, e.rollout_id, e.turn, r.step, r.split,
           coalesce(e.tool_name, '(unnamed)') AS tool_name, e.duration_ms,
           x.call_id IS NOT NULL AS failed
    FROM events e JOIN {rollouts} r USING (run_id, rollout_id)
    LEFT JOIN (
        SELECT DISTINCT run_id, rollout_id, call_id
        FROM events SEMI JOIN {rollouts} USING (run_id, rollout_id)
        WHERE kind = 'tool_result' AND call_id IS NOT NULL AND error IS NOT NULL AND error <> ''
    ) x ON e.run_id = x.run_id AND e.rollout_id = x.rollout_id AND e.call_id = x.call_id
    WHERE e.kind = 'tool_call'
"""
"""Every tool call with its rollout's step and split and whether its result is an error
(a ``tool_result`` with the same call_id). Built once per refresh, read by several summaries."""

#: How many of the slowest rollouts are kept per (run, step, split).
SLOWEST_KEPT = 50

_SUMMARIES: dict[str, str] = {
    "dash_steps": f"""
        WITH per_turn AS (
            SELECT run_id, rollout_id, turn, count(*) AS calls FROM {{calls}} GROUP BY ALL
        ), per_rollout AS (
            SELECT run_id, rollout_id, sum(calls) AS calls,
                   coalesce(sum(calls) FILTER (WHERE calls > 1), 0) AS parallel_calls
            FROM per_turn GROUP BY ALL
        ), best AS (
            SELECT run_id, max(reward) AS best FROM rollouts GROUP BY run_id
        ), per_prompt AS (
            SELECT run_id, step, split, max(reward) - min(reward) AS spread,
                   stddev_pop(reward) AS std
            FROM {{rollouts}} WHERE reward IS NOT NULL AND prompt_id IS NOT NULL
            GROUP BY GROUPING SETS ((run_id, step, split, prompt_id), (run_id, step, prompt_id))
            HAVING count(*) >= 2
        ), spread AS (
            SELECT run_id, step, {_SPLIT_KEY} AS split, count(*) AS prompts,
                   count(*) FILTER (WHERE spread = 0) AS prompts_same,
                   avg(spread) AS mean_spread, avg(std) AS mean_std
            FROM per_prompt GROUP BY ALL
        ), steps AS (
            SELECT run_id, step, {_SPLIT_KEY} AS split, count(*) AS rollouts,
                   count(reward) AS rewarded, avg(reward) AS reward_mean,
                   quantile_cont(reward, {list(REWARD_QUANTILES)}) AS reward_q,
                   avg(CASE WHEN reward <= 0 THEN 1.0 ELSE 0.0 END) FILTER (WHERE reward IS NOT NULL)
                       AS zero_share,
                   -- full share is read against the run's best now (see reward_by_step): a
                   -- step is exact while the best it was built with still holds
                   max(reward) AS reward_max, any_value(best) AS best_at_build,
                   count(*) FILTER (WHERE reward IS NOT NULL AND best > 0 AND reward >= best)
                       AS at_best,
                   quantile_cont(n_tool_calls, [0.5, 0.9, 0.99]) AS calls_q,
                   max(n_tool_calls) AS calls_max, avg(n_tool_calls) AS calls_mean,
                   avg(n_turns) AS turns_mean, quantile_cont(n_turns, 0.5) AS turns_p50,
                   coalesce(sum(c.calls), 0) AS calls, coalesce(sum(c.parallel_calls), 0)
                       AS parallel_calls,
                   count(latency_ms) AS timed,
                   quantile_cont(latency_ms, [0.5, 0.9, 0.99]) AS latency_q,
                   max(latency_ms) AS latency_max,
                   count(*) FILTER (WHERE output_tokens IS NOT NULL OR reasoning_tokens IS NOT NULL)
                       AS with_tokens,
                   quantile_cont(output_tokens, [0.5, 0.9]) AS output_q,
                   quantile_cont(reasoning_tokens, [0.5, 0.9]) AS reasoning_q,
                   sum(output_tokens) AS output_total,
                   sum(reward) FILTER (WHERE output_tokens IS NOT NULL) AS token_reward_total
            FROM {{rollouts}} LEFT JOIN per_rollout c USING (run_id, rollout_id) JOIN best USING (run_id)
            GROUP BY {_GROUPS}
        )
        SELECT steps.*, coalesce(s.prompts, 0) AS prompts,
               coalesce(s.prompts_same, 0) AS prompts_same, s.mean_spread, s.mean_std
        FROM steps LEFT JOIN spread s USING (run_id, step, split)
        ORDER BY run_id, split, step
    """,
    "dash_graders": f"""
        SELECT r.run_id, r.step, {_SPLIT_KEY} AS split, g.grader, count(*) AS rollouts,
               avg(g.score) AS mean, quantile_cont(g.score, [0.1, 0.9]) AS score_q,
               avg(g.weight) AS weight, avg(g.score * coalesce(g.weight, 1.0)) AS contribution
        FROM grades g JOIN {{rollouts}} r USING (run_id, rollout_id)
        WHERE g.score IS NOT NULL
        GROUP BY GROUPING SETS ((r.run_id, r.step, r.split, g.grader), (r.run_id, r.step, g.grader))
        ORDER BY 1, 3, 2, 4
    """,
    "dash_calls": f"""
        SELECT run_id, step, {_SPLIT_KEY} AS split, n_tool_calls, count(*) AS rollouts,
               count(reward) AS rewarded, sum(reward) AS reward_sum,
               sum(reward * reward) AS reward_sq_sum
        FROM {{rollouts}}
        GROUP BY GROUPING SETS ((run_id, step, split, n_tool_calls), (run_id, step, n_tool_calls))
        ORDER BY 1, 3, 2, 4
    """,
    "dash_tools": f"""
        SELECT run_id, step, {_SPLIT_KEY} AS split, tool_name, count(*) AS calls,
               count(*) FILTER (WHERE failed) AS errors
        FROM {{calls}}
        GROUP BY GROUPING SETS ((run_id, step, split, tool_name), (run_id, step, tool_name))
        ORDER BY 1, 3, 2, 4
    """,
    "dash_tool_bins": f"""
        WITH per_split AS (
            SELECT run_id, step, split, tool_name, {_bin("duration_ms")} AS bin,
                   count(*) AS calls, max(duration_ms) AS max_ms
            FROM {{calls}} WHERE duration_ms IS NOT NULL GROUP BY ALL
        )
        SELECT * FROM per_split
        UNION ALL
        SELECT run_id, step, '*', tool_name, bin, sum(calls), max(max_ms) FROM per_split
        GROUP BY ALL
        ORDER BY run_id, split, step, tool_name, bin
    """,
    # Summed from dash_tool_bins (built before it), so it is rebuilt per run without the events.
    "dash_tool_bins_all": """
        SELECT run_id, split, tool_name, bin, CAST(sum(calls) AS BIGINT) AS calls,
               max(max_ms) AS max_ms
        FROM {tool_bins} GROUP BY ALL
        ORDER BY run_id, split, tool_name, bin
    """,
    "dash_latency_bins": f"""
        SELECT run_id, step, {_SPLIT_KEY} AS split, {_bin("latency_ms")} AS bin,
               count(*) AS rollouts, max(latency_ms) AS max_ms
        FROM {{rollouts}} WHERE latency_ms IS NOT NULL
        GROUP BY GROUPING SETS ((run_id, step, split, bin), (run_id, step, bin))
        ORDER BY 1, 3, 2, 4
    """,
    "dash_slowest": f"""
        WITH top AS (
            SELECT run_id, step, {_SPLIT_KEY} AS split,
                   max_by({{{{'rollout_id': rollout_id, 'rollout_split': split,
                            'prompt_id': prompt_id, 'latency_ms': latency_ms,
                            'n_tool_calls': n_tool_calls, 'n_turns': n_turns, 'reward': reward,
                            'status': status}}}}, latency_ms, {SLOWEST_KEPT}) AS top
            FROM {{rollouts}} WHERE latency_ms IS NOT NULL
            GROUP BY {_GROUPS}
        )
        SELECT run_id, step, split, unnest(top, recursive := true) FROM top
        ORDER BY run_id, split, step
    """,
}
"""Each summary table's SELECT (``{calls}`` stands for `_CALLS`)."""

_CALLS_TABLE = "dash_tmp_calls"
_SCOPE_TABLE = "dash_tmp_scope"


def refresh_summaries(store: Store, *, force: bool = False) -> bool:
    """Bring the summary tables up to date with the store.

    Only the (run, step) pairs that imports and deletions marked in `summary_dirty` are
    recomputed; everything is rebuilt when `force`, when the tables are missing or from an older
    version, or when the store changed without a mark. Returns True if anything was recomputed.
    Cheap when they are current (one query of a few counts). A store opened read-only is left
    alone; its queries read the summaries' SELECTs directly.
    """
    if store.read_only:
        return False
    cur = store.cursor()
    try:
        if not force and summary_state.is_current(cur):
            return False
    finally:
        cur.close()
    with store.transaction() as tx:
        if not force and summary_state.is_current(tx):
            return False  # another thread built them while this one waited
        dirty = tx.execute("SELECT count(*) FROM summary_dirty").fetchone()
        if force or not summary_state.built_by_this_version(tx) or not (dirty and dirty[0]):
            _rebuild_all(tx)
        else:
            _rebuild_dirty(tx)
        summary_state.mark_current(tx)
    return True


def _rebuild_all(tx: Any) -> None:
    tx.execute(
        f"CREATE OR REPLACE TEMP TABLE {_CALLS_TABLE} AS {_CALLS.format(rollouts='rollouts')}"
    )
    for table, select in _SUMMARIES.items():
        sql = select.format(calls=_CALLS_TABLE, rollouts="rollouts", tool_bins="dash_tool_bins")
        tx.execute(f"CREATE OR REPLACE TABLE {table} AS {sql}")
    tx.execute(f"DROP TABLE {_CALLS_TABLE}")


def _rebuild_dirty(tx: Any) -> None:
    """Recompute the summaries' rows of the marked (run, step) pairs, and of every step of a
    run whose best reward fell below what a step was built with (its full-reward share)."""
    scope = _SCOPE_TABLE
    tx.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE {scope} AS
        WITH whole_runs AS (SELECT DISTINCT run_id FROM summary_dirty WHERE step IS NULL)
        SELECT run_id, step FROM summary_dirty WHERE step IS NOT NULL
        UNION SELECT run_id, step FROM rollouts SEMI JOIN whole_runs USING (run_id)
        UNION SELECT run_id, step FROM dash_steps SEMI JOIN whole_runs USING (run_id)
        """
    )
    tx.execute(
        f"""
        INSERT INTO {scope}
        WITH best AS (
            SELECT run_id, max(reward) AS best FROM rollouts
            WHERE run_id IN (SELECT run_id FROM {scope}) GROUP BY run_id
        )
        SELECT DISTINCT s.run_id, s.step FROM dash_steps s LEFT JOIN best b USING (run_id)
        WHERE s.run_id IN (SELECT run_id FROM {scope})
          AND s.best_at_build > coalesce(b.best, '-infinity'::DOUBLE)
          AND (s.run_id, s.step) NOT IN (SELECT run_id, step FROM {scope})
        """
    )
    rollouts = f"(SELECT * FROM rollouts SEMI JOIN {scope} USING (run_id, step))"
    tx.execute(f"CREATE OR REPLACE TEMP TABLE {_CALLS_TABLE} AS {_CALLS.format(rollouts=rollouts)}")
    for table, select in _SUMMARIES.items():
        if table == "dash_tool_bins_all":
            runs = f"(SELECT DISTINCT run_id FROM {scope})"
            tx.execute(f"DELETE FROM {table} WHERE run_id IN {runs}")
            tool_bins = f"(SELECT * FROM dash_tool_bins WHERE run_id IN {runs})"
            tx.execute(f"INSERT INTO {table} BY NAME {select.format(tool_bins=tool_bins)}")
            continue
        tx.execute(
            f"DELETE FROM {table} WHERE (run_id, step) IN (SELECT run_id, step FROM {scope})"
        )
        sql = select.format(calls=_CALLS_TABLE, rollouts=rollouts)
        tx.execute(f"INSERT INTO {table} BY NAME {sql}")
    tx.execute(f"DROP TABLE {_CALLS_TABLE}")
    tx.execute(f"DROP TABLE {scope}")


def _sources(store: Store, cur: Any) -> dict[str, str]:
    """What a query reads each summary from: the table when it is current (bringing it up to
    date first if the store changed), else (a read-only store) the summary's SELECT as a
    subquery."""
    if summary_state.is_current(cur):
        return {name: name for name in _SUMMARIES}
    if not store.read_only:
        refresh_summaries(store)
        return {name: name for name in _SUMMARIES}
    calls = f"({_CALLS.format(rollouts='rollouts')})"
    sources = {
        name: f"({select.format(calls=calls, rollouts='rollouts', tool_bins='')})"
        for name, select in _SUMMARIES.items()
        if name != "dash_tool_bins_all"
    }
    sources["dash_tool_bins_all"] = "({})".format(
        _SUMMARIES["dash_tool_bins_all"].format(tool_bins=sources["dash_tool_bins"])
    )
    return sources


# --- plumbing ----------------------------------------------------------------------------------


def _query(store: Store, sql: str, params: dict[str, Any]) -> pd.DataFrame:
    """Run `sql`, whose ``{dash_...}`` placeholders name summaries, on current summaries."""
    cur = store.cursor()
    try:
        return cur.execute(sql.format_map(_sources(store, cur)), params).df()
    finally:
        cur.close()


def _check_split(split: str | None) -> None:
    if split is not None and split not in SPLITS:
        raise ValueError(f"split must be one of {', '.join(SPLITS)} or None, got {split!r}")


def _filters(
    run_ids: Sequence[str], steps: Steps, split: str | None, alias: str = "r"
) -> tuple[str, dict[str, Any]]:
    """The WHERE clause that picks rollouts from the rollouts table, and its parameters."""
    _check_split(split)
    clauses = [f"list_contains($runs, {alias}.run_id)"]
    params: dict[str, Any] = {"runs": list(run_ids)}
    if steps is not None:
        clauses.append(f"{alias}.step BETWEEN $step_lo AND $step_hi")
        params["step_lo"], params["step_hi"] = int(steps[0]), int(steps[1])
    if split is not None:
        clauses.append(f"{alias}.split = $split")
        params["split"] = split
    return " AND ".join(clauses), params


def _summary_filters(
    run_ids: Sequence[str], steps: Steps, split: str | None, alias: str = "s"
) -> tuple[str, dict[str, Any]]:
    """The WHERE clause that picks rows of a summary table (split '*' for both splits)."""
    _check_split(split)
    clauses = [f"list_contains($runs, {alias}.run_id)", f"{alias}.split = $split"]
    params: dict[str, Any] = {"runs": list(run_ids), "split": split or ALL_SPLITS}
    if steps is not None:
        clauses.append(f"{alias}.step BETWEEN $step_lo AND $step_hi")
        params["step_lo"], params["step_hi"] = int(steps[0]), int(steps[1])
    return " AND ".join(clauses), params


def _ranges_clause(ranges: Sequence[tuple[int, int]], params: dict[str, Any]) -> str:
    """A CASE that labels a step with the first range of `ranges` holding it (NULL if none)."""
    if not ranges:
        raise ValueError("give at least one step range")
    whens = []
    for n, (lo, hi) in enumerate(ranges):
        params[f"lo{n}"], params[f"hi{n}"] = int(lo), int(hi)
        whens.append(f"WHEN s.step BETWEEN $lo{n} AND $hi{n} THEN {n}")
    return f"CASE {' '.join(whens)} END"


def _range_labels(ranges: Sequence[tuple[int, int]]) -> list[str]:
    return [f"steps {int(lo)}-{int(hi)}" for lo, hi in ranges]


def _label(frame: pd.DataFrame, ranges: Sequence[tuple[int, int]]) -> pd.DataFrame:
    """Replace the range number column ``rg`` by its label ``steps``."""
    labels = _range_labels(ranges)
    frame.insert(1, "steps", [labels[int(i)] for i in frame["rg"]])
    return frame.drop(columns="rg")


def _covers(
    store: Store, run_ids: Sequence[str], steps: tuple[int, int], split: str | None
) -> bool:
    """Whether `steps` holds every step of these runs (in this split)."""
    where, params = _summary_filters(run_ids, None, split)
    row = _query(
        store,
        f"SELECT min(step) AS lo, max(step) AS hi FROM {{dash_steps}} s WHERE {where}",
        params,
    ).iloc[0]
    if pd.isna(row["lo"]):
        return True
    return int(steps[0]) <= int(row["lo"]) and int(row["hi"]) <= int(steps[1])


# --- shared ------------------------------------------------------------------------------------


def run_splits(store: Store, run_ids: Sequence[str]) -> pd.DataFrame:
    """Rollouts and step bounds per (run, split): what the filters can offer.

    Columns: run_id, split, rollouts, min_step, max_step.
    """
    return _query(
        store,
        """
        SELECT run_id, split, sum(rollouts)::BIGINT AS rollouts, min(step) AS min_step,
               max(step) AS max_step
        FROM {dash_steps} s
        WHERE list_contains($runs, run_id) AND split <> '*'
        GROUP BY ALL ORDER BY run_id, split
        """,
        {"runs": list(run_ids)},
    )


def graders(store: Store, run_ids: Sequence[str]) -> list[str]:
    """The grader names of these runs, in name order."""
    frame = _query(
        store,
        """SELECT DISTINCT grader FROM {dash_graders} s
            WHERE list_contains($runs, run_id) ORDER BY 1""",
        {"runs": list(run_ids)},
    )
    return [str(name) for name in frame["grader"]]


# --- rewards -----------------------------------------------------------------------------------


def reward_by_step(
    store: Store,
    run_ids: Sequence[str],
    *,
    steps: Steps = None,
    split: str | None = None,
    band: tuple[float, float] = (0.1, 0.9),
) -> pd.DataFrame:
    """Per (run, step): rollouts with a reward, mean, median and the `band` quantiles of reward
    (a pair of `REWARD_QUANTILES`), and the share of those rollouts at zero reward (``<= 0``)
    and at full reward (the run's best reward, when that is > 0).

    Columns: run_id, step, rollouts, mean, median, band_lo, band_hi, zero_share, full_share.
    """
    try:
        lo, hi = (REWARD_QUANTILES.index(float(q)) + 1 for q in band)
    except ValueError:
        raise ValueError(
            f"band must be two of the quantiles {REWARD_QUANTILES}, got {band!r}"
        ) from None
    mid = REWARD_QUANTILES.index(0.5) + 1
    where, params = _summary_filters(run_ids, steps, split)
    return _query(
        store,
        f"""
        WITH best AS (
            SELECT run_id, max(reward_max) AS best FROM {{dash_steps}}
            WHERE list_contains($runs, run_id) AND split = '{ALL_SPLITS}' GROUP BY run_id
        )
        SELECT run_id, step, rewarded AS rollouts, reward_mean AS mean, reward_q[{mid}] AS median,
               reward_q[{lo}] AS band_lo, reward_q[{hi}] AS band_hi, zero_share,
               -- a step built with an older, lower best holds no reward at today's best
               CASE WHEN b.best > 0 AND s.best_at_build = b.best THEN s.at_best / s.rewarded
                    ELSE 0.0 END AS full_share
        FROM {{dash_steps}} s JOIN best b USING (run_id)
        WHERE {where} AND rewarded > 0 ORDER BY run_id, step
        """,
        params,
    )


def grader_by_step(
    store: Store,
    run_ids: Sequence[str],
    *,
    steps: Steps = None,
    split: str | None = None,
    grader: str | None = None,
) -> pd.DataFrame:
    """Per (run, step, grader): the mean score, its p10/p90, the mean weight and the mean
    weighted contribution (score x weight, or the score where no weight is given).

    Columns: run_id, step, grader, rollouts, mean, p10, p90, weight, contribution.
    """
    where, params = _summary_filters(run_ids, steps, split)
    if grader is not None:
        where += " AND s.grader = $grader"
        params["grader"] = grader
    return _query(
        store,
        f"""
        SELECT run_id, step, grader, rollouts, mean, score_q[1] AS p10, score_q[2] AS p90,
               weight, contribution
        FROM {{dash_graders}} s
        WHERE {where} ORDER BY run_id, grader, step
        """,
        params,
    )


def prompt_spread_by_step(
    store: Store, run_ids: Sequence[str], *, steps: Steps = None, split: str | None = None
) -> pd.DataFrame:
    """Per (run, step): how much the samples of one prompt disagree on reward.

    A prompt whose samples all score the same gives a group-relative method no learning
    signal. Only prompts with at least two scored samples at the step count.

    Columns: run_id, step, prompts, prompts_same (every sample the same reward), same_share,
    mean_spread (mean over prompts of max - min reward), mean_std (mean over prompts of the
    population standard deviation).
    """
    where, params = _summary_filters(run_ids, steps, split)
    return _query(
        store,
        f"""
        SELECT run_id, step, prompts, prompts_same, prompts_same / prompts AS same_share,
               mean_spread, mean_std
        FROM {{dash_steps}} s
        WHERE {where} AND prompts > 0 ORDER BY run_id, step
        """,
        params,
    )


def step_rollouts(
    store: Store,
    run_ids: Sequence[str],
    step: int,
    *,
    split: str | None = None,
    limit: int = 500,
) -> pd.DataFrame:
    """The rollouts of one step, best reward first (then run, prompt, sample).

    Columns: run_id, rollout_id, step, split, prompt_id, sample_index, reward, n_tool_calls,
    n_turns, latency_ms, status.
    """
    where, params = _filters(run_ids, (step, step), split)
    params["limit"] = int(limit)
    return _query(
        store,
        f"""
        SELECT r.run_id, r.rollout_id, r.step, r.split, r.prompt_id, r.sample_index, r.reward,
               r.n_tool_calls, r.n_turns, r.latency_ms, r.status
        FROM rollouts r WHERE {where}
        ORDER BY r.reward DESC NULLS LAST, r.run_id, r.prompt_id, r.sample_index, r.rollout_id
        LIMIT $limit
        """,
        params,
    )


# --- tool calls --------------------------------------------------------------------------------


def tool_calls_histogram(
    store: Store,
    run_ids: Sequence[str],
    ranges: Sequence[tuple[int, int]],
    *,
    split: str | None = None,
) -> pd.DataFrame:
    """Rollouts per tool-call count, for each run and each step range in `ranges` (overlaid
    to compare early and late training, or two runs).

    Columns: run_id, steps (label "steps lo-hi"), n_tool_calls, rollouts, share (of the
    group's rollouts).
    """
    where, params = _summary_filters(run_ids, None, split)
    case = _ranges_clause(ranges, params)
    frame = _query(
        store,
        f"""
        WITH counts AS (
            SELECT run_id, {case} AS rg, n_tool_calls, sum(rollouts) AS rollouts
            FROM {{dash_calls}} s
            WHERE {where} AND rg IS NOT NULL
            GROUP BY ALL
        )
        SELECT run_id, rg, n_tool_calls, rollouts::BIGINT AS rollouts,
               rollouts / sum(rollouts) OVER (PARTITION BY run_id, rg) AS share
        FROM counts ORDER BY run_id, rg, n_tool_calls
        """,
        params,
    )
    return _label(frame, ranges)


def tool_calls_by_step(
    store: Store, run_ids: Sequence[str], *, steps: Steps = None, split: str | None = None
) -> pd.DataFrame:
    """Per (run, step): calls per rollout (p50/p90/p99/max/mean), turns per rollout (mean,
    p50), and the share of tool calls made in parallel (in a turn with more than one call).

    Columns: run_id, step, rollouts, calls_p50, calls_p90, calls_p99, calls_max, calls_mean,
    turns_mean, turns_p50, calls, parallel_calls, parallel_share.
    """
    where, params = _summary_filters(run_ids, steps, split)
    return _query(
        store,
        f"""
        SELECT run_id, step, rollouts, calls_q[1] AS calls_p50, calls_q[2] AS calls_p90,
               calls_q[3] AS calls_p99, calls_max, calls_mean, turns_mean, turns_p50,
               calls::BIGINT AS calls, parallel_calls::BIGINT AS parallel_calls,
               CASE WHEN calls > 0 THEN parallel_calls / calls END AS parallel_share
        FROM {{dash_steps}} s
        WHERE {where} ORDER BY run_id, step
        """,
        params,
    )


def tool_usage(
    store: Store, run_ids: Sequence[str], *, steps: Steps = None, split: str | None = None
) -> pd.DataFrame:
    """Per (run, tool): calls, calls whose result is an error, the error rate and the tool's
    share of the run's calls. A call's error is on its ``tool_result`` (matched by call_id).

    Columns: run_id, tool_name, calls, errors, error_rate, share. Most used first.
    """
    where, params = _summary_filters(run_ids, steps, split)
    return _query(
        store,
        f"""
        WITH per_tool AS (
            SELECT run_id, tool_name, sum(calls) AS calls, sum(errors) AS errors
            FROM {{dash_tools}} s WHERE {where} GROUP BY ALL
        )
        SELECT run_id, tool_name, calls::BIGINT AS calls, errors::BIGINT AS errors,
               errors / calls AS error_rate,
               calls / sum(calls) OVER (PARTITION BY run_id) AS share
        FROM per_tool ORDER BY run_id, calls DESC, tool_name
        """,
        params,
    )


def tool_share_by_step(
    store: Store, run_ids: Sequence[str], *, steps: Steps = None, split: str | None = None
) -> pd.DataFrame:
    """Per (run, step, tool): calls and the tool's share of that step's calls.

    Columns: run_id, step, tool_name, calls, share.
    """
    where, params = _summary_filters(run_ids, steps, split)
    return _query(
        store,
        f"""
        WITH per_tool AS (
            SELECT run_id, step, tool_name, sum(calls) AS calls
            FROM {{dash_tools}} s WHERE {where} GROUP BY ALL
        )
        SELECT run_id, step, tool_name, calls::BIGINT AS calls,
               calls / sum(calls) OVER (PARTITION BY run_id, step) AS share
        FROM per_tool ORDER BY run_id, step, tool_name
        """,
        params,
    )


def budget_by_step(
    store: Store,
    run_ids: Sequence[str],
    budget: int,
    *,
    steps: Steps = None,
    split: str | None = None,
) -> pd.DataFrame:
    """Per (run, step): the share of rollouts that made more than `budget` tool calls.

    Columns: run_id, step, rollouts, over, over_share.
    """
    where, params = _summary_filters(run_ids, steps, split)
    params["budget"] = int(budget)
    return _query(
        store,
        f"""
        WITH per_step AS (
            SELECT run_id, step, sum(rollouts) AS rollouts,
                   coalesce(sum(rollouts) FILTER (WHERE n_tool_calls > $budget), 0) AS over
            FROM {{dash_calls}} s WHERE {where} GROUP BY ALL
        )
        SELECT run_id, step, rollouts::BIGINT AS rollouts, over::BIGINT AS over,
               over / rollouts AS over_share
        FROM per_step ORDER BY run_id, step
        """,
        params,
    )


def budget_reward(
    store: Store,
    run_ids: Sequence[str],
    budget: int,
    *,
    steps: Steps = None,
    split: str | None = None,
) -> pd.DataFrame:
    """Per run: rollouts and mean reward within (``<= budget`` calls) and over the budget.

    Columns: run_id, side ('within' | 'over'), rollouts, mean_reward. Both sides are present
    for every run with rollouts in the view (0 rollouts and a NULL mean when a side is empty).
    """
    where, params = _summary_filters(run_ids, steps, split)
    params["budget"] = int(budget)
    return _query(
        store,
        f"""
        WITH per_side AS (
            SELECT run_id, CASE WHEN n_tool_calls > $budget THEN 'over' ELSE 'within' END AS side,
                   sum(rollouts) AS rollouts, sum(rewarded) AS rewarded,
                   sum(reward_sum) AS reward_sum
            FROM {{dash_calls}} s WHERE {where} GROUP BY ALL
        ), sides AS (
            SELECT DISTINCT p.run_id, v.side FROM per_side p, (VALUES ('within'), ('over')) v(side)
        )
        SELECT run_id, side, coalesce(p.rollouts, 0)::BIGINT AS rollouts,
               CASE WHEN p.rewarded > 0 THEN p.reward_sum / p.rewarded END AS mean_reward
        FROM sides LEFT JOIN per_side p USING (run_id, side)
        ORDER BY run_id, side = 'over'
        """,
        params,
    )


def reward_by_tool_calls(
    store: Store,
    run_ids: Sequence[str],
    *,
    steps: Steps = None,
    split: str | None = None,
    max_bin: int = 30,
) -> pd.DataFrame:
    """Per (run, tool-call count): rollouts with a reward, their mean reward and its standard
    deviation; counts above `max_bin` go in the `max_bin` bin (shown as "30+").

    Columns: run_id, n_tool_calls, rollouts, mean_reward, std_reward.
    """
    where, params = _summary_filters(run_ids, steps, split)
    params["max_bin"] = int(max_bin)
    return _query(
        store,
        f"""
        WITH per_bin AS (
            SELECT run_id, least(n_tool_calls, $max_bin) AS n_tool_calls,
                   sum(rewarded) AS n, sum(reward_sum) AS total, sum(reward_sq_sum) AS sq
            FROM {{dash_calls}} s WHERE {where} GROUP BY ALL
        )
        SELECT run_id, n_tool_calls, n::BIGINT AS rollouts, total / n AS mean_reward,
               sqrt(greatest(sq / n - (total / n) * (total / n), 0)) AS std_reward
        FROM per_bin WHERE n > 0 ORDER BY run_id, n_tool_calls
        """,
        params,
    )


# --- latency -----------------------------------------------------------------------------------


def latency_by_step(
    store: Store, run_ids: Sequence[str], *, steps: Steps = None, split: str | None = None
) -> pd.DataFrame:
    """Per (run, step): rollout latency p50/p90/p99/max (ms), over rollouts that have one.

    Columns: run_id, step, rollouts, p50, p90, p99, max.
    """
    where, params = _summary_filters(run_ids, steps, split)
    return _query(
        store,
        f"""
        SELECT run_id, step, timed AS rollouts, latency_q[1] AS p50, latency_q[2] AS p90,
               latency_q[3] AS p99, latency_max AS max
        FROM {{dash_steps}} s
        WHERE {where} AND timed > 0 ORDER BY run_id, step
        """,
        params,
    )


def latency_ccdf(
    store: Store,
    run_ids: Sequence[str],
    ranges: Sequence[tuple[int, int]],
    *,
    split: str | None = None,
) -> pd.DataFrame:
    """The complementary CDF of rollout latency for each run and step range: at each edge x
    of the duration bins, the share of rollouts at least as slow as x (exact at the edges);
    the last point is the slowest rollout, with share 1/n.

    Columns: run_id, steps (label "steps lo-hi"), rollouts, latency_ms, ccdf.
    """
    where, params = _summary_filters(run_ids, None, split)
    case = _ranges_clause(ranges, params)
    frame = _query(
        store,
        f"""
        WITH bins AS (
            SELECT run_id, {case} AS rg, bin, sum(rollouts) AS rollouts, max(max_ms) AS max_ms
            FROM {{dash_latency_bins}} s
            WHERE {where} AND rg IS NOT NULL GROUP BY ALL
        ), cum AS (
            SELECT run_id, rg, bin, max_ms,
                   sum(rollouts) OVER (PARTITION BY run_id, rg ORDER BY bin) AS below,
                   sum(rollouts) OVER (PARTITION BY run_id, rg) AS total,
                   max(max_ms) OVER (PARTITION BY run_id, rg) AS slowest
            FROM bins
        )
        SELECT run_id, rg, total::BIGINT AS rollouts, {_edge("bin")} AS latency_ms,
               1.0 - below / total AS ccdf
        FROM cum WHERE below < total
        UNION ALL
        SELECT DISTINCT run_id, rg, total::BIGINT, slowest, 1.0 / total FROM cum
        ORDER BY run_id, rg, latency_ms
        """,
        params,
    )
    return _label(frame, ranges)


def tool_latency(
    store: Store, run_ids: Sequence[str], *, steps: Steps = None, split: str | None = None
) -> pd.DataFrame:
    """Per (run, tool): calls with a duration, and duration p50/p90/p99 (ms, each the upper
    edge of the duration bin holding it: at most `BIN_WIDTH` above the exact value, never above
    the max) and max (exact).

    Columns: run_id, tool_name, calls, p50, p90, p99, max. Slowest p99 first.
    """
    table = "dash_tool_bins"
    if steps is None or _covers(store, run_ids, steps, split):
        table, steps = "dash_tool_bins_all", None  # every step: the per-run histogram suffices
    where, params = _summary_filters(run_ids, steps, split)
    return _query(
        store,
        f"""
        WITH bins AS (
            SELECT run_id, tool_name, bin, sum(calls) AS calls, max(max_ms) AS max_ms
            FROM {{{table}}} s WHERE {where} GROUP BY ALL
        ), cum AS (
            SELECT run_id, tool_name, bin,
                   sum(calls) OVER (PARTITION BY run_id, tool_name ORDER BY bin) AS upto,
                   sum(calls) OVER (PARTITION BY run_id, tool_name) AS total,
                   max(max_ms) OVER (PARTITION BY run_id, tool_name) AS slowest
            FROM bins
        ), q AS (
            SELECT run_id, tool_name, total, slowest,
                   least(min({_edge("bin")}) FILTER (WHERE upto >= 0.5 * total), slowest) AS p50,
                   least(min({_edge("bin")}) FILTER (WHERE upto >= 0.9 * total), slowest) AS p90,
                   least(min({_edge("bin")}) FILTER (WHERE upto >= 0.99 * total), slowest) AS p99
            FROM cum GROUP BY run_id, tool_name, total, slowest
        )
        SELECT run_id, tool_name, total::BIGINT AS calls, p50, p90, p99, slowest AS max
        FROM q ORDER BY run_id, p99 DESC, tool_name
        """,
        params,
    )


def slowest_rollouts(
    store: Store,
    run_ids: Sequence[str],
    *,
    steps: Steps = None,
    split: str | None = None,
    limit: int = 20,
) -> pd.DataFrame:
    """The `limit` (at most `SLOWEST_KEPT`) slowest rollouts by latency_ms, slowest first.

    Columns: run_id, rollout_id, step, split, prompt_id, latency_ms, n_tool_calls, n_turns,
    reward, status.
    """
    if not 0 < limit <= SLOWEST_KEPT:
        raise ValueError(f"limit must be between 1 and {SLOWEST_KEPT}, got {limit}")
    where, params = _summary_filters(run_ids, steps, split)
    params["limit"] = int(limit)
    return _query(
        store,
        f"""
        SELECT run_id, rollout_id, step, rollout_split AS split, prompt_id, latency_ms,
               n_tool_calls, n_turns, reward, status
        FROM {{dash_slowest}} s WHERE {where}
        ORDER BY latency_ms DESC, run_id, rollout_id
        LIMIT $limit
        """,
        params,
    )


def tokens_by_step(
    store: Store, run_ids: Sequence[str], *, steps: Steps = None, split: str | None = None
) -> pd.DataFrame:
    """Per (run, step), over rollouts that report token usage: output and reasoning tokens
    p50/p90, and output tokens per unit of reward (their total output tokens / their total
    reward; NULL when they earned none). Steps without token counts are left out.

    Columns: run_id, step, rollouts, output_p50, output_p90, reasoning_p50, reasoning_p90,
    tokens_per_reward.
    """
    where, params = _summary_filters(run_ids, steps, split)
    return _query(
        store,
        f"""
        SELECT run_id, step, with_tokens AS rollouts, output_q[1] AS output_p50,
               output_q[2] AS output_p90, reasoning_q[1] AS reasoning_p50,
               reasoning_q[2] AS reasoning_p90,
               CASE WHEN token_reward_total > 0 THEN output_total / token_reward_total END
                   AS tokens_per_reward
        FROM {{dash_steps}} s
        WHERE {where} AND with_tokens > 0 ORDER BY run_id, step
        """,
        params,
    )
