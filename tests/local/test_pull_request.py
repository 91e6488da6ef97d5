"""`beam-bot review|summarize|ask <pull request URL>` as a process, against the fake GitHub and real git:
the pull request read through the API with a token, the review printed as `run review` prints it,
`--post` posting it as the App posts one, and the errors of a bad URL or a missing token."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.beam.errors import BeamError
from bot.local.pull_target import find_token, parse_pull_url
from tests.e2e.test_review_ends import ENV, FILES, capped_after_one_call
from tests.local.test_review import script_default_review
from tests.support.fake_github_state import PullFile
from tests.support.openai_server import chat_response, text_message
from tests.support.pull_request_stack import NUMBER, REPO, URL, Stack, pull_request_stack
from tests.support.terminal import Terminal, screen_lines

SUMMARY = "Reviewed 1 file, 3 changed lines."  # the change is +2 -1


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Stack]:
    with pull_request_stack(tmp_path) as made:
        yield made


def test_review_of_a_url_prints_the_review_and_posts_nothing(stack: Stack) -> None:
    stack.script_review()

    done = stack.cli("review", URL)

    assert done.returncode == 0, done.stderr
    assert f"{REPO}#{NUMBER}: Fix add so that it adds" in done.stdout
    assert "The fix is right." in done.stdout and "src/calc.py:2" in done.stdout
    # The prompt is the pull request's, as GitHub has it.
    prompt = stack.llm.requests[0]["messages"][-1]["content"]
    assert "Fix add so that it adds" in prompt and "Closes #3." in prompt and "src/calc.py" in prompt
    assert stack.fake.reviews_on(REPO, NUMBER) == []
    # git fetched with the token, which no output shows.
    assert any(r.authorized for r in stack.git.requests)
    assert stack.token not in done.stdout + done.stderr


def test_the_model_is_told_the_pull_requests_number_and_its_links_point_at_github(stack: Stack) -> None:
    """The pull request of a URL has a number: the model is sent it, as `/beam review` sends it, never
    the #0 a checkout's change stood for; the temporary repository is gone when the review is read,
    so a tool's link points at the head on GitHub."""
    stack.llm.reply_tool_calls(("get_page", {"path": "src/calc.py", "start": 1, "end": 2}))
    stack.script_review()

    done = stack.cli("review", URL, "--post")

    assert done.returncode == 0, done.stderr
    prompt = stack.llm.requests[0]["messages"][-1]["content"]
    assert f"pull request #{NUMBER}: Fix add so that it adds" in prompt
    assert "#0" not in prompt and "local change" not in prompt
    [page] = [m["content"] for m in stack.llm.requests[1]["messages"] if m["role"] == "tool"]
    head = stack.fake.pull(REPO, NUMBER).head_sha
    assert json.loads(page)["url"] == f"https://github.com/{REPO}/blob/{head}/src/calc.py#L1-L2"
    assert len(stack.fake.reviews_on(REPO, NUMBER)) == 1


def test_the_model_is_told_who_asked_and_the_pull_requests_author_only_as_data(stack: Stack) -> None:
    """The pull request's author wrote the change; they did not ask for this review. The request is
    the terminal's (`/beam review` names the commenter, never the author); the author is data, inside
    the untrusted block, as the App shows it."""
    stack.script_review()

    done = stack.cli("review", URL)

    assert done.returncode == 0, done.stderr
    prompt = stack.llm.requests[0]["messages"][-1]["content"]
    author = stack.fake.pull(REPO, NUMBER).user
    assert prompt.startswith("Request from a terminal (beam-bot review): Review this pull request.")
    assert f"@{author}:" not in prompt and "Request from @" not in prompt
    request, data = prompt.split("```", 1)
    assert f"@{author}" not in request and f"\nauthor: @{author}\n" in data


def test_post_posts_the_review_as_the_app_would(stack: Stack) -> None:
    stack.script_review()

    done = stack.cli("review", URL, "--post")

    assert done.returncode == 0, done.stderr
    [review] = stack.fake.reviews_on(REPO, NUMBER)
    assert review.event == "COMMENT" and review.commit_id == stack.fake.pull(REPO, NUMBER).head_sha
    # The model's body only praised the change: a neutral line of what was reviewed instead (issue 41).
    assert review.body.startswith(SUMMARY) and "The fix is right." not in review.body
    assert "model `fake-model`" in review.body  # the footer
    assert len(review.comment_ids) == 1
    assert "posted:" in done.stdout


def test_post_says_github_refused_the_review_after_printing_it(stack: Stack) -> None:
    """The review is posted from inside the run (the poster's GitHub door); a refusal there does not
    lose the review: it is printed, and the refusal said after it, with exit 1."""
    stack.script_review()
    refusal = stack.fake.inject("POST", r"/pulls/\d+/reviews$", status=422, times=None)

    done = stack.cli("review", URL, "--post")

    assert done.returncode == 1, done.stdout + done.stderr
    assert refusal.hits == 1 and stack.fake.reviews_on(REPO, NUMBER) == []
    assert "src/calc.py:2" in done.stdout and "posted:" not in done.stdout
    assert done.stderr.strip().splitlines()[-1].startswith("beam-bot review: not posted: ")


def test_a_review_answered_as_structured_output_is_posted(stack: Stack) -> None:
    """A server that answers to a schema (llama.cpp, vLLM, OpenAI) runs no tool loop: the command
    crashed on that against a real llama-server; it posts the review, signed with the model."""
    stack.llm.structured = True
    claim = "The comment `# fixed` says nothing a reader can use; remove it."
    found = {"path": "src/calc.py", "line": 3, "severity": "nit", "claim": claim}
    answer = {"body": "The fix is right.", "comments": [found]}
    calls = script_default_review(stack.llm, answer, {"real": True, "line": 3, "evidence": "# fixed"})

    done = stack.cli("review", URL, "--post")

    assert done.returncode == 0, done.stderr
    [review] = stack.fake.reviews_on(REPO, NUMBER)
    assert review.body.startswith(SUMMARY) and "model `fake-model`" in review.body
    [comment] = [stack.fake.comments[i] for i in review.comment_ids]
    assert (comment.path, comment.line) == ("src/calc.py", 3) and claim in comment.body
    assert "answered as structured output" in done.stdout and "posted:" in done.stdout
    # One structured call over the whole change, and the check of its finding when the default verifies.
    assert len(stack.llm.requests) == calls and all("response_format" in r for r in stack.llm.requests)


def test_ask_answers_and_posts_the_answer_as_a_comment(stack: Stack) -> None:
    answer = "## Answer\n\nIt makes **add** add; see [calc](src/calc.py) and `add(a, b)`."
    stack.llm.reply_text(answer)

    done = stack.cli("ask", URL, "what does this change do?", "--post")

    assert done.returncode == 0, done.stderr
    # The terminal shows the markup as text; GitHub gets it as written, to render it itself.
    assert "\nAnswer\n------\n\nIt makes add add; see calc (src/calc.py) and add(a, b).\n" in done.stdout
    assert "**" not in done.stdout and "##" not in done.stdout
    assert "what does this change do?" in stack.llm.requests[0]["messages"][-1]["content"]
    assert [c.body for c in stack.fake.comments_on(REPO, NUMBER)] == [answer]


def test_a_bad_url_and_a_missing_token_are_clear_errors_with_exit_2(stack: Stack, tmp_path: Path) -> None:
    bad = stack.cli("review", "https://github.com/octo/demo/issues/7")
    assert bad.returncode == 2 and "BEM-391" in bad.stderr and "/pull/" in bad.stderr
    env = stack.env(PATH=str(tmp_path))  # no gh CLI on the PATH
    del env["GITHUB_TOKEN"]
    missing = stack.cli("review", URL, env=env)
    assert missing.returncode == 2 and "BEM-392" in missing.stderr and "gh auth login" in missing.stderr
    assert stack.llm.requests == []


def test_github_enterprise_urls_read_from_the_hosts_api() -> None:
    target = parse_pull_url("https://ghe.example.com/team/app/pull/12/files", {})
    assert (target.full_name, target.number, target.api_url) == (
        "team/app",
        12,
        "https://ghe.example.com/api/v3",
    )
    assert parse_pull_url(URL, {}).api_url == "https://api.github.com"
    assert parse_pull_url(URL, {"GITHUB_API_URL": "http://127.0.0.1:9/"}).api_url == "http://127.0.0.1:9"
    with pytest.raises(BeamError) as bad:
        parse_pull_url("github.com/octo/demo/pull/7", {})
    assert bad.value.code == "BEM-391"


def test_the_gh_cli_token_is_used_when_no_variable_is_set(tmp_path: Path) -> None:
    gh = tmp_path / "gh"
    gh.write_text(
        '#!/bin/sh\n[ "$1 $2 $3 $4" = "auth token --hostname ghe.example.com" ] && echo gho_from_cli\n'
    )
    gh.chmod(0o755)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PATH", str(tmp_path))
        assert find_token("ghe.example.com", {}).get_secret_value() == "gho_from_cli"
        assert find_token("ghe.example.com", {"GITHUB_TOKEN": "ghp_env"}).get_secret_value() == "ghp_env"
        with pytest.raises(BeamError) as missing:
            find_token("github.com", {})  # gh knows no token for this host
        assert missing.value.code == "BEM-392"


@pytest.mark.parametrize("stage", ["starting", "model thinking"])
def test_ctrl_c_stops_a_review_of_a_url_in_one_line_with_130(
    stack: Stack, tmp_path: Path, stage: str
) -> None:
    fresh = tmp_path / "tmp"
    fresh.mkdir()
    stack.llm.enqueue(chat_response(text_message("late")), delay=30)
    argv = [sys.executable, "-m", "bot.cli", "review", URL, "--post"]
    with Terminal(argv, stack.env(TMPDIR=str(fresh), TERM="xterm")) as term:
        if stage == "starting":
            term.read_for(0.3)
        else:
            term.expect(r"⋯ 1 s · model call 1")
        term.ctrl_c()
        code = term.wait(timeout=30)
    assert code == 130, term.text
    assert "Traceback" not in term.text
    stopped = [line for line in screen_lines(term.text) if "stopped" in line]
    assert len(stopped) == 1 and "SIGINT (Ctrl-C)" in stopped[0], term.text
    if stage == "model thinking":
        assert stopped[0].startswith("beam-bot review: ✗ stopped by SIGINT (Ctrl-C): nothing was posted")
    assert stack.fake.reviews_on(REPO, NUMBER) == []
    assert list(fresh.iterdir()) == [], "the review left a temporary directory behind"


def test_a_wrong_model_setting_is_one_line_and_leaves_no_temporary_directory(
    stack: Stack, tmp_path: Path
) -> None:
    fresh = tmp_path / "tmp"
    fresh.mkdir()
    done = stack.cli("review", URL, env=stack.env(TMPDIR=str(fresh), BEAM_MODEL_TIMEOUT="-1"))
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith(
        "beam-bot review: Invalid model configuration. (BEM-042): BEAM_MODEL_TIMEOUT"
    )
    assert list(fresh.iterdir()) == []


@pytest.mark.parametrize("failure", ["bad token", "outage"])
def test_a_bad_github_token_or_an_outage_is_one_line(stack: Stack, tmp_path: Path, failure: str) -> None:
    fresh = tmp_path / "tmp"
    fresh.mkdir()
    if failure == "bad token":
        env = stack.env(TMPDIR=str(fresh), GITHUB_TOKEN="ghs_not_a_token")
    else:
        env = stack.env(TMPDIR=str(fresh), GITHUB_API_URL="http://127.0.0.1:9")
    done = stack.cli("review", URL, env=env)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and done.stderr.startswith("beam-bot review: GitHub ")
    assert list(fresh.iterdir()) == []


def _added(text: str) -> str:
    lines = text.splitlines()
    return f"@@ -0,0 +1,{len(lines)} @@\n" + "".join(f"+{line}\n" for line in lines)


def two_files_capped_after_one(stack: Stack) -> None:
    """Pull request #8 changes two files, and the model's cap stops the review after the first."""
    main = stack.fake.pull(REPO, NUMBER).base_sha
    head = stack.git.commit(REPO, FILES, branch="modules", message="Add modules")
    stack.git.create_pull_ref(REPO, 8, head)
    files = [PullFile(name, additions=40, deletions=0, patch=_added(text)) for name, text in FILES.items()]
    stack.fake.add_pull(
        REPO, number=8, title="Add modules", head_ref="modules", head_sha=head, base_sha=main, files=files
    )
    capped_after_one_call(stack.llm)


def test_post_posts_a_partial_review_says_what_is_missing_and_exits_3(stack: Stack) -> None:
    """As the App posts a partial review (issue 41): what the first of two calls found is posted once,
    its body saying where it stopped; the run says what is missing and exits 3."""
    two_files_capped_after_one(stack)

    done = stack.cli("review", f"https://github.com/{REPO}/pull/8", "--post", env=stack.env(**ENV))

    assert done.returncode == 3, done.stdout + done.stderr
    [review] = stack.fake.reviews_on(REPO, 8)
    assert "**partial:** stopped by" in review.body and "after 1 of 2 files" in review.body
    assert "model `fake-model`" in review.body  # the footer, as on every door
    [comment] = [stack.fake.comments[i] for i in review.comment_ids]
    assert (comment.path, comment.line) == ("src/alpha.py", 2)
    assert "posted:" in done.stdout
    assert "partial: the posted review covers part of the change: stopped by" in done.stdout
    assert "after 1 of 2 files" in done.stdout.split("partial: the posted review")[1]


def test_post_with_json_prints_one_json_document_that_says_where_the_review_went(stack: Stack) -> None:
    """`--json` is for a program: stdout is the review object alone, where it was posted inside it;
    the human lines (`posted: …`) go to stderr. A `posted:` line after the object made stdout two
    documents, which no JSON parser reads."""
    stack.script_review()

    done = stack.cli("review", URL, "--post", "--json")

    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    [review] = stack.fake.reviews_on(REPO, NUMBER)
    where = report["posted"]["url"]
    assert where.endswith(f"/pull/{NUMBER}#pullrequestreview-{review.id}")
    assert report["posted"]["already_posted"] == 0 and report["review"]["body"] == review.body
    assert f"posted: {where}\n" in done.stderr


def test_a_partial_review_posted_with_json_keeps_stdout_one_json_document(stack: Stack) -> None:
    two_files_capped_after_one(stack)

    url = f"https://github.com/{REPO}/pull/8"
    done = stack.cli("review", url, "--post", "--json", env=stack.env(**ENV))

    assert done.returncode == 3, done.stdout + done.stderr
    report = json.loads(done.stdout)
    [review] = stack.fake.reviews_on(REPO, 8)
    assert report["posted"]["url"].endswith(f"#pullrequestreview-{review.id}")
    assert "partial: the posted review covers part of the change" in done.stderr
