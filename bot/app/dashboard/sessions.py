"""The dashboard's cookies: a signed-in session and a sign-in in progress, sealed by the server.

Both are Fernet tokens (AES and HMAC-SHA256, with their issue time): the browser can neither read
the user's GitHub token inside nor change a field, and an old cookie is refused by its age. Their
key is derived from BEAM_SECRET_KEY (each of its keys opens, the first seals, so a rotation keeps
sessions), or, without one, from the App's private key: every process of one App derives the same,
so any host opens a session another host sealed. A derived key is used for nothing else.

Nothing is stored on the server: signing out clears the cookie, and the session's permission
check (`checked_at`) travels with it and is redone when it is older than ten minutes.
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
SESSION_TTL = 8 * 3600  # then the user signs in again
SIGNIN_TTL = 600  # from the "Sign in" click to GitHub's redirect back
RECHECK_AFTER = 600.0  # issue 44: GitHub is asked again when the check is older than this
_CONTEXT = b"beam-bot dashboard cookies v1"


@dataclass(frozen=True, slots=True)
class Session:
    """A signed-in user: who, their user token, what GitHub said they may read, and when."""

    login: str
    token: str
    repos: tuple[str, ...]  # full names, as GitHub spells them
    checked_at: float
    operator: bool = False

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

    def seal_session(self, session: Session, now: float) -> str:
        return self._seal(asdict(session), now)

    def open_session(self, value: str | None, now: float) -> Session | None:
        data = self._open(value, SESSION_TTL, now)
        if data is None:
            return None
        try:
            return Session(
                login=str(data["login"]),
                token=str(data["token"]),
                repos=tuple(str(r) for r in data["repos"]),
                checked_at=float(data["checked_at"]),
                operator=bool(data.get("operator", False)),
            )
        except (KeyError, TypeError, ValueError):
            return None

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

    def _open(self, value: str | None, ttl: int, now: float) -> dict[str, Any] | None:
        if not value:
            return None
        try:
            raw = self._fernet.decrypt_at_time(value.encode("ascii"), ttl, int(now))
            data = json.loads(raw)
        except (InvalidToken, UnicodeError, ValueError):
            return None
        return data if isinstance(data, dict) else None


def _derive(secret: bytes) -> bytes:
    """A Fernet key of its own for the cookies, so a cookie never opens what the database seals."""
    return base64.urlsafe_b64encode(hmac.new(secret, _CONTEXT, hashlib.sha256).digest())
