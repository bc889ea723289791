"""`rollscope import|demo|serve|formats|pull`: the command line over the trace store."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from trace_store import IngestError, Store, TraceStoreError, default_db_path, open_store
from trace_store.ingest import importers
from trace_store.post_import import after_imports

from . import server_script

DEFAULT_UPLOAD_LIMIT_MB = 10240


def _progress_printer(label: str) -> Callable[[int, int], None]:
    """A one-line progress bar on stderr when it is a terminal; quiet otherwise."""
    if not sys.stderr.isatty():
        return lambda done, total: None
    started = time.monotonic()

    def show(done: int, total: int) -> None:
        width = 30
        filled = int(width * done / max(total, 1))
        mb = done / 1e6
        rate = mb / max(time.monotonic() - started, 1e-6)
        sys.stderr.write(
            f"\r{label} [{'#' * filled}{'.' * (width - filled)}] {mb:,.1f} MB ({rate:,.0f} MB/s)"
        )
        if done >= total:
            sys.stderr.write("\n")
        sys.stderr.flush()

    return show


def cmd_import(args: argparse.Namespace) -> int:
    failures = 0
    run_ids: list[str] = []
    with open_store(args.db) as store:
        for name in args.files:
            path = Path(name)
            try:
                result = store.ingest_file(
                    path, format=args.format, progress=_progress_printer(path.name)
                )
            except IngestError as exc:
                failures += 1
                print(f"error: {exc}", file=sys.stderr)
                continue
            print(result.summary())
            for warning in result.warnings:
                print(f"  warning: {warning}")
            run_ids += result.run_ids
        _after_imports(store, run_ids)
    return 1 if failures else 0


def _after_imports(store: Store, run_ids: list[str]) -> None:
    print("Updating the dashboards' summaries...", file=sys.stderr, flush=True)
    for line in after_imports(store, run_ids):
        print(line)


def cmd_demo(args: argparse.Namespace) -> int:
    with open_store(args.db) as store:
        if args.if_empty and not store.is_empty():
            print(f"{store.path} already holds runs; demo not loaded")
            return 0
        result = store.load_demo(progress=_progress_printer("demo"))
        print(result.summary())
        _after_imports(store, result.run_ids)
    return 0


def cmd_formats(args: argparse.Namespace) -> int:
    for importer in importers():
        print(f"{importer.name:20} {importer.label}\n{'':20} e.g. {importer.example}")
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    db = Path(args.db).expanduser() if args.db else default_db_path()
    if args.demo:
        with open_store(db) as store:
            if store.is_empty():
                print("Loading the demo run into an empty store...", flush=True)
                result = store.load_demo(progress=_progress_printer("demo"))
                print(result.summary())
                _after_imports(store, result.run_ids)
    env = {**os.environ, "ROLLSCOPE_DB": str(db)}
    command = [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        str(server_script()),
        "--server.port",
        str(args.port),
        "--server.maxUploadSize",
        str(DEFAULT_UPLOAD_LIMIT_MB),
        "--browser.gatherUsageStats",
        "false",
        # A server, not an editor session: watching the install tree for edits only costs inotify.
        "--server.fileWatcherType",
        "none",
        "--client.toolbarMode",
        "minimal",
    ]
    if args.headless:
        command += ["--server.headless", "true"]
    print(f"Rollscope on http://localhost:{args.port}  (store: {db})", flush=True)
    try:
        return subprocess.call(command, env=env)
    except KeyboardInterrupt:
        return 0


def cmd_audit(args: argparse.Namespace) -> int:
    from trace_store import audit

    params = audit.AuditParams(tool_budget=args.tool_budget)
    with open_store(args.db) as store:
        summary = audit.run_detectors(store, args.run, params=params)
        for line in summary.lines():
            print(line)
        for run_id in summary.run_ids:
            for signal in audit.run_signals(store, run_id):
                if signal.raised:
                    print(f"{run_id}  signal {signal.name}: {signal.message}")
            flagged = audit.flagged_rollouts(store, run_id, limit=args.show)
            for row in flagged.itertuples():
                print(f"{run_id}  {row.rollout_id}  {row.detector}  {row.severity}: {row.reason}")
    return 1 if any(r.error for r in summary.results) else 0


def cmd_pull(args: argparse.Namespace) -> int:
    from trace_store.pull import pull_eval_run, pull_finetune_metrics

    def fetched(count: int) -> None:
        if sys.stderr.isatty():
            sys.stderr.write(f"\rfetched {count:,} objects")
            sys.stderr.flush()

    keys = {"api_key": args.api_key, "base_url": args.base_url, "progress": fetched}
    with open_store(args.db) as store:
        if args.source == "finetune":
            result = pull_finetune_metrics(store, args.job_id, **keys)
        else:
            result = pull_eval_run(store, args.eval_id, args.run_id, **keys)
    if sys.stderr.isatty():
        sys.stderr.write("\n")
    print(result.summary())
    return 0


def cmd_migrate_store(args: argparse.Namespace) -> int:
    from trace_store.backends import parse_target
    from trace_store.transfer import copy_store

    source = args.db or os.environ.get("ROLLSCOPE_DB") or str(default_db_path())
    target = parse_target(args.to).describe()
    print(f"copying {parse_target(source).describe()} into {target}")
    copied = copy_store(
        source, args.to, progress=lambda table, rows: print(f"  {table}: {rows:,} rows")
    )
    print(f"done: {sum(copied.values()):,} rows in {len(copied)} tables. Serve it with:")
    print(f"  ROLLSCOPE_DB='{target}' rollscope serve")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rollscope", description=__doc__)
    db_help = f"DuckDB store file (default: $ROLLSCOPE_DB or {default_db_path()})"
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("import", help="import trace files into the store")
    p.add_argument("files", nargs="+", help="trace files or folders of per-step files")
    p.add_argument("--db", help=db_help)
    p.add_argument(
        "--format",
        help="skip detection and read the files as this format (see `rollscope formats`)",
    )
    p.set_defaults(func=cmd_import)

    p = sub.add_parser("demo", help="write the demo runs into the store")
    p.add_argument("--db", help=db_help)
    p.add_argument("--if-empty", action="store_true", help="only when the store holds no runs")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("serve", help="start the web app")
    p.add_argument("--db", help=db_help)
    p.add_argument("--port", type=int, default=8501)
    p.add_argument(
        "--demo", action="store_true", help="load the demo run first if the store is empty"
    )
    p.add_argument("--headless", action="store_true", help="do not open a browser")
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser("audit", help="run the reward-hacking detectors and user rules; write flags")
    p.add_argument("--db", help=db_help)
    p.add_argument("--run", help="audit this run only (default: every run)")
    p.add_argument(
        "--tool-budget", type=int, default=20, help="tool calls allowed a rollout (default 20)"
    )
    p.add_argument(
        "--show", type=int, default=20, help="flagged rollouts to list per run (default 20)"
    )
    p.set_defaults(func=cmd_audit)

    p = sub.add_parser(
        "pull", help="pull a fine-tuning job's metrics or an eval run from the OpenAI API"
    )
    pull = p.add_subparsers(dest="source", required=True)
    api_help = {
        "api_key": "API key (default: $OPENAI_API_KEY)",
        "base_url": "API base URL (default: $OPENAI_BASE_URL or https://api.openai.com/v1)",
    }
    finetune = pull.add_parser("finetune", help="a fine-tuning job's per-step metrics events")
    finetune.add_argument("job_id", help="fine-tuning job id (ftjob-...)")
    evals = pull.add_parser("eval", help="an eval run's output items, as rollouts")
    evals.add_argument("eval_id", help="eval id (eval_...)")
    evals.add_argument("run_id", help="eval run id (evalrun_...)")
    for q in (finetune, evals):
        q.add_argument("--db", help=db_help)
        q.add_argument("--api-key", help=api_help["api_key"])
        q.add_argument("--base-url", help=api_help["base_url"])
        q.set_defaults(func=cmd_pull)

    p = sub.add_parser(
        "migrate-store",
        help="copy the whole store into a new one, e.g. a shared DuckLake (docs/deploy.md)",
    )
    p.add_argument("--db", help=db_help + " to copy from")
    p.add_argument(
        "--to",
        required=True,
        help="the new, empty store: 'ducklake:postgres:dbname=... host=... DATA_PATH <folder or URL>' or a file",
    )
    p.set_defaults(func=cmd_migrate_store)

    p = sub.add_parser("formats", help="list the trace formats Rollscope reads")
    p.set_defaults(func=cmd_formats)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except TraceStoreError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
