"""`BEAM_SECRET_KEY`: the keys that seal what the database keeps secret (the App's credentials).

The database is shared by every process on every host, and its backups and replicas travel further
than one host's disk, so the App's private key and webhook secret are kept there sealed with a key
only the processes have. Sealing is `cryptography`'s Fernet (AES-128-CBC with an HMAC-SHA256 over
the whole token): authenticated, so a wrong key or an altered byte is refused (BEM-375), never
decrypted into garbage credentials. See https://cryptography.io/en/latest/fernet/

The setting is a comma-separated list of Fernet keys. The first seals; every one opens (`MultiFernet`),
so a key is rotated by putting a new one first, then sealing again with it what an older key sealed
(`reseal`, `beam-bot secret-key --reseal`), then dropping the old key (docs/configuration.md,
"Rotating BEAM_SECRET_KEY").
"""

from __future__ import annotations

from cryptography.fernet import Fernet, InvalidToken, MultiFernet

from bot.beam.errors import BeamError

GENERATE_HINT = "generate one with `beam-bot secret-key`"


def generate_key() -> str:
    """A new random Fernet key (32 bytes, url-safe base64), for `beam-bot secret-key`."""
    return Fernet.generate_key().decode("ascii")


def parse_keys(value: str) -> list[Fernet]:
    """The keys of a `BEAM_SECRET_KEY` value, first one first; ValueError naming the bad one.

    The message never repeats a key: it says which one, by position, is wrong.
    """
    parts = [part.strip() for part in value.split(",")]
    if not any(parts):
        raise ValueError(f"BEAM_SECRET_KEY is empty: {GENERATE_HINT}")
    keys = []
    for number, part in enumerate(parts, start=1):
        try:
            keys.append(Fernet(part.encode("ascii")))
        except (ValueError, UnicodeEncodeError):
            where = f"key {number} of {len(parts)}" if len(parts) > 1 else "the value"
            raise ValueError(
                f"BEAM_SECRET_KEY: {where} is not a Fernet key (32 bytes in url-safe base64, 44 characters); "
                f"{GENERATE_HINT} (BEM-377)"
            ) from None
    return keys


class SecretKeys:
    """The keyring of one `BEAM_SECRET_KEY` value: `seal` with the first key, `open` with any."""

    def __init__(self, value: str) -> None:
        keys = parse_keys(value)
        self._first = keys[0]
        self._all = MultiFernet(keys)
        self.count = len(keys)

    def seal(self, data: bytes) -> str:
        return self._first.encrypt(data).decode("ascii")

    def open(self, token: str, what: str) -> bytes:
        """The plaintext of `token`; BeamError BEM-375 when no key opens it (wrong key, or altered)."""
        try:
            return self._all.decrypt(token.encode("ascii"))
        except (InvalidToken, UnicodeEncodeError):
            keys = "none of the keys" if self.count > 1 else "the key"
            raise BeamError(
                "BEM-375",
                f"{keys} in BEAM_SECRET_KEY cannot open {what}: it was sealed with another key, or it "
                "was altered. Set the key every other process uses (an older key may follow the new "
                "one, comma-separated), or delete the row to register the App again",
            ) from None

    def sealed_with_first(self, token: str) -> bool:
        """Whether the first key opens `token` (else an older one sealed it: `reseal` it)."""
        try:
            self._first.decrypt(token.encode("ascii"))
        except (InvalidToken, UnicodeEncodeError):
            return False
        return True

    def reseal(self, token: str) -> str:
        """`token` sealed again with the first key (its time stamp kept); BEM-375 as `open`."""
        self.open(token, "the sealed value")
        return self._all.rotate(token.encode("ascii")).decode("ascii")
