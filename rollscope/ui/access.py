"""Who may open the app, and who may change the store: optional sign-in, off by default.

Three modes, chosen by configuration (`mode`):

- **off** (default): no sign-in; for a local, single-user start.
- **token**: ``ROLLSCOPE_TOKEN`` is set. A visitor enters the shared token once per browser
  session, or opens a link carrying ``?token=...`` (the token is then removed from the address,
  so a copied link does not pass it on). ``ROLLSCOPE_USER_TOKENS="alice=tok1,bob=tok2"`` adds
  personal tokens, which give the visitor a name the upload allow-list can match.
- **oidc**: ``.streamlit/secrets.toml`` has an ``[auth]`` section (Streamlit's built-in
  OpenID Connect sign-in: ``st.login``). Takes precedence over the token.

When sign-in is on, `require` (called by app.py before any page runs) shows only a sign-in
prompt until the visitor is signed in; the page and query parameters of the link they opened
are kept and opened once they are. ``ROLLSCOPE_UPLOADERS`` (comma-separated emails or names)
limits who may import or delete (`can_modify`); unset, everyone signed in may.
"""

from __future__ import annotations

import hmac
import os
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import streamlit as st

from rollscope.ui import navigation, render

TOKEN_ENV = "ROLLSCOPE_TOKEN"
USER_TOKENS_ENV = "ROLLSCOPE_USER_TOKENS"
UPLOADERS_ENV = "ROLLSCOPE_UPLOADERS"
TOKEN_PARAM = "token"

_SIGNED_IN = "access.identity"  # session key: the signed-in Identity (token mode)
_FAILURES = "access.failures"
_BAD_LINK = "access.bad_link"
_PENDING_TTL_S = 900


@dataclass(frozen=True)
class Identity:
    name: str
    email: str | None = None
    mode: str = "off"

    def label(self) -> str:
        return self.email or self.name


def _oidc_configured() -> bool:
    try:
        section = st.secrets.get("auth")
    except Exception:  # no secrets.toml at all, or an unreadable one
        return False
    return isinstance(section, Mapping) and bool(section)


def _tokens() -> dict[str, str]:
    """token -> user name, from ROLLSCOPE_TOKEN (name "token user") and ROLLSCOPE_USER_TOKENS."""
    tokens: dict[str, str] = {}
    shared = os.environ.get(TOKEN_ENV, "").strip()
    if shared:
        tokens[shared] = "token user"
    for entry in os.environ.get(USER_TOKENS_ENV, "").split(","):
        name, sep, token = entry.partition("=")
        if sep and name.strip() and token.strip():
            tokens[token.strip()] = name.strip()
    return tokens


def mode() -> str:
    """ "oidc", "token" or "off"."""
    if _oidc_configured():
        return "oidc"
    if _tokens():
        return "token"
    return "off"


def _check_token(candidate: str) -> Identity | None:
    """The identity a token stands for; compared in constant time against every known token."""
    found: Identity | None = None
    given = candidate.strip().encode()
    for token, name in _tokens().items():
        if hmac.compare_digest(given, token.encode()):
            found = Identity(name=name, mode="token")
    return found


def current_identity() -> Identity | None:
    """Who is signed in (None: nobody, while sign-in is on)."""
    current = mode()
    if current == "off":
        return Identity(name="local user")
    if current == "oidc":
        if not st.user.get("is_logged_in", False):
            return None
        email = st.user.get("email")
        name = st.user.get("name") or email or "signed-in user"
        return Identity(name=str(name), email=str(email) if email else None, mode="oidc")
    identity = st.session_state.get(_SIGNED_IN)
    return identity if isinstance(identity, Identity) else None


def uploaders() -> list[str]:
    return [e.strip().lower() for e in os.environ.get(UPLOADERS_ENV, "").split(",") if e.strip()]


def can_modify(identity: Identity | None = None) -> bool:
    """May this visitor import files or delete runs? Everyone, unless ROLLSCOPE_UPLOADERS lists
    who may (it applies when sign-in is on: without sign-in there is no one to match)."""
    identity = identity if identity is not None else current_identity()
    if identity is None:
        return False
    allowed = uploaders()
    if not allowed or identity.mode == "off":
        return True
    names = {identity.name.lower(), (identity.email or "").lower()} - {""}
    return bool(names & set(allowed))


def modify_denied_message() -> str:
    who = current_identity()
    named = f" ({who.label()})" if who else ""
    return (
        f"Importing and deleting are limited to the users listed in {UPLOADERS_ENV}; "
        f"you{named} can look at everything."
    )


# ---- a link opened before an OIDC sign-in: kept across the provider's redirect ------------------
# Streamlit returns from the provider to the app's root, in a new session: remember the page
# and query of the link per browser (address + user agent) for a few minutes.
_pending: dict[tuple[str, str], tuple[float, str, list[tuple[str, str]]]] = {}
_pending_lock = threading.Lock()


def _browser_key() -> tuple[str, str]:
    ip = st.context.ip_address or ""
    agent = (st.context.headers or {}).get("User-Agent", "") if st.context.headers else ""
    return ip, agent


def _remember_link(url_path: str, params: list[tuple[str, str]]) -> None:
    with _pending_lock:
        now = time.monotonic()
        for key in [k for k, v in _pending.items() if now - v[0] > _PENDING_TTL_S]:
            del _pending[key]
        _pending[_browser_key()] = (now, url_path, params)


def _take_link() -> tuple[str, list[tuple[str, str]]] | None:
    with _pending_lock:
        found = _pending.pop(_browser_key(), None)
    if found is None or time.monotonic() - found[0] > _PENDING_TTL_S:
        return None
    return found[1], found[2]


def _query_pairs() -> list[tuple[str, str]]:
    return [(k, v) for k in st.query_params for v in st.query_params.get_all(k)]


# ---- the gate -------------------------------------------------------------------------------
def _prompt_header() -> None:
    st.title("Rollscope")
    st.info("This Rollscope is shared with a team: sign in to see it.", icon=":material/lock:")


def _token_from_link() -> Identity | None:
    """A ``?token=`` in the link: checked, then removed from the address either way."""
    linked = st.query_params.get_all(TOKEN_PARAM)
    if not linked:
        return None
    del st.query_params[TOKEN_PARAM]  # never leave the token in a URL that gets copied
    identity = _check_token(linked[-1])
    if identity is None:
        st.session_state[_BAD_LINK] = True
        return None
    st.session_state[_SIGNED_IN] = identity
    return identity


def _token_prompt() -> None:
    _prompt_header()
    if st.session_state.pop(_BAD_LINK, False):
        st.error("The token in that link is not right. Enter the current one below.")
    with st.form("access.sign_in", border=False):
        token = st.text_input("Access token", type="password", autocomplete="current-password")
        submitted = st.form_submit_button("Sign in", type="primary")
    if submitted:
        identity = _check_token(token)
        if identity is not None:
            st.session_state[_SIGNED_IN] = identity
            st.rerun()  # the page the link named, with its query, now renders
        failures = int(st.session_state.get(_FAILURES, 0)) + 1
        st.session_state[_FAILURES] = failures
        time.sleep(min(failures, 5))  # slows guessing down
        st.error("That token is not right.", icon=":material/error:")


def _oidc_prompt(url_path: str) -> None:
    _prompt_header()
    if url_path or _query_pairs():
        _remember_link(url_path, _query_pairs())
        st.caption("After signing in you will be taken to the page this link opens.")
    for provider in _oidc_providers() or [None]:
        label = f"Sign in with {provider}" if provider else "Sign in"
        if st.button(label, type="primary", key=f"access.login.{provider}"):
            try:
                if provider:
                    st.login(provider)
                else:
                    st.login()
            except Exception as exc:  # e.g. Authlib missing, or a bad [auth] section
                st.error(
                    "Sign-in is not set up correctly on this server: "
                    f"{render.escape_markdown(str(exc))}",
                    icon=":material/error:",
                )


def _oidc_providers() -> list[str]:
    """Named providers ([auth.google], [auth.microsoft], ...); empty for the unnamed one."""
    try:
        section: Any = st.secrets.get("auth") or {}
    except Exception:
        return []
    if "client_id" in section:
        return []
    return [name for name, value in section.items() if isinstance(value, Mapping)]


def _hidden_navigation(specs: Sequence[Any], app_dir: Path) -> str:
    """Register the screens without showing them; return the url_path the visitor asked for.

    st.navigation must run on every script run: without it Streamlit falls back to running
    scripts of pages/ directly, past this gate. Hidden, it only resolves the requested page.
    """
    present = navigation.available(specs, app_dir)
    pages = [
        st.Page(s.script, title=s.title, url_path=s.url_path or None, default=s.default)
        for s in present
    ]
    current = st.navigation(pages, position="hidden")
    return str(current.url_path or "")


def require(specs: Sequence[Any], app_dir: Path) -> Identity:
    """Stop the script run with a sign-in prompt unless the visitor may see the app.

    Call before anything else draws. `specs` are app.py's PageSpec rows (the screens; a link
    to one is kept across the sign-in and opened after it).
    """
    current = mode()
    if current == "off":
        return Identity(name="local user")
    if current == "token":
        identity = current_identity() or _token_from_link()
    else:
        identity = current_identity()
    if identity is not None:
        if current == "oidc":
            _open_remembered_link(specs)
        return identity
    url_path = _hidden_navigation(specs, app_dir)
    if current == "token":
        _token_prompt()
    else:
        _oidc_prompt(url_path)
    st.stop()
    raise AssertionError("unreachable")


def _open_remembered_link(specs: Sequence[Any]) -> None:
    pending = _take_link()
    if pending is None:
        return
    url_path, params = pending
    scripts = {spec.url_path: spec.script for spec in specs}
    if url_path in scripts:
        st.switch_page(scripts[url_path], query_params=params)


def sidebar(identity: Identity) -> None:
    """Who is signed in, and a way out."""
    if identity.mode == "off":
        return
    st.caption(f"Signed in as {render.escape_markdown(identity.label())}")
    if st.button("Sign out", key="access.sign_out", icon=":material/logout:"):
        if identity.mode == "oidc":
            st.logout()
        st.session_state.pop(_SIGNED_IN, None)
        st.rerun()
