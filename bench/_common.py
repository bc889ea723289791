"""Shared helpers of the bench scripts: the results file format, the commit, timing.

Every bench script writes ``bench/results/<name>.json``::

    {"bench": name, "commit": "<git sha>", "dirty": bool, "date": "...Z", "cores": 2,
     "python": "3.11.x", "duckdb": "1.5.5", "params": {...},
     "rows": [{"metric": "...", "value": 1.23, "unit": "s", "target": "<= 1.5", "ok": true}, ...]}

`bench/run_all.py` prints the rows of every results file as one table, beside the previous figures.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import statistics
import subprocess
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
RESULTS_DIR = BENCH_DIR / "results"


def git_commit() -> tuple[str, bool]:
    """(commit sha, whether the work tree has uncommitted changes)."""
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = bool(
            subprocess.run(
                ["git", "status", "--porcelain", "--untracked-files=no"],
                cwd=ROOT,
                capture_output=True,
                text=True,
                check=True,
            ).stdout.strip()
        )
        return sha, dirty
    except (OSError, subprocess.CalledProcessError):
        return "unknown", True


def machine() -> dict[str, Any]:
    import duckdb

    sha, dirty = git_commit()
    return {
        "commit": sha,
        "dirty": dirty,
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "duckdb": duckdb.__version__,
    }


def row(
    metric: str, value: float | int | None, unit: str, target: str = "", ok: bool | None = None
) -> dict[str, Any]:
    return {"metric": metric, "value": value, "unit": unit, "target": target, "ok": ok}


def results_path(name: str) -> Path:
    return RESULTS_DIR / f"{name}.json"


def load_previous(name: str) -> dict[str, Any] | None:
    path = results_path(name)
    if not path.exists():
        return None
    try:
        data: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data


def save_results(
    name: str,
    rows: list[dict[str, Any]],
    params: dict[str, Any],
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    data = {"bench": name, **machine(), "params": params, "rows": rows, **(extra or {})}
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    results_path(name).write_text(json.dumps(data, indent=2) + "\n")
    return data


def fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        if abs(value) >= 100:
            return f"{value:,.0f}"
        return f"{value:.3g}" if abs(value) < 10 else f"{value:.1f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def print_table(data: dict[str, Any], previous: dict[str, Any] | None = None) -> None:
    """The rows of one results file, with the previous run's figure beside each."""
    before = {r["metric"]: r for r in (previous or {}).get("rows", [])}
    prev_label = f"prev ({(previous or {}).get('commit', '')[:8]})" if previous else "prev"
    header = ["metric", "value", "unit", "target", "ok", prev_label]
    lines = [header]
    for r in data.get("rows", []):
        ok = "" if r.get("ok") is None else ("yes" if r["ok"] else "NO")
        old = before.get(r["metric"], {}).get("value")
        lines.append([r["metric"], fmt(r["value"]), r["unit"], r.get("target", ""), ok, fmt(old)])
    widths = [max(len(str(line[i])) for line in lines) for i in range(len(header))]
    for n, line in enumerate(lines):
        print("  ".join(str(c).ljust(w) for c, w in zip(line, widths, strict=True)).rstrip())
        if n == 0:
            print("  ".join("-" * w for w in widths))


def median(values: list[float]) -> float:
    return statistics.median(values)
