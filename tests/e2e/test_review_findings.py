"""Issue 21, items 4 and 5, end to end on the fake GitHub with real git and `beam-bot serve`: the
`review:` rules, and the findings ledger. A dismissed finding (a reply, a 👎, a resolved thread) is
not raised again after a push that edits its line, nor after a force-push; a fixed finding gets a
reply naming the commit and its thread resolved through GraphQL; `max_comments` and `severity` cut
what is posted; path instructions and tone reach the prompt; a bad `review:` section is reported."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from tests.e2e.review_support import CALC, NUMBER, REPO, Story, review_stack
from tests.support.bot_process import SECRET, comment_payload, wait_for
from tests.support.fake_github_state import Comment
from tests.support.webhooks import delivery, issue_comment_payload, load_payload

BOT = "beam-bot[bot]"
LINE_F2 = 5  # "    return x - 2" after the first commit (f{n} returns on line 3n-1)
LINE_F4 = 11
LINE_F6 = 17
CONFIG = "version: 1\nauto_review:\n  enabled: true\n  debounce: 1s\n"
SCHEMA = Path(__file__).parents[1] / "data/github/webhook-schemas/pull_request_review_thread.resolved.json"


@pytest.fixture
def story(tmp_path: Path) -> Iterator[Story]:
    with review_stack(tmp_path, CONFIG) as story:
        story.bot.llm.fallback_text = "Done."
        yield story


def finding(line: int, body: str, severity: str = "major") -> dict[str, Any]:
    return {"path": "src/calc.py", "line": line, "body": body, "severity": severity}


def ledger(story: Story) -> list[tuple[int, str, str | None, str | None]]:
    with sqlite3.connect(story.bot.work_dir / "beam.db") as db:
        return list(db.execute("SELECT line, state, reason, by FROM review_findings ORDER BY id"))


def reviewed(story: Story, count: int) -> None:
    wait_for(
        lambda: len(story.reviews()) >= count and story.review_jobs_done(), timeout=40, what="the review"
    )


def first_review_finding(story: Story, body: str) -> Comment:
    story.script_review([finding(LINE_F2, body)])
    story.send("opened")
    story.wait_summary("1 finding")
    [comment] = story.review_comments(story.reviews()[0])
    wait_for(lambda: len(ledger(story)) == 1, what="the finding in the ledger")
    return comment


def last_prompt(story: Story) -> str:
    prompts = [
        r["messages"][1]["content"] for r in story.bot.llm.requests if "review_change" in json.dumps(r)
    ]
    return prompts[-1]


def resolved_payload(story: Story, root: Comment, sender: str) -> dict[str, Any]:
    """A `pull_request_review_thread` `resolved` delivery, checked against GitHub's schema for it."""
    payload = story.payload("opened")
    comment = load_payload("pull_request_review_comment.created.json")["comment"]
    comment.update(id=root.id, body=root.body, path=root.path, line=root.line)
    comment.pop("in_reply_to_id", None)  # a thread's first comment replies to nothing
    comment["user"].update(login=BOT, type="Bot")
    payload.update(action="resolved", thread={"node_id": f"PRRT_{root.id}", "comments": [comment]})
    payload["sender"] = {**payload["sender"], "login": sender, "type": "User"}
    jsonschema.validate(payload, json.loads(SCHEMA.read_text(encoding="utf-8")))
    return payload


def test_a_reply_dismisses_and_an_edit_of_the_line_does_not_bring_it_back(story: Story) -> None:
    root = first_review_finding(story, "f2 returns `x - 2`; it should add.")
    story.reply_in_thread(root, "/beam dismiss", user="reader")  # may not: refused in the thread
    refusal = wait_for(
        lambda: next((c for c in story.bot.fake.comments.values() if "Sorry @reader" in c.body), None),
        what="the refusal",
    )
    assert refusal.in_reply_to == root.id and ledger(story)[0][1] == "open"
    story.reply_in_thread(root, "Won't fix: subtracting is intended here.")
    wait_for(lambda: ledger(story)[0][1] == "dismissed", what="the dismissal")
    assert ledger(story) == [(LINE_F2, "dismissed", "reply", "maintainer")]
    story.wait_summary("Findings: 0 open, 0 fixed, 1 dismissed.")  # recounted at once
    wait_for(
        lambda: any(r.content == "+1" and r.user == BOT for r in story.bot.fake.reactions.values()),
        what="the 👍 on the reply",
    )
    first_head = story.pull.head_sha
    # The author edits the anchored line itself, and changes f4; the model repeats itself with the
    # line's new value, and finds something new.
    text = CALC.replace("x + 2", "x - 3").replace("x + 4", "x * 4")
    story.push({"src/calc.py": text}, "f2 subtracts 3")
    story.script_review(
        [finding(LINE_F2, "F2 returns `x - 3`: it should add!"), finding(LINE_F4, "f4 multiplies.")]
    )
    story.send("synchronize", before=first_head, after=story.pull.head_sha)
    reviewed(story, 2)
    assert [c.line for c in story.review_comments(story.reviews()[1])] == [LINE_F4]
    # The model was told what was dismissed, as data.
    prompt = last_prompt(story)
    fenced = prompt[prompt.index("untrusted") :]
    assert "findings already dismissed on this pull request" in fenced
    assert "src/calc.py line 5: f2 returns `x - 2`; it should add." in fenced
    summary = story.wait_summary("Findings: 1 open, 0 fixed, 1 dismissed.")
    assert summary.count("beam-review-summary") == 1


def test_a_thumbs_down_dismisses_and_a_force_push_does_not_bring_it_back(story: Story) -> None:
    root = first_review_finding(story, "f2 subtracts 2 instead of adding.")
    story.bot.fake.add_reaction(root.id, "reader", "-1")  # not allowed to dismiss: ignored
    story.bot.fake.add_reaction(root.id, "maintainer", "-1")
    # A force-push: a new commit on main's tip (the old head is not an ancestor) that adds a line
    # above f2 and edits f2's line; a full review, where the model says it again, two lines lower.
    text = "# calc\n" + CALC.replace("x + 2", "x - 20").replace("x + 6", "x / 6")
    story.push({"src/calc.py": text}, "rewritten", parent=story.main)
    story.script_review(
        [finding(LINE_F2 + 1, "f2 subtracts 20 instead of adding"), finding(LINE_F6 + 1, "f6 divides.")]
    )
    story.send("synchronize")
    reviewed(story, 2)
    second = story.reviews()[1]
    assert "Automatic review of the whole pull request" in second.body
    assert [c.line for c in story.review_comments(second)] == [LINE_F6 + 1]
    assert ledger(story)[0] == (LINE_F2, "dismissed", "reaction", "maintainer")
    assert [row[1] for row in ledger(story)] == ["dismissed", "open"]
    calls = story.bot.fake.calls_to("reactions/list-for-pull-request-review-comment")
    assert len(calls) == 1  # read when the second review started


def test_a_fixed_finding_is_answered_and_its_thread_resolved(story: Story) -> None:
    root = first_review_finding(story, "f2 subtracts.")
    first_head = story.pull.head_sha
    # The author fixes f2 (its line changes) and changes f4; the re-review says nothing of f2.
    fixed = story.push({"src/calc.py": CALC.replace("x + 4", "x * 4")}, "fix f2")
    story.script_review([finding(LINE_F4, "f4 multiplies.")])
    story.send("synchronize", before=first_head, after=fixed)
    reviewed(story, 2)
    story.wait_summary("Findings: 1 open, 1 fixed, 0 dismissed.")
    [reply] = [c for c in story.bot.fake.comments.values() if c.in_reply_to == root.id]
    assert reply.user == BOT and reply.body.startswith(f"Fixed in `{fixed[:7]}`.")
    assert story.bot.fake.resolved_threads == {root.id}  # through GraphQL resolveReviewThread
    assert [c for c in story.bot.fake.calls if c.operation_id == "graphql"]
    assert [row[:2] for row in ledger(story)] == [(LINE_F2, "fixed"), (LINE_F4, "open")]
    # The bot's own resolution comes back as a webhook: it dismisses nothing.
    response = story.bot.send(
        delivery("pull_request_review_thread", resolved_payload(story, root, BOT), SECRET)
    )
    assert response.status_code == 202
    wait_for(story.review_jobs_done, what="the delivery")
    assert [row[1] for row in ledger(story)] == ["fixed", "open"]


def test_a_resolved_thread_dismisses(story: Story) -> None:
    root = first_review_finding(story, "f2 subtracts.")
    for sender in ("reader", "maintainer"):  # a reader's resolution counts for nothing
        payload = resolved_payload(story, root, sender)
        assert story.bot.send(delivery("pull_request_review_thread", payload, SECRET)).status_code == 202
        wait_for(story.review_jobs_done, what="the delivery")
    wait_for(lambda: ledger(story)[0][1] == "dismissed", what="the dismissal")
    assert ledger(story) == [(LINE_F2, "dismissed", "resolved", "maintainer")]
    story.wait_summary("Findings: 0 open, 0 fixed, 1 dismissed.")


def test_max_comments_and_severity_choose_what_is_posted(tmp_path: Path) -> None:
    config = CONFIG + "review:\n  max_comments: 2\n  severity: minor\n"
    changed = CALC.replace("x + 2", "x - 2").replace("x + 4", "x * 4").replace("x + 6", "x / 6")
    with review_stack(tmp_path, config) as story:
        story.bot.git.commit(REPO, {"src/calc.py": changed}, branch="feature")
        head = story.bot.git.repository(REPO).references["refs/heads/feature"].target
        story.push({"src/calc.py": changed + "\n"}, parent=str(head))
        story.script_review(
            [
                finding(LINE_F2, "a nit", "nit"),
                finding(LINE_F2, "minor one", "minor"),
                finding(LINE_F4, "critical one", "critical"),
                finding(LINE_F6, "major one", "major"),
            ]
        )
        story.send("opened")
        reviewed(story, 1)
        review = story.reviews()[0]
        assert [c.body.split("\n")[:2] for c in story.review_comments(review)] == [
            ["**critical**", "critical one"],
            ["**major**", "major one"],
        ]
        assert "1 more finding not posted (`review.max_comments` is 2)" in review.body
        assert "1 finding below `review.severity: minor` not posted" in review.body
        with sqlite3.connect(story.bot.work_dir / "beam.db") as db:
            rows = list(db.execute("SELECT line, severity FROM review_findings ORDER BY id"))
        assert rows == [(LINE_F4, "critical"), (LINE_F6, "major")]
        # The tool's schema asks for a severity on every finding.
        tools = story.bot.llm.requests[0]["tools"]
        [review_change] = [t for t in tools if t["function"]["name"] == "review_change"]
        item = review_change["function"]["parameters"]["properties"]["comments"]["items"]
        assert "severity" in item["required"]
        assert item["properties"]["severity"]["enum"] == ["nit", "minor", "major", "critical"]


def test_path_instructions_and_tone_reach_the_prompt_as_data(tmp_path: Path) -> None:
    config = (
        CONFIG + "review:\n  tone: detailed\n  path_instructions:\n"
        "    'src/**': Check every return value for overflow.\n"
        "    'docs/**': Only spelling.\n"
    )
    with review_stack(tmp_path, config) as story:
        story.script_review([])
        story.send("opened")
        story.wait_summary(story.pull.head_sha[:7])
        prompt = last_prompt(story)
        fenced = prompt[prompt.index("untrusted") :]
        assert "`src/**` (`src/calc.py`): Check every return value for overflow." in fenced
        assert "Only spelling" not in prompt  # no changed file under docs/
        assert "detailed: explain each problem" in fenced


def test_a_bad_review_section_is_reported_on_the_pull_request(tmp_path: Path) -> None:
    config = CONFIG + "review:\n  severity: huge\n"
    with review_stack(tmp_path, config) as story:
        story.send("opened")
        summary = story.wait_summary("invalid")
        assert "review.severity: 'huge' is not a severity; choose from nit, minor, major, critical" in summary
        assert story.reviews() == [] and story.bot.llm.requests == []
        assert story.pull.number == NUMBER


def test_beam_review_honours_the_same_rules(tmp_path: Path) -> None:
    """`/beam review`, asked for by a maintainer, under the same `review:` section."""
    config = (
        "version: 1\nreview:\n  max_comments: 1\n  tone: concise\n  path_instructions:\n"
        "    'src/*.py': Look for sign errors.\n"
    )
    with review_stack(tmp_path, config) as story:
        story.script_review(
            [finding(LINE_F2, "a minor one", "minor"), finding(LINE_F2, "the critical one", "critical")]
        )
        body = "/beam review"
        comment = story.bot.fake.add_comment(REPO, NUMBER, body, user="maintainer")
        payload = issue_comment_payload(
            body, repo=REPO, number=NUMBER, commenter="maintainer", comment_id=comment.id
        )
        story.bot.send(delivery("issue_comment", comment_payload(story.bot, payload, REPO), SECRET))
        wait_for(lambda: story.reviews(), timeout=40, what="the review")
        review = story.reviews()[0]
        assert [c.body.split("\n")[:2] for c in story.review_comments(review)] == [
            ["**critical**", "the critical one"]
        ]
        assert "1 more finding not posted (`review.max_comments` is 1)" in review.body
        prompt = last_prompt(story)
        fenced = prompt[prompt.index("untrusted") :]
        assert "`src/*.py` (`src/calc.py`): Look for sign errors." in fenced
        assert "concise: one or two sentences" in fenced
