"""The words `beam-bot action` says to the workflow: its log lines (the last one names what failed,
with its code), the job's step summary, and the final state of a run its job left unfinished.

The tracking comment's own words stay in runs/render.py; this module only fills in why the run
ended (the job was cancelled, with the workflow run's link) for the sweep that writes it.
"""

from __future__ import annotations

from bot.app import markdown as md
from bot.app.action.outcome import NO_STATE, UNFINISHED, Outcome, RunRow
from bot.beam.errors import BeamError

PREFIX = "beam-bot action: "
MAX_SUMMARY_FINDINGS = 50


def one_line(error: BeamError) -> str:
    """A BeamError on one line (its hint too), so the log's last line is the whole of it."""
    text = f"{error.message} ({error.code})"
    if error.detail:
        text += f": {error.detail}"
    if error.entry.hint:
        text += ("" if text.endswith((".", "!", "?")) else ".") + f" What to do: {error.entry.hint}"
    return " ".join(text.split())


def run_line(run: RunRow) -> str:
    """`review succeeded`, or `review failed (BEM-084: ...)`: one line per run, as it ends."""
    line = f"{run.skill} {run.status}"
    if run.code:
        line += f" ({run.code}{': ' + run.message if run.message else ''})"
    return " ".join(line.split())


def causes(outcome: Outcome) -> list[str]:
    """What actually failed, first cause first: a run's own error (the model refused the key, GitHub
    refused a call), then the state of the pull request, then a job that failed without a run to say
    why, then jobs the time limit left. Empty when nothing failed."""
    found: list[str] = []
    for run in outcome.runs:
        if run.status == "failed":
            code = f" ({run.code})" if run.code else ""
            found.append(f"`/beam {run.skill}` failed{code}: {run.message or 'no reason was recorded'}")
    if outcome.state_problem is not None:
        found.append(one_line(outcome.state_problem))
    found.extend(one_line(BeamError(UNFINISHED, failed_job)) for failed_job in outcome.failed_jobs)
    if outcome.unfinished:
        left = (
            f"{outcome.unfinished} job(s) still queued or running when the time limit "
            f"({outcome.time_limit:.0f} s, twice BEAM_JOB_TIMEOUT) ran out"
        )
        found.append(one_line(BeamError(UNFINISHED, left)))
    return [" ".join(cause.split()) for cause in found]


def failure_line(outcome: Outcome) -> str | None:
    """The log's last line when something failed: the first cause, and how many more are above it."""
    found = causes(outcome)
    if not found:
        return None
    more = f" (and {len(found) - 1} more above)" if len(found) > 1 else ""
    return found[0] + more


def state_unreadable(message: str, auth: bool) -> BeamError:
    """BEM-394 when the pull request's state ref cannot be fetched, naming the token when it was refused."""
    why = "GitHub refused the job's token (the `github-token` input)" if auth else "it could not be fetched"
    return BeamError(NO_STATE, f"{why}: {message}")


def state_unkept(problem: str) -> BeamError:
    return BeamError(NO_STATE, problem)


def stopped(signal_name: str) -> str:
    """The one line for SIGINT or SIGTERM (a cancelled job sends both, in that order)."""
    error = BeamError("BEM-396", f"{signal_name}; nothing more was done")
    return one_line(error)


def github_unreachable(detail: str) -> str:
    return one_line(BeamError(UNFINISHED, f"GitHub could not be reached: {detail}"))


# -- the step summary ------------------------------------------------------------------------------


def _cost(cost: float | None) -> str:
    return f"${cost:.4f}" if cost is not None else "-"


def summary(outcome: Outcome, what: str, run_link: str) -> str:
    """The job's summary: what ran, how it ended, the review and its findings, and what it used.
    Text from the model (a finding's claim) and from the runs' errors is shown, never rendered."""
    lines = [f"### beam-bot: {md.inline(what)}", ""]
    last = failure_line(outcome)
    lines.append(f"**Outcome:** {outcome.word}" + (f": {md.code(last)}" if last else ""))
    lines.append("")
    if outcome.runs:
        lines += [
            "| run | status | model | input tokens | output tokens | cost |",
            "|---|---|---|---:|---:|---:|",
        ]
        for run in outcome.runs:
            status = run.status + (f" ({run.code})" if run.code else "")
            model = md.code(run.model, table=True) if run.model else "-"
            lines.append(
                f"| {md.code('/beam ' + run.skill, table=True)} | {status} | {model} | {run.input_tokens:,} "
                f"| {run.output_tokens:,} | {_cost(run.cost)} |"
            )
        total_in = sum(r.input_tokens for r in outcome.runs)
        total_out = sum(r.output_tokens for r in outcome.runs)
        costs = [r.cost for r in outcome.runs if r.cost is not None]
        if len(outcome.runs) > 1:
            total_cost = sum(costs) if costs else None
            lines.append(f"| **total** | | | {total_in:,} | {total_out:,} | {_cost(total_cost)} |")
        lines.append("")
    else:
        lines += ["No run was started (a refusal or a reply needs none).", ""]
    if outcome.review_url:
        lines += [f"**Review:** [on the pull request]({outcome.review_url})", ""]
    if outcome.findings:
        noun = "finding" if len(outcome.findings) == 1 else "findings"
        lines.append(f"**{len(outcome.findings)} {noun} posted:**")
        lines.append("")
        for finding in outcome.findings[:MAX_SUMMARY_FINDINGS]:
            where = md.code(f"{finding.path}:{finding.line}")
            lines.append(
                f"- {where} ({md.code(finding.severity)}): {md.code(md.one_line(finding.claim, 200))}"
            )
        if len(outcome.findings) > MAX_SUMMARY_FINDINGS:
            lines.append(f"- … and {len(outcome.findings) - MAX_SUMMARY_FINDINGS} more")
        lines.append("")
    lines.append(f"[The workflow run]({run_link})")
    return "\n".join(lines) + "\n"


# -- a run the job left unfinished (the `if: always()` step) --------------------------------------

JOB_ENDED = "BEM-395"
_ENDINGS = {
    "cancelled": "the workflow job was cancelled (or hit its `timeout-minutes`) before the run finished",
    "failure": "the workflow job failed before the run finished",
}


def job_ended(job_status: str, run_link: str) -> str:
    """Why the run ended, for its tracking comment: how its job ended, and where its log is."""
    why = _ENDINGS.get(job_status, "the workflow job ended before the run finished")
    return f"{why}; [the workflow run]({run_link}) has its log"


def finish_summary(finished: int, job_status: str, run_link: str) -> str:
    """The step summary's lines from the `if: always()` step."""
    if not finished:
        return ""
    noun = "run was" if finished == 1 else "runs were"
    how = "was cancelled" if job_status == "cancelled" else "ended"
    return (
        f"### beam-bot: the job {how} before its work was done\n\n"
        f"{finished} {noun} still working; each tracking comment now says so ({JOB_ENDED}). "
        f"[The workflow run]({run_link})\n"
    )


def finish_done(finished: int) -> str:
    if not finished:
        return "nothing was left working"
    noun = "run" if finished == 1 else "runs"
    return f"the tracking comment of {finished} {noun} this job left working now says how the job ended"


def finish_incomplete(finished: int, left: int) -> str:
    """One line: the runs whose tracking comment still says "Working" (GitHub refused or was down)."""
    error = BeamError(
        JOB_ENDED, f"{left} run(s) could not be made final ({finished} were); the job's log names the call"
    )
    return one_line(error)
