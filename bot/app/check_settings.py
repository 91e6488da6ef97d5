"""The server's settings for checks (docs/checks.md), a base of `bot.app.settings.Settings`.

Kept apart so the jail's knobs read in one place; `Settings` inherits them, so each is still the
variable `BEAM_<FIELD NAME>` and validated at start with every other setting.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, NoDecode

_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOST = re.compile(rf"^(?:\*\.)?{_LABEL}(?:\.{_LABEL})*(?::\d{{1,5}})?$")


class CheckSettings(BaseSettings):
    """- MAX_CHECK_SECONDS (1800): the longest a check may run, whatever `checks_timeout` says.
    - CHECKS_ALLOWED_HOSTS (none): comma-separated hosts (`pypi.org`, `*.pythonhosted.org`,
      `host:port`) the `checks_setup` command may reach through the jail's proxy; none: no network.
    - CHECKS_CACHE_DIR (`<work_dir>/check-cache`): holds one directory per repository
      (`<owner>/<repo>`), which its checks see read-only.
    - CHECK_RUNS_PER_RUN (3): how often the author skill may call `run_checks` in one run; 0: no cap.
    """

    max_check_seconds: float = Field(default=1800.0, gt=0, le=24 * 3600)
    checks_allowed_hosts: Annotated[tuple[str, ...], NoDecode] = ()
    checks_cache_dir: Path | None = None
    check_runs_per_run: int = Field(default=3, ge=0)

    @field_validator("checks_allowed_hosts", mode="before")
    @classmethod
    def _hosts(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = [part.strip() for part in value.split(",") if part.strip()]
        if isinstance(value, list | tuple):
            for host in value:
                if not isinstance(host, str) or not _HOST.fullmatch(host):
                    raise ValueError(
                        f"BEAM_CHECKS_ALLOWED_HOSTS: {host!r} is not a host name (e.g. pypi.org, "
                        "*.pythonhosted.org, or host:port)"
                    )
            return tuple(value)
        return value

    @field_validator("checks_cache_dir")
    @classmethod
    def _absolute_cache(cls, value: Path | None) -> Path | None:
        return None if value is None else value.expanduser().absolute()
