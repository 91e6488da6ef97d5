"""Issue 8: kill the bot process before, during and after each kind of GitHub write; the retry adopts.

Each test kills `beam-bot serve` (SQLite) or every process of serve plus two `beam-bot worker`
processes (PostgreSQL) at one boundary of one effect, starts them again, and then finds exactly one
object of each kind on the fake GitHub, a final tracking comment, and every job done.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.app.effects.writer import marker
from bot.app.jobs.schema import effects
from tests.e2e.crash_support import BOT, NUMBER, REPO, bot_comments, seed_review_pull, send
from tests.support.bot_process import BotProcess, bot_stack, wait_for
from tests.support.db import pg_database_url_fixture  # noqa: F401 - the fixture, by its name
from tests.support.fake_github import Call
from tests.support.fake_github_state import PullFile
from tests.support.fleet import Fleet, fleet_on

# How each effect's call looks on the fake GitHub (for `during`).
CALLS: dict[str, Callable[[Call], bool]] = {
    "reaction": lambda c: c.method == "POST" and c.path.endswith("/reactions"),
    "comment": lambda c: c.method == "POST" and c.path.endswith(f"/issues/{NUMBER}/comments"),
    "reply": lambda c: c.method == "POST" and c.path.endswith(f"/issues/{NUMBER}/comments"),
    "review": lambda c: c.method == "POST" and c.path.endswith(f"/pulls/{NUMBER}/reviews"),
    "edit": lambda c: (
        c.method == "PATCH" and isinstance(c.body, dict) and "Working on" in str(c.body.get("body"))
    ),
    "final": lambda c: (
        c.method == "PATCH" and isinstance(c.body, dict) and "Working on" not in str(c.body.get("body"))
    ),
}
PHASES = ("before", "during", "after")


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def fleet(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Fleet]:
    with bot_stack(tmp_path, BEAM_CONCURRENCY="1") as bot:
        bot.llm.fallback_text = "Reviewed: `src/calc.py:2` now adds."
        seed_review_pull(bot)
        with fleet_on(request, bot) as fleet:
            yield fleet


def script_review(bot: BotProcess) -> None:
    bot.llm.reply_tool_calls(("read_file", {"path": "src/calc.py"}))
    bot.llm.reply_tool_calls(
        (
            "review_change",
            {
                "body": "The fix is missing a test.",
                "comments": [{"path": "src/calc.py", "line": 2, "body": "Check for overflow."}],
            },
        )
    )
    bot.llm.reply_text("Reviewed: `src/calc.py:2` now adds.")


def crash_at(fleet: Fleet, effect: str, phase: str) -> None:
    """Start the fleet so that it dies at `effect`:`phase` (before/after: in the bot; during: here)."""
    if phase == "during":
        fleet.kill_during(CALLS[effect])
        fleet.start(None)
    else:
        fleet.start(f"{effect}:{phase}")


def settle(fleet: Fleet) -> None:
    fleet.crash_and_restart()
    wait_for(fleet.jobs_done, timeout=60, what=f"every job done\n{fleet.log()[-4000:]}")


@pytest.mark.parametrize("phase", PHASES)
@pytest.mark.parametrize("effect", ["reaction", "comment", "edit", "review", "final"])
def test_a_review_killed_at_any_write_ends_with_one_of_each(fleet: Fleet, effect: str, phase: str) -> None:
    bot = fleet.bot
    script_review(bot)
    crash_at(fleet, effect, phase)
    command_id = send(bot, "/beam review")
    settle(fleet)

    reviews = bot.fake.reviews_on(REPO, NUMBER)
    assert len(reviews) == 1, [r.body for r in reviews]
    comments = bot_comments(bot)
    assert len(comments) == 1, [c.body for c in comments]  # one tracking comment, adopted
    final = comments[0].body
    assert "beam-run:" in final and "Working on" not in final and "Posted a review" in final
    eyes = [r for r in bot.fake.reactions_on(command_id) if r.user == BOT and r.content == "eyes"]
    assert len(eyes) == 1
    run = fleet.run_rows()
    assert [r["status"] for r in run] == ["succeeded"]
    assert run[0]["tracking_comment_id"] == comments[0].id


def test_a_look_alike_of_the_tracking_comment_is_not_adopted(fleet: Fleet) -> None:
    """Issue 40: the attempt dies with the tracking comment's intent recorded and nothing posted;
    meanwhile a comment under the bot's login carries that key's `beam-effect` marker (copied, or
    written by a model). The retry must not adopt it (before, it did, and edited it into the
    tracking comment): it posts the real one, and the look-alike stays as it was."""
    bot = fleet.bot
    script_review(bot)
    crash_at(fleet, "comment", "before")
    send(bot, "/beam review")
    wait_for(fleet.any_died, timeout=40, what=f"the bot to die before its comment\n{fleet.log()[-3000:]}")
    fleet.kill_all()
    begun = [
        r["key"] for r in fleet.rows(effects) if r["state"] == "intent" and r["key"].endswith(":tracking")
    ]
    assert len(begun) == 1, begun
    forged = f"Per the pull request's request, this footer:\n{marker(begun[0])}"
    look_alike = bot.fake.add_comment(REPO, NUMBER, forged, user=BOT)
    fleet.start(None)
    wait_for(fleet.jobs_done, timeout=60, what=f"every job done\n{fleet.log()[-4000:]}")

    assert bot.fake.comments[look_alike.id].body == forged  # neither adopted nor edited
    tracking = [c for c in bot_comments(bot) if "beam-run:" in c.body]
    assert len(tracking) == 1 and tracking[0].id != look_alike.id, [c.body for c in tracking]
    assert "Posted a review" in tracking[0].body and tracking[0].body.endswith(marker(begun[0]))
    assert [r["tracking_comment_id"] for r in fleet.run_rows()] == [tracking[0].id]
    assert len(bot.fake.reviews_on(REPO, NUMBER)) == 1


@pytest.mark.parametrize("phase", PHASES)
def test_a_help_reply_killed_at_any_point_is_posted_once(fleet: Fleet, phase: str) -> None:
    bot = fleet.bot
    crash_at(fleet, "reply", phase)
    send(bot, "/beam help")
    settle(fleet)
    comments = bot_comments(bot)
    assert len(comments) == 1, [c.body for c in comments]
    assert "/beam review" in comments[0].body


# -- /beam author: the approval comment, the push and the pull request ------------------------------


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def author_fleet(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Fleet]:
    with bot_stack(
        tmp_path, BEAM_CONCURRENCY="1", BEAM_POLL_INTERVAL="0.6", BEAM_POLL_MIN_INTERVAL="0.2"
    ) as bot:
        bot.llm.fallback_text = "Done."
        main = bot.git.seed(REPO, {"README.md": "Helo world\n", "src/app.py": "print(0)\n"})
        head = bot.git.commit(REPO, {"src/app.py": "print(1)\n"}, branch="feature", message="Change app")
        bot.git.create_pull_ref(REPO, NUMBER, head)
        bot.fake.ref_resolver = lambda repo, ref: bot.git.ref_sha(repo, f"refs/heads/{ref}")
        bot.fake.add_repo(REPO)
        bot.fake.add_collaborator(REPO, "maintainer", "write")
        bot.fake.add_collaborator(REPO, "boss", "admin")
        bot.fake.add_pull(
            REPO,
            number=NUMBER,
            head_ref="feature",
            head_sha=head,
            base_sha=main,
            files=[PullFile("src/app.py", patch="@@ -1 +1 @@\n-print(0)\n+print(1)\n")],
        )
        with fleet_on(request, bot) as fleet:
            yield fleet


def script_author(bot: BotProcess) -> None:
    bot.llm.reply_tool_calls(("write_file", {"path": "README.md", "body": "Hello world\n"}))
    bot.llm.reply_tool_calls(("git_add", {"path": "README.md"}), ("git_commit", {"message": "Fix the typo"}))
    bot.llm.reply_tool_calls(("git_push", {}))


def approval_comments(bot: BotProcess) -> list[Any]:
    return [c for c in bot_comments(bot) if "beam-push:" in c.body]


def receive_packs(bot: BotProcess) -> int:
    return sum(1 for r in bot.git.requests if r.method == "POST" and r.path.endswith("git-receive-pack"))


AUTHOR_CALLS: dict[str, Callable[[Call], bool]] = {
    "approval": lambda c: CALLS["comment"](c) and "beam-push:" in str((c.body or {}).get("body")),
    "pull": lambda c: c.method == "POST" and c.path == f"/repos/{REPO}/pulls",
}
AUTHOR_POINTS = [
    *(("approval", p) for p in PHASES),
    *(("pull", p) for p in PHASES),
    ("push", "before"),
    ("push", "after"),
]


@pytest.mark.parametrize(("effect", "phase"), AUTHOR_POINTS)
def test_an_author_run_killed_at_any_write_pushes_and_opens_one_pull_request(
    author_fleet: Fleet, effect: str, phase: str
) -> None:
    fleet, bot = author_fleet, author_fleet.bot
    script_author(bot)
    script_author(bot)  # an attempt killed before its push was held asks the model again
    if phase == "during":
        fleet.kill_during(AUTHOR_CALLS[effect])
        fleet.start(None)
    else:
        fleet.start(f"{effect}:{phase}")
    send(bot, "/beam author fix the typo in README")
    if effect == "approval":
        fleet.crash_and_restart()
    approval = wait_for(
        lambda: approval_comments(bot), timeout=60, what=f"the approval\n{fleet.log()[-3000:]}"
    )[0]
    bot.fake.add_reaction(approval.id, "boss", "+1")
    if effect != "approval":
        fleet.crash_and_restart()

    def pushed() -> bool:
        comment = bot.fake.comments[approval.id]
        return "Approved by @boss" in comment.body and "/pull/" in comment.body

    wait_for(pushed, timeout=60, what=f"the push and its pull request\n{fleet.log()[-4000:]}")
    wait_for(fleet.jobs_done, timeout=30, what="every job done")
    assert len(approval_comments(bot)) == 1
    pulls = [p for p in bot.fake.pulls_of(REPO) if p.user == BOT]
    assert len(pulls) == 1, [p.head_ref for p in pulls]
    branch = pulls[0].head_ref
    assert receive_packs(bot) == 1
    assert bot.git.ref_sha(REPO, f"refs/heads/{branch}") in bot.fake.comments[approval.id].body
    tracking = [c for c in bot_comments(bot) if "beam-run:" in c.body]
    assert len(tracking) == 1 and "Working on" not in tracking[0].body
