"""A pull request on the fake GitHub, its commits on a real git HTTP server, and a scripted model:
what `beam-bot review|summarize|ask <URL>` reads, for the tests that run it as a process."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.support.fake_github import FakeGitHub, checked_fake_github, serve_fake_github
from tests.support.fake_github_state import PullFile
from tests.support.git_http import GitHttpServer
from tests.support.openai_server import FakeOpenAI

REPO = "octo/demo"
NUMBER = 7
PATCH = "@@ -1,2 +1,3 @@\n def add(a, b):\n-    return a - b\n+    return a + b\n+# fixed\n"
URL = f"https://github.com/{REPO}/pull/{NUMBER}"


@dataclass
class Stack:
    fake: FakeGitHub
    api_url: str
    git: GitHttpServer
    llm: FakeOpenAI
    token: str

    def env(self, **extra: str) -> dict[str, str]:
        keep = {k: v for k, v in os.environ.items() if not k.startswith(("BEAM_", "GITHUB_", "GH_"))}
        return {
            **keep,
            "GITHUB_TOKEN": self.token,
            "GITHUB_API_URL": self.api_url,
            "BEAM_API_KEY": "cli-llm-key",
            "BEAM_API_BASE_URL": self.llm.url,
            "BEAM_MODEL": "fake-model",
            **extra,
        }

    def cli(self, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "bot.cli", *args],
            env=env or self.env(),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    def script_review(self) -> None:
        self.llm.reply_tool_calls(
            (
                "review_change",
                {
                    "body": "The fix is right.",
                    "comments": [
                        {"path": "src/calc.py", "line": 2, "body": "Consider a test for negative numbers."}
                    ],
                },
            )
        )
        self.llm.reply_text("Reviewed.")


@contextmanager
def pull_request_stack(
    tmp_path: Path, on_git: Callable[[], None] | None = None, model_server: FakeOpenAI | None = None
) -> Iterator[Stack]:
    """The stack; `on_git` runs in the git server's thread at each git request (a test holds a
    fetch there); `model_server` is a provider's stand-in (tests/support/provider_servers.py), else
    the plain scripted model."""
    with ExitStack() as exits:
        git = exits.enter_context(GitHttpServer(tmp_path / "git", token=None))
        fake = exits.enter_context(checked_fake_github(git_base_url=git.url))
        api_url = exits.enter_context(serve_fake_github(fake))
        llm = exits.enter_context(model_server or FakeOpenAI())
        token, _ = fake.mint_token(1)
        git.set_token(lambda password: (on_git is None or on_git() is None) and password == token)
        main = git.seed(REPO, {"README.md": "Demo\n", "src/calc.py": "def add(a, b):\n    return a - b\n"})
        head = git.commit(
            REPO,
            {"src/calc.py": "def add(a, b):\n    return a + b\n# fixed\n"},
            branch="feature",
            message="Fix add",
        )
        git.create_pull_ref(REPO, NUMBER, head)
        fake.add_repo(REPO)
        fake.add_pull(
            REPO,
            number=NUMBER,
            title="Fix add so that it adds",
            body="Closes #3.",
            head_ref="feature",
            head_sha=head,
            base_sha=main,
            files=[PullFile("src/calc.py", additions=2, deletions=1, patch=PATCH)],
        )
        yield Stack(fake, api_url, git, llm, token)
