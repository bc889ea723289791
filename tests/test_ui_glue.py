"""The UI glue under AppTest: URL-bound widgets, copy links, error and text rendering."""

from __future__ import annotations

import re

from streamlit.testing.v1 import AppTest

from rollscope.ui.render import escape_markdown
from rollscope.ui.view_state import encode

TIMEOUT = 60  # AppTest needs a bound; not a timing test


def filters_app() -> None:
    import streamlit as st

    from rollscope.ui import view_state

    split = view_state.selectbox("Split", "split", ["train", "eval"], "train")
    runs = view_state.multiselect("Runs", "runs", ["base", "rft-1", "rft-2"], ["rft-1"])
    steps = view_state.int_range_slider("Steps", "steps", min_value=0, max_value=200)
    budget = view_state.number_input("Budget", "budget", default=10, min_value=1, max_value=50)
    ema = view_state.toggle("Smooth", "ema", False)
    st.text(repr((split, runs, steps, budget, ema)))
    view_state.copy_link()


def run_filters(**params: str | list[str]) -> AppTest:
    at = AppTest.from_function(filters_app, default_timeout=TIMEOUT)
    at.query_params.update(params)
    return at.run()


def state(at: AppTest) -> tuple:
    assert not at.exception, [e.value for e in at.exception]
    return eval(at.text[0].value)


def plain(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text)


def test_a_link_with_parameters_restores_the_view():
    at = run_filters(split="eval", runs=["base", "rft-2"], steps="20-150", budget="15", ema="1")

    assert state(at) == ("eval", ["base", "rft-2"], (20, 150), 15, True)
    assert not at.warning


def test_without_parameters_the_defaults_are_shown_and_written_to_the_url():
    at = run_filters()

    assert state(at) == ("train", ["rft-1"], (0, 200), 10, False)
    assert at.query_params == {
        "split": "train",
        "runs": "rft-1",
        "steps": "0-200",
        "budget": "10",
        "ema": "0",
    }


def test_each_bad_parameter_warns_names_the_value_and_falls_back():
    at = run_filters(split="validation", runs=["ghost"], steps="5-900", budget="many", ema="maybe")

    assert state(at) == ("train", ["rft-1"], (0, 200), 10, False)
    warnings = [plain(w.value) for w in at.warning]
    assert len(warnings) == 5, warnings
    split, runs, steps, budget, ema = warnings
    assert "split" in split and "validation" in split and "train, eval" in split
    assert "ghost" in runs and "not one of base, rft-1, rft-2" in runs
    assert "5-900" in steps and "outside the available range 0-200" in steps
    assert "many" in budget and "not a whole number" in budget
    assert "maybe" in ema
    # The URL now holds the values on screen, so a copied link works.
    assert at.query_params["split"] == "train" and at.query_params["steps"] == "0-200"


def test_garbage_and_out_of_range_numbers_warn():
    for value, reason in [
        ("0", "below the smallest allowed value, 1"),
        ("51", "above the largest allowed value, 50"),
        ("nan", "not a whole number"),
        ("2.5", "not a whole number"),
    ]:
        at = run_filters(budget=value)
        assert state(at)[3] == 10
        [warning] = [plain(w.value) for w in at.warning]
        assert reason in warning, (value, warning)


def test_a_reversed_range_warns():
    at = run_filters(steps="150-20")
    assert state(at)[2] == (0, 200)
    assert "starts after it ends" in plain(at.warning[0].value)


def test_changing_a_widget_writes_the_url_and_keeps_the_choice():
    at = run_filters(split="eval")

    at.selectbox[0].set_value("train").run()
    at.multiselect[0].set_value(["base"]).run()

    assert state(at)[:2] == ("train", ["base"])
    assert at.query_params["split"] == "train" and at.query_params["runs"] == "base"
    at.run()  # a rerun with the URL it wrote itself keeps the widgets as they are
    assert state(at)[:2] == ("train", ["base"])


def test_the_copy_link_holds_every_parameter():
    at = run_filters(split="eval", runs=["base", "rft-2"])

    [link] = [c.value for c in at.code]
    assert link.startswith("/?")
    for part in ("split=eval", "runs=base", "runs=rft-2", "steps=0-200", "budget=10", "ema=0"):
        assert part in link, link


def test_encode_is_the_inverse_of_the_readers_format():
    assert encode((3, 7)) == ["3-7"]
    assert encode(["a", "b"]) == ["a", "b"]
    assert encode(True) == ["1"]
    assert encode(None) == []


def errors_app() -> None:
    from rollscope.ui import render
    from trace_store import IngestError

    render.show_error(
        IngestError('`reward` must be a number, got "**high**"', file="x<b>.jsonl", line=3)
    )
    try:
        {}["missing"]
    except KeyError as exc:
        render.show_error(exc, context="Loading")
    render.show_text("<script>alert(1)</script> **not bold**")


def test_typed_errors_show_title_and_message_unexpected_ones_a_short_note_and_details():
    at = AppTest.from_function(errors_app, default_timeout=TIMEOUT).run()

    assert not at.exception
    typed, unexpected = (e.value for e in at.error)
    # The title is bold; the message (which quotes the user's data) is escaped to plain text.
    assert typed.startswith("**Import failed**: ")
    assert plain(typed.removeprefix("**Import failed**: ")) == (
        'x<b>.jsonl line 3: `reward` must be a number, got "**high**"'
    )
    assert "Unexpected error" in unexpected and "KeyError" in unexpected
    assert "Traceback" not in typed + unexpected
    [details] = at.expander
    assert details.text[0].value == "KeyError: 'missing'"
    assert at.text[-1].value == "<script>alert(1)</script> **not bold**"


def test_escape_markdown_makes_every_special_character_literal():
    assert escape_markdown("**a** _b_ [c](d) `e` <f> $g$ :red[h]") == (
        r"\*\*a\*\* \_b\_ \[c\]\(d\) \`e\` \<f\> \$g\$ \:red\[h\]"
    )
    assert escape_markdown("# title\n- item") == r"\# title \- item"
