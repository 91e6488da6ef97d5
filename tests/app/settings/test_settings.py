"""Settings validation messages, secret hiding, and the stored credentials file (mode 0600)."""

from __future__ import annotations

import json
import os
import socket
import stat
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from pydantic import SecretStr, ValidationError

from bot.app.credentials.files import AppCredentials, load_credentials, write_credentials_file
from bot.app.settings import Settings, SettingsError, describe_validation_error, load_settings
from bot.app.web.server import serve
from bot.beam.providers import KEY_VARS as PROVIDER_KEY_VARS

SECRET = "whsec-0123456789-abcdef"


@pytest.fixture(scope="module")
def pem() -> str:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


@pytest.fixture(autouse=True)
def no_beam_env(monkeypatch: pytest.MonkeyPatch) -> None:
    # The developer's own BEAM_* variables must not leak into what these tests build.
    for name in list(os.environ):
        if name.startswith(("BEAM_", "GFS_BEAM_")) or name in ("NVIDIA_API_KEY", *PROVIDER_KEY_VARS):
            monkeypatch.delenv(name)


def message(exc: pytest.ExceptionInfo[ValidationError]) -> str:
    return describe_validation_error(exc.value)


def test_app_id_without_secret_is_refused_with_a_clear_message(pem: str) -> None:
    with pytest.raises(ValidationError) as exc:
        Settings(_env_file=None, app_id=42, private_key=pem)
    assert "BEAM_WEBHOOK_SECRET is required when BEAM_APP_ID is set" in message(exc)


def test_app_id_without_any_key_is_refused() -> None:
    with pytest.raises(ValidationError) as exc:
        Settings(_env_file=None, app_id=42, webhook_secret=SECRET)
    assert "BEAM_PRIVATE_KEY or BEAM_PRIVATE_KEY_PATH is required" in message(exc)


def test_key_or_secret_without_app_id_is_refused(pem: str) -> None:
    with pytest.raises(ValidationError) as exc:
        Settings(_env_file=None, webhook_secret=SECRET)
    assert "BEAM_APP_ID is not" in message(exc)


def test_private_key_path_to_a_missing_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.pem"
    with pytest.raises(ValidationError) as exc:
        Settings(_env_file=None, app_id=42, webhook_secret=SECRET, private_key_path=missing)
    assert f"BEAM_PRIVATE_KEY_PATH: no file at {missing}" in message(exc)


def test_both_key_forms_are_refused(pem: str, tmp_path: Path) -> None:
    path = tmp_path / "key.pem"
    path.write_text(pem)
    with pytest.raises(ValidationError) as exc:
        Settings(_env_file=None, app_id=42, webhook_secret=SECRET, private_key=pem, private_key_path=path)
    assert "set only one of BEAM_PRIVATE_KEY and BEAM_PRIVATE_KEY_PATH" in message(exc)


def test_key_from_a_path_is_loaded(pem: str, tmp_path: Path) -> None:
    path = tmp_path / "key.pem"
    path.write_text(pem)
    settings = Settings(_env_file=None, app_id=42, webhook_secret=SECRET, private_key_path=path)
    creds = load_credentials(settings)
    assert creds is not None
    assert (creds.app_id, creds.source) == (42, "env")
    assert creds.private_key.get_secret_value() == pem.strip() + "\n"
    assert creds.webhook_secret.get_secret_value() == SECRET


def test_key_file_that_is_not_a_pem_fails_at_load(tmp_path: Path) -> None:
    path = tmp_path / "key.pem"
    path.write_text("hello")
    settings = Settings(_env_file=None, app_id=42, webhook_secret=SECRET, private_key_path=path)
    with pytest.raises(SettingsError, match="not a PEM private key"):
        load_credentials(settings)


def test_one_line_pem_with_escaped_newlines_is_accepted(pem: str) -> None:
    settings = Settings(_env_file=None, app_id=1, webhook_secret=SECRET, private_key=pem.replace("\n", "\\n"))
    assert settings.private_key is not None
    assert settings.private_key.get_secret_value() == pem.strip() + "\n"


def test_errors_and_repr_never_show_secrets(pem: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BEAM_APP_ID", "7")
    monkeypatch.setenv("BEAM_PRIVATE_KEY", "not-a-key-but-secret-XYZZY")
    monkeypatch.setenv("BEAM_WEBHOOK_SECRET", SECRET)
    with pytest.raises(SettingsError) as exc:
        load_settings()
    assert "BEAM_PRIVATE_KEY" in str(exc.value)
    assert "XYZZY" not in str(exc.value)

    settings = Settings(
        _env_file=None,
        app_id=7,
        private_key=pem,
        webhook_secret=SECRET,
        database_url="postgresql://u:dbpass-QQQ@db/beam",
        llm_api_key="sk-live-WWW",
    )
    shown = repr(settings) + str(settings) + repr(load_credentials(settings))
    for secret in (SECRET, "PRIVATE KEY", "dbpass-QQQ", "sk-live-WWW"):
        assert secret not in shown


def test_environment_is_read_with_the_prefix_and_empty_means_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BEAM_CONCURRENCY", "5")
    monkeypatch.setenv("BEAM_DATABASE_URL", "")
    monkeypatch.setenv("BEAM_GITHUB_API_URL", "https://ghe.example.com/api/v3/")
    monkeypatch.setenv("NVIDIA_API_KEY", "nv-key")
    settings = load_settings()
    assert settings.concurrency == 5
    assert settings.database_url is None
    assert settings.github_api_url == "https://ghe.example.com/api/v3"
    assert settings.github_web_url == "https://ghe.example.com"
    assert settings.has_llm_key
    assert settings.work_dir == (Path.cwd() / ".beam")


def test_a_providers_own_key_is_a_live_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 42: the App and the Action see OPENAI_API_KEY as a key, as the client does."""
    assert not load_settings().has_llm_key
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai")
    assert load_settings().has_llm_key


def test_bad_numbers_and_urls_name_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BEAM_CONCURRENCY", "0")
    monkeypatch.setenv("BEAM_PUBLIC_URL", "bot.example.org")
    with pytest.raises(SettingsError) as exc:
        load_settings()
    text = str(exc.value)
    assert "BEAM_CONCURRENCY" in text
    assert "BEAM_PUBLIC_URL must be an http(s) URL" in text


def test_defaults_are_setup_mode(tmp_path: Path) -> None:
    settings = Settings(_env_file=None, work_dir=tmp_path)
    assert settings.github_api_url == "https://api.github.com"
    assert settings.github_web_url == "https://github.com"
    assert settings.concurrency == 2
    assert not settings.has_llm_key
    assert load_credentials(settings) is None


def stored(pem: str) -> AppCredentials:
    return AppCredentials(
        app_id=99,
        private_key=SecretStr(pem),
        webhook_secret=SecretStr(SECRET),
        slug="beam-x",
        client_id="Iv1",
    )


def test_credentials_file_is_0600_and_round_trips(pem: str, tmp_path: Path) -> None:
    settings = Settings(_env_file=None, work_dir=tmp_path / "work")
    old_umask = os.umask(0)  # even a permissive umask must not widen the file
    try:
        write_credentials_file(settings.credentials_path, stored(pem))
    finally:
        os.umask(old_umask)
    mode = stat.S_IMODE(settings.credentials_path.stat().st_mode)
    assert mode == 0o600
    assert stat.S_IMODE(settings.work_dir.stat().st_mode) == 0o700
    assert sorted(p.name for p in settings.work_dir.iterdir()) == [".gitignore", "app-credentials.json"]
    assert "*" in (settings.work_dir / ".gitignore").read_text().splitlines()  # never committed by accident
    creds = load_credentials(settings)
    assert creds is not None
    assert (creds.app_id, creds.slug, creds.client_id, creds.source) == (99, "beam-x", "Iv1", "file")
    assert creds.webhook_secret.get_secret_value() == SECRET
    assert creds.private_key.get_secret_value() == pem


def test_environment_wins_over_the_stored_file(pem: str, tmp_path: Path) -> None:
    write_credentials_file(tmp_path / "app-credentials.json", stored(pem))
    settings = Settings(
        _env_file=None, work_dir=tmp_path, app_id=5, private_key=pem, webhook_secret="other-secret"
    )
    creds = load_credentials(settings)
    assert creds is not None
    assert (creds.app_id, creds.source, creds.webhook_secret.get_secret_value()) == (5, "env", "other-secret")


def test_damaged_credentials_file_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "app-credentials.json").write_text(json.dumps({"app_id": 1}))
    with pytest.raises(SettingsError, match="damaged: delete the file"):
        load_credentials(Settings(_env_file=None, work_dir=tmp_path))


def test_serve_refuses_to_start_with_damaged_credentials(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "app-credentials.json").write_text("{not json")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(SettingsError, match="damaged: delete the file"):
        serve(Settings(_env_file=None, work_dir=tmp_path), "127.0.0.1", port)
    with socket.socket() as sock:  # nothing was listening: the port is still free
        sock.bind(("127.0.0.1", port))


def test_beam_model_tools_is_validated_and_reaches_the_client(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 20: `auto` by default, any case accepted, a typo stops the start naming the variable."""
    from bot.app.assembly import llm_client
    from bot.beam.openai_client import OpenAiCompatible

    assert load_settings().model_tools == "auto"
    monkeypatch.setenv("BEAM_MODEL_TOOLS", " Text ")
    monkeypatch.setenv("BEAM_API_KEY", "k")
    settings = load_settings()
    assert settings.model_tools == "text"
    client = llm_client(settings)
    assert isinstance(client, OpenAiCompatible) and client.tools_mode == "text"
    monkeypatch.setenv("BEAM_MODEL_TOOLS", "json")
    with pytest.raises(SettingsError) as exc:
        load_settings()
    assert "BEAM_MODEL_TOOLS" in str(exc.value)
