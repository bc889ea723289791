"""The published JSON Schema agrees with what the store accepts."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from trace_store.demo import iter_demo_records
from trace_store.ingest.validate import check_record

SCHEMA_PATH = (
    Path(__file__).resolve().parent.parent / "trace_store" / "schemas" / "canonical.schema.json"
)
DATA = Path(__file__).parent / "data" / "canonical"


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    schema = json.loads(SCHEMA_PATH.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


@pytest.mark.parametrize(
    "name",
    ["rollouts_small.jsonl", "events_policy.jsonl", "events_tools.jsonl", "events_grader.jsonl"],
)
def test_shipped_examples_follow_the_schema(validator, name):
    for line in (DATA / name).read_text().splitlines():
        validator.validate(json.loads(line))


def test_demo_records_follow_the_schema_and_the_store_checks(validator):
    for record in iter_demo_records(steps=2, prompts=4, samples=2):
        validator.validate(record)
        assert list(check_record(record)) == []


@pytest.mark.parametrize(
    "record",
    [
        {"rollout_id": "a"},
        {"run_id": "r", "rollout_id": "a", "reward": "high"},
        {"run_id": "r", "rollout_id": "a", "split": "test"},
        {"run_id": "r", "rollout_id": "a", "items": [], "item": {"type": "message"}},
        {"run_id": "r", "rollout_id": "a", "items": [{"type": "function_call", "name": "x"}]},
    ],
)
def test_the_schema_rejects_what_the_store_rejects(validator, record):
    with pytest.raises(jsonschema.ValidationError):
        validator.validate(record)
