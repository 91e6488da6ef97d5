"""Issue 41: one review from every door. The same scripted review goes through the four doors a review
leaves by, each on its own copy of the same pull request: `/beam review` on the App (the real app,
`beam-bot serve`, against the fake GitHub and real git), an automatic review, `beam-bot review <URL>
--post` as a process against the same fake GitHub, and `beam-bot run review --json` on a clone.
What each posts (or prints) is compared: the same findings, the same body, the same footer. They
differ only where the door must: an automatic review names the range it reviewed, and the doors that
post to GitHub mark each finding (the ledger's key) and each write (the journal's key), which a
printed review has no use for. And what the model is sent is compared too: the same change reads the
same through every door; the task before it differs only between a request someone made and an
automatic review, and the request only by who made it."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from bot.app.reviews.findings import marker_key
from tests.e2e.review_support import NUMBER, REPO, Story, review_stack
from tests.e2e.test_one_set_of_findings import CONFIG, finding, post_from_terminal
from tests.local.test_run import git, run_cli
from tests.support.bot_process import SECRET, comment_payload, wait_for
from tests.support.webhooks import delivery, issue_comment_payload

pytestmark = pytest.mark.timeout(300)

OTHER = "f3 adds 3 where its callers expect it to multiply."
# Held back by `review.max_comments: 1` on every door: the body says so, the same words.
RULES = "review:\n  max_comments: 1\n"
FINDINGS = [finding(), {**finding(line=8, body=OTHER), "severity": "minor"}]
BODY = "Two problems in calc."


@dataclass(frozen=True)
class Posted:
    """What a door left: the review's body, and its inline comments as (path, line, body)."""

    body: str
    comments: list[tuple[str, int, str]]
    marked: bool  # every inline comment carries its finding's marker


def from_github(story: Story) -> Posted:
    [review] = story.reviews()
    comments = [(c.path or "", c.line or 0, c.body) for c in story.review_comments(review)]
    return Posted(review.body, comments, all(marker_key(body) is not None for *_, body in comments))


def beam_review(story: Story, tmp_path: Path) -> Posted:
    bot = story.bot
    comment = bot.fake.add_comment(REPO, NUMBER, "/beam review", user="maintainer")
    payload = issue_comment_payload(
        "/beam review", repo=REPO, number=NUMBER, commenter="maintainer", comment_id=comment.id
    )
    assert bot.send(delivery("issue_comment", comment_payload(bot, payload, REPO), SECRET)).status_code == 202
    wait_for(lambda: story.reviews(), timeout=60, what="the review of /beam review")
    return from_github(story)


def automatic_review(story: Story, tmp_path: Path) -> Posted:
    story.send("opened")
    story.wait_summary("1 finding", timeout=60)
    return from_github(story)


def post_from_the_terminal(story: Story, tmp_path: Path) -> Posted:
    done = post_from_terminal(story)
    assert done.returncode == 0, done.stdout + done.stderr
    return from_github(story)


def run_review(story: Story, tmp_path: Path) -> Posted:
    work = tmp_path / "clone"
    bare = str(story.bot.git.bare_path(REPO))
    subprocess.run(["git", "clone", "-q", bare, str(work)], check=True, capture_output=True)
    git(work, "checkout", "-q", "feature")
    done = run_cli(["review", "--repo", str(work), "--json"], story.bot.llm)
    assert done.returncode == 0, done.stdout + done.stderr
    [printed] = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    review = printed["review"]
    comments = [(c["path"], c["line"], c["body"]) for c in review["comments"]]
    return Posted(review["body"], comments, False)


DOORS: dict[str, Callable[[Story, Path], Posted]] = {
    "/beam review": beam_review,
    "automatic review": automatic_review,
    "review <URL> --post": post_from_the_terminal,
    "run review": run_review,
}
_EFFECT = re.compile(r"\n?<!-- beam-effect:[^>]*-->")
_FINDING = re.compile(r"\n*<!-- beam-finding:[^>]*-->")
_RANGE = re.compile(r"\n*<sub>Automatic review of [^<]* by beam-bot\.</sub>")
_NUMBERS = re.compile(r"\d[\d,.]*")
# What the model is sent that each door must have its own of: who asked (nobody, for an automatic
# review; a terminal for `review <URL>`), the commits' ids (each door's stack makes its own), and the
# pull request's number, title and author (a checkout has none: `run review` names it a local change,
# by its commit, and calls it that in its task).
_REQUESTER = re.compile(r"^Request from (?:@[^:\n]*|a terminal \(beam-bot review\)):", re.M)
_SHA = re.compile(r"\([0-9a-f]{12}\)")
_PULL = re.compile(r"^(?:pull request #\d+|local change \(not a pull request\)): .*$", re.M)
_AUTHOR = re.compile(r"^author: @\S+\n", re.M)
_CHANGE = re.compile(r"\b(?:pull request|local change)\b")
_FENCE = re.compile(r"^(`{3,}|~{3,})untrusted$", re.M)


def raw_prompt(story: Story) -> str:
    messages = story.bot.llm.requests[0]["messages"]
    return str(next(m["content"] for m in messages if m["role"] == "user"))


def first_prompt(prompt: str) -> tuple[str, str]:
    """The first call's prompt, as (the task before the pull request, the pull request as data),
    without what each door must have its own of."""
    prompt = _REQUESTER.sub("Request from @WHO:", prompt)
    prompt = _AUTHOR.sub("", _PULL.sub("pull request #N: TITLE", _SHA.sub("(SHA)", prompt)))
    fence = _FENCE.search(prompt)
    assert fence is not None, prompt
    return _CHANGE.sub("CHANGE", prompt[: fence.start()]), prompt[fence.start() :]


def said(posted: Posted) -> tuple[str, str, list[tuple[str, int, str]]]:
    """The body, its footer (numbers aside: tokens and seconds are each run's), and the findings,
    without what only some doors must add."""
    body = _RANGE.sub("", _EFFECT.sub("", posted.body)).strip()
    text, _, footer = body.rpartition("\n\n")
    comments = [(path, line, _FINDING.sub("", text_).strip()) for path, line, text_ in posted.comments]
    return text, _NUMBERS.sub("N", footer), comments


def test_one_scripted_review_says_the_same_through_every_door(tmp_path: Path) -> None:
    seen: dict[str, Posted] = {}
    raw: dict[str, str] = {}
    for name, door in DOORS.items():
        where = tmp_path / re.sub(r"\W+", "-", name).strip("-")
        with review_stack(where, CONFIG + RULES) as story:
            story.bot.llm.fallback_text = "Done."
            # The doors on a terminal read `.github/beam.yml` from the default branch's commits.
            story.bot.git.commit(REPO, {".github/beam.yml": CONFIG + RULES}, message="Configure beam")
            story.script_review(FINDINGS, BODY)
            seen[name] = door(story, where)
            raw[name] = raw_prompt(story)
    sent = {name: first_prompt(prompt) for name, prompt in raw.items()}

    first = said(seen["/beam review"])
    text, footer, comments = first
    # The one poster's draft: the model's body, the line for what `max_comments` held back, the footer.
    assert text.startswith(BODY) and "1 more finding not posted (`review.max_comments` is 1)" in text
    assert footer.startswith("<sub>model `fake-model` · N input / N output tokens")
    assert [(path, line) for path, line, _ in comments] == [("src/calc.py", 5)]
    for name, posted in seen.items():
        assert said(posted) == first, name
    # Where the doors must differ: the range of an automatic review; the markers of what GitHub holds.
    assert "Automatic review of the whole pull request" in seen["automatic review"].body
    assert all(seen[name].marked for name in ("/beam review", "automatic review", "review <URL> --post"))
    assert not any("beam-finding" in body for *_, body in seen["run review"].comments)

    # What the model was sent: the change, as data, the same through every door (the diff, its
    # numbering, the maintainers' tone); the task the same for every request someone made.
    task, data = sent["/beam review"]
    assert "+    return x - 2" in data and "review.tone" in data
    assert all(sent[name][1] == data for name in DOORS), {name: sent[name][1] for name in DOORS}
    assert all(sent[name][0] == task for name in ("review <URL> --post", "run review")), sent
    assert sent["automatic review"][0] != task and "on your own initiative" in sent["automatic review"][0]
    # Who asked is who asked: the commenter, the terminal; the pull request's author is data on every
    # door that has one, and a checkout's change is named as what it is, never a pull request.
    assert re.search(r"^Request from @maintainer: Review this pull request\.", raw["/beam review"], re.M)
    assert re.search(r"^Request from a terminal \(beam-bot review\): ", raw["review <URL> --post"], re.M)
    assert not any("Request from @contributor" in prompt for prompt in raw.values())
    assert all("\nauthor: @contributor\n" in raw[name] for name in DOORS if name != "run review")
    local = raw["run review"]
    assert re.search(r"^Request from @[^:\n]*: Review this local change\.", local, re.M)
    assert "author:" not in local and "pull request" not in local.replace("(not a pull request)", "")
