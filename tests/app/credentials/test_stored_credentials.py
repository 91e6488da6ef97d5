"""Issue 23: the App's credentials sealed with BEAM_SECRET_KEY, on a real SQLite file and PostgreSQL.

Sealing round-trips; a wrong key and an altered row are BEM-375 (never garbage credentials); a
comma-separated key list rotates; and a process finds its credentials in the environment, then the
database, then the work directory's file.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from typing import Any

import anyio
import pytest
from pydantic import SecretStr, ValidationError
from sqlalchemy import text

from bot.app.credentials.files import AppCredentials, write_credentials_file
from bot.app.credentials.stored import (
    CredentialsError,
    load_app_credentials,
    read_stored,
    reseal_stored,
    save_stored,
    storage_for,
)
from bot.app.jobs.store import Store
from bot.app.settings import Settings, SettingsError, describe_validation_error
from bot.app.settings.secret_key import SecretKeys, generate_key, parse_keys
from bot.app.web.server import serve
from bot.beam.errors import BeamError
from bot.cli import main
from tests.support.fake_github_auth import shared_app_key

pytestmark = pytest.mark.anyio
OLD, NEW, OTHER = generate_key(), generate_key(), generate_key()
PEM = shared_app_key().private_pem


def creds(app_id: int = 77, secret: str = "whsec-sealed-1") -> AppCredentials:  # noqa: S107 - a test's
    return AppCredentials(app_id, SecretStr(PEM), SecretStr(secret), slug="beam-x", client_id="Iv1.x")


def settings_for(tmp_path: Path, db_url: str | None = None, **values: Any) -> Settings:
    return Settings(_env_file=None, work_dir=tmp_path / "work", database_url=db_url, **values)  # type: ignore[call-arg]


async def sealed_text(store: Store) -> str:
    async with store.read() as conn:
        return str((await conn.execute(text("SELECT sealed FROM app_credentials"))).scalar_one())


async def set_sealed(store: Store, value: str) -> None:
    async with store.write() as conn:
        await conn.execute(text("UPDATE app_credentials SET sealed = :v"), {"v": value})


# -- the keyring ------------------------------------------------------------------------------------


def test_seal_and_open_round_trip_and_the_token_hides_the_plaintext() -> None:
    keys = SecretKeys(NEW)
    token = keys.seal(b"pem and secret")
    assert b"pem and secret" not in token.encode()
    assert keys.open(token, "it") == b"pem and secret"
    assert keys.seal(b"pem and secret") != token  # a fresh IV every time


def test_a_wrong_key_and_an_altered_token_are_bem_375() -> None:
    token = SecretKeys(OLD).seal(b"x" * 40)
    with pytest.raises(BeamError) as wrong:
        SecretKeys(OTHER).open(token, "the row")
    assert wrong.value.code == "BEM-375" and "cannot open the row" in str(wrong.value)
    flipped = token[:30] + ("A" if token[30] != "A" else "B") + token[31:]
    with pytest.raises(BeamError) as altered:
        SecretKeys(OLD).open(flipped, "the row")
    assert altered.value.code == "BEM-375"
    with pytest.raises(BeamError):
        SecretKeys(OLD).open("not a token at all é", "the row")


def test_a_key_list_seals_with_the_first_and_opens_with_any() -> None:
    old_token = SecretKeys(OLD).seal(b"secret")
    both = SecretKeys(f"{NEW}, {OLD}")
    assert both.count == 2
    assert both.open(old_token, "it") == b"secret"
    assert not both.sealed_with_first(old_token)
    fresh = both.reseal(old_token)
    assert both.sealed_with_first(fresh)
    assert SecretKeys(NEW).open(fresh, "it") == b"secret"
    assert SecretKeys(NEW).open(both.seal(b"new"), "it") == b"new"
    with pytest.raises(BeamError):
        SecretKeys(OLD).open(fresh, "it")


def test_a_malformed_key_is_refused_at_start_by_position_never_by_value() -> None:
    with pytest.raises(ValueError, match="BEM-377"):
        parse_keys("not-a-key")
    with pytest.raises(ValidationError) as exc:
        Settings(_env_file=None, secret_key=f"{NEW},short-secret-value")
    message = describe_validation_error(exc.value)  # what the start prints
    assert "key 2 of 2 is not a Fernet key" in message and "beam-bot secret-key" in message
    assert "short-secret-value" not in message
    assert Settings(_env_file=None, secret_key="").secret_key is None  # empty means unset


def test_the_cli_prints_a_new_key_that_the_setting_accepts(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["secret-key"]) == 0
    key = capsys.readouterr().out.strip()
    assert len(key) == 44
    settings = Settings(_env_file=None, secret_key=key)
    keys = settings.secret_keys
    assert keys is not None and keys.open(keys.seal(b"ok"), "it") == b"ok"
    assert key not in repr(settings)


# -- the database -----------------------------------------------------------------------------------


async def test_stored_credentials_round_trip_sealed(store: Store) -> None:
    keys = SecretKeys(NEW)
    assert await read_stored(store, keys) is None
    assert await save_stored(store, keys, creds())
    assert not await save_stored(store, keys, creds(78))  # one App per database: the first stays
    got = await read_stored(store, keys)
    assert got is not None
    assert (got.app_id, got.slug, got.client_id, got.source) == (77, "beam-x", "Iv1.x", "database")
    assert got.private_key.get_secret_value() == PEM
    assert got.webhook_secret.get_secret_value() == "whsec-sealed-1"
    sealed = await sealed_text(store)
    assert "whsec-sealed-1" not in sealed and "PRIVATE KEY" not in sealed


async def test_a_wrong_key_a_missing_key_or_an_altered_row_stop_the_load(
    store: Store, tmp_path: Path
) -> None:
    await save_stored(store, SecretKeys(OLD), creds())
    with pytest.raises(CredentialsError) as wrong:
        await load_app_credentials(settings_for(tmp_path, secret_key=OTHER), store)
    assert wrong.value.code == "BEM-375"
    assert isinstance(wrong.value, SettingsError) and "(BEM-375)" in str(wrong.value)
    with pytest.raises(CredentialsError) as missing:
        await load_app_credentials(settings_for(tmp_path), store)
    assert missing.value.code == "BEM-376" and "App 77" in str(missing.value)
    token = await sealed_text(store)
    await set_sealed(store, token[:-12] + ("x" if token[-12] != "x" else "y") + token[-11:])
    with pytest.raises(CredentialsError) as altered:
        await load_app_credentials(settings_for(tmp_path, secret_key=OLD), store)
    assert altered.value.code == "BEM-375"
    # Sealed, and so accepted by the key, but not credentials: still BEM-375, never a crash.
    await set_sealed(store, SecretKeys(OLD).seal(json.dumps({"app_id": 77}).encode()))
    with pytest.raises(CredentialsError, match="are not App credentials"):
        await load_app_credentials(settings_for(tmp_path, secret_key=OLD), store)


async def test_rotation_in_three_steps_never_locks_a_process_out(store: Store, tmp_path: Path) -> None:
    await save_stored(store, SecretKeys(OLD), creds())
    before = await sealed_text(store)
    # Step 1: the new key first everywhere; reading never reseals, so a host still on OLD alone
    # (mid-rollout) reads the row too.
    for value in (f"{NEW},{OLD}", OLD):
        got = await load_app_credentials(settings_for(tmp_path, secret_key=value), store)
        assert got is not None and got.app_id == 77
    assert await sealed_text(store) == before
    # Step 2: `beam-bot secret-key --reseal`, once.
    assert await reseal_stored(store, SecretKeys(f"{NEW},{OLD}")) == "resealed"
    after = await sealed_text(store)
    assert after != before and SecretKeys(NEW).sealed_with_first(after)
    assert await reseal_stored(store, SecretKeys(f"{NEW},{OLD}")) == "current"
    assert await sealed_text(store) == after
    # Step 3: the old key gone. It opens nothing now; a key list without the sealing key reseals nothing.
    assert (await load_app_credentials(settings_for(tmp_path, secret_key=NEW), store)) is not None
    with pytest.raises(CredentialsError, match="BEM-375"):
        await load_app_credentials(settings_for(tmp_path, secret_key=OLD), store)
    with pytest.raises(CredentialsError, match="BEM-375"):
        await reseal_stored(store, SecretKeys(f"{OTHER},{OLD}"))
    assert await sealed_text(store) == after


async def test_environment_then_database_then_file(store: Store, tmp_path: Path) -> None:
    plain = settings_for(tmp_path)
    assert await load_app_credentials(plain, store) is None
    write_credentials_file(plain.credentials_path, creds(5, "from-the-file"))
    from_file = await load_app_credentials(plain, store)
    assert from_file is not None and (from_file.app_id, from_file.source) == (5, "file")
    # With a key, the file's credentials move into the database (the step from one host to several).
    keyed = settings_for(tmp_path, secret_key=NEW)
    moved = await load_app_credentials(keyed, store)
    assert moved is not None and moved.app_id == 5
    plain.credentials_path.unlink()
    from_db = await load_app_credentials(keyed, store)
    assert from_db is not None and (from_db.app_id, from_db.source) == (5, "database")
    env = settings_for(tmp_path, secret_key=NEW, app_id=9, private_key=PEM, webhook_secret="from-the-env")
    from_env = await load_app_credentials(env, store)
    assert from_env is not None and (from_env.app_id, from_env.source) == (9, "env")


def test_where_setup_mode_keeps_credentials(tmp_path: Path) -> None:
    pg = "postgresql://beam@db.example/beam"
    assert storage_for(settings_for(tmp_path)) == "file"
    assert storage_for(settings_for(tmp_path, secret_key=NEW)) == "database"
    assert storage_for(settings_for(tmp_path, pg, secret_key=NEW)) == "database"
    assert storage_for(settings_for(tmp_path, pg)) is None


# -- processes refuse to start on credentials they cannot open ---------------------------------------


async def _seal_into(db_url: str, key: str) -> None:
    store = await Store.open(db_url)
    try:
        await save_stored(store, SecretKeys(key), creds())
    finally:
        await store.close()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def test_serve_and_worker_stop_before_running_on_the_wrong_key(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    anyio.run(_seal_into, db_url, OLD)
    port = _free_port()
    with pytest.raises(CredentialsError, match="BEM-375"):
        serve(settings_for(tmp_path, db_url, secret_key=OTHER), "127.0.0.1", port)
    with socket.socket() as sock:  # nothing listened: the port is still free
        sock.bind(("127.0.0.1", port))
    for name in [n for n in os.environ if n.startswith("BEAM_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("BEAM_WORK_DIR", str(tmp_path / "worker"))
    monkeypatch.setenv("BEAM_DATABASE_URL", db_url)
    monkeypatch.setenv("BEAM_SECRET_KEY", OTHER)
    assert main(["worker"]) == 2
    assert "(BEM-375)" in capsys.readouterr().err
    monkeypatch.delenv("BEAM_SECRET_KEY")
    assert main(["worker"]) == 2
    assert "(BEM-376)" in capsys.readouterr().err


def test_the_reseal_command_and_a_worker_without_credentials(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in [n for n in os.environ if n.startswith("BEAM_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("BEAM_WORK_DIR", str(tmp_path / "work"))
    assert main(["secret-key", "--reseal"]) == 2
    assert "BEAM_SECRET_KEY is not set" in capsys.readouterr().err
    monkeypatch.setenv("BEAM_SECRET_KEY", f"{NEW},{OLD}")
    assert main(["worker"]) == 2  # an empty database: nothing registered yet
    assert "the worker has no GitHub App credentials" in capsys.readouterr().err
    assert main(["secret-key", "--reseal"]) == 0
    assert "holds no App credentials" in capsys.readouterr().out
    anyio.run(_seal_into, f"sqlite+aiosqlite:///{tmp_path / 'work' / 'beam.db'}", OLD)
    assert main(["secret-key", "--reseal"]) == 0
    assert "again with BEAM_SECRET_KEY's first key" in capsys.readouterr().out
    monkeypatch.setenv("BEAM_SECRET_KEY", NEW)
    assert main(["secret-key", "--reseal"]) == 0
    assert "sealed with the first key already" in capsys.readouterr().out
