"""beam-bot: the Riverbeam framework (`bot.beam`) and the GitHub App built on it (`bot.app`)."""

from __future__ import annotations


def package_version() -> str:
    """The installed beam-bot's version (`beam-bot --version`, the start-up log)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("beam-bot")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed)"
