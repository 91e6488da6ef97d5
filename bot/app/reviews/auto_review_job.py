"""The automatic review job (kind `auto_review`, one per pull request): wait out the debounce, decide
what to review, run the agent, and record the range in the summary comment and the check run.

A head that gets as far as a review is first admitted through the runs ledger, on the same limits
as commands (reviews/admission.py): over a limit, nothing runs and the summary says which and when it
resets; the agent runs under the per-run caps, and a review a cap stopped says so.

The job runs under its own queue key (`owner/repo#N/review`), so deliveries for the same pull request
(a newer push, `closed`) are handled while it runs; they move the pull request's generation on, and
the job stops at its next step. A job woken before its pull request's `due_at` (a newer push moved
the debounce) queues itself again for then, as the same row, without holding a worker.

One check run per head, whatever fails: an attempt that will be retried hands its check run back to
the pull request's row (left in progress: GitHub does not reopen a completed one), so the retry takes
it again; a retry after a crash finds it among the head's check runs by its `external_id`. Only the
last attempt, or an error a retry cannot mend, completes it (neutral, "the review failed"); a job
that gives up without doing so (its worker died on the last attempt) is seen to by reviews/abandoned.py,
from the generation and head each attempt notes in the journal.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from functools import partial

from bot.app.effects.journal import Journal
from bot.app.github.api import GitHubError
from bot.app.github.client import CheckRun, GitHubApp, InstallationClient, PullRequest
from bot.app.jobs.queue import Job
from bot.app.jobs.signals import PermanentError, Reschedule, RetryableError, seconds_until
from bot.app.permissions import Permission
from bot.app.repo_config import RepoLimits, matches_any
from bot.app.repo_config.review_config import AutoReviewConfig
from bot.app.repo_config.review_rules import ReviewRules
from bot.app.reviews import render
from bot.app.reviews.admission import ReviewRun, author_of
from bot.app.reviews.auto_review_run import AgentReview, Target
from bot.app.reviews.finding_flow import FindingFlow
from bot.app.reviews.publish import finish_check, publish_summary, start_check
from bot.app.reviews.scope import Scope, changed_since, diff_digest, scope_of, skip_reason, touches_paths
from bot.app.reviews.settings import load_review_settings
from bot.app.reviews.state import Entry, ReviewState, ReviewStates
from bot.app.runs.outage import GAVE_UP_CODE, OutageWait, github_down, write_of
from bot.app.runs.run import RunDeps
from bot.beam.errors import BeamError

log = logging.getLogger("beam.reviews")

KIND = "auto_review"


def job_key(repo: str, number: int) -> str:
    return f"{repo}#{number}/review"


def check_key(repo: str, number: int, generation: int, head: str, step: str) -> str:
    """The effects-journal key of a `beam / review` check run: one per generation, head and step."""
    return f"{job_key(repo, number)}:{generation}:{head}:{step}"


ATTEMPT = "review_attempt"  # the journal's kind for where a job's attempt is (not a GitHub write)


def attempt_key(job_id: int) -> str:
    """The journal row that says which generation and head the job's latest attempt is at, so a job
    that gives up can be seen to (reviews/abandoned.py)."""
    return f"job:{job_id}:review-attempt"


async def held_check(gh: InstallationClient, target: Target, generation: int, head: str) -> CheckRun | None:
    """The check run of this generation and head an earlier attempt held when it died (it could not
    hand it back): found among the head's check runs by the `external_id` it was created with."""
    keys = {check_key(target.repo, target.number, generation, head, s) for s in ("check", "check-job")}
    runs = await gh.list_check_runs(target.owner, target.name, head, render.CHECK_NAME)
    return next((run for run in runs if run.external_id in keys), None)


class ReviewJob:
    def __init__(
        self, github: GitHubApp, deps: RunDeps, states: ReviewStates, *, enabled_by_default: bool
    ) -> None:
        self.github = github
        self.deps = deps
        self.states = states
        self.enabled_by_default = enabled_by_default

    async def bot_login(self) -> str:
        login = await self.deps.identity.login()
        if login is None:
            raise RetryableError("the App's login is unknown for now")
        return login

    async def __call__(self, job: Job) -> None:
        if job.payload is None:
            raise PermanentError(f"job {job.id} has no pull request")
        target = Target.of(job.payload)
        state = await self.states.get(target.repo, target.number)
        if state is None or state.closed:
            return
        if state.due_at > self.states.store.clock():
            raise Reschedule(state.due_at)
        gh = InstallationClient(self.github, target.installation_id)
        try:
            await self._review(gh, target, state, job)
        except GitHubError as error:
            if github_down(error):  # GitHub down: wait for it as a run does (runs/outage.py)
                # One wait per head's generation, on any worker; a new push starts its own.
                waiting = f"auto-review:{target.repo}#{target.number}:g{state.generation}"
                wait = OutageWait(
                    Journal(self.states.store), waiting, self.deps.outage_wait, self.deps.in_flight
                )
                at = await wait.next_try(write_of(error))
                if at is not None and error.status == 0:
                    # No answer: a review it was posting may still land, and the next try filters
                    # its findings against those posted, so it looks only once nothing can land.
                    at = max(at, self.states.store.clock() + self.deps.in_flight)
                if at is not None:
                    raise Reschedule(at) from error
                raise PermanentError(f"{GAVE_UP_CODE}: {error}") from error
            if error.transient:
                raise RetryableError(str(error), retry_after=seconds_until(error.retry_at)) from error
            raise PermanentError(str(error)) from error

    async def _review(self, gh: InstallationClient, target: Target, state: ReviewState, job: Job) -> None:
        pull = await gh.get_pull(target.owner, target.name, target.number)
        head = pull.head.sha
        if pull.state != "open":
            return
        where = {"generation": state.generation, "head": head, "base": pull.base.sha}
        await Journal(self.states.store).note(attempt_key(job.id), ATTEMPT, where)
        check_id = await self.states.take_check(target.repo, target.number, head)
        if check_id is None and job.attempts > 1:
            held = await held_check(gh, target, state.generation, head)
            if held is not None and held.status == "completed":
                log.info("%s#%s: %s was concluded before", target.repo, target.number, head[:7])
                return
            check_id = held.id if held is not None else None
        if head == state.reviewed_head:
            if check_id is not None:
                # An earlier attempt recorded this range and failed before its summary edit or its
                # check run's completion landed: make both say it now.
                said = [e for e in state.entries if e.head == head]
                entry = said[-1] if said else Entry("no_findings", head)
                effects = self.deps.effects(gh)
                await publish_summary(effects, self.states, state, await self.bot_login())
                await finish_check(effects, target.repo, check_id, entry)
            return
        run = _Range(self, gh, target, state, pull, check_id)
        try:
            await self._decide(run, target, pull)
        except Reschedule as error:
            # A write of an earlier attempt may still land (effects/writer.py): not an error. The job
            # wakes again later, on the same check run: it goes back to the row, as for a retry.
            await run.after_error(error, last=False)
            raise
        except Exception as error:
            await run.after_error(error, last=job.attempts >= job.max_attempts)
            raise

    async def _decide(self, run: _Range, target: Target, pull: PullRequest) -> None:
        gh, state, head = run.gh, run.state, pull.head.sha
        settings = await load_review_settings(gh, target.repo, target.default_branch, self.enabled_by_default)
        config = settings.config
        if not settings.enabled:
            await run.conclude(Entry("skipped", head, note="automatic reviews are off"), show=False)
            return
        if settings.invalid:
            # No review under rules that cannot be read; the summary says why (settings.py).
            await run.conclude(settings.invalid_entry(head))
            return
        reason = skip_reason(pull, config)
        if reason is not None:
            await run.conclude(Entry("skipped", head, note=reason), show=state.summary_comment_id is not None)
            return
        files = await gh.list_pull_files(target.owner, target.name, target.number)
        scope = scope_of(files, max(len(files), pull.changed_files or 0), config)
        if not touches_paths(scope, config):
            note = "no changed file matches `auto_review.paths`"
            await run.conclude(Entry("skipped", head, note=note), show=state.summary_comment_id is not None)
            return
        if scope.changed_lines > config.max_changed_lines:
            note = render.too_large(scope.changed_lines, config.max_changed_lines)
            await run.conclude(Entry("too_large", head, since=pull.base.sha, note=note))
            return
        await run.review(scope, config, settings.limits, settings.rules, settings.trigger_permission)


class _Range:
    """One head of one pull request, from the decision to the summary line."""

    def __init__(
        self,
        job: ReviewJob,
        gh: InstallationClient,
        target: Target,
        state: ReviewState,
        pull: PullRequest,
        check_id: int | None,
    ) -> None:
        self.job, self.gh, self.target, self.state, self.pull, self.check_id = (
            job,
            gh,
            target,
            state,
            pull,
            check_id,
        )
        # The summary comment, the check run's updates and the review: one path of GitHub writes.
        self.effects = job.deps.effects(gh)

    async def current(self) -> bool:
        now = await self.job.states.get(self.target.repo, self.target.number)
        return now is not None and now.generation == self.state.generation and not now.closed

    async def conclude(
        self, entry: Entry, *, show: bool = True, reviewed: bool = False, digest: str | None = None
    ) -> None:
        repo, number = self.target.repo, self.target.number
        if show:
            head = entry.head if reviewed else None
            state, changed = await self.job.states.record(
                repo, number, entry, reviewed_head=head, diff_digest=digest
            )
            if changed or state.summary_comment_id is None:
                await publish_summary(self.effects, self.job.states, state, await self.job.bot_login())
        await finish_check(self.effects, repo, self.check_id, entry)

    async def after_error(self, error: Exception, *, last: bool) -> None:
        """Before the job is retried or given up: a retry takes the check run back from the row (left
        in progress); otherwise it is completed now, so it is never left in progress."""
        if self.check_id is None:
            return
        repo, number, head = self.target.repo, self.target.number, self.pull.head.sha
        retried = not last and not (isinstance(error, GitHubError) and not error.transient)
        states, generation = self.job.states, self.state.generation
        if retried and await states.set_check(repo, number, generation, head, self.check_id):
            return
        note = str(error) if isinstance(error, GitHubError) else type(error).__name__
        entry = Entry("failed" if await self.current() else "superseded", head, note=note)
        await finish_check(self.effects, repo, self.check_id, entry, quiet=True)

    async def review(
        self,
        scope: Scope,
        config: AutoReviewConfig,
        limits: RepoLimits,
        rules: ReviewRules,
        who: Permission = "write",  # may dismiss a finding (`trigger_permission`)
    ) -> None:
        pull, state, head = self.pull, self.state, self.pull.head.sha
        digest = diff_digest(scope.files)
        since, changed = pull.base.sha, None
        if state.reviewed_head is not None:
            if digest == state.diff_digest:
                entry = Entry("unchanged", head, since=state.reviewed_head, full=False)
                await self.conclude(entry, reviewed=True, digest=digest)
                return
            comparison = await self.gh.compare(self.target.owner, self.target.name, state.reviewed_head, head)
            if comparison is not None and comparison.status == "ahead":
                since = state.reviewed_head
                kept = [f for f in comparison.files if not matches_any(config.ignore_paths, f.filename)]
                changed = changed_since(kept)
        ledger = ReviewRun(self.job.deps, self.target, pull)
        over = await ledger.admit(limits)
        if over is not None:  # nothing runs; the check run queued for this head says why
            note = render.over_limit(author_of(pull), over.limit, over.value, over.resets_at)
            await self.conclude(Entry("over_limit", head, since=since, full=changed is None, note=note))
            return
        if self.check_id is None:
            # Through the journal (issue 8): a retry adopts the check run an earlier attempt made.
            key = check_key(self.target.repo, self.target.number, state.generation, head, "check-job")
            check = await self.effects.check_run(
                key, self.target.owner, self.target.name, head, render.CHECK_NAME
            )
            self.check_id = check.id
        await start_check(self.effects, self.target.repo, self.check_id)
        skipped = render.coverage(scope.total, len(scope.files), scope.unread, scope.ignored)
        base = Entry("no_findings", head, since=since, full=changed is None, skipped_files=skipped)
        # The findings ledger (issue 21): the 👎s since the last review, then what the model is told.
        repo, number, deps = self.target.repo, self.target.number, self.job.deps
        fetch_diff = partial(deps.checkouts.mirrors.fetch_diff_blobs, repo)
        flow = FindingFlow(deps.store, self.gh, deps.effects(self.gh), repo, number, who, fetch_diff)
        await flow.read_reactions()
        sections = await flow.sections(rules, [f.filename for f in scope.files])
        agent = AgentReview(
            self.job.deps,
            self.gh,
            self.target,
            pull,
            scope,
            changed,
            since,
            self.current,
            await self.job.bot_login(),
            limits,
            rules,
            sections,
            flow,
        )
        try:
            outcome = await agent.run(ledger.run_id)
        except (BeamError, TimeoutError) as error:
            await ledger.end("failed")
            note = "it took too long"
            if isinstance(error, BeamError):
                note = f"{error.code}: {error.message}" + (f" {error.entry.hint}" if error.entry.hint else "")
            await self.conclude(replace(base, kind="failed", note=note))
            return
        except Reschedule:
            raise
        except Exception:
            # A retried job admits the same run again and runs it; `after_error` sees to the check run.
            await ledger.end("failed")
            raise
        await ledger.end("cancelled" if outcome.kind == "stopped" else "succeeded", outcome)
        # What the budget left out (lock, generated, vendored files, or past `max_calls`) and the
        # linters that could not run are named on the summary's line (issue 21).
        skipped = [*base.skipped_files, *outcome.left_out]
        base = replace(base, skipped_files=skipped, note=render.linters_skipped(outcome.lint_skipped))
        if outcome.kind == "capped":  # not reviewed: the next push reviews these commits again
            stop = outcome.stop
            assert stop is not None and stop.limit is not None  # no `/beam cancel` reaches it
            await self.conclude(replace(base, kind="capped", note=render.capped(stop.limit, stop.value)))
            return
        if outcome.kind == "stopped":
            latest = await self.job.states.get(self.target.repo, self.target.number)
            if latest is not None and latest.closed:
                await self.conclude(replace(base, kind="cancelled", note=render.CLOSED))
            else:
                await self.conclude(replace(base, kind="superseded"))
            return
        if outcome.kind == "not_reviewed":  # no review posted, the head not marked reviewed
            await self.conclude(replace(base, kind="not_reviewed", note=f"{outcome.code}: {outcome.reason}"))
            return
        if outcome.partial:  # what was found is posted; the summary says it is partial
            base = replace(base, note="\n  - ".join(n for n in (outcome.partial, base.note) if n))
        if outcome.kind == "reviewed":
            entry = replace(base, kind="reviewed", url=outcome.url, findings=outcome.findings)
        else:
            entry = base
        # A partial review leaves its head unreviewed: the next push reviews these commits again.
        await self.conclude(entry, reviewed=not outcome.partial, digest=digest)
