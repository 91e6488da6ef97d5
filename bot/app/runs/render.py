"""The Markdown of every run comment and command reply, so the tone and the states stay alike.

Held-push texts live beside their flow, in approvals/render.py; nothing else writes words a person reads.

Every tracking comment carries a hidden marker with the run id, so a retried job finds and edits its
own comment instead of posting a second one. The model's answer, the command's words and the reasons
a run failed come from outside: they pass `markdown.untrusted`, so none of them can hide text or carry
a marker of the bot's (issue 40).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from bot.app import markdown as md
from bot.app.commands import help_text
from bot.app.repo_config import CONFIG_PATH

MARKER = "<!-- beam-run:{run_id} -->"
MAX_COMMENT_CHARS = 60_000  # GitHub refuses bodies over 65,536 characters.
MAX_SHOWN_ERRORS = 20
_CITATION = re.compile(r"(?<![\w/`\[])`?(?P<path>[\w.\-/]+\.\w+)(?::(?P<start>\d+)(?:-(?P<end>\d+))?)?`?")


@dataclass
class Progress:
    """What a run has done so far, as the tracking comment shows it."""

    command: str
    run_id: str
    tools: list[str] = field(default_factory=list)

    def add_tool(self, name: str, args: object) -> None:
        label = _inline(name)  # the model names the tool, even one the skill does not offer
        if isinstance(args, dict):
            target = args.get("path") or args.get("query") or args.get("ref")
            if isinstance(target, str) and target:
                label = f"{label} `{_inline(target)}`"
        self.tools.append(label)


def _inline(text: str, limit: int = 80) -> str:
    """A value for inside a code span: nothing hidden (`markdown.visible`), no backtick to close it."""
    text = md.untrusted(md.visible(text), code=True).replace("`", "'")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _command(progress: Progress) -> str:
    """The command as typed (a commenter's words), in a code span."""
    return f"`{_inline(progress.command, 300)}`"


def _clip(text: str) -> str:
    """The model's answer as posted: shown, never hidden (`markdown.untrusted`), and cut to fit."""
    text = md.untrusted(text)
    if len(text) <= MAX_COMMENT_CHARS:
        return text
    return text[:MAX_COMMENT_CHARS] + "\n\n*(cut here: the answer was longer than a GitHub comment allows)*"


def _marker(run_id: str) -> str:
    return MARKER.format(run_id=run_id)


# The skill an answer in one of the bot's review threads runs as (reviews/threads.py): its run has no
# tracking comment, and what it says goes to the thread it answers.
THREAD_SKILL = "thread"


def thread_marker(comment_id: int) -> str:
    """The last line of the bot's answer to review comment `comment_id` (reviews/render.answers)."""
    return f"<!-- beam-thread-reply:{comment_id} -->"


def thread_gave_up(comment_id: int, run_id: str, reason: str, code: str) -> str:
    """An answer in a review thread whose job gave up before it answered (runs/sweep.py), said in the
    thread where the question is. It ends with an answer's marker: a second delivery of the question
    is not asked again, and a new mention is a new question."""
    return (
        f"❌ This answer (run `{run_id[:8]}`) failed ({code}): {md.untrusted(reason.rstrip('.'))}. "
        f"Mention me again to retry.\n\n{thread_marker(comment_id)}"
    )


def _steps(progress: Progress, limit: int = 30) -> str:
    shown = progress.tools[-limit:]
    lines = [f"- [x] {tool}" for tool in shown]
    if len(progress.tools) > limit:
        lines.insert(0, f"- … {len(progress.tools) - limit} earlier steps")
    return "\n".join(lines)


def review_posted(url: str, answer: str = "") -> str:
    """The tracking comment's answer for a review run: where the review is, then the model's words."""
    text = "Posted a review on this pull request."
    if url:
        text += f" ([the review]({url}))"
    return f"{text}\n\n{md.untrusted(answer)}" if answer else text


def working(progress: Progress) -> str:
    steps = _steps(progress)
    body = f"⏳ Working on {_command(progress)} (run `{progress.run_id[:8]}`)…"
    if steps:
        body += f"\n\n{steps}"
    return f"{body}\n\n{_marker(progress.run_id)}"


@dataclass(frozen=True, slots=True)
class Usage:
    """What a run used, as its footer shows it; `cost` only when prices are configured."""

    model: str | None
    input_tokens: int
    output_tokens: int
    model_calls: int
    tool_steps: int
    seconds: float
    cost: float | None = None


def usage_line(usage: Usage) -> str:
    """One line of a footer: model, tokens, calls, steps, wall time and the estimated cost."""
    parts = [
        f"model `{_inline(usage.model or 'unknown', 60)}`",
        f"{usage.input_tokens:,} input / {usage.output_tokens:,} output tokens",
        f"{usage.model_calls} model call{'s' if usage.model_calls != 1 else ''}",
        f"{usage.tool_steps} tool step{'s' if usage.tool_steps != 1 else ''}",
        f"{usage.seconds:.1f} s",
    ]
    if usage.cost is not None:
        parts.append(f"≈ ${usage.cost:.4f}")
    return " · ".join(parts)


def _footer(progress: Progress, usage: Usage | None) -> str:
    line = f"{_command(progress)} · run `{progress.run_id[:8]}`"
    if usage is not None:
        line += f" · {usage_line(usage)}"
    return f"\n\n<sub>{line}</sub>"


def with_usage(body: str, usage: Usage) -> str:
    """A review body (or any text the run posts) with the usage footer below it."""
    return f"{body}\n\n<sub>{usage_line(usage)}</sub>"


NOT_PARSING = "it would not parse"  # a suggestion that breaks the file's syntax (reviews/suggestion_check.py)
NOT_PARSING_RUFF = "ruff finds a syntax error in the file with it applied"


def coverage_lines(left_out: Sequence[str], lint_skipped: Sequence[str]) -> list[str]:
    """What a review did not read and which linters did not run: said, not hidden."""
    lines = []
    if left_out:
        lines.append("Not reviewed: " + ", ".join(f"`{_inline(p)}`" for p in left_out[:30]))
        if len(left_out) > 30:
            lines[-1] += f" and {len(left_out) - 30} more"
    if lint_skipped:
        lines.append("Linters skipped: " + ", ".join(lint_skipped))
    return lines


def with_coverage(body: str, left_out: Sequence[str], lint_skipped: Sequence[str]) -> str:
    lines = coverage_lines(left_out, lint_skipped)
    return body if not lines else body + "\n\n" + "\n".join(f"<sub>{line}</sub><br>" for line in lines)


def finished(progress: Progress, answer: str, notes: Sequence[str] = (), usage: Usage | None = None) -> str:
    details = ""
    if progress.tools:
        steps = _steps(progress, 200)
        details = f"\n\n<details><summary>{len(progress.tools)} steps</summary>\n\n{steps}\n\n</details>"
    extra = "".join(f"\n\n> [!NOTE]\n> {md.untrusted(note)}" for note in notes)
    footer = _footer(progress, usage)
    return (
        _clip(answer.strip() or "*(the model gave an empty answer)*")
        + extra
        + details
        + footer
        + f"\n{_marker(progress.run_id)}"
    )


def beam_failure(message: str, detail: str | None, hint: str | None) -> str:
    """Why a framework error ended a run, with what to do about it when the catalogue says."""
    text = f"{message}: {md.inline(detail)}" if detail else message  # a detail can name a path
    return f"{text}\n\n**What to do:** {hint}" if hint else text


def failed(progress: Progress, reason: str, code: str | None = None, usage: Usage | None = None) -> str:
    coded = f" ({code})" if code else ""
    footer = f"\n\n<sub>{usage_line(usage)}</sub>" if usage is not None else ""
    return (
        f"❌ {_command(progress)} failed{coded}: {md.untrusted(reason)}\n\n"
        f"Run id: `{progress.run_id}`. Nothing was pushed. You can try again with the same command."
        f"{footer}\n\n{_marker(progress.run_id)}"
    )


# -- costs and limits (issue 11) ------------------------------------------------------------------

LIMIT_WORDS = {
    "max_tokens_per_run": "the token limit of a run ({value:,} tokens)",
    "max_minutes_per_run": "the time limit of a run ({value:g} minutes)",
    "tokens_per_installation_per_month": "this installation's monthly token budget ({value:,} tokens)",
    "runs_per_user_per_day": "{whose} limit of {value:,} runs per day on this repository",
    "runs_per_repo_per_day": "this repository's limit of {value:,} runs per day",
}


def limit_words(limit: str, value: float, whose: str = "your") -> str:
    """`whose` names the person of a per-user limit: "your" in a reply to them, "@login's" elsewhere."""
    return LIMIT_WORDS[limit].format(value=value, whose=whose) + f" (`{limit}`)"


def would_go_over(limit: str, value: float, resets_at: datetime, whose: str = "your") -> str:
    """The refusal's words, shared by a command's reply and an automatic review's summary line."""
    when = resets_at.strftime("%Y-%m-%d %H:%M UTC")
    return f"this would go over {limit_words(limit, value, whose)}. It resets at {when}."


def stopped_note(limit: str, value: float) -> str:
    return f"This run stopped at {limit_words(limit, value)}; above is what it had by then."


def cancelled(progress: Progress, by: str, partial: str = "", usage: Usage | None = None) -> str:
    body = (
        f"🛑 {_command(progress)} (run `{progress.run_id[:8]}`) was cancelled by @{by}. Nothing was pushed."
    )
    if partial.strip():
        body += f"\n\nWhat it had by then:\n\n{_clip(partial.strip())}"
    if progress.tools:
        steps = _steps(progress, 200)
        body += f"\n\n<details><summary>{len(progress.tools)} steps</summary>\n\n{steps}\n\n</details>"
    return body + _footer(progress, usage) + f"\n{_marker(progress.run_id)}"


def over_limit(login: str, limit: str, value: float, resets_at: datetime) -> str:
    return f"Sorry @{login}, {would_go_over(limit, value, resets_at)}"


def duplicate_run(command: str, status: str, link: str) -> str:
    state = "queued" if status == "queued" else "running"
    where = f"[already {state}]({link})" if link else f"already {state}"
    return f"`{command}` is {where} on this pull request; I will not start it twice."


# Runs that no `/beam` command names, by the skill their row records (reviews/threads.py).
RUN_NAMES = {"thread": "an answer in a review thread"}


def cancel_requested(login: str, runs: Sequence[tuple[str, str]]) -> str:
    """`runs` are (run id, skill) pairs."""
    names = ", ".join(
        f"{RUN_NAMES.get(skill) or f'`/beam {skill}`'} (run `{run_id[:8]}`)" for run_id, skill in runs
    )
    return f"@{login} asked to cancel {names}; it stops at its next step."


def nothing_to_cancel(run: str | None) -> str:
    if run:
        return f"No queued or running run `{_inline(run, 36)}` on this pull request to cancel."
    return "No queued or running run on this pull request to cancel."


def retrying(progress: Progress, reason: str, attempt: int, attempts: int) -> str:
    return (
        f"⏳ {_command(progress)} hit a temporary problem ({md.untrusted(reason)}); retrying (attempt "
        f"{attempt + 1} of {attempts}), run `{progress.run_id[:8]}`.\n\n{_marker(progress.run_id)}"
    )


def refusal(login: str, needed: str) -> str:
    return (
        f"Sorry @{login}, `/beam` commands need {needed} permission on this repository. "
        "A maintainer can run the command instead."
    )


def command_help(problem: str | None = None) -> str:
    lead = f"{md.untrusted(problem)}\n\n" if problem else ""  # it can quote the comment's word
    return f"{lead}Here is what I can do:\n\n{help_text()}"


def _utc(moment: float) -> str:
    return datetime.fromtimestamp(moment, UTC).strftime("%Y-%m-%d %H:%M UTC")


def recovered(posted_at: float, since: float) -> str:
    """The line before the answer to a command whose delivery was missed and recovered (issue 32)."""
    return (
        f"beam-bot was unavailable when this command was posted ({_utc(posted_at)}; unavailable "
        f"since {_utc(min(since, posted_at))}). It is answered now that the bot is back."
    )


def needs_pull_request(command: str) -> str:
    return f"`{command}` works on pull requests; this is an issue. Try it in a pull request's conversation."


def skill_disabled(command: str) -> str:
    return f"`/beam {command}` is turned off for this repository in `{CONFIG_PATH}`."


CONFIG_ERROR_CODE = "BEM-341"  # an invalid `.github/beam.yml`, for commands and automatic reviews alike


def config_error_block(errors: Sequence[str], indent: str = "") -> str:
    """The messages as a code block (each line prefixed by `indent`, to nest it in a list item). They
    quote the file, so no mention, link or HTML in them may take effect."""
    shown = [md.untrusted(line.replace("\n", " "), code=True) for line in errors[:MAX_SHOWN_ERRORS]]
    if len(errors) > MAX_SHOWN_ERRORS:
        shown.append(f"... and {len(errors) - MAX_SHOWN_ERRORS} more")
    body = [f"- {line}" for line in shown]
    fence = "`" * max(3, max((len(run) for run in re.findall(r"`+", "\n".join(body))), default=0) + 1)
    return "\n".join(indent + line for line in [f"{fence}text", *body, fence])


def config_branch(branch: str | None) -> str:
    return f"the `{_inline(branch)}` branch" if branch and "`" not in branch else "the default branch"


def render_config_errors(errors: list[str], branch: str | None = None) -> str:
    """Markdown for a PR comment: the code, the messages, and that the defaults apply meanwhile."""
    return (
        f"⚠️ **beam-bot: `{CONFIG_PATH}` is invalid** ({CONFIG_ERROR_CODE}), so the default settings "
        f"apply until it is fixed on {config_branch(branch)}.\n\n"
        f"{config_error_block(errors)}\n\n"
        f"The file is read from the default branch only, never from a pull request. "
        f"Its format is described by `schema/beam-config.schema.json` in the beam-bot repository."
    )


# Why a run failed, as its tracking comment says it (after "failed: ").
def timed_out(seconds: float) -> str:
    return f"the run took longer than {seconds:.0f} s and was stopped"


def checkout_failed(error: object) -> str:
    return f"could not check out the repository: {error}"


def github_refused(status: int, message: str) -> str:
    return f"GitHub refused a call ({status}: {message})"


def github_trouble(status: int) -> str:
    return f"GitHub answered {status}"


INTERNAL_ERROR = "an internal error stopped the run; the maintainers of this bot can look it up"
NO_ANSWER = "the run ended without an answer"
CANNOT_PUSH = "this skill cannot push"
# A review run whose model answered in plain text instead of calling review_change (issue 20).
PLAIN_TEXT_REVIEW = (
    "The model answered in plain text instead of calling `review_change`: its answer is the review's "
    "body, without inline comments."
)
NOTHING_YET = "*(the run had no answer yet when it stopped)*"


def _fence(text: str) -> str:
    """A backtick fence longer than any run of backticks in `text`, so the block cannot be closed early."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


# A suggestion with `<!` in it: committed from the page it would be what was shown, and what is shown
# may not open an HTML comment (markdown.untrusted), so it is shown as code, not offered (issue 40).
HOLDS_COMMENT = "it holds `<!`, which the bot shows changed (`<! `) so it hides nothing"


def holds_comment(text: str) -> bool:
    """Whether `untrusted` would change `text` shown as code: it could not be committed as shown."""
    return md.untrusted(text, code=True) != text


def suggestion_block(text: str) -> str:
    """GitHub's committable suggestion: the block replaces the commented lines. The caller offers
    none that `holds_comment`; one that does anyway is shown changed rather than hiding anything."""
    body = md.untrusted(text[:-1] if text.endswith("\n") else text, code=True)
    fence = _fence(body)
    return f"{fence}suggestion\n{body}\n{fence}"


def suggestion_as_text(text: str, reason: str) -> str:
    """A suggestion that cannot be committed from the page, shown as plain code with the reason."""
    body = md.untrusted(text[:-1] if text.endswith("\n") else text, code=True)
    fence = _fence(body)
    return f"Suggested code (not offered as a suggestion: {reason}):\n{fence}\n{body}\n{fence}"


def suggestion_as_words(text: str) -> str:
    """A suggestion the model wrote as a sentence (reviews/answer_checks.py `reads_as_prose`): shown
    as what it is, the fix in words, on one line."""
    return f"Fix: {md.untrusted(' '.join(text.split()))}"


def severity_label(severity: str) -> str:
    """The first line of a finding's inline comment: its severity, which the model is asked for and
    `review.severity` selects by, so whoever reads the comment weighs it as the bot did. Its own line,
    so a comment that opens with a list, a quote or a code fence still renders as one."""
    return f"**{severity}**"


def outside_change(count: int) -> str:
    """The review body's footer for findings on files the change does not touch: dropped, since no
    line of them can be checked against the diff, and counted so that none disappears unsaid."""
    if count == 1:
        return "1 finding on a file outside the change was dropped"
    return f"{count} findings on files outside the change were dropped"


def not_read_note(
    skipped: Iterable[str], truncated: Iterable[str], total_files: int, listed_files: int
) -> list[str]:
    """Plain words for what the run could not read, instead of hiding it."""
    notes: list[str] = []
    if listed_files < total_files:
        notes.append(
            f"This pull request changes {total_files} files; I looked at the first {listed_files} only."
        )
    skipped = list(skipped)
    if skipped:
        notes.append("Skipped (binary or too large): " + ", ".join(f"`{_inline(p)}`" for p in skipped[:20]))
    truncated = list(truncated)
    if truncated:
        notes.append("Read in part only: " + ", ".join(f"`{_inline(p)}`" for p in truncated[:20]))
    return notes


def fetch_cap_note(paths: Sequence[str]) -> list[str]:
    """The files a review could not read because the run fetched as much as the server allows
    (BEAM_MAX_FETCH_BYTES, BEM-357): said, never hidden."""
    if not paths:
        return []
    shown = ", ".join(f"`{_inline(p)}`" for p in list(dict.fromkeys(paths))[:20])
    return [
        "Not read: the server's limit on file contents one run may download (BEAM_MAX_FETCH_BYTES, "
        f"BEM-357) was reached before {shown}."
    ]


def link_citations(text: str, known_paths: set[str], blob_base: str) -> str:
    """Turn `path` and `path:12-20` mentions of files in the checkout into links at the head commit."""

    def replace(match: re.Match[str]) -> str:
        path = match.group("path")
        if path not in known_paths:
            return match.group(0)
        start, end = match.group("start"), match.group("end")
        anchor = f"#L{start}" + (f"-L{end}" if end else "") if start else ""
        label = path + (f":{start}" if start else "") + (f"-{end}" if end else "")
        return f"[`{label}`]({blob_base}/{path}{anchor})"

    return _CITATION.sub(replace, text)


def not_posted(below: int, over: int, severity: str, max_comments: int) -> str:
    """The review body's line for findings the repository's `review:` rules kept back (issue 21)."""
    parts = []
    if over:
        noun = "finding" if over == 1 else "findings"
        parts.append(f"{over} more {noun} not posted (`review.max_comments` is {max_comments})")
    if below:
        noun = "finding" if below == 1 else "findings"
        parts.append(f"{below} {noun} below `review.severity: {severity}` not posted")
    return "; ".join(parts) + "." if parts else ""


# -- the `review:` rules in a review's prompt (issue 21) ---------------------------------------

TONE_TITLE = "how the maintainers want comments written (review.tone)"
TONES = {
    "concise": "concise: one or two sentences per comment, the problem and the fix; no praise, no summary "
    "of the change.",
    "detailed": "detailed: explain each problem, why it matters and how to fix it, with an example when "
    "it helps.",
}
INSTRUCTIONS_TITLE = "what the maintainers ask reviewers to check in these files (review.path_instructions)"


def path_instruction(glob: str, text: str, paths: Sequence[str]) -> str:
    return f"- `{glob}` ({', '.join(md.code(p) for p in list(paths)[:20])}): {' '.join(text.split())}"
