"""Hostile input to every importer: a clear IngestError, the store untouched, nothing else raised.

Each case goes through `Store.ingest_file` with every importer forced (``format=name``) and with
detection (``format=None``). An import may fail only with an IngestError (UnknownFormatError is
one), and a failed import leaves every table exactly as it was.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trace_store import IngestError, Store, open_store
from trace_store.ingest import importers
from trace_store.limits import UNEXPECTED

DATA = Path(__file__).resolve().parent / "data"
FORMATS: list[str | None] = [None, *(i.name for i in importers())]
CANONICAL_LINE = {"run_id": "r", "rollout_id": "a", "step": 1, "reward": 1.0}


def table_counts(store: Store) -> dict[str, int]:
    cur = store.cursor()
    try:
        tables = [
            r[0]
            for r in cur.execute(
                "SELECT table_name FROM information_schema.tables"
                " WHERE table_schema = 'main' AND table_type = 'BASE TABLE' ORDER BY 1"
            ).fetchall()
        ]
        counts = {}
        for table in tables:
            row = cur.execute(f'SELECT count(*) FROM "{table}"').fetchone()
            counts[table] = int(row[0]) if row else 0
        return counts
    finally:
        cur.close()


def assert_refused(store: Store, path: Path, fmt: str | None, *match: str) -> IngestError:
    """Importing `path` as `fmt` raises an IngestError naming the file; the store is unchanged."""
    before = table_counts(store)
    with pytest.raises(IngestError) as caught:
        store.ingest_file(path, format=fmt)
    message = str(caught.value)
    assert path.name in message, message
    assert "Traceback" not in message
    assert UNEXPECTED not in message, message  # an importer bug, turned into a message
    for text in match:
        assert text in message, (fmt, message)
    assert table_counts(store) == before, f"{fmt}: the store changed after: {message}"
    return caught.value


def import_or_refuse(store: Store, path: Path, fmt: str | None) -> None:
    """For generated input: an import works, or fails with an IngestError leaving the store as
    it was. Any other exception fails the test."""
    before = table_counts(store)
    try:
        store.ingest_file(path, format=fmt)
    except IngestError as exc:
        assert str(exc).strip(), "an empty error message"
        assert UNEXPECTED not in str(exc), str(exc)  # an importer bug, turned into a message
        assert table_counts(store) == before, f"{fmt}: the store changed after: {exc}"


@pytest.fixture
def store(store_path: Path) -> Iterator[Store]:
    with open_store(store_path) as s:
        yield s


@pytest.fixture(scope="module")
def shared_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    with open_store(tmp_path_factory.mktemp("fuzz") / "fuzz.duckdb") as s:
        yield s


def _line(**extra: object) -> str:
    return json.dumps({**CANONICAL_LINE, **extra}, ensure_ascii=False)


# ---- explicit hostile files: refused by every importer and by detection -------------------------
HOSTILE: dict[str, tuple[bytes, tuple[str, ...]]] = {
    "empty.jsonl": (b"", ()),
    "blank.jsonl": (b"\n \n\t\n", ()),
    "deep-array.jsonl": (b"[" * 100_000 + b"]" * 100_000 + b"\n", ()),
    "deep-object.jsonl": (
        (b'{"run_id": "r", "rollout_id": "a", "metadata": ' + b'{"a": ' * 100_000)
        + (b"1" + b"}" * 100_001 + b"\n"),
        (),
    ),
    "latin1.jsonl": ((_line(final_answer="café") + "\n").encode("latin-1"), ()),
    "utf16.jsonl": ((_line() + "\n").encode("utf-16"), ()),
    "invalid-utf8.jsonl": (_line().encode()[:20] + b"\xff\xfe\xc3" + b'"}\n', ()),
    "nan-reward.jsonl": (_line().replace("1.0", "NaN").encode() + b"\n", ()),
    "infinite-latency.jsonl": (_line(latency_ms=1).replace(": 1}", ": Infinity}").encode(), ()),
    "garbage.jsonl": (random.Random(8).randbytes(20_000), ()),
    "truncated.jsonl": (_line(items=[{"type": "message", "content": "hello"}]).encode()[:-12], ()),
    "truncated.jsonl.gz": (gzip.compress((_line() + "\n").encode() * 200)[:80], ()),
    "nul-bytes.jsonl": (b"\x00" * 4096, ()),
}


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f or "detect")
@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_file_is_refused_by_every_importer(
    store: Store, tmp_path: Path, name: str, fmt: str | None
) -> None:
    data, match = HOSTILE[name]
    path = tmp_path / name
    path.write_bytes(data)
    if name == "deep-object.jsonl" and fmt == "canonical":
        # DuckDB's JSON reader is not recursive: deep metadata is valid JSON it stores as text.
        store.ingest_file(path, format=fmt)
        return
    assert_refused(store, path, fmt, *match)


def test_the_messages_say_what_is_wrong(store: Store, tmp_path: Path) -> None:
    expected = {
        "deep-array.jsonl": "nested too deeply",
        "latin1.jsonl": "line 1: not valid UTF-8",
        "utf16.jsonl": "looks like UTF-16",
        "invalid-utf8.jsonl": "not valid UTF-8",
        "nan-reward.jsonl": "line 1: `reward` must be a number, got NaN",
        "infinite-latency.jsonl": "`latency_ms` must be a number, got Infinity",
        "truncated.jsonl": "line 1: not valid JSON",
        "truncated.jsonl.gz": "compressed data is truncated or damaged",
        "empty.jsonl": "cannot tell which format",
    }
    for name, text in expected.items():
        path = tmp_path / name
        path.write_bytes(HOSTILE[name][0])
        fmt = None if name == "empty.jsonl" else "canonical"
        assert_refused(store, path, fmt, text)


@pytest.mark.parametrize(
    ("field", "text"),
    [
        ("items[0].duration_ms", '"items": [{"type": "message", "duration_ms": NaN}]'),
        ("item.duration_ms", '"item": {"type": "message", "duration_ms": -Infinity}'),
        ("grades.g", '"grades": {"g": NaN}'),
        ("grades[0].score", '"grades": [{"name": "g", "score": Infinity}]'),
        ("grades[0].weight", '"grades": [{"name": "g", "score": 1, "weight": NaN}]'),
        ("usage.input_tokens", '"usage": {"input_tokens": NaN}'),
    ],
)
def test_nan_and_infinity_anywhere_in_a_canonical_line(
    store: Store, tmp_path: Path, field: str, text: str
) -> None:
    path = tmp_path / "nan.jsonl"
    path.write_text('{"run_id": "r", "rollout_id": "a", "step": 1, ' + text + "}\n")
    assert_refused(store, path, "canonical", f"line 1: `{field}` must be")


@pytest.mark.parametrize(
    ("fmt", "text"),
    [
        # found by hypothesis: a list where a type name was expected raised TypeError (unhashable)
        ("chat_completions", '[{"type": []}]'),
        ("atif", '{"schema_version": "ATIF-v1.6", "steps": [{"step_id": 1, "source": ["x"]}]}'),
        (
            "otlp_json",
            '{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "a", '
            '"spanId": "b", "name": "n", "status": {"code": [2]}}]}]}]}',
        ),
    ],
)
def test_unhashable_values_where_names_are_expected(
    store: Store, tmp_path: Path, fmt: str, text: str
) -> None:
    path = tmp_path / "odd.json"
    path.write_text(text + "\n")
    import_or_refuse(store, path, fmt)


def test_nan_kept_by_a_converter_is_refused(store: Store, tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    chat = '{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "x"}]'
    path.write_text(chat + ', "reward": 1, "metadata": {"x": NaN}}\n')
    assert_refused(store, path, None, "NaN or Infinity")


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f or "detect")
def test_a_line_over_the_limit_is_refused(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fmt: str | None
) -> None:
    monkeypatch.setenv("ROLLSCOPE_MAX_LINE_MB", "1")
    path = tmp_path / "huge-line.jsonl"
    # DuckDB's reader enforces its object limit to the nearest 16 MB: go well past it.
    path.write_text(_line() + "\n" + _line(rollout_id="b", final_answer="x" * (40 << 20)) + "\n")
    if fmt in (None, "canonical"):
        assert_refused(store, path, fmt, "line 2: a line is longer than the limit of 1 MB")
    else:
        assert_refused(store, path, fmt)


def test_a_line_over_the_limit_in_a_converted_format_names_the_line(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ROLLSCOPE_MAX_LINE_MB", "1")
    chat = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "x"}]}
    big = {**chat, "messages": [*chat["messages"], {"role": "user", "content": "y" * (2 << 20)}]}
    path = tmp_path / "chat.jsonl"
    path.write_text(json.dumps(chat) + "\n" + json.dumps(big) + "\n")
    assert_refused(store, path, "chat_completions", "line 2: a line is longer than the limit")


# ---- file-system trouble -----------------------------------------------------------------------
@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f or "detect")
def test_fifo_directory_and_dangling_link(store: Store, tmp_path: Path, fmt: str | None) -> None:
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)  # reading it would block forever
    assert_refused(store, fifo, fmt, "not a regular file")
    link = tmp_path / "gone.jsonl"
    link.symlink_to(tmp_path / "deleted.jsonl")
    assert_refused(store, link, fmt, "no such file")
    folder = tmp_path / "folder.jsonl"
    folder.mkdir()
    (folder / "notes.txt").write_text("not a trace\n")
    assert_refused(store, folder, fmt)


# ---- truncated real files of each format ---------------------------------------------------------
GOOD_FILES = [
    ("canonical", DATA / "canonical" / "rollouts_small.jsonl"),
    ("chat_completions", DATA / "importers" / "openai" / "chat_typical.jsonl"),
    ("responses", DATA / "importers" / "openai" / "responses_typical.jsonl"),
    ("inspect", DATA / "importers" / "inspect" / "handmade.json"),
    ("mini_swe_agent", DATA / "importers" / "mini_swe_agent" / "toolcalling.traj.json"),
    ("openai_agents", DATA / "importers" / "openai_agents" / "agents_traces.jsonl"),
    ("openai_evals", DATA / "importers" / "openai_evals" / "output_items.jsonl"),
    ("otlp_json", DATA / "importers" / "otlp" / "otlp_genai.jsonl"),
    ("otlp_json", DATA / "importers" / "otlp" / "otlp_openinference.json"),
    ("swe_agent", DATA / "importers" / "swe_agent" / "legacy_case.traj"),
]


def _cut_inside_a_line(data: bytes, at: int) -> bytes:
    while at > 1 and data[at - 1 : at] in (b"\n", b"}", b"]", b" "):
        at -= 1
    return data[:at]


@pytest.mark.parametrize(("fmt", "source"), GOOD_FILES, ids=lambda v: getattr(v, "name", v))
def test_truncated_real_files(store: Store, tmp_path: Path, fmt: str, source: Path) -> None:
    data = source.read_bytes()
    for fraction in (0.1, 0.5, 0.97):
        path = tmp_path / f"cut{int(fraction * 100)}-{source.name}"
        path.write_bytes(_cut_inside_a_line(data, int(len(data) * fraction)))
        for candidate in (fmt, None):
            assert_refused(store, path, candidate)


# ---- zip logs (Inspect .eval) -------------------------------------------------------------------
@pytest.fixture(scope="module")
def eval_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    inspect_log = pytest.importorskip("inspect_ai.log")
    path = tmp_path_factory.mktemp("eval") / "handmade.eval"
    log = inspect_log.read_eval_log(str(DATA / "importers" / "inspect" / "handmade.json"))
    inspect_log.write_eval_log(log, str(path))
    return path


def _members(path: Path) -> dict[str, bytes]:
    from trace_store.ingest.inspect_log import _read_member

    with zipfile.ZipFile(path) as archive, path.open("rb") as handle:
        return {i.filename: _read_member(archive, handle, i) for i in archive.infolist()}


def _rezip(members: dict[str, bytes], target: Path, big: tuple[str, int] | None = None) -> Path:
    """The log again with deflate members; `big` = (member, n MB) pads that sample's input."""
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            if big is None or name != big[0]:
                archive.writestr(name, data)
                continue
            sample = json.loads(data)
            sample["input"] = "@@"
            head, tail = json.dumps(sample).encode().split(b"@@")
            with archive.open(name, "w", force_zip64=True) as out:
                out.write(head)
                chunk = b"a" * (1 << 20)
                for _ in range(big[1]):
                    out.write(chunk)
                out.write(tail)
    return target


def test_a_real_eval_log_still_imports(store: Store, eval_log: Path, tmp_path: Path) -> None:
    assert store.ingest_file(eval_log).rollouts_added == 3
    rezipped = _rezip(_members(eval_log), tmp_path / "deflate.eval")
    with open_store(tmp_path / "other.duckdb") as other:
        assert other.ingest_file(rezipped).rollouts_added == 3


def test_zip_bomb_is_refused_before_decompressing(
    store: Store, eval_log: Path, tmp_path: Path
) -> None:
    # 300 MB of one byte, compressed about 1000 times: the member is refused by its declared
    # sizes before a byte of it is inflated.
    bomb = _rezip(_members(eval_log), tmp_path / "bomb.eval", ("samples/1_epoch_1.json", 300))
    assert bomb.stat().st_size < 2 << 20
    for fmt in ("inspect", None):
        assert_refused(store, bomb, fmt, "likely zip bomb", "samples/1_epoch_1.json")


def test_zip_member_over_the_size_limit(
    store: Store, eval_log: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    big = _rezip(_members(eval_log), tmp_path / "big.eval", ("samples/1_epoch_1.json", 3))
    monkeypatch.setenv("ROLLSCOPE_MAX_MEMBER_MB", "1")
    assert_refused(store, big, "inspect", "over the limit of 1 MB", "ROLLSCOPE_MAX_MEMBER_MB")


def test_damaged_eval_logs(store: Store, eval_log: Path, tmp_path: Path) -> None:
    data = eval_log.read_bytes()
    cut = tmp_path / "cut.eval"
    cut.write_bytes(data[: len(data) // 2])
    assert_refused(store, cut, "inspect")
    flipped = bytearray(data)
    for offset in range(200, min(len(flipped), 1200), 7):
        flipped[offset] ^= 0x5A
    damaged = tmp_path / "damaged.eval"
    damaged.write_bytes(bytes(flipped))
    for fmt in ("inspect", None):
        assert_refused(store, damaged, fmt)
    not_a_zip = tmp_path / "fake.eval"
    not_a_zip.write_bytes(b"PK\x03\x04" + b"\x00" * 100)
    assert_refused(store, not_a_zip, "inspect")


# ---- generated input ----------------------------------------------------------------------------
FUZZ = settings(
    max_examples=int(os.environ.get("ROLLSCOPE_FUZZ_EXAMPLES", "40")),  # more for a long hunt
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=30),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "run_id",
                    "rollout_id",
                    "step",
                    "items",
                    "item",
                    "reward",
                    "grades",
                    "type",
                    "role",
                    "content",
                    "messages",
                    "input",
                    "output",
                    "score",
                    "metadata",
                    "resourceSpans",
                    "object",
                    "trajectory",
                    "eval",
                    "usage",
                    "seq",
                    "call_id",
                    "name",
                    "arguments",
                    "latency_ms",
                    "started_at",
                    "duration_ms",
                    "text",
                ]
            )
            | st.text(max_size=8),
            children,
            max_size=6,
        )
    ),
    max_leaves=25,
)


def _dump(value: object) -> str:
    return json.dumps(value, allow_nan=True)


@FUZZ
@given(data=st.binary(max_size=3000), fmt=st.sampled_from(FORMATS))
def test_random_bytes(shared_store: Store, tmp_path_factory, data: bytes, fmt: str | None) -> None:
    path = tmp_path_factory.mktemp("bytes") / "random.jsonl"
    path.write_bytes(data)
    import_or_refuse(shared_store, path, fmt)


@FUZZ
@given(lines=st.lists(json_values, min_size=1, max_size=5), fmt=st.sampled_from(FORMATS))
def test_random_json_lines(
    shared_store: Store, tmp_path_factory, lines: list[object], fmt: str | None
) -> None:
    path = tmp_path_factory.mktemp("lines") / "random.jsonl"
    path.write_text("\n".join(_dump(v) for v in lines) + "\n")
    import_or_refuse(shared_store, path, fmt)


@FUZZ
@given(
    fields=st.dictionaries(
        st.sampled_from(
            [
                "step",
                "items",
                "item",
                "reward",
                "grades",
                "split",
                "status",
                "usage",
                "seq",
                "metadata",
                "latency_ms",
                "started_at",
                "ended_at",
                "final_answer",
                "run_kind",
            ]
        ),
        json_values,
        max_size=4,
    )
)
def test_canonical_lines_with_random_fields(
    shared_store: Store, tmp_path_factory, fields: dict[str, object]
) -> None:
    path = tmp_path_factory.mktemp("canon") / "fields.jsonl"
    path.write_text(_dump({"run_id": "fz", "rollout_id": "x", **fields}) + "\n")
    import_or_refuse(shared_store, path, "canonical")
    import_or_refuse(shared_store, path, None)


@FUZZ
@given(
    source=st.sampled_from(GOOD_FILES),
    cut=st.floats(min_value=0.0, max_value=1.0),
    flips=st.lists(st.tuples(st.floats(0.0, 1.0), st.integers(0, 255)), max_size=6),
)
def test_mutated_real_files(
    shared_store: Store,
    tmp_path_factory,
    source: tuple[str, Path],
    cut: float,
    flips: list[tuple[float, int]],
) -> None:
    fmt, original = source
    data = bytearray(original.read_bytes())
    for where, value in flips:
        data[min(int(where * len(data)), len(data) - 1)] = value
    path = tmp_path_factory.mktemp("mut") / original.name
    path.write_bytes(bytes(data[: max(1, int(cut * len(data)))]))
    import_or_refuse(shared_store, path, fmt)
    import_or_refuse(shared_store, path, None)


def test_an_importer_bug_is_a_message_not_a_traceback() -> None:
    from trace_store.limits import guard_converter

    def broken() -> Iterator[dict[str, object]]:
        yield {"run_id": "r"}
        raise KeyError("steps")

    with pytest.raises(IngestError, match=r"x\.jsonl: the importer failed unexpectedly") as caught:
        list(guard_converter(broken(), "Some format", "x.jsonl"))
    assert "KeyError" in str(caught.value)

    def truncated() -> Iterator[dict[str, object]]:
        raise EOFError("Compressed file ended before the end-of-stream marker was reached")
        yield {}

    with pytest.raises(IngestError, match="compressed data is truncated"):
        list(guard_converter(truncated(), "Some format", "x.jsonl.gz"))
