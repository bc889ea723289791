"""The Runs screen's "field mapping" panel: import a JSON/JSONL file no importer recognises by saying
which field is the rollout id, the messages, the run, the step, the reward and the answer; preview the
first rollouts; save the mapping for next time (trace_store.ingest.mapping)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import streamlit as st

from rollscope.ui import render, store_access
from trace_store import Store
from trace_store.errors import TraceStoreError
from trace_store.ingest.mapping import (
    FieldMapping,
    MappingError,
    first_record,
    ingest_with_mapping,
    list_mappings,
    load_mapping,
    preview,
    preview_table,
    save_mapping,
    suggest,
)

RESULT = "runs.mapping.result"
SPOOLED = "runs.mapping.spooled"  # file_id -> path of the uploaded bytes on disk
PREFILLED = "runs.mapping.prefilled"  # (file_id, starting point) the inputs were filled from
GENERATION = "runs.mapping.generation"
SUGGESTED = "Suggested from the first record"
PREVIEW_ROWS = 5

LABELS = {
    "rollout_id": "Rollout id *",
    "messages": "Message list (chat or Responses format) *",
    "run_id": "Run id",
    "step": "Step",
    "reward": "Reward",
    "final_answer": "Final answer",
    "prompt_id": "Prompt id",
}
HELP = 'A JSON path into each record, e.g. $.meta.id, $.turns, $.scores[0], $["odd key"].'


def _spool(upload: Any) -> Path:
    """The upload's bytes in a temporary file named like the upload (kept for this session)."""
    spooled: dict[str, str] = st.session_state.setdefault(SPOOLED, {})
    known = spooled.get(upload.file_id)
    if known and Path(known).exists():
        return Path(known)
    folder = Path(tempfile.mkdtemp(prefix="rollscope-mapping-upload-"))
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in Path(upload.name).name)
    path = folder / (safe.lstrip(".") or "upload.jsonl")
    path.write_bytes(upload.getvalue())
    spooled[upload.file_id] = str(path)
    return path


def _prefill(store: Store, upload: Any, path: Path, start: str) -> None:
    """Fill the path inputs from a saved mapping or the suggestions, when the file or the choice
    changes (never over what the user is typing otherwise)."""
    marker = (upload.file_id, start)
    if st.session_state.get(PREFILLED) == marker:
        return
    spec: dict[str, Any]
    if start == SUGGESTED:
        spec = suggest(first_record(path))
    else:
        spec = load_mapping(store, start).to_spec()
    for name in LABELS:
        st.session_state[f"runs.mapping.{name}"] = spec.get(name) or ""
    st.session_state["runs.mapping.run_name"] = spec.get("run_name") or ""
    st.session_state["runs.mapping.split"] = spec.get("split") or "train"
    st.session_state["runs.mapping.allow_missing"] = bool(spec.get("allow_missing"))
    if start != SUGGESTED:
        st.session_state["runs.mapping.name"] = start
    st.session_state[PREFILLED] = marker


def show(store: Store, upload: Any | None = None) -> None:
    """An expander with its own uploader (or `upload`, an unrecognised file from the import flow)."""
    done = st.session_state.pop(RESULT, None)
    with st.expander(
        "Import other JSON/JSONL with a field mapping",
        expanded=done is not None or upload is not None,
        icon=":material/schema:",
    ):
        if done is not None:
            st.success(render.escape_markdown(done), icon=":material/check_circle:")
        st.caption(
            "For a file no importer recognises: say which field of each record is the rollout id and "
            "the message list, and optionally the run, step, reward and answer. The first rollouts are "
            "previewed before anything is imported; save the mapping to reuse it."
        )
        if upload is None:
            upload = st.file_uploader(
                "JSON or JSONL file",
                type=["jsonl", "json", "ndjson", "gz", "zst"],
                key=f"runs.mapping.upload.{st.session_state.get(GENERATION, 0)}",
            )
        if upload is None:
            return
        try:
            _form(store, upload)
        except TraceStoreError as exc:
            render.show_error(exc)


def _form(store: Store, upload: Any) -> None:
    path = _spool(upload)
    saved = list_mappings(store)["name"].tolist()
    start = st.selectbox("Start from", [SUGGESTED, *saved], key="runs.mapping.start")
    _prefill(store, upload, path, start)
    left, right = st.columns(2)
    for index, (name, label) in enumerate(LABELS.items()):
        (left if index % 2 == 0 else right).text_input(label, key=f"runs.mapping.{name}", help=HELP)
    a, b, c = st.columns(3)
    a.text_input("Run name when no run id", key="runs.mapping.run_name")
    b.selectbox("Split", ["train", "eval"], key="runs.mapping.split")
    c.checkbox(
        "Optional fields may be missing",
        key="runs.mapping.allow_missing",
        help="Off: a record without a mapped optional field is an error naming the line.",
    )
    spec = {name: st.session_state.get(f"runs.mapping.{name}") or None for name in LABELS}
    spec["run_name"] = st.session_state.get("runs.mapping.run_name") or None
    spec["split"] = st.session_state.get("runs.mapping.split") or "train"
    spec["allow_missing"] = bool(st.session_state.get("runs.mapping.allow_missing"))
    try:
        mapping = FieldMapping.from_spec(spec)
    except MappingError as exc:
        render.show_error(exc)
        return
    st.markdown(f"**Preview** (first {PREVIEW_ROWS} rollouts)")
    try:
        records = preview(path, mapping, PREVIEW_ROWS)
    except TraceStoreError as exc:
        render.show_error(exc, context="Preview")
        return
    st.dataframe(preview_table(records), hide_index=True, width="stretch")
    name_col, save_col, import_col = st.columns([2, 1, 1], vertical_alignment="bottom")
    mapping_name = name_col.text_input("Mapping name", key="runs.mapping.name").strip()
    if save_col.button("Save mapping", key="runs.mapping.save", icon=":material/save:"):
        save_mapping(store, mapping_name, mapping)
        st.success(render.escape_markdown(f"Mapping {mapping_name} saved."))
    if import_col.button("Import with this mapping", type="primary", key="runs.mapping.import"):
        with st.spinner("Importing…"):
            result = ingest_with_mapping(
                store,
                path,
                mapping,
                display_name=upload.name,
                mapping_name=mapping_name or None,
            )
        store_access.after_import()
        st.session_state[RESULT] = result.summary()
        st.session_state[GENERATION] = st.session_state.get(GENERATION, 0) + 1
        st.rerun()
