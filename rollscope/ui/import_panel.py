"""The Runs screen's import controls: the demo offer, the uploader, per-file results."""

from __future__ import annotations

from typing import Any

import streamlit as st

from rollscope.ui import render, store_access, uploads
from trace_store import Store
from trace_store.post_import import after_imports

RESULTS = "runs.import_results"  # outcomes of the last import, shown after the rerun
UPLOADER = "runs.uploader_generation"  # bumped after an import to empty the uploader
NOTES = "runs.import_notes"  # what the on-import audit rules found


def _bar(text: str) -> uploads.Progress:
    bar = st.progress(0.0, text=text)
    return uploads.throttled(lambda f: bar.progress(f, text=f"{text} {f:.0%}"))


def _finish(store: Store, outcomes: list[uploads.UploadOutcome]) -> None:
    run_ids = [r for o in outcomes if o.result is not None for r in o.result.run_ids]
    if run_ids:
        with st.spinner("Updating the dashboards…"):
            try:
                notes = after_imports(store, run_ids)
            except Exception as exc:  # the import landed; say what did not follow it
                render.show_error(exc, context="Updating the dashboards after the import")
                notes = []
        st.session_state[NOTES] = notes
    store_access.after_import()
    st.session_state[RESULTS] = outcomes
    st.session_state[UPLOADER] = st.session_state.get(UPLOADER, 0) + 1
    st.rerun()


def demo_offer(store: Store) -> None:
    """Explain the empty store and offer the demo run."""
    st.info(
        "The store is empty. Import trace files below, or load the demo run: a baseline eval "
        "run and a 200-step training run of a tool-using agent, with a few planted reward hacks."
    )
    if st.button("Load the demo run", type="primary", icon=":material/download:"):
        update = _bar("Generating and importing the demo run…")
        try:
            result = store.load_demo(progress=uploads.bytes_progress(update))
        except Exception as exc:
            render.show_error(exc, context="Loading the demo run")
        else:
            _finish(store, [uploads.UploadOutcome(file="demo run", result=result)])


def last_results() -> None:
    """The per-file outcome of the last import: counts, "already imported", or the error."""
    for outcome in st.session_state.get(RESULTS, []):
        if outcome.error is None:
            st.success(render.escape_markdown(outcome.summary()), icon=":material/check_circle:")
        else:
            # The store's messages name the file already; others get it as context.
            named = outcome.file in str(outcome.error)
            render.show_error(outcome.error, context=None if named else outcome.file)
    for note in st.session_state.get(NOTES, []):
        st.info(render.escape_markdown(note), icon=":material/policy:")


def uploader(store: Store) -> None:
    """Several files at once: the detected format of each (changeable), then one import."""
    files: list[Any] = (
        st.file_uploader(
            "Trace files",
            type=uploads.UPLOAD_TYPES,
            accept_multiple_files=True,
            key=f"runs.uploader.{st.session_state.get(UPLOADER, 0)}",
            help="Rollscope canonical JSONL (.jsonl, .jsonl.gz, .jsonl.zst) or another supported "
            "format; several files at once. Each file is imported in one transaction: a file "
            "with a bad line changes nothing.",
        )
        or []
    )
    if not files:
        return
    labels = uploads.format_labels()
    options: list[str | None] = [None, *labels]
    chosen: list[str | None] = []
    for number, upload in enumerate(files, start=1):
        detected = uploads.detect_upload_format(upload.name, upload)
        name_col, size_col, format_col = st.columns([3, 1, 3], vertical_alignment="center")
        name_col.text(upload.name)
        size_col.text(_size(upload.size))
        chosen.append(
            format_col.selectbox(
                f"Format of file {number}",  # a label renders Markdown: no file name in it
                options,
                index=options.index(detected),
                format_func=lambda n: labels[n] if n else "Not recognised: choose a format",
                key=f"runs.format.{upload.file_id}",
                label_visibility="collapsed",
            )
        )
    count = len(files)
    if st.button(f"Import {count} file{'s' if count > 1 else ''}", type="primary"):
        outcomes = [
            uploads.import_upload(
                store,
                upload.name,
                upload,
                format=fmt,
                progress=_bar(f"{render.escape_markdown(upload.name)}:"),
            )
            for upload, fmt in zip(files, chosen, strict=True)
        ]
        _finish(store, outcomes)


def _size(n: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:,.1f} {unit}"
    return f"{n} B"
