"""The `checks` settings of `.github/beam.yml`: the repository's own commands, run in the jail on
every commit the bot asks a maintainer to approve (docs/checks.md).

Only the shape lives here; the server caps the timeout (`BEAM_MAX_CHECK_SECONDS`) when it runs them,
because a repository must not be able to hold a worker longer than its operator allows.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, WithJsonSchema

from bot.app.repo_config.durations import duration_pattern, duration_seconds

MAX_CHECKS = 20
MAX_COMMAND_CHARS = 4000
MIN_CHECK_SECONDS = 1
MAX_CHECK_SECONDS = 24 * 3600  # the file's own bound; the server's is usually far lower
DEFAULT_CHECKS_TIMEOUT = "10m"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 _.:/-]{0,63}$")
_DURATION = duration_pattern("smh", 6)

_TIMEOUT_SCHEMA: dict[str, Any] = {
    "anyOf": [
        {"type": "string", "pattern": _DURATION.pattern},
        {"type": "integer", "minimum": MIN_CHECK_SECONDS, "maximum": MAX_CHECK_SECONDS},
    ],
    "default": DEFAULT_CHECKS_TIMEOUT,
    "description": "How long each check may run: '10m', '90s', '1h30m' (units s, m, h) or whole "
    "seconds. The server's BEAM_MAX_CHECK_SECONDS caps it.",
    "title": "Checks Timeout",
}


def check_seconds(value: Any) -> int:
    """Seconds in a `checks_timeout`; raises ValueError with a message fit for the config's author."""
    return duration_seconds(
        value,
        _DURATION,
        examples="'10m', '90s', '1h30m' (units s, m, h)",
        bounds=(MIN_CHECK_SECONDS, MAX_CHECK_SECONDS),
        bound_words=("1 second", "24 hours"),
    )


def _check_timeout(value: Any) -> Any:
    check_seconds(value)
    return value


def _command(value: str) -> str:
    if not value.strip():
        raise ValueError("the command is empty")
    if "\x00" in value:
        raise ValueError("the command contains a NUL character")
    if len(value) > MAX_COMMAND_CHARS:
        raise ValueError(f"the command is longer than {MAX_COMMAND_CHARS} characters")
    return value


def _unique_names(value: list[CheckEntry]) -> list[CheckEntry]:
    seen: set[str] = set()
    for entry in value:
        if entry.name.lower() in seen:
            raise ValueError(f"two checks are named {entry.name!r}; each needs its own name")
        seen.add(entry.name.lower())
    return value


Command = Annotated[str, AfterValidator(_command)]


class CheckEntry(BaseModel):
    """One check: a name the approval comment shows, and a shell command run at the tree's root."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, title="CheckEntry")

    name: str = Field(
        pattern=_NAME.pattern,
        description="Shown on the approval comment and the `beam / checks` check run (letters, digits, "
        "space, _ . : / -; at most 64).",
    )
    run: Command = Field(description="A shell command (`sh -c`), run at the root of the checked tree.")


Checks = Annotated[list[CheckEntry], Field(max_length=MAX_CHECKS), AfterValidator(_unique_names)]
ChecksTimeout = Annotated[str | int, BeforeValidator(_check_timeout), WithJsonSchema(_TIMEOUT_SCHEMA)]

CHECK_FIELDS = ("checks", "checks_timeout", "checks_required", "checks_setup")
