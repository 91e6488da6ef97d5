"""The review pass's issue-30 steps, driven with the scripted model on a real git checkout: the review
asked as structured output (and its fallback when the server refuses the schema, over real HTTP), the
calls of a chunked review merged, votes that keep what a majority found, and the verification pass
that drops a finding it cannot back."""

from __future__ import annotations

import json
import logging
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest

from bot.app.context.pass_prompts import PassPrompts
from bot.app.github.models import PullFile
from bot.app.limits.policy import Limits
from bot.app.reviews.answer_checks import review_schema
from bot.app.reviews.pass_end import files_read
from bot.app.reviews.review_pass import STRUCTURED_NOTE, ReviewPass
from bot.app.reviews.verification import verdict_schema
from bot.app.runs.usage import Meter, RunGuard
from bot.beam import structured_output
from bot.beam.completion import Completion, CompletionClient, PendingToolCall, ScriptedClient
from bot.beam.openai_client import OpenAiCompatible
from bot.beam.sandbox import SandboxRoot, WorkingTree
from bot.beam.types import TokenUsage
from tests.support.openai_server import FakeOpenAI

BASE = "def price(x):\n    total = x\n    return total\n\n\ndef name(p):\n    return p.name\n"
HEAD = "def price(x):\n    total = x\n    return total - 1\n\n\ndef name(p):\n    return p.name.strip()\n"
OTHER_BASE = "def size(xs):\n    return len(xs)\n"
OTHER_HEAD = "def size(xs):\n    return len(xs) + 1\n"
Posted = list[tuple[str, list[dict[str, Any]]]]

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def _forget() -> Any:
    structured_output.forget_all()
    yield
    structured_output.forget_all()


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True, timeout=30)
    return done.stdout


SOURCES = {"m.py": (BASE, HEAD), "o.py": (OTHER_BASE, OTHER_HEAD)}


def checkout(
    tmp_path: Path, sources: dict[str, tuple[str, str]] | None = None
) -> tuple[Path, list[PullFile]]:
    """A two-commit repository at its head (`sources`: each file's base and head, else m.py and
    o.py), and the change's files with GitHub's `patch`."""
    sources = sources or SOURCES
    repo = tmp_path / "repo"
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "t@example.invalid")
    git(repo, "config", "user.name", "t")
    for path, (base, _) in sources.items():
        (repo / path).write_text(base)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    for path, (_, head) in sources.items():
        (repo / path).write_text(head)
    git(repo, "commit", "-qam", "head")
    files = []
    for path in sources:
        diff = git(repo, "diff", "HEAD~1", "HEAD", "--", path)
        patch = diff[diff.index("@@") :]
        files.append(
            PullFile(filename=path, status="modified", additions=1, deletions=1, changes=2, patch=patch)
        )
    return repo, files


def answer(*comments: tuple[str, int, str], body: str = "Reviewed.") -> Completion:
    """A structured answer as the server sends it: text that is JSON of the schema."""
    items = [
        {"path": p, "line": n, "severity": "major", "claim": claim, "suggestion": None}
        for p, n, claim in comments
    ]
    return Completion.of_text(
        json.dumps({"body": body, "comments": items}),
        usage=TokenUsage(prompt_tokens=100, completion_tokens=20),
    )


def verdict(real: bool, line: int | None) -> Completion:
    text = json.dumps({"real": real, "line": line, "evidence": "return total - 1"})
    return Completion.of_text(text, usage=TokenUsage(prompt_tokens=50, completion_tokens=10))


class Rig:
    def __init__(
        self,
        tmp_path: Path,
        client: CompletionClient,
        *,
        calls: int = 1,
        max_tokens: int | None = None,
        sources: dict[str, tuple[str, str]] | None = None,
    ) -> None:
        self.repo, self.files = checkout(tmp_path, sources)
        self.meter = Meter(client)
        self.posted: Posted = []
        self.orders: list[int] = []
        self.calls = calls
        self.guard = RunGuard(
            self.meter, Limits(max_tokens_per_run=max_tokens), month_used=0, cancelled_by=self._nobody
        )

    @staticmethod
    async def _nobody() -> str | None:
        return None

    async def prompts(self, shown: list[PullFile], one_call: bool, order: int) -> PassPrompts:
        self.orders.append(order)
        if self.calls == 1:
            return PassPrompts(
                [f"Review the change (order {order}).\n{shown[0].patch}"], [[f.filename for f in shown]]
            )
        return PassPrompts([f"Review {f.filename}.\n{f.patch}" for f in shown], [[f.filename] for f in shown])

    async def post(self, body: str, comments: list[dict[str, Any]]) -> int | None:
        self.posted.append((body, comments))
        return len(self.posted)

    def review(self, **kwargs: Any) -> ReviewPass:
        return ReviewPass(
            tree=WorkingTree(SandboxRoot(self.repo), ["main"], allowed_push_branches=set()),
            files=self.files,
            prompts=self.prompts,
            meter=self.meter,
            guard=self.guard,
            post=self.post,
            blob_url=lambda p, a, b: f"https://example.invalid/{p}#L{a}-L{b}",
            run_id=str(uuid.uuid4()),
            repository="o/r",
            number=1,
            **kwargs,
        )


def found(posted: Posted) -> list[tuple[str, int, str]]:
    assert len(posted) == 1, "a review is posted exactly once"
    return [(c["path"], c["line"], c["finding"]) for c in posted[0][1]]


# -- structured output ----------------------------------------------------------------------------


async def test_the_review_is_asked_for_as_structured_output_and_goes_through_review_changes_checks(
    tmp_path: Path,
) -> None:
    text = json.dumps(
        {
            "body": "One bug.",
            "comments": [
                {
                    "path": "m.py",
                    "line": 3,
                    "severity": "major",
                    "claim": "returns one less",
                    "suggestion": "",
                },
                {
                    "path": "m.py",
                    "line": 40,
                    "severity": "minor",
                    "claim": "not a line of the change",
                    "suggestion": None,
                },
            ],
        }
    )
    client = ScriptedClient([Completion.of_text(text)], structured=True)
    rig = Rig(tmp_path, client)
    end = await rig.review(verify=False, fold_outside=False).run()
    assert (end.kind, end.posted_with) == ("reviewed", "structured")
    assert found(rig.posted) == [("m.py", 3, "returns one less")]  # line 40 is outside the diff: dropped
    assert "```suggestion" not in rig.posted[0][1][0]["body"]  # "" is no suggestion
    messages, schema = client.structured_requests[0]
    # a comment can point only at the call's files, each at a line GitHub takes a comment on
    assert schema == review_schema({"m.py": set(range(1, 8)), "o.py": {1, 2}})
    shapes = schema["properties"]["comments"]["items"]["anyOf"]
    assert [(s["properties"]["path"]["enum"], s["properties"]["line"]["enum"]) for s in shapes] == [
        (["m.py"], [1, 2, 3, 4, 5, 6, 7]),
        (["o.py"], [1, 2]),
    ]
    assert messages[-1]["content"].endswith(STRUCTURED_NOTE)
    assert client.requests == []  # no tool loop was needed


async def test_a_server_without_structured_output_is_probed_once_then_the_tool_loop_reviews(
    tmp_path: Path,
) -> None:
    review_call = (
        "review_change",
        {
            "body": "One bug.",
            "comments": [{"path": "m.py", "line": 3, "body": "returns one less", "severity": "major"}],
        },
    )
    with FakeOpenAI() as llm:  # a server that answers 400 to `response_format` json_schema
        for _ in range(2):
            llm.reply_tool_calls(review_call)
            llm.reply_text("Done.")
        async with OpenAiCompatible(llm.url, "k", "m", timeout=10) as client:
            first = Rig(tmp_path / "a", client)
            end = await first.review(verify=False).run()
            second = Rig(tmp_path / "b", client)
            again = await second.review(verify=False).run()
        assert llm.errors == []
        assert len(llm.refused_schemas) == 1  # remembered for this base URL and model
        refused = llm.refused_schemas[0]["response_format"]["json_schema"]["schema"]
        assert refused == review_schema({"m.py": set(range(1, 8)), "o.py": {1, 2}})
    assert (end.kind, end.posted_with, again.posted_with) == ("reviewed", "review_change", "review_change")
    assert found(first.posted) == found(second.posted) == [("m.py", 3, "returns one less")]


async def test_a_structured_answer_cut_short_is_never_posted_and_the_tool_loop_answers(
    tmp_path: Path,
) -> None:
    cut = Completion(text='{"body": "One bug.", "comments": [{"path": "m.py", "li', finish_reason="length")
    call = PendingToolCall(
        "c1",
        "review_change",
        {
            "body": "Checked.",
            "comments": [{"path": "m.py", "line": 3, "body": "one less", "severity": "major"}],
        },
    )
    client = ScriptedClient(
        [cut, Completion.of_tool_calls([call]), Completion.of_text("Done.")], structured=True
    )
    rig = Rig(tmp_path, client)
    end = await rig.review(verify=False).run()
    assert end.posted_with == "review_change"
    assert found(rig.posted) == [("m.py", 3, "one less")]
    assert '"li' not in rig.posted[0][0] and rig.posted[0][0].startswith("Checked.")


# -- calls merged, votes ------------------------------------------------------------------------------


async def test_the_calls_of_a_chunked_review_are_merged_into_one_review(tmp_path: Path) -> None:
    client = ScriptedClient(
        [
            answer(("m.py", 3, "returns one less than the total"), body="m.py reviewed."),
            answer(("o.py", 2, "size is one too many"), ("m.py", 3, "Returns one less than the total!")),
        ],
        structured=True,
    )
    rig = Rig(tmp_path, client, calls=2)
    end = await rig.review(verify=False).run()
    assert end.kind == "reviewed" and end.files_read == 2
    # each call's schema names only the file that call shows
    paths = [
        s["properties"]["comments"]["items"]["properties"]["path"] for _, s in client.structured_requests
    ]
    assert paths == [{"type": "string", "enum": ["m.py"]}, {"type": "string", "enum": ["o.py"]}]
    # The second call repeated the first one's finding: it is posted once.
    assert found(rig.posted) == [
        ("m.py", 3, "returns one less than the total"),
        ("o.py", 2, "size is one too many"),
    ]


async def test_one_claim_an_answer_repeats_on_lines_in_a_row_is_posted_once(tmp_path: Path) -> None:
    """The 1.5B model put "returns `null` ... instead of `error`" on three lines in a row of a
    clean change: three false findings for one claim."""
    claim = "The function now returns one less than the total, instead of the total."
    client = ScriptedClient(
        [
            answer(
                ("m.py", 2, claim),
                ("m.py", 3, claim.upper()),
                ("m.py", 4, claim),
                ("m.py", 3, "`total - 1` drops the last cent of every price"),
                ("m.py", 4, "`total - 1` drops the last cent of some prices"),  # other words
                ("m.py", 7, claim),  # the same words, five lines from the first: another place
            )
        ],
        structured=True,
    )
    rig = Rig(tmp_path, client)
    end = await rig.review(verify=False).run()
    assert end.kind == "reviewed"
    assert found(rig.posted) == [
        ("m.py", 2, claim),
        ("m.py", 3, "`total - 1` drops the last cent of every price"),
        ("m.py", 4, "`total - 1` drops the last cent of some prices"),
        ("m.py", 7, claim),
    ]


async def test_a_vote_keeps_the_findings_a_majority_of_the_passes_reported(tmp_path: Path) -> None:
    client = ScriptedClient(
        [
            answer(
                ("m.py", 3, "Off by one: returns total - 1 instead of total"),
                ("m.py", 7, "strip may hide names"),
            ),
            answer(("m.py", 4, "off-by-one, returns total - 1 instead of the total")),  # the same, a line on
            answer(("o.py", 2, "size adds one")),
        ],
        structured=True,
    )
    rig = Rig(tmp_path, client)
    end = await rig.review(passes=3, verify=False).run()
    assert rig.orders == [0, 1, 2]  # each vote asked for its own order of the hunks
    assert end.kind == "reviewed"
    assert found(rig.posted) == [("m.py", 3, "Off by one: returns total - 1 instead of total")]
    assert (
        "3 review passes: 1 finding reported by a majority; 2 reported by fewer, not posted."
        in rig.posted[0][0]
    )
    assert rig.meter.tokens == 3 * 120  # every vote's tokens went through the meter


async def test_each_vote_and_the_majority_are_told_to_an_observer(tmp_path: Path) -> None:
    client = ScriptedClient(
        [
            answer(("m.py", 3, "returns one less"), ("m.py", 7, "strip may hide names")),
            answer(("m.py", 3, "returns one less")),
        ],
        structured=True,
    )
    rig = Rig(tmp_path, client)
    stages: list[tuple[str, int]] = []
    await rig.review(passes=2, verify=False, on_stage=lambda name, c: stages.append((name, len(c)))).run()
    assert stages == [("vote 1", 2), ("vote 2", 1), ("majority", 1)]


async def test_votes_stopped_by_the_token_cap_post_what_ran_as_partial(tmp_path: Path) -> None:
    client = ScriptedClient(
        [answer(("m.py", 3, "returns one less")), answer(("m.py", 3, "returns one less"))], structured=True
    )
    rig = Rig(tmp_path, client, max_tokens=100)  # the first vote's 120 tokens reach the cap
    end = await rig.review(passes=3, verify=False).run()
    assert end.kind == "partial" and end.stop is not None
    assert "after 1 of 3 review passes" in end.reason and end.reason in rig.posted[0][0]
    assert client.remaining == 1  # no vote ran past the cap


# -- claims that name no problem ------------------------------------------------------------------


async def test_a_comment_that_only_praises_the_change_is_not_posted_and_the_footer_counts_it(
    tmp_path: Path,
) -> None:
    client = ScriptedClient(
        [
            answer(
                ("m.py", 3, "Off by one: returns total - 1, so callers are charged one less"),
                ("m.py", 3, "The function now correctly handles the total, a nice improvement."),
                ("o.py", 2, "The size is now computed once, which is more efficient."),
            )
        ],
        structured=True,
    )
    rig = Rig(tmp_path, client)
    end = await rig.review(verify=False).run()
    assert end.kind == "reviewed"
    assert found(rig.posted) == [
        ("m.py", 3, "Off by one: returns total - 1, so callers are charged one less")
    ]
    assert (
        "2 comments only described or praised the change without naming a problem: not posted."
        in (rig.posted[0][0])
    )


async def test_praise_is_left_out_before_the_verification_asks_about_it(tmp_path: Path) -> None:
    client = ScriptedClient(
        [
            answer(("m.py", 3, "returns one less"), ("m.py", 3, "Uses total - 1, which is cleaner.")),
            verdict(True, 3),
        ],
        structured=True,
    )
    rig = Rig(tmp_path, client)
    await rig.review(verify=True).run()
    assert found(rig.posted) == [("m.py", 3, "returns one less")]
    assert client.remaining == 0 and len(client.structured_requests) == 2  # the review, one verdict
    assert "1 finding checked against the code, 0 dropped." in rig.posted[0][0]


# -- verification -----------------------------------------------------------------------------------


async def test_the_verification_drops_a_finding_it_cannot_back_with_a_line_of_the_change(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="beam.reviews")
    client = ScriptedClient(
        [
            answer(
                ("m.py", 3, "returns total - 1: callers are charged one less"),
                ("m.py", 7, "the loop may skip the last name"),
                ("o.py", 2, "size is one too many"),
            ),
            verdict(True, 3),  # backed by the line itself
            verdict(False, None),  # the model says it is not a bug
            verdict(True, 99),  # "real", but the line it cites is not in the change
        ],
        structured=True,
    )
    rig = Rig(tmp_path, client)
    end = await rig.review(verify=True).run()
    assert end.kind == "reviewed"
    assert found(rig.posted) == [("m.py", 3, "returns total - 1: callers are charged one less")]
    assert "3 findings checked against the code, 2 dropped." in rig.posted[0][0]
    # What was held back, and the check's answer that held it back, can be read (issue 41).
    evidence = "return total - 1"
    assert end.held == [
        {
            "path": "m.py",
            "line": 7,
            "claim": "the loop may skip the last name",
            "check": {"real": False, "line": None, "evidence": evidence},
        },
        {
            "path": "o.py",
            "line": 2,
            "claim": "size is one too many",
            "check": {"real": True, "line": 99, "evidence": evidence},
        },
    ]
    logged = [r.getMessage() for r in caplog.records if "verification dropped a finding" in r.getMessage()]
    assert [json.loads(m.split(": ", 1)[1]) for m in logged] == end.held  # one JSON line each
    messages, schema = client.structured_requests[1]
    assert schema == verdict_schema(range(1, 8))  # the cited line can only be one that backs it
    assert schema["properties"]["line"]["enum"] == [1, 2, 3, 4, 5, 6, 7, None]
    question = messages[-1]["content"]
    assert "callers are charged one less" in question and "```untrusted" in question
    # numbered and marked as the review showed them, the removed line in its place
    assert "2      total = x\n  -    return total\n3 +    return total - 1\n" in question


async def test_without_structured_output_findings_are_posted_unchecked_and_the_footer_says_so(
    tmp_path: Path,
) -> None:
    call = PendingToolCall(
        "c1",
        "review_change",
        {"body": "One.", "comments": [{"path": "m.py", "line": 3, "body": "one less", "severity": "major"}]},
    )
    client = ScriptedClient([Completion.of_tool_calls([call]), Completion.of_text("Done.")])
    rig = Rig(tmp_path, client)
    await rig.review(verify=True).run()
    assert found(rig.posted) == [("m.py", 3, "one less")]
    assert "1 finding not checked: the model's server did not answer to the schema." in rig.posted[0][0]


UNCHECKED = "<sub>1 finding not checked: the model's server did not answer to the schema.</sub>"
STRUCTURED_REVIEW = json.dumps(
    {
        "body": "One bug.",
        "comments": [
            {
                "path": "m.py",
                "start_line": None,
                "line": 3,
                "severity": "major",
                "claim": "returns one less",
                "suggestion": None,
            }
        ],
    }
)


@pytest.mark.parametrize(
    ("first", "asked"),
    [
        # the model wrote the review as JSON anyway; its check comes back as prose
        ([STRUCTURED_REVIEW, "Yes, it is real: line 3 returns one less."], [True, True]),
        # the review itself comes back as prose: the tool loop reviews, and nothing is checked
        (["The change looks fine to me.", "tools"], [True, False, False]),
    ],
)
async def test_a_server_that_ignores_the_schema_loses_no_finding_and_is_asked_none_again(
    tmp_path: Path, first: list[str], asked: list[bool]
) -> None:
    """Issue 41: a server took `response_format` and answered as without it, so the finding's check
    could not be read and the finding was dropped ("1 finding checked against the code, 1 dropped").
    Now the finding is posted, unchecked, and the footer says why; the server is remembered, and the
    next review on it asks for no schema: it goes straight to the tool loop."""
    review_call = (
        "review_change",
        {
            "body": "One bug.",
            "comments": [{"path": "m.py", "line": 3, "body": "returns one less", "severity": "major"}],
        },
    )
    with FakeOpenAI(structured=True) as llm:  # takes `response_format`; the script ignores it
        for text in first:
            if text == "tools":
                llm.reply_tool_calls(review_call)
                llm.reply_text("Done.")
            else:
                llm.reply_text(text)
        llm.reply_tool_calls(review_call)
        llm.reply_text("Done.")
        async with OpenAiCompatible(llm.url, "k", "m", timeout=10) as client:
            one = Rig(tmp_path / "a", client)
            end = await one.review(verify=True).run()
            other = Rig(tmp_path / "b", client)
            again = await other.review(verify=True).run()
        assert llm.errors == [] and llm.refused_schemas == []
        sent = ["response_format" in r for r in llm.requests]
    assert sent == [*asked, False, False]  # the later review asks for no schema
    assert (end.kind, again.kind, again.posted_with) == ("reviewed", "reviewed", "review_change")
    assert found(one.posted) == found(other.posted) == [("m.py", 3, "returns one less")]
    assert UNCHECKED in one.posted[0][0] and UNCHECKED in other.posted[0][0]
    assert end.held == [] and "dropped" not in one.posted[0][0]


async def test_a_structured_finding_on_two_lines_gets_a_suggestion_that_replaces_both(tmp_path: Path) -> None:
    """Issue 41: the structured finding had no `start_line`, so a two-line fix was offered on one
    line. With it, the comment covers 20-21 and the committed suggestion replaces both lines."""
    before = "".join(f"x{n} = {n}\n" for n in range(1, 26))
    after = before.replace("x20 = 20\nx21 = 21\n", "x20 = 21\nx21 = 20\n")
    fixed = "x20 = 20\nx21 = 21"
    text = json.dumps(
        {
            "body": "Two values swapped.",
            "comments": [
                {
                    "path": "v.py",
                    "start_line": 20,
                    "line": 21,
                    "severity": "major",
                    "claim": "x20 and x21 are swapped: each is the other's value",
                    "suggestion": fixed,
                }
            ],
        }
    )
    client = ScriptedClient([Completion.of_text(text)], structured=True)
    rig = Rig(tmp_path, client, sources={"v.py": (before, after)})
    end = await rig.review(verify=False).run()
    assert end.posted_with == "structured"
    [comment] = rig.posted[0][1]
    assert (comment["start_line"], comment["line"], comment["start_side"]) == (20, 21, "RIGHT")
    assert comment["body"].endswith(f"```suggestion\n{fixed}\n```")
    schema = client.structured_requests[0][1]
    assert "start_line" in schema["properties"]["comments"]["items"]["required"]


SUMMARY = "Reviewed 2 files, 4 changed lines."


@pytest.mark.parametrize(
    "body",
    [
        "This change simplifies the price calculation, improving readability.",  # praise
        "The function now returns the total minus one and strips the name.",  # a description
        "Thank you for the pull request!",
        # the instructions said back
        "You report only real problems in the change you are shown (bugs, security holes, crashes, "
        "wrong behaviour), each on the line that has it, and you answer with JSON only.",
    ],
)
async def test_a_body_that_names_no_problem_is_replaced_by_a_summary_of_what_was_reviewed(
    tmp_path: Path, body: str
) -> None:
    """Issue 41: the body is held to a comment's rules. A body that praised the change sat above the
    finding that said it was wrong."""
    client = ScriptedClient([answer(("m.py", 3, "returns one less"), body=body)], structured=True)
    rig = Rig(tmp_path, client)
    await rig.review(verify=False).run()
    assert found(rig.posted) == [("m.py", 3, "returns one less")]
    assert rig.posted[0][0] == SUMMARY


async def test_a_body_that_states_a_problem_on_a_line_is_kept_with_its_line(tmp_path: Path) -> None:
    body = "`m.py` line 3 returns `total - 1`, so every caller is charged one less."
    client = ScriptedClient([answer(body=body)], structured=True)
    rig = Rig(tmp_path, client)
    end = await rig.review(verify=False).run()
    assert end.kind == "reviewed" and rig.posted == [(body, [])]


async def test_a_plain_text_review_that_only_praises_is_posted_as_the_summary(tmp_path: Path) -> None:
    client = ScriptedClient([Completion.of_text("Great change: the code is cleaner and easier to read.")])
    rig = Rig(tmp_path, client)
    end = await rig.review(verify=False).run()
    assert (end.kind, end.posted_with) == ("reviewed", "text")
    assert rig.posted == [(SUMMARY, [])]


async def test_a_suggestion_written_as_a_sentence_is_shown_as_words_and_code_is_offered(
    tmp_path: Path,
) -> None:
    """Issue 41: every comment whose suggestion was a sentence ended "Suggested code (not offered as
    a suggestion: it would not parse)", the sentence shown as code."""
    items = [
        ("m.py", 3, "returns one less", "Return `total` itself, not `total - 1`."),
        ("m.py", 7, "strips the name, which breaks lookups", "    return p.name"),
    ]
    text = json.dumps(
        {
            "body": "Two bugs.",
            "comments": [
                {"path": p, "line": n, "severity": "major", "claim": c, "suggestion": fix}
                for p, n, c, fix in items
            ],
        }
    )
    rig = Rig(tmp_path, ScriptedClient([Completion.of_text(text)], structured=True))
    await rig.review(verify=False).run()
    words, code = (c["body"] for c in rig.posted[0][1])
    assert words == "**major**\nreturns one less\n\nFix: Return `total` itself, not `total - 1`."
    assert "parse" not in words and "```" not in words
    assert code.endswith("```suggestion\n    return p.name\n```")


async def test_a_cap_reached_while_checking_posts_no_unchecked_finding(tmp_path: Path) -> None:
    client = ScriptedClient(
        [answer(("m.py", 3, "one less"), ("o.py", 2, "one more")), verdict(True, 3), verdict(True, 2)],
        structured=True,
    )
    rig = Rig(tmp_path, client, max_tokens=170)  # 120 for the review, 60 for the first check: over
    end = await rig.review(verify=True).run()
    assert end.kind == "partial" and "before every finding was checked" in end.reason
    assert found(rig.posted) == [("m.py", 3, "one less")]
    assert "1 finding checked against the code, 0 dropped; 1 not checked (stopped by" in rig.posted[0][0]


def test_a_file_split_across_calls_is_read_only_when_each_of_its_calls_answered() -> None:
    # Focused passes split a large file's hunks across calls ("per hunk", context/review_context.py).
    calls = [["a.py", "big.py"], ["big.py"], ["c.py"]]
    assert files_read(calls, {0, 1, 2}) == 3
    assert files_read(calls, {0, 2}) == 2  # big.py's second part was not read
    assert files_read(calls, {1}) == 0


async def test_a_review_answered_in_plain_text_shows_the_markers_it_holds(tmp_path: Path) -> None:
    """Issue 40: a model that answers its review in prose, no tool call, posts its words as the
    review's body; a marker of the bot's in them shows instead of being posted as one."""
    text = "The change returns one less in m.py.\n\n<!-- beam-effect:00000000:review -->"
    rig = Rig(tmp_path, ScriptedClient([Completion.of_text(text)]))
    end = await rig.review(verify=False).run()
    assert end.posted_with == "text"
    [(body, comments)] = rig.posted
    assert comments == [] and "<!--" not in body
    assert "&lt;!-- beam-effect:00000000:review -->" in body


async def test_a_cap_reached_while_checking_the_votes_majority_says_partial_in_the_body(
    tmp_path: Path,
) -> None:
    """With votes and verification on, the body carries the votes' tally; a cap reached while the
    majority's findings are checked makes the review partial, and its body must say so too (it
    skipped the partial line whenever the votes had said anything)."""
    found_twice = [answer(("m.py", 3, "one less"), ("o.py", 2, "one more")) for _ in range(2)]
    client = ScriptedClient([*found_twice, verdict(True, 3), verdict(True, 2)], structured=True)
    rig = Rig(tmp_path, client, max_tokens=290)  # 240 for the two votes, 60 for the first check: over
    end = await rig.review(passes=2, verify=True).run()
    assert end.kind == "partial" and "before every finding was checked" in end.reason
    body = rig.posted[0][0]
    assert "2 review passes:" in body  # the votes' tally
    assert end.reason in body  # the partial line, as every partial review's body has it
    assert found(rig.posted) == [("m.py", 3, "one less")]
