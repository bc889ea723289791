"""API pulls with the real `openai` client against a local server speaking the API's wire protocol.

The server implements the two cursor-paginated list endpoints the pulls use
(`GET /v1/fine_tuning/jobs/{job}/events`, `GET /v1/evals/{eval}/runs/{run}/output_items`): JSON list
objects `{object: "list", data, first_id, last_id, has_more}` honouring `after` and `limit`, bearer
authentication (401 with the API's error body), 404 for unknown ids, and injected failures (500) to
exercise the client's retries.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from rollscope.cli import main as cli_main
from trace_store import open_store
from trace_store.metrics import StepMetricsResult, step_metrics_by_step
from trace_store.pull import PullError, pull_eval_run, pull_finetune_metrics

KEY = "sk-test-0123456789"
JOB = "ftjob-pull1"
EVAL = "eval_67abc"
RUN = "evalrun_67def"


def metrics_event(step: int) -> dict[str, Any]:
    reward = round(0.2 + step / 250, 6)
    data: dict[str, Any] = {
        "step": step,
        "scores": {
            "train_reward_mean": reward,
            "graders": [{"name": "exact", "type": "string_check", "train_reward_mean": reward}],
        },
        "timing": {"step": {"sampling": 10.0, "training": 20.0, "full_iteration": 31.5}},
        "total_steps": 200,
    }
    if step % 10 == 0:
        data["scores"]["valid_reward_mean"] = reward - 0.05
    return {
        "object": "fine_tuning.job.event",
        "id": f"ftevent-{step:04d}",
        "created_at": 1750000000 + step * 60,
        "level": "info",
        "message": f"Step {step}/200 , train mean reward={reward:.2f}",
        "data": data,
        "type": "metrics",
    }


def message_event(step: int) -> dict[str, Any]:
    return {
        "object": "fine_tuning.job.event",
        "id": f"ftevent-m{step:04d}",
        "created_at": 1750000000 + step * 60 + 1,
        "level": "info",
        "message": f"Checkpoint saved at step {step}",
        "data": {},
        "type": "message",
    }


def job_events(steps: int) -> list[dict[str, Any]]:
    """Newest first, as the API lists them: a metrics and a message event per step."""
    events: list[dict[str, Any]] = []
    for step in range(steps, 0, -1):
        events += [message_event(step), metrics_event(step)]
    return events


def output_item(index: int) -> dict[str, Any]:
    passed = index % 3 != 0
    return {
        "object": "eval.run.output_item",
        "id": f"outputitem_{index:04d}",
        "eval_id": EVAL,
        "run_id": RUN,
        "created_at": 1750000000 + index,
        "status": "pass" if passed else "fail",
        "datasource_item_id": index,
        "datasource_item": {"question": f"What is {index} + 1?", "answer": str(index + 1)},
        "results": [
            {
                "name": "exact-match",
                "type": "string_check",
                "score": 1.0 if passed else 0.0,
                "passed": passed,
            }
        ],
        "sample": {
            "input": [{"role": "user", "content": f"What is {index} + 1?"}],
            "output": [{"role": "assistant", "content": str(index + 1 if passed else index)}],
            "model": "gpt-4.1-mini",
            "usage": {
                "prompt_tokens": 12,
                "completion_tokens": 3,
                "cached_tokens": 0,
                "total_tokens": 15,
            },
            "finish_reason": "stop",
            "error": {"code": None, "message": None},
            "temperature": 1.0,
            "top_p": 1.0,
            "seed": 42,
            "max_completion_tokens": 64,
        },
    }


@dataclass
class FakeAPI:
    jobs: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    eval_runs: dict[tuple[str, str], list[dict[str, Any]]] = field(default_factory=dict)
    failures: list[int] = field(default_factory=list)  # statuses to answer before the next success
    requests: list[dict[str, Any]] = field(default_factory=list)
    base_url: str = ""


def _error(message: str, kind: str, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def make_handler(api: FakeAPI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

        def send_json(self, status: int, body: dict[str, Any]) -> None:
            payload = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.send_header("x-request-id", f"req_{len(api.requests)}")
            self.end_headers()
            self.wfile.write(payload)

        def do_GET(self) -> None:
            url = urlsplit(self.path)
            query = {k: v[-1] for k, v in parse_qs(url.query).items()}
            api.requests.append(
                {
                    "path": url.path,
                    "query": query,
                    "retry_count": self.headers.get("x-stainless-retry-count"),
                }
            )
            if api.failures:
                status = api.failures.pop(0)
                self.send_json(
                    status,
                    _error(
                        "The server had an error while processing your request.", "server_error"
                    ),
                )
                return
            if self.headers.get("Authorization") != f"Bearer {KEY}":
                given = (self.headers.get("Authorization") or "").removeprefix("Bearer ")
                self.send_json(
                    401,
                    _error(
                        f"Incorrect API key provided: {given[:3]}***{given[-2:]}.",
                        "invalid_request_error",
                        "invalid_api_key",
                    ),
                )
                return
            objects: list[dict[str, Any]] | None = None
            if match := re.fullmatch(r"/v1/fine_tuning/jobs/([^/]+)/events", url.path):
                objects = api.jobs.get(match[1])
                missing = f"Could not find fine-tune job: {match[1]}"
            elif match := re.fullmatch(r"/v1/evals/([^/]+)/runs/([^/]+)/output_items", url.path):
                objects = api.eval_runs.get((match[1], match[2]))
                missing = f"Eval run with id '{match[2]}' not found."
            else:
                self.send_json(
                    404, _error(f"Invalid URL (GET {url.path})", "invalid_request_error")
                )
                return
            if objects is None:
                self.send_json(404, _error(missing, "invalid_request_error"))
                return
            try:
                limit = int(query.get("limit", "20"))
                assert 1 <= limit <= 100
            except (ValueError, AssertionError):
                self.send_json(400, _error("limit must be 1..100", "invalid_request_error"))
                return
            start = 0
            if "after" in query:
                ids = [o["id"] for o in objects]
                if query["after"] not in ids:
                    self.send_json(400, _error("unknown cursor", "invalid_request_error"))
                    return
                start = ids.index(query["after"]) + 1
            page = objects[start : start + limit]
            self.send_json(
                200,
                {
                    "object": "list",
                    "data": page,
                    "first_id": page[0]["id"] if page else None,
                    "last_id": page[-1]["id"] if page else None,
                    "has_more": start + limit < len(objects),
                },
            )

    return Handler


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeAPI]:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    state = FakeAPI(
        jobs={JOB: job_events(125)},  # 250 events: pages of 100, 100 and 50
        eval_runs={(EVAL, RUN): [output_item(i) for i in range(230)]},
    )
    server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(state))
    state.base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def list_requests(api: FakeAPI, suffix: str) -> list[dict[str, Any]]:
    return [r for r in api.requests if r["path"].endswith(suffix)]


def test_finetune_pull_follows_pagination_into_step_metrics(api: FakeAPI, store_path: Path) -> None:
    seen: list[int] = []
    with open_store(store_path) as store:
        result = pull_finetune_metrics(
            store, JOB, api_key=KEY, base_url=api.base_url, progress=seen.append
        )
        assert isinstance(result, StepMetricsResult)
        assert (
            result.run_ids == [JOB] and result.steps == 125 and result.format == "openai_finetune"
        )
        requests = list_requests(api, "/events")
        assert [r["query"].get("after") for r in requests] == [None, "ftevent-0076", "ftevent-0026"]
        assert {r["query"]["limit"] for r in requests} == {"100"}
        assert seen == [100, 200, 250]
        frame = step_metrics_by_step(store, [JOB], metrics=["reward_mean"])
        train = frame[frame["split"] == "train"]
        assert train["step"].tolist() == list(range(1, 126))
        assert train["value"].round(6).tolist() == [round(0.2 + s / 250, 6) for s in range(1, 126)]
        assert len(frame[frame["split"] == "eval"]) == 12
        count = store.query_df("SELECT count(*) AS n FROM step_metrics")["n"][0]
        # per step: reward_mean, reward_mean/exact, 3 timings (+ the eval reward every 10th step)
        assert count == 125 * 5 + 12
        runs = store.list_runs()
        assert runs["run_id"].tolist() == [JOB]
        assert store.list_imports()["file_name"].tolist() == [f"{JOB} (OpenAI API)"]


def test_finetune_pull_again_is_a_no_op_until_the_job_moves_on(
    api: FakeAPI, store_path: Path
) -> None:
    with open_store(store_path) as store:
        pull_finetune_metrics(store, JOB, api_key=KEY, base_url=api.base_url)
        again = pull_finetune_metrics(store, JOB, api_key=KEY, base_url=api.base_url)
        assert again.already_imported and len(store.list_imports()) == 1
        api.jobs[JOB] = job_events(130)  # five more steps since
        later = pull_finetune_metrics(store, JOB, api_key=KEY, base_url=api.base_url)
        assert later.metrics_added == 5 * 5 + 1 and later.steps == 130
        frame = step_metrics_by_step(store, [JOB], metrics=["reward_mean"], splits=["train"])
        assert frame["step"].max() == 130 and len(frame) == 130


def test_eval_run_pull_imports_output_items_as_rollouts(api: FakeAPI, store_path: Path) -> None:
    seen: list[int] = []
    with open_store(store_path) as store:
        result = pull_eval_run(
            store, EVAL, RUN, api_key=KEY, base_url=api.base_url, progress=seen.append
        )
        assert result.rollouts_added == 230 and result.run_ids == [RUN]
        assert result.format == "openai_evals"
        requests = list_requests(api, "/output_items")
        assert [r["query"].get("after") for r in requests] == [
            None,
            "outputitem_0099",
            "outputitem_0199",
        ]
        assert seen == [100, 200, 230]
        runs = store.list_runs()
        row = runs.set_index("run_id").loc[RUN]
        assert row["kind"] == "eval" and row["rollouts"] == 230
        assert row["mean_reward"] == pytest.approx(153 / 230)
        grades = store.query_df("SELECT grader, count(*) AS n FROM grades GROUP BY grader")
        assert grades.to_dict("records") == [{"grader": "exact-match", "n": 230}]
        again = pull_eval_run(store, EVAL, RUN, api_key=KEY, base_url=api.base_url)
        assert again.already_imported


def test_a_refused_key_says_so_and_changes_nothing(api: FakeAPI, store_path: Path) -> None:
    with open_store(store_path) as store:
        with pytest.raises(PullError) as caught:
            pull_finetune_metrics(store, JOB, api_key="sk-wrong-key", base_url=api.base_url)
        message = str(caught.value)
        assert "refused the API key" in message and "401" in message
        assert "Incorrect API key provided" in message and api.base_url in message
        assert len(api.requests) == 1  # a 401 is not retried
        assert store.is_empty() and store.list_imports().empty


def test_a_server_error_is_retried_by_the_client(api: FakeAPI, store_path: Path) -> None:
    api.failures = [500]
    with open_store(store_path) as store:
        result = pull_eval_run(store, EVAL, RUN, api_key=KEY, base_url=api.base_url)
        assert result.rollouts_added == 230
    requests = list_requests(api, "/output_items")
    assert len(requests) == 4  # the 500, its retry, then the other two pages
    assert requests[0]["retry_count"] == "0" and requests[1]["retry_count"] == "1"
    assert requests[0]["query"] == requests[1]["query"]


def test_a_persistent_server_error_gives_up_with_a_clear_message(
    api: FakeAPI, store_path: Path
) -> None:
    api.failures = [500, 500]
    with open_store(store_path) as store:
        with pytest.raises(PullError, match=r"answered HTTP 500 .* after the client's retries"):
            pull_finetune_metrics(store, JOB, api_key=KEY, base_url=api.base_url, max_retries=1)
        assert store.is_empty()
    assert len(api.requests) == 2


def test_unknown_ids_and_missing_key(
    api: FakeAPI, store_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with open_store(store_path) as store:
        with pytest.raises(PullError, match=r"has no fine-tuning job ftjob-nope .*404"):
            pull_finetune_metrics(store, "ftjob-nope", api_key=KEY, base_url=api.base_url)
        with pytest.raises(PullError, match="has no eval run evalrun_x of eval eval_67abc"):
            pull_eval_run(store, EVAL, "evalrun_x", api_key=KEY, base_url=api.base_url)
        with pytest.raises(PullError, match="no OpenAI API key"):
            pull_finetune_metrics(store, JOB, base_url=api.base_url)
        with pytest.raises(PullError, match="enter a fine-tuning job id"):
            pull_finetune_metrics(store, "  ", api_key=KEY, base_url=api.base_url)
        # The key and the base URL from the environment
        monkeypatch.setenv("OPENAI_API_KEY", KEY)
        monkeypatch.setenv("OPENAI_BASE_URL", api.base_url)
        assert pull_finetune_metrics(store, JOB).steps == 125


def test_an_unreachable_server_is_named(store_path: Path) -> None:
    with ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler) as closed:
        port = closed.server_address[1]
    with open_store(store_path) as store, pytest.raises(PullError, match="cannot reach"):
        pull_finetune_metrics(
            store, JOB, api_key=KEY, base_url=f"http://127.0.0.1:{port}/v1", max_retries=0
        )


def test_cli_pull_subcommands(
    api: FakeAPI,
    store_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    db = str(store_path)
    assert cli_main(["pull", "finetune", JOB, "--db", db, "--base-url", api.base_url]) == 0
    assert "step metrics added for 125 steps" in capsys.readouterr().out
    assert cli_main(["pull", "eval", EVAL, RUN, "--db", db, "--base-url", api.base_url]) == 0
    assert "230 rollouts added" in capsys.readouterr().out
    monkeypatch.setenv("OPENAI_API_KEY", "sk-wrong-key")
    assert cli_main(["pull", "eval", EVAL, RUN, "--db", db, "--base-url", api.base_url]) == 2
    assert "refused the API key" in capsys.readouterr().err


def test_runs_page_pull_panel(
    api: FakeAPI, store_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("ROLLSCOPE_DB", str(store_path))
    monkeypatch.setenv("OPENAI_BASE_URL", api.base_url)
    root = Path(__file__).resolve().parent.parent
    at = AppTest.from_file(str(root / "app.py"), default_timeout=600).run()
    assert not at.exception
    assert not [b for b in at.button if b.key == "runs.pull.go"]  # no button before an id
    at.text_input(key="runs.pull.job").input(JOB)
    at.text_input(key="runs.pull.api_key").input("sk-wrong-key").run()
    at.button(key="runs.pull.go").click().run()
    assert not at.exception
    errors = " ".join(e.value for e in at.error)
    assert "refused the API key" in errors.replace("\\", "")
    at.text_input(key="runs.pull.api_key").input(KEY)
    at.button(key="runs.pull.go").click().run()
    assert not at.exception and not at.error
    assert "125 steps" in " ".join(s.value for s in at.success)
    assert JOB in at.dataframe[0].value.to_string()  # the runs table shows the pulled run
    at.radio(key="runs.pull.source").set_value("Eval run output items").run()
    at.text_input(key="runs.pull.eval").input(EVAL)
    at.text_input(key="runs.pull.run").input(RUN).run()
    at.button(key="runs.pull.go").click().run()
    assert not at.exception and not at.error
    assert "230 rollouts added" in " ".join(s.value for s in at.success)
