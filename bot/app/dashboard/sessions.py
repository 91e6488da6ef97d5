"""The dashboard's cookies: a signed-in session's id, a sign-in in progress, and the operator form's
CSRF nonce, sealed by the server.

Each is a Fernet token (AES and HMAC-SHA256, with its issue time): the browser can neither read nor
change what is inside, and an old cookie is refused by its age. Their key is derived from
BEAM_SECRET_KEY (each of its keys opens, the first seals, so a rotation keeps sessions), or, without
one, from the App's private key: every process of one App derives the same, so any host opens a
cookie another host sealed. A derived key is used for nothing else.

The session itself (who, their user token, the repositories GitHub lists for them, when that was
checked) is kept on the server (`session_store.py`): a user who reads hundreds of repositories would
outgrow a browser's 4 KB cookie, and a server-side session ends for good when it is signed out.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from dataclasses import asdict, dataclass, field
from typing import Any

from cryptography.fernet import Fernet, InvalidToken, MultiFernet

SESSION_COOKIE = "beam_dashboard"
SIGNIN_COOKIE = "beam_dashboard_signin"
FORM_COOKIE = "beam_dashboard_form"
SESSION_TTL = 8 * 3600  # then the user signs in again
SIGNIN_TTL = 600  # from the "Sign in" click to GitHub's redirect back
FORM_TTL = 3600  # from showing the operator's token form to posting it
RECHECK_AFTER = 600.0  # issue 44: GitHub is asked again when the check is older than this
_CONTEXT = b"beam-bot dashboard cookies v1"


@dataclass(frozen=True, slots=True)
class Session:
    """A signed-in user: who, their user token, what GitHub said they may read, and when.

    A session opened with BEAM_DASHBOARD_TOKEN (`by_token`) has no GitHub user: its `token` is the
    fingerprint of the operator token it was opened with, checked again instead of asking GitHub."""

    login: str
    token: str
    repos: tuple[str, ...]  # full names, as GitHub spells them
    checked_at: float
    operator: bool = False
    by_token: bool = False

    def can_read(self, repo: str) -> bool:
        wanted = repo.lower()
        return any(r.lower() == wanted for r in self.repos)

    def stale(self, now: float) -> bool:
        return now - self.checked_at > RECHECK_AFTER or now < self.checked_at


@dataclass(frozen=True, slots=True)
class SignIn:
    """A sign-in in progress: the `state` sent to GitHub and the PKCE verifier behind the challenge."""

    state: str
    verifier: str
    back_to: str = "/dashboard"


@dataclass
class CookieSealer:
    """Seals and opens the dashboard's cookies with keys derived from the server's secret."""

    secrets: list[bytes] = field(repr=False)

    def __post_init__(self) -> None:
        if not self.secrets:
            raise ValueError("the dashboard needs a secret to seal its cookies")
        self._fernet = MultiFernet([Fernet(_derive(secret)) for secret in self.secrets])

    @classmethod
    def from_secret_key(cls, secret_key: str | None, private_key_pem: str) -> CookieSealer:
        if secret_key:
            return cls([part.strip().encode() for part in secret_key.split(",") if part.strip()])
        return cls([private_key_pem.encode()])

    def seal_session_id(self, session_id: str, now: float) -> str:
        """The session cookie: only the id of a session kept on the server."""
        return self._seal({"sid": session_id}, now)

    def open_session_id(self, value: str | None, now: float) -> str | None:
        data = self._open(value, SESSION_TTL, now)
        sid = None if data is None else data.get("sid")
        return sid if isinstance(sid, str) and sid else None

    def seal_form(self, nonce: str, now: float) -> str:
        """The CSRF cookie of the operator's token form: the nonce the form's hidden field repeats."""
        return self._seal({"csrf": nonce}, now)

    def open_form(self, value: str | None, now: float) -> str | None:
        data = self._open(value, FORM_TTL, now)
        nonce = None if data is None else data.get("csrf")
        return nonce if isinstance(nonce, str) and nonce else None

    def seal_secret(self, secret: str, now: float) -> str:
        """A session's user token as the server stores it: the database alone does not give it away."""
        return self._seal({"secret": secret}, now)

    def open_secret(self, value: str) -> str | None:
        data = self._open(value, None, 0.0)
        secret = None if data is None else data.get("secret")
        return secret if isinstance(secret, str) else None

    def seal_signin(self, signin: SignIn, now: float) -> str:
        return self._seal(asdict(signin), now)

    def open_signin(self, value: str | None, now: float) -> SignIn | None:
        data = self._open(value, SIGNIN_TTL, now)
        if data is None:
            return None
        try:
            return SignIn(str(data["state"]), str(data["verifier"]), str(data.get("back_to", "/dashboard")))
        except (KeyError, TypeError):
            return None

    def _seal(self, data: object, now: float) -> str:
        raw = json.dumps(data, separators=(",", ":")).encode()
        return self._fernet.encrypt_at_time(raw, int(now)).decode("ascii")

    def _open(self, value: str | None, ttl: int | None, now: float) -> dict[str, Any] | None:
        if not value:
            return None
        try:
            token = value.encode("ascii")
            raw = (
                self._fernet.decrypt(token)
                if ttl is None
                else self._fernet.decrypt_at_time(token, ttl, int(now))
            )
            data = json.loads(raw)
        except (InvalidToken, UnicodeError, ValueError):
            return None
        return data if isinstance(data, dict) else None


def _derive(secret: bytes) -> bytes:
    """A Fernet key of its own for the cookies, so a cookie never opens what the database seals."""
    return base64.urlsafe_b64encode(hmac.new(secret, _CONTEXT, hashlib.sha256).digest())
