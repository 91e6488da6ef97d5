"""Issue 21 end to end, on the fake GitHub and real git: what an automatic review's model sees (numbered
hunks, linter findings on changed lines), a suggestion that would not parse shown as plain code, and a
pull request over one call's token budget reviewed in chunks, with lock and `linguist-generated`
files skipped and named."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.e2e.review_support import CALC, NUMBER, REPO, Story
from tests.support.bot_process import SECRET, bot_stack, comment_payload, wait_for
from tests.support.webhooks import delivery, issue_comment_payload

LINE_F2 = 5
COLLECT = "\n\ndef collect(item, bucket=[]):\n    bucket.append(item)\n    return bucket\n"
SCRIPT = "#!/bin/bash\nset -e\nrm -rf $DIR/*\n"


@contextmanager
def reviewing(tmp_path: Path, config: str, files: dict[str, str], **env: str) -> Iterator[Story]:
    with bot_stack(tmp_path, **env) as bot:
        story = Story(bot)
        story.seed(config, files=files)
        bot.start()
        yield story


def prompts(story: Story) -> list[str]:
    """The first user message of every call: the prompt the review built for it."""
    out = []
    for request in story.bot.llm.requests:
        users = [m["content"] for m in request["messages"] if m["role"] == "user"]
        if users and "untrusted" in users[0] and users[0] not in out:
            out.append(users[0])
    return out


def test_the_model_sees_numbered_hunks_and_lint_findings_and_a_broken_suggestion_is_plain_code(
    tmp_path: Path,
) -> None:
    config = "version: 1\nauto_review:\n  enabled: true\n  debounce: 1s\nreview:\n  focus: true\n"
    files = {"src/calc.py": CALC.replace("x + 2", "x - 2") + COLLECT, "scripts/run.sh": SCRIPT}
    with reviewing(tmp_path, config, files) as story:
        broken = {
            "path": "src/calc.py",
            "line": LINE_F2,
            "body": "f2 subtracts.",
            "suggestion": "    return x +\n",
        }
        story.script_review([broken])
        story.send("opened")
        story.wait_summary("1 finding")
        [prompt] = prompts(story)
        # Numbered new side: the number before the line is what `line` takes.
        # Focused (`review.focus: true`; off by default): the hunk names its function, each removed
        # line in its place, without a number.
        block = "@@ -2 +2 @@ in function `f2` (lines 4-5; the diff: 2-8)\n2      return x + 1\n3  \n"
        assert block + "4  def f2(x):\n  -    return x + 2\n5 +    return x - 2\n" in prompt
        assert "only the diff's lines take an inline comment" in prompt.split("````")[0]  # ours, not data
        # Linter findings on changed lines only, as data inside the fence.
        fence_end = prompt.rindex("````")
        assert prompt.index("linter findings on changed lines") < fence_end
        assert "src/calc.py:33: ruff B006" in prompt
        assert "scripts/run.sh:3: shellcheck SC2115" in prompt
        assert "ruff F" not in prompt  # nothing unchanged is reported
        [review] = story.reviews()
        [comment] = story.review_comments(review)
        assert comment.line == LINE_F2
        assert "Suggested code (not offered as a suggestion: it would not parse):" in comment.body
        assert "```suggestion" not in comment.body


def _module(name: str) -> str:
    return "".join(f"def {name}{n}(value):\n    return value * {n} + {n}\n\n" for n in range(1, 16))


def test_a_pull_request_over_the_budget_is_reviewed_in_chunks_and_skipped_files_are_named(
    tmp_path: Path,
) -> None:
    config = "version: 1\nauto_review:\n  enabled: true\n  debounce: 1s\nreview:\n  max_calls: 2\n"
    files = {
        ".gitattributes": "gen/** linguist-generated\n",
        "gen/api.py": _module("generated"),
        "package-lock.json": '{"lockfileVersion": 3}\n',
        "src/a.py": _module("alpha"),
        "src/b.py": _module("beta"),
        "src/c.py": _module("gamma"),
        "tests/test_a.py": _module("test_alpha"),
    }
    with reviewing(tmp_path, config, files, BEAM_REVIEW_TOKENS_PER_CALL="2000") as story:
        same = {"path": "src/a.py", "line": 2, "body": "Off by one: the constant is added twice."}
        story.script_review([same], body="Part one.")
        story.script_review(
            [
                {**same, "body": "off by ONE: the constant is added twice"},
                {"path": "src/b.py", "line": 5, "body": "B."},
            ],
            body="Part two.",
        )
        story.send("opened")
        summary = story.wait_summary("2 findings")
        calls = prompts(story)
        assert len(calls) == 2  # review.max_calls: 2, though three source files do not fit in one
        assert "## src/a.py" in calls[0] and "## src/b.py" not in calls[0]
        assert "## src/b.py" in calls[1] and "part 2 of 2" in calls[1]
        for text in calls:
            assert "## gen/api.py" not in text and "## package-lock.json" not in text
            assert "gen/api.py (generated)" in text and "package-lock.json (lock file)" in text
        # Source before tests: the test file is what the budget left out, with c.py.
        assert "src/c.py (over the token budget)" in calls[1]
        assert "tests/test_a.py (over the token budget)" in calls[1]
        [review] = story.reviews()
        comments = story.review_comments(review)
        assert sorted((c.path, c.line) for c in comments) == [("src/a.py", 2), ("src/b.py", 5)]
        assert "Part one." in review.body and "Part two." in review.body
        assert "Not reviewed:" in review.body and "`gen/api.py (generated)`" in review.body
        for name in ("gen/api.py (generated)", "package-lock.json (lock file)", "src/c.py (over the token"):
            assert name in summary


def test_beam_review_over_the_budget_is_one_review_from_chunked_calls(tmp_path: Path) -> None:
    config = "version: 1\nreview:\n  max_calls: 2\n"
    files = {"src/a.py": _module("alpha"), "src/b.py": _module("beta"), "src/c.py": _module("gamma")}
    with reviewing(tmp_path, config, files, BEAM_REVIEW_TOKENS_PER_CALL="2000") as story:
        bot = story.bot
        bot.llm.reply_tool_calls(
            ("review_change", {"body": "A.", "comments": [{"path": "src/a.py", "line": 2, "body": "One."}]})
        )
        bot.llm.reply_text("Part one posted.")
        bot.llm.reply_tool_calls(
            ("review_change", {"body": "B.", "comments": [{"path": "src/b.py", "line": 5, "body": "Two."}]})
        )
        bot.llm.reply_text("Part two posted.")
        comment = bot.fake.add_comment(REPO, NUMBER, "/beam review", user="maintainer")
        payload = issue_comment_payload(
            "/beam review", repo=REPO, number=NUMBER, commenter="maintainer", comment_id=comment.id
        )
        assert (
            bot.send(delivery("issue_comment", comment_payload(bot, payload, REPO), SECRET)).status_code
            == 202
        )
        wait_for(
            lambda: len(story.reviews()) == 1 and "Not reviewed" in final(story),
            timeout=60,
            what="the review",
        )
        calls = prompts(story)
        assert len(calls) == 2 and "## src/a.py" in calls[0] and "## src/b.py" in calls[1]
        [review] = story.reviews()
        assert sorted((c.path, c.line) for c in story.review_comments(review)) == [
            ("src/a.py", 2),
            ("src/b.py", 5),
        ]
        assert "A." in review.body and "B." in review.body
        assert "`src/c.py (over the token budget)`" in final(story)


def final(story: Story) -> str:
    bodies = [c.body for c in story.bot_comments() if "beam-run:" in c.body and "Working on" not in c.body]
    return bodies[0] if bodies else ""
