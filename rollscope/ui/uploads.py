"""Importing files uploaded in the browser: detect the format, spool to disk, ingest.

Streamlit hands an upload over as an in-memory file object; the store imports from a path.
The upload is copied to a temporary file in chunks (beside the store, where there is room for
its data anyway), imported under its original name, and the temporary file removed.
"""

from __future__ import annotations

import gzip
import re
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import zstandard

from trace_store import IngestResult, Store, detect_format
from trace_store.ingest import importers
from trace_store.ingest.files import GZIP_MAGIC, ZSTD_MAGIC

#: What the uploader accepts (by the name's last suffix; ``.jsonl.gz`` ends in ``gz``).
UPLOAD_TYPES = ["jsonl", "json", "gz", "zst", "eval", "traj", "parquet", "yaml", "yml"]

CHUNK = 8 * 1024 * 1024
HEAD = 65536

Progress = Callable[[float], None]
"""Called with the fraction done, 0.0 to 1.0."""


def format_labels() -> dict[str, str]:
    """Importer name -> human label, in the registry's order (canonical first)."""
    return {i.name: i.label for i in importers()}


def head_of(fileobj: IO[bytes], size: int = HEAD) -> bytes:
    """The first `size` bytes of an upload's content, decompressed; the file is rewound."""
    fileobj.seek(0)
    magic = fileobj.read(4)
    fileobj.seek(0)
    try:
        if magic.startswith(GZIP_MAGIC):
            with gzip.GzipFile(fileobj=fileobj, mode="rb") as stream:
                return stream.read(size)
        if magic == ZSTD_MAGIC:
            reader = zstandard.ZstdDecompressor().stream_reader(fileobj, closefd=False)
            return reader.read(size)
        return fileobj.read(size)
    except (OSError, EOFError, zstandard.ZstdError):
        return b""
    finally:
        fileobj.seek(0)


def detect_upload_format(name: str, fileobj: IO[bytes]) -> str | None:
    """The importer that claims this upload (by its name and first bytes), or None."""
    importer = detect_format(name, head_of(fileobj))
    return importer.name if importer else None


def safe_file_name(name: str) -> str:
    """A name for the temporary copy: the upload's base name, suffixes kept, nothing odd."""
    base = re.split(r"[\\/]", name)[-1]
    base = re.sub(r"[^A-Za-z0-9._-]+", "_", base).lstrip(".")
    return base[:200] or "upload"


@dataclass(frozen=True)
class UploadOutcome:
    """The result of importing one upload: `result` when it worked, else `error`."""

    file: str
    result: IngestResult | None = None
    error: BaseException | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    def summary(self) -> str:
        """One sentence for the page (plain text: it contains the user's file name)."""
        if self.result is None:
            return f"{self.file}: {self.error}"
        r = self.result
        if r.already_imported:
            return f"{self.file}: already imported; nothing changed."
        parts = [f"{r.rollouts_added:,} rollouts and {r.events_added:,} events added"]
        if r.rollouts_updated:
            parts.append(f"{r.rollouts_updated:,} rollouts updated")
        if r.duplicates_skipped:
            parts.append(f"{r.duplicates_skipped:,} duplicates skipped")
        runs = ", ".join(r.run_ids)
        text = f"{self.file} (as {r.format}): " + "; ".join(parts)
        return text + (f" (runs: {runs})." if runs else ".")


def _spool_dir(store: Store) -> Path:
    try:
        return Path(tempfile.mkdtemp(prefix="rollscope-upload-", dir=store.path.parent))
    except OSError:
        return Path(tempfile.mkdtemp(prefix="rollscope-upload-"))


def import_upload(
    store: Store,
    name: str,
    fileobj: IO[bytes],
    *,
    format: str | None = None,
    progress: Progress | None = None,
) -> UploadOutcome:
    """Import one uploaded file under its original `name`; never raises for a bad file.

    `format` is an importer name (None: detect). Copying to disk counts for the first 10% of
    `progress`, the store's ingest for the rest.
    """

    def report(fraction: float) -> None:
        if progress:
            progress(min(max(fraction, 0.0), 1.0))

    workdir = _spool_dir(store)
    try:
        target = workdir / safe_file_name(name)
        fileobj.seek(0, 2)
        total = max(fileobj.tell(), 1)
        fileobj.seek(0)
        copied = 0
        with target.open("wb") as out:
            while chunk := fileobj.read(CHUNK):
                out.write(chunk)
                copied += len(chunk)
                report(0.1 * copied / total)
        fileobj.seek(0)
        result = store.ingest_file(
            target,
            display_name=name,
            format=format,
            progress=lambda done, size: report(0.1 + 0.9 * done / max(size, 1)),
        )
    except Exception as exc:  # rendered by render.show_error: typed message, never a traceback
        return UploadOutcome(file=name, error=exc)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    report(1.0)
    return UploadOutcome(file=name, result=result)


def throttled(
    update: Callable[[float], object], *, min_step: float = 0.01, min_interval: float = 0.1
) -> Progress:
    """`update`, called only when the fraction moved by `min_step` or `min_interval` passed.

    Each progress-bar update is a message to the browser; ingest may report thousands of times.
    """
    last = [-1.0, 0.0]

    def call(fraction: float) -> None:
        now = time.monotonic()
        if fraction >= 1.0 or fraction - last[0] >= min_step or now - last[1] >= min_interval:
            last[0], last[1] = fraction, now
            update(fraction)

    return call


def bytes_progress(update: Progress) -> Callable[[int, int], None]:
    """Adapt a fraction callback to the store's ``progress(bytes_done, bytes_total)``."""
    return lambda done, total: update(done / total if total else 1.0)
