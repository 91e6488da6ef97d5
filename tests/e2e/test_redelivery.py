"""Issue 32: commands posted while `serve` was stopped are answered once it is back, exactly once each."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.crash_support import NUMBER, REPO, seed_review_pull
from tests.e2e.redelivery_support import INTERVAL, post_command, recovered_once
from tests.support.bot_process import bot_stack


def test_commands_posted_while_the_bot_was_down_are_answered_once_it_is_back(tmp_path: Path) -> None:
    with bot_stack(tmp_path, BEAM_REDELIVERY_INTERVAL=str(INTERVAL)) as bot:
        seed_review_pull(bot)
        bot.fake.hooks.url = f"{bot.url}/webhooks"
        sent = [post_command(bot, REPO, NUMBER, "/beam help") for _ in range(5)]  # nobody listens
        assert all(a.status == "failed to connect" for a in bot.fake.hooks.attempts)
        bot.start()
        recovered_once(bot.fake, REPO, NUMBER, sent)
        assert "asked GitHub to redeliver 5" in bot.log()
