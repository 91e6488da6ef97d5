"""One set of findings per pull request, whichever door posts it, end to end: `beam-bot serve` with the
fake GitHub and real git, and `beam-bot review <URL> --post` as a process against the same GitHub.

- `--post` after the App posted a finding does not post it a second time (the marker of the App's
  comment says it is there), and what it does post carries its own marker.
- An automatic review that posts nothing while a finding from before is open says "no new findings",
  right above "Findings: 1 open".
- Each inline comment shows the finding's severity as a short label.
- A finding on a file the change does not touch is dropped and the review's footer counts it, in
  `/beam review` (which folded it into the body, unchecked) and through `--post`.
- The Action (`beam-bot action` as a process) reads what `--post` posted as the App does: its
  automatic review does not repeat it, and posts the rest labelled, the outside finding counted.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from bot.app.reviews.findings import marker_key
from tests.e2e.review_support import BOT, CALC, NUMBER, REPO, Story, review_stack
from tests.e2e.test_action import AUTO, actions_runner, pull_request_event
from tests.support.bot_process import SECRET, BotProcess, comment_payload, wait_for
from tests.support.webhooks import delivery, issue_comment_payload

CONFIG = "version: 1\nauto_review:\n  enabled: true\n  debounce: 1s\n"
URL = f"https://github.com/{REPO}/pull/{NUMBER}"
LINE_F2 = 5  # "    return x - 2" in the pull request's head
CLAIM = "f2 returns `x - 2`; it should add 2."
OUTSIDE = "README.md says nothing about f2; document it."
OTHER = "f3 adds 3 where its callers expect it to multiply."  # line 8, in the diff's context
DROPPED = "1 finding on a file outside the change was dropped"


@pytest.fixture
def story(tmp_path: Path) -> Iterator[Story]:
    with review_stack(tmp_path, CONFIG) as story:
        story.bot.llm.fallback_text = "Done."
        yield story


def finding(path: str = "src/calc.py", line: int = LINE_F2, body: str = CLAIM) -> dict[str, Any]:
    return {"path": path, "line": line, "body": body, "severity": "major"}


def post_from_terminal(story: Story, token: str | None = None) -> subprocess.CompletedProcess[str]:
    """`beam-bot review <URL> --post` as a person runs it, with a token GitHub issued."""
    bot = story.bot
    token = token or bot.fake.mint_token(1)[0]
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("BEAM_", "GITHUB_", "GH_"))}
    env = {
        **keep,
        "GITHUB_TOKEN": token,
        "GITHUB_API_URL": bot.api_url,
        "BEAM_API_KEY": "cli-llm-key",
        "BEAM_API_BASE_URL": bot.llm.url,
        "BEAM_MODEL": "fake-model",
    }
    return subprocess.run(
        [sys.executable, "-m", "bot.cli", "review", URL, "--post"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def inline_bodies(story: Story) -> list[str]:
    return [c.body for review in story.reviews() for c in story.review_comments(review)]


def test_post_from_the_terminal_does_not_repeat_what_the_app_posted(story: Story) -> None:
    story.script_review([finding()])
    story.send("opened")
    story.wait_summary("1 finding")
    [app_comment] = story.review_comments(story.reviews()[0])
    assert marker_key(app_comment.body) is not None

    # The model finds the same thing again from the terminal, and one thing more.
    story.script_review([finding(), finding(line=8, body=OTHER)])
    done = post_from_terminal(story)

    assert done.returncode == 0, done.stderr
    bodies = inline_bodies(story)
    assert sum(CLAIM in body for body in bodies) == 1, bodies  # no second comment
    assert "1 finding is already on the pull request and not posted again" in done.stdout
    assert len(story.reviews()) == 2
    [new] = story.review_comments(story.reviews()[1])
    assert OTHER in new.body and new.line == 8
    # What the terminal posted carries its marker, so the next look (any door's) sees it.
    assert marker_key(new.body) is not None

    # Asked again with nothing new: nothing is posted at all.
    story.script_review([finding(), finding(line=8, body=OTHER)])
    again = post_from_terminal(story)
    assert again.returncode == 0, again.stderr
    assert "2 findings are already on the pull request" in again.stdout
    assert "posted: nothing, no new findings" in again.stdout
    assert len(story.reviews()) == 2


def test_an_automatic_review_with_nothing_new_says_new_above_the_open_count(story: Story) -> None:
    story.script_review([finding()])
    story.send("opened")
    story.wait_summary("1 finding")
    first_head = story.pull.head_sha
    # A push that leaves f2 alone; the model repeats the open finding and finds nothing else.
    story.push({"src/calc.py": CALC.replace("x + 2", "x - 2").replace("x + 4", "x + 40")}, "f4 adds 40")
    story.script_review([finding()])
    story.send("synchronize", before=first_head, after=story.pull.head_sha)
    span = f"`{first_head[:7]}..{story.pull.head_sha[:7]}`"
    summary = story.wait_summary(f"no new findings in {span}")
    assert "Findings: 1 open, 0 fixed, 0 dismissed." in summary
    assert "no findings in" not in summary
    assert len(story.reviews()) == 1


def test_each_inline_comment_shows_its_severity(story: Story) -> None:
    story.script_review([finding(), {**finding(line=8, body="f3 reads oddly."), "severity": "critical"}])
    story.send("opened")
    story.wait_summary("2 findings")
    first, second = sorted(story.review_comments(story.reviews()[0]), key=lambda c: c.line or 0)
    assert first.body.startswith(f"**major**\n{CLAIM}")
    assert second.body.startswith("**critical**\nf3 reads oddly.")
    assert marker_key(first.body) is not None  # the marker is still the last line


def test_a_finding_outside_the_change_is_dropped_and_counted_by_beam_review(story: Story) -> None:
    story.script_review([finding(), finding(path="README.md", line=1, body=OUTSIDE)])
    body = "/beam review"
    bot = story.bot
    comment = bot.fake.add_comment(REPO, NUMBER, body, user="maintainer")
    payload = issue_comment_payload(
        body, repo=REPO, number=NUMBER, commenter="maintainer", comment_id=comment.id
    )
    assert bot.send(delivery("issue_comment", comment_payload(bot, payload, REPO), SECRET)).status_code == 202

    [review] = wait_for(lambda: story.reviews(), timeout=45, what="the review of /beam review")
    assert DROPPED in review.body
    assert "README.md says nothing" not in review.body and "outside the diff" not in review.body
    [inline] = story.review_comments(review)
    assert inline.path == "src/calc.py" and CLAIM in inline.body
    assert all(c.path != "README.md" for c in bot.fake.comments.values() if c.user == BOT)


def test_a_finding_outside_the_change_is_dropped_and_counted_by_post(story: Story) -> None:
    story.script_review([finding(), finding(path="README.md", line=1, body=OUTSIDE)])

    done = post_from_terminal(story)

    assert done.returncode == 0, done.stderr
    assert DROPPED in done.stdout  # the printed review's body says it too
    [review] = story.reviews()
    assert DROPPED in review.body and "README.md says nothing" not in review.body
    [inline] = story.review_comments(review)
    assert inline.path == "src/calc.py" and inline.body.startswith("**major**\n")


def test_the_actions_automatic_review_does_not_repeat_what_post_posted(tmp_path: Path) -> None:
    with actions_runner(tmp_path) as runner:
        story = Story(cast(BotProcess, runner))  # Story reads .git, .fake and .llm: a runner has them
        story.seed(AUTO)
        runner.llm.fallback_text = "Done."
        story.script_review([finding()])
        done = post_from_terminal(story, runner.token)
        assert done.returncode == 0, done.stderr
        assert len(story.reviews()) == 1

        story.script_review(
            [finding(), finding(line=8, body=OTHER), finding(path="README.md", line=1, body=OUTSIDE)]
        )
        ran = runner.action("pull_request", pull_request_event(story, "opened"))

        assert ran.returncode == 0, ran.stderr
        assert sum(CLAIM in body for body in inline_bodies(story)) == 1, inline_bodies(story)
        _terminal, second = story.reviews()
        [new] = story.review_comments(second)
        assert new.line == 8 and new.body.startswith(f"**major**\n{OTHER}")
        assert DROPPED in second.body and "README.md says nothing" not in second.body
