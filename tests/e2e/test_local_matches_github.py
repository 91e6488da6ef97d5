"""Issue 20: `beam-bot run review` on a checkout builds what `/beam review` builds for a pull request
with that diff: the same request to the model (system prompt, user prompt, tools, limits), through
the same code. And on both paths a model that answers in plain text gets its text as the review body,
without inline comments, and the output says so."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.local.test_run import git, run_cli
from tests.support.bot_process import SECRET, BotProcess, bot_stack, comment_payload, wait_for
from tests.support.fake_github_state import PullFile
from tests.support.webhooks import delivery, issue_comment_payload

REPO = "octo/demo"
BOT_LOGIN = "beam-bot[bot]"
BASE = {
    "README.md": "Demo\n",
    "src/calc.py": "def add(a, b):\n    return a - b\n\n\ndef two():\n    return 2",
}
HEAD = {
    "src/calc.py": "def add(a, b):\n    return a + b\n\n\ndef two():\n    return 2\n",
    "NOTES.md": "New\n",
}
# The files as GitHub's pulls/files API lists them for this change (patches without a file header,
# no final newline, the "\ No newline" marker where the old side ended without one).
GITHUB_FILES = [
    PullFile("NOTES.md", status="added", additions=1, deletions=0, patch="@@ -0,0 +1 @@\n+New"),
    PullFile(
        "src/calc.py",
        additions=2,
        deletions=2,
        patch="@@ -1,6 +1,6 @@\n def add(a, b):\n-    return a - b\n+    return a + b\n \n \n def two():\n"
        "-    return 2\n\\ No newline at end of file\n+    return 2",
    ),
]


@pytest.fixture
def bot(tmp_path: Path) -> Iterator[BotProcess]:
    with bot_stack(tmp_path) as bot:
        main = bot.git.seed(REPO, BASE)
        head = bot.git.commit(REPO, HEAD, branch="feature", message="Fix add\n\nIt subtracted.\n")
        bot.git.create_pull_ref(REPO, 7, head)
        bot.fake.add_repo(REPO)
        bot.fake.add_collaborator(REPO, "maintainer", "write")
        bot.fake.add_pull(
            REPO,
            number=7,
            title="Fix add",
            body="It subtracted.",
            head_ref="feature",
            head_sha=head,
            base_sha=main,
            files=GITHUB_FILES,
        )
        bot.start()
        yield bot


def checkout_of(bot: BotProcess, where: Path) -> Path:
    """The maintainer's clone of the repository, on the pull request's branch."""
    subprocess.run(
        ["git", "clone", "-q", str(bot.git.bare_path(REPO)), str(where)], check=True, capture_output=True
    )
    git(where, "checkout", "-q", "feature")
    git(where, "config", "user.name", "maintainer")
    return where


def review_command(bot: BotProcess) -> str:
    body = "/beam review"
    comment = bot.fake.add_comment(REPO, 7, body, user="maintainer")
    payload = issue_comment_payload(body, repo=REPO, number=7, commenter="maintainer", comment_id=comment.id)
    assert bot.send(delivery("issue_comment", comment_payload(bot, payload, REPO), SECRET)).status_code == 202

    def final() -> str | None:
        bodies = [c.body for c in bot.fake.comments_on(REPO, 7) if c.user == BOT_LOGIN]
        return next((b for b in bodies if "beam-run:" in b and "Working on" not in b), None)

    return wait_for(final, timeout=45, what="the final tracking comment")


def as_local(request: dict[str, Any]) -> str:
    """The request as text, without the two things a checkout cannot share: the pull request (a
    checkout's change is named a local change, with no number and no author, in the data and in the
    task), and the transport (the terminal streams its answers to show progress, the App does not)."""
    same = {k: v for k, v in request.items() if k not in ("stream", "stream_options")}
    text = json.dumps(same, sort_keys=True).replace("pull request #7:", "local change (not a pull request):")
    text = re.sub(r"\\nauthor: @[^\\]+", "", text)
    return text.replace("this pull request.", "this local change.").replace(
        "The pull request below", "The local change below"
    )


def test_the_local_review_sends_the_model_what_the_github_review_sends(
    bot: BotProcess, tmp_path: Path
) -> None:
    bot.llm.reply_text("The fix is missing a test.")
    final = review_command(bot)
    bot.llm.reply_text("The fix is missing a test.")
    work = checkout_of(bot, tmp_path / "clone")
    local = run_cli(["review", "--repo", str(work)], bot.llm)
    assert local.returncode == 0, local.stderr

    github_request, local_request = bot.llm.requests
    assert as_local(local_request) == as_local(github_request)
    prompt = github_request["messages"][-1]["content"]
    assert "Request from @maintainer: Review this pull request." in prompt
    assert "\nauthor: @" in prompt  # the pull request's author, as data; a checkout's change has none
    local_prompt = local_request["messages"][-1]["content"]
    assert "Request from @maintainer: Review this local change." in local_prompt
    assert "pull request" not in local_prompt.replace("(not a pull request)", "")
    assert "description:\nIt subtracted." in prompt and "+    return a + b" in prompt
    assert {t["function"]["name"] for t in github_request["tools"]} >= {"review_change", "get_page"}

    # Plain text on GitHub: the review's body, no inline comments, and the tracking comment says so.
    (review,) = bot.fake.reviews_on(REPO, 7)
    assert review.body.startswith("The fix is missing a test.") and review.comment_ids == []
    assert "The model answered in plain text instead of calling `review_change`" in final
    # And locally, the same.
    assert (
        "Review. The model answered in plain text instead of calling `review_change`: its answer is the "
        "review's body, without inline comments.\n\nThe fix is missing a test." in local.stdout
    )
