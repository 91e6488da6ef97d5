"""Issue 11 end to end on `beam-bot serve`: the footer shows what a run used and cost, `/metrics` and
`beam-bot usage` report it, token and time caps stop a run with a note, a duplicate gets a link to the
running one, and `/beam cancel` stops a running run."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.bot_process import SECRET, BotProcess, bot_stack, comment_payload, wait_for
from tests.support.fake_github_state import PullFile
from tests.support.openai_server import chat_response, tool_call, tool_calls_message, usage
from tests.support.webhooks import delivery, issue_comment_payload

REPO = "octo/costs"
BOT = "beam-bot[bot]"
PATCH = "@@ -1 +1,2 @@\n a\n+b\n"


@contextmanager
def running(tmp_path: Path, **env: str) -> Iterator[BotProcess]:
    with bot_stack(tmp_path, **env) as bot:
        main = bot.git.seed(REPO, {"a.txt": "a\n"})
        head = bot.git.commit(REPO, {"a.txt": "a\nb\n"}, branch="feature", message="Add b")
        bot.git.create_pull_ref(REPO, 7, head)
        bot.fake.add_repo(REPO)
        bot.fake.add_collaborator(REPO, "maintainer", "write")
        bot.fake.add_pull(
            REPO,
            number=7,
            head_ref="feature",
            head_sha=head,
            base_sha=main,
            files=[PullFile("a.txt", patch=PATCH)],
        )
        bot.start()
        yield bot


def say(bot: BotProcess, body: str) -> int:
    comment = bot.fake.add_comment(REPO, 7, body, user="maintainer")
    payload = issue_comment_payload(body, repo=REPO, number=7, commenter="maintainer", comment_id=comment.id)
    payload["repository"]["default_branch"] = "main"
    assert bot.send(delivery("issue_comment", comment_payload(bot, payload, REPO), SECRET)).status_code == 202
    return comment.id


def bot_comments(bot: BotProcess) -> list[str]:
    return [c.body for c in bot.fake.comments_on(REPO, 7) if c.user == BOT]


def final(bot: BotProcess, marker: str = "beam-run:") -> Callable[[], str | None]:
    def found() -> str | None:
        return next(
            (b for b in bot_comments(bot) if marker in b and "Working on" not in b and "retrying" not in b),
            None,
        )

    return found


def tool_reply(name: str, args: object, prompt: int, completion: int) -> dict[str, object]:
    return chat_response(tool_calls_message([tool_call(name, args)]), usage=usage(prompt, completion))


def test_the_footer_metrics_and_usage_report_show_what_runs_used(tmp_path: Path) -> None:
    prices = {"BEAM_PRICE_INPUT_PER_MTOK": "3", "BEAM_PRICE_OUTPUT_PER_MTOK": "15"}
    with running(tmp_path, **prices) as bot:
        bot.llm.enqueue(tool_reply("read_file", {"path": "a.txt"}, 1200, 80))
        bot.llm.reply_text("Adds a line b.", usage=usage(1500, 120))
        say(bot, "/beam summarize")
        answer = wait_for(final(bot), what="the summary")
        assert "Adds a line b." in answer
        footer = re.search(r"<sub>(.*)</sub>", answer)
        assert footer is not None
        assert footer.group(1).endswith(
            "model `fake-model` · 2,700 input / 200 output tokens · 2 model calls · 1 tool step · "
            + re.search(r"\d+\.\d s", footer.group(1)).group(0)  # type: ignore[union-attr]
            + " · ≈ $0.0111"
        )

        # A review's body carries the footer too.
        review = {"body": "Fine.", "comments": [{"path": "a.txt", "line": 2, "body": "ok"}]}
        bot.llm.enqueue(tool_reply("review_change", review, 300, 40))
        bot.llm.reply_text("Reviewed.", usage=usage(100, 10))
        say(bot, "/beam review")
        wait_for(lambda: len(bot.fake.reviews_on(REPO, 7)) == 1, what="the review")
        (posted,) = bot.fake.reviews_on(REPO, 7)
        assert "Fine." in posted.body and "300 input / 40 output tokens · 1 model call" in posted.body
        wait_for(lambda: sum("Posted a review" in b for b in bot_comments(bot)) == 1, what="the review's end")

        def scraped() -> str | None:
            text = bot.scrape()
            return text if 'skill="review",direction="input"} 400' in text else None

        metrics = wait_for(scraped, what="the review's tokens in /metrics")
        assert 'beam_run_tokens_total{installation="1",skill="summarize",direction="input"} 2700' in metrics
        assert 'beam_run_tokens_total{installation="1",skill="summarize",direction="output"} 200' in metrics
        assert 'beam_run_cost_dollars_total{installation="1",skill="summarize"} 0.0111' in metrics
        assert 'beam_runs_total{installation="1",skill="review"} 1' in metrics

        report = subprocess.run(
            [sys.executable, "-m", "bot.cli", "usage", "--since", "1d", "--repo", REPO],
            env=bot.env(),
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout
        row = next(line for line in report.splitlines() if line.startswith(REPO))
        assert row.split() == [REPO, "maintainer", "2", "3,100", "250", "$0.0131"]


def test_a_run_stops_at_its_token_cap_and_says_so(tmp_path: Path) -> None:
    with running(tmp_path, BEAM_MAX_TOKENS_PER_RUN="1000") as bot:
        bot.llm.enqueue(tool_reply("read_file", {"path": "a.txt"}, 900, 200))
        bot.llm.reply_text("never asked")
        say(bot, "/beam summarize")
        answer = wait_for(final(bot), what="the stopped run's comment")
        assert "This run stopped at the token limit of a run (1,000 tokens) (`max_tokens_per_run`)" in answer
        assert "the run had no answer yet when it stopped" in answer
        assert "900 input / 200 output tokens · 1 model call" in answer
        assert len(bot.llm.requests) == 1


def test_a_run_stops_at_its_time_cap_and_says_so(tmp_path: Path) -> None:
    # 6 ms: a run always takes longer than that to reach its first step (checkout, GitHub calls).
    with running(tmp_path, BEAM_MAX_MINUTES_PER_RUN="0.0001") as bot:
        bot.llm.reply_text("never asked")
        say(bot, "/beam summarize")
        answer = wait_for(final(bot), what="the stopped run's comment")
        assert (
            "This run stopped at the time limit of a run (0.0001 minutes) (`max_minutes_per_run`)" in answer
        )
        assert bot.llm.requests == []


def test_a_duplicate_gets_a_link_and_cancel_stops_the_running_run(tmp_path: Path) -> None:
    with running(tmp_path) as bot:
        # The model takes its time, so the run is still going while the next comments arrive.
        bot.llm.enqueue(tool_reply("read_file", {"path": "a.txt"}, 100, 10), delay=6.0)
        bot.llm.enqueue(tool_reply("read_file", {"path": "a.txt"}, 100, 10), delay=6.0)
        bot.llm.reply_text("never asked")
        say(bot, "/beam review")
        wait_for(lambda: bot.llm.received or None, what="the first model call")
        tracking = next(c for c in bot.fake.comments_on(REPO, 7) if c.user == BOT and "Working on" in c.body)

        say(bot, "/beam review")
        duplicate = wait_for(
            lambda: next((b for b in bot_comments(bot) if "already running" in b), None), what="the link"
        )
        assert f"](https://github.com/{REPO}/issues/7#issuecomment-{tracking.id})" in duplicate

        say(bot, "/beam cancel")
        wait_for(
            lambda: any("asked to cancel `/beam review`" in b for b in bot_comments(bot)), what="the ack"
        )
        ended = wait_for(final(bot, "was cancelled by @maintainer"), timeout=30, what="the cancelled run")
        assert bot.fake.comments[tracking.id].body == ended  # the tracking comment itself says so
        assert "Nothing was pushed." in ended and "1 model call" in ended
        assert len(bot.llm.requests) == 1 and bot.fake.reviews_on(REPO, 7) == []
