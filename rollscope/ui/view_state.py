"""View state <-> URL query parameters, so a copied address opens the same view.

Every control that shapes a view is bound to a query parameter: its value is read from the
URL (validated; a bad or stale value gives a visible warning and falls back to a default),
the widget starts from it, and the current value is written back, so the address bar always
describes the view. `copy_link` shows the full URL of the current view.

A parameter name means the same thing on every screen (``runs``, ``run``, ``steps``,
``split``, ...): when a screen is opened without it, the value last chosen on another screen
is kept, so filters carry over between screens.

Readers (`read_choice`, `read_int`, ...) only parse and validate; binders (`selectbox`,
`multiselect`, `int_slider`, `int_range_slider`, `number_input`, `toggle`) also draw the widget.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar
from urllib.parse import urlencode

import streamlit as st

from rollscope.ui import navigation
from rollscope.ui.render import escape_markdown

T = TypeVar("T")
N = TypeVar("N", int, float)

_SHARED = "view."  # session key prefix: the value last chosen for a parameter, on any screen
_RANGE = re.compile(r"^\s*(-?\d+)\s*(?:-|\.\.|:)\s*(-?\d+)\s*$")


class BadParam(ValueError):
    """A query parameter's value is not acceptable; the message says why."""


# --- reading -----------------------------------------------------------------------------


def raw_values(key: str) -> list[str]:
    """All values of `key` in the URL (``?runs=a&runs=b`` -> ``["a", "b"]``)."""
    return list(st.query_params.get_all(key))


def warn_bad_param(key: str, raw: Sequence[str], reason: str, fallback: str) -> None:
    shown = ", ".join(raw)
    if len(shown) > 80:
        shown = shown[:77] + "..."
    st.warning(
        f"The link's `{escape_markdown(key)}` value “{escape_markdown(shown)}” was ignored: "
        f"{escape_markdown(reason)}. Showing {escape_markdown(fallback)} instead.",
        icon=":material/warning:",
    )


def read_param(
    key: str,
    parse: Callable[[list[str]], T],
    default: T,
    *,
    describe: Callable[[T], str] | None = None,
) -> T:
    """`parse` the URL's values of `key`; absent -> `default`; `BadParam` -> warning + `default`."""
    raw = raw_values(key)
    if not raw:
        return default
    try:
        return parse(raw)
    except BadParam as exc:
        fallback = describe(default) if describe else f"“{_describe(default)}”"
        warn_bad_param(key, raw, str(exc), fallback)
        return default


def _describe(value: object) -> str:
    if isinstance(value, list | tuple) and not value:
        return "none"
    if isinstance(value, tuple) and len(value) == 2:
        return f"{value[0]}-{value[1]}"
    if isinstance(value, list):
        return ", ".join(map(str, value))
    return str(value)


def _to_str(value: object) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


def _parse_choice(options: Sequence[T]) -> Callable[[list[str]], T]:
    by_text = {_to_str(o): o for o in options}

    def parse(raw: list[str]) -> T:
        if raw[-1] not in by_text:
            raise BadParam(_not_one_of(raw[-1], list(by_text)))
        return by_text[raw[-1]]

    return parse


def _not_one_of(value: str, allowed: list[str]) -> str:
    if not allowed:
        return f"“{value}” is unknown (there is nothing to choose from)"
    listed = ", ".join(allowed[:8]) + (", ..." if len(allowed) > 8 else "")
    return f"“{value}” is not one of {listed}"


def _parse_choices(options: Sequence[T]) -> Callable[[list[str]], list[T]]:
    by_text = {_to_str(o): o for o in options}

    def parse(raw: list[str]) -> list[T]:
        values = [v for v in raw if v != ""]
        unknown = [v for v in values if v not in by_text]
        if unknown:
            raise BadParam(_not_one_of(unknown[0], list(by_text)))
        return list(dict.fromkeys(by_text[v] for v in values))

    return parse


def _parse_number(
    kind: type[N], min_value: N | None, max_value: N | None
) -> Callable[[list[str]], N]:
    def parse(raw: list[str]) -> N:
        text = raw[-1].strip()
        try:
            value = kind(text)
        except ValueError:
            noun = "a whole number" if kind is int else "a number"
            raise BadParam(f"“{text}” is not {noun}") from None
        if value != value or value in (float("inf"), float("-inf")):
            raise BadParam(f"“{text}” is not a finite number")
        _check_range(value, min_value, max_value)
        return value

    return parse


def _check_range(value: float, min_value: float | None, max_value: float | None) -> None:
    if min_value is not None and value < min_value:
        raise BadParam(f"{value} is below the smallest allowed value, {min_value}")
    if max_value is not None and value > max_value:
        raise BadParam(f"{value} is above the largest allowed value, {max_value}")


def _parse_int_range(min_value: int, max_value: int) -> Callable[[list[str]], tuple[int, int]]:
    def parse(raw: list[str]) -> tuple[int, int]:
        match = _RANGE.match(raw[-1])
        if not match:
            raise BadParam(f"“{raw[-1]}” is not a range like {min_value}-{max_value}")
        lo, hi = int(match[1]), int(match[2])
        if lo > hi:
            raise BadParam(f"the range {lo}-{hi} starts after it ends")
        if lo < min_value or hi > max_value:
            raise BadParam(f"{lo}-{hi} is outside the available range {min_value}-{max_value}")
        return lo, hi

    return parse


def _parse_bool(raw: list[str]) -> bool:
    text = raw[-1].strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise BadParam(f"“{raw[-1]}” is not 1 or 0")


def read_choice(key: str, options: Sequence[T], default: T) -> T:
    """One of `options` (compared by their text in the URL)."""
    return read_param(key, _parse_choice(options), default)


def read_choices(key: str, options: Sequence[T], default: Sequence[T]) -> list[T]:
    """Several of `options`, from repeated parameters (``?runs=a&runs=b``)."""
    return read_param(key, _parse_choices(options), list(default))


def read_int(
    key: str, default: int, *, min_value: int | None = None, max_value: int | None = None
) -> int:
    return read_param(key, _parse_number(int, min_value, max_value), default)


def read_float(
    key: str, default: float, *, min_value: float | None = None, max_value: float | None = None
) -> float:
    return read_param(key, _parse_number(float, min_value, max_value), default)


def read_int_range(
    key: str, default: tuple[int, int], *, min_value: int, max_value: int
) -> tuple[int, int]:
    """An inclusive range written ``lo-hi`` (``?steps=10-200``) inside [min_value, max_value]."""
    return read_param(key, _parse_int_range(min_value, max_value), default)


def read_bool(key: str, default: bool) -> bool:
    return read_param(key, _parse_bool, default)


# --- writing -----------------------------------------------------------------------------


def encode(value: object) -> list[str]:
    """The URL values that stand for `value` (the inverse of the readers)."""
    if value is None:
        return []
    if isinstance(value, tuple) and len(value) == 2:
        return [f"{_to_str(value[0])}-{_to_str(value[1])}"]
    if isinstance(value, list | tuple):
        return [_to_str(v) for v in value]
    return [_to_str(value)]


def write_param(key: str, value: object) -> None:
    """Put `value` in the URL (``None`` or an empty list removes the parameter)."""
    values = encode(value)
    if values == raw_values(key):
        return
    if values:
        st.query_params[key] = values if len(values) > 1 else values[0]
    elif key in st.query_params:
        del st.query_params[key]


# --- widgets bound to parameters -----------------------------------------------------------


def _bind(
    key: str,
    from_url: Callable[[], T],
    is_valid: Callable[[Any], bool],
    default: T,
    draw: Callable[[str], Any],
) -> T:
    """Draw a widget whose value lives in the URL parameter `key`.

    The URL wins when it changed since this screen last wrote it (a pasted link, a
    ``st.page_link`` with parameters); otherwise the widget keeps the user's choice. A screen
    opened without the parameter starts from the value last chosen for it on any screen.
    """
    widget_key = f"w.{navigation.current_url_path()}.{key}"
    marker = f"{widget_key}#url"
    raw = raw_values(key)
    state = st.session_state
    if widget_key not in state or state.get(marker) != raw or not is_valid(state[widget_key]):
        if raw:
            start = from_url()
        elif is_valid(state.get(_SHARED + key)):
            start = state[_SHARED + key]
        else:
            start = default
        state[widget_key] = start
    draw(widget_key)
    value: T = state[widget_key]
    state[_SHARED + key] = value
    write_param(key, value)
    state[marker] = raw_values(key)
    return value


def selectbox(
    label: str,
    key: str,
    options: Sequence[T],
    default: T,
    *,
    format_func: Callable[[T], str] = str,
    **kwargs: Any,
) -> T:
    """``st.selectbox`` bound to ``?key=value``; `default` must be one of `options`."""
    opts = list(options)
    return _bind(
        key,
        lambda: read_choice(key, opts, default),
        lambda v: v in opts,
        default,
        lambda wk: st.selectbox(label, opts, key=wk, format_func=format_func, **kwargs),
    )


def multiselect(
    label: str,
    key: str,
    options: Sequence[T],
    default: Sequence[T],
    *,
    format_func: Callable[[T], str] = str,
    **kwargs: Any,
) -> list[T]:
    """``st.multiselect`` bound to repeated parameters ``?key=a&key=b``."""
    opts = list(options)
    return _bind(
        key,
        lambda: read_choices(key, opts, default),
        lambda v: isinstance(v, list) and all(x in opts for x in v),
        list(default),
        lambda wk: st.multiselect(label, opts, key=wk, format_func=format_func, **kwargs),
    )


def int_slider(
    label: str, key: str, *, min_value: int, max_value: int, default: int, **kwargs: Any
) -> int:
    return _bind(
        key,
        lambda: read_int(key, default, min_value=min_value, max_value=max_value),
        lambda v: isinstance(v, int) and min_value <= v <= max_value,
        default,
        lambda wk: st.slider(label, min_value, max_value, key=wk, **kwargs),
    )


def int_range_slider(
    label: str,
    key: str,
    *,
    min_value: int,
    max_value: int,
    default: tuple[int, int] | None = None,
    **kwargs: Any,
) -> tuple[int, int]:
    """A two-handled slider bound to ``?key=lo-hi`` (the whole range by default)."""
    full = default or (min_value, max_value)
    if min_value == max_value:
        # st.slider refuses an empty range; there is nothing to choose.
        write_param(key, (min_value, max_value))
        return min_value, max_value

    def valid(v: Any) -> bool:
        return isinstance(v, tuple) and len(v) == 2 and min_value <= v[0] <= v[1] <= max_value

    value = _bind(
        key,
        lambda: read_int_range(key, full, min_value=min_value, max_value=max_value),
        valid,
        full,
        lambda wk: st.slider(label, min_value, max_value, key=wk, **kwargs),
    )
    return int(value[0]), int(value[1])


def number_input(
    label: str,
    key: str,
    *,
    default: N,
    min_value: N | None = None,
    max_value: N | None = None,
    **kwargs: Any,
) -> N:
    kind = type(default)

    def valid(v: Any) -> bool:
        if not isinstance(v, kind):
            return False
        return (min_value is None or v >= min_value) and (max_value is None or v <= max_value)

    return _bind(
        key,
        lambda: read_param(key, _parse_number(kind, min_value, max_value), default),
        valid,
        default,
        lambda wk: st.number_input(
            label, min_value=min_value, max_value=max_value, key=wk, **kwargs
        ),
    )


def toggle(label: str, key: str, default: bool, **kwargs: Any) -> bool:
    return _bind(
        key,
        lambda: read_bool(key, default),
        lambda v: isinstance(v, bool),
        default,
        lambda wk: st.toggle(label, key=wk, **kwargs),
    )


def table_selection(key: str, data: Any, ids: Sequence[str], **kwargs: Any) -> list[str]:
    """``st.dataframe`` whose selected rows (row ``i`` is ``ids[i]``) live in ``?key=ID&key=ID``.

    The URL's ids are selected when the table first appears (unknown ids warn); the user's
    selection is written back. Returns the selected ids, in table order.
    """
    widget_key = f"w.{navigation.current_url_path()}.{key}"
    marker = f"{widget_key}#url"
    raw = raw_values(key)
    state = st.session_state
    if raw:
        start = read_choices(key, ids, [])
    elif isinstance(state.get(_SHARED + key), list):
        start = [i for i in state[_SHARED + key] if i in ids]
    else:
        start = []
    if state.get(marker) != raw and widget_key in state:
        del state[widget_key]  # the URL changed under us: it wins over the old selection
    index = {run_id: i for i, run_id in enumerate(ids)}
    event = st.dataframe(
        data,
        key=widget_key,
        on_select="rerun",
        selection_mode="multi-row",
        selection_default={"selection": {"rows": [index[i] for i in start]}},
        **kwargs,
    )
    rows = sorted(r for r in event.selection.rows if 0 <= r < len(ids))
    chosen = [ids[r] for r in rows]
    state[_SHARED + key] = chosen
    write_param(key, chosen)
    state[marker] = raw_values(key)
    return chosen


# --- links -----------------------------------------------------------------------------------


def app_root_url() -> str:
    """The app's root URL as the browser sees it (``http://host:8501``), or "" when unknown.

    From ``st.context.url`` (which ends with the current page's path), else from the Host
    header; "" under AppTest, where links are then root-relative.
    """
    url: str | None = st.context.url
    if url:
        page = navigation.current_url_path()
        url = url.rstrip("/")
        if page and url.endswith("/" + page):
            url = url[: -len(page) - 1]
        return url
    host = st.context.headers.get("Host") if st.context.headers else None
    if not host:
        return ""
    base = str(st.get_option("server.baseUrlPath") or "").strip("/")
    return f"http://{host}" + (f"/{base}" if base else "")


def page_url(url_path: str, params: Iterable[tuple[str, object]] = ()) -> str:
    """The full URL of screen `url_path` with query `params` (a value may be a list)."""
    pairs = [(k, v) for k, value in params for v in encode(value)]
    query = f"?{urlencode(pairs)}" if pairs else ""
    root = app_root_url()
    path = f"/{url_path}" if url_path else "/"
    return f"{root}{path}{query}"


def current_params() -> list[tuple[str, list[str]]]:
    return [(key, raw_values(key)) for key in st.query_params]


def current_url() -> str:
    """The full URL of the view on screen now."""
    return page_url(navigation.current_url_path(), current_params())


def copy_link(label: str = "Link to this view") -> str:
    """A button that opens the current view's full URL in a code box (it has a copy button);
    returns the URL.

    In a popover, because a code box on the page makes the browser load and run the syntax
    highlighter (1.6 MB) with the screen's first render: about 0.5 s of a dashboard's first
    paint. Call it after every bound widget of the screen, so the URL holds their values.
    """
    url = current_url()
    with st.popover(label, icon=":material/link:"):
        st.caption("Copy this address: it opens this view, as it is now, for a teammate.")
        st.code(url, language=None, wrap_lines=True)
    return url
