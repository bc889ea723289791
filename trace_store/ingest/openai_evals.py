"""OpenAI Evals API run output items (`client.evals.runs.output_items.list(...)`) -> one rollout per item.

Accepted: one `eval.run.output_item` a line, a saved list page (`{"object": "list", "data": [...]}`) a
line or as one document, or a JSON array. The sample's input and output messages become items; each
grader result is a grade; the reward is the only grade, or the mean of several. The eval's `run_id`
is the run (kind `eval`), the item's id the rollout, `datasource_item_id` the prompt.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from ._convert import (
    JSONDict,
    as_number,
    as_str,
    describe,
    finish,
    iso,
    mapping,
    source_stem,
)
from ._openai import ItemBuilder, detect_api_objects, iter_api_objects
from .registry import Importer

_OBJECT = "eval.run.output_item"
_REFERENCE_KEYS = (
    "reference",
    "ground_truth",
    "expected",
    "answer",
    "target",
    "correct_label",
    "label",
)


def detect(name: str, head: bytes) -> bool:
    return detect_api_objects(name, head, _OBJECT)


def convert(path: Path) -> Iterator[JSONDict]:
    default_run = source_stem(path)
    for where, item in iter_api_objects(path):
        if not isinstance(item, dict) or item.get("object") != _OBJECT:
            raise where.error("object", f'must be "{_OBJECT}", got {describe(item)}')
        sample = mapping(item.get("sample"))
        builder = ItemBuilder(where)
        builder.add_all(sample.get("input") or [], "sample.input")
        builder.add_all(sample.get("output") or [], "sample.output")
        grades: list[JSONDict] = []
        results = item.get("results") or []
        if not isinstance(results, list):
            raise where.error("results", f"must be a list, got {describe(results)}")
        for index, result in enumerate(results):
            if not isinstance(result, dict):
                raise where.error(f"results[{index}]", f"must be an object, got {describe(result)}")
            score = as_number(result.get("score"), where, f"results[{index}].score")
            if score is None and isinstance(result.get("passed"), bool):
                score = 1.0 if result["passed"] else 0.0
            if score is not None:
                grades.append(
                    {"name": as_str(result.get("name")) or f"grader_{index}", "score": score}
                )
        reward = sum(g["score"] for g in grades) / len(grades) if grades else None
        source = mapping(item.get("datasource_item"))
        nested = mapping(source.get("item"))
        reference = next(
            (
                as_str(d[k])
                for d in (source, nested)
                for k in _REFERENCE_KEYS
                if d.get(k) is not None
            ),
            None,
        )
        error = sample.get("error")
        status = "error" if item.get("status") == "fail" and error else "ok"
        if isinstance(error, dict) and (error.get("code") or error.get("message")):
            status = "error"
        usage = mapping(sample.get("usage"))
        metadata: JSONDict = {
            "source_format": "openai_evals",
            "source_ids": {
                k: v
                for k, v in {
                    "output_item_id": item.get("id"),
                    "eval_id": item.get("eval_id"),
                    "run_id": item.get("run_id"),
                    "datasource_item_id": item.get("datasource_item_id"),
                }.items()
                if v is not None
            },
            "eval_status": item.get("status"),
            "finish_reason": sample.get("finish_reason"),
        }
        if status == "error":
            metadata["error"] = error
        yield finish(
            {
                "run_id": as_str(item.get("run_id")) or default_run,
                "run_kind": "eval",
                "rollout_id": as_str(item.get("id")) or f"{default_run}-{where.line or 0}",
                "prompt_id": as_str(item.get("datasource_item_id")),
                "split": "eval",
                "items": builder.items,
                "reward": reward,
                "grades": grades or None,
                "reference": reference,
                "status": status,
                "started_at": iso(item.get("created_at")),
                "model": as_str(sample.get("model")),
                "usage": {
                    "input_tokens": int(usage.get("prompt_tokens") or 0),
                    "output_tokens": int(usage.get("completion_tokens") or 0),
                    "reasoning_tokens": 0,
                }
                if usage
                else None,
                "metadata": {k: v for k, v in metadata.items() if v is not None},
            }
        )


IMPORTER = Importer(
    name="openai_evals",
    label="OpenAI Evals run output items",
    detect=detect,
    convert=convert,
    example="`for i in client.evals.runs.output_items.list(run_id, eval_id=...): f.write(i.to_json(indent=None) + '\\n')`",
)
