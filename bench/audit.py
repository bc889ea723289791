"""The audit at demo scale: detectors, signals, diagnostics and the judge's estimate, and how well
the detectors find the demo's planted hacks.

    python bench/audit.py             # build bench/.data/audit-demo.duckdb once (the full demo), time
    python bench/audit.py --rebuild   # regenerate the store first

The store is the default demo (a 128-rollout baseline and a 200-step x 32-prompt x 4-sample
training run, ~26k rollouts, ~440k events) imported through the normal path. Each step is timed
cold (first call) and warm (median of --repeat calls). The reference, timed in the same run, is a
full scan of the event text (``SELECT sum(length(output)) FROM events``): the detectors read the
events more than once, so their time is reported as a multiple of that scan. Precision and recall
are against ``metadata.planted_hack``. Results go to bench/results/audit.json.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from _common import BENCH_DIR, load_previous, median, print_table, row, save_results

from trace_store import Store, audit, judge, open_store

NAME = "audit"
RUN = "demo-train"


def timed(fn: Callable[[], Any], repeat: int) -> tuple[float, float]:
    """(cold ms, warm median ms)."""
    t0 = time.perf_counter()
    fn()
    cold = (time.perf_counter() - t0) * 1000
    warm = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        warm.append((time.perf_counter() - t0) * 1000)
    return cold, median(warm)


def quality(store: Store) -> dict[str, float]:
    df = store.query_df(
        """
        SELECT count(*) FILTER (WHERE hack) AS hacks,
               count(*) FILTER (WHERE hack AND flagged) AS found,
               count(*) FILTER (WHERE flagged) AS flagged,
               count(*) FILTER (WHERE NOT hack) AS clean,
               count(*) FILTER (WHERE NOT hack AND flagged) AS clean_flagged
        FROM (SELECT metadata->>'planted_hack' IS NOT NULL AS hack,
                     EXISTS (SELECT 1 FROM flags f WHERE f.run_id = r.run_id
                             AND f.rollout_id = r.rollout_id) AS flagged
              FROM rollouts r)
        """
    ).iloc[0]
    return {k: float(v) for k, v in df.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rebuild", action="store_true")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    path = BENCH_DIR / ".data" / "audit-demo.duckdb"
    if args.rebuild:
        path.unlink(missing_ok=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    with open_store(path) as store:
        if store.is_empty():
            t0 = time.perf_counter()
            store.load_demo()
            print(f"built {path} in {time.perf_counter() - t0:.1f} s", flush=True)
        n = int(store.query_df("SELECT count(*) AS n FROM rollouts")["n"][0])

        _, ref = timed(
            lambda: store.query_df("SELECT sum(length(output)) AS chars FROM events"), args.repeat
        )
        rows.append(row("reference: scan all event output text", ref, "ms"))
        cold, warm = timed(lambda: audit.run_detectors(store), args.repeat)
        rows.append(row(f"run_detectors, {n:,} rollouts (cold)", cold / 1000, "s"))
        rows.append(row("run_detectors (warm)", warm / 1000, "s"))
        rows.append(row("run_detectors / reference scan", warm / max(ref, 1e-9), "x"))
        for name, fn in (
            ("run_signals", lambda: audit.run_signals(store, RUN)),
            ("signal_by_step", lambda: audit.signal_by_step(store, RUN)),
            ("flag_rate_by_step", lambda: audit.flag_rate_by_step(store, RUN)),
            ("flagged_rollouts", lambda: audit.flagged_rollouts(store, RUN)),
            (
                "baseline_comparison",
                lambda: audit.baseline_comparison(store, "demo-baseline", RUN),
            ),
        ):
            cold, warm = timed(fn, args.repeat)
            rows.append(row(f"{name} (warm; cold {cold:,.0f} ms)", warm, "ms"))
        targets = judge.judge_targets(store, RUN, "sample", 200)
        settings = judge.JudgeSettings(model="bench")
        cold, warm = timed(lambda: judge.estimate_cost(store, targets, settings), args.repeat)
        rows.append(row("judge cost estimate, 200 rollouts (warm)", warm, "ms"))

        q = quality(store)
        precision = q["found"] / max(q["flagged"], 1)
        recall = q["found"] / max(q["hacks"], 1)
        rows.append(
            row(f"recall on {q['hacks']:.0f} planted hacks", recall, "", "= 1", recall == 1)
        )
        rows.append(row(f"precision ({q['flagged']:.0f} rollouts flagged)", precision, ""))
        rows.append(
            row(
                "clean rollouts flagged",
                q["clean_flagged"] / max(q["clean"], 1),
                "share",
                "< 0.02",
                q["clean_flagged"] / max(q["clean"], 1) < 0.02,
            )
        )
    previous = load_previous(NAME)
    # other processes on a small machine inflate every figure alike; the load says how much
    params = {"rollouts": n, "repeat": args.repeat, "load_average": os.getloadavg()[0]}
    data = save_results(NAME, rows, params)
    print_table(data, previous)


if __name__ == "__main__":
    main()
