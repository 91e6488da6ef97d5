"""The App's credentials as a process finds them: from the environment (`BEAM_APP_ID`, the private key,
the webhook secret) or from the file setup mode writes in the work directory. The database's sealed
copy, for several hosts, is `stored.py`'s."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from pydantic import SecretStr

from bot.app.settings import Settings, SettingsError, ensure_work_dir, normalise_pem


@dataclass(frozen=True, slots=True)
class AppCredentials:
    """What authenticates the App to GitHub and GitHub to us. Never logged: repr hides the secrets."""

    app_id: int
    private_key: SecretStr
    webhook_secret: SecretStr
    slug: str | None = None
    client_id: str | None = None
    source: str = "env"
    # Issue 44: the App's user-authorization flow ("Sign in with GitHub" on /dashboard); the
    # manifest conversion returns both, BEAM_CLIENT_ID and BEAM_CLIENT_SECRET give them otherwise.
    client_secret: SecretStr | None = None

    def __repr__(self) -> str:
        return f"AppCredentials(app_id={self.app_id}, slug={self.slug!r}, source={self.source!r})"


def load_credentials(settings: Settings) -> AppCredentials | None:
    """The App credentials from the environment, else from the stored file, else None (setup mode).

    Blocking (small file reads): call it at start or through `anyio.to_thread.run_sync`.
    """
    if settings.app_id is not None:
        assert settings.webhook_secret is not None  # the model validator guarantees it
        key = settings.private_key
        if key is None:
            assert settings.private_key_path is not None
            key = _read_key_file(settings.private_key_path)
        return AppCredentials(
            settings.app_id,
            key,
            settings.webhook_secret,
            client_id=settings.client_id,
            client_secret=settings.client_secret,
            source="env",
        )
    return read_credentials_file(settings.credentials_path)


def _read_key_file(path: Path) -> SecretStr:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SettingsError(f"BEAM_PRIVATE_KEY_PATH: cannot read {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise SettingsError(f"BEAM_PRIVATE_KEY_PATH: {path} is not a PEM text file") from None
    try:
        return SecretStr(normalise_pem(text, f"BEAM_PRIVATE_KEY_PATH ({path})"))
    except ValueError as exc:
        raise SettingsError(str(exc)) from None


def read_credentials_file(path: Path) -> AppCredentials | None:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise SettingsError(f"cannot read the stored App credentials {path}: {exc.strerror}") from None
    try:
        data = json.loads(raw)
        creds = AppCredentials(
            app_id=int(data["app_id"]),
            private_key=SecretStr(normalise_pem(str(data["pem"]), f"the key in {path}")),
            webhook_secret=SecretStr(str(data["webhook_secret"])),
            slug=data.get("slug"),
            client_id=data.get("client_id"),
            client_secret=optional_secret(data.get("client_secret")),
            source="file",
        )
    except (ValueError, KeyError, TypeError):
        raise SettingsError(
            f"the stored App credentials {path} are damaged: delete the file to register again, "
            "or set BEAM_APP_ID, BEAM_PRIVATE_KEY and BEAM_WEBHOOK_SECRET"
        ) from None
    return creds


def write_credentials_file(path: Path, creds: AppCredentials) -> None:
    """Writes the file atomically, readable by this user only from its first byte (mode 0600).

    The temporary file is created with 0600 by `os.open`, so the secret is never world-readable, even
    between creation and `chmod`; the rename makes a half-written file impossible.
    """
    ensure_work_dir(path.parent)
    body = json.dumps(
        {
            "app_id": creds.app_id,
            "slug": creds.slug,
            "client_id": creds.client_id,
            "client_secret": None if creds.client_secret is None else creds.client_secret.get_secret_value(),
            "webhook_secret": creds.webhook_secret.get_secret_value(),
            "pem": creds.private_key.get_secret_value(),
        },
        indent=2,
    ).encode()
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        with os.fdopen(fd, "wb") as fh:
            os.fchmod(fh.fileno(), 0o600)  # the umask can only remove bits; this pins the mode exactly
            fh.write(body)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def optional_secret(value: object) -> SecretStr | None:
    """A stored client secret; files written before issue 44 have none (the dashboard says so)."""
    return SecretStr(value) if isinstance(value, str) and value else None
