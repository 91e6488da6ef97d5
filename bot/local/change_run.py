"""`review`, `summarize`, `commit-notes` and `ask` on a local change, built as `/beam` builds them.

The change becomes the pull request's objects (`change.py`); the prompts come from
`bot.app.context.pass_prompts`, the tools and the runner from `bot.app.runs.skill_agent`, the
limits from the server's settings (`BEAM_MAX_TOKENS_PER_RUN`, `BEAM_MAX_MINUTES_PER_RUN`,
`BEAM_JOB_TIMEOUT`) lowered by the repository's `.github/beam.yml` on its default branch, as on
GitHub. What differs is only what a checkout cannot have: the review is printed (and, with
`review <URL> --post`, posted through a second door as well, pull_request.py), a
run is not recorded, cancelled or counted against an installation's monthly budget, and tool links
are paths of the checkout.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import anyio

from bot.app.context.diff_context import DiffCut, overflow_retry
from bot.app.context.linters import LintReport, lint_skipped
from bot.app.context.pass_prompts import Asked, BuildPrompts, PassPrompts, PromptBuilder
from bot.app.context.prompt import Coverage
from bot.app.github.models import PullFile
from bot.app.limits.policy import Policy
from bot.app.repo_config import CONFIG_PATH, RepoConfig, parse_repo_config
from bot.app.reviews.pass_end import PassEnd
from bot.app.reviews.posting import Door, Draft, Poster, pass_notes
from bot.app.reviews.review_pass import ReviewPass
from bot.app.reviews.selection import rules_sections
from bot.app.runs import render
from bot.app.runs.deps import MAX_PULL_FILES, run_timeout
from bot.app.runs.host_tools import ToolReport
from bot.app.runs.skill_agent import run_tools, skill_runner
from bot.app.runs.usage import RunGuard, RunUsage, Stop, stopped_outcome
from bot.app.settings import SettingsError, load_settings
from bot.beam.commit_tree import CommitTree
from bot.beam.completion import CompletionClient
from bot.beam.errors import BeamError
from bot.beam.hub import RiverBeam
from bot.beam.sandbox import SandboxRoot
from bot.beam.skills import Skill
from bot.beam.types import AgentResult, ContentPart, InvokeRequest
from bot.local.change import LocalChange
from bot.local.git import UsageError, change_base, default_branch, head_label, try_git
from bot.local.options import RunOptions
from bot.local.output import FramePrinter, LocalReview, PrintMode, print_end

OVERFLOW_RETRY = "the prompt overflowed the model's context; trying once more with half the diff"


def ran_notes(
    stop: Stop | None,
    text: str,
    coverage: Coverage,
    lint: LintReport | None,
    truncated: list[str],
    shown: int,
) -> list[str]:
    """What a skill other than review says after its call, as `SkillRun` says it on GitHub: the cap
    that stopped it, the files no call read, what the budget left out, the linters that could not run."""
    notes = stopped_outcome(stop, text).get("notes", []) if stop is not None else []
    notes += render.not_read_note(coverage.skipped, coverage.cut + truncated, coverage.total_files, shown)
    return notes + render.coverage_lines(coverage.left_out, lint_skipped(lint))


@dataclass
class ChangeRun:
    """One change skill's run, prepared (change read, limits known) before the worktree exists."""

    repo: Path
    skill: Skill
    options: RunOptions
    change: LocalChange
    config: RepoConfig  # the defaults when the file is invalid, as on GitHub
    config_errors: list[str]
    policy: Policy
    run_timeout: float
    # A second door the review leaves by, besides the terminal (`beam-bot review <URL> --post`).
    door: Door | None = None
    # What the run produced, for `beam-bot <skill> <URL> --post`: another skill's answer, posted after
    # the run, and what a partial review did not cover (its partial line).
    answer: str = ""
    missing: str = ""
    # Where a tool's link to a file points: the pull request's head on GitHub for `<skill> <URL>`,
    # whose temporary repository is gone when the review is read; else a path of the checkout.
    blob_base: str | None = None
    # What the second door adds to `review --json`'s object once the review is done (where it was
    # posted): stdout stays one JSON document.
    door_report: Callable[[], dict[str, Any]] | None = None

    def blob_url(self, rel: str, first: int, last: int) -> str:
        where = rel if self.blob_base is None else f"{self.blob_base}/{rel}"
        return f"{where}#L{first}-L{last}"

    @classmethod
    def prepare(cls, repo: Path, skill: Skill, options: RunOptions, head_sha: str) -> ChangeRun:
        try:
            settings = load_settings()
        except SettingsError as error:
            raise UsageError(str(error)) from None
        branch = default_branch(repo)
        base = change_base(repo, head_sha, options.base)
        plain = branch.removeprefix("origin/") if branch else "main"
        change = LocalChange.read(repo, base, head_label(repo, options.ref), head_sha, plain)
        # As on GitHub, the repository's settings come from its default branch, never from the change.
        text = try_git(repo, "show", f"{branch}:{CONFIG_PATH}") if branch else None
        config = parse_repo_config(text)
        return cls(
            repo,
            skill,
            options,
            change,
            config.config,
            config.errors,
            Policy.from_settings(settings),
            run_timeout(settings.job_timeout),
        )

    def activity(self) -> str:
        change = self.change
        count = len(change.files)
        files = f"{count} file{'s' if count != 1 else ''}"
        return (
            f"reading the change {change.base.label}..{change.head_ref}: {files}, "
            f"+{change.additions} -{change.deletions}"
        )

    async def run(self, path: Path, client: CompletionClient, out: TextIO, err: TextIO) -> int:
        """Run the skill and print what it gave; the exit code (EXIT_*) says how a review ended."""
        change, skill, as_json = self.change, self.skill, self.options.as_json
        is_review = skill.name == "review"
        # The commit read from the repository's objects; only the change's files are written to
        # `path` (a scratch directory), for the linters, as on GitHub (runs/workspace.py).
        # It cannot write a ref either: the view refuses every write (BEM-342).
        tree = CommitTree(self.repo, change.head_sha, scratch=SandboxRoot(path))
        files = change.files[:MAX_PULL_FILES]
        await anyio.to_thread.run_sync(tree.materialise, [*(f.filename for f in files), ".gitattributes"])
        run_id = str(uuid.uuid4())
        usage = RunUsage(client, None, run_id, 0, self.policy, time.monotonic())
        guard = await usage.arm(self.config.limits)
        review = LocalReview(change.head_sha, root=path)
        for problem in self.config_errors:
            err.write(f"beam-bot run: {CONFIG_PATH}: {problem} (the defaults apply)\n")
        # `review --json` prints the review object alone; the other skills' `--json` prints frames.
        mode: PrintMode = "quiet" if as_json and is_review else "json" if as_json else "human"
        printer = FramePrinter(
            out, mode, self.activity(), show_answer=not is_review, meter=usage.meter, streams_from=client
        )

        async def door(draft: Draft) -> int:
            printed = await review.post(draft.body, draft.comments)  # what the terminal shows
            if self.door is not None:  # `review <URL> --post`: GitHub's too
                await self.door(draft)
            return printed

        # `review.severity` and `max_comments` apply as on GitHub: the one poster (reviews/posting.py).
        poster = Poster(self.config.review, door, lambda: usage.summary(printer.tool_steps))
        rules = self.config.review
        event = change.event(self.options.instructions)
        asked = Asked(event, skill.name, self.options.instructions, asked_by=change.asked_by)
        sections = rules_sections(rules, [f.filename for f in files])
        prompts = PromptBuilder(
            tree.sandbox,
            asked,
            change.pull_request(),
            len(change.files),
            rules,
            self.policy.limits,
            sections,
            local=change.local,
        )

        def overflowed(cut: DiffCut | None = None) -> None:
            printer.clear()
            err.write(f"beam-bot run: {OVERFLOW_RETRY}\n")

        report = ToolReport()
        notes: list[str] = []
        end: PassEnd | None = None
        try:
            with anyio.fail_after(self.run_timeout):
                async with printer.alive():
                    if is_review:
                        printer.announce()
                        end = await ReviewPass(
                            tree=tree,
                            files=files,
                            prompts=prompts,
                            meter=usage.meter,
                            guard=guard,
                            post=poster,
                            blob_url=self.blob_url,
                            run_id=run_id,
                            repository=change.repository,
                            number=change.number,
                            on_frame=printer,
                            session=uuid.uuid4(),
                            on_overflow=overflowed,
                            passes=rules.passes_limit(self.policy.limits.review_max_passes),
                            verify=rules.verify,
                        ).run()
                        result = end.result
                    else:
                        result = await self._one_call(
                            tree, files, prompts, report, usage, guard, printer, overflowed, notes
                        )
        except TimeoutError:
            err.write(f"✗ failed: {render.timed_out(self.run_timeout)}\n")
            return 1
        except BeamError as error:
            out.flush()
            err.write(f"✗ failed: {error}\n")
            return 1
        self.answer = result.text if result is not None else ""
        self.missing = end.reason if end is not None and end.kind == "partial" else ""
        coverage, context = prompts.last
        if end is None:  # every skill but review: what stopped it, what no call read
            notes += ran_notes(guard.stop, self.answer, coverage, context.lint, report.truncated, len(files))
        else:  # what every door says after a pass (reviews/posting.py)
            notes += pass_notes(end, coverage, context.lint, len(change.files), len(files))
        shown = review if is_review else None
        extra = self.door_report() if self.door_report is not None else None
        return print_end(
            out, err, printer, usage.meter, shown, end, result, notes, as_json=as_json, extra=extra
        )

    async def _one_call(
        self,
        tree: CommitTree,
        files: list[PullFile],
        prompts: BuildPrompts,
        report: ToolReport,
        usage: RunUsage,
        guard: RunGuard,
        printer: FramePrinter,
        overflowed: Callable[[DiffCut | None], None],
        notes: list[str],
    ) -> AgentResult:
        """Every skill but `review`: one call, retried once with half the diff (by whole hunks) when the
        model's context overflowed before any tool ran, as on GitHub (runs/run.py)."""

        tools = run_tools(tree, report, blob_url=self.blob_url)
        hub = RiverBeam()
        hub.register_agent(skill_runner(self.skill.name, usage.meter, tools, should_stop=guard))

        async def build(shown: list[PullFile], one_call: bool) -> PassPrompts:
            return await prompts(shown, one_call, 0)

        async def call(built: PassPrompts, cut: DiffCut | None) -> AgentResult:
            request = InvokeRequest(
                agent_name=self.skill.name,
                content=[ContentPart.text_part(built.calls[0])],
                session_id=uuid.uuid4(),
                request_id=uuid.uuid4(),
                metadata={"repository": self.change.repository, "number": self.change.number},
            )
            return (await hub.invoke(request, on_frame=printer)).result

        def cut_named(cut: DiffCut) -> None:
            overflowed(cut)
            notes.append(cut.named())

        return await overflow_retry(
            files, build, call, ran=lambda: printer.tool_steps > 0, on_overflow=cut_named
        )
