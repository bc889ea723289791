"""Limits on what an import may ask of the machine, and turning low-level read failures into
IngestErrors a user can act on.

Each limit has a default sized for real trace files and an environment variable to change it
(read at each import):

- ``ROLLSCOPE_MAX_LINE_MB`` (default 128): the longest JSONL line (one rollout, one event) read.
- ``ROLLSCOPE_MAX_MEMBER_MB`` (default 512): the largest member of a zip log (an Inspect
  ``.eval`` sample) once decompressed.
- ``ROLLSCOPE_MAX_ZIP_RATIO`` (default 200): the largest decompressed/compressed ratio of a zip
  member bigger than 16 MB; real logs compress 5-30x, a zip bomb thousands of times.
"""

from __future__ import annotations

import errno
import gzip
import os
import zlib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TypeVar

import duckdb
import zstandard

from .errors import IngestError

T = TypeVar("T")

MB = 1 << 20
_SMALL_MEMBER = 16 * MB


def _env_mb(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default * MB
    try:
        value = float(raw)
    except ValueError:
        return default * MB
    return max(int(value * MB), 1)


def max_line_bytes() -> int:
    return _env_mb("ROLLSCOPE_MAX_LINE_MB", 128)


def max_member_bytes() -> int:
    return _env_mb("ROLLSCOPE_MAX_MEMBER_MB", 512)


def max_zip_ratio() -> float:
    try:
        return float(os.environ.get("ROLLSCOPE_MAX_ZIP_RATIO", "") or 200)
    except ValueError:
        return 200.0


def describe_bytes(n: int) -> str:
    if n >= MB:
        return f"{n / MB:,.0f} MB"
    return f"{n:,} bytes"


def line_too_long(file: str, line: int | None) -> IngestError:
    limit = max_line_bytes()
    return IngestError(
        f"a line is longer than the limit of {describe_bytes(limit)} "
        "(one rollout or event per line; raise ROLLSCOPE_MAX_LINE_MB to read it)",
        file=file,
        line=line,
    )


def check_zip_member(file: str, member: str, size: int, compressed: int) -> None:
    """Refuse a zip member that would decompress to more than the limits allow."""
    if size > max_member_bytes():
        raise IngestError(
            f"member {member} would decompress to {describe_bytes(size)}, over the limit of "
            f"{describe_bytes(max_member_bytes())} (raise ROLLSCOPE_MAX_MEMBER_MB to read it)",
            file=file,
        )
    if size > _SMALL_MEMBER and size > max_zip_ratio() * max(compressed, 1):
        raise IngestError(
            f"member {member} would decompress {size / max(compressed, 1):,.0f} times "
            f"({describe_bytes(compressed)} to {describe_bytes(size)}): refused as a likely zip "
            "bomb (raise ROLLSCOPE_MAX_ZIP_RATIO if the log is genuine)",
            file=file,
        )


def translate_read_error(exc: BaseException, file: str) -> BaseException:
    """What reading a hostile or damaged file raised, as an IngestError naming the file;
    anything else is returned unchanged (the caller re-raises it)."""
    if isinstance(exc, IngestError):
        return exc
    if isinstance(exc, UnicodeDecodeError):
        return IngestError(
            f"not valid UTF-8 ({exc.reason}); save the file as UTF-8",
            file=file,
        )
    if isinstance(exc, RecursionError):
        return IngestError(
            "JSON nested too deeply to read (thousands of levels of [ or {)", file=file
        )
    if isinstance(exc, ValueError) and "not JSON compliant" in str(exc):
        # A converter kept a NaN/Infinity (which Python's json reads) in a field it passes on.
        return IngestError(
            "holds NaN or Infinity, which JSON does not allow; write null or a finite number",
            file=file,
        )
    if isinstance(exc, EOFError | zlib.error | zstandard.ZstdError | gzip.BadGzipFile):
        return IngestError(f"the compressed data is truncated or damaged ({exc})", file=file)
    if isinstance(exc, OSError):
        if exc.errno in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT):
            return IngestError(
                f"the disk is full: cannot write while importing ({exc.strerror}); "
                "free space where the store and its temporary files live, then retry",
                file=file,
            )
        return IngestError(f"cannot read the file ({exc.strerror or exc})", file=file)
    if isinstance(exc, duckdb.ConversionException | duckdb.OutOfRangeException):
        # A value the checks before the write let through; DuckDB's message names it.
        text = str(exc).split("\n")[0].split(": ", 1)[-1]
        return IngestError(f"a value cannot be stored ({text})", file=file)
    if isinstance(exc, duckdb.IOException | duckdb.TransactionException):
        text = str(exc).split("\n")[0]
        if "space left" in text or "too large" in text.lower():
            return IngestError(
                f"the disk is full: the store cannot grow ({text}); free space, then retry",
                file=file,
            )
        return IngestError(f"DuckDB could not read or write ({text})", file=file)
    return exc


@contextmanager
def read_errors(file: str) -> Iterator[None]:
    """Raise what `translate_read_error` makes of any exception of the block."""
    try:
        yield
    except Exception as exc:
        error = translate_read_error(exc, file)
        if error is exc:
            raise
        raise error from exc


UNEXPECTED = "the importer failed unexpectedly"


def guard_converter(records: Iterable[T], label: str, file: str) -> Iterator[T]:
    """A converter's records; anything it raises that is not a read error becomes an IngestError
    (a message for the user, not a traceback), still naming the exception for a bug report."""
    try:
        yield from records
    except IngestError:
        raise
    except Exception as exc:
        error = translate_read_error(exc, file)
        if error is not exc:
            raise error from exc
        raise IngestError(
            f"{UNEXPECTED} on this {label} file ({type(exc).__name__}: {exc}); "
            "please report it with the file",
            file=file,
        ) from exc
