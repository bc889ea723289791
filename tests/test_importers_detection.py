"""Every importer test file is claimed by exactly one importer: detectors must not overlap."""

from __future__ import annotations

from pathlib import Path

import pytest

from trace_store.ingest.files import head_bytes
from trace_store.ingest.registry import importers

DATA = Path(__file__).parent / "data" / "importers"
SAMPLES = Path(__file__).parents[2] / "shared" / "samples"


def claims(path: Path) -> list[str]:
    head = head_bytes(path)
    return [i.name for i in importers() if i.detect(path.name, head)]


@pytest.mark.parametrize(
    "path",
    sorted(p for p in DATA.rglob("*") if p.is_file()),
    ids=lambda p: str(p.relative_to(DATA)),
)
def test_one_importer_claims_each_test_file(path: Path) -> None:
    folder = path.relative_to(DATA).parts[0]
    expected = {"otlp": "otlp_json"}.get(folder, folder)
    if folder == "openai":
        expected = "chat_completions" if path.name.startswith("chat") else "responses"
    assert claims(path) == [expected]


@pytest.mark.skipif(not SAMPLES.is_dir(), reason="../shared/samples is absent")
def test_one_importer_claims_each_real_sample() -> None:
    expected = {
        "inspect": "inspect",
        "mini_swe_agent": "mini_swe_agent",
        "otlp": "otlp_json",
        "swe_agent": "swe_agent",
    }
    for path in SAMPLES.rglob("*.*"):
        if path.name != "README.md":
            assert claims(path) == [expected[path.parent.name]], path.name
