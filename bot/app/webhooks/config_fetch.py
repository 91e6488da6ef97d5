"""The repository config and the commenter's permission, fetched at once before the first sign of life.

Both are needed before the bot may react to a command, and neither depends on the other, so they are
one GitHub round trip instead of two. The config read is revalidated with its ETag (a 304 is free,
see `bot.app.github.file_cache`); the permission is asked at the time of the command, never cached.
"""

from __future__ import annotations

from typing import Protocol

import anyio

from bot.app.github.models import Permission
from bot.app.repo_config import ConfigResult, load_repo_config


class ConfigReader(Protocol):
    """What `load_config_and_permission` needs of `InstallationClient`."""

    async def get_file(self, owner: str, repo: str, path: str, ref: str | None = None) -> str | None: ...

    async def get_permission(self, owner: str, repo: str, user: str) -> Permission: ...


async def load_config_and_permission(
    gh: ConfigReader, owner: str, repo: str, default_branch: str, login: str
) -> tuple[ConfigResult, Permission]:
    """The repository config and `login`'s permission, asked of GitHub at once: one round trip
    before the first sign of life instead of two. The permission is read now, at the command."""
    config: ConfigResult | None = None
    permission: Permission | None = None

    async def read_config() -> None:
        nonlocal config
        config = await load_repo_config(gh.get_file, owner, repo, default_branch)

    async def read_permission() -> None:
        nonlocal permission
        permission = await gh.get_permission(owner, repo, login)

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(read_config)
            tg.start_soon(read_permission)
    except BaseExceptionGroup as group:
        # Callers handle GitHubError and friends, not groups: raise what went wrong first.
        raise group.exceptions[0] from None
    assert config is not None and permission is not None
    return config, permission
