"""OpenAI fine-tuning job events of type `metrics` -> per-step run metrics (no rollouts).

Accepted: one `fine_tuning.job.event` a line, a saved list page (`{"object": "list", "data": [...]}`)
a line or as one document, or a JSON array. Only `metrics` events are read (`message` events are
skipped). The run is the file's stem (name the export after the job: `ftjob-abc.jsonl`) unless an
event carries `fine_tuning_job_id`/`job_id`.

RFT events (`data`: step, scores{train_reward_mean, valid_reward_mean, graders[]}, usage{samples,
graders[]}, errors{graders[]}, timing{step{...}, graders[]}, plus flat summary fields) become rows
named by split ('train', 'eval' for the validation set, 'all' for step-wide values):
  scores.train_reward_mean -> (train, reward_mean); scores.graders[g].valid_reward_mean ->
  (eval, reward_mean/<g>); usage.samples.train_reasoning_tokens_mean -> (train, reasoning_tokens_mean);
  usage/errors/timing.graders[g].train_<x> -> (train, grader_<x>/<g>); timing.step.<x> ->
  (all, step_seconds/<x>); a flat `train_<x>`/`valid_<x>`/`full_valid_<x>` -> (train, <x>) /
  (eval, <x>) / (eval, full_<x>); other flat numbers -> (all, <name>).
Supervised jobs' events (train_loss, valid_mean_token_accuracy, ...) follow the same flat rule.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ._convert import (
    JSONDict,
    Where,
    as_int,
    as_number,
    as_str,
    describe,
    is_number,
    source_stem,
)
from ._openai import detect_api_objects, iter_api_objects
from .registry import Importer

OBJECT = "fine_tuning.job.event"
_SPLIT_PREFIXES = (
    ("full_valid_", "eval", "full_"),
    ("train_", "train", ""),
    ("valid_", "eval", ""),
)
_SPLIT_PREFIXES_WITH_EVAL = (*_SPLIT_PREFIXES, ("eval_", "eval", ""))
# Flat summary fields that repeat `scores`: used only when `scores` is absent (older events).
_ALIASES = {
    "train_mean_reward": ("train", "reward_mean"),
    "full_valid_mean_reward": ("eval", "reward_mean"),
}
_SKIPPED_FLAT = {"step", "total_steps"}


def detect(name: str, head: bytes) -> bool:
    return detect_api_objects(name, head, OBJECT)


def _split_key(
    key: str, prefixes: tuple[tuple[str, str, str], ...] = _SPLIT_PREFIXES
) -> tuple[str, str] | None:
    for prefix, split, replacement in prefixes:
        if key.startswith(prefix) and len(key) > len(prefix):
            return split, replacement + key[len(prefix) :]
    return None


class _Rows:
    """The metric values of one event, keyed by (split, metric); explicit fields win over aliases."""

    def __init__(self, where: Where) -> None:
        self.where = where
        self.values: dict[tuple[str, str], float] = {}

    def put(self, split: str, metric: str, value: Any, field: str, *, weak: bool = False) -> None:
        number = as_number(value, self.where, field)
        if number is None:
            return
        if weak and (split, metric) in self.values:
            return
        self.values[(split, metric)] = number

    def graders(self, value: Any, field: str, prefix: str) -> None:
        """`[{name, type, train_<x>, valid_<x>, ...}]` -> (split, <prefix><x>/<name>)."""
        if value is None:
            return
        if not isinstance(value, list):
            raise self.where.error(field, f"must be a list of graders, got {describe(value)}")
        for index, grader in enumerate(value):
            if not isinstance(grader, dict):
                raise self.where.error(
                    f"{field}[{index}]", f"must be an object, got {describe(grader)}"
                )
            name = as_str(grader.get("name")) or f"grader_{index}"
            for key, number in grader.items():
                split_key = _split_key(key)
                if split_key is not None:
                    split, rest = split_key
                    self.put(split, f"{prefix}{rest}/{name}", number, f"{field}[{index}].{key}")


def _section(data: JSONDict, key: str, where: Where) -> JSONDict:
    value = data.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise where.error(f"data.{key}", f"must be an object, got {describe(value)}")
    return value


def is_metrics_event(event: Any) -> bool:
    if not isinstance(event, dict):
        return False
    kind = event.get("type")
    return kind == "metrics" or (
        kind is None and isinstance(event.get("data"), dict) and "step" in event["data"]
    )


def metric_rows(event: JSONDict, where: Where, run_id: str) -> list[JSONDict]:
    """The step-metric rows of one `metrics` event."""
    data = event.get("data")
    if not isinstance(data, dict):
        raise where.error(
            "data", f"must be an object with the step's metrics, got {describe(data)}"
        )
    step = as_int(data.get("step"), where, "data.step", minimum=0)
    if step is None:
        raise where.error("data.step", "is missing: a metrics event names its step")
    rows = _Rows(where)
    scores = _section(data, "scores", where)
    for key, value in scores.items():
        split_key = _split_key(key)
        if key != "graders" and split_key is not None:
            split, rest = split_key
            rows.put(split, rest, value, f"data.scores.{key}")
    rows.graders(scores.get("graders"), "data.scores.graders", "")
    usage = _section(data, "usage", where)
    samples = usage.get("samples")
    if isinstance(samples, dict):
        for key, value in samples.items():
            split_key = _split_key(key)
            if split_key is not None:
                rows.put(*split_key, value, f"data.usage.samples.{key}")
    rows.graders(usage.get("graders"), "data.usage.graders", "grader_")
    rows.graders(_section(data, "errors", where).get("graders"), "data.errors.graders", "grader_")
    timing = _section(data, "timing", where)
    step_timing = timing.get("step")
    if isinstance(step_timing, dict):
        for key, value in step_timing.items():
            rows.put("all", f"step_seconds/{key}", value, f"data.timing.step.{key}")
    rows.graders(timing.get("graders"), "data.timing.graders", "grader_")
    by_model = data.get("model_graders_token_usage")
    if isinstance(by_model, dict):
        for model, counts in by_model.items():
            if not isinstance(counts, dict):
                continue
            for key, value in counts.items():
                split_key = _split_key(key, _SPLIT_PREFIXES_WITH_EVAL)
                if split_key is not None and (is_number(value) or value is None):
                    split, rest = split_key
                    rows.put(
                        split,
                        f"grader_model_{rest}/{model}",
                        value,
                        f"data.model_graders_token_usage.{model}.{key}",
                    )
    for key, value in data.items():
        if key in _SKIPPED_FLAT or not (is_number(value) or isinstance(value, bool)):
            continue
        field = f"data.{key}"
        if key in _ALIASES:
            rows.put(*_ALIASES[key], value, field, weak=True)
            continue
        split_key = _split_key(key)
        split, metric = split_key if split_key is not None else ("all", key)
        rows.put(split, metric, value, field, weak=True)
    source = as_str(event.get("id"))
    return [
        {
            "run_id": run_id,
            "step": step,
            "split": split,
            "metric": metric,
            "value": value,
            "source": source,
        }
        for (split, metric), value in rows.values.items()
    ]


def convert_events(events: Iterator[tuple[Where, Any]], run_id: str) -> Iterator[JSONDict]:
    """Step-metric rows from (where, event) pairs; non-metrics events are skipped."""
    for where, event in events:
        if not isinstance(event, dict) or event.get("object") != OBJECT:
            got = event.get("object") if isinstance(event, dict) else event
            raise where.error("object", f'must be "{OBJECT}", got {describe(got)}')
        if not is_metrics_event(event):
            continue
        job = as_str(event.get("fine_tuning_job_id") or event.get("job_id"))
        yield from metric_rows(event, where, job or run_id)


def convert(path: Path) -> Iterator[JSONDict]:
    return convert_events(iter_api_objects(path), source_stem(path))


IMPORTER = Importer(
    name="openai_finetune",
    label="OpenAI fine-tuning job metrics events",
    detect=detect,
    convert=convert,
    example=(
        "`open(f'{job_id}.jsonl', 'w').writelines(e.to_json(indent=None) + '\\n' for e in "
        "client.fine_tuning.jobs.list_events(job_id))`, or `rollscope pull finetune JOB_ID`"
    ),
    writes_step_metrics=True,
)
