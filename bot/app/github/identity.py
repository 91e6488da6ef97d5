"""The App's own bot login: from the settings, or asked of GitHub once and then kept for the process.

Our own comments are never commands, our own approval comment is the only one whose reactions
count, and commits made by runs carry this identity; all three read it here.
"""

from __future__ import annotations

import logging

from bot.app.github.api import GitHubError
from bot.app.github.auth import GitHubApp

log = logging.getLogger("beam.jobs")


class BotIdentity:
    def __init__(self, github: GitHubApp, login: str | None = None) -> None:
        self._github = github
        self._login = login

    @property
    def known(self) -> str | None:
        """The login if it is known by now, without asking GitHub."""
        return self._login

    async def login(self) -> str | None:
        """The login, asked of GitHub the first time it is needed; None while GitHub cannot say."""
        if self._login is None:
            try:
                self._login = (await self._github.get_app()).bot_login
            except GitHubError as error:
                log.warning("could not read the App's login: %s", error)
        return self._login
