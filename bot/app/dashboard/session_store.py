"""The dashboard's sessions, kept on the server (issue 44).

The browser's cookie holds only a random id, sealed (`CookieSealer.seal_session_id`); the row it
names holds the rest, whatever its size (a user who reads 500 repositories). The row is found by the
id's SHA-256, so the table alone names no cookie, and the user's GitHub token in it is sealed with
the cookies' key. A session ends when it expires (`SESSION_TTL` after sign-in, on the server's clock,
whatever the cookie says) or is signed out: its row is deleted, and its cookie opens nothing after.
Expired rows are deleted at each sign-in, so the table holds about the sessions of the last 8 hours.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass

from sqlalchemy import delete, insert, select, update

from bot.app.dashboard.sessions import SESSION_TTL, CookieSealer, Session
from bot.app.jobs.schema import dashboard_sessions
from bot.app.jobs.store import Store


def _key(session_id: str) -> str:
    return hashlib.sha256(session_id.encode()).hexdigest()


@dataclass
class SessionStore:
    store: Store
    sealer: CookieSealer

    async def create(self, session: Session, now: float) -> str:
        """Store a new session; return the cookie's value that names it."""
        session_id = secrets.token_urlsafe(32)
        row = {
            "id": _key(session_id),
            "login": session.login,
            "token": self.sealer.seal_secret(session.token, now),
            "repos": list(session.repos),
            "operator": session.operator,
            "by_token": session.by_token,
            "checked_at": session.checked_at,
            "created_at": now,
            "expires_at": now + SESSION_TTL,
        }
        async with self.store.write() as conn:
            await conn.execute(delete(dashboard_sessions).where(dashboard_sessions.c.expires_at <= now))
            await conn.execute(insert(dashboard_sessions).values(row))
        return self.sealer.seal_session_id(session_id, now)

    async def load(self, cookie: str | None, now: float) -> tuple[str, Session] | None:
        """The session a cookie names, with the key to update it by; None when the cookie is forged or
        old, or its session was signed out or has expired."""
        session_id = self.sealer.open_session_id(cookie, now)
        if session_id is None:
            return None
        key = _key(session_id)
        s = dashboard_sessions.c
        async with self.store.read() as conn:
            row = (
                await conn.execute(select(dashboard_sessions).where(s.id == key, s.expires_at > now))
            ).first()
        if row is None:
            return None
        token = self.sealer.open_secret(row.token)
        if token is None:  # sealed under a key that is no longer listed
            return None
        repos = tuple(str(r) for r in row.repos) if isinstance(row.repos, list) else ()
        return key, Session(row.login, token, repos, row.checked_at, bool(row.operator), bool(row.by_token))

    async def renew(self, key: str, session: Session) -> None:
        """What the last check found: the repositories, the operator role, and when."""
        async with self.store.write() as conn:
            await conn.execute(
                update(dashboard_sessions)
                .where(dashboard_sessions.c.id == key)
                .values(repos=list(session.repos), operator=session.operator, checked_at=session.checked_at)
            )

    async def end(self, key: str) -> None:
        async with self.store.write() as conn:
            await conn.execute(delete(dashboard_sessions).where(dashboard_sessions.c.id == key))

    async def end_cookie(self, cookie: str | None, now: float) -> None:
        """Sign-out: the session the cookie names is deleted (a forged or old cookie names none)."""
        session_id = self.sealer.open_session_id(cookie, now)
        if session_id is not None:
            await self.end(_key(session_id))
