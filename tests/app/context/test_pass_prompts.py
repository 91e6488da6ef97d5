"""One builder of a run's prompts for every door (context/pass_prompts.py): the same checkout and
change read the same whichever door asks; the task and what a door passes in are all that differ."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bot.app.context.pass_prompts import Asked, Automatic, PromptBuilder
from bot.app.context.prompt import build_prompt, build_review_prompts
from bot.app.context.review_context import UntrustedSection, review_context
from bot.app.github.models import PullFile
from bot.app.github.payloads import CommentEvent
from bot.app.limits.policy import Limits
from bot.app.repo_config.review_rules import ReviewRules
from bot.beam.sandbox import SandboxRoot
from tests.app.context.test_prompt import pull
from tests.support.webhooks import issue_comment_payload

pytestmark = pytest.mark.anyio

CALC = "".join(f"def f{n}(x):\n    return x + {n}\n\n" for n in range(1, 6))
FILES = [
    PullFile(
        filename="src/calc.py", status="modified", patch="@@ -5 +5 @@\n-    return x + 2\n+    return x - 2"
    )
]
RULES = ReviewRules(linters=False, focus=True)  # the focused plan: each hunk named by its function
SECTIONS = [UntrustedSection("path instructions (review.path_instructions):", "src/**: keep it short")]


def checkout(tmp_path: Path) -> SandboxRoot:
    (tmp_path / "src").mkdir()
    (tmp_path / "src/calc.py").write_text(CALC.replace("x + 2", "x - 2"))
    return SandboxRoot(tmp_path)


def fence(prompt: str) -> int:
    """Where the pull request, fenced as untrusted data, begins."""
    found = re.search(r"^(`{3,}|~{3,})untrusted$", prompt, re.M)
    assert found is not None, prompt
    return found.start()


async def test_a_request_and_an_automatic_review_read_the_same_change(tmp_path: Path) -> None:
    root = checkout(tmp_path)
    event = CommentEvent.model_validate(issue_comment_payload("/beam review", repo="octo/demo"))
    asked = PromptBuilder(root, Asked(event, "review", ""), pull(), 1, RULES, Limits(), SECTIONS)
    auto = PromptBuilder(root, Automatic("octo/demo"), pull(), 1, RULES, Limits(), SECTIONS)

    by_request = await asked(FILES, False, 0)
    by_itself = await auto(FILES, False, 0)

    # Each is what its own prompt function writes from the same context: the builder adds nothing.
    context = await review_context(root, FILES, RULES, Limits(), SECTIONS)
    _, expected = build_prompt(event, "review", "", pull(), FILES, 1, context=context)
    assert by_request.calls == expected.calls and by_request.call_files == [["src/calc.py"]]
    scope = Automatic("octo/demo")
    assert (
        by_itself.calls
        == build_review_prompts("octo/demo", pull(), _Scope(FILES), scope.changed, scope.since, context).texts
    )
    # The pull request as data is the same; only the task before it differs.
    [one], [other] = by_request.calls, by_itself.calls
    assert one[fence(one) :] == other[fence(other) :]
    assert "keep it short" in one and "in function `f2`" in one
    assert one.startswith("Request from @octocat:") and "on your own initiative" in other
    # What each built is kept for the door's notes: the coverage and the context.
    coverage, kept = auto.last
    assert coverage.calls == by_itself.calls and kept.sections == SECTIONS and kept.lint is None


async def test_another_skill_reads_the_bare_hunks_without_a_reviews_sections(tmp_path: Path) -> None:
    root = checkout(tmp_path)
    event = CommentEvent.model_validate(issue_comment_payload("/beam summarize", repo="octo/demo"))
    builder = PromptBuilder(root, Asked(event, "summarize", ""), pull(), 1, ReviewRules(), Limits(), SECTIONS)

    coverage, context = await builder.coverage(FILES, one_call=True, order=3)

    [prompt] = coverage.calls
    assert "keep it short" not in prompt and " in function " not in prompt
    assert context.lint is None and context.sources is None and context.order == 0
    assert builder.built == [(coverage, context)]


class _Scope:
    """The scope build_review_prompts reads, as an automatic review passes it."""

    def __init__(self, files: list[PullFile]) -> None:
        self.files, self.total = files, 1
        self.unread: list[str] = []
