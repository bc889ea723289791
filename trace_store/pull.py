"""Pull runs straight from the OpenAI API with the `openai` client, into the same rows as the file
importers: a fine-tuning job's `metrics` events (-> step_metrics) and an eval run's output items
(-> rollouts, through the `openai_evals` importer).

The API key and base URL come from the arguments, else from $OPENAI_API_KEY and $OPENAI_BASE_URL.
Pagination is followed to the end; `progress(n)` is called after each page with the number of
objects fetched so far. Every API failure becomes a `PullError` whose message says what to do.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import openai

from .errors import IngestError, TraceStoreError
from .ingest._convert import Where
from .ingest.canonical import IngestResult
from .ingest.openai_finetune import convert_events
from .metrics import StepMetricsResult, ingest_step_metrics

if TYPE_CHECKING:
    from .store import Store

PullProgress = Callable[[int], None]

PAGE_SIZE = 100
DEFAULT_BASE_URL = "https://api.openai.com/v1"


class PullError(TraceStoreError):
    """The API could not be read (no key, refused key, unknown id, unreachable server...)."""

    title = "Pull from the OpenAI API failed"


def make_client(
    api_key: str | None = None, base_url: str | None = None, *, max_retries: int = 2
) -> openai.OpenAI:
    key = api_key or os.environ.get("OPENAI_API_KEY")
    if not key:
        raise PullError(
            "no OpenAI API key: set the OPENAI_API_KEY environment variable or enter a key"
        )
    url = base_url or os.environ.get("OPENAI_BASE_URL") or None
    return openai.OpenAI(api_key=key, base_url=url, max_retries=max_retries, timeout=60.0)


def _api_message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return str(error["message"])
    return exc.message


@contextmanager
def _api_errors(client: openai.OpenAI, what: str) -> Iterator[None]:
    """Turn the client's exceptions into PullErrors naming the server and the object asked for."""
    server = str(client.base_url).rstrip("/")
    try:
        yield
    except openai.AuthenticationError as exc:
        raise PullError(
            f"{server} refused the API key (HTTP 401: {_api_message(exc)}). Check OPENAI_API_KEY "
            "or the key entered, and that it belongs to the organization that owns " + what + "."
        ) from None
    except openai.PermissionDeniedError as exc:
        raise PullError(
            f"the API key may not read {what} (HTTP 403: {_api_message(exc)})"
        ) from None
    except openai.NotFoundError as exc:
        raise PullError(f"{server} has no {what} (HTTP 404: {_api_message(exc)})") from None
    except openai.APIStatusError as exc:
        raise PullError(
            f"{server} answered HTTP {exc.status_code} while listing {what}, after the client's "
            f"retries: {_api_message(exc)}"
        ) from None
    except openai.APITimeoutError:
        raise PullError(f"{server} did not answer in time while listing {what}") from None
    except openai.APIConnectionError as exc:
        cause = exc.__cause__ or exc
        raise PullError(f"cannot reach {server} ({cause})") from None


def _fetch_all(first_page: Any, progress: PullProgress | None) -> list[dict[str, Any]]:
    """Every object of a cursor-paginated list, page by page (`after` = the last id seen)."""
    objects: list[dict[str, Any]] = []
    seen: set[str] = set()
    for page in first_page.iter_pages():
        for obj in page.data:
            record = obj.to_dict(mode="json")
            ident = record.get("id")
            if isinstance(ident, str):
                if ident in seen:
                    continue
                seen.add(ident)
            objects.append(record)
        if progress:
            progress(len(objects))
    return objects


def _content_hash(kind: str, ident: str, objects: list[dict[str, Any]]) -> str:
    digest = hashlib.sha256(f"{kind}\n{ident}\n".encode())
    for obj in objects:
        digest.update(json.dumps(obj, sort_keys=True, ensure_ascii=False).encode())
        digest.update(b"\n")
    return digest.hexdigest()


def pull_finetune_metrics(
    store: Store,
    job_id: str,
    *,
    api_key: str | None = None,
    base_url: str | None = None,
    progress: PullProgress | None = None,
    max_retries: int = 2,
) -> StepMetricsResult:
    """Fetch every event of fine-tuning job `job_id` and store its `metrics` events as the run
    `job_id`'s step metrics. Pulling again when nothing changed is a no-op; a job that has run
    further since adds its new steps."""
    job_id = job_id.strip()
    if not job_id:
        raise PullError("enter a fine-tuning job id (ftjob-...)")
    client = make_client(api_key, base_url, max_retries=max_retries)
    what = f"fine-tuning job {job_id}"
    with _api_errors(client, what):
        first = client.fine_tuning.jobs.list_events(job_id, limit=PAGE_SIZE)
        events = _fetch_all(first, progress)
    display_name = f"{job_id} (OpenAI API)"
    where = Where(display_name)
    rows = list(
        convert_events(((where.sub(f"events[{i}]"), e) for i, e in enumerate(events)), job_id)
    )
    if not rows:
        raise IngestError(
            f"{what} has {len(events)} events but no `metrics` events yet (a job publishes them "
            "once training steps run)",
            file=display_name,
        )
    return ingest_step_metrics(
        store,
        rows,
        display_name,
        _content_hash("finetune", job_id, events),
        format="openai_finetune",
    )


def pull_eval_run(
    store: Store,
    eval_id: str,
    run_id: str,
    *,
    api_key: str | None = None,
    base_url: str | None = None,
    progress: PullProgress | None = None,
    max_retries: int = 2,
) -> IngestResult:
    """Fetch every output item of eval run `run_id` of eval `eval_id` and import them as rollouts,
    exactly as the `openai_evals` importer reads a saved export."""
    eval_id, run_id = eval_id.strip(), run_id.strip()
    if not eval_id or not run_id:
        raise PullError("enter both the eval id (eval_...) and the run id (evalrun_...)")
    client = make_client(api_key, base_url, max_retries=max_retries)
    what = f"eval run {run_id} of eval {eval_id}"
    with _api_errors(client, what):
        first = client.evals.runs.output_items.list(run_id, eval_id=eval_id, limit=PAGE_SIZE)
        items = _fetch_all(first, progress)
    display_name = f"{run_id} (OpenAI API)"
    if not items:
        raise IngestError(f"{what} has no output items", file=display_name)
    workdir = Path(tempfile.mkdtemp(prefix="rollscope-pull-"))
    try:
        target = workdir / f"{run_id}.jsonl"
        with target.open("w", encoding="utf-8") as out:
            for item in items:
                out.write(json.dumps(item, ensure_ascii=False))
                out.write("\n")
        return store.ingest_file(target, display_name=display_name, format="openai_evals")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
