"""Where a process finds the App's credentials, and where setup mode keeps them (issue 23).

Every process, on every host, loads them with `load_app_credentials(settings, store)` once it has
opened the database: the environment first (an operator can always override), then the database
(the `app_credentials` row, sealed with BEAM_SECRET_KEY), then `<work_dir>/app-credentials.json`.
A host that never saw the setup page, with an empty work directory, so gets them from the database.

Setup mode keeps what it registered (`storage_for`):
- in the database whenever BEAM_SECRET_KEY is set, on SQLite and PostgreSQL alike;
- in the file on SQLite without a key, as before: one host, one disk;
- nowhere on PostgreSQL without a key: a file there would reach no other host, so the setup page says
  which key to set instead (BEM-378).

`reseal_stored` (`beam-bot secret-key --reseal`) seals the row again with the first key of the list,
the middle step of a rotation. It is a command, not something every start does: during a rolling
restart, a process still on the old list would seal the row back with the old key, and the last step
(the old key removed) would then lock every process out.
"""

from __future__ import annotations

import json
import logging
from typing import Literal

import anyio
import anyio.to_thread
from pydantic import SecretStr
from sqlalchemy import select, update
from sqlalchemy.engine import make_url

from bot.app.credentials.files import AppCredentials, load_credentials, optional_secret, read_credentials_file
from bot.app.jobs.database import build_url
from bot.app.jobs.schema import app_credentials
from bot.app.jobs.store import Store
from bot.app.settings import Settings, SettingsError, normalise_pem
from bot.app.settings.secret_key import GENERATE_HINT, SecretKeys
from bot.beam.errors import BeamError

log = logging.getLogger("beam.credentials")

ROW_ID = 1  # one App per database
WHAT = "the App's credentials stored in the database"
Storage = Literal["database", "file"]


class CredentialsError(SettingsError):
    """Stored credentials this process cannot use. A `SettingsError`, so that a start stops with one
    line and exit code 2; `code` is its BEM code, which the message ends with."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(str(BeamError(code, detail)))
        self.code = code


def is_postgres(settings: Settings) -> bool:
    url = settings.database_url.get_secret_value() if settings.database_url else None
    return make_url(build_url(url, settings.work_dir)).get_backend_name() == "postgresql"


def storage_for(settings: Settings) -> Storage | None:
    """Where setup mode keeps the credentials it registers; None when it must not register at all."""
    if settings.secret_key is not None:
        return "database"
    return None if is_postgres(settings) else "file"


def missing_key_advice() -> str:
    """What to set, in the words the setup page and the logs use."""
    return (
        "set BEAM_SECRET_KEY=<a Fernet key> on every host (the same key everywhere) and restart; "
        f"{GENERATE_HINT}"
    )


async def load_app_credentials(settings: Settings, store: Store) -> AppCredentials | None:
    """The App's credentials: environment, else database, else the work directory's file, else None
    (setup mode). `CredentialsError` (BEM-375, BEM-376) when the database holds some this process
    cannot open; `SettingsError` for a damaged file.

    A file found while a key is set is copied into the database (the move from one host to several:
    set the key, restart once), so the other hosts see it too.
    """
    if settings.app_id is not None:
        return await anyio.to_thread.run_sync(load_credentials, settings)
    keys = settings.secret_keys
    stored = await read_stored(store, keys)
    if stored is not None:
        return stored
    from_file = await anyio.to_thread.run_sync(read_credentials_file, settings.credentials_path)
    if from_file is not None and keys is not None and await save_stored(store, keys, from_file):
        log.warning(
            "copied the App's credentials from %s into the database, sealed with BEAM_SECRET_KEY: "
            "every host reads them there now, and the file may be deleted",
            settings.credentials_path,
        )
    elif from_file is not None and is_postgres(settings):
        log.warning(
            "the App's credentials come from %s, which hosts without this work directory never see: %s",
            settings.credentials_path,
            missing_key_advice(),
        )
    return from_file


async def wait_for_registration(settings: Settings, store: Store) -> AppCredentials:
    """The credentials another host's setup page stores in the shared database, once they are there:
    a server in setup mode then serves them without a restart, as after a registration of its own.
    Credentials it cannot open (sealed with another key) are logged once, and it goes on looking."""
    complained = False
    while True:
        await anyio.sleep(settings.setup_poll_interval)
        try:
            found = await load_app_credentials(settings, store)
        except SettingsError as error:
            if not complained:
                log.error("setup mode: %s", error)
            complained = True
            continue
        if found is not None:
            return found


async def read_stored(store: Store, keys: SecretKeys | None) -> AppCredentials | None:
    """The credentials in the database, opened; None when there are none. Reseals with the first key."""
    async with store.read() as conn:
        row = (await conn.execute(select(app_credentials).where(app_credentials.c.id == ROW_ID))).first()
    if row is None:
        return None
    if keys is None:
        raise CredentialsError(
            "BEM-376",
            f"the database holds App {row.app_id}'s credentials, sealed with BEAM_SECRET_KEY: "
            "set the key the other processes use",
        )
    return _decode(_open(keys, str(row.sealed)))


async def save_stored(store: Store, keys: SecretKeys, creds: AppCredentials) -> bool:
    """Seal and insert the credentials; False (nothing written) when the database has some already."""
    now = store.clock()
    row = {
        "id": ROW_ID,
        "app_id": creds.app_id,
        "sealed": keys.seal(_encode(creds)),
        "created_at": now,
        "updated_at": now,
    }
    async with store.write() as conn:
        return (await conn.execute(store.insert_ignore(app_credentials).values(row))).rowcount == 1


async def reseal_stored(store: Store, keys: SecretKeys) -> Literal["resealed", "current", "none"]:
    """Seal the stored credentials again with the first key: "resealed", "current" when the first key
    sealed them already, "none" when there are none. BEM-375 (CredentialsError) when no key opens them.

    Compare-and-set on the sealed text: a row changed meanwhile (another reseal) is left as it is.
    """
    async with store.read() as conn:
        row = (await conn.execute(select(app_credentials).where(app_credentials.c.id == ROW_ID))).first()
    if row is None:
        return "none"
    sealed = str(row.sealed)
    _decode(_open(keys, sealed))  # only credentials this key list can read are sealed again
    if keys.sealed_with_first(sealed):
        return "current"
    async with store.write() as conn:
        await conn.execute(
            update(app_credentials)
            .where(app_credentials.c.id == ROW_ID, app_credentials.c.sealed == sealed)
            .values(sealed=keys.reseal(sealed), updated_at=store.clock())
        )
    return "resealed"


def _open(keys: SecretKeys, sealed: str) -> bytes:
    try:
        return keys.open(sealed, WHAT)
    except BeamError as error:
        raise CredentialsError(error.code, error.detail or error.message) from None


def _encode(creds: AppCredentials) -> bytes:
    return json.dumps(
        {
            "app_id": creds.app_id,
            "slug": creds.slug,
            "client_id": creds.client_id,
            "client_secret": None if creds.client_secret is None else creds.client_secret.get_secret_value(),
            "webhook_secret": creds.webhook_secret.get_secret_value(),
            "pem": creds.private_key.get_secret_value(),
        }
    ).encode("utf-8")


def _decode(data: bytes) -> AppCredentials:
    # Authenticated, so only a beam-bot process with the key wrote this; a bad shape is a bug or a
    # newer format, still a clear error rather than a crash.
    try:
        value = json.loads(data)
        return AppCredentials(
            app_id=int(value["app_id"]),
            private_key=SecretStr(normalise_pem(str(value["pem"]), "the stored App key")),
            webhook_secret=SecretStr(str(value["webhook_secret"])),
            slug=value.get("slug"),
            client_id=value.get("client_id"),
            client_secret=optional_secret(value.get("client_secret")),
            source="database",
        )
    except (ValueError, KeyError, TypeError):
        raise CredentialsError(
            "BEM-375", f"{WHAT} opened, but are not App credentials: delete the row to register again"
        ) from None
