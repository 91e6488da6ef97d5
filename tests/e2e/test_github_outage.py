"""Issue 23: a GitHub outage defers `/beam review` instead of failing it.

`beam-bot serve` (SQLite) or serve with two `beam-bot worker` processes (PostgreSQL) on the fake
GitHub, whose `POST /pulls/7/reviews` is told to fail: with 502s that end, with a timeout (GitHub
writes the review after our client gave up), with 502s that do not end, and with a 422. The model is
scripted once: a review that GitHub could not take is posted from the run's journal, never asked for
again, and the job's attempts are not spent on the wait.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.app.jobs.schema import jobs, review_findings
from tests.support.bot_process import SECRET, bot_stack, comment_payload, wait_for
from tests.support.db import pg_database_url_fixture  # noqa: F401 - the fixture, by its name
from tests.support.fake_github import Call
from tests.support.fake_github_state import PullFile
from tests.support.fleet import Fleet, fleet_on
from tests.support.webhooks import delivery, issue_comment_payload

REPO = "octo/demo"
PATCH = "@@ -1,2 +1,3 @@\n def add(a, b):\n-    return a - b\n+    return a + b\n+# fixed\n"
BOT_LOGIN = "beam-bot[bot]"
REVIEWS = rf"^/repos/{REPO}/pulls/7/reviews$"
WAITING = "is waiting for GitHub"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def fleet(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Fleet]:
    with bot_stack(tmp_path) as bot:
        main = bot.git.seed(
            REPO, {"README.md": "Demo\n", "src/calc.py": "def add(a, b):\n    return a - b\n"}
        )
        head = bot.git.commit(
            REPO, {"src/calc.py": "def add(a, b):\n    return a + b\n# fixed\n"}, branch="feature"
        )
        bot.git.create_pull_ref(REPO, 7, head)
        bot.fake.add_repo(REPO)
        bot.fake.add_collaborator(REPO, "maintainer", "write")
        bot.fake.add_pull(
            REPO,
            number=7,
            title="Fix add",
            head_ref="feature",
            head_sha=head,
            base_sha=main,
            files=[PullFile("src/calc.py", additions=2, deletions=1, patch=PATCH)],
        )
        # The model's one answer: a review through `review_change`, then its closing words (which a
        # run that posts its review after an outage does not wait for).
        finding = {"path": "src/calc.py", "line": 2, "body": "Check for overflow."}
        bot.llm.reply_tool_calls(
            ("review_change", {"body": "The fix is missing a test.", "comments": [finding]})
        )
        bot.llm.reply_text("Reviewed: `src/calc.py:2` now adds.")
        with fleet_on(request, bot) as fleet:
            yield fleet


def review_command(fleet: Fleet, wait: float) -> None:
    """Start the fleet with `BEAM_GITHUB_OUTAGE_WAIT=wait` and send `/beam review`."""
    bot = fleet.bot
    bot.extra_env["BEAM_GITHUB_OUTAGE_WAIT"] = str(wait)
    fleet.start()
    comment = bot.fake.add_comment(REPO, 7, "/beam review", user="maintainer")
    payload = issue_comment_payload(
        "/beam review", repo=REPO, number=7, commenter="maintainer", comment_id=comment.id
    )
    sent = delivery("issue_comment", comment_payload(bot, payload, REPO), SECRET)
    assert bot.send(sent).status_code == 202


def tracking(fleet: Fleet) -> list[str]:
    return [c.body for c in fleet.bot.fake.comments_on(REPO, 7) if c.user == BOT_LOGIN]


def final(fleet: Fleet) -> str:
    """The tracking comment once the run ended and every job is done."""

    def ended() -> str | None:
        bodies = tracking(fleet)
        done = bodies and "Working on" not in bodies[0] and WAITING not in bodies[0]
        return bodies[0] if done and fleet.jobs_done() else None

    return wait_for(ended, timeout=90, what=f"the run to end\n{fleet.log()[-4000:]}")


def edits_said(fleet: Fleet, text: str) -> bool:
    """Whether any edit (or creation) of a bot comment carried `text`: the states it went through."""
    bodies = [c.body for c in fleet.bot.fake.calls if c.path.startswith(f"/repos/{REPO}/issues/")]
    return any(isinstance(b, dict) and text in str(b.get("body", "")) for b in bodies)


def review_posts(fleet: Fleet) -> int:
    return len(
        [c for c in fleet.bot.fake.calls if c.method == "POST" and c.path.endswith("/pulls/7/reviews")]
    )


def run_job(fleet: Fleet) -> dict[str, object]:
    [row] = [r for r in fleet.rows(jobs) if r["kind"] == "run"]
    return row


def test_a_review_refused_with_502s_for_a_while_is_posted_once_when_github_is_back(fleet: Fleet) -> None:
    fleet.bot.fake.inject("POST", REVIEWS, status=502, times=2)
    review_command(fleet, wait=60)  # tries again after 2 s, then 4 s
    body = final(fleet)
    assert "Posted a review" in body and "failed" not in body, body
    [review] = fleet.bot.fake.reviews_on(REPO, 7)
    assert "The fix is missing a test." in review.body and len(review.comment_ids) == 1
    assert review_posts(fleet) == 3  # two 502s, then the one that GitHub took
    assert len(fleet.bot.llm.requests) == 1  # posted from the journal: the model was not asked again
    assert edits_said(fleet, f"{WAITING}, which answered 502")
    assert len(tracking(fleet)) == 1
    job = run_job(fleet)
    assert job["state"] == "done" and job["attempts"] == 1  # the waits spent none of its attempts
    # Posted from the journal, its finding is in the ledger all the same: a 👎 on it would hold.
    [finding] = fleet.rows(review_findings)
    assert (finding["comment_id"], finding["state"], finding["line"]) == (review.comment_ids[0], "open", 2)


def test_a_review_whose_post_timed_out_is_adopted_not_posted_twice(fleet: Fleet) -> None:
    # Our client gives up after BEAM_GITHUB_TIMEOUT (5 s); GitHub writes the review at 6 s.
    fleet.bot.fake.inject("POST", REVIEWS, status=None, delay=6.0, times=1)
    review_command(fleet, wait=60)
    body = final(fleet)
    assert "Posted a review" in body and "failed" not in body, body
    assert len(fleet.bot.fake.reviews_on(REPO, 7)) == 1
    assert review_posts(fleet) == 1  # the retry found it by its marker
    assert len(fleet.bot.llm.requests) == 1
    assert edits_said(fleet, f"{WAITING}, which did not answer")
    assert run_job(fleet)["attempts"] == 1


def test_github_down_before_the_run_starts_again_is_waited_for_too(fleet: Fleet) -> None:
    """The retry's own first calls (the config, here) meet the outage: the job waits, as the run."""
    fake = fleet.bot.fake
    fake.inject("POST", REVIEWS, status=502, times=1)

    def config_fails_next(call: Call) -> None:
        if call.method == "POST" and call.path.endswith("/pulls/7/reviews") and call.status == 502:
            # Every try the client makes of the retry's config read (4) is a 502.
            fake.inject("GET", rf"^/repos/{REPO}/contents/", status=502, times=4)

    fake.on_answered.append(config_fails_next)
    review_command(fleet, wait=60)
    body = final(fleet)
    assert "Posted a review" in body and "failed" not in body, body
    assert len(fake.reviews_on(REPO, 7)) == 1 and review_posts(fleet) == 2
    assert len(fleet.bot.llm.requests) == 1
    assert run_job(fleet)["attempts"] == 1  # the config's 502s were waited for, not counted


def test_github_down_when_the_run_writes_its_end_is_waited_for_too(fleet: Fleet) -> None:
    """The review is posted; the edit that says so meets the outage: the job waits, then writes it."""
    fake = fleet.bot.fake
    fake.inject("POST", REVIEWS, status=502, times=1)

    def final_edit_fails_next(call: Call) -> None:
        if call.method == "POST" and call.path.endswith("/pulls/7/reviews") and call.status == 200:
            # Every try the client makes of the next edit, the final one (4), is a 502.
            fake.inject("PATCH", rf"^/repos/{REPO}/issues/comments/", status=502, times=4)

    fake.on_answered.append(final_edit_fails_next)
    review_command(fleet, wait=60)
    body = final(fleet)
    assert "Posted a review" in body and "failed" not in body, body
    assert len(fake.reviews_on(REPO, 7)) == 1 and len(fleet.bot.llm.requests) == 1
    assert run_job(fleet)["attempts"] == 1
    [run] = fleet.run_rows()
    assert run["status"] == "succeeded"


def test_a_run_past_the_outage_wait_fails_with_bem_380(fleet: Fleet) -> None:
    fleet.bot.fake.inject("POST", REVIEWS, status=502, times=None)
    review_command(fleet, wait=3)
    body = final(fleet)
    assert "failed (BEM-380)" in body and "GitHub was down" in body, body
    assert "BEAM_GITHUB_OUTAGE_WAIT" in body and "3 s" in body
    assert edits_said(fleet, WAITING)
    assert fleet.bot.fake.reviews_on(REPO, 7) == []
    assert review_posts(fleet) == 2  # the first try, and the one after the wait
    assert len(fleet.bot.llm.requests) == 1
    [run] = fleet.run_rows()
    assert run["status"] == "failed" and run["error_code"] == "BEM-380"


def test_a_422_still_fails_at_once(fleet: Fleet) -> None:
    fleet.bot.fake.inject("POST", REVIEWS, status=422, times=1)
    review_command(fleet, wait=60)
    body = final(fleet)
    assert "failed" in body and "GitHub refused a call (422" in body, body
    assert not edits_said(fleet, WAITING)
    assert review_posts(fleet) == 1 and fleet.bot.fake.reviews_on(REPO, 7) == []
    assert len(fleet.bot.llm.requests) == 1


def test_502_500_502_on_the_first_three_writes_cost_seconds_and_post_once(fleet: Fleet) -> None:
    """Issue 29: each write's first retry comes once nothing it began can still land (the read-back
    time: here BEAM_GITHUB_TIMEOUT 5 s + 2 s), not a minute, then two: the whole run, with the
    default 30-minute outage wait, is scheduled well within a minute of the command."""
    fake = fleet.bot.fake
    for status in (502, 500, 502):
        fake.inject("POST", rf"^/repos/{REPO}/", status=status, times=1)
    review_command(fleet, wait=1800)
    body = final(fleet)
    assert "Posted a review" in body and "failed" not in body, body
    assert len(fake.reviews_on(REPO, 7)) == 1 and review_posts(fleet) == 1  # exactly once
    assert len(fleet.bot.llm.requests) == 2  # its two scripted answers: the model was not asked again
    failed = [c for c in fake.calls if c.method == "POST" and c.status in (500, 502)]
    assert [c.status for c in failed] == [502, 500, 502], [c.path for c in failed]
    # The delays the run scheduled, as it logged them: the failed reaction is let go, the read-back of
    # the write it began and each outage wait are the read-back time (7 s here), together < 60 s.
    delays = [
        float(m) for m in re.findall(r"GitHub is down \(try \d+\); trying again in (\d+) s", fleet.log())
    ]
    assert delays and all(d <= 7 for d in delays) and sum(delays) < 60, delays
