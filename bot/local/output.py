"""What `beam-bot run` prints: frames as they arrive, a live line while the model works, the
terminal's approval question, and a review as GitHub would get it (its body, then each inline comment
as `path:line` with its suggestion)."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TextIO

import anyio

from bot.app.github.models import InlineComment
from bot.app.reviews.pass_end import PassEnd, PostedWith
from bot.app.runs import render
from bot.app.runs.usage import Meter
from bot.beam.completion import CompletionClient
from bot.beam.openai_client import OpenAiCompatible
from bot.beam.types import AgentResult, StreamChunk, StreamChunkType
from bot.local.terminal_text import as_text

PrintMode = Literal["human", "json", "quiet"]
# How `beam-bot run review` ended (docs/commands.md): 0 reviewed, 1 failed, 2 bad usage, and these.
EXIT_PARTIAL = 3  # a cap or a call that never answered stopped it; what was found is printed
EXIT_NOT_REVIEWED = 4  # the model never gave a review: nothing is printed as one
# How often the live line is drawn again: each second on a terminal; on a pipe or a file, where a
# line cannot be redrawn, a plain line now and then shows the run is alive without flooding a log.
TTY_EVERY = 1.0
PLAIN_EVERY = 10.0
CLEAR_LINE = "\r\x1b[K"  # back to the line's start, erase to its end (ECMA-48 EL)


class FramePrinter:
    """Prints frames as they arrive: a compact human view, JSON lines (`--json`), or nothing but the
    count of tool steps (`quiet`, for `run review --json`, which prints the review object alone).

    The placeholder frame keeps the framework's text on the wire (`--json`); the human view says what
    the command is doing instead (`activity`), and shows the model's text (a summary, an answer) with
    its GitHub markup rendered as text (`terminal_text`), as a review's is; `--json` keeps it as is.
    `show_answer=False` leaves the final text to the caller (a review prints it with its body).

    While a model call is in flight (`alive()`), one line says how long the run has worked, which
    call it is on, the tokens the call has streamed so far and the tokens the finished calls used.
    The model client given as `streams_from` streams its answers while the line is alive (where the
    server streams; `bot/beam/streaming.py`); elsewhere only the elapsed time moves until a call
    answers. A local 1.5B model takes minutes per review; without it the terminal sat still on one
    line. On a terminal the line is redrawn in place and erased before any other output; elsewhere
    it is a plain line every PLAIN_EVERY seconds, with no carriage return and no escape sequence.
    """

    def __init__(
        self,
        out: TextIO,
        mode: PrintMode = "human",
        activity: str = "working on the request",
        *,
        show_answer: bool = True,
        meter: Meter | None = None,
        streams_from: CompletionClient | None = None,
    ) -> None:
        self.out = out
        self.meter = meter
        self.streams_from = streams_from
        self.streamed = 0  # tokens the call in flight has written (a streamed call only)
        self.streamed_call = 0  # which call that was: the meter's count of finished calls then
        self.tty = _is_tty(out)
        self.started = time.monotonic()
        self.drawn = False  # the live line is on the screen (a terminal only)
        self.mode = mode
        self.activity = activity
        self.show_answer = show_answer
        self.tool_steps = 0
        # The whole run's counts: a run resumed after an approval ends in a second `done` frame
        # that counts only its own half.
        self.tool_calls = 0
        self.tokens = 0
        self.rounds = 0
        self.announced = False

    def announce(self) -> None:
        """The activity line, before the first call: a review answered as structured output sends no
        frame at all, and the terminal would show nothing while the model thinks."""
        if self.mode == "human" and not self.announced:
            self.clear()
            self.out.write(f"… {self.activity}\n")
            self.out.flush()
        self.announced = True

    def finish(self, meter: Meter) -> None:
        """The `✓ done` line for a run whose calls sent no `done` frame (structured answers), from the
        meter: the final line is there however the model answered."""
        if self.mode != "human" or self.rounds:
            return
        model = f", {meter.model}" if meter.model else ""
        self.clear()
        self.out.write(f"✓ done ({self.tool_calls} tool calls, {meter.tokens} tokens{model})\n")
        self.out.flush()

    async def __call__(self, frame: StreamChunk) -> None:
        self.tool_steps += frame.type is StreamChunkType.TOOL
        self.streamed = 0  # a frame comes after a call answered: its tokens are no longer in flight
        if self.mode == "quiet":
            return
        if self.mode == "json":
            self.out.write(json.dumps(frame.to_json(), ensure_ascii=False) + "\n")
        else:
            line = self.human(frame)
            if line is None:
                return
            self.clear()
            self.out.write(line + "\n")
        self.out.flush()

    def status(self) -> str:
        """The live line's text: `⋯ 42 s · model call 2 · 310 tokens streamed · 1234 tokens so far`."""
        seconds = int(time.monotonic() - self.started)
        elapsed = f"{seconds // 60} min {seconds % 60:02d} s" if seconds >= 60 else f"{seconds} s"
        parts = [elapsed]
        calls = self.meter.calls if self.meter is not None else 0
        if self.meter is not None:
            parts.append(f"model call {calls + 1}")
        if self.streamed and self.streamed_call == calls:  # a finished call's tokens are the meter's
            parts.append(f"{self.streamed} tokens streamed")
        if self.meter is not None and self.meter.tokens:
            parts.append(f"{self.meter.tokens} tokens so far")
        return "⋯ " + " · ".join(parts)

    def stream_sink(self, tokens: int) -> None:
        """The client's count of the tokens its call in flight has streamed (`StreamSink`)."""
        self.streamed = tokens
        self.streamed_call = self.meter.calls if self.meter is not None else 0

    def draw(self) -> None:
        if self.mode != "human":
            return
        if self.tty:
            self.out.write(CLEAR_LINE + self.status())
            self.drawn = True
        else:
            self.out.write(self.status() + "\n")
        self.out.flush()

    def clear(self) -> None:
        """Erases the live line before other output, so a frame never lands after its text."""
        if self.drawn:
            self.out.write(CLEAR_LINE)
            self.drawn = False

    @asynccontextmanager
    async def alive(self) -> AsyncIterator[None]:
        """The live line for the body of the `async with`, erased when it ends however it ends."""
        every = TTY_EVERY if self.tty else PLAIN_EVERY
        # Streamed only where the line shows it: `--json` and a test's client are asked plainly.
        listened = self.streams_from if self.mode == "human" else None
        if isinstance(listened, OpenAiCompatible):
            listened.stream_to = self.stream_sink

        async def keep_drawing() -> None:
            while True:
                await anyio.sleep(every)
                self.draw()

        # The body's error is raised again outside the task group, as itself: the callers catch
        # BeamError and TimeoutError, which a task group would wrap in an ExceptionGroup.
        failed: Exception | None = None
        try:
            async with anyio.create_task_group() as tg:
                if self.mode == "human":
                    tg.start_soon(keep_drawing)
                try:
                    yield
                except Exception as error:
                    failed = error
                finally:
                    tg.cancel_scope.cancel()
        finally:
            if isinstance(listened, OpenAiCompatible):
                listened.stream_to = None
            self.clear()
            self.out.flush()
        if failed is not None:
            raise failed

    def human(self, frame: StreamChunk) -> str | None:
        kind = frame.type
        if kind is StreamChunkType.TOOL and frame.data is not None:
            args = json.dumps(frame.data.tool_args, ensure_ascii=False, separators=(",", ":"))
            return f"  · {frame.data.tool_name} {args}"
        if kind is StreamChunkType.CHUNK:  # the model's text, written for GitHub: shown as text
            return as_text(frame.text) if self.show_answer else None
        if kind is StreamChunkType.DONE and frame.result is not None:
            result = frame.result
            self.rounds += 1
            self.tool_calls += len(result.tool_calls)
            self.tokens += result.token_usage.total_tokens if result.token_usage else 0
            if result.interrupted:
                return "⏸ waiting for approval"
            return done_line(result, self.tool_calls, self.tokens if self.rounds > 1 else None)
        if kind is StreamChunkType.ERROR:
            return f"✗ {frame.error}"
        if kind is StreamChunkType.THINKING:
            return "… thinking"
        if kind is StreamChunkType.PLACEHOLDER:
            if self.announced:
                return None
            self.announced = True
            return f"… {self.activity}"
        return f"… {frame.text}"


def _is_tty(out: TextIO) -> bool:
    isatty = getattr(out, "isatty", None)
    try:
        return bool(isatty()) if isatty is not None else False
    except ValueError:  # closed
        return False


def done_line(result: AgentResult, tool_calls: int, tokens: int | None = None) -> str:
    """The final line: the whole run's tool calls and tokens (`tokens` when they were summed over
    its halves), and the model."""
    usage = result.token_usage
    counted = (
        f"{tokens} tokens" if tokens is not None else f"{usage.total_tokens} tokens" if usage else "no usage"
    )
    model = f", {result.model_used}" if result.model_used else ""
    return f"✓ done ({tool_calls} tool calls, {counted}{model})"


def ask_terminal(action: dict[str, object], stdin: TextIO, out: TextIO) -> bool:
    args = json.dumps(action.get("args"), ensure_ascii=False)
    out.write(f"The agent wants to run {action.get('tool')} {args}. Allow? [y/N] ")
    out.flush()
    answer = stdin.readline().strip().lower()
    return answer in ("y", "yes")


def inline_comments(comments: list[dict[str, Any]]) -> list[InlineComment]:
    """The fields of each comment that GitHub's create-review call takes."""
    fields = InlineComment.model_fields
    return [InlineComment.model_validate({k: v for k, v in c.items() if k in fields}) for c in comments]


@dataclass(frozen=True, slots=True)
class Shown:
    """What a terminal shows beside an inline comment and GitHub does not need: the finding's
    severity (GitHub's page has no place for it), and the head's lines a suggestion would replace
    (GitHub shows them itself), so the suggestion can be printed as a diff."""

    severity: str | None = None
    replaced: tuple[str, ...] = ()


@dataclass
class LocalReview:
    """The review a run would post on GitHub (event COMMENT), kept instead of posted.

    `root` is the tree the review was made on, to read the lines a suggestion replaces."""

    commit_id: str
    body: str = ""
    comments: list[InlineComment] = field(default_factory=list)
    posted_with: PostedWith | None = None
    # The comments as the pass gave them (with `finding` and `line_text`), which `--post` keys
    # against the findings already on the pull request (reviews/findings.py).
    findings: list[dict[str, Any]] = field(default_factory=list)
    root: Path | None = None
    shown: list[Shown] = field(default_factory=list)

    async def post(self, body: str, comments: list[dict[str, Any]]) -> int:
        """`review_change`'s publisher: the comments as the GitHub path validates them."""
        self.body = body
        self.findings = list(comments)
        self.comments = inline_comments(comments)
        self.shown = [
            Shown(str(c["severity"]) if c.get("severity") else None, self._lines(kept))
            for c, kept in zip(comments, self.comments, strict=True)
        ]
        return 1

    def _lines(self, comment: InlineComment) -> tuple[str, ...]:
        if self.root is None:
            return ()
        where = (self.root / comment.path).resolve()
        if not where.is_relative_to(self.root.resolve()):  # the review tool checked it; never read outside
            return ()
        try:
            text = where.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError, ValueError):
            return ()
        lines = text.split("\n")
        return tuple(lines[(comment.start_line or comment.line) - 1 : comment.line])

    def to_json(self) -> dict[str, Any]:
        """The body of GitHub's create-review call."""
        return {
            "commit_id": self.commit_id,
            "event": "COMMENT",
            "body": self.body,
            "comments": [c.model_dump(exclude_none=True) for c in self.comments],
        }

    def describe(self) -> str:
        if self.posted_with == "text":
            return f"Review. {render.PLAIN_TEXT_REVIEW}"
        count = len(self.comments)
        how = {
            "structured": "answered as structured output, checked as review_change's are",
            "json": "read from the JSON findings in the model's answer",
        }.get(self.posted_with or "", "posted with review_change")
        return f"Review, {how} ({count} inline comment{'s' if count != 1 else ''}):"

    def human(self) -> str:
        """The review for a terminal: GitHub's markup as text (terminal_text.py), each comment's
        severity beside its place, each suggestion as a diff of the lines it replaces."""
        lines = [self.describe(), "", as_text(self.body)]
        for comment, shown in zip(self.comments, self.shown or [Shown()] * len(self.comments), strict=True):
            where = f"{comment.start_line}-{comment.line}" if comment.start_line else str(comment.line)
            severity = f" ({shown.severity})" if shown.severity else ""
            lines += ["", f"{comment.path}:{where}{severity}"]
            body = comment.body
            if shown.severity:  # GitHub's label line: said once, beside the place
                body = body.removeprefix(render.severity_label(shown.severity) + "\n")
            lines += [f"  {line}" if line else "" for line in as_text(body, shown.replaced).splitlines()]
        return "\n".join(lines)


def review_report(
    review: LocalReview,
    result: AgentResult | None,
    meter: Meter,
    notes: list[str],
    dropped: Sequence[dict[str, Any]] = (),
) -> dict[str, Any]:
    """`run review --json`: the review object, how it was posted, and what the run did and used.
    `result` is the tool loop's, None when the review was answered as structured output (no loop
    ran); the usage is the meter's, every call of the run (votes and verification too). `dropped`:
    each finding the verification held back, with the check's answer (reviews/verification.py), so
    what was not posted can be read and why."""
    return {
        "review": review.to_json(),
        "posted_with": review.posted_with,
        "answer": result.text if result is not None else "",
        "tool_calls": [{"name": c.tool_name, "args": c.args} for c in result.tool_calls] if result else [],
        "usage": meter.token_usage().to_json(),
        "model": (result.model_used if result is not None else None) or meter.model,
        "notes": notes,
        "dropped": list(dropped),
    }


def print_end(
    out: TextIO,
    err: TextIO,
    printer: FramePrinter,
    meter: Meter,
    review: LocalReview | None,
    end: PassEnd | None,
    result: AgentResult | None,
    notes: list[str],
    *,
    as_json: bool,
    extra: Mapping[str, Any] | None = None,
) -> int:
    """What `beam-bot run` prints once its calls are done, and its exit code. A review (`review`,
    with its pass's `end`) that never was is said on stderr (exit 4: nothing is printed as one);
    otherwise the review as GitHub would get it (`--json`: the review object alone, with the notes in
    it), then the notes. Another skill streamed its answer already: only its notes are left.
    `extra`: what a second door adds to the review object (`review <URL> --post`: where it was
    posted), so that `--json` stays one document on stdout."""
    if end is not None and end.kind == "not_reviewed":  # nothing was posted: said, and exit 4
        out.flush()
        err.write(f"✗ not reviewed ({end.code}): {end.reason}\n")
        if as_json:
            out.write(json.dumps({"review": None, "not_reviewed": end.code, "reason": end.reason}) + "\n")
        return EXIT_NOT_REVIEWED
    # A review answered as structured output ran no tool loop, so it has no agent result.
    printer.finish(meter)
    if review is not None and end is not None:
        review.posted_with = end.posted_with
    if review is not None and as_json:
        printed = review_report(review, result, meter, notes, end.held if end else ())
        printed.update(extra or {})
        out.write(json.dumps(printed, ensure_ascii=False) + "\n")
    elif review is not None:
        text = result.text if result is not None else ""
        if review.posted_with == "review_change" and text.strip():
            out.write(as_text(text) + "\n")
        out.write("\n" + review.human() + "\n")
    if not as_json:
        for note in notes:
            out.write(f"note: {note}\n")
    out.flush()
    return EXIT_PARTIAL if end is not None and end.kind == "partial" else 0
