"""Cached access to the store: the only module that owns Streamlit's caches.

The app process holds one open `Store` per store file (``st.cache_resource``); query results
are cached with ``st.cache_data`` through `cached_query`, and `after_import` drops them all
so every screen (in every browser session) shows new data without a restart.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any, Concatenate, ParamSpec, TypeVar

import pandas as pd
import streamlit as st

from trace_store import Store, open_store

P = ParamSpec("P")
T = TypeVar("T")

DB_ENV = "ROLLSCOPE_DB"


@st.cache_resource(show_spinner=False)
def _open(path: str | None) -> Store:
    return open_store(path)


def get_store() -> Store:
    """The store this app serves: ``$ROLLSCOPE_DB`` or the store's default file."""
    return _open(os.environ.get(DB_ENV) or None)


DATA_VERSION_TTL_S = 1.0
"""How long a rerun trusts the store's data version before asking again (one cheap query)."""
_versions: dict[str, tuple[float, str]] = {}


def data_version() -> str:
    """The store's data version (`Store.data_version`), re-read at most once a second.

    Cached results are keyed on it, so an import made by another process (possible on a shared
    DuckLake store; the embedded file refuses a second writer) shows on the app's next rerun.
    """
    key = os.environ.get(DB_ENV, "")
    now = time.monotonic()
    seen = _versions.get(key)
    if seen is not None and now - seen[0] < DATA_VERSION_TTL_S:
        return seen[1]
    version = get_store().data_version()
    _versions[key] = (now, version)
    return version


@st.cache_data(show_spinner=False)
def _cached_call(
    store_key: str,
    version: str,
    fn_key: str,
    _fn: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: tuple[tuple[str, Any], ...],
) -> Any:
    return _fn(get_store(), *args, **dict(kwargs))


def cached_query(fn: Callable[Concatenate[Store, P], T]) -> Callable[P, T]:
    """Wrap a query function ``fn(store, *args)`` so its results are cached until the next import.

    Arguments must be hashable by Streamlit (str, int, float, None, tuples, lists). Use:
    ``reward_by_step = cached_query(dashboards.reward_by_step)``, then ``reward_by_step(run_ids)``.
    """
    fn_key = f"{fn.__module__}.{fn.__qualname__}"

    def call(*args: P.args, **kwargs: P.kwargs) -> T:
        store_key = os.environ.get(DB_ENV, "")
        result: T = _cached_call(
            store_key, data_version(), fn_key, fn, args, tuple(sorted(kwargs.items()))
        )
        return result

    call.__name__ = getattr(fn, "__name__", "query")
    call.__doc__ = fn.__doc__
    return call


def _list_runs(store: Store) -> pd.DataFrame:
    return store.list_runs()


list_runs = cached_query(_list_runs)
"""The runs table (`Store.list_runs`), cached until the next import."""


def after_import() -> None:
    """Call after anything writes to the store: drops every cached query result."""
    _versions.clear()
    st.cache_data.clear()
