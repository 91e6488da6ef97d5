"""Benchmark: reviews by a real model server, both ways the bot reviews a change, and its speed.

Starts no model: pass the base URL of a running OpenAI-compatible server (llama.cpp's llama-server,
Ollama, vLLM). For each fixed change in bench/data/ (a small original change with a real bug), it
runs `beam-bot run review` on a git checkout and `/beam review` on a pull request through the e2e
fakes (fake GitHub, git over HTTP, `beam-bot serve`), the bot talking to the server through a
recording proxy that caps `max_tokens`. It prints, per review: the tool calls, whether the review
was posted through `review_change` or is the model's plain text, inline comments on changed lines
(and whether one is at the bug), prompt and generated tokens, and wall time. Then the speed, in
the same run:

- bot against bare: the wall time of one `run review` against the server's time for the same
  first prompt sent alone (llama-server's prompt cache off). Target <= 1.3x.
- prompt tokens per later tool round: of the previous round's prompt, the part the server had to
  process again rather than serve from its prompt cache (llama-server's `timings.cache_n`).
  Target <= 10%.

    .venv/bin/python bench/real_model.py --base-url http://127.0.0.1:8089/v1 [--model qwen2.5-coder]
        [--max-tokens 512] [--changes discount labels] [--paths local github]

BEAM_BENCH_CALL_TIMEOUT (seconds, default 400) bounds each model call (the bot's BEAM_MODEL_TIMEOUT).
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.real_model import (  # noqa: E402
    Exchange,
    RecordingProxy,
    Review,
    bare_seconds,
    changes,
    github_review,
    local_review,
)

HOW = {
    "structured": "as structured output",
    "review_change": "through review_change",
    "json": "JSON findings in its answer",
    "text": "plain text as the body (said so)",
}


def describe(review: Review) -> str:
    posted = HOW.get(review.posted_with or "", f"no review: {review.detail}")
    if review.posted_with == "text" and not review.said_plain_text:
        posted = "plain text as the body (NOT said)"
    if review.asked_in_text:
        posted += f", asked for it in plain text after {review.asked_in_text}"
    calls = ", ".join(review.tool_calls) or "none"
    return (
        f"  {review.path:13s} {review.change.name:15s} {review.seconds:6.1f} s  "
        f"prompt {review.prompt_tokens:6d} / generated {review.generated_tokens:5d} tokens  "
        f"{len(review.exchanges)} model calls\n"
        f"      tool calls: {calls}\n"
        f"      review: {posted}; inline comments {len(review.comments)}, on changed lines "
        f"{review.on_changed_lines}, at the bug: {'yes' if review.at_bug else 'no'}"
    )


def reprocessed(exchanges: list[Exchange]) -> list[tuple[int, int, float]]:
    """Per later round: the previous round's prompt, how much of it was processed again, the ratio."""
    out = []
    for before, now in itertools.pairwise(exchanges):
        previous = before.prompt_total
        if previous <= 0:
            continue
        again = max(0, previous - now.timing("cache_n"))
        out.append((previous, again, again / previous))
    return out


def served(reviews: list[Review]) -> str | None:
    """The model the server says it ran (llama-server names its GGUF file), to tell 0.5B from 1.5B."""
    for review in reviews:
        for exchange in review.exchanges:
            name = exchange.response.get("model")
            if isinstance(name, str) and name:
                return name.rsplit("/", 1)[-1]
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--base-url", required=True, help="the server's OpenAI-compatible base URL (…/v1)")
    parser.add_argument("--model", default="qwen2.5-coder", help="the model name to send")
    parser.add_argument("--max-tokens", type=int, default=512, help="cap on each completion's max_tokens")
    parser.add_argument("--changes", nargs="*", help="names in bench/data (default: all)")
    parser.add_argument("--paths", nargs="*", default=["local", "github"], choices=["local", "github"])
    parser.add_argument("--dump", type=Path, help="write every request and answer to this JSON file")
    args = parser.parse_args()
    picked = changes(args.changes)
    if not picked:
        raise SystemExit("no such change in bench/data")
    reviews: list[Review] = []
    speed: list[tuple[str, float, float, float]] = []
    rounds: list[tuple[int, int, float]] = []
    with (
        tempfile.TemporaryDirectory(prefix="beam-bench-model-") as tmp,
        RecordingProxy(args.base_url, args.max_tokens) as proxy,
    ):
        for change in picked:
            if "local" in args.paths:
                review = local_review(change, proxy, args.model, Path(tmp))
                reviews.append(review)
                print(describe(review), flush=True)
                if review.exchanges:
                    bare, _ = bare_seconds(args.base_url, review.exchanges[0].request)
                    model_time = sum(e.seconds for e in review.exchanges)
                    speed.append((change.name, review.seconds, bare, model_time))
                    rounds += reprocessed(review.exchanges)
            if "github" in args.paths:
                review = github_review(change, proxy, args.model, Path(tmp))
                reviews.append(review)
                print(describe(review), flush=True)
                rounds += reprocessed(review.exchanges)
    if args.dump is not None:
        dumped = [
            {"path": r.path, "change": r.change.name, "exchanges": [e.__dict__ for e in r.exchanges]}
            for r in reviews
        ]
        args.dump.write_text(json.dumps(dumped, indent=1), encoding="utf-8")
    ended = sum(r.posted_with is not None for r in reviews)
    ways = ", ".join(f"{sum(r.posted_with == way for r in reviews)} {words}" for way, words in HOW.items())
    print(
        f"\n{len(reviews)} reviews with {served(reviews) or args.model} at {args.base_url} "
        f"(max_tokens {args.max_tokens}): "
        f"{ended} ended in a review ({ways}); "
        f"{sum(r.at_bug for r in reviews)} commented at the bug"
    )
    if speed:
        print("bot against bare (one `run review` / the same first prompt sent alone):")
        for name, wall, bare, model_time in speed:
            print(
                f"  {name:15s} bot {wall:6.1f} s, bare first prompt {bare:6.1f} s: {wall / bare:5.2f}x "
                f"(model time in the run {model_time:6.1f} s; the bot's own share "
                f"{(wall - model_time) / wall:5.1%})"
            )
        print(f"  median ratio {statistics.median(w / b for _, w, b, _ in speed):.2f}x (target <= 1.3x)")
    if rounds:
        worst = max(r for _, _, r in rounds)
        print(
            f"prompt tokens processed again per later tool round ({len(rounds)} rounds): median "
            f"{statistics.median(r for _, _, r in rounds):.1%}, worst {worst:.1%} of the previous "
            "round's prompt (target <= 10%)"
        )
    elif any(len(r.exchanges) > 1 for r in reviews):
        print("prompt tokens per tool round: the server reported no timings.cache_n")
    else:
        print("prompt tokens per tool round: no review had a second model call")


if __name__ == "__main__":
    main()
