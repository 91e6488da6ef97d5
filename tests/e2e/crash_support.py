"""Shared set-up for the issue-8 end-to-end tests: one pull request to review, commands, bot comments."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tests.support.bot_process import SECRET, BotProcess, comment_payload
from tests.support.fake_github_state import PullFile
from tests.support.webhooks import delivery, issue_comment_payload

REPO = "octo/demo"
NUMBER = 7
BOT = "beam-bot[bot]"
PATCH = "@@ -1,2 +1,3 @@\n def add(a, b):\n-    return a - b\n+    return a + b\n+# fixed\n"


def seed_review_pull(bot: BotProcess) -> None:
    """A repository with one pull request that fixes `add`, and a maintainer."""
    main = bot.git.seed(REPO, {"README.md": "Demo\n", "src/calc.py": "def add(a, b):\n    return a - b\n"})
    head = bot.git.commit(
        REPO, {"src/calc.py": "def add(a, b):\n    return a + b\n# fixed\n"}, branch="feature"
    )
    bot.git.create_pull_ref(REPO, NUMBER, head)
    bot.fake.add_repo(REPO)
    bot.fake.add_collaborator(REPO, "maintainer", "write")
    bot.fake.add_pull(
        REPO,
        number=NUMBER,
        head_ref="feature",
        head_sha=head,
        base_sha=main,
        files=[PullFile("src/calc.py", additions=2, deletions=1, patch=PATCH)],
    )


def seed_pulls(bot: BotProcess, repo: str, numbers: Iterable[int]) -> None:
    """A repository with one small pull request per number (branch `bN` adds `fN.txt`), and a
    maintainer."""
    main = bot.git.seed(repo, {"README.md": "pulls\n"})
    bot.fake.add_repo(repo)
    bot.fake.add_collaborator(repo, "maintainer", "write")
    for number in numbers:
        head = bot.git.commit(repo, {f"f{number}.txt": "x\n"}, branch=f"b{number}")
        bot.git.create_pull_ref(repo, number, head)
        bot.fake.add_pull(
            repo,
            number=number,
            head_ref=f"b{number}",
            head_sha=head,
            base_sha=main,
            files=[PullFile(f"f{number}.txt", patch="@@ -0,0 +1 @@\n+x\n")],
        )


def send(bot: BotProcess, body: str) -> int:
    """The command exists on the fake GitHub, and its signed delivery reached the bot."""
    comment = bot.fake.add_comment(REPO, NUMBER, body, user="maintainer")
    payload = issue_comment_payload(
        body, repo=REPO, number=NUMBER, commenter="maintainer", comment_id=comment.id
    )
    payload["repository"]["default_branch"] = "main"
    response = bot.send(delivery("issue_comment", comment_payload(bot, payload, REPO), SECRET))
    assert response.status_code == 202, response.text
    return comment.id


def bot_comments(bot: BotProcess) -> list[Any]:
    return [c for c in bot.fake.comments_on(REPO, NUMBER) if c.user == BOT]
