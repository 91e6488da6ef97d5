"""The server's settings: every `BEAM_*` variable in one class (`variables.py`, validated at start),
and the keyring `BEAM_SECRET_KEY` names (`secret_key.py`). Any layer may import them; they import
nothing of `bot.app` but each other (and `bot.beam`'s errors)."""

from bot.app.settings.variables import (
    CREDENTIALS_FILE,
    DEFAULT_GITHUB_API_URL,
    Settings,
    SettingsError,
    describe_validation_error,
    ensure_work_dir,
    load_settings,
    normalise_pem,
    split_listen,
)

__all__ = [
    "CREDENTIALS_FILE",
    "DEFAULT_GITHUB_API_URL",
    "Settings",
    "SettingsError",
    "describe_validation_error",
    "ensure_work_dir",
    "load_settings",
    "normalise_pem",
    "split_listen",
]
