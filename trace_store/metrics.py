"""Per-step run metrics (a run's reward curve without rollouts): the `step_metrics` table.

Fine-tuning jobs publish per-step metrics events (train/valid reward means, per-grader scores, token
usage, timings) but no rollouts. Importers that read them set `Importer.writes_step_metrics`, and the
store hands their rows to `ingest_step_metrics` instead of the canonical rollout ingest.

A row: ``{run_id, step, split ('train'|'eval'|'all'), metric, value, source}``, optionally with
``run_name`` and ``model`` for the run. The key is (run_id, step, split, metric): importing a newer
export of the same job updates the values it repeats and adds the new steps.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pandas as pd

from .errors import IngestError
from .ingest.canonical import IngestResult

if TYPE_CHECKING:
    import duckdb

    from .store import Store

SPLITS = ("train", "eval", "all")

_Key = tuple[str, int, str, str]


@dataclass
class StepMetricsResult(IngestResult):
    """What one metrics file or pull added: values, not rollouts."""

    metrics_added: int = 0
    metrics_updated: int = 0
    steps: int = 0

    def summary(self) -> str:
        if self.already_imported:
            return f"{self.file}: already imported, nothing changed"
        parts = [f"{self.metrics_added} step metrics added for {self.steps} steps"]
        if self.metrics_updated:
            parts.append(f"{self.metrics_updated} updated")
        return f"{self.file} ({self.format}): " + ", ".join(parts)


def _check_row(row: Any, index: int, file: str) -> tuple[_Key, float | None, str | None]:
    if not isinstance(row, dict):
        raise IngestError(f"step metric row {index} is not an object", file=file)
    run_id, step, split, metric = (
        row.get("run_id"),
        row.get("step"),
        row.get("split"),
        row.get("metric"),
    )
    if not isinstance(run_id, str) or not run_id:
        raise IngestError(
            f"step metric row {index}: `run_id` must be text", file=file, field="run_id"
        )
    if not isinstance(step, int) or isinstance(step, bool) or step < 0:
        raise IngestError(
            f"step metric row {index}: `step` must be an integer >= 0, got {step!r}",
            file=file,
            field="step",
        )
    if split not in SPLITS:
        raise IngestError(
            f"step metric row {index}: `split` must be one of {', '.join(SPLITS)}, got {split!r}",
            file=file,
            field="split",
        )
    if not isinstance(metric, str) or not metric:
        raise IngestError(
            f"step metric row {index}: `metric` must be text", file=file, field="metric"
        )
    value = row.get("value")
    if value is not None:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise IngestError(
                f"step metric row {index}: `value` must be a number, got {value!r}",
                file=file,
                field="value",
            )
        value = float(value) if math.isfinite(value) else None
    source = row.get("source")
    return (run_id, step, str(split), metric), value, source if isinstance(source, str) else None


def ingest_step_metrics(
    store: Store,
    rows: Iterable[dict[str, Any]],
    display_name: str,
    content_hash: str,
    *,
    format: str = "openai_finetune",
) -> StepMetricsResult:
    """Write step-metric rows and the imports row in one transaction.

    Idempotent: content already imported (same hash) changes nothing. A bad row raises IngestError
    and leaves the store untouched (rows are checked before the transaction starts).
    """
    values: dict[_Key, tuple[float | None, str | None]] = {}
    runs: dict[str, tuple[str | None, str | None]] = {}
    for index, row in enumerate(rows):
        key, value, source = _check_row(row, index, display_name)
        values[key] = (value, source)
        name, model = runs.get(key[0], (None, None))
        runs[key[0]] = (
            name or (row.get("run_name") if isinstance(row.get("run_name"), str) else None),
            model or (row.get("model") if isinstance(row.get("model"), str) else None),
        )
    if not values:
        raise IngestError("no fine-tuning metrics events found", file=display_name)
    frame = pd.DataFrame(
        [(*key, value, source) for key, (value, source) in values.items()],
        columns=["run_id", "step", "split", "metric", "value", "source"],
    )
    frame["value"] = frame["value"].astype("float64")
    frame["step"] = frame["step"].astype("int64")
    run_ids = sorted(runs)

    def write(cur: duckdb.DuckDBPyConnection) -> StepMetricsResult:
        result = StepMetricsResult(file=display_name, format=format, run_ids=run_ids)
        previous = cur.execute(
            "SELECT 1 FROM imports WHERE content_hash = ? AND outcome = 'ok' LIMIT 1",
            [content_hash],
        ).fetchone()
        if previous is not None:
            result.already_imported = True
            result.run_ids = []
            return result
        import_id = store.next_import_id(cur)
        cur.register("new_step_metrics", frame)
        try:
            counted = cur.execute(
                "SELECT count(*) FROM step_metrics s"
                " JOIN new_step_metrics n USING (run_id, step, split, metric)"
            ).fetchone()
            result.metrics_updated = int(counted[0]) if counted else 0
            result.metrics_added = len(frame) - result.metrics_updated
            # Delete, then insert: DuckLake has no keys for INSERT OR REPLACE.
            cur.execute(
                "DELETE FROM step_metrics WHERE (run_id, step, split, metric) IN"
                " (SELECT run_id, step, split, metric FROM new_step_metrics)"
            )
            cur.execute(
                "INSERT INTO step_metrics (run_id, step, split, metric, value, source, import_id)"
                " SELECT run_id, step, split, metric, value, source, ? FROM new_step_metrics",
                [import_id],
            )
        finally:
            cur.unregister("new_step_metrics")
        for run_id, (name, model) in runs.items():
            cur.execute(
                "UPDATE runs SET model = coalesce(model, ?) WHERE run_id = ?", [model, run_id]
            )
            cur.execute(
                "INSERT INTO runs (run_id, name, kind, model, source)"
                " SELECT ?, ?, 'train', ?, ? WHERE NOT EXISTS (SELECT 1 FROM runs WHERE run_id = ?)",
                [run_id, name or run_id, model, display_name, run_id],
            )
        result.steps = int(frame[["run_id", "step"]].drop_duplicates().shape[0])
        message = f"{len(frame)} step metrics for {result.steps} steps"
        cur.execute(
            "INSERT INTO imports (import_id, file_name, content_hash, format, rollouts_added,"
            " events_added, duplicates_skipped, run_ids, outcome, message)"
            " VALUES (?, ?, ?, ?, 0, 0, 0, ?, 'ok', ?)",
            [import_id, display_name, content_hash, format, run_ids, message],
        )
        return result

    return store.write(write)


def step_metrics_by_step(
    store: Store,
    run_ids: Sequence[str],
    *,
    metrics: Sequence[str] | None = None,
    splits: Sequence[str] | None = None,
    steps: tuple[int, int] | None = None,
) -> pd.DataFrame:
    """Long table for the Rewards screen: run_id, step, split, metric, value, source, one row per
    value, ordered by run, metric, split and step. `metrics`/`splits`/`steps` (first, last)
    filter when given; the overall reward curve is ``metric = 'reward_mean'`` (per grader:
    ``'reward_mean/<grader>'``)."""
    cur = store.cursor()
    try:
        return cur.execute(
            """
            SELECT run_id, step, split, metric, value, source
            FROM step_metrics
            WHERE list_contains(?::VARCHAR[], run_id)
              AND (?::VARCHAR[] IS NULL OR list_contains(?::VARCHAR[], metric))
              AND (?::VARCHAR[] IS NULL OR list_contains(?::VARCHAR[], split))
              AND step BETWEEN coalesce(?::BIGINT, step) AND coalesce(?::BIGINT, step)
            ORDER BY run_id, metric, split, step
            """,
            [
                list(run_ids),
                list(metrics) if metrics is not None else None,
                list(metrics) if metrics is not None else None,
                list(splits) if splits is not None else None,
                list(splits) if splits is not None else None,
                steps[0] if steps is not None else None,
                steps[1] if steps is not None else None,
            ],
        ).df()
    finally:
        cur.close()


def step_metric_names(store: Store, run_ids: Sequence[str]) -> pd.DataFrame:
    """Which metrics the runs have: metric, split, steps (count), for a metric picker."""
    cur = store.cursor()
    try:
        return cur.execute(
            "SELECT metric, split, count(DISTINCT step) AS steps FROM step_metrics"
            " WHERE list_contains(?::VARCHAR[], run_id) GROUP BY metric, split ORDER BY metric, split",
            [list(run_ids)],
        ).df()
    finally:
        cur.close()
