"""Credentials for the fake GitHub: the test App's RSA key pair and GitHub's checks of an App JWT.

The key is generated at test time and never written to disk; `shared_app_key()` reuses one per
test session because generating an RSA key costs tens of milliseconds.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import SimpleNamespace
from unittest import mock

import gidgethub.apps
import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.support.fake_github_handlers import Answer


@dataclass(frozen=True)
class AppKey:
    """An App's RSA key pair; generated at test time, never written to disk."""

    private_pem: str
    public_pem: str


def generate_app_key() -> AppKey:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return AppKey(private.decode(), public.decode())


@functools.cache
def shared_app_key() -> AppKey:
    """One key per test session: generating RSA keys costs tens of milliseconds each."""
    return generate_app_key()


@contextmanager
def gidgethub_clock(clock: Callable[[], float]) -> Iterator[None]:
    """gidgethub makes App JWTs at `time.time()` as `gidgethub.apps` reads it; within this, at `clock()`,
    so the JWT follows a test's injected clock like every other time the fake checks."""
    with mock.patch.object(gidgethub.apps, "time", SimpleNamespace(time=clock)):
        yield


def app_jwt_at(app_id: int | str, private_pem: str, now: float) -> str:
    """The App JWT gidgethub makes, as it makes it at `now`."""
    with gidgethub_clock(lambda: now):
        return gidgethub.apps.get_jwt(app_id=str(app_id), private_key=private_pem)


def check_app_jwt(token: str, public_pem: str, app_id: int, now: float) -> None:
    """Refuses a JWT the way GitHub does: bad signature, wrong issuer, expired, or longer than 10 minutes."""
    unchecked = {"verify_exp": False, "verify_iat": False, "verify_nbf": False, "verify_iss": False}
    try:  # the times are checked below against the fake's clock, not the wall clock
        claims = jwt.decode(token, public_pem, algorithms=["RS256"], options=unchecked)  # type: ignore[arg-type]
    except jwt.PyJWTError:
        raise Answer(401, "A JSON web token could not be decoded") from None
    iat, exp = claims.get("iat"), claims.get("exp")
    if str(claims.get("iss")) != str(app_id):
        raise Answer(401, "'Issuer' claim ('iss') must be an Integer")
    if not isinstance(iat, int) or iat > now + 1:
        raise Answer(401, "'Issued at' claim ('iat') must be an Integer representing the time issued")
    if not isinstance(exp, int) or exp <= now:
        raise Answer(401, "'Expiration time' claim ('exp') must be a numeric value in the future")
    if exp - iat > 600 or exp - now > 600:
        raise Answer(401, "'Expiration time' claim ('exp') is too far in the future")
