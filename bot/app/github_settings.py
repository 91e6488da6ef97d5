"""How long beam-bot waits on GitHub: one call, and an outage. A base of `Settings`.

Kept apart from `settings.py` (as the limits, checks and credentials are) so the two waits that
decide what a crash or an outage does read in one place; `Settings` inherits them, so they are still
validated at start with every other setting.
"""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings


class GitHubSettings(BaseSettings):
    """`BEAM_GITHUB_TIMEOUT` and `BEAM_GITHUB_OUTAGE_WAIT` (docs/configuration.md)."""

    # Seconds one GitHub API call may take before the client gives up; with GitHub's own 10 s limit
    # it also bounds how long a retry waits before it looks for a write a dead attempt began (issue 23).
    github_timeout: float = Field(default=30.0, gt=0, le=300)
    # Issue 23: seconds a run that GitHub fails with a 5xx or no answer waits for it, trying again
    # with a growing backoff, before it fails (BEM-380); 0 fails it at once.
    github_outage_wait: float = Field(default=1800.0, ge=0)
