"""`beam-bot run`: one skill on a local git checkout, no GitHub, with pushes asked for on the terminal.

It uses the framework exactly as an outside host would (hub, runner, bound sandbox tools), so it is
also the smallest end-to-end check that the framework works.
"""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from bot.beam.completion import CompletionClient, EchoClient
from bot.beam.errors import BeamError
from bot.beam.hub import RiverBeam
from bot.beam.openai_client import OpenAiCompatible
from bot.beam.runner import RigAgentRunner
from bot.beam.sandbox import SandboxRoot, WorkingTree
from bot.beam.sandbox_tools import sandbox_tools
from bot.beam.skills import skill_by_name
from bot.beam.types import (
    ActionResponseEnvelope,
    ActionResponseStatus,
    ContentPart,
    InvokeRequest,
    StreamChunk,
    StreamChunkType,
)

DEFAULT_PROTECTED = ("main", "master")
Decide = Callable[[dict[str, object]], bool]


@dataclass(frozen=True, slots=True)
class RunOptions:
    skill: str
    repo: Path
    instructions: str
    branch: str | None = None
    as_json: bool = False
    approve: bool | None = None  # None: ask on the terminal


def pick_client() -> tuple[CompletionClient, str]:
    """A live model when an API key is set (the seed's variables), the echo client otherwise."""
    client = OpenAiCompatible.from_env()
    if client is None:
        return EchoClient(), "echo client (no BEAM_API_KEY)"
    return client, f"model {client.model} at {client.base_url}"


def protected_refs(tree_path: Path) -> list[str]:
    """main, master and the origin's default branch when the checkout knows it."""
    refs = list(DEFAULT_PROTECTED)
    head = tree_path / ".git" / "refs" / "remotes" / "origin" / "HEAD"
    if head.is_file():
        target = head.read_text(encoding="utf-8").strip().removeprefix("ref: refs/remotes/origin/")
        if target and target not in refs:
            refs.append(target)
    return refs


class FramePrinter:
    """Prints frames as they arrive: a compact human view, or JSON lines with `--json`."""

    def __init__(self, out: TextIO, as_json: bool) -> None:
        self.out = out
        self.as_json = as_json

    async def __call__(self, frame: StreamChunk) -> None:
        if self.as_json:
            self.out.write(json.dumps(frame.to_json(), ensure_ascii=False) + "\n")
        else:
            self.out.write(self.human(frame) + "\n")
        self.out.flush()

    @staticmethod
    def human(frame: StreamChunk) -> str:
        kind = frame.type
        if kind is StreamChunkType.TOOL and frame.data is not None:
            args = json.dumps(frame.data.tool_args, ensure_ascii=False, separators=(",", ":"))
            return f"  · {frame.data.tool_name} {args}"
        if kind is StreamChunkType.CHUNK:
            return frame.text
        if kind is StreamChunkType.DONE and frame.result is not None:
            result = frame.result
            if result.interrupted:
                return "⏸ waiting for approval"
            usage = result.token_usage
            tokens = f"{usage.total_tokens} tokens" if usage else "no usage"
            model = f", {result.model_used}" if result.model_used else ""
            return f"✓ done ({len(result.tool_calls)} tool calls, {tokens}{model})"
        if kind is StreamChunkType.ERROR:
            return f"✗ {frame.error}"
        if kind is StreamChunkType.THINKING:
            return "… thinking"
        return f"… {frame.text}"


def ask_terminal(action: dict[str, object], stdin: TextIO, out: TextIO) -> bool:
    args = json.dumps(action.get("args"), ensure_ascii=False)
    out.write(f"The agent wants to run {action.get('tool')} {args}. Allow? [y/N] ")
    out.flush()
    answer = stdin.readline().strip().lower()
    return answer in ("y", "yes")


async def run_local(
    options: RunOptions,
    *,
    client: CompletionClient | None = None,
    out: TextIO = sys.stdout,
    stdin: TextIO = sys.stdin,
) -> int:
    """Run the skill; returns a process exit code (0 done, 1 a BEM error, 2 bad usage)."""
    if skill_by_name(options.skill) is None:
        out.write(f"unknown skill {options.skill!r}\n")
        return 2
    if client is None:
        client, described = pick_client()
        if not options.as_json:
            out.write(f"using the {described}\n")
    root = SandboxRoot(options.repo)
    tree = WorkingTree(root, protected_refs(root.path))
    try:
        if options.branch:
            tree.checkout_branch(options.branch, True)
        hub = RiverBeam()
        hub.register_agent(RigAgentRunner.for_skill(options.skill, client, sandbox_tools(tree)))
        printer = FramePrinter(out, options.as_json)
        request = InvokeRequest(
            agent_name=options.skill,
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
        out.write(f"✗ {error}\n")
        return 1
    finally:
        aclose = getattr(client, "aclose", None)
        if aclose is not None:
            await aclose()
    return 0
