"""What `beam-bot review|summarize|ask <URL>` was asked for, checked before anything heavy is loaded:
the pull request a URL names, the API that serves it, and the token that reads it.

It imports neither the App nor the HTTP client, so a mistyped URL or a missing token is one line at
once, not after seconds of imports (bench/cli_startup.py); `pull_request.py` does the work.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bot.beam.errors import BeamError
from bot.local.git import UsageError

if TYPE_CHECKING:
    from pydantic import SecretStr

_URL = re.compile(
    r"^https?://(?P<host>[^/\s]+)/(?P<owner>[^/\s]+)/(?P<repo>[^/\s]+)/pulls?/(?P<number>\d+)(?:[/?#].*)?$"
)
BAD_URL, NO_TOKEN = "BEM-391", "BEM-392"


@dataclass(frozen=True, slots=True)
class PullTarget:
    host: str
    owner: str
    repo: str
    number: int
    api_url: str

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.repo}"


def parse_pull_url(url: str, env: Mapping[str, str]) -> PullTarget:
    """The pull request a URL names, and the API to read it from; BEM-391 when it names none."""
    found = _URL.match(url.strip())
    if found is None:
        raise BeamError(BAD_URL, f"{url!r}")
    host = found.group("host")
    api = env.get("GITHUB_API_URL") or (
        "https://api.github.com"
        if host.lower() in ("github.com", "www.github.com")
        else f"https://{host}/api/v3"
    )
    repo = found.group("repo").removesuffix(".git")
    return PullTarget(host, found.group("owner"), repo, int(found.group("number")), api.rstrip("/"))


def find_token(host: str, env: Mapping[str, str]) -> SecretStr:
    """GITHUB_TOKEN, GH_TOKEN, or the gh CLI's token for the host; BEM-392 when there is none."""
    from pydantic import SecretStr  # here: a mistyped URL is answered without loading pydantic

    for name in ("GITHUB_TOKEN", "GH_TOKEN"):
        if env.get(name):
            return SecretStr(env[name])
    gh = shutil.which("gh")
    if gh is not None:
        try:
            done = subprocess.run(
                [gh, "auth", "token", "--hostname", host],
                capture_output=True,
                text=True,
                timeout=20,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired):
            done = None
        if done is not None and done.returncode == 0 and done.stdout.strip():
            return SecretStr(done.stdout.strip())
    raise BeamError(NO_TOKEN, f"for {host}")


@dataclass(frozen=True, slots=True)
class PullOptions:
    skill: str  # review, summarize, ask
    url: str
    instructions: str = ""
    post: bool = False
    as_json: bool = False


def check_pull(options: PullOptions, env: Mapping[str, str]) -> tuple[PullTarget, SecretStr]:
    """The pull request and the token, or BeamError (BEM-391, BEM-392) or UsageError: all that can
    be wrong with the command line before GitHub is asked."""
    target = parse_pull_url(options.url, env)
    if options.skill == "ask" and not options.instructions.strip():
        raise UsageError('ask needs a question: beam-bot ask URL "what does this change do?"')
    return target, find_token(target.host, env)
