"""Numbered schema migrations. Append a new entry; never edit one that has shipped."""

from __future__ import annotations

from collections.abc import Callable

import duckdb

# Events keep the keys they were ordered by (src_seq, import_id, line_no, item_idx) so that items
# arriving in later uploads can be merged into one trajectory and renumbered.
MIGRATIONS: list[tuple[int, str, str]] = [
    (
        1,
        "core tables",
        """
        CREATE TABLE runs (
            run_id VARCHAR PRIMARY KEY,
            name VARCHAR,
            kind VARCHAR,
            model VARCHAR,
            source VARCHAR,
            created_at TIMESTAMP DEFAULT current_timestamp,
            metadata JSON
        );
        CREATE TABLE rollouts (
            run_id VARCHAR NOT NULL,
            rollout_id VARCHAR NOT NULL,
            step INTEGER NOT NULL DEFAULT 0,
            prompt_id VARCHAR,
            sample_index INTEGER,
            split VARCHAR NOT NULL DEFAULT 'train',
            reward DOUBLE,
            latency_ms DOUBLE,
            n_tool_calls INTEGER NOT NULL DEFAULT 0,
            n_turns INTEGER NOT NULL DEFAULT 0,
            max_parallel_calls INTEGER NOT NULL DEFAULT 0,
            n_events INTEGER NOT NULL DEFAULT 0,
            n_tool_errors INTEGER NOT NULL DEFAULT 0,
            status VARCHAR NOT NULL DEFAULT 'ok',
            final_answer VARCHAR,
            reference VARCHAR,
            prompt VARCHAR,
            started_at TIMESTAMP,
            ended_at TIMESTAMP,
            input_tokens BIGINT,
            output_tokens BIGINT,
            reasoning_tokens BIGINT,
            metadata JSON,
            import_id INTEGER
        );
        CREATE TABLE events (
            run_id VARCHAR NOT NULL,
            rollout_id VARCHAR NOT NULL,
            seq INTEGER NOT NULL,
            turn INTEGER NOT NULL,
            kind VARCHAR NOT NULL,
            role VARCHAR,
            text VARCHAR,
            tool_name VARCHAR,
            call_id VARCHAR,
            arguments VARCHAR,
            output VARCHAR,
            error VARCHAR,
            started_at TIMESTAMP,
            duration_ms DOUBLE,
            tokens INTEGER,
            item_type VARCHAR,
            src_seq BIGINT,
            import_id INTEGER,
            line_no BIGINT,
            item_idx INTEGER,
            fingerprint UBIGINT
        );
        CREATE TABLE grades (
            run_id VARCHAR NOT NULL,
            rollout_id VARCHAR NOT NULL,
            grader VARCHAR NOT NULL,
            score DOUBLE,
            weight DOUBLE,
            explanation VARCHAR
        );
        CREATE SEQUENCE import_ids START 1;
        CREATE TABLE imports (
            import_id INTEGER PRIMARY KEY,
            file_name VARCHAR NOT NULL,
            content_hash VARCHAR NOT NULL,
            format VARCHAR NOT NULL,
            rollouts_added INTEGER NOT NULL DEFAULT 0,
            events_added INTEGER NOT NULL DEFAULT 0,
            duplicates_skipped INTEGER NOT NULL DEFAULT 0,
            run_ids VARCHAR[],
            imported_at TIMESTAMP NOT NULL DEFAULT current_timestamp,
            outcome VARCHAR NOT NULL,
            message VARCHAR
        );
        CREATE TABLE flags (
            run_id VARCHAR NOT NULL,
            rollout_id VARCHAR NOT NULL,
            detector VARCHAR NOT NULL,
            severity VARCHAR NOT NULL,
            reason VARCHAR,
            evidence JSON,
            created_at TIMESTAMP NOT NULL DEFAULT current_timestamp
        );
        """,
    ),
    (
        2,
        "audit: user rules and judge verdicts",
        """
        CREATE TABLE user_rules (
            name VARCHAR PRIMARY KEY,
            kind VARCHAR NOT NULL,
            pattern VARCHAR NOT NULL,
            severity VARCHAR NOT NULL DEFAULT 'medium',
            reason VARCHAR,
            on_import BOOLEAN NOT NULL DEFAULT false,
            created_at TIMESTAMP NOT NULL DEFAULT current_timestamp
        );
        CREATE TABLE judge_templates (
            template_version VARCHAR PRIMARY KEY,
            template VARCHAR NOT NULL,
            created_at TIMESTAMP NOT NULL DEFAULT current_timestamp
        );
        CREATE TABLE judge_verdicts (
            run_id VARCHAR NOT NULL,
            rollout_id VARCHAR NOT NULL,
            model VARCHAR NOT NULL,
            template_version VARCHAR NOT NULL,
            verdict VARCHAR,
            confidence DOUBLE,
            rationale VARCHAR,
            cited_events INTEGER[],
            error VARCHAR,
            input_tokens BIGINT,
            output_tokens BIGINT,
            condensed BOOLEAN,
            judged_at TIMESTAMP NOT NULL DEFAULT current_timestamp
        );
        """,
    ),
    (
        3,
        "importers: per-step run metrics and saved field mappings",
        """
        CREATE TABLE step_metrics (
            run_id VARCHAR NOT NULL,
            step INTEGER NOT NULL,
            split VARCHAR NOT NULL,
            metric VARCHAR NOT NULL,
            value DOUBLE,
            source VARCHAR,
            import_id INTEGER,
            PRIMARY KEY (run_id, step, split, metric)
        );
        CREATE TABLE field_mappings (
            name VARCHAR PRIMARY KEY,
            spec JSON NOT NULL,
            created_at TIMESTAMP NOT NULL DEFAULT current_timestamp
        );
        """,
    ),
    (
        4,
        "replay: per-rollout search documents for the full-text index",
        """
        CREATE TABLE search_docs (
            doc_id BIGINT NOT NULL,
            run_id VARCHAR NOT NULL,
            rollout_id VARCHAR NOT NULL,
            doc VARCHAR
        );
        CREATE TABLE search_index_state (
            rollouts BIGINT NOT NULL,
            events BIGINT NOT NULL,
            last_import_id INTEGER,
            built_at TIMESTAMP NOT NULL DEFAULT current_timestamp
        );
        """,
    ),
    (
        5,
        "replay: an incremental inverted index (word -> document) for full-text search",
        """
        CREATE TABLE search_terms (
            term VARCHAR NOT NULL,
            doc_id BIGINT NOT NULL
        );
        ALTER TABLE search_docs ADD COLUMN doc_key UBIGINT;
        DELETE FROM search_docs;
        DELETE FROM search_index_state;
        """,
    ),
    (
        6,
        "summary_dirty",
        # The (run, step) pairs whose rows the dashboards' summaries must recompute: written in
        # the same transaction as the change (step NULL: the whole run).
        """
        CREATE TABLE summary_dirty (
            run_id VARCHAR NOT NULL,
            step INTEGER
        );
        """,
    ),
]


def current_version(
    con: duckdb.DuckDBPyConnection, translate: Callable[[str], str] | None = None
) -> int:
    sql = (
        "CREATE TABLE IF NOT EXISTS schema_migrations ("
        " version INTEGER PRIMARY KEY, name VARCHAR,"
        " applied_at TIMESTAMP DEFAULT current_timestamp)"
    )
    con.execute(translate(sql) if translate else sql)
    row = con.execute("SELECT coalesce(max(version), 0) FROM schema_migrations").fetchone()
    return int(row[0]) if row else 0


def migrate(con: duckdb.DuckDBPyConnection, translate: Callable[[str], str] | None = None) -> int:
    """Apply every migration newer than the store's version, each in its own transaction.

    `translate` rewrites each migration's SQL for another backend (DuckLake: `ducklake_ddl`).
    """
    version = current_version(con, translate)
    for number, name, sql in MIGRATIONS:
        if number <= version:
            continue
        con.execute("BEGIN TRANSACTION")
        try:
            con.execute(translate(sql) if translate else sql)
            con.execute(
                "INSERT INTO schema_migrations (version, name) VALUES (?, ?)", [number, name]
            )
            con.execute("COMMIT")
        except Exception:
            con.execute("ROLLBACK")
            raise
        version = number
    return version
