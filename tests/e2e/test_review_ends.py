"""Issue 29: the same misbehaving model gives the same end on all three review paths.

One table over (path x misbehaviour). The paths are `/beam review` and the automatic review (both on
`beam-bot serve`, the pull request of tests/e2e/review_support.py) and `beam-bot run review` (the CLI
on a local checkout, tests/local/test_run.py's harness), all against the scripted model server. The pull
request has two files and a small token budget per call, so each review is two calls.

A model that never gives a review (every answer cut by `finish_reason: length`, malformed calls every
time, an unknown tool every time, `list_tree` until the rounds run out) ends "not reviewed": nothing
is posted, the tracking comment or the summary names the BEM code with what to do, the check run is
neutral, the CLI exits 4. A token cap hit after the first of the two calls ends "partial": what the
first call found is posted once, its body saying so; the CLI exits 3. No case says "No comments.".
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.review_support import BOT, NUMBER, REPO, review_stack
from tests.local.test_run import checkout_fixture, git, run_cli  # noqa: F401 - the fixture, by its name
from tests.support.bot_process import SECRET, comment_payload, wait_for
from tests.support.openai_server import (
    FakeOpenAI,
    chat_response,
    text_message,
    tool_call,
    tool_calls_message,
    usage,
)
from tests.support.webhooks import delivery, issue_comment_payload

pytestmark = pytest.mark.timeout(180)


def _module(name: str, count: int = 20) -> str:
    return "".join(f"def {name}{n}(x):\n    return x + {n}\n\n" for n in range(count))


# Two files, each under one call's budget, together over it: two calls.
FILES = {"src/alpha.py": _module("alpha"), "src/beta.py": _module("beta")}
ENV = {"BEAM_REVIEW_TOKENS_PER_CALL": "2000", "BEAM_MAX_TOKENS_PER_RUN": "3000"}
CONFIG = "version: 1\nauto_review:\n  enabled: true\n  debounce: 1s\n"
FINDING = {"path": "src/alpha.py", "line": 2, "body": "alpha0 adds zero: is that meant?"}


def cut() -> dict[str, Any]:
    message = text_message('Reading it.\n```json\n{"name": "read_file", "arguments": {"pa')
    return chat_response(message, finish_reason="length")


def malformed() -> dict[str, Any]:
    call = {"id": "call_bad", "type": "function", "function": {"name": "read_file", "arguments": "{not json"}}
    return chat_response(tool_calls_message([call]))


def unknown() -> dict[str, Any]:
    return chat_response(tool_calls_message([tool_call("run_shell", {"cmd": "ls"})]))


def loop() -> dict[str, Any]:
    return chat_response(tool_calls_message([tool_call("list_tree", {"path": "."})]))


@dataclass(frozen=True)
class Misbehaviour:
    name: str
    script: Callable[[FakeOpenAI], None]
    code: str | None  # not reviewed: the code said; None: partial


def every_call(reply: Callable[[], dict[str, Any]], per_call: int) -> Callable[[FakeOpenAI], None]:
    """Both calls of the review get `per_call` such replies: told once, asked for text, then done."""

    def script(llm: FakeOpenAI) -> None:
        for _ in range(2 * per_call):
            llm.enqueue(reply())

    return script


def capped_after_one_call(llm: FakeOpenAI) -> None:
    # The first call reports its finding, then its last answer's tokens pass the run's cap: the
    # second call never runs (the cap is asked before every model call).
    llm.reply_tool_calls(("review_change", {"body": "One question.", "comments": [FINDING]}))
    llm.reply_text("Reviewed.", usage=usage(5000, 10))


MISBEHAVIOURS = [
    Misbehaviour("cut every time", every_call(cut, 3), "BEM-091"),
    Misbehaviour("malformed calls", every_call(malformed, 3), "BEM-094"),
    Misbehaviour("unknown tool", every_call(unknown, 3), "BEM-094"),
    Misbehaviour("endless list_tree", every_call(loop, 9), "BEM-088"),  # 8 rounds, then asked for text
    Misbehaviour("cap after one of two calls", capped_after_one_call, None),
]
PATHS = ["/beam review", "automatic review", "beam-bot run review"]


@dataclass
class Seen:
    """What one path left: the reviews posted (bodies), the words a maintainer reads, an exit code."""

    reviews: list[str]
    said: str
    exit_code: int | None = None
    check_conclusions: tuple[str | None, ...] = ()


def beam_review(tmp_path: Path, behaviour: Misbehaviour) -> Seen:
    with review_stack(tmp_path, None, files=FILES, **ENV) as story:
        bot = story.bot
        behaviour.script(bot.llm)
        comment = bot.fake.add_comment(REPO, NUMBER, "/beam review", user="maintainer")
        payload = issue_comment_payload(
            "/beam review", repo=REPO, number=NUMBER, commenter="maintainer", comment_id=comment.id
        )
        assert (
            bot.send(delivery("issue_comment", comment_payload(bot, payload, REPO), SECRET)).status_code
            == 202
        )

        def final() -> str | None:
            for c in bot.fake.comments_on(REPO, NUMBER):
                ended = "❌" in c.body or "Posted a review" in c.body
                if c.user == BOT and "beam-run:" in c.body and ended:
                    return c.body
            return None

        said = wait_for(final, timeout=120, what="the final tracking comment")
        return Seen([r.body for r in story.reviews()], said)


def automatic_review(tmp_path: Path, behaviour: Misbehaviour) -> Seen:
    with review_stack(tmp_path, CONFIG, files=FILES, **ENV) as story:
        behaviour.script(story.bot.llm)
        story.send("opened")
        said = story.wait_summary("not reviewed" if behaviour.code else "partial", timeout=120)
        checks = tuple(c.conclusion for c in story.checks())
        return Seen([r.body for r in story.reviews()], said, check_conclusions=checks)


def cli_review(work: Path, behaviour: Misbehaviour) -> Seen:
    git(work, "config", "user.name", "maintainer")
    git(work, "remote", "set-head", "origin", "main")
    git(work, "checkout", "-qb", "feature")
    for name, text in FILES.items():
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        (work / name).write_text(text, encoding="utf-8")
    git(work, "add", ".")
    git(work, "commit", "-qm", "Add modules")
    with FakeOpenAI() as llm:
        behaviour.script(llm)
        result = run_cli(["review", "--repo", str(work), "--json"], llm, env=ENV)
    reviews = []
    for line in result.stdout.splitlines():
        if line.startswith("{") and (review := json.loads(line).get("review")):
            reviews.append(str(review["body"]))
    return Seen(reviews, result.stdout + result.stderr, exit_code=result.returncode)


@pytest.mark.parametrize("behaviour", MISBEHAVIOURS, ids=lambda b: b.name)
@pytest.mark.parametrize("path", PATHS)
def test_the_same_misbehaving_model_ends_the_same_on_every_path(
    path: str, behaviour: Misbehaviour, tmp_path: Path, checkout: tuple[Path, Path]
) -> None:
    if path == "/beam review":
        seen = beam_review(tmp_path / "stack", behaviour)
    elif path == "automatic review":
        seen = automatic_review(tmp_path / "stack", behaviour)
    else:
        seen = cli_review(checkout[0], behaviour)
    assert "No comments." not in seen.said and all("No comments." not in r for r in seen.reviews)
    assert all(c in (None, "neutral") for c in seen.check_conclusions)  # never green
    if behaviour.code is not None:  # not reviewed: nothing posted, the code and what to do said
        assert seen.reviews == [], seen.reviews
        assert behaviour.code in seen.said, seen.said
        assert "What to do" in seen.said or "nothing was posted" in seen.said
        if path == "beam-bot run review":
            assert seen.exit_code == 4
        elif path == "/beam review":
            assert f"failed ({behaviour.code})" in seen.said
        else:
            assert "not reviewed, nothing was posted" in seen.said
    else:  # partial: the first call's finding posted once, the body saying where it stopped
        assert len(seen.reviews) == 1, seen.reviews
        assert "**partial:** stopped by" in seen.reviews[0] and "after 1 of 2 files" in seen.reviews[0]
        if path == "beam-bot run review":
            assert seen.exit_code == 3
