"""What a push hands libgit2: the token in memory, once, and the per-ref rejections it reports.

Kept apart from `worktree.py` so the one place a credential is ever touched is small enough to read
whole: the token never reaches argv, a URL, a config file or an error message (`scrub`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import pygit2
from pygit2.enums import CredentialType

# Called when a push needs credentials: (username, password), kept in memory only.
Credentials = Callable[[], tuple[str, str]]


class PushCallbacks(pygit2.RemoteCallbacks):
    """Hands the token to libgit2 in memory, once, and records per-ref rejections."""

    def __init__(self, provider: Credentials | None) -> None:
        super().__init__()
        self._provider = provider
        self._attempts = 0
        self._secret: str | None = None
        self.rejected: list[tuple[str, str]] = []

    def credentials(self, url: str, username_from_url: str | None, allowed_types: CredentialType) -> Any:
        if self._provider is None or not allowed_types & CredentialType.USERPASS_PLAINTEXT:
            raise pygit2.GitError("the remote asks for credentials and none are configured")
        self._attempts += 1
        if self._attempts > 1:
            # libgit2 asks again after a 401; answering again would loop forever.
            raise pygit2.GitError("the remote refused the credentials")
        username, password = self._provider()
        self._secret = password
        return pygit2.UserPass(username, password)

    def push_update_reference(self, refname: str, message: str | None) -> None:
        if message is not None:
            self.rejected.append((refname, message))

    def scrub(self, text: str) -> str:
        """Never let the token into an error message."""
        return text.replace(self._secret, "***") if self._secret else text


def has_userinfo(url: str) -> bool:
    if "://" not in url:
        return False  # a local path or scp-like `host:path`: no place for a password
    try:
        parts = urlsplit(url)
    except ValueError:
        return True
    return "@" in parts.netloc
