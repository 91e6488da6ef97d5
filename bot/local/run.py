"""`run_local`: the skill on a temporary worktree of the checkout, frames printed as they happen.

It uses the framework exactly as an outside host would (hub, runner, bound sandbox tools), so it is
also the smallest end-to-end check that the framework works. The run works in a temporary git
worktree at `HEAD` (or `--ref`), never in the user's own checkout, which it leaves exactly as it was.
`review`, `summarize`, `commit-notes` and `ask` go through `change_run.py`, the GitHub path's own
builders; `author` runs here with the sandbox tools and asks on the terminal before a push. Errors
and the final line of a failed run go to stderr.
"""

from __future__ import annotations

import sys
import uuid
from pathlib import Path
from typing import TextIO

from bot.beam.completion import CompletionClient, EchoClient
from bot.beam.errors import BeamError
from bot.beam.hub import RiverBeam
from bot.beam.openai_client import OpenAiCompatible
from bot.beam.runner import RigAgentRunner
from bot.beam.sandbox import SandboxRoot, WorkingTree
from bot.beam.sandbox_tools import sandbox_tools
from bot.beam.skills import Skill
from bot.beam.types import ActionResponseEnvelope, ActionResponseStatus, ContentPart, InvokeRequest
from bot.local.change_run import ChangeRun
from bot.local.git import TemporaryWorktree, UsageError, check_repository, commit_of, protected_refs
from bot.local.options import CHANGE_SKILLS, RunOptions, resolve_skill
from bot.local.output import FramePrinter, ask_terminal


def pick_client() -> tuple[CompletionClient, str]:
    """A live model when an API key is set (the seed's variables), the echo client otherwise."""
    client = OpenAiCompatible.from_env()
    if client is None:
        return EchoClient(), "echo client (no BEAM_API_KEY)"
    return client, f"model {client.model} at {client.base_url}"


async def run_local(
    options: RunOptions,
    *,
    client: CompletionClient | None = None,
    out: TextIO = sys.stdout,
    stdin: TextIO = sys.stdin,
    err: TextIO = sys.stderr,
) -> int:
    """Run the skill; returns a process exit code (0 done, 1 a BEM error, 2 bad usage)."""
    try:
        repo = check_repository(options.repo)
        probe = WorkingTree(SandboxRoot(repo), [])
        skill = resolve_skill(options.skill, {tool.spec().name for tool in sandbox_tools(probe)})
        if options.base is not None and skill.name not in CHANGE_SKILLS:
            raise UsageError(f"--base is for review, summarize, commit-notes and ask, not {options.skill}")
        change = None
        if skill.name in CHANGE_SKILLS:
            change = ChangeRun.prepare(repo, skill, options, commit_of(repo, options.ref, "--ref"))
        worktree = TemporaryWorktree(repo, options.ref)
    except UsageError as error:
        err.write(f"beam-bot run: {error}\n")
        return 2
    if client is None:
        try:
            client, described = pick_client()
        except BeamError as error:
            err.write(f"beam-bot run: {error}\n")
            return 2
        if not options.as_json:
            out.write(f"using the {described}\n")
    try:
        with worktree:
            if not options.as_json:
                out.write(f"working in a temporary worktree at {options.ref} ({worktree.commit[:12]})\n")
                out.flush()
            if change is not None:
                return await change.run(worktree.path, client, out, err)
            return await _run_in(worktree.path, repo, skill, options, client, out, stdin, err)
    except UsageError as error:
        err.write(f"beam-bot run: {error}\n")
        return 2
    finally:
        aclose = getattr(client, "aclose", None)
        if aclose is not None:
            await aclose()


async def _run_in(
    path: Path,
    repo: Path,
    skill: Skill,
    options: RunOptions,
    client: CompletionClient,
    out: TextIO,
    stdin: TextIO,
    err: TextIO,
) -> int:
    tree = WorkingTree(SandboxRoot(path), protected_refs(repo))
    try:
        if options.branch:
            tree.checkout_branch(options.branch, True)
        hub = RiverBeam()
        tools = [tool for tool in sandbox_tools(tree) if tool.spec().name in set(skill.tools)]
        hub.register_agent(RigAgentRunner(skill.name, client, tools, skill))
        printer = FramePrinter(out, "json" if options.as_json else "human")
        request = InvokeRequest(
            agent_name=skill.name,
            content=[ContentPart.text_part(options.instructions)],
            session_id=uuid.uuid4(),
            request_id=uuid.uuid4(),
        )
        outcome = await hub.invoke(request, on_frame=printer)
        while outcome.result.interrupted and outcome.result.action_required:
            envelopes = []
            for action in outcome.result.action_required:
                allowed = options.approve if options.approve is not None else ask_terminal(action, stdin, out)
                status = ActionResponseStatus.SUBMITTED if allowed else ActionResponseStatus.CANCELLED
                envelopes.append(
                    ActionResponseEnvelope(
                        action_id=str(action["action_id"]),
                        kind=str(action.get("kind", "confirmation")),
                        request_id=str(request.request_id),
                        status=status,
                        responder_id="terminal",
                    )
                )
                if not allowed and not options.as_json:
                    out.write(f"  ✗ {action.get('tool')} denied: nothing was run\n")
            resume = request.model_copy(
                update={
                    "content": [],
                    "interaction_id": outcome.result.interaction_id,
                    "request_id": uuid.uuid4(),
                    "actions": envelopes,
                }
            )
            outcome = await hub.invoke(resume, on_frame=printer)
    except BeamError as error:
        out.flush()
        err.write(f"✗ failed: {error}\n")
        return 1
    return 0
