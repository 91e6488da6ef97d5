"""Benchmark: time from the 202 to the 👀 and to the tracking comment, with a warm worker.

Runs `beam-bot serve` as a subprocess against the test suite's fake GitHub (served over loopback)
that answers every call after a fixed 50 ms, real git over HTTP and the fake model. Sends
`/beam summarize` commands on one pull request one after the other (the first warms the worker:
installation token, the App's login, the checkout mirror), and prints the median time from the
202 to the 👀 reaction and to the tracking comment, also in round trips of 50 ms. The 👀 needs the
repository config and the commenter's permission, asked at once (one round trip), then the reaction
itself (one more): two round trips is the floor.

    .venv/bin/python bench/first_sign.py [--commands 15]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.bot_process import SECRET, BotProcess, bot_stack, comment_payload, wait_for  # noqa: E402
from tests.support.fake_github_state import PullFile  # noqa: E402
from tests.support.webhooks import delivery, issue_comment_payload  # noqa: E402

REPO = "octo/demo"
BOT_LOGIN = "beam-bot[bot]"
ROUND_TRIP = 0.050


def prepare(bot: BotProcess) -> None:
    main = bot.git.seed(REPO, {"README.md": "Demo\n", "src/calc.py": "def add(a, b):\n    return a - b\n"})
    head = bot.git.commit(REPO, {"src/calc.py": "def add(a, b):\n    return a + b\n"}, branch="feature")
    bot.git.create_pull_ref(REPO, 7, head)
    bot.fake.add_repo(REPO)
    bot.fake.add_collaborator(REPO, "maintainer", "write")
    bot.fake.set_file(REPO, "main", ".github/beam.yml", "trigger_permission: write\n")
    bot.fake.add_pull(
        REPO, number=7, head_ref="feature", head_sha=head, base_sha=main, files=[PullFile("src/calc.py")]
    )


def one_command(bot: BotProcess, n: int) -> tuple[float, float]:
    """Seconds from the 202 to the 👀 and to the tracking comment."""
    bot.llm.reply_text(f"Summary {n}.")
    body = "/beam summarize"
    comment = bot.fake.add_comment(REPO, 7, body, user="maintainer")
    payload = comment_payload(
        bot,
        issue_comment_payload(body, repo=REPO, number=7, commenter="maintainer", comment_id=comment.id),
        REPO,
    )
    before = {c.id for c in bot.fake.comments_on(REPO, 7)}
    response = bot.send(delivery("issue_comment", payload, SECRET))
    acked = time.perf_counter()
    if response.status_code != 202:
        raise SystemExit(f"delivery answered {response.status_code}")
    eyes = tracking = None
    deadline = acked + 60
    while (eyes is None or tracking is None) and time.perf_counter() < deadline:
        now = time.perf_counter()
        if eyes is None and any(r.content == "eyes" for r in bot.fake.reactions_on(comment.id)):
            eyes = now - acked
        if tracking is None and any(
            c.id not in before and c.user == BOT_LOGIN for c in bot.fake.comments_on(REPO, 7)
        ):
            tracking = now - acked
        time.sleep(0.001)
    if eyes is None or tracking is None:
        raise SystemExit(f"command {n}: no 👀 or no tracking comment within 60 s:\n{bot.log()[-3000:]}")
    # Let the run finish before the next command (one job at a time per pull request).
    wait_for(
        lambda: any(f"Summary {n}." in c.body for c in bot.fake.comments_on(REPO, 7)),
        timeout=60,
        what="the answer",
    )
    return eyes, tracking


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--commands", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="beam-bench-sign-") as tmp, bot_stack(Path(tmp)) as bot:
        prepare(bot)
        bot.fake.inject("*", ".*", status=None, delay=ROUND_TRIP, times=None)
        bot.start()
        one_command(bot, 0)  # warm-up
        results = [one_command(bot, n) for n in range(1, args.commands + 1)]
    eyes = statistics.median(r[0] for r in results)
    tracking = statistics.median(r[1] for r in results)
    print(
        f"first sign of life, fake GitHub answering in {ROUND_TRIP * 1000:.0f} ms, {args.commands} commands:"
    )
    for label, value in (("202 -> 👀", eyes), ("202 -> tracking comment", tracking)):
        print(f"  {label:24s} median {value * 1000:6.1f} ms ({value / ROUND_TRIP:.1f} round trips)")


if __name__ == "__main__":
    main()
