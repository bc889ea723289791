"""What follows a batch of imports, so that the first view after it does not pay for it."""

from __future__ import annotations

from collections.abc import Sequence

from . import audit, dashboards
from .store import Store


def after_imports(store: Store, run_ids: Sequence[str]) -> list[str]:
    """Bring the dashboards' summaries up to date (only the steps the imports marked) and run
    the audit rules marked "run after every import" over `run_ids`.

    Returns one line per rule: what it flagged, or why it could not run.
    """
    dashboards.refresh_summaries(store)
    lines = []
    for result in audit.run_import_rules(store, sorted(set(run_ids))):
        if result.error:
            lines.append(f"audit rule {result.title!r} could not run: {result.error}")
        else:
            lines.append(f"audit rule {result.title!r} flagged {result.flagged} rollouts")
    return lines
