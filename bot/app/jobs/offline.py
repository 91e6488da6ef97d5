"""Opening the configured database for the offline commands (`pending`, `prune`), never creating one.

`Store.open` creates or upgrades the schema, which is right for the server and wrong for a command
that only looks: pointed at the wrong work directory, it would leave an empty database behind and
report "nothing held". Here a missing SQLite file, or a database without beam-bot's tables, is an
answer ("no database at ..."), and nothing is written.
"""

from __future__ import annotations

import time

import anyio
from sqlalchemy import select
from sqlalchemy.engine import make_url

from bot.app.jobs.database import build_url, create_engines
from bot.app.jobs.migrations import SCHEMA_VERSION
from bot.app.jobs.schema import schema_version
from bot.app.jobs.store import Store
from bot.app.settings import Settings, SettingsError


class NoDatabase(Exception):
    """There is no beam-bot database where the settings point; the message says where that is."""


def describe(url: str) -> str:
    """The URL for a person: password hidden; a SQLite database as its file path."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        return f"SQLite database {parsed.database}"
    return parsed.render_as_string(hide_password=True)


async def open_existing(settings: Settings) -> tuple[Store, str]:
    """The store of an existing database and a description of it; `NoDatabase` when there is none."""
    secret = settings.database_url.get_secret_value() if settings.database_url else None
    try:
        url = build_url(secret, settings.work_dir)
    except ValueError as exc:
        raise SettingsError(f"BEAM_DATABASE_URL: {exc}") from None
    where = describe(url)
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite" and not await anyio.Path(parsed.database or "").is_file():
        raise NoDatabase(f"no database at {parsed.database} (BEAM_WORK_DIR is {settings.work_dir})")
    engine, sync_engine = create_engines(url)
    store = Store(engine, time.time, sync_engine, anyio.Lock() if sync_engine is not None else None)
    try:
        async with store.read() as conn:
            version = (
                await conn.execute(select(schema_version.c.version).where(schema_version.c.id == 1))
            ).scalar()
    except Exception as exc:
        await store.close()
        if "schema_version" in str(exc):  # the table does not exist: not a beam-bot database (yet)
            raise NoDatabase(f"{where} has no beam-bot tables") from None
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise SettingsError(f"cannot read the database {where}: {reason}") from None
    if version is None or int(version) != SCHEMA_VERSION:
        await store.close()
        raise SettingsError(
            f"{where} is at schema version {version}, this beam-bot reads {SCHEMA_VERSION}: "
            "start `beam-bot serve` once to upgrade it, or use the matching beam-bot"
        )
    return store, where
