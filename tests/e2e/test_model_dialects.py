"""Issue 20 end to end: `/beam review` against a model that writes its calls in each common dialect.

The bot (`beam-bot serve`, a subprocess) talks to the fake OpenAI server over HTTP and to the fake
GitHub. Each dialect's run must post its review through `review_change` (so the call was read), and
nothing the bot writes on GitHub may carry raw call syntax or reasoning (security invariant 10).
One bot serves every case in turn, to keep the file cheap; the server that refuses `tools` comes last
because the bot then remembers it for the rest of its life.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.bot_process import SECRET, BotProcess, bot_stack, comment_payload, wait_for
from tests.support.fake_github_state import PullFile
from tests.support.openai_server import chat_response, text_message
from tests.support.webhooks import delivery, issue_comment_payload

REPO = "octo/demo"
PATCH = "@@ -1,2 +1,3 @@\n def add(a, b):\n-    return a - b\n+    return a + b\n+# fixed\n"
BOT_LOGIN = "beam-bot[bot]"
THOUGHT = "PRIVATE-REASONING-4711"
READ = {"path": "src/calc.py"}
REVIEW = {
    "body": "The fix is missing a test.",
    "comments": [{"path": "src/calc.py", "line": 2, "body": "Check for overflow."}],
}
# What must never reach GitHub.
RAW = (
    "<tool_call>",
    "</tool_call>",
    "[TOOL_CALLS]",
    '{"name"',
    '"arguments"',
    "<think>",
    "</think>",
    THOUGHT,
)

BIG_LINES = 1500
BIG_PATCH = f"@@ -0,0 +1,{BIG_LINES} @@\n" + "".join(
    f"+value_{n:05d} = {n}  # a long line\n" for n in range(BIG_LINES)
)
OVERFLOW = "request (40000 tokens) exceeds the available context size (32768 tokens), try increasing it"

Reply = Callable[[str, dict[str, Any]], dict[str, Any]]


def as_json(name: str, args: dict[str, Any]) -> str:
    return json.dumps({"name": name, "arguments": args})


def native_object(name: str, args: dict[str, Any]) -> dict[str, Any]:
    """No id, no type, arguments as an object, reasoning beside it."""
    message = {"role": "assistant", "content": None, "reasoning_content": THOUGHT}
    message["tool_calls"] = [{"function": {"name": name, "arguments": args}}]
    return chat_response(message)


def bare(name: str, args: dict[str, Any]) -> dict[str, Any]:
    return chat_response(text_message(as_json(name, args)))


def fenced(name: str, args: dict[str, Any]) -> dict[str, Any]:
    return chat_response(text_message(f"I will call {name} now.\n\n```json\n{as_json(name, args)}\n```"))


def tagged(name: str, args: dict[str, Any]) -> dict[str, Any]:
    return chat_response(
        text_message(f"<think>{THOUGHT}</think>\n<tool_call>\n{as_json(name, args)}\n</tool_call>")
    )


def mistral(name: str, args: dict[str, Any]) -> dict[str, Any]:
    return chat_response(text_message(f"[TOOL_CALLS][{as_json(name, args)}]"))


def final_answer() -> dict[str, Any]:
    message = text_message(f"<think>{THOUGHT}</think>\n\nReviewed: `src/calc.py:2` now adds.")
    message["reasoning_content"] = THOUGHT
    return chat_response(message)


@pytest.fixture(scope="module")
def bot(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BotProcess]:
    tmp_path: Path = tmp_path_factory.mktemp("dialects")
    with bot_stack(tmp_path) as bot:
        seed(bot)
        bot.start()
        yield bot


def seed(bot: BotProcess) -> None:
    """Pull request 7 (a three-line fix) and 8 (a file too big for the context)."""
    main = bot.git.seed(REPO, {"README.md": "Demo\n", "src/calc.py": "def add(a, b):\n    return a - b\n"})
    head = bot.git.commit(
        REPO,
        {"src/calc.py": "def add(a, b):\n    return a + b\n# fixed\n"},
        branch="feature",
        message="Fix",
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
    bot.git.create_pull_ref(REPO, 8, head)
    bot.fake.add_pull(
        REPO,
        number=8,
        title="A big change",
        head_ref="feature",
        head_sha=head,
        base_sha=main,
        files=[PullFile("src/big.py", additions=BIG_LINES, deletions=0, patch=BIG_PATCH)],
    )


def written_by_bot(bot: BotProcess) -> list[str]:
    """Every text the bot wrote on GitHub: comments (tracking and inline) and review bodies."""
    texts = [c.body for c in bot.fake.comments.values() if c.user == BOT_LOGIN]
    return texts + [r.body for r in bot.fake.reviews_on(REPO, 7)]


def review_command(bot: BotProcess, number: int = 7) -> None:
    body = "/beam review"
    comment = bot.fake.add_comment(REPO, number, body, user="maintainer")
    payload = issue_comment_payload(
        body, repo=REPO, number=number, commenter="maintainer", comment_id=comment.id
    )
    assert bot.send(delivery("issue_comment", comment_payload(bot, payload, REPO), SECRET)).status_code == 202


def finals(bot: BotProcess, number: int = 7) -> list[str]:
    return [
        c.body
        for c in bot.fake.comments_on(REPO, number)
        if c.user == BOT_LOGIN and "beam-run:" in c.body and "Working on" not in c.body
    ]


def run_review(bot: BotProcess, number: int = 7) -> str:
    before = len(finals(bot, number))
    review_command(bot, number)

    def final() -> str | None:
        done = finals(bot, number)
        return done[before] if len(done) > before else None

    return wait_for(final, what="the final comment")


def assert_clean(bot: BotProcess) -> None:
    for text in written_by_bot(bot):
        for raw in RAW:
            assert raw not in text, f"{raw!r} reached GitHub in: {text[:300]}"


@pytest.mark.parametrize("dialect", [native_object, bare, fenced, tagged, mistral])
def test_each_dialect_posts_its_review_and_nothing_raw(bot: BotProcess, dialect: Reply) -> None:
    reviews = len(bot.fake.reviews_on(REPO, 7))
    bot.llm.enqueue(dialect("read_file", READ))
    bot.llm.enqueue(dialect("review_change", REVIEW))
    bot.llm.enqueue(final_answer())
    final = run_review(bot)
    assert "Posted a review" in final and "Reviewed:" in final
    posted = bot.fake.reviews_on(REPO, 7)
    assert len(posted) == reviews + 1
    assert "The fix is missing a test." in posted[-1].body and len(posted[-1].comment_ids) == 1
    assert bot.llm.pending == 0
    assert_clean(bot)


@pytest.mark.parametrize(
    "answer",
    [
        f"My review:\n```json\n{json.dumps(REVIEW)}\n```",  # the tool's arguments, without the call
        'Found one: [{"file": "src/calc.py", "line": 2, "issue": "Check for overflow."}]',  # findings
    ],
)
def test_findings_written_as_json_in_the_answer_are_posted_inline(bot: BotProcess, answer: str) -> None:
    """Issue 21: a model that ends with its findings in the text, never calling `review_change`."""
    reviews = len(bot.fake.reviews_on(REPO, 7))
    bot.llm.enqueue(chat_response(text_message(answer)))
    final = run_review(bot)
    assert "Posted a review" in final and "plain text" not in final
    posted = bot.fake.reviews_on(REPO, 7)
    assert len(posted) == reviews + 1
    [comment] = [bot.fake.comments[i] for i in posted[-1].comment_ids]
    assert (comment.path, comment.line) == ("src/calc.py", 2) and comment.body.startswith(
        "**minor**\nCheck for overflow."  # no severity named: `minor`, its label first
    )
    assert "```json" not in posted[-1].body and '"line"' not in posted[-1].body
    assert_clean(bot)


def test_a_model_that_keeps_sending_unusable_calls_is_asked_for_its_review_in_text(bot: BotProcess) -> None:
    reviews = len(bot.fake.reviews_on(REPO, 7))
    wrong = fenced("run_shell", {"cmd": "cat /etc/passwd"})
    bot.llm.enqueue(wrong)
    bot.llm.enqueue(wrong)
    bot.llm.enqueue(
        chat_response(
            text_message(f"The fix is missing a test.\n```json\n{as_json('run_shell', {'cmd': 'ls'})}\n```")
        )
    )
    final = run_review(bot)
    told, asked = bot.llm.requests[-2]["messages"][-1], bot.llm.requests[-1]["messages"][-1]
    assert told["role"] == "user" and "could not be used" in told["content"]
    assert asked["role"] == "user" and "in plain text" in asked["content"]
    # The review is the prose of its last answer, without the call, and both outputs say why.
    posted = bot.fake.reviews_on(REPO, 7)
    assert len(posted) == reviews + 1
    assert posted[-1].body.startswith("The fix is missing a test.") and posted[-1].comment_ids == []
    assert "The model answered in plain text instead of calling `review_change`" in final
    assert "BEM-094: `run_shell` is not one of the tools offered" in final
    assert_clean(bot)


def test_a_call_cut_by_length_every_time_is_not_reviewed(bot: BotProcess) -> None:
    reviews = len(bot.fake.reviews_on(REPO, 7))
    cut = text_message('Reading it.\n```json\n{"name": "read_file", "arguments": {"pa')
    bot.llm.enqueue(chat_response(cut, finish_reason="length"))
    bot.llm.enqueue(chat_response(cut, finish_reason="length"))
    bot.llm.enqueue(chat_response(cut, finish_reason="length"))
    final = run_review(bot)
    # Nothing usable came back, not even prose: no review is posted (never "No comments.", issue 29),
    # and the tracking comment says why, with what to do.
    assert len(bot.fake.reviews_on(REPO, 7)) == reviews
    assert "failed (BEM-091)" in final and "the answer was cut off by max_tokens" in final
    assert "What to do:" in final and "No comments." not in final
    assert bot.llm.pending == 0
    assert_clean(bot)


def user_prompt(body: dict[str, Any]) -> str:
    return str(next(m["content"] for m in body["messages"] if m["role"] == "user"))


def test_a_context_overflow_is_retried_once_with_half_the_diff(bot: BotProcess) -> None:
    sent = len(bot.llm.requests)
    bot.llm.reply_error(400, OVERFLOW)
    bot.llm.enqueue(chat_response(text_message("A plain review of the big change.")))
    final = run_review(bot, 8)
    first, retry = bot.llm.requests[sent:]
    # The diff is cut to at most half of what was sent, by whole hunks (issue 29: halving only the
    # token budget sent the same prompt again): its one hunk does not fit, and the prompt says so.
    assert "src/big.py (over the token budget)" not in user_prompt(first)
    assert "diff was cut by whole hunks" in user_prompt(retry) and "all of src/big.py" in user_prompt(retry)
    # Measured on the request bodies the server received, tool schemas and system prompt included.
    assert len(json.dumps(retry)) <= len(json.dumps(first)) * 0.6
    assert "Posted a review" in final and "diff was cut by whole hunks" in final  # the cut is named
    [review] = bot.fake.reviews_on(REPO, 8)
    assert "diff was cut by whole hunks" in review.body


def test_a_context_overflow_that_survives_the_retry_ends_with_bem_092(bot: BotProcess) -> None:
    sent = len(bot.llm.requests)
    bot.llm.reply_error(400, OVERFLOW)
    bot.llm.reply_error(400, OVERFLOW)
    final = run_review(bot, 8)
    assert len(bot.llm.requests) == sent + 2
    assert "failed (BEM-092)" in final and "longer than the model's context window" in final
    assert "the server's context is 32768 tokens" in final  # as the server said it
    assert "What to do:" in final and "llama-server -c" in final


def test_a_server_that_refuses_tools_gets_them_in_the_prompt(bot: BotProcess) -> None:
    bot.llm.reply_error(400, "tools param requires --jinja flag")
    bot.llm.enqueue(tagged("read_file", READ))
    bot.llm.enqueue(tagged("review_change", REVIEW))
    bot.llm.enqueue(final_answer())
    final = run_review(bot)
    assert "Posted a review" in final
    last = bot.llm.requests[-1]
    assert "tools" not in last and "# Tools" in last["messages"][0]["content"]
    assert all(m["role"] in ("system", "user", "assistant") for m in last["messages"])
    assert_clean(bot)


# -- issue 41: a server that takes `response_format` and answers without it ---------------------------


@pytest.fixture
def ignoring(tmp_path: Path) -> Iterator[BotProcess]:
    """A bot of its own: it remembers a server that ignores the schema for the rest of its life.
    `review.verify` is on (it is off by default): the check's answers are what these tests read."""
    with bot_stack(tmp_path) as bot:
        bot.llm.structured = True  # the schema is taken; what the script answers decides the rest
        seed(bot)
        bot.fake.set_file(REPO, "main", ".github/beam.yml", "version: 1\nreview:\n  verify: true\n")
        bot.start()
        yield bot


def structured_review(*comments: tuple[int, str]) -> str:
    items = [
        {"path": "src/calc.py", "start_line": None, "line": line, "severity": "major", "claim": claim}
        for line, claim in comments
    ]
    return json.dumps({"body": "Two bugs.", "comments": [{**c, "suggestion": None} for c in items]})


def test_a_server_that_ignores_the_schema_loses_no_finding_and_the_log_has_what_the_check_dropped(
    ignoring: BotProcess,
) -> None:
    bot = ignoring
    overflow = "`add` may overflow for large integers in other languages' ports."
    comment = "The `# fixed` comment is wrong: it says nothing about what changed."
    # 1. the schema is kept to: the check keeps one finding and drops the other, and the log says so
    bot.llm.reply_text(structured_review((2, overflow), (3, comment)))
    bot.llm.reply_text(json.dumps({"real": False, "line": None, "evidence": "return a + b"}))  # line 2
    bot.llm.reply_text(json.dumps({"real": True, "line": 3, "evidence": "# fixed"}))  # line 3
    assert "Posted a review" in run_review(bot)
    dropped = [line for line in bot.log().splitlines() if "verification dropped a finding" in line]
    assert len(dropped) == 1
    logged = json.loads(dropped[0].split("verification dropped a finding: ", 1)[1].split(" [")[0])
    assert logged["path"] == "src/calc.py" and logged["line"] == 2 and logged["claim"] == overflow
    assert logged["check"] == {"real": False, "line": None, "evidence": "return a + b"}
    # 2. the check is answered in prose, as without `response_format`: the finding is posted anyway
    bot.llm.reply_text(structured_review((3, comment)))
    bot.llm.reply_text("Yes, this is a real problem on line 3.")
    assert "Posted a review" in run_review(bot)
    review = bot.fake.reviews_on(REPO, 7)[-1]
    assert "1 finding not checked: the model's server did not answer to the schema." in review.body
    [posted] = [bot.fake.comments[i] for i in review.comment_ids]
    assert posted.line == 3 and "says nothing about what changed" in posted.body
    # 3. a later review asks for no schema: the tool loop answers
    asked = len(bot.llm.requests)
    bot.llm.reply_tool_calls(("review_change", REVIEW))
    bot.llm.reply_text("Posted.")
    assert "Posted a review" in run_review(bot)
    assert [("response_format" in r, "tools" in r) for r in bot.llm.requests[asked:]] == [(False, True)] * 2
    assert bot.llm.errors == []
