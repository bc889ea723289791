"""Queries behind the Rollouts, Replay and Compare screens.

A rollout is named by ``(run_id, rollout_id)``. Every function takes the store first and uses
parameterized SQL on a cursor of its own; aggregation happens in DuckDB. Unknown runs and
rollouts raise `RunNotFound` / `RolloutNotFound` with a sentence a user can act on.

Full-text search: one document a rollout (reasoning, messages, tool names, arguments, outputs,
errors, the final answer) in ``search_docs``, and an inverted index of its words in
``search_terms`` (word, document), kept sorted by word so that looking a word up reads a few
row groups. The index is updated incrementally: the first search after the store changed
indexes only the rollouts added, changed or deleted since (`prepare_search_index`), at once
when they are few, else in a background thread while searches use the index as it was. A
read-only store is scanned. Why not DuckDB's ``fts`` extension: its index cannot be updated (every import would
rebuild it all: 11 minutes for 200k rollouts here) and its BM25 macro reads the whole postings
table on every query (1-3 s at 200k). Measured in bench/replay.py.
"""

from __future__ import annotations

import difflib
import json
import logging
import re
import threading
import weakref
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import duckdb
import pandas as pd

from .errors import RolloutNotFound, RunNotFound
from .store import Store

log = logging.getLogger(__name__)

__all__ = [
    "SORTS",
    "CompareRef",
    "RolloutQuery",
    "Turn",
    "aligned_turns",
    "answer_diff",
    "best_worst_pair",
    "count_rollouts",
    "divergence_of",
    "ensure_search_index",
    "event_field",
    "export_rollout_json",
    "export_rollout_markdown",
    "export_rollouts",
    "filter_bounds",
    "find_in_rollout",
    "first_divergence",
    "grade_anchors",
    "group_turns",
    "list_rollouts",
    "prepare_search_index",
    "prompt_deltas",
    "prompt_group",
    "prompt_history",
    "rollout_events",
    "rollout_grades",
    "rollout_header",
    "rollout_index",
    "rollout_neighbours",
    "run_pair_refs",
    "search_index_rebuilding",
    "search_index_state",
    "step_pair_refs",
    "tool_timeline",
    "turn_pages",
    "turn_signatures",
]

#: Sort keys of the rollout list -> SQL expression (a whitelist: never user text in SQL).
SORTS: dict[str, str] = {
    "step": "r.step",
    "reward": "r.reward",
    "latency": "r.latency_ms",
    "calls": "r.n_tool_calls",
    "turns": "r.n_turns",
    "errors": "r.n_tool_errors",
}

LIST_COLUMNS = (
    "r.run_id, r.rollout_id, r.step, r.prompt_id, r.sample_index, r.split, r.reward,"
    " r.latency_ms, r.n_tool_calls, r.n_turns, r.max_parallel_calls, r.n_tool_errors,"
    " r.status, left(r.final_answer, 200) AS final_answer, left(r.prompt, 200) AS prompt"
)

#: Characters of one text field sent to a screen; the rest is fetched on request (`event_field`).
PREVIEW_CHARS = 4000


def _query(store: Store, sql: str, params: Sequence[Any] = ()) -> pd.DataFrame:
    cur = store.cursor()
    try:
        return cur.execute(sql, list(params)).df()
    finally:
        cur.close()


def _one(store: Store, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
    cur = store.cursor()
    try:
        return cur.execute(sql, list(params)).fetchone()
    finally:
        cur.close()


def _records(df: pd.DataFrame) -> list[dict[str, Any]]:
    """Rows as dicts with None (not NaN/NaT/NA) for missing values."""
    out: list[dict[str, Any]] = []
    for row in df.to_dict("records"):
        out.append({str(k): (None if _missing(v) else v) for k, v in row.items()})
    return out


def _missing(value: Any) -> bool:
    if value is None:
        return True
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):
        return False


def _check_run(store: Store, run_id: str) -> None:
    if _one(store, "SELECT 1 FROM runs WHERE run_id = ?", [run_id]) is None:
        raise RunNotFound(f"There is no run “{run_id}” in this store.")


# --- the rollout list ----------------------------------------------------------------------


@dataclass(frozen=True)
class RolloutQuery:
    """Filters and order of the rollout list. Ranges are inclusive; None means unbounded."""

    runs: tuple[str, ...] = ()
    steps: tuple[int, int] | None = None
    split: str | None = None
    prompt_id: str | None = None
    reward: tuple[float, float] | None = None
    calls: tuple[int, int] | None = None
    latency_ms: tuple[float, float] | None = None
    status: str | None = None
    search: str = ""
    sort: str = "step"
    descending: bool = False

    def __post_init__(self) -> None:
        if self.sort not in SORTS:
            raise ValueError(f"sort must be one of {', '.join(SORTS)}, got {self.sort!r}")


def _where(q: RolloutQuery) -> tuple[str, list[Any]]:
    clauses: list[str] = []
    params: list[Any] = []
    if q.runs:
        clauses.append("r.run_id IN (SELECT unnest(?::VARCHAR[]))")
        params.append(list(q.runs))
    for column, bounds in (
        ("r.step", q.steps),
        ("r.reward", q.reward),
        ("r.n_tool_calls", q.calls),
        ("r.latency_ms", q.latency_ms),
    ):
        if bounds is not None:
            clauses.append(f"{column} BETWEEN ? AND ?")
            params.extend(bounds)
    for column, value in (
        ("r.split", q.split),
        ("r.prompt_id", q.prompt_id),
        ("r.status", q.status),
    ):
        if value:
            clauses.append(f"{column} = ?")
            params.append(value)
    return (" AND ".join(clauses) or "true"), params


def list_rollouts(
    store: Store, q: RolloutQuery, *, limit: int = 50, offset: int = 0
) -> pd.DataFrame:
    """One page of the filtered, sorted rollout list (prompt and answer cut to 200 chars)."""
    where, params = _where(q)
    search_sql, search_params = _search_filter(store, q.search)
    direction = "DESC" if q.descending else "ASC"
    sql = (
        f"SELECT {LIST_COLUMNS} FROM rollouts r WHERE {where} AND {search_sql}"
        f" ORDER BY {SORTS[q.sort]} {direction} NULLS LAST, r.run_id, r.step, r.prompt_id,"
        " r.sample_index, r.rollout_id LIMIT ? OFFSET ?"
    )
    return _query(store, sql, [*params, *search_params, int(limit), int(offset)])


def count_rollouts(store: Store, q: RolloutQuery) -> int:
    where, params = _where(q)
    search_sql, search_params = _search_filter(store, q.search)
    row = _one(
        store,
        f"SELECT count(*) FROM rollouts r WHERE {where} AND {search_sql}",
        [*params, *search_params],
    )
    return int(row[0]) if row else 0


def filter_bounds(store: Store, runs: Sequence[str] = ()) -> dict[str, Any]:
    """What the list's filters can range over: steps, rewards, calls, latency, splits, prompts."""
    where = "run_id IN (SELECT unnest(?::VARCHAR[]))" if runs else "true"
    params: list[Any] = [list(runs)] if runs else []
    row = _one(
        store,
        f"""SELECT min(step), max(step), min(reward), max(reward), max(n_tool_calls),
                   max(latency_ms), list(DISTINCT split ORDER BY split),
                   list(DISTINCT status ORDER BY status), count(*)
            FROM rollouts WHERE {where}""",
        params,
    )
    prompts = _query(
        store,
        f"SELECT DISTINCT prompt_id FROM rollouts WHERE {where} AND prompt_id IS NOT NULL"
        " ORDER BY prompt_id",
        params,
    )["prompt_id"].tolist()
    assert row is not None
    return {
        "steps": (row[0], row[1]),
        "reward": (row[2], row[3]),
        "max_calls": row[4],
        "max_latency_ms": row[5],
        "splits": list(row[6] or []),
        "statuses": list(row[7] or []),
        "rollouts": int(row[8]),
        "prompts": prompts,
    }


# --- full-text search -----------------------------------------------------------------------

# One document a rollout; `doc_key` changes when the rollout does (items merged in later).
_DOC_SQL = """
    SELECT r.run_id, r.rollout_id,
           concat_ws(chr(10), any_value(r.final_answer),
                     string_agg(concat_ws(chr(10), e.text, e.tool_name, e.arguments, e.output,
                                          e.error), chr(10) ORDER BY e.seq)) AS doc
    FROM rollouts r LEFT JOIN events e USING (run_id, rollout_id)
    {where}
    GROUP BY r.run_id, r.rollout_id
"""
_DOC_KEY = "hash(r.n_events, r.import_id, r.final_answer, r.status)"

# A word: a run of letters, digits and underscores (Unicode letters too), compared lowercased.
_WORD = re.compile(r"[^\W]+", re.UNICODE)
_SPLIT_SQL = r"string_split_regex(lower(doc), '[^\pL\pN_]+')"


def _parse_search(text: str) -> tuple[list[str], list[str]]:
    """Words (each must occur as a word) and quoted phrases (each must occur as typed)."""
    phrases = [p.strip().lower() for p in re.findall(r'"([^"]+)"', text) if p.strip()]
    words = [w.lower() for w in _WORD.findall(text)]
    return list(dict.fromkeys(words)), phrases


def _store_fingerprint(cur: duckdb.DuckDBPyConnection) -> tuple[int, int, int | None]:
    row = cur.execute(
        "SELECT (SELECT count(*) FROM rollouts), (SELECT coalesce(sum(n_events), 0) FROM rollouts),"
        " (SELECT max(import_id) FROM imports)"
    ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1]), None if row[2] is None else int(row[2])


def _rollout_count(store: Store) -> int:
    row = _one(store, "SELECT count(*) FROM rollouts")
    return int(row[0]) if row else 0


def search_index_state(store: Store) -> Literal["fresh", "stale", "missing"]:
    """Whether the search index covers the store as it is now."""
    cur = store.cursor()
    try:
        built = cur.execute(
            "SELECT rollouts, events, last_import_id FROM search_index_state"
        ).fetchone()
        if built is None:
            return "missing"
        current = _store_fingerprint(cur)
    finally:
        cur.close()
    return "fresh" if tuple(built) == current else "stale"


#: Up to this many rollouts to (re)index, the searcher waits for the index (about 2 ms a
#: rollout here); above, it is updated in a background thread and searches use the index as
#: it was (without the newest rollouts) until it is done.
SYNC_INDEX_MAX_ROLLOUTS = 10_000

_UPDATES: weakref.WeakKeyDictionary[Store, threading.Thread] = weakref.WeakKeyDictionary()


def search_index_rebuilding(store: Store) -> bool:
    """Whether a background update of the search index is running."""
    thread = _UPDATES.get(store)
    return thread is not None and thread.is_alive()


def _pending_rollouts(store: Store) -> int:
    """Rollouts the index lacks or holds in an older version (plus ones since deleted)."""
    row = _one(
        store,
        f"""SELECT (SELECT count(*) FROM rollouts r ANTI JOIN search_docs d
                       ON d.run_id = r.run_id AND d.rollout_id = r.rollout_id
                       AND d.doc_key = {_DOC_KEY})
                 + (SELECT count(*) FROM search_docs d ANTI JOIN rollouts r
                       ON d.run_id = r.run_id AND d.rollout_id = r.rollout_id
                       AND d.doc_key = {_DOC_KEY})""",
    )
    return int(row[0]) if row else 0


def _update_search_index(store: Store) -> None:
    """Index what changed since the last update: drop documents of rollouts deleted or
    changed, add documents (and their words) for rollouts new or changed."""
    with store.transaction() as cur:
        fingerprint = _store_fingerprint(cur)
        built = cur.execute(
            "SELECT rollouts, events, last_import_id FROM search_index_state"
        ).fetchone()
        if built is not None and tuple(built) == fingerprint:
            return  # another thread did it while this one waited for the lock
        cur.execute(
            f"""CREATE TEMP TABLE gone AS
                SELECT d.doc_id FROM search_docs d ANTI JOIN rollouts r
                ON d.run_id = r.run_id AND d.rollout_id = r.rollout_id AND d.doc_key = {_DOC_KEY}"""
        )
        try:
            cur.execute("DELETE FROM search_terms WHERE doc_id IN (SELECT doc_id FROM gone)")
            cur.execute("DELETE FROM search_docs WHERE doc_id IN (SELECT doc_id FROM gone)")
        finally:
            cur.execute("DROP TABLE gone")
        if built is not None and fingerprint[0] < int(built[0]):
            # Rollouts were deleted; Store.delete_run may have dropped their documents (it
            # clears every table with a run_id) but cannot see their words here.
            cur.execute(
                "DELETE FROM search_terms WHERE doc_id NOT IN (SELECT doc_id FROM search_docs)"
            )
        # Never reuse a document id: words left by a document deleted elsewhere stay harmless.
        start_row = cur.execute(
            "SELECT greatest((SELECT max(doc_id) FROM search_docs),"
            " (SELECT max(doc_id) FROM search_terms), 0)"
        ).fetchone()
        start = int(start_row[0]) if start_row else 0
        where = (
            "WHERE NOT EXISTS (SELECT 1 FROM search_docs d WHERE d.run_id = r.run_id"
            " AND d.rollout_id = r.rollout_id)"
        )
        cur.execute(
            f"""CREATE TEMP TABLE fresh_docs AS
                SELECT ? + row_number() OVER () AS doc_id, x.run_id, x.rollout_id, x.doc,
                       {_DOC_KEY} AS doc_key
                FROM ({_DOC_SQL.format(where=where)}) x
                JOIN rollouts r USING (run_id, rollout_id)""",
            [start],
        )
        try:
            cur.execute(
                "INSERT INTO search_docs (doc_id, run_id, rollout_id, doc, doc_key)"
                " SELECT doc_id, run_id, rollout_id, doc, doc_key FROM fresh_docs"
            )
            # Sorted by word, so a lookup of one word reads few row groups (zone maps).
            cur.execute(
                f"""INSERT INTO search_terms
                    SELECT DISTINCT unnest({_SPLIT_SQL}) AS term, doc_id FROM fresh_docs
                    ORDER BY term, doc_id"""
            )
            cur.execute("DELETE FROM search_terms WHERE term = ''")
        finally:
            cur.execute("DROP TABLE fresh_docs")
        cur.execute("DELETE FROM search_index_state")
        cur.execute(
            "INSERT INTO search_index_state (rollouts, events, last_import_id) VALUES (?, ?, ?)",
            list(fingerprint),
        )


def _update_in_background(store: Store) -> None:
    try:
        _update_search_index(store)
    except Exception:  # the next search tries again; searches scan meanwhile
        log.exception("Updating the search index failed")


def ensure_search_index(store: Store, *, wait: bool = True) -> bool:
    """Make the search index cover the store as it is now; True when it does.

    With ``wait=False`` a stale index is updated in a background thread and this returns
    False at once (search by scanning meanwhile). Always False for a read-only store.
    """
    if store.read_only:
        return False
    if search_index_state(store) == "fresh":
        return True
    running = _UPDATES.get(store)
    if running is not None and running.is_alive():
        if not wait:
            return False
        running.join()
        return search_index_state(store) == "fresh"
    if wait:
        _update_search_index(store)
        return True
    thread = threading.Thread(
        target=_update_in_background, args=(store,), name="rollscope-search-index", daemon=True
    )
    _UPDATES[store] = thread
    thread.start()
    return False


def prepare_search_index(store: Store) -> bool:
    """What a search does first: bring the index up to date now when little changed, else
    in the background (True when the index can serve this search)."""
    if store.read_only:
        return False
    if search_index_state(store) == "fresh":
        return True
    small = min(_rollout_count(store), _pending_rollouts(store)) <= SYNC_INDEX_MAX_ROLLOUTS
    return ensure_search_index(store, wait=small)


def _search_filter(store: Store, text: str) -> tuple[str, list[Any]]:
    words, phrases = _parse_search(text or "")
    if not words and not phrases:
        return "true", []
    phrase_sql = ["contains(lower(d.doc), ?)" for _ in phrases]
    # A big update runs in the background: meanwhile the index as it was answers (it lacks
    # the newest rollouts; deleted ones drop out by the join with rollouts). Only a read-only
    # store, which cannot hold an index of its own making, is scanned.
    if prepare_search_index(store) or not store.read_only:
        # One constant lookup a word: each reads only the row groups holding that word.
        clauses = ["d.doc_id IN (SELECT doc_id FROM search_terms WHERE term = ?)" for _ in words]
        sql = (
            "(r.run_id, r.rollout_id) IN (SELECT d.run_id, d.rollout_id FROM search_docs d"
            f" WHERE {' AND '.join(clauses + phrase_sql)})"
        )
        return sql, [*words, *phrases]
    # Scan: build the documents on the fly; a word must stand alone, as in the index.
    clauses = [f"list_contains({_SPLIT_SQL}, ?)" for _ in words]
    sql = (
        "(r.run_id, r.rollout_id) IN (SELECT d.run_id, d.rollout_id FROM"
        f" ({_DOC_SQL.format(where='')}) d WHERE {' AND '.join(clauses + phrase_sql)})"
    )
    return sql, [*words, *phrases]


# --- one rollout ------------------------------------------------------------------------------


def rollout_header(store: Store, run_id: str, rollout_id: str) -> dict[str, Any]:
    """The rollout's row joined with its run's name, kind and model."""
    df = _query(
        store,
        """SELECT r.*, u.name AS run_name, u.kind AS run_kind, u.model
           FROM rollouts r JOIN runs u USING (run_id)
           WHERE r.run_id = ? AND r.rollout_id = ?""",
        [run_id, rollout_id],
    )
    if df.empty:
        _check_run(store, run_id)
        raise RolloutNotFound(f"Run “{run_id}” has no rollout “{rollout_id}”.")
    header = _records(df)[0]
    meta = header.get("metadata")
    header["metadata"] = json.loads(meta) if isinstance(meta, str) else (meta or {})
    return header


def rollout_grades(store: Store, run_id: str, rollout_id: str) -> pd.DataFrame:
    """Grader breakdown: grader, score, weight, weighted score, explanation."""
    return _query(
        store,
        """SELECT grader, score, weight, score * weight AS weighted, explanation
           FROM grades WHERE run_id = ? AND rollout_id = ? ORDER BY coalesce(weight, 0) DESC, grader""",
        [run_id, rollout_id],
    )


def turn_pages(
    store: Store, run_id: str, rollout_id: str, *, items_per_page: int = 120
) -> list[tuple[int, int]]:
    """Turn ranges (inclusive) that split the trajectory into pages of about
    `items_per_page` items without splitting a turn."""
    df = _query(
        store,
        "SELECT turn, count(*) AS n FROM events WHERE run_id = ? AND rollout_id = ?"
        " GROUP BY turn ORDER BY turn",
        [run_id, rollout_id],
    )
    pages: list[tuple[int, int]] = []
    start: int | None = None
    count = 0
    last = 0
    for turn, n in zip(df["turn"].tolist(), df["n"].tolist(), strict=True):
        if start is None:
            start = int(turn)
        count += int(n)
        last = int(turn)
        if count >= items_per_page:
            pages.append((start, last))
            start, count = None, 0
    if start is not None:
        pages.append((start, last))
    return pages


def rollout_events(
    store: Store,
    run_id: str,
    rollout_id: str,
    *,
    turns: tuple[int, int] | None = None,
    preview_chars: int = PREVIEW_CHARS,
) -> pd.DataFrame:
    """The trajectory's items in order; long text fields cut to `preview_chars`, with their
    full length in ``<field>_chars`` so a screen can offer the rest (`event_field`)."""
    where = "run_id = ? AND rollout_id = ?"
    params: list[Any] = [run_id, rollout_id]
    if turns is not None:
        where += " AND turn BETWEEN ? AND ?"
        params += list(turns)
    n = int(preview_chars)
    return _query(
        store,
        f"""SELECT seq, turn, kind, role, tool_name, call_id, started_at, duration_ms, tokens,
                  left(text, {n}) AS text, length(text) AS text_chars,
                  left(arguments, {n}) AS arguments, length(arguments) AS arguments_chars,
                  left(output, {n}) AS output, length(output) AS output_chars,
                  left(error, {n}) AS error, length(error) AS error_chars
           FROM events WHERE {where} ORDER BY seq""",
        params,
    )


_FIELDS = ("text", "arguments", "output", "error")


def event_field(store: Store, run_id: str, rollout_id: str, seq: int, name: str) -> str:
    """The whole of one text field of one item (for "show all")."""
    if name not in _FIELDS:
        raise ValueError(f"field must be one of {', '.join(_FIELDS)}")
    row = _one(
        store,
        f"SELECT {name} FROM events WHERE run_id = ? AND rollout_id = ? AND seq = ?",
        [run_id, rollout_id, int(seq)],
    )
    if row is None:
        raise RolloutNotFound(f"Rollout “{rollout_id}” has no item {seq}.")
    return str(row[0] or "")


def find_in_rollout(store: Store, run_id: str, rollout_id: str, term: str) -> pd.DataFrame:
    """Items whose text, tool name, arguments, output or error contain `term` (any case)."""
    if not term.strip():
        return pd.DataFrame(columns=["seq", "turn", "kind", "field", "snippet"])
    return _query(
        store,
        """WITH hits AS (
               SELECT seq, turn, kind, f.name AS field, f.value,
                      instr(lower(f.value), lower(?)) AS pos
               FROM events,
                    (SELECT unnest([
                        {'name': 'text', 'value': text}, {'name': 'tool', 'value': tool_name},
                        {'name': 'arguments', 'value': arguments},
                        {'name': 'output', 'value': output}, {'name': 'error', 'value': error}
                     ], recursive := true)) f
               WHERE run_id = ? AND rollout_id = ?
           )
           SELECT seq, turn, kind, field,
                  substr(value, greatest(pos - 60, 1), 60 + length(?) + 60) AS snippet
           FROM hits WHERE pos > 0 ORDER BY seq, field""",
        [term, run_id, rollout_id, term],
    )


def tool_timeline(store: Store, run_id: str, rollout_id: str) -> pd.DataFrame:
    """Tool calls and reasoning over time: one row a span, offsets in ms from the rollout start.

    Calls without timestamps are laid end to end in order, so a serial chain still shows.
    """
    df = _query(
        store,
        """WITH base AS (
               SELECT min(started_at) AS t0 FROM events WHERE run_id = ? AND rollout_id = ?
           )
           SELECT e.seq, e.turn, e.kind,
                  CASE WHEN e.kind = 'tool_call' THEN e.tool_name ELSE 'reasoning' END AS label,
                  e.call_id,
                  epoch_ms(e.started_at) - epoch_ms(b.t0) AS start_ms,
                  coalesce(e.duration_ms, 0) AS duration_ms,
                  res.error IS NOT NULL AS failed
           FROM events e CROSS JOIN base b
           LEFT JOIN events res ON res.run_id = e.run_id AND res.rollout_id = e.rollout_id
                AND res.kind = 'tool_result' AND res.call_id = e.call_id
           WHERE e.run_id = ? AND e.rollout_id = ? AND e.kind IN ('tool_call', 'reasoning')
           ORDER BY e.seq""",
        [run_id, rollout_id, run_id, rollout_id],
    )
    if not df.empty and df["start_ms"].isna().any():
        cursor = 0.0
        starts = []
        for start, duration in zip(df["start_ms"], df["duration_ms"], strict=True):
            starts.append(cursor if _missing(start) else float(start))
            cursor = starts[-1] + float(duration or 0)
        df["start_ms"] = starts
    df["failed"] = df["failed"].astype(bool)
    return df


def rollout_neighbours(store: Store, run_id: str, rollout_id: str) -> dict[str, str | None]:
    """Rollout ids of the previous/next sample of the same prompt at the same step, and of the
    same prompt (same sample index where it exists) at the previous/next step."""
    header = rollout_header(store, run_id, rollout_id)
    step, prompt, sample, split = (
        header["step"],
        header["prompt_id"],
        header["sample_index"],
        header["split"],
    )
    samples = _query(
        store,
        "SELECT rollout_id FROM rollouts WHERE run_id = ? AND step = ? AND prompt_id IS NOT DISTINCT"
        " FROM ? AND split = ? ORDER BY sample_index NULLS LAST, rollout_id",
        [run_id, step, prompt, split],
    )["rollout_id"].tolist()
    i = samples.index(rollout_id)

    def at_step(op: str, order: str) -> str | None:
        row = _one(
            store,
            f"""SELECT rollout_id FROM rollouts
                WHERE run_id = ? AND prompt_id IS NOT DISTINCT FROM ? AND split = ? AND step {op} ?
                ORDER BY step {order}, (sample_index IS NOT DISTINCT FROM ?) DESC,
                         sample_index NULLS LAST, rollout_id LIMIT 1""",
            [run_id, prompt, split, step, sample],
        )
        return None if row is None else str(row[0])

    return {
        "prev_sample": samples[i - 1] if i > 0 else None,
        "next_sample": samples[i + 1] if i + 1 < len(samples) else None,
        "prev_step": at_step("<", "DESC"),
        "next_step": at_step(">", "ASC"),
    }


# --- turns --------------------------------------------------------------------------------


@dataclass
class Turn:
    """One model turn: what the model thought and said, and the calls it made together
    (each paired with its result), then the results' messages (e.g. a user reply)."""

    number: int
    items: list[dict[str, Any]] = field(default_factory=list)
    calls: list[tuple[dict[str, Any], dict[str, Any] | None]] = field(default_factory=list)

    @property
    def parallel(self) -> bool:
        return len(self.calls) > 1


def group_turns(events: pd.DataFrame) -> list[Turn]:
    """Group a trajectory's items into turns; a tool result joins its call (by call id, else
    by order within the turn)."""
    turns: dict[int, Turn] = {}
    for item in _records(events):
        number = int(item["turn"])
        turn = turns.setdefault(number, Turn(number))
        if item["kind"] == "tool_call":
            turn.calls.append((item, None))
        elif item["kind"] == "tool_result":
            for i, (call, result) in enumerate(turn.calls):
                same = item.get("call_id") and call.get("call_id") == item["call_id"]
                if result is None and (same or not item.get("call_id")):
                    turn.calls[i] = (call, item)
                    break
            else:
                turn.items.append(item)
        else:
            turn.items.append(item)
    return [turns[k] for k in sorted(turns)]


def _canonical_args(arguments: str | None) -> str:
    if arguments is None:
        return ""
    try:
        return json.dumps(json.loads(arguments), sort_keys=True, separators=(",", ":"))
    except (ValueError, TypeError):
        return arguments.strip()


def _signature_rows(store: Store, run_id: str, rollout_id: str) -> list[dict[str, Any]]:
    rollout_header(store, run_id, rollout_id)
    df = _query(
        store,
        """WITH e AS (
               SELECT seq, turn, kind, tool_name, call_id, arguments, duration_ms, error,
                      CASE WHEN kind = 'message' THEN text END AS text
               FROM events WHERE run_id = ? AND rollout_id = ? AND turn > 0
           ), failed AS (
               SELECT call_id, any_value(error) AS error FROM e
               WHERE kind = 'tool_result' AND error IS NOT NULL GROUP BY call_id
           )
           SELECT e.turn, e.tool_name, e.arguments, e.duration_ms, e.kind, f.error, e.text
           FROM e LEFT JOIN failed f ON e.kind = 'tool_call' AND f.call_id = e.call_id
           ORDER BY e.seq""",
        [run_id, rollout_id],
    )
    by_turn: dict[int, dict[str, Any]] = {}
    for item in _records(df):
        number = int(item["turn"])
        row = by_turn.setdefault(
            number,
            {
                "turn": number,
                "calls": [],
                "tools": [],
                "errors": 0,
                "duration_ms": 0.0,
                "message": None,
            },
        )
        if item["kind"] == "tool_call":
            row["calls"].append(f"{item['tool_name']}({_canonical_args(item['arguments'])})")
            row["tools"].append(str(item["tool_name"]))
            row["errors"] += item["error"] is not None
            row["duration_ms"] += float(item["duration_ms"] or 0)
        elif item["kind"] == "message" and item["text"] is not None:
            row["message"] = item["text"]
    return [by_turn[k] for k in sorted(by_turn)]


def turn_signatures(store: Store, run_id: str, rollout_id: str) -> pd.DataFrame:
    """Per model turn: the calls made (``name(args)``, arguments as canonical JSON, in call
    order), the tools, errors, summed call time and the last message. Turn 0 (the prompt) is
    left out."""
    return pd.DataFrame(
        _signature_rows(store, run_id, rollout_id),
        columns=["turn", "calls", "tools", "errors", "duration_ms", "message"],
    )


@dataclass(frozen=True)
class CompareRef:
    run_id: str
    rollout_id: str


def divergence_of(signatures: Sequence[pd.DataFrame]) -> int | None:
    """`first_divergence` from `turn_signatures` frames already fetched."""
    sigs = [
        {int(t): tuple(c) for t, c in zip(df["turn"].tolist(), df["calls"].tolist(), strict=True)}
        for df in signatures
    ]
    turns: set[int] = set()
    for sig in sigs:
        turns.update(sig)
    for turn in sorted(turns):
        if len({sig.get(turn, ()) for sig in sigs}) > 1:
            return turn
    return None


def rollout_index(store: Store, run_id: str, rollout_id: str) -> pd.DataFrame:
    """The trajectory's items without their text: seq, turn, kind, tool name, call id."""
    return _query(
        store,
        "SELECT seq, turn, kind, tool_name, call_id FROM events"
        " WHERE run_id = ? AND rollout_id = ? ORDER BY seq",
        [run_id, rollout_id],
    )


def first_divergence(store: Store, refs: Sequence[CompareRef]) -> int | None:
    """The first model turn where the rollouts' tool calls differ (another tool, other
    arguments, another number of calls, or one has stopped calling); None if they never do."""
    return divergence_of([turn_signatures(store, r.run_id, r.rollout_id) for r in refs])


def aligned_turns(store: Store, refs: Sequence[CompareRef]) -> pd.DataFrame:
    """One row a model turn, one column a rollout (``calls_0``, ``calls_1``, ...), and
    ``same`` (every rollout made the same calls in that turn)."""
    sigs = [
        {row["turn"]: list(row["calls"]) for row in _signature_rows(store, r.run_id, r.rollout_id)}
        for r in refs
    ]
    turns: set[int] = set()
    for sig in sigs:
        turns.update(sig)
    ordered = sorted(turns)
    columns: dict[str, list[Any]] = {"turn": list(ordered)}
    for i, sig in enumerate(sigs):
        columns[f"calls_{i}"] = [sig.get(t) for t in ordered]
    columns["same"] = [len({tuple(sig.get(t) or ()) for sig in sigs}) == 1 for t in ordered]
    return pd.DataFrame(columns)


def answer_diff(a: str | None, b: str | None) -> str:
    """A unified diff of two final answers (empty when they are equal)."""
    lines = difflib.unified_diff(
        (a or "").splitlines(), (b or "").splitlines(), "left", "right", lineterm="", n=2
    )
    return "\n".join(lines)


def grade_anchors(grades: pd.DataFrame, events: pd.DataFrame) -> dict[str, str]:
    """Which part of the trajectory each grader's explanation points at.

    ``"call:<call_id>"`` when it names a call id, ``"tool:<name>"`` when it names a tool the
    rollout called (its last call), ``"turn:<n>"`` when it says "turn n", else ``"answer"``.
    """
    call_ids = [c for c in events.get("call_id", pd.Series(dtype=str)).dropna().unique() if c]
    tools = [t for t in events.get("tool_name", pd.Series(dtype=str)).dropna().unique() if t]
    anchors: dict[str, str] = {}
    for grader, text in zip(grades["grader"], grades["explanation"], strict=True):
        explanation = "" if _missing(text) else str(text)
        anchor = "answer"
        named = [c for c in call_ids if re.search(rf"(?<!\w){re.escape(c)}(?!\w)", explanation)]
        turn = re.search(r"\bturn\s+(\d+)\b", explanation, re.IGNORECASE)
        tool = [t for t in tools if re.search(rf"\b{re.escape(t)}\b", explanation)]
        if named:
            anchor = f"call:{named[0]}"
        elif turn:
            anchor = f"turn:{turn.group(1)}"
        elif tool:
            anchor = f"tool:{tool[0]}"
        anchors[str(grader)] = anchor
    return anchors


# --- groups and prompts over time ----------------------------------------------------------


def prompt_group(
    store: Store, run_id: str, prompt_id: str, step: int, split: str | None = None
) -> pd.DataFrame:
    """All samples of a prompt at a step, with GRPO's advantage.

    advantage = (reward - group mean) / group std (sample std, as GRPO trainers compute it);
    ``no_signal`` is true on every row when all samples scored the same (advantage 0).
    """
    _check_run(store, run_id)
    return _query(
        store,
        """WITH g AS (
               SELECT rollout_id, sample_index, reward, n_tool_calls, n_turns, latency_ms, status,
                      left(final_answer, 200) AS final_answer,
                      avg(reward) OVER () AS group_mean, stddev_samp(reward) OVER () AS group_std,
                      max(reward) OVER () - min(reward) OVER () AS spread
               FROM rollouts WHERE run_id = ? AND prompt_id = ? AND step = ?
                    AND (? IS NULL OR split = ?)
           )
           SELECT rollout_id, sample_index, reward,
                  CASE WHEN coalesce(spread, 0) = 0 THEN 0.0
                       ELSE (reward - group_mean) / group_std END AS advantage,
                  n_tool_calls, n_turns, latency_ms, status, final_answer, group_mean, group_std,
                  coalesce(spread, 0) = 0 AS no_signal
           FROM g ORDER BY reward DESC NULLS LAST, sample_index""",
        [run_id, prompt_id, int(step), split, split],
    )


def best_worst_pair(
    store: Store, run_id: str, prompt_id: str, step: int, split: str | None = None
) -> list[str]:
    """The best and the worst sample of a group (ties broken by sample index: the first
    sample counts as the best, the last as the worst)."""
    group = prompt_group(store, run_id, prompt_id, step, split)
    if group.empty:
        raise RolloutNotFound(
            f"Run “{run_id}” has no samples of prompt “{prompt_id}” at step {step}."
        )
    ranked = group.sort_values(["reward", "sample_index"], ascending=[False, True])
    best, worst = str(ranked.iloc[0]["rollout_id"]), str(ranked.iloc[-1]["rollout_id"])
    return [best] if best == worst else [best, worst]


def _pick_sample(
    store: Store, run_id: str, prompt_id: str, step: int | None, sample: int | None
) -> str | None:
    row = _one(
        store,
        """SELECT rollout_id FROM rollouts WHERE run_id = ? AND prompt_id = ?
               AND (? IS NULL OR step = ?)
           ORDER BY step DESC, (sample_index IS NOT DISTINCT FROM ?) DESC, sample_index, rollout_id
           LIMIT 1""",
        [run_id, prompt_id, step, step, sample],
    )
    return None if row is None else str(row[0])


def step_pair_refs(
    store: Store, run_id: str, prompt_id: str, steps: Sequence[int], sample: int | None = 0
) -> list[CompareRef]:
    """The same prompt at each of `steps` (the same sample index where it exists)."""
    _check_run(store, run_id)
    refs = []
    for step in steps:
        rid = _pick_sample(store, run_id, prompt_id, int(step), sample)
        if rid is None:
            raise RolloutNotFound(
                f"Run “{run_id}” has no rollout of prompt “{prompt_id}” at step {step}."
            )
        refs.append(CompareRef(run_id, rid))
    return refs


def run_pair_refs(
    store: Store, run_ids: Sequence[str], prompt_id: str, sample: int | None = 0
) -> list[CompareRef]:
    """The same prompt in each run, at that run's last step with the prompt."""
    refs = []
    for run_id in run_ids:
        _check_run(store, run_id)
        rid = _pick_sample(store, run_id, prompt_id, None, sample)
        if rid is None:
            raise RolloutNotFound(f"Run “{run_id}” has no rollout of prompt “{prompt_id}”.")
        refs.append(CompareRef(run_id, rid))
    return refs


def prompt_history(
    store: Store, run_id: str, prompt_id: str, split: str | None = None
) -> pd.DataFrame:
    """One row a step for one prompt: mean/min/max reward, mean tool calls, mean output tokens,
    and the final answer of the best sample."""
    _check_run(store, run_id)
    return _query(
        store,
        """SELECT step, count(*) AS samples, avg(reward) AS mean_reward, min(reward) AS min_reward,
                  max(reward) AS max_reward, avg(n_tool_calls) AS mean_calls,
                  avg(n_turns) AS mean_turns, avg(output_tokens) AS mean_output_tokens,
                  arg_max(final_answer, coalesce(reward, -1e300)) AS best_answer,
                  arg_max(rollout_id, coalesce(reward, -1e300)) AS best_rollout
           FROM rollouts WHERE run_id = ? AND prompt_id = ? AND (? IS NULL OR split = ?)
           GROUP BY step ORDER BY step""",
        [run_id, prompt_id, split, split],
    )


def prompt_deltas(store: Store, run_a: str, run_b: str, split: str | None = None) -> pd.DataFrame:
    """For each prompt in both runs: mean reward in A and in B, each at that run's last step
    holding the prompt, the change, and the best rollout of each to open as a pair."""
    _check_run(store, run_a)
    _check_run(store, run_b)
    return _query(
        store,
        """WITH last AS (
               SELECT run_id, prompt_id, max(step) AS step FROM rollouts
               WHERE run_id IN (?, ?) AND (? IS NULL OR split = ?) GROUP BY ALL
           ), per AS (
               SELECT r.run_id, r.prompt_id, l.step, avg(r.reward) AS reward, count(*) AS samples,
                      arg_max(r.rollout_id, coalesce(r.reward, -1e300)) AS best_rollout
               FROM rollouts r JOIN last l USING (run_id, prompt_id, step)
               WHERE (? IS NULL OR r.split = ?)
               GROUP BY ALL
           )
           SELECT a.prompt_id, a.step AS step_a, a.reward AS reward_a, a.samples AS samples_a,
                  b.step AS step_b, b.reward AS reward_b, b.samples AS samples_b,
                  b.reward - a.reward AS delta,
                  CASE WHEN b.reward - a.reward > 1e-9 THEN 'improved'
                       WHEN b.reward - a.reward < -1e-9 THEN 'regressed' ELSE 'same' END AS change,
                  a.best_rollout AS rollout_a, b.best_rollout AS rollout_b
           FROM per a JOIN per b ON a.prompt_id = b.prompt_id AND a.run_id = ? AND b.run_id = ?
           ORDER BY delta, a.prompt_id""",
        [run_a, run_b, split, split, split, split, run_a, run_b],
    )


# --- export -------------------------------------------------------------------------------


def _item(event: dict[str, Any]) -> dict[str, Any]:
    kind = event["kind"]
    item: dict[str, Any]
    if kind == "reasoning":
        item = {"type": "reasoning", "text": event.get("text") or ""}
    elif kind == "tool_call":
        item = {
            "type": "function_call",
            "call_id": event.get("call_id"),
            "name": event.get("tool_name"),
            "arguments": event.get("arguments") or "",
        }
    elif kind == "tool_result":
        item = {
            "type": "function_call_output",
            "call_id": event.get("call_id"),
            "output": event.get("output") or "",
        }
        if event.get("error"):
            item["error"] = event["error"]
    else:
        item = {"type": "message", "role": event.get("role") or "assistant"}
        item["content"] = event.get("text") or ""
    if event.get("started_at") is not None:
        item["started_at"] = pd.Timestamp(event["started_at"]).isoformat() + "Z"
    if event.get("duration_ms") is not None:
        item["duration_ms"] = float(event["duration_ms"])
    if event.get("tokens") is not None:
        item["tokens"] = int(event["tokens"])
    return item


def _iso(value: Any) -> str | None:
    return None if _missing(value) else pd.Timestamp(value).isoformat() + "Z"


def _record(
    h: dict[str, Any], events: list[dict[str, Any]], grades: list[dict[str, Any]]
) -> dict[str, Any]:
    """A canonical rollout record from a header row (with run name, kind, model), its items
    in order and its grades."""
    meta = h.get("metadata")
    usage = {
        k: int(h[k])
        for k in ("input_tokens", "output_tokens", "reasoning_tokens")
        if h.get(k) is not None
    }
    record: dict[str, Any] = {
        "run_id": h["run_id"],
        "run_name": h.get("run_name"),
        "run_kind": h.get("run_kind"),
        "model": h.get("model"),
        "rollout_id": h["rollout_id"],
        "step": int(h["step"]),
        "prompt_id": h.get("prompt_id"),
        "sample_index": None if h.get("sample_index") is None else int(h["sample_index"]),
        "split": h.get("split"),
        "items": [_item(e) for e in events],
        "reward": h.get("reward"),
        "grades": [
            {"name": g["grader"]}
            | {k: g[k] for k in ("score", "weight", "explanation") if g.get(k) is not None}
            for g in grades
        ],
        "final_answer": h.get("final_answer"),
        "reference": h.get("reference"),
        "status": h.get("status"),
        "started_at": _iso(h.get("started_at")),
        "ended_at": _iso(h.get("ended_at")),
        "latency_ms": h.get("latency_ms"),
        "usage": usage,
        "metadata": (json.loads(meta) if isinstance(meta, str) else meta) or {},
    }
    return {k: v for k, v in record.items() if v is not None}


def export_rollout_json(store: Store, run_id: str, rollout_id: str) -> dict[str, Any]:
    """The rollout as one canonical record (re-importable with `Store.ingest_records`)."""
    h = rollout_header(store, run_id, rollout_id)
    events = _query(
        store,
        "SELECT * FROM events WHERE run_id = ? AND rollout_id = ? ORDER BY seq",
        [run_id, rollout_id],
    )
    grades = rollout_grades(store, run_id, rollout_id)
    return _record(h, _records(events), _records(grades))


def export_rollout_markdown(store: Store, run_id: str, rollout_id: str) -> str:
    """A readable transcript (for a bug report or a notebook). Trace text goes in fenced
    blocks, so a Markdown viewer shows it as written."""
    rec = export_rollout_json(store, run_id, rollout_id)

    def fence(text: str, lang: str = "") -> str:
        longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
        ticks = "`" * max(3, longest + 1)
        return f"{ticks}{lang}\n{text}\n{ticks}"

    lines = [
        f"# Rollout {rec['rollout_id']}",
        "",
        f"- run: {rec['run_id']}",
        f"- step: {rec.get('step')}  prompt: {rec.get('prompt_id')}  sample: {rec.get('sample_index')}",
        f"- reward: {rec.get('reward')}  status: {rec.get('status')}  latency_ms: {rec.get('latency_ms')}",
        "",
        "## Grades",
        "",
    ]
    for g in rec["grades"]:
        lines.append(
            f"- {g['name']}: score {g.get('score')} weight {g.get('weight')}"
            + (f" — {g['explanation']}" if g.get("explanation") else "")
        )
    lines += ["", "## Trajectory", ""]
    for item in rec["items"]:
        kind = item["type"]
        if kind == "function_call":
            lines += [
                f"### call {item.get('name')} ({item.get('call_id')})",
                fence(str(item.get("arguments")), "json"),
            ]
        elif kind == "function_call_output":
            lines += [f"### result ({item.get('call_id')})", fence(str(item.get("output")))]
            if item.get("error"):
                lines += ["error:", fence(str(item["error"]))]
        elif kind == "reasoning":
            lines += ["### reasoning", fence(str(item.get("text")))]
        else:
            lines += [f"### {item.get('role')}", fence(str(item.get("content")))]
        lines.append("")
    lines += ["## Final answer", "", fence(str(rec.get("final_answer") or ""))]
    return "\n".join(lines) + "\n"


def _iter_export_records(
    store: Store, q: RolloutQuery, batch: int = 500
) -> Iterator[dict[str, Any]]:
    """Canonical records of the filtered list, in its order; three queries a batch."""
    offset = 0
    while True:
        page = list_rollouts(store, q, limit=batch, offset=offset)
        if page.empty:
            return
        keys = [list(k) for k in zip(page["run_id"], page["rollout_id"], strict=True)]
        wanted = "(run_id, rollout_id) IN (SELECT (k[1], k[2]) FROM unnest(?::VARCHAR[][]) t(k))"
        headers = {
            (h["run_id"], h["rollout_id"]): h
            for h in _records(
                _query(
                    store,
                    "SELECT r.*, u.name AS run_name, u.kind AS run_kind, u.model"
                    f" FROM rollouts r JOIN runs u USING (run_id) WHERE {wanted}",
                    [keys],
                )
            )
        }
        items: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for e in _records(
            _query(store, f"SELECT * FROM events WHERE {wanted} ORDER BY seq", [keys])
        ):
            items.setdefault((e["run_id"], e["rollout_id"]), []).append(e)
        grades: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for g in _records(
            _query(
                store,
                f"SELECT * FROM grades WHERE {wanted} ORDER BY coalesce(weight, 0) DESC, grader",
                [keys],
            )
        ):
            grades.setdefault((g["run_id"], g["rollout_id"]), []).append(g)
        for run_id, rollout_id in keys:
            key = (run_id, rollout_id)
            yield _record(headers[key], items.get(key, []), grades.get(key, []))
        offset += batch


def export_rollouts(store: Store, q: RolloutQuery, path: str | Path, fmt: str) -> Path:
    """Write the filtered list: ``jsonl`` = one canonical record a line (re-importable, with
    items and grades); ``parquet`` = the rollouts table's columns, one row a rollout."""
    path = Path(path)
    if fmt == "jsonl":
        with path.open("w", encoding="utf-8") as out:
            for record in _iter_export_records(store, q):
                out.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
        return path
    if fmt != "parquet":
        raise ValueError(f"format must be jsonl or parquet, got {fmt!r}")
    where, params = _where(q)
    search_sql, search_params = _search_filter(store, q.search)
    direction = "DESC" if q.descending else "ASC"
    cur = store.cursor()
    try:
        table = cur.execute(
            f"SELECT r.* EXCLUDE (import_id) FROM rollouts r WHERE {where} AND {search_sql}"
            f" ORDER BY {SORTS[q.sort]} {direction} NULLS LAST, r.run_id, r.rollout_id",
            [*params, *search_params],
        ).to_arrow_table()
    finally:
        cur.close()
    import pyarrow.parquet as pq

    pq.write_table(table, path)
    return path
