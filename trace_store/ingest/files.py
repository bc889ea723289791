"""Opening possibly compressed trace files as streams."""

from __future__ import annotations

import gzip
import io
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, cast

import zstandard

GZIP_MAGIC = b"\x1f\x8b"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def compression_of(path: Path) -> str | None:
    """'gzip', 'zstd' or None, by the file's first bytes (its name can lie)."""
    if path.is_dir():
        return None
    with path.open("rb") as handle:
        magic = handle.read(4)
    if magic.startswith(GZIP_MAGIC):
        return "gzip"
    if magic == ZSTD_MAGIC:
        return "zstd"
    return None


@contextmanager
def open_binary(path: Path) -> Iterator[IO[bytes]]:
    compression = compression_of(path)
    raw = path.open("rb")
    try:
        if compression == "gzip":
            with gzip.GzipFile(fileobj=raw, mode="rb") as stream:
                yield cast(IO[bytes], stream)
        elif compression == "zstd":
            with zstandard.ZstdDecompressor().stream_reader(raw) as stream:
                yield stream
        else:
            yield raw
    finally:
        raw.close()


@contextmanager
def open_text(path: Path) -> Iterator[IO[str]]:
    with open_binary(path) as stream:
        yield io.TextIOWrapper(stream, encoding="utf-8", errors="strict", newline="\n")


def head_bytes(path: Path, size: int = 65536) -> bytes:
    """The first `size` bytes of the file's content, decompressed; b"" for a directory."""
    if path.is_dir():
        return b""
    with open_binary(path) as stream:
        try:
            return stream.read(size)
        except (OSError, EOFError, zstandard.ZstdError):
            return b""


def strip_compression_suffix(name: str) -> str:
    for suffix in (".gz", ".zst", ".zstd"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name
