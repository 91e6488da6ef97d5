"""The dashboard's cookies: sealed (what is inside cannot be read), refused when changed, forged with
another key, or past their age; a rotated key still opens the cookies of the old one. The session
cookie carries only an id: the session itself is on the server (test_access.py)."""

from __future__ import annotations

from bot.app.dashboard.sessions import FORM_TTL, SESSION_TTL, SIGNIN_TTL, CookieSealer, Session, SignIn
from bot.app.settings.secret_key import generate_key

NOW = 1_800_000_000.0
SESSION = Session("maintainer", "ghu_secret-token", ("o/r",), NOW, operator=False)
SID = "a-random-session-id"


def test_a_session_id_round_trips_sealed() -> None:
    sealer = CookieSealer.from_secret_key(generate_key(), "unused")
    sealed = sealer.seal_session_id(SID, NOW)
    assert SID not in sealed
    assert sealer.open_session_id(sealed, NOW + SESSION_TTL) == SID
    assert sealer.open_session_id(sealed, NOW + SESSION_TTL + 1) is None


def test_changed_forged_and_foreign_cookies_are_refused() -> None:
    sealer = CookieSealer.from_secret_key(None, "-----BEGIN PRIVATE KEY-----app key")
    sealed = sealer.seal_session_id(SID, NOW)
    flipped = sealed[:-4] + ("A" if sealed[-4] != "A" else "B") + sealed[-3:]
    assert sealer.open_session_id(flipped, NOW) is None
    forger = CookieSealer([b"another key"])
    assert sealer.open_session_id(forger.seal_session_id(SID, NOW), NOW) is None
    assert sealer.open_session_id("", NOW) is None and sealer.open_session_id("not a token", NOW) is None
    signin = sealer.seal_signin(SignIn("state", "verifier"), NOW)
    assert sealer.open_session_id(signin, NOW) is None  # a sign-in cookie is no session
    assert sealer.open_signin(signin, NOW + SIGNIN_TTL) == SignIn("state", "verifier")
    assert sealer.open_signin(signin, NOW + SIGNIN_TTL + 1) is None
    form = sealer.seal_form("nonce", NOW)
    assert sealer.open_session_id(form, NOW) is None and sealer.open_form(signin, NOW) is None
    assert (
        sealer.open_form(form, NOW + FORM_TTL) == "nonce"
        and sealer.open_form(form, NOW + FORM_TTL + 1) is None
    )


def test_a_sealed_secret_hides_the_token_and_keeps_no_age() -> None:
    sealer = CookieSealer.from_secret_key(generate_key(), "unused")
    sealed = sealer.seal_secret("ghu_secret-token", NOW)
    assert "ghu_" not in sealed and sealer.open_secret(sealed) == "ghu_secret-token"
    assert CookieSealer([b"another key"]).open_secret(sealed) is None


def test_a_rotated_key_keeps_sessions() -> None:
    old, new = generate_key(), generate_key()
    sealed = CookieSealer.from_secret_key(old, "unused").seal_session_id(SID, NOW)
    assert CookieSealer.from_secret_key(f"{new},{old}", "unused").open_session_id(sealed, NOW) == SID
    assert CookieSealer.from_secret_key(new, "unused").open_session_id(sealed, NOW) is None


def test_the_check_goes_stale_after_ten_minutes() -> None:
    assert not SESSION.stale(NOW + 600) and SESSION.stale(NOW + 601) and SESSION.stale(NOW - 5)
    assert SESSION.can_read("O/R") and not SESSION.can_read("o/other")
