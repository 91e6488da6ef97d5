"""`BEAM_SECRET_KEY`, the key that seals the App's credentials in the database: a base of `Settings`.

Kept apart from `settings.py` (as the limits and checks are) so that what credentials need reads in
one place; `Settings` inherits it, so it is still validated at start with every other setting, and a
malformed key stops the start with a message that names the key by position, never its value.
"""

from __future__ import annotations

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings

from bot.app.secret_key import SecretKeys, parse_keys


class CredentialSettings(BaseSettings):
    """The secret key setting (`secret_keys` is its keyring, None when unset) and setup mode's look for
    credentials registered elsewhere."""

    # Issue 23: one or more Fernet keys, comma-separated; the first seals, all open (docs/configuration.md).
    secret_key: SecretStr | None = None
    # Seconds between looks, in setup mode, for credentials another host registered in the shared
    # database: the server then serves them without a restart. 0: it never looks.
    setup_poll_interval: float = Field(default=5.0, ge=0)

    @field_validator("secret_key")
    @classmethod
    def _secret_key(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None:
            parse_keys(value.get_secret_value())
        return value

    @property
    def secret_keys(self) -> SecretKeys | None:
        return None if self.secret_key is None else SecretKeys(self.secret_key.get_secret_value())
