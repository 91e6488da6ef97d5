"""What a kill soak must end with, wherever its processes ran (tests/e2e/test_soak.py on one host,
tests/multihost/test_hosts.py over several): every command answered once, no orphan, no duplicate."""

from __future__ import annotations

import re
from collections import Counter

from tests.support.fake_github import FakeGitHub

MARK = re.compile(r"<!-- beam-(?:effect|run):([^ ]+) -->")


def assert_soak_ended_clean(fake: FakeGitHub, bot: str, helps: int, summaries: int) -> None:
    comments = [c for c in list(fake.comments.values()) if c.user == bot]
    marks = [m for c in comments for m in MARK.findall(c.body)[:1]]
    assert len(marks) == len(comments), "a bot comment without its marker (an orphan)"
    doubled = [m for m, n in Counter(marks).items() if n > 1]
    assert doubled == [], f"duplicates: {doubled}"
    replies = [c for c in comments if "beam-effect:" in c.body and ":reply-" in c.body]
    # A summarize sent while an identical one is queued or running on its pull request is answered
    # with a link to it instead of a second run (issue 11): every command is answered once either way.
    duplicates = [c for c in replies if "I will not start it twice" in c.body]
    answered_help = [c for c in replies if "I will not start it twice" not in c.body]
    runs = [c for c in comments if "beam-run:" in c.body]
    assert (len(answered_help), len(runs) + len(duplicates)) == (helps, summaries)
    assert not [c.body for c in runs if "Working on" in c.body or "retrying" in c.body or "failed" in c.body]
    eyes = Counter(r.comment_id for r in list(fake.reactions.values()) if r.user == bot)
    assert len(eyes) == len(runs) and set(eyes.values()) == {1}
