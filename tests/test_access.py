"""Optional sign-in (shared token, OpenID Connect) and the upload/delete allow-list, under AppTest."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from streamlit.runtime.pages_manager import PagesManager
from streamlit.testing.v1 import AppTest

from rollscope.ui import access
from rollscope.ui.access import Identity

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT = 600  # AppTest needs a bound; not a timing test
TOKEN = "correct-horse-battery-staple"


@pytest.fixture(autouse=True)
def _no_access_config(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (access.TOKEN_ENV, access.USER_TOKENS_ENV, access.UPLOADERS_ENV):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(autouse=True)
def _navigation_through_app_py(monkeypatch: pytest.MonkeyPatch) -> None:
    """AppTest resets Streamlit's "pages/ folder" mode before every run, which makes a rerun
    execute pages/<page>.py directly instead of app.py. A served app leaves that mode for good
    on its first page run (rollscope.ui switches it off; tests/browser/test_access_browser.py
    checks that on a real server): do the same here."""
    original = PagesManager.__init__

    def init(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        original(self, *args, **kwargs)
        PagesManager.uses_pages_directory = False

    monkeypatch.setattr(PagesManager, "__init__", init)


def app(db: Path, monkeypatch: pytest.MonkeyPatch, **params: str) -> AppTest:
    monkeypatch.setenv("ROLLSCOPE_DB", str(db))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    for key, value in params.items():
        at.query_params[key] = value
    return at


def texts(elements) -> list[str]:  # type: ignore[no-untyped-def]
    return [re.sub(r"\\(.)", r"\1", e.value) for e in elements]


def assert_only_the_prompt(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert [t.value for t in at.title] == ["Rollscope"]
    assert [t.label for t in at.text_input] == ["Access token"]
    # Nothing of the app: no page, no sidebar facts, no table, no uploader.
    assert not at.sidebar.caption
    assert not at.dataframe
    assert not at.get("file_uploader")
    assert "Runs" not in [t.value for t in at.title]


def test_off_by_default(demo_store_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert access.mode() == "off"
    at = app(demo_store_path, monkeypatch).run()
    assert not at.exception
    assert [t.value for t in at.title] == ["Runs"]
    assert "Access token" not in [t.label for t in at.text_input]


def test_token_mode_without_a_token_shows_only_the_prompt(
    demo_store_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(access.TOKEN_ENV, TOKEN)
    at = app(demo_store_path, monkeypatch).run()
    assert_only_the_prompt(at)
    assert "sign in" in at.info[0].value


def test_the_right_token_opens_the_app_for_the_session(
    demo_store_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(access.TOKEN_ENV, TOKEN)
    at = app(demo_store_path, monkeypatch).run()
    at.text_input[0].input(TOKEN)
    at.button[0].click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert [t.value for t in at.title] == ["Runs"]
    assert at.dataframe  # the runs table
    assert any("Signed in as token user" in c for c in texts(at.sidebar.caption))
    at.run()  # the next rerun of the same session needs no token again
    assert [t.value for t in at.title] == ["Runs"]


def test_a_wrong_token_is_an_error(demo_store_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(access.TOKEN_ENV, TOKEN)
    at = app(demo_store_path, monkeypatch).run()
    at.text_input[0].input("guess")
    at.button[0].click().run()
    assert_only_the_prompt(at)
    assert "That token is not right." in texts(at.error)


def test_a_link_with_the_token_opens_the_linked_view_and_drops_the_token(
    demo_store_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(access.TOKEN_ENV, TOKEN)
    at = app(demo_store_path, monkeypatch, token=TOKEN, runs="demo-train").run()
    assert not at.exception, [e.value for e in at.exception]
    assert [t.value for t in at.title] == ["Runs"]
    assert "token" not in at.query_params
    assert at.query_params["runs"] in ("demo-train", ["demo-train"])


def test_a_link_with_a_wrong_token(demo_store_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(access.TOKEN_ENV, TOKEN)
    at = app(demo_store_path, monkeypatch, token="stale", runs="demo-train").run()
    assert_only_the_prompt(at)
    assert any("token in that link is not right" in e for e in texts(at.error))
    assert "token" not in at.query_params
    assert at.query_params["runs"] in ("demo-train", ["demo-train"])  # kept for after sign-in


def test_personal_tokens_name_the_user(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(access.USER_TOKENS_ENV, "alice=tok-a, bob = tok-b ,broken")
    assert access.mode() == "token"
    assert access._check_token("tok-a") == Identity(name="alice", mode="token")
    assert access._check_token(" tok-b ") == Identity(name="bob", mode="token")
    assert access._check_token("tok-c") is None
    assert access._check_token("") is None


# ---- OpenID Connect (what can be checked offline) -------------------------------------------------
AUTH = {
    "redirect_uri": "http://localhost:8501/oauth2callback",
    "cookie_secret": "x" * 40,
    "client_id": "rollscope",
    "client_secret": "secret",
    "server_metadata_url": "https://accounts.example.com/.well-known/openid-configuration",
}


def test_an_auth_section_in_secrets_turns_on_oidc_and_asks_to_sign_in(
    demo_store_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(access.TOKEN_ENV, TOKEN)  # OIDC takes precedence over the token
    at = app(demo_store_path, monkeypatch, runs="demo-train")
    at.secrets["auth"] = AUTH
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert [t.value for t in at.title] == ["Rollscope"]
    assert [b.label for b in at.button] == ["Sign in"]
    assert not at.text_input  # no token box in OIDC mode
    assert not at.sidebar.caption and not at.dataframe
    assert any("taken to the page this link opens" in c for c in texts(at.caption))


def test_named_oidc_providers_each_get_a_button(
    demo_store_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = app(demo_store_path, monkeypatch)
    at.secrets["auth"] = {
        "redirect_uri": AUTH["redirect_uri"],
        "cookie_secret": AUTH["cookie_secret"],
        "google": {k: AUTH[k] for k in ("client_id", "client_secret", "server_metadata_url")},
        "okta": {k: AUTH[k] for k in ("client_id", "client_secret", "server_metadata_url")},
    }
    at.run()
    assert sorted(b.label for b in at.button) == ["Sign in with google", "Sign in with okta"]


# ---- who may import and delete --------------------------------------------------------------------
def test_allow_list(monkeypatch: pytest.MonkeyPatch) -> None:
    alice = Identity(name="Alice Liddell", email="alice@example.com", mode="oidc")
    bob = Identity(name="bob", mode="token")
    local = Identity(name="local user")
    assert access.can_modify(alice) and access.can_modify(bob)  # no list: everyone signed in
    monkeypatch.setenv(access.UPLOADERS_ENV, " ALICE@example.com , carol")
    assert access.can_modify(alice)
    assert not access.can_modify(bob)
    assert access.can_modify(Identity(name="Carol", mode="token"))
    assert access.can_modify(local)  # sign-in off: there is no one to tell apart
    assert not access.can_modify(None) if access.mode() != "off" else True


def test_a_broken_oidc_setup_is_an_error_not_a_traceback(
    demo_store_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = app(demo_store_path, monkeypatch)
    at.secrets["auth"] = {"redirect_uri": "not a url"}  # no provider, no cookie secret
    at.run()
    [button] = at.button
    at = button.click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert any("Sign-in is not set up correctly" in e for e in texts(at.error))
    assert not at.sidebar.caption and not at.dataframe
