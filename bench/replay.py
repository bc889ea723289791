"""Replay and compare at their worst, and full-text search at scale.

    python bench/replay.py                        # replay/compare + search on 200k rollouts
    python bench/replay.py --search-size 1000000  # search on 1M rollouts (slow to build)
    python bench/replay.py --search-size 0        # replay/compare only
    python bench/replay.py --search-only --search-size 1000000 --name replay-search-1m

Part 1, replay and compare: two rollouts of 1,000 items each (200 turns of reasoning + two
parallel calls + their outputs; every 10th turn has a 1 MB output, one holds a 2 MB base64 data
URI; the two diverge at turn 101), imported through `Store.ingest_records`. Timed:
- the store calls the Replay screen makes (header, grades, neighbours, pages, events of page 1,
  the anchors' index, timeline) and the Compare screen makes (two of each, turn signatures,
  first divergence, events of the first 20 turns);
- the whole screen rendered by Streamlit's AppTest (the page script with the store calls and
  every element), cold (cache cleared; median of 3) and warm (median of --repeat);
- reference, same run: reading the whole rollout naively (``SELECT * FROM events``, all text).
Target: under 500 ms each (server time).

Part 2, search: N rollouts (the demo's trajectories repeated with new ids, ~17 items each):
building the word index from scratch, updating it after an import of 2,000 rollouts, and
searches (a rare, a medium and a common word, two words) through the index (what the app
does), against ``ILIKE`` over a per-rollout text column (the alternative design) and the scan
a read-only store falls back to. (DuckDB's fts extension, measured on the same 200k store
while the machine was loaded: 681 s to build, which every import would repeat; 1.6-2.8 s a
query. See trace_store/replay.py.)
Results go to bench/results/replay.json.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from _common import BENCH_DIR, ROOT, load_previous, median, print_table, row, save_results

from trace_store import Store, open_store
from trace_store import replay as R

NAME = "replay"
TARGET_MS = 500
RUN = "bench-replay"
TURNS = 200
MB = 1_000_000


def timed(fn: Callable[[], Any], repeat: int = 1) -> tuple[float, Any]:
    """Median milliseconds of `repeat` calls, and the last result."""
    times, result = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        times.append((time.perf_counter() - t0) * 1000)
    return median(times), result


def big_rollout(rid: str, diverge_at: int | None) -> dict[str, Any]:
    items: list[dict[str, Any]] = [
        {"type": "message", "role": "user", "content": "Find the bug in this huge repository."}
    ]
    filler = ("log line: all good, nothing to see here " * 60)[:2000]
    for turn in range(1, TURNS + 1):
        other = diverge_at is not None and turn >= diverge_at
        items.append(
            {"type": "reasoning", "text": f"Turn {turn}: I should look at more files. " * 5}
        )
        results = []
        for k in range(2):
            call_id = f"{rid}-t{turn}-c{k}"
            path = f"src/module_{turn}_{k}{'_b' if other else ''}.py"
            items.append(
                {
                    "type": "function_call",
                    "call_id": call_id,
                    "name": "read_file" if k == 0 else "search_code",
                    "arguments": {"path": path, "query": f"def f{turn}"},
                    "duration_ms": 50 + (turn * 37 + k * 11) % 400,
                }
            )
            output = filler
            if k == 0 and turn % 10 == 0:
                output = (f"{turn:04d} " + "x" * 95 + "\n") * (MB // 100)  # 1 MB
            if k == 1 and turn == 50:
                output = "screenshot: data:image/png;base64," + "iVBORw0KGgo" * (2 * MB // 11)
            results.append({"type": "function_call_output", "call_id": call_id, "output": output})
        items += results  # both calls first, then their outputs: one turn of parallel calls
    return {
        "run_id": RUN,
        "run_name": "Bench: huge rollouts",
        "rollout_id": rid,
        "step": 1,
        "prompt_id": "huge",
        "sample_index": 0 if diverge_at is None else 1,
        "items": items,
        "reward": 1.0 if diverge_at is None else 0.5,
        "grades": [
            {"name": "correctness", "score": 1.0, "weight": 0.8, "explanation": "tests pass"},
            {"name": "efficiency", "score": 0.0, "weight": 0.2, "explanation": "too many calls"},
        ],
        "final_answer": "The bug is in module 17.",
    }


def build_replay_store(path: Path) -> None:
    with open_store(path) as store:
        t0 = time.perf_counter()
        store.ingest_records(
            [big_rollout("huge-1", None), big_rollout("huge-2", TURNS // 2 + 1)],
            display_name="bench-huge",
        )
        print(f"  imported two 1,000-item rollouts in {time.perf_counter() - t0:.1f} s")


def replay_calls(store: Store, rid: str) -> None:
    R.rollout_header(store, RUN, rid)
    grades = R.rollout_grades(store, RUN, rid)
    R.rollout_neighbours(store, RUN, rid)
    pages = R.turn_pages(store, RUN, rid)
    index = R.rollout_index(store, RUN, rid)
    R.grade_anchors(grades, index)
    events = R.rollout_events(store, RUN, rid, turns=pages[0])
    R.group_turns(events)


def compare_calls(store: Store) -> None:
    refs = [R.CompareRef(RUN, "huge-1"), R.CompareRef(RUN, "huge-2")]
    signatures = []
    for r in refs:
        R.rollout_header(store, r.run_id, r.rollout_id)
        R.rollout_grades(store, r.run_id, r.rollout_id)
        signatures.append(R.turn_signatures(store, r.run_id, r.rollout_id))
    R.divergence_of(signatures)
    for r in refs:
        R.group_turns(R.rollout_events(store, r.run_id, r.rollout_id, turns=(0, 19)))


def render_ms(db: Path, page: str, params: dict[str, str], repeat: int) -> tuple[float, float]:
    """(cold, warm median) milliseconds of the screen's script run under AppTest.

    Timed around AppTest's script runner, so AppTest's own set-up (a scan of every installed
    package for components, about a second here, once per server in a real deployment) is
    not counted: what remains is the server's work for one page view.
    """
    import streamlit as st
    from streamlit.testing.v1 import AppTest
    from streamlit.testing.v1.local_script_runner import LocalScriptRunner

    os.environ["ROLLSCOPE_DB"] = str(db)
    spans: list[float] = []
    original = LocalScriptRunner.run

    def timed_run(self: Any, *args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return original(self, *args, **kwargs)
        finally:
            spans.append((time.perf_counter() - t0) * 1000)

    def run() -> float:
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=600)
        at.switch_page(page)
        at.query_params.update(params)
        at.run()
        if at.exception:
            raise RuntimeError(f"{page} failed: {[e.value for e in at.exception]}")
        return spans[-1]

    LocalScriptRunner.run = timed_run  # type: ignore[method-assign]
    try:
        run()  # imports, the store's connection

        def cold_run() -> float:
            st.cache_data.clear()
            return run()

        cold = median([cold_run() for _ in range(3)])
        warm = median([run() for _ in range(repeat)])
    finally:
        LocalScriptRunner.run = original  # type: ignore[method-assign]
    return cold, warm


def part_replay(workdir: Path, repeat: int) -> list[dict[str, Any]]:
    db = workdir / "huge.duckdb"
    if not db.exists():
        partial = db.with_suffix(".building")
        partial.unlink(missing_ok=True)
        build_replay_store(partial)
        partial.rename(db)
    rows = []
    with open_store(db) as store:
        ref_ms, _ = timed(
            lambda: store.query_df(
                "SELECT * FROM events WHERE run_id = ? AND rollout_id = ? ORDER BY seq",
                [RUN, "huge-1"],
            ),
            repeat,
        )
        replay_ms, _ = timed(lambda: replay_calls(store, "huge-1"), repeat)
        compare_ms, _ = timed(lambda: compare_calls(store), repeat)
        full_ms, text = timed(lambda: R.event_field(store, RUN, "huge-1", 49, "output"), repeat)
    rows += [
        row("reference: read one whole rollout (all text)", ref_ms, "ms"),
        row("replay: store calls", replay_ms, "ms", f"< {TARGET_MS}", replay_ms < TARGET_MS),
        row(
            "compare of two: store calls",
            compare_ms,
            "ms",
            f"< {TARGET_MS}",
            compare_ms < TARGET_MS,
        ),
        row(f"show all: one {len(text) / MB:.0f} MB output", full_ms, "ms"),
    ]
    cold, warm = render_ms(db, "pages/replay.py", {"run": RUN, "rollout": "huge-1"}, repeat)
    rows += [
        row("replay: screen render, cold", cold, "ms", f"< {TARGET_MS}", cold < TARGET_MS),
        row("replay: screen render, warm", warm, "ms", f"< {TARGET_MS}", warm < TARGET_MS),
    ]
    params = {"run": RUN, "rollouts": "huge-1,huge-2"}
    cold, warm = render_ms(db, "pages/compare.py", params, repeat)
    rows += [
        row("compare: screen render, cold", cold, "ms", f"< {TARGET_MS}", cold < TARGET_MS),
        row("compare: screen render, warm", warm, "ms", f"< {TARGET_MS}", warm < TARGET_MS),
    ]
    return rows


def build_search_store(path: Path, size: int) -> None:
    """The demo's trajectories, repeated under new rollout ids until there are `size`."""
    with open_store(path) as store:
        store.load_demo(steps=50, prompts=32, samples=4)
        cur = store.cursor()
        base = cur.execute("SELECT count(*) FROM rollouts").fetchone()[0]  # type: ignore[index]
        copies = max(0, -(-size // base) - 1)
        t0 = time.perf_counter()
        cur.execute("BEGIN TRANSACTION")
        cur.execute(
            "INSERT INTO rollouts SELECT r.* REPLACE (r.rollout_id || '~' || k AS rollout_id)"
            " FROM rollouts r, range(1, ?) t(k)",
            [copies + 1],
        )
        cur.execute(
            "INSERT INTO events SELECT e.* REPLACE (e.rollout_id || '~' || k AS rollout_id)"
            " FROM events e, range(1, ?) t(k)",
            [copies + 1],
        )
        cur.execute("COMMIT")
        n = cur.execute("SELECT count(*) FROM rollouts").fetchone()[0]  # type: ignore[index]
        print(f"  {n:,} rollouts (the demo x {copies + 1}) in {time.perf_counter() - t0:.1f} s")


SEARCHES = {
    "rare": "terminated",
    "medium": "timezone",
    "common": "tests",
    "two words": "sandbox terminated",
}


def part_search(workdir: Path, size: int, alternatives: bool = True) -> list[dict[str, Any]]:
    db = workdir / f"search-{size}.duckdb"
    if not db.exists():
        partial = db.with_suffix(".building")
        partial.unlink(missing_ok=True)
        build_search_store(partial, size)
        partial.rename(db)
    rows = []
    with open_store(db) as store:
        cur = store.cursor()
        cur.execute("DELETE FROM events WHERE rollout_id LIKE '%+new'")
        cur.execute("DELETE FROM rollouts WHERE rollout_id LIKE '%+new'")
        n = R.count_rollouts(store, R.RolloutQuery())
        # From scratch: every rollout is new to the index.
        for table in ("search_index_state", "search_terms", "search_docs"):
            cur.execute(f"DELETE FROM {table}")
        build_ms, _ = timed(lambda: R.ensure_search_index(store))
        docs_mb = cur.execute("SELECT sum(length(doc)) / 1e6 FROM search_docs").fetchone()[0]  # type: ignore[index]
        rows.append(
            row(f"search index, full build ({n:,} rollouts, {docs_mb:,.0f} MB text)",
                build_ms / 1000, "s")
        )  # fmt: skip
        # After an import of 2,000 rollouts: only those are indexed.
        cur.execute("DELETE FROM events WHERE rollout_id LIKE '%+new'")
        cur.execute("DELETE FROM rollouts WHERE rollout_id LIKE '%+new'")
        R.ensure_search_index(store)
        cur.execute(
            "INSERT INTO rollouts SELECT r.* REPLACE (r.rollout_id || '+new' AS rollout_id)"
            " FROM rollouts r WHERE r.rollout_id NOT LIKE '%~%' LIMIT 2000"
        )
        cur.execute(
            "INSERT INTO events SELECT e.* REPLACE (e.rollout_id || '+new' AS rollout_id)"
            " FROM events e WHERE e.rollout_id IN (SELECT replace(rollout_id, '+new', '')"
            " FROM rollouts WHERE rollout_id LIKE '%+new')"
        )
        update_ms, _ = timed(lambda: R.prepare_search_index(store))
        rows.append(row("search index, update after 2,000 new rollouts", update_ms / 1000, "s"))
        for label, words in SEARCHES.items():
            q = R.RolloutQuery(search=words, sort="reward", descending=True)
            ms, hits = timed(lambda q=q: R.count_rollouts(store, q), 3)
            page_ms, _ = timed(lambda q=q: R.list_rollouts(store, q, limit=50), 3)
            ok = page_ms < TARGET_MS
            rows.append(row(f"index: count, {label} ({hits:,} hits)", ms, "ms"))
            rows.append(
                row(
                    f"index: first page sorted by reward, {label}",
                    page_ms,
                    "ms",
                    f"< {TARGET_MS}",
                    ok,
                )
            )
            if not alternatives:
                continue
            ilike_ms, _ = timed(
                lambda words=words: cur.execute(
                    "SELECT count(*) FROM search_docs WHERE doc ILIKE ?", [f"%{words}%"]
                ).fetchone(),
                1,
            )
            rows.append(row(f"alternative, ILIKE on a text column: {label}", ilike_ms, "ms"))
    if not alternatives:
        return rows
    with open_store(db, read_only=True) as ro:
        for label, words in list(SEARCHES.items())[:1]:
            ms, _ = timed(lambda words=words: R.count_rollouts(ro, R.RolloutQuery(search=words)), 1)
            rows.append(row(f"scan (read-only store or index updating), {label}", ms, "ms"))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--search-size", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--rebuild", action="store_true", help="regenerate the stores first")
    parser.add_argument(
        "--search-only", action="store_true", help="part 2 only, without the slow alternatives"
    )
    parser.add_argument("--name", default=NAME, help="results file name (bench/results/NAME.json)")
    args = parser.parse_args()
    workdir = BENCH_DIR / ".data" / "replay"
    if args.rebuild:
        shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True, exist_ok=True)
    previous = load_previous(args.name)
    rows: list[dict[str, Any]] = []
    if not args.search_only:
        print("Part 1: replay and compare of 1,000-item rollouts with MB outputs")
        rows = part_replay(workdir, args.repeat)
    params: dict[str, Any] = {"search_size": args.search_size, "repeat": args.repeat}
    if args.search_size:
        print(f"Part 2: full-text search on {args.search_size:,} rollouts")
        rows += part_search(workdir, args.search_size, alternatives=not args.search_only)
    elif previous and previous.get("params", {}).get("search_size"):
        # Part 2 takes minutes: keep its last figures, and say from which run they are.
        first = {r["metric"] for r in rows}
        part2 = ("search index", "index:", "alternative", "scan")
        rows += [
            r
            for r in previous["rows"]
            if r["metric"] not in first and str(r["metric"]).startswith(part2)
        ]
        params["search_size"] = previous["params"]["search_size"]
        params["search_from_commit"] = previous.get("search_from_commit") or previous.get("commit")
    data = save_results(
        args.name, rows, params, {"search_from_commit": params.pop("search_from_commit", None)}
    )
    print_table(data, previous)


if __name__ == "__main__":
    main()
