"""The canonical JSONL ingest: DuckDB's own JSON reader, then set-based SQL, in one transaction.

The caller owns the transaction. Every table this module writes is derived from the staged file
plus the existing rows of the rollouts it touches, so a rollout split across files (an event a
line, in any order, in separate uploads) is reassembled and renumbered on each import.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from ..errors import IngestError
from ..limits import max_line_bytes
from .validate import SPLITS, STATUSES, first_problem, physical_line

ITEM_TYPE = (
    "STRUCT(type VARCHAR, role VARCHAR, content JSON, text VARCHAR, summary JSON,"
    " call_id VARCHAR, name VARCHAR, arguments JSON, input JSON, output JSON, error JSON,"
    " started_at VARCHAR, duration_ms DOUBLE, tokens BIGINT, seq BIGINT, refusal VARCHAR)"
)

# Rollout lines are read for their events with arguments, input and output as VARCHAR: the reader
# then hands strings over unquoted, instead of writing each as JSON for the ingest to parse again.
FAST_ITEM_TYPE = (
    ITEM_TYPE.replace("arguments JSON", "arguments VARCHAR")
    .replace("input JSON", "input VARCHAR")
    .replace("output JSON", "output VARCHAR")
)

# Staging reads only each item's type; the full items are read again by the statement that writes
# the events, which also checks their fields (_bad_item), so that the bulk of a file is never
# held in a staging table nor walked twice.
CHECKED_ITEM_TYPE = "STRUCT(type VARCHAR)"

COLUMNS: dict[str, str] = {
    "run_id": "VARCHAR",
    "rollout_id": "VARCHAR",
    "step": "BIGINT",
    "prompt_id": "VARCHAR",
    "sample_index": "BIGINT",
    "split": "VARCHAR",
    "items": f"{ITEM_TYPE}[]",
    "item": ITEM_TYPE,
    "seq": "BIGINT",
    "reward": "DOUBLE",
    "grades": "JSON",
    "final_answer": "VARCHAR",
    "reference": "VARCHAR",
    "status": "VARCHAR",
    "started_at": "VARCHAR",
    "ended_at": "VARCHAR",
    "latency_ms": "DOUBLE",
    "usage": "STRUCT(input_tokens BIGINT, output_tokens BIGINT, reasoning_tokens BIGINT)",
    "metadata": "JSON",
    "run_name": "VARCHAR",
    "run_kind": "VARCHAR",
    "model": "VARCHAR",
}


@dataclass
class IngestResult:
    """What one file added to the store."""

    file: str
    format: str
    rollouts_added: int = 0
    rollouts_updated: int = 0
    events_added: int = 0
    duplicates_skipped: int = 0
    already_imported: bool = False
    run_ids: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def summary(self) -> str:
        if self.already_imported:
            return f"{self.file}: already imported, nothing changed"
        parts = [f"{self.rollouts_added} rollouts added", f"{self.events_added} events added"]
        if self.rollouts_updated:
            parts.append(f"{self.rollouts_updated} rollouts updated")
        if self.duplicates_skipped:
            parts.append(f"{self.duplicates_skipped} duplicates skipped")
        return f"{self.file} ({self.format}): " + ", ".join(parts)


def _columns_spec(item_type: str) -> str:
    types = dict(COLUMNS, items=f"{item_type}[]", item=item_type)
    return "{" + ", ".join(f"'{name}': '{kind}'" for name, kind in types.items()) + "}"


def _ts(expr: str) -> str:
    """SQL turning an RFC 3339 string or epoch milliseconds into a UTC TIMESTAMP."""
    # A time in UTC ("...Z", the common case) reads as a plain TIMESTAMP, several times cheaper
    # than the time-zone-aware cast. RFC 3339 starts with "YYYY-": that test decides the rest
    # without a trial cast to DOUBLE. Casts are try_casts: validation has refused unreadable
    # times already, and DuckDB 1.5 can evaluate a CASE branch on rows of another branch when
    # the input is an unnested list (a plain CAST then fails on an epoch-milliseconds string).
    return (
        f"coalesce(CASE WHEN ends_with({expr}, 'Z') THEN try_cast({expr} AS TIMESTAMP) END,"
        f" CASE WHEN {expr} IS NULL THEN NULL"
        f" WHEN substr({expr}, 5, 1) = '-' AND NOT starts_with({expr}, '-')"
        f" THEN CAST(try_cast({expr} AS TIMESTAMPTZ) AT TIME ZONE 'UTC' AS TIMESTAMP)"
        f" WHEN try_cast({expr} AS DOUBLE) IS NOT NULL"
        f" THEN make_timestamp(CAST(try_cast({expr} AS DOUBLE) * 1000 AS BIGINT))"
        f" ELSE CAST(try_cast({expr} AS TIMESTAMPTZ) AT TIME ZONE 'UTC' AS TIMESTAMP) END)"
    )


def _bad_time(expr: str) -> str:
    """SQL: true when `expr` is set but `_ts` could not read it (neither a time nor a number)."""
    return (
        f"({expr} IS NOT NULL AND NOT (ends_with({expr}, 'Z') AND try_cast({expr} AS TIMESTAMP) IS NOT NULL)"
        f" AND try_cast({expr} AS DOUBLE) IS NULL"
        f" AND try_cast({expr} AS TIMESTAMPTZ) IS NULL)"
    )


def _bad_item(x: str) -> str:
    """SQL: true when item `x` (a full item struct) has a field that is not valid."""
    bad_content = (
        # json_type, without parsing: the reader writes JSON values minified
        f"({x}.type = 'message' AND {x}.content IS NOT NULL AND NOT (starts_with({x}.content, '\"')"
        f" OR starts_with({x}.content, '[') OR {x}.content = 'null'))"
    )
    return (
        f"coalesce({x}.type IS NULL OR {bad_content} OR {_bad_time(f'{x}.started_at')}"
        f" OR NOT isfinite({x}.duration_ms), false)"
    )


def _items_are_bad(items: str) -> str:
    return f"coalesce(list_bool_or(list_transform({items}, x -> {_bad_item('x')})), false)"


# The events statement stops on the first line with a bad item; `_reading` then has the exact
# validator name it (this message is the fallback).
BAD_ITEM_ERROR = "an item of record {} is not valid"


def _json_text(expr: str) -> str:
    """A JSON value as text: strings unquoted, anything else as its JSON."""
    # The reader writes JSON values minified, so the first character tells strings and objects
    # (the common cases) apart without parsing the value again.
    return (
        f"(CASE WHEN {expr} IS NULL THEN NULL"
        f" WHEN starts_with({expr}, '\"') THEN {expr} ->> '$'"
        f" WHEN starts_with({expr}, '{{') THEN CAST({expr} AS VARCHAR)"
        f" WHEN json_type({expr}) = 'NULL' THEN NULL"
        f" WHEN json_type({expr}) = 'VARCHAR' THEN {expr} ->> '$'"
        f" WHEN json_type({expr}) = 'ARRAY' AND json_array_length({expr}) > 0"
        f"  AND list_bool_and(list_transform(json_extract_string({expr}, '$[*].text'), x -> x IS NOT NULL))"
        f" THEN array_to_string(json_extract_string({expr}, '$[*].text'), chr(10))"
        f" ELSE CAST({expr} AS VARCHAR) END)"
    )


_KIND = """(CASE
    WHEN it.type = 'reasoning' THEN 'reasoning'
    WHEN it.type = 'message' THEN 'message'
    WHEN it.type IN ('function_call', 'custom_tool_call') OR ends_with(it.type, '_call') THEN 'tool_call'
    WHEN it.type IN ('function_call_output', 'custom_tool_call_output')
      OR ends_with(it.type, '_call_output') THEN 'tool_result'
    ELSE NULL END)"""

_TEXT = f"""(CASE
    WHEN it.type = 'reasoning' THEN coalesce(
        it.text,
        nullif(array_to_string(json_extract_string(it.summary, '$[*].text'), chr(10)), ''),
        nullif(array_to_string(json_extract_string(it.content, '$[*].text'), chr(10)), ''))
    WHEN it.type = 'message' THEN coalesce({_json_text("it.content")}, it.text, it.refusal)
    ELSE it.text END)"""

_CALL_TYPES = "('function_call', 'custom_tool_call')"


def _is_call(x: str) -> str:
    return f"({x}.type IN {_CALL_TYPES} OR (ends_with({x}.type, '_call')))"


def _is_output(x: str) -> str:
    return f"ends_with({x}.type, '_output')"


def _is_known(x: str) -> str:
    return f"({x}.type IN ('reasoning', 'message') OR {_is_call(x)} OR {_is_output(x)})"


def _is_model(x: str) -> str:
    return (
        f"({x}.type = 'reasoning' OR {_is_call(x)}"
        f" OR ({x}.type = 'message' AND coalesce({x}.role, 'assistant') = 'assistant'))"
    )


def _text_value(text: str) -> str:
    """A value as text (a string as it is, anything else as its JSON), where a JSON array of
    content parts (`[{"type": "text", "text": ...}, ...]`) becomes its texts, a line each."""
    # try(): DuckDB may evaluate a CASE branch on rows the condition excluded.
    texts = f"try(json_extract_string({text}, '$[*].text'))"
    return (
        f"(CASE WHEN starts_with({text}, '[') AND len({texts}) > 0"
        f" AND len({texts}) = try(json_array_length({text}))"
        f" AND list_bool_and(list_transform({texts}, x -> x IS NOT NULL))"
        f" THEN array_to_string({texts}, chr(10)) ELSE {text} END)"
    )


def _json_as_text(expr: str) -> str:
    """A JSON value as DuckDB's reader gives it to a VARCHAR column: strings unquoted."""
    return f"(CASE WHEN starts_with({expr}, '\"') THEN {expr} ->> '$' ELSE CAST({expr} AS VARCHAR) END)"


def _event_columns(it: str = "it", *, values_read_as_text: bool = False) -> str:
    """The events columns computed from one item struct (everything but ordering and latency).

    `values_read_as_text`: the item's arguments, input and output were read as VARCHAR
    (FAST_ITEM_TYPE), not as JSON (ITEM_TYPE); both give the same columns."""

    def value(field: str) -> str:
        expr = f"{it}.{field}"
        return _text_value(expr if values_read_as_text else _json_as_text(expr))

    kind = _KIND.replace("it.", f"{it}.")
    text = _TEXT.replace("it.", f"{it}.")
    return f"""
       {kind} AS kind,
       {it}.type AS item_type,
       coalesce({it}.role, CASE WHEN {_is_output(it)} THEN 'tool' ELSE 'assistant' END) AS role,
       {text} AS text,
       CASE WHEN {_is_call(it)} THEN coalesce({it}.name, {it}.type) END AS tool_name,
       {it}.call_id,
       CASE WHEN {_is_call(it)} THEN coalesce({value("arguments")}, {value("input")}) END AS arguments,
       CASE WHEN {_is_output(it)} THEN {value("output")} END AS output,
       CASE WHEN {it}.error IS NULL OR json_type({it}.error) = 'NULL' THEN NULL
            WHEN json_type({it}.error) = 'VARCHAR' THEN {it}.error ->> '$'
            ELSE coalesce({it}.error ->> 'message', CAST({it}.error AS VARCHAR)) END AS error,
       {_ts(f"{it}.started_at")} AS started_at,
       CAST({it}.tokens AS INTEGER) AS tokens"""


# The general path: event rows of the staged file before ordering. Rollout-line items keep their
# position as src_seq; event lines are ordered by seq, then time, then arrival.
_STAGE_ITEMS = f"""
CREATE OR REPLACE TEMP TABLE stage_items AS
WITH raw AS (
    SELECT run_id, rollout_id, rec_no AS line_no, unnest(items) AS it,
           unnest(range(len(items))) AS item_idx, NULL::BIGINT AS line_seq, false AS from_event_line
    FROM stage_full WHERE items IS NOT NULL AND rec_no NOT IN (SELECT rec_no FROM duplicate_lines)
    UNION ALL
    SELECT run_id, rollout_id, rec_no, item, 0, seq, true
    FROM stage_full WHERE item IS NOT NULL
)
SELECT run_id, rollout_id, line_no, CAST(item_idx AS INTEGER) AS item_idx,
       CASE WHEN from_event_line THEN coalesce(line_seq, it.seq) ELSE item_idx END AS src_seq,
       {_event_columns()},
       it.duration_ms,
       CASE WHEN from_event_line THEN hash(CAST(it AS VARCHAR), line_seq) END AS fingerprint
FROM raw
"""

# The fast path, for files of whole new rollouts: turns and call latencies are computed on each
# line's item list, so the events are written in one streaming statement without windows or sorts.
# It reads the file itself ({read}: the full items), and takes each line's number from the stage.
# {known_items} drops items of unknown types; where a file has none it is just the list, because
# filtering copies every item.
_INSERT_EVENTS_FROM_LINES = f"""
INSERT INTO events BY NAME
WITH lines AS (
    SELECT r.run_id, r.rollout_id, s.rec_no, {{known_items}} AS its
    FROM {{read}} r JOIN stage s ON s.run_id = r.run_id AND s.rollout_id = r.rollout_id
    WHERE r.items IS NOT NULL AND s.has_items
      AND s.rec_no NOT IN (SELECT rec_no FROM duplicate_lines)
      AND CASE WHEN {_items_are_bad("r.items")}
               THEN error(format('{BAD_ITEM_ERROR}', s.rec_no)) ELSE true END
), marked AS (
    SELECT *,
        list_transform(its, x -> {_is_model("x")}) AS model_flags,
        list_transform(its, x -> {{'is_call': {_is_call("x")}, 'is_output': {_is_output("x")},
                                   'call_id': x.call_id, 'ms': x.duration_ms, 'at': x.started_at}}) AS calls
    FROM lines
), bounded AS (
    SELECT *, [1] || list_filter(range(1, len(its) + 1),
                                 i -> model_flags[i] AND (i = 1 OR NOT model_flags[i - 1]))
              || [len(its) + 1] AS bounds,
              -- where each call's output is: the first output item with its call_id
              list_transform(calls, y -> CASE WHEN y.is_output THEN y.call_id END) AS output_ids
    FROM marked
), listed AS (
    SELECT run_id, rollout_id, rec_no, its,
        flatten(list_transform(range(1, len(bounds)),
                               k -> list_transform(range(bounds[k + 1] - bounds[k]), _ -> k - 1))) AS turns,
        list_transform(calls, x -> CASE WHEN x.is_call AND x.call_id IS NOT NULL THEN coalesce(
            calls[list_position(output_ids, x.call_id)].ms,
            epoch_ms({_ts("calls[list_position(output_ids, x.call_id)].at")}) - epoch_ms({_ts("x.at")}),
            x.ms) ELSE x.ms END) AS latencies
    FROM bounded
), raw AS (
    SELECT run_id, rollout_id, rec_no, unnest(its) AS it, unnest(turns) AS turn,
           unnest(latencies) AS duration_ms, unnest(range(len(its))) AS item_idx
    FROM listed
)
SELECT run_id, rollout_id, CAST(item_idx AS INTEGER) AS seq, CAST(turn AS INTEGER) AS turn,
       {_event_columns(values_read_as_text=True)},
       CAST(duration_ms AS DOUBLE) AS duration_ms,
       item_idx AS src_seq, CAST($import_id AS INTEGER) AS import_id, rec_no AS line_no,
       CAST(item_idx AS INTEGER) AS item_idx, NULL::UBIGINT AS fingerprint
FROM raw
"""

_WORK_EVENTS_ORDERED = """
CREATE OR REPLACE TEMP TABLE work_ordered AS
WITH ordered AS (
    SELECT *, CAST(row_number() OVER w - 1 AS INTEGER) AS new_seq
    FROM work_events
    WINDOW w AS (PARTITION BY run_id, rollout_id
                 ORDER BY src_seq NULLS LAST, started_at NULLS LAST, import_id, line_no, item_idx)
), flagged AS (
    SELECT *, (kind IN ('reasoning', 'tool_call') OR (kind = 'message' AND role = 'assistant')) AS is_model
    FROM ordered
), starts AS (
    SELECT *, CASE WHEN is_model AND NOT coalesce(lag(is_model) OVER w, false) THEN 1 ELSE 0 END AS starts_turn
    FROM flagged
    WINDOW w AS (PARTITION BY run_id, rollout_id ORDER BY new_seq)
)
SELECT *, CAST(sum(starts_turn) OVER (PARTITION BY run_id, rollout_id ORDER BY new_seq
                                      ROWS UNBOUNDED PRECEDING) AS INTEGER) AS new_turn
FROM starts
"""

_INSERT_EVENTS = """
INSERT INTO events BY NAME
WITH results AS (
    SELECT run_id, rollout_id, call_id, min(started_at) AS out_at, max(duration_ms) AS out_ms
    FROM work_ordered WHERE kind = 'tool_result' AND call_id IS NOT NULL
    GROUP BY ALL
)
SELECT w.run_id, w.rollout_id, w.new_seq AS seq, w.new_turn AS turn, w.kind, w.role, w.text, w.tool_name,
       w.call_id, w.arguments, w.output, w.error, w.started_at,
       CASE WHEN w.kind = 'tool_call'
            THEN coalesce(r.out_ms, epoch_ms(r.out_at) - epoch_ms(w.started_at), w.duration_ms)
            ELSE w.duration_ms END AS duration_ms,
       w.tokens, w.item_type, w.src_seq, w.import_id, w.line_no, w.item_idx, w.fingerprint
FROM work_ordered w
LEFT JOIN results r
  ON r.run_id = w.run_id AND r.rollout_id = w.rollout_id AND r.call_id = w.call_id
"""

# Per-rollout figures derived from its events; {scope} restricts the scan to the rollouts touched.
_EVENT_STATS = """
CREATE OR REPLACE TEMP TABLE event_stats AS
WITH scoped AS (
    SELECT run_id, rollout_id, seq, turn, kind, error, started_at, duration_ms
    FROM events WHERE {scope}
), per_turn AS (
    SELECT run_id, rollout_id, turn, count(*) FILTER (WHERE kind = 'tool_call') AS calls
    FROM scoped GROUP BY ALL
), parallel AS (
    SELECT run_id, rollout_id, max(calls) AS max_parallel_calls FROM per_turn GROUP BY ALL
), counted AS (
    SELECT e.run_id, e.rollout_id,
           count(*) AS n_events,
           count(*) FILTER (WHERE kind = 'tool_call') AS n_tool_calls,
           count(*) FILTER (WHERE kind = 'tool_result' AND error IS NOT NULL) AS n_tool_errors,
           max(turn) AS n_turns,
           any_value(p.max_parallel_calls) AS max_parallel_calls,
           epoch_ms(max(e.started_at + to_milliseconds(coalesce(duration_ms, 0))))
             - epoch_ms(min(e.started_at)) AS span_ms,
           sum(duration_ms) FILTER (WHERE kind <> 'tool_call') AS duration_sum_ms
    FROM scoped e JOIN parallel p USING (run_id, rollout_id)
    GROUP BY ALL
), texts AS (
    -- only message rows: the text of every other event is never read
    SELECT run_id, rollout_id,
           arg_max(text, seq) FILTER (WHERE role = 'assistant' AND text IS NOT NULL)
               AS last_assistant_text,
           arg_min(text, seq) FILTER (WHERE role = 'user') AS first_user_text
    FROM events WHERE ({scope}) AND kind = 'message'
    GROUP BY ALL
)
SELECT * FROM counted LEFT JOIN texts USING (run_id, rollout_id)
"""

_STAGE_FIELDS = f"""
CREATE OR REPLACE TEMP TABLE stage_fields AS
SELECT run_id, rollout_id,
    arg_max(step, rec_no) FILTER (WHERE step IS NOT NULL) AS step,
    arg_max(prompt_id, rec_no) FILTER (WHERE prompt_id IS NOT NULL) AS prompt_id,
    arg_max(sample_index, rec_no) FILTER (WHERE sample_index IS NOT NULL) AS sample_index,
    arg_max(split, rec_no) FILTER (WHERE split IS NOT NULL) AS split,
    arg_max(reward, rec_no) FILTER (WHERE reward IS NOT NULL) AS reward,
    arg_max(final_answer, rec_no) FILTER (WHERE final_answer IS NOT NULL) AS final_answer,
    arg_max(reference, rec_no) FILTER (WHERE reference IS NOT NULL) AS reference,
    arg_max(status, rec_no) FILTER (WHERE status IS NOT NULL) AS status,
    arg_max({_ts("started_at")}, rec_no) FILTER (WHERE started_at IS NOT NULL) AS started_at,
    arg_max({_ts("ended_at")}, rec_no) FILTER (WHERE ended_at IS NOT NULL) AS ended_at,
    arg_max(latency_ms, rec_no) FILTER (WHERE latency_ms IS NOT NULL) AS latency_ms,
    arg_max(usage.input_tokens, rec_no) FILTER (WHERE usage.input_tokens IS NOT NULL) AS input_tokens,
    arg_max(usage.output_tokens, rec_no) FILTER (WHERE usage.output_tokens IS NOT NULL) AS output_tokens,
    arg_max(usage.reasoning_tokens, rec_no) FILTER (WHERE usage.reasoning_tokens IS NOT NULL)
        AS reasoning_tokens,
    arg_max(metadata, rec_no) FILTER (WHERE metadata IS NOT NULL) AS metadata
FROM stage
WHERE rec_no NOT IN (SELECT rec_no FROM duplicate_lines)
GROUP BY run_id, rollout_id
"""

_STAGE_FIELDS_ONE_LINE = f"""
CREATE OR REPLACE TEMP TABLE stage_fields AS
SELECT run_id, rollout_id, step, prompt_id, sample_index, split, reward, final_answer, reference,
    status, {_ts("started_at")} AS started_at, {_ts("ended_at")} AS ended_at, latency_ms,
    usage.input_tokens AS input_tokens, usage.output_tokens AS output_tokens,
    usage.reasoning_tokens AS reasoning_tokens, metadata
FROM stage
WHERE rec_no NOT IN (SELECT rec_no FROM duplicate_lines)
"""

_LATEST_GRADES = """
    SELECT run_id, rollout_id, arg_max(grades, rec_no) AS grades
    FROM stage
    WHERE grades IS NOT NULL AND json_type(grades) <> 'NULL'
      AND rec_no NOT IN (SELECT rec_no FROM duplicate_lines)
    GROUP BY run_id, rollout_id
"""

_STAGE_GRADES = """
CREATE OR REPLACE TEMP TABLE stage_grades AS
WITH latest AS ({latest}), listed AS (
    SELECT run_id, rollout_id,
           unnest(json_transform(grades,
               '[{"name": "VARCHAR", "score": "DOUBLE", "weight": "DOUBLE", "explanation": "VARCHAR"}]')) AS g,
           unnest(json_extract(grades, '$[*]')) AS raw
    FROM latest WHERE json_type(grades) = 'ARRAY'
), keyed AS (
    SELECT run_id, rollout_id, unnest(map_entries(CAST(grades AS MAP(VARCHAR, JSON)))) AS kv
    FROM latest WHERE json_type(grades) = 'OBJECT'
)
SELECT run_id, rollout_id, g.name AS grader, g.score, g.weight, g.explanation,
       (g.name IS NULL OR (g.score IS NULL AND coalesce(json_type(raw, '$.score'), 'NULL') <> 'NULL')
        OR (g.weight IS NULL AND coalesce(json_type(raw, '$.weight'), 'NULL') <> 'NULL')
        OR NOT isfinite(g.score) OR NOT isfinite(g.weight)) AS malformed
FROM listed
UNION ALL
SELECT run_id, rollout_id, kv.key, try_cast(kv.value AS DOUBLE), NULL, NULL,
       (try_cast(kv.value AS DOUBLE) IS NULL AND json_type(kv.value) <> 'NULL')
       OR NOT isfinite(try_cast(kv.value AS DOUBLE))
FROM keyed
"""

_STAGE_GRADES_ONE_LINE = _STAGE_GRADES.replace(
    "{latest}",
    "SELECT run_id, rollout_id, grades FROM stage"
    " WHERE grades IS NOT NULL AND json_type(grades) <> 'NULL'"
    " AND rec_no NOT IN (SELECT rec_no FROM duplicate_lines)",
)
_STAGE_GRADES = _STAGE_GRADES.replace("{latest}", _LATEST_GRADES)

_MERGE_ROLLOUTS = """
CREATE OR REPLACE TEMP TABLE merged_rollouts AS
WITH grade_mean AS (
    SELECT run_id, rollout_id, sum(score * coalesce(weight, 1)) / nullif(sum(coalesce(weight, 1)), 0) AS reward
    FROM grades SEMI JOIN affected USING (run_id, rollout_id)
    GROUP BY ALL
)
SELECT a.run_id, a.rollout_id,
    CAST(coalesce(f.step, o.step, 0) AS INTEGER) AS step,
    coalesce(f.prompt_id, o.prompt_id) AS prompt_id,
    CAST(coalesce(f.sample_index, o.sample_index) AS INTEGER) AS sample_index,
    coalesce(f.split, o.split, 'train') AS split,
    coalesce(f.reward, o.reward, g.reward) AS reward,
    coalesce(f.latency_ms, o.latency_ms,
             epoch_ms(coalesce(f.ended_at, o.ended_at)) - epoch_ms(coalesce(f.started_at, o.started_at)),
             s.span_ms, s.duration_sum_ms) AS latency_ms,
    coalesce(s.n_tool_calls, 0) AS n_tool_calls,
    coalesce(s.n_turns, 0) AS n_turns,
    coalesce(s.max_parallel_calls, 0) AS max_parallel_calls,
    coalesce(s.n_events, 0) AS n_events,
    coalesce(s.n_tool_errors, 0) AS n_tool_errors,
    coalesce(f.status, o.status, 'ok') AS status,
    coalesce(f.final_answer, o.final_answer, s.last_assistant_text) AS final_answer,
    coalesce(f.reference, o.reference) AS reference,
    coalesce(s.first_user_text, o.prompt) AS prompt,
    coalesce(f.started_at, o.started_at) AS started_at,
    coalesce(f.ended_at, o.ended_at) AS ended_at,
    coalesce(f.input_tokens, o.input_tokens) AS input_tokens,
    coalesce(f.output_tokens, o.output_tokens) AS output_tokens,
    coalesce(f.reasoning_tokens, o.reasoning_tokens) AS reasoning_tokens,
    coalesce(f.metadata, o.metadata) AS metadata,
    CAST(coalesce(o.import_id, $import_id) AS INTEGER) AS import_id,
    o.rollout_id IS NOT NULL AS existed
FROM affected a
LEFT JOIN stage_fields f USING (run_id, rollout_id)
LEFT JOIN rollouts o USING (run_id, rollout_id)
LEFT JOIN event_stats s USING (run_id, rollout_id)
LEFT JOIN grade_mean g USING (run_id, rollout_id)
"""


def _first(
    con: duckdb.DuckDBPyConnection, sql: str, params: list[object] | None = None
) -> tuple[object, ...] | None:
    return con.execute(sql, params or []).fetchone()


def _count_changes(con: duckdb.DuckDBPyConnection) -> int:
    row = con.fetchone()
    return int(row[0]) if row and row[0] is not None else 0


def _count(con: duckdb.DuckDBPyConnection, sql: str) -> int:
    row = con.execute(sql).fetchone()
    return int(row[0]) if row and row[0] is not None else 0


def _problem() -> str:
    """SQL naming the first field of a staged line that is missing or not valid (NULL if none).

    It is computed as the file is read, so validation costs no second pass over the items."""
    splits = ", ".join(f"'{s}'" for s in SPLITS)
    statuses = ", ".join(f"'{s}'" for s in STATUSES)
    return f"""CASE
        WHEN run_id IS NULL OR run_id = '' THEN 'run_id'
        WHEN rollout_id IS NULL OR rollout_id = '' THEN 'rollout_id'
        WHEN step < 0 THEN 'step'
        WHEN split IS NOT NULL AND split NOT IN ({splits}) THEN 'split'
        WHEN status IS NOT NULL AND status NOT IN ({statuses}) THEN 'status'
        WHEN items IS NOT NULL AND item IS NOT NULL THEN 'item'
        WHEN grades IS NOT NULL AND json_type(grades) NOT IN ('OBJECT', 'ARRAY', 'NULL') THEN 'grades'
        WHEN isinf(reward) OR isnan(reward) THEN 'reward'
        WHEN NOT isfinite(latency_ms) THEN 'latency_ms'
        WHEN {_bad_time("started_at")} THEN 'started_at'
        WHEN {_bad_time("ended_at")} THEN 'ended_at'
        -- the items' other fields are checked where they are read whole (_bad_item)
        WHEN list_bool_or(list_transform(items, x -> x.type IS NULL)) THEN 'items'
        WHEN item IS NOT NULL AND item.type IS NULL THEN 'item'
    END"""


class CanonicalIngest:
    """One canonical file into the store, on a connection whose transaction the caller owns."""

    def __init__(self, con: duckdb.DuckDBPyConnection, path: Path, display_name: str) -> None:
        self.con = con
        self.path = path
        self.display_name = display_name
        self.read_params: dict[str, object] = {}
        self._compression: str | None = None

    def _fail(self, record_number: int, field: str, message: str) -> IngestError:
        exact = first_problem(self.path, self.display_name)
        if exact is not None:
            return exact
        return IngestError(
            f"`{field}` {message}" if field else message,
            file=self.display_name,
            line=physical_line(self.path, record_number),
            field=field or None,
        )

    def read_sql(self, item_type: str) -> str:
        """The file as DuckDB reads it, with items of `item_type` (named parameters: read_params)."""
        return (
            f"read_json($path, columns = {_columns_spec(item_type)}, format = 'newline_delimited',"
            " compression = $compression, maximum_object_size = $max_bytes)"
        )

    def stage(self, compression: str | None) -> int:
        """Read the file into the `stage` view (items cut to what is checked). Returns the number
        of records."""
        self.read_params = {
            "path": str(self.path),
            "compression": compression or "uncompressed",
            "max_bytes": max_line_bytes(),
        }
        self._compression = compression
        # The items themselves are not kept: only what the later statements ask of them.
        computed = (
            ", items IS NOT NULL AS has_items,"
            f" list_transform(list_filter(items, x -> NOT {_is_known('x')}), x -> x.type) AS unknown_types,"
            f" {_problem()} AS problem"
        )
        self._materialize("stage", self.read_sql(CHECKED_ITEM_TYPE), computed, exclude="items")
        return _count(self.con, "SELECT count(*) FROM stage")

    def _materialize(self, view: str, read: str, computed: str = "", exclude: str = "") -> None:
        """`view` over a temp table of the whole read, with `rec_no`: the record's number, and the
        `computed` columns (", expr AS name", ...), without the `exclude` ones."""
        raw = f"{view}_raw"
        columns = f"* EXCLUDE ({exclude})" if exclude else "*"
        # Fast: the record number is the staged row's rowid. With insertion order preserved (for
        # this cursor only) the parallel reader stores records in file order, about twice as fast
        # as WITH ORDINALITY. But order preservation holds batches in memory: a file that may not
        # fit the memory limit is numbered WITH ORDINALITY instead, which spills.
        with self._reading():
            if _fits_in_memory(self.con, self.path, self._compression):
                self.con.execute("SET SESSION preserve_insertion_order = true")
                self.con.execute(
                    f"CREATE OR REPLACE TEMP TABLE {raw} AS SELECT {columns}{computed} FROM {read}",
                    self.read_params,
                )
                self.con.execute("RESET SESSION preserve_insertion_order")
                # Inside a transaction the rowids of new rows start at a large offset.
                first, last, count = _rowid_span(self.con, raw)
                if not count or last - first + 1 == count:
                    self.con.execute(
                        f"CREATE OR REPLACE TEMP VIEW {view} AS"
                        f" SELECT *, rowid - {first} + 1 AS rec_no FROM {raw}"
                    )
                    return
            self.con.execute(
                f"CREATE OR REPLACE TEMP TABLE {raw} AS"
                f" SELECT {columns} RENAME (ordinality AS rec_no){computed} FROM {read} WITH ORDINALITY",
                self.read_params,
            )
            self.con.execute(f"CREATE OR REPLACE TEMP VIEW {view} AS SELECT * FROM {raw}")

    @contextmanager
    def _reading(self) -> Iterator[None]:
        """A reader error becomes the exact validator's message for the first bad line."""
        try:
            yield
        except duckdb.Error as exc:
            exact = first_problem(self.path, self.display_name)
            if exact is not None:
                raise exact from exc
            bad_item = re.search(BAD_ITEM_ERROR.format(r"(\d+)"), str(exc))
            if bad_item:
                raise self._fail(int(bad_item.group(1)), "items", "is not valid") from exc
            raise IngestError(_clean_duckdb_message(exc), file=self.display_name) from exc

    def validate(self) -> None:
        row = _first(
            self.con,
            "SELECT rec_no, problem FROM stage WHERE problem IS NOT NULL ORDER BY rec_no LIMIT 1",
        )
        if row is not None:
            raise self._fail(int(str(row[0])), str(row[1]), "is missing or not valid")
        duplicate = _first(
            self.con,
            """
            SELECT rollout_id, list_sort(list(rec_no)) AS lines FROM stage
            WHERE has_items GROUP BY run_id, rollout_id HAVING count(*) > 1
            ORDER BY min(rec_no) LIMIT 1
            """,
        )
        if duplicate is not None:
            lines = [int(n) for n in duplicate[1]]  # type: ignore[attr-defined]
            raise IngestError(
                f"`rollout_id` {duplicate[0]!r} appears on more than one rollout line "
                f"(first on line {physical_line(self.path, lines[0])}); rollout ids must be unique within a run",
                file=self.display_name,
                line=physical_line(self.path, lines[1]),
                field="rollout_id",
            )

    def write(self, import_id: int) -> IngestResult:
        con = self.con
        result = IngestResult(file=self.display_name, format="canonical")
        # A rollout line for a rollout that already has a trajectory is a duplicate: skip it whole.
        con.execute(
            """
            CREATE OR REPLACE TEMP TABLE duplicate_lines AS
            SELECT s.rec_no FROM stage s JOIN rollouts r USING (run_id, rollout_id)
            WHERE s.has_items AND r.n_events > 0
            """
        )
        duplicates = _count(con, "SELECT count(*) FROM duplicate_lines")
        con.execute(
            """
            CREATE OR REPLACE TEMP TABLE affected AS
            SELECT DISTINCT run_id, rollout_id FROM stage
            WHERE rec_no NOT IN (SELECT rec_no FROM duplicate_lines)
            """
        )
        # Each rollout on one line (the usual file): its fields and grades need no aggregation
        # across lines, which at a million rollouts holds every grade and answer in a hash table.
        one_line_each = _count(con, "SELECT count(*) FROM affected") == _count(
            con,
            "SELECT count(*) FROM stage WHERE rec_no NOT IN (SELECT rec_no FROM duplicate_lines)",
        )
        try:
            con.execute(_STAGE_GRADES_ONE_LINE if one_line_each else _STAGE_GRADES)
        except duckdb.Error as exc:
            raise self._fail(1, "grades", _clean_duckdb_message(exc)) from exc
        if _count(con, "SELECT count(*) FROM stage_grades WHERE malformed"):
            raise self._fail(1, "grades", "are not valid")
        touches_stored = _count(
            con, "SELECT count(*) FROM affected JOIN rollouts r USING (run_id, rollout_id)"
        )
        if touches_stored:
            con.execute(
                "DELETE FROM grades WHERE (run_id, rollout_id, grader) IN"
                " (SELECT run_id, rollout_id, grader FROM stage_grades)"
            )
        con.execute("INSERT INTO grades BY NAME SELECT * EXCLUDE (malformed) FROM stage_grades")
        # Temp tables are dropped as soon as they are used: at a million rollouts each holds
        # hundreds of MB that the next statements can reuse.
        con.execute("DROP TABLE stage_grades")
        event_lines = _count(con, "SELECT count(*) FROM stage WHERE item IS NOT NULL")
        fast = event_lines == 0 and touches_stored == 0
        unknown = con.execute(
            f"""
            SELECT type, count(*) FROM (
                SELECT unnest(unknown_types) AS type FROM stage
                UNION ALL
                SELECT item.type FROM stage WHERE item IS NOT NULL AND NOT {_is_known("item")})
            GROUP BY ALL ORDER BY 2 DESC
            """
        ).fetchall()
        if fast and duplicates:
            self._check_items_of_duplicates()
        if fast:
            known_items = f"list_filter(r.items, x -> {_is_known('x')})" if unknown else "r.items"
            insert = _INSERT_EVENTS_FROM_LINES.replace("{read}", self.read_sql(FAST_ITEM_TYPE))
            # Each line's events are written together by one thread either way; keeping the
            # lines' order across threads as well costs the insert about a tenth of its time.
            # A file too big for memory keeps it: each thread's own row groups then cost more
            # memory than the ordered insert (5 GB file: 2.15 GB peak against 1.87 GB).
            if _fits_in_memory(con, self.path, self._compression):
                con.execute("SET SESSION preserve_insertion_order = false")
            try:
                with self._reading():
                    result.events_added = _count_changes(
                        con.execute(
                            insert.replace("{known_items}", known_items),
                            {"import_id": import_id, **self.read_params},
                        )
                    )
            finally:
                with suppress(duckdb.Error):  # an aborted transaction refuses it: the error stands
                    con.execute("RESET SESSION preserve_insertion_order")
            con.execute(_EVENT_STATS.format(scope=f"import_id = {int(import_id)}"))
        else:
            result.events_added, event_duplicates = self._merge_events(import_id)
            duplicates += event_duplicates
            con.execute(
                _EVENT_STATS.format(
                    scope="(run_id, rollout_id) IN (SELECT run_id, rollout_id FROM affected)"
                )
            )
        for item_type, count in unknown:
            result.warnings.append(f"{count} items of unknown type {item_type!r} were skipped")
        result.duplicates_skipped = duplicates
        con.execute(_STAGE_FIELDS_ONE_LINE if one_line_each else _STAGE_FIELDS)
        con.execute(_MERGE_ROLLOUTS, {"import_id": import_id})
        con.execute("DROP TABLE stage_fields")
        con.execute("DROP TABLE event_stats")
        counts = _first(
            con,
            "SELECT count(*) FILTER (WHERE NOT existed), count(*) FILTER (WHERE existed)"
            " FROM merged_rollouts",
        )
        assert counts is not None
        result.rollouts_added, result.rollouts_updated = int(str(counts[0])), int(str(counts[1]))
        # The dashboards' summaries recompute the steps these rollouts were and are at.
        before = (
            " UNION SELECT run_id, step FROM rollouts SEMI JOIN affected USING (run_id, rollout_id)"
            if touches_stored
            else ""
        )
        con.execute(
            "INSERT INTO summary_dirty (run_id, step)"
            f" SELECT DISTINCT run_id, step FROM merged_rollouts{before}"
        )
        if result.rollouts_updated:
            con.execute(
                "DELETE FROM rollouts WHERE (run_id, rollout_id) IN"
                " (SELECT run_id, rollout_id FROM affected)"
            )
        con.execute("INSERT INTO rollouts BY NAME SELECT * EXCLUDE (existed) FROM merged_rollouts")
        self._upsert_runs()
        result.run_ids = [
            str(r[0])
            for r in con.execute("SELECT DISTINCT run_id FROM stage ORDER BY 1").fetchall()
        ]
        return result

    def _check_items_of_duplicates(self) -> None:
        """The fast path reads the items of the lines it writes; a rollout line skipped as a
        duplicate must be valid too (a file with a bad line anywhere changes nothing)."""
        with self._reading():
            bad = self.con.execute(
                f"""
                SELECT min(s.rec_no) FROM {self.read_sql(FAST_ITEM_TYPE)} r
                JOIN stage s ON s.run_id = r.run_id AND s.rollout_id = r.rollout_id AND s.has_items
                WHERE s.rec_no IN (SELECT rec_no FROM duplicate_lines)
                  AND {_items_are_bad("r.items")}
                """,
                self.read_params,
            ).fetchone()
        if bad is not None and bad[0] is not None:
            raise self._fail(int(bad[0]), "items", "is missing or not valid")

    def _merge_events(self, import_id: int) -> tuple[int, int]:
        """The general path: new items merged with the stored trajectory of each touched rollout,
        then the whole trajectory renumbered. Returns (events added, duplicate event lines)."""
        con = self.con
        self._materialize("stage_full", self.read_sql(ITEM_TYPE))
        bad = _first(
            con,
            f"""
            SELECT rec_no, CASE WHEN {_items_are_bad("items")} THEN 'items' ELSE 'item' END
            FROM stage_full
            WHERE {_items_are_bad("items")} OR (item IS NOT NULL AND {_bad_item("item")})
            ORDER BY rec_no LIMIT 1
            """,
        )
        if bad is not None:
            raise self._fail(int(str(bad[0])), str(bad[1]), "is missing or not valid")
        try:
            con.execute(_STAGE_ITEMS)
        except duckdb.Error as exc:
            raise self._fail(1, "", _clean_duckdb_message(exc)) from exc
        # Event lines already stored (same content and seq) are duplicates.
        duplicates = _count(
            con,
            """
            SELECT count(*) FROM stage_items s
            WHERE s.fingerprint IS NOT NULL AND EXISTS (
                SELECT 1 FROM events e WHERE e.run_id = s.run_id AND e.rollout_id = s.rollout_id
                  AND e.fingerprint = s.fingerprint)
            """,
        )
        con.execute(
            f"""
            CREATE OR REPLACE TEMP TABLE new_events AS
            SELECT DISTINCT ON (run_id, rollout_id, coalesce(fingerprint, hash(line_no, item_idx))) *,
                   CAST({int(import_id)} AS INTEGER) AS import_id
            FROM stage_items s
            WHERE kind IS NOT NULL AND (s.fingerprint IS NULL OR NOT EXISTS (
                SELECT 1 FROM events e WHERE e.run_id = s.run_id AND e.rollout_id = s.rollout_id
                  AND e.fingerprint = s.fingerprint))
            """
        )
        added = _count(con, "SELECT count(*) FROM new_events")
        event_columns = (
            "run_id, rollout_id, kind, role, text, tool_name, call_id, arguments, output, error,"
            " started_at, duration_ms, tokens, item_type, src_seq, import_id, line_no, item_idx,"
            " fingerprint"
        )
        con.execute(
            f"""
            CREATE OR REPLACE TEMP TABLE work_events AS
            SELECT {event_columns} FROM new_events
            UNION ALL
            SELECT {event_columns} FROM events SEMI JOIN affected USING (run_id, rollout_id)
            """
        )
        con.execute(
            "DELETE FROM events WHERE (run_id, rollout_id) IN (SELECT run_id, rollout_id FROM affected)"
        )
        con.execute(_WORK_EVENTS_ORDERED)
        con.execute(_INSERT_EVENTS)
        return added, duplicates

    def _upsert_runs(self) -> None:
        self.con.execute(
            """
            CREATE OR REPLACE TEMP TABLE stage_runs AS
            SELECT run_id,
                   arg_max(run_name, rec_no) FILTER (WHERE run_name IS NOT NULL) AS name,
                   arg_max(run_kind, rec_no) FILTER (WHERE run_kind IS NOT NULL) AS kind,
                   arg_max(model, rec_no) FILTER (WHERE model IS NOT NULL) AS model,
                   bool_and(coalesce(split, 'train') = 'eval') AS all_eval
            FROM stage GROUP BY run_id
            """
        )
        self.con.execute(
            """
            UPDATE runs SET name = coalesce(s.name, runs.name), kind = coalesce(s.kind, runs.kind),
                            model = coalesce(s.model, runs.model)
            FROM stage_runs s WHERE runs.run_id = s.run_id
            """
        )
        self.con.execute(
            """
            INSERT INTO runs (run_id, name, kind, model, source)
            SELECT run_id, coalesce(name, run_id),
                   coalesce(kind, CASE WHEN all_eval THEN 'eval' ELSE 'train' END), model, ?
            FROM stage_runs WHERE run_id NOT IN (SELECT run_id FROM runs)
            """,
            [self.display_name],
        )

    @staticmethod
    def cleanup(con: duckdb.DuckDBPyConnection) -> None:
        for view in ("stage", "stage_full"):
            con.execute(f"DROP VIEW IF EXISTS temp.{view}")
        for table in (
            "stage_raw",
            "stage_full_raw",
            "duplicate_lines",
            "stage_items",
            "stage_grades",
            "new_events",
            "affected",
            "work_events",
            "work_ordered",
            "event_stats",
            "stage_fields",
            "merged_rollouts",
            "stage_runs",
        ):
            con.execute(f"DROP TABLE IF EXISTS temp.{table}")


_UNITS = {"": 1, "b": 1, "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
          "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12}  # fmt: skip


def _fits_in_memory(con: duckdb.DuckDBPyConnection, path: Path, compression: str | None) -> bool:
    """Whether the staged file surely fits DuckDB's memory limit (half of it, as read)."""
    row = con.execute("SELECT current_setting('memory_limit')").fetchone()
    match = re.fullmatch(r"\s*([\d.]+)\s*([A-Za-z]*)\s*", str(row[0]) if row else "")
    if match is None or match.group(2).lower() not in _UNITS:
        return False
    limit = float(match.group(1)) * _UNITS[match.group(2).lower()]
    try:
        size = path.stat().st_size * (1 if not compression or compression == "none" else 8)
    except OSError:
        return False
    return size * 2 < limit


def _rowid_span(con: duckdb.DuckDBPyConnection, table: str) -> tuple[int, int, int]:
    row = con.execute(
        f"SELECT coalesce(min(rowid), 0), coalesce(max(rowid), -1), count(*) FROM {table}"
    ).fetchone()
    return (int(row[0]), int(row[1]), int(row[2])) if row else (0, -1, 0)


def _clean_duckdb_message(exc: duckdb.Error) -> str:
    text = str(exc).split("\n")[0]
    for prefix in ("Invalid Input Error: ", "Conversion Error: ", "Binder Error: "):
        text = text.removeprefix(prefix)
    return text
