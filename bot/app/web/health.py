"""Readiness: does the store accept writes, are the workers alive, do the App's credentials work.

`/healthz` is liveness (the process answers and its database responds); `/readyz` is readiness,
answered from three checks. The store check is a real write (an UPDATE that changes nothing), so a
read-only or locked database, which would make intake refuse deliveries, shows here. The credentials
check is `GET /app` with the App's JWT at start and then every `CREDENTIALS_INTERVAL` seconds; a key
GitHub refuses is logged once per change, with what to do.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.abc
import httpx
from sqlalchemy import update

from bot.app.credentials.files import AppCredentials
from bot.app.github.api import GitHubApi, GitHubError, GitHubStats, RetryPolicy
from bot.app.github.auth import GitHubApp
from bot.app.jobs.schema import schema_version
from bot.app.jobs.store import Store

log = logging.getLogger("beam.health")

CREDENTIALS_INTERVAL = 600.0
STORE_TIMEOUT = 5.0


async def _write_probe(store: Store) -> tuple[bool, str]:
    try:
        async with store.write() as conn:
            await conn.execute(
                update(schema_version)
                .where(schema_version.c.id == 1)
                .values(updated_at=schema_version.c.updated_at)
            )
    except Exception as exc:
        log.warning("readiness: the database does not accept writes: %s", exc)
        return False, f"does not accept writes: {type(exc).__name__}"
    return True, "ok"


class StoreProbe:
    """One write probe at a time, run in the app's task group and never cancelled halfway (a
    database call cancelled mid-transaction can leave its connection unusable); a probe slower than
    STORE_TIMEOUT makes the answer "no answer" while it finishes in the background."""

    def __init__(self) -> None:
        self._done: anyio.Event | None = None
        self._result: tuple[bool, str] = (False, "not checked yet")

    async def check(self, store: Store | None, tg: anyio.abc.TaskGroup | None) -> tuple[bool, str]:
        if store is None or tg is None:
            return False, "not open"
        if self._done is None:
            done = self._done = anyio.Event()
            tg.start_soon(self._probe, store, done)
        else:
            done = self._done
        with anyio.move_on_after(STORE_TIMEOUT):
            await done.wait()
        if not done.is_set():
            return False, f"no answer to a write in {STORE_TIMEOUT:g} s"
        return self._result

    async def _probe(self, store: Store, done: anyio.Event) -> None:
        with anyio.CancelScope(shield=True):
            try:
                self._result = await _write_probe(store)
            finally:
                self._done = None
                done.set()


@dataclass
class CredentialsCheck:
    """The outcome of the last `GET /app`: `ok`, `refused` (the key or id is wrong), or `unverified`."""

    state: str = "unverified"
    detail: str = "not checked yet"
    slug: str | None = None

    async def run(self, http: httpx.AsyncClient, base_url: str, credentials: AppCredentials) -> None:
        """Checks now, then every CREDENTIALS_INTERVAL seconds, until cancelled."""
        while True:
            await self.check_once(http, base_url, credentials)
            await anyio.sleep(CREDENTIALS_INTERVAL)

    async def check_once(self, http: httpx.AsyncClient, base_url: str, credentials: AppCredentials) -> None:
        api = GitHubApi(http, base_url=base_url, retry=RetryPolicy(max_attempts=1), stats=GitHubStats())
        app = GitHubApp(api, credentials.app_id, credentials.private_key)
        before = self.state
        try:
            info = await app.get_app()
        except GitHubError as error:
            if error.status in (401, 403, 404):
                self.state = "refused"
                self.detail = f"GitHub answered {error.status} to GET /app"
                if before != "refused":
                    log.error(
                        "GitHub refuses the App's credentials (%s to GET /app): check that the App id "
                        "%s and its private key (BEAM_PRIVATE_KEY or BEAM_PRIVATE_KEY_PATH, or the "
                        "stored credentials) belong together, and that the key was not revoked",
                        error.status,
                        credentials.app_id,
                    )
                return
            self._unverified(f"GitHub answered {error.status or 'nothing'} to GET /app")
            return
        except Exception as exc:  # unreachable GitHub, a bad key file, ...
            self._unverified(f"{type(exc).__name__}: {exc}")
            return
        self.state, self.detail, self.slug = "ok", "ok", info.slug
        if before != "ok":
            log.info("GitHub accepts the App's credentials (App %s, %s)", credentials.app_id, info.slug)

    def _unverified(self, detail: str) -> None:
        if self.state != "unverified" or self.detail != detail:
            log.warning("could not verify the App's credentials: %s", detail)
        self.state, self.detail = "unverified", detail


def readiness(
    *,
    mode: str,
    store: tuple[bool, str],
    workers: tuple[bool, str],
    credentials: CredentialsCheck | None,
    jail: str | None = None,
) -> tuple[bool, dict[str, Any]]:
    """Ready when the store accepts writes, the workers run (where this process runs them), and GitHub
    has not refused the credentials. In setup mode the process is ready to serve the setup page.
    `jail` says whether the repositories' checks can run here; off is a detail, not unreadiness."""
    checks: dict[str, Any] = {"store": store[1], "workers": workers[1]}
    if jail is not None:
        checks["jail"] = jail
    ok = store[0] and workers[0]
    if credentials is None:
        checks["credentials"] = "not registered (setup mode)" if mode == "setup" else "not checked here"
    else:
        checks["credentials"] = credentials.detail if credentials.state != "ok" else "ok"
        ok = ok and credentials.state != "refused"
    return ok, {"status": "ready" if ok else "not ready", "mode": mode, "checks": checks}
