"""Run every bench script under bench/ and print one table of all results.

    python bench/run_all.py                 # run each bench/*.py with its defaults, then the table
    python bench/run_all.py --only ingest   # some of them (repeatable)
    python bench/run_all.py --table         # only print the table of the last results
    python bench/run_all.py --markdown      # the table as Markdown (for the README)

Each script writes bench/results/<name>.json (figures, targets, the commit it ran on); a run
prints the previous figures beside the new ones. Scripts are discovered: any bench/<name>.py not
starting with an underscore. Arguments after `--` go to every script (e.g. `-- --repeat 1`).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import BENCH_DIR, RESULTS_DIR, fmt

SKIP = {"run_all", "__main__"}


def scripts() -> list[str]:
    return sorted(
        p.stem for p in BENCH_DIR.glob("*.py") if not p.stem.startswith("_") and p.stem not in SKIP
    )


def load(path: Path) -> dict[str, Any] | None:
    try:
        data: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data


def table(previous: dict[str, dict[str, Any]], markdown: bool = False) -> str:
    header = ["bench", "metric", "value", "unit", "target", "ok", "previous", "commit"]
    lines: list[list[str]] = []
    for path in sorted(RESULTS_DIR.glob("*.json")):
        data = load(path)
        if not data or "rows" not in data:
            continue
        name = str(data.get("bench", path.stem))
        commit = str(data.get("commit", ""))[:8] + ("+" if data.get("dirty") else "")
        before = {r["metric"]: r.get("value") for r in previous.get(path.stem, {}).get("rows", [])}
        for r in data["rows"]:
            ok = "" if r.get("ok") is None else ("yes" if r["ok"] else "NO")
            lines.append(
                [
                    name,
                    str(r["metric"]),
                    fmt(r.get("value")),
                    str(r.get("unit", "")),
                    str(r.get("target", "")),
                    ok,
                    fmt(before.get(r["metric"])),
                    commit,
                ]
            )
            name, commit = "", ""
    if markdown:
        out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        out += ["| " + " | ".join(c.replace("|", "\\|") for c in line) + " |" for line in lines]
        return "\n".join(out)
    widths = [max([len(header[i])] + [len(line[i]) for line in lines]) for i in range(len(header))]
    out = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True))]
    out.append("  ".join("-" * w for w in widths))
    out += [
        "  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in lines
    ]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    passthrough: list[str] = []
    if "--" in argv:
        passthrough = argv[argv.index("--") + 1 :]
        argv = argv[: argv.index("--")]
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--only", action="append", default=[], help="run only these scripts")
    parser.add_argument("--table", action="store_true", help="only print the last results")
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    args = parser.parse_args(argv)

    previous = {p.stem: load(p) or {} for p in RESULTS_DIR.glob("*.json")}
    failed: list[str] = []
    if not args.table:
        names = scripts()
        unknown = set(args.only) - set(names)
        if unknown:
            parser.error(
                f"no such bench script: {', '.join(sorted(unknown))} (have: {', '.join(names)})"
            )
        for name in args.only or names:
            print(f"== bench/{name}.py {' '.join(passthrough)}", flush=True)
            start = time.perf_counter()
            code = subprocess.call([sys.executable, str(BENCH_DIR / f"{name}.py"), *passthrough])
            print(f"== {name}: exit {code} in {time.perf_counter() - start:.0f}s\n", flush=True)
            if code != 0:
                failed.append(name)
    print(table(previous if not args.table else {}, markdown=args.markdown))
    if failed:
        print(f"\nfailed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
