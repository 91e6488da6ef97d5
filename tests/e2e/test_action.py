"""Issue 31 end to end: `beam-bot action` as a process, in the GitHub Actions environment, on the fake
GitHub with real git: one event file per workflow run (GitHub's own payloads, without the
`installation` key, as Actions writes them), the workflow's token, and what the run posted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.fake_github import FakeGitHub, checked_fake_github, serve_fake_github
from tests.support.fake_github_state import PullFile
from tests.support.git_http import GitHttpServer
from tests.support.openai_server import FakeOpenAI
from tests.support.webhooks import issue_comment_payload

REPO = "octo/demo"
NUMBER = 7
PATCH = "@@ -1,2 +1,3 @@\n def add(a, b):\n-    return a - b\n+    return a + b\n+# fixed\n"


@dataclass
class Runner:
    """A GitHub Actions runner's view: the fake GitHub, its git, the model server and the token."""

    fake: FakeGitHub
    api_url: str
    git: GitHttpServer
    llm: FakeOpenAI
    token: str
    tmp: Path
    runs: int = 0

    def env(self, event: str, payload: dict[str, Any]) -> dict[str, str]:
        self.runs += 1
        event_path = self.tmp / f"event-{self.runs}.json"
        event_path.write_text(json.dumps(payload), encoding="utf-8")
        temp = self.tmp / f"runner-temp-{self.runs}"
        temp.mkdir()
        keep = {k: v for k, v in os.environ.items() if not k.startswith(("BEAM_", "GITHUB_", "RUNNER_"))}
        return {
            **keep,
            "GITHUB_ACTIONS": "true",
            "GITHUB_EVENT_NAME": event,
            "GITHUB_EVENT_PATH": str(event_path),
            "GITHUB_TOKEN": self.token,
            "GITHUB_API_URL": self.api_url,
            "GITHUB_SERVER_URL": "https://github.com",
            "GITHUB_REPOSITORY": REPO,
            "GITHUB_RUN_ID": str(1000 + self.runs),
            "RUNNER_TEMP": str(temp),
            # The fake names the token's comments as the App's bot; Actions' would be github-actions[bot].
            "BEAM_BOT_LOGIN": self.fake.bot_login,
            "BEAM_API_KEY": "action-llm-key",
            "BEAM_API_BASE_URL": self.llm.url,
            "BEAM_MODEL": "fake-model",
            "BEAM_GITHUB_TIMEOUT": "5",
        }

    def action(self, event: str, payload: dict[str, Any]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "bot.cli", "action"],
            env=self.env(event, payload),
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )

    def command(self, body: str, *, user: str = "maintainer") -> dict[str, Any]:
        comment = self.fake.add_comment(REPO, NUMBER, body, user=user)
        payload = issue_comment_payload(
            body, repo=REPO, number=NUMBER, commenter=user, comment_id=comment.id, installation_id=None
        )
        payload["repository"]["clone_url"] = self.git.repo_url(REPO)
        return payload

    def bot_comments(self) -> list[str]:
        return [c.body for c in self.fake.comments_on(REPO, NUMBER) if c.user == self.fake.bot_login]


@pytest.fixture
def runner(tmp_path: Path) -> Iterator[Runner]:
    with ExitStack() as stack:
        git = stack.enter_context(GitHttpServer(tmp_path / "git", token=None))
        fake = stack.enter_context(checked_fake_github(git_base_url=git.url))
        api_url = stack.enter_context(serve_fake_github(fake))
        llm = stack.enter_context(FakeOpenAI())
        token, _ = fake.mint_token(1)  # what GITHUB_TOKEN is: a token of the repository's installation
        git.set_token(lambda password: password == token)
        main = git.seed(REPO, {"README.md": "Demo\n", "src/calc.py": "def add(a, b):\n    return a - b\n"})
        head = git.commit(
            REPO,
            {"src/calc.py": "def add(a, b):\n    return a + b\n# fixed\n"},
            branch="feature",
            message="Fix add",
        )
        git.create_pull_ref(REPO, NUMBER, head)
        fake.add_repo(REPO)
        fake.add_collaborator(REPO, "maintainer", "write")
        fake.add_collaborator(REPO, "reader", "read")
        fake.add_pull(
            REPO,
            number=NUMBER,
            title="Fix add",
            head_ref="feature",
            head_sha=head,
            base_sha=main,
            files=[PullFile("src/calc.py", additions=2, deletions=1, patch=PATCH)],
        )
        yield Runner(fake, api_url, git, llm, token, tmp_path)


def test_beam_review_in_a_workflow_posts_the_review_and_exits_0(runner: Runner) -> None:
    runner.llm.reply_tool_calls(("read_file", {"path": "src/calc.py"}))
    runner.llm.reply_tool_calls(
        (
            "review_change",
            {
                "body": "The fix is right.",
                "comments": [{"path": "src/calc.py", "line": 2, "body": "Good catch."}],
            },
        )
    )
    runner.llm.reply_text("Reviewed: `src/calc.py:2` now adds.")

    done = runner.action("issue_comment", runner.command("/beam review"))

    assert done.returncode == 0, done.stderr
    assert "review succeeded" in done.stdout and "done" in done.stdout
    reviews = runner.fake.reviews_on(REPO, NUMBER)
    assert len(reviews) == 1
    assert reviews[0].event == "COMMENT" and "The fix is right." in reviews[0].body
    assert reviews[0].commit_id == runner.fake.pull(REPO, NUMBER).head_sha
    # One tracking comment, final, with the same answer the App gives.
    [tracking] = runner.bot_comments()
    assert "Posted a review" in tracking and "beam-run:" in tracking
    # The checkout went through git with the workflow's token; the token is in no comment.
    assert any(r.authorized for r in runner.git.requests)
    assert runner.token not in tracking and runner.token not in reviews[0].body
    assert runner.token not in done.stdout + done.stderr


def test_a_command_from_a_reader_is_refused_before_any_model_call(runner: Runner) -> None:
    done = runner.action("issue_comment", runner.command("/beam review", user="reader"))

    assert done.returncode == 0, done.stderr
    assert runner.llm.requests == []  # the Clinejection lesson: nothing reached a model
    assert runner.fake.reviews_on(REPO, NUMBER) == []
    [refusal] = runner.bot_comments()
    assert "@reader" in refusal and "write" in refusal


def test_an_event_that_asks_nothing_does_nothing(runner: Runner) -> None:
    done = runner.action("issue_comment", runner.command("Thanks, looks good."))

    assert done.returncode == 0, done.stderr
    assert "nothing to do" in done.stdout
    assert runner.bot_comments() == [] and runner.llm.requests == []


def test_outside_actions_it_says_what_is_missing_with_exit_2(runner: Runner) -> None:
    env = runner.env("issue_comment", runner.command("/beam review"))
    del env["GITHUB_TOKEN"]
    done = subprocess.run(
        [sys.executable, "-m", "bot.cli", "action"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "BEM-390" in done.stderr and "GITHUB_TOKEN" in done.stderr
    assert runner.bot_comments() == []
