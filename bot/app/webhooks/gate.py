"""The gate a permitted command passes before it runs: one at a time per identical command, the daily
limits and the monthly budget (refused with one short reply, no model call), and `/beam cancel`.

An admitted command becomes a `queued` run and a `run` job keyed to its pull request's run lane, so
the pull request's next comments (a duplicate, a cancel) are read while it runs.
"""

from __future__ import annotations

import re

from bot.app.limits.ledger import Duplicate, Ledger, OverLimit, RunRequest
from bot.app.limits.policy import Policy, effective
from bot.app.runs import render
from bot.app.runs.context import JobContext
from bot.app.runs.run import run_id_for


def command_key(name: str, text: str) -> str:
    """Identical commands share a key: the same command with the same text (spaces aside)."""
    words = re.sub(r"\s+", " ", text).strip()
    return f"{name}\n{words}"


class Gate:
    def __init__(self, ledger: Ledger, policy: Policy) -> None:
        self.ledger = ledger
        self.policy = policy

    async def admit(self, ctx: JobContext) -> bool:
        """Queue the command's run, or reply why not; True when a run is (or already was) queued."""
        event, command = ctx.event, ctx.command
        repo = event.repository
        request = RunRequest(
            run_id=run_id_for(ctx.job),
            repo=repo.full_name,
            number=event.number,
            skill=command.skill or command.name,
            requester=ctx.requester,
            installation_id=ctx.installation_id,
            command_key=command_key(command.name, command.text),
            command_url=event.comment.html_url,
            delivery_id=ctx.job.delivery_id,
            issue_url=f"{repo.html_url}/issues/{event.number}",
            config_version=ctx.config_result.version,
        )
        journal = ctx.effects.journal
        refusal_key = f"{request.run_id}:refusal"
        earlier = await journal.lookup(refusal_key)
        if earlier is not None:  # an attempt that died after refusing: its answer stands
            await ctx.reply(str(earlier.result.get("body", "")))
            return False
        result = await self.ledger.admit(request, effective(self.policy.limits, ctx.config.limits))
        if isinstance(result, Duplicate):
            text = render.duplicate_run(f"/beam {command.name}", result.status, result.link)
        elif isinstance(result, OverLimit):
            text = render.over_limit(ctx.requester, result.limit, result.value, result.resets_at)
        else:
            # The first sign of life right at admission (issue 9), not after the run job's own start.
            await ctx.acknowledge()
            return True
        # Decided before it is said: a retry after the twin has finished (or the day has turned) would
        # otherwise admit the command too, and it would have a refusal and a run (the kill soak).
        kept = await journal.keep_first(refusal_key, "refusal", {"body": text})
        await ctx.reply(str(kept.get("body", text)))
        return False

    async def cancel(self, ctx: JobContext) -> None:
        """`/beam cancel [<run>]`: mark the runs; each stops at its next step and says who cancelled it."""
        repo = ctx.event.repository
        marked = await self.ledger.request_cancel(
            repo.full_name, ctx.event.number, ctx.command.arg, ctx.requester
        )
        if not marked:
            await ctx.reply(render.nothing_to_cancel(ctx.command.arg))
            return
        await ctx.reply(render.cancel_requested(ctx.requester, [(run.run_id, run.skill) for run in marked]))
