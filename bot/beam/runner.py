"""`RigAgentRunner`: the tool loop over a `CompletionClient` (riverbeam-reference.md section 3).

Kept from the original: OpenAI-format messages, the frame sequence (placeholder, thinking, tool...,
chunk, done), at most 8 completion rounds (BEM-088), BEM-089 for an unknown tool, a tool error ends
the run, and approval of `confirm_required` tools through an interrupted result. Better than the
original: in a batch of tool calls the ones that need no approval run and only the others wait; a
resume runs only `submitted` envelopes (the hub puts the stored action in their payload); real
token usage, `model_used` and latency are reported; frames go to `emit` as they happen.

Two options a host may turn on (the defaults keep the original's behaviour): a `checkpoint` that
keeps the conversation after every finished tool round, so a run started again continues from there;
and `recoverable_errors`, BEM codes that go back to the model as the tool's result (`{"error": ...}`
with the code) instead of ending the run.

A completion whose `problem` says its tool call could not be used (issue 20: an unknown tool, broken
JSON) is never taken for the answer: the model is told once what was wrong, and a second such answer
in a row ends the run with BEM-094. Rounds only ever append to the conversation, so each round's
prompt starts with the last one's (ARCHITECTURE.md section 11: prompt caches re-use it).

A review must end in a review, so a host may turn on `answer_in_text`: where the run would end in
BEM-094 (unusable calls again), BEM-091 (a call cut by `max_tokens`) or BEM-088 (rounds used up),
the model is asked once more, in the same conversation, for its answer in plain text; that answer,
call syntax and think blocks taken out (`tool_dialects.without_calls`), ends the run, with
`metadata={"answered_in_text": "<code>: <why>"}` so the host can say so.

A host may also pass `should_stop`, asked before every model call and tool call: when it gives a
reason, the run ends there with what it has (text so far, tool records, usage) and
`metadata={"stopped": reason}`.

A call of a tool that only reads (`READ_ONLY_TOOLS`) with the same name and arguments as an earlier
one of the run is not run again (issue 30: a small model called the same `list_tree` six times): it
is answered with the first result, marked as a repeat, so the model learns it has that already. Any
other tool's call may change what the reads see, so it forgets the earlier results.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Awaitable, Callable, Collection, Sequence
from typing import Any, Protocol

from bot.beam.agent import Agent, FrameHeaders, FrameLog, FrameSink, done_frame, frame_headers, message_frame
from bot.beam.approved_actions import compact_json, run_approved
from bot.beam.completion import Completion, CompletionClient, PendingToolCall, completion_call
from bot.beam.errors import BeamError
from bot.beam.skills import Skill, skill_by_name
from bot.beam.tool_dialects import without_calls
from bot.beam.tools import Tool, ToolSpec
from bot.beam.types import (
    AgentContext,
    AgentInput,
    AgentMessageRole,
    AgentMetadata,
    AgentResult,
    ContentPart,
    StreamChunk,
    StreamChunkType,
    TokenUsage,
    ToolCallRecord,
    text_of,
)

MAX_ROUNDS = 8
# Asked at every step; a reason (any text) stops the run there, None lets it go on.
StopCheck = Callable[[], Awaitable[str | None]]
PROGRESS_TEXT = "Retrieving allowed pages\u2026"
CONFIRMATION_TEXT = "confirmation required"
# What the model is told when its tool calls are given up on (`answer_in_text`); the same every run.
ANSWER_IN_TEXT = (
    "Tool calls cannot be used any more in this conversation. Write your final answer now, in plain "
    "text: no tool call, no JSON and no tags."
)
CUT_CALL = "the answer was cut off by max_tokens in the middle of a tool call"

# Tools whose result depends only on their arguments while nothing is written: a repeat may be
# answered from the first result. A tool not named here always runs, and makes the run forget them.
READ_ONLY_TOOLS = frozenset(
    {"list_tree", "read_file", "git_status", "git_diff", "git_log", "search", "get_page", "get_block",
     "graph_neighbors"}
)  # fmt: skip
REPEATED_CALL = (
    "You already called this tool with these same arguments in this review; nothing has changed "
    "since, so here is the same result again. Do not call it again: use it, or do the next step."
)

_OPENAI_ROLES = {
    AgentMessageRole.SYSTEM: "system",
    AgentMessageRole.HUMAN: "user",
    AgentMessageRole.AI: "assistant",
    AgentMessageRole.TOOL: "tool",
}


class Checkpoint(Protocol):
    """Where a host keeps a run's conversation: (rounds done, OpenAI-format messages)."""

    async def load(self) -> tuple[int, list[dict[str, Any]]] | None: ...

    async def save(self, rounds: int, messages: list[dict[str, Any]]) -> None: ...


class RigAgentRunner(Agent):
    """A skill's tool loop: calls the model, runs the tools it asks for, repeats until it answers.

    `metadata.confirm` set to the JSON value `true` skips approval of `confirm_required` tools. It is
    request metadata, which a client can set: hosts must strip it from untrusted requests.
    """

    def __init__(
        self,
        name: str,
        client: CompletionClient,
        tools: Sequence[Tool],
        skill: Skill,
        *,
        checkpoint: Checkpoint | None = None,
        recoverable_errors: Collection[str] = (),
        should_stop: StopCheck | None = None,
        answer_in_text: bool = False,
    ) -> None:
        self.name = name
        self.answer_in_text = answer_in_text
        self.client = client
        self._complete = completion_call(client)  # a seed-style client has only `complete`
        self.skill = skill
        self.checkpoint = checkpoint
        self.recoverable_errors = frozenset(recoverable_errors)
        self.should_stop = should_stop
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            self._tools.setdefault(tool.spec().name, tool)
        self._specs = [tool.spec() for tool in tools]

    @classmethod
    def new(
        cls,
        name: str,
        client: CompletionClient,
        tools: Sequence[Tool],
        skill: Skill,
        *,
        should_stop: StopCheck | None = None,
    ) -> RigAgentRunner:
        """Any name, every tool given; the skill supplies only the system prompt."""
        return cls(name, client, tools, skill, should_stop=should_stop)

    @classmethod
    def for_skill(
        cls,
        skill_name: str,
        client: CompletionClient,
        tools: Sequence[Tool],
        *,
        checkpoint: Checkpoint | None = None,
        recoverable_errors: Collection[str] = (),
        should_stop: StopCheck | None = None,
        answer_in_text: bool = False,
    ) -> RigAgentRunner:
        """The tools in the skill's allowlist, in the order given; named after the skill.

        An unknown skill name gets an empty prompt and all the tools, as in the original.
        """
        skill = skill_by_name(skill_name)
        if skill is None:
            skill = Skill(skill_name, "", tuple(tool.spec().name for tool in tools))
        allowed = set(skill.tools)
        return cls(
            skill.name,
            client,
            [t for t in tools if t.spec().name in allowed],
            skill,
            checkpoint=checkpoint,
            recoverable_errors=recoverable_errors,
            should_stop=should_stop,
            answer_in_text=answer_in_text,
        )

    @property
    def tool_specs(self) -> list[ToolSpec]:
        return list(self._specs)

    def metadata(self) -> AgentMetadata:
        return AgentMetadata(name=self.name, description=self.skill.system_prompt, tags=["rig"])

    async def stream(
        self, input: AgentInput, context: AgentContext, emit: FrameSink | None = None
    ) -> list[StreamChunk]:
        started = time.perf_counter()
        log = FrameLog(emit)
        headers = frame_headers(self.name, input)
        if input.actions is not None:
            await self._resume(input, log, headers, started)
        else:
            await self._run(input, context, log, headers, started)
        return log.frames

    def messages(self, input: AgentInput, context: AgentContext) -> list[dict[str, Any]]:
        """The OpenAI-format conversation: skill prompt, history, then the current user turn."""
        messages: list[dict[str, Any]] = []
        if self.skill.system_prompt:
            messages.append({"role": "system", "content": self.skill.system_prompt})
        for message in context.conversation_history:
            role = _OPENAI_ROLES[message.role]
            messages.append({"role": role, "content": text_of(message.content, "\n")})
        user_text = text_of(input.content, "\n")
        if user_text:
            messages.append({"role": "user", "content": user_text})
        return messages

    async def _run(
        self,
        input: AgentInput,
        context: AgentContext,
        log: FrameLog,
        headers: FrameHeaders,
        started: float,
    ) -> None:
        await log.push(message_frame(StreamChunkType.PLACEHOLDER, PROGRESS_TEXT, headers))
        await log.push(message_frame(StreamChunkType.THINKING, PROGRESS_TEXT, headers))
        messages = self.messages(input, context)
        first_round = 0
        if self.checkpoint is not None:
            saved = await self.checkpoint.load()
            if saved is not None:  # a run started again: continue after its last finished round
                first_round, messages = saved
        skip_approval = input.meta("confirm") is True
        records: list[ToolCallRecord] = []
        usage = TokenUsage()
        model: str | None = None
        said: list[str] = []  # text the model wrote beside its tool calls: what a stopped run has
        told = False  # whether the model was told once that its last call could not be used
        seen: dict[tuple[str, str], Any] = {}  # read-only calls of this run and their first result

        async def stopped() -> bool:
            reason = await self.should_stop() if self.should_stop is not None else None
            if reason is None:
                return False
            text = "\n\n".join(said)
            result = self._result(input, text, records, usage, model, started, stopped=reason)
            await log.push(done_frame(result, headers))
            return True

        for round_number in range(first_round, MAX_ROUNDS):
            if await stopped():
                return
            try:
                completion = await self._complete(input, messages, self._specs)
            except BeamError as error:
                if error.code != "BEM-091" or not self.answer_in_text:
                    raise
                completion = Completion(text="", problem=CUT_CALL)  # told like any unusable call
            if completion.usage is not None:
                usage += completion.usage
            model = completion.model or model
            if completion.text and completion.problem is None:  # call syntax never becomes an answer
                said.append(completion.text)
            if completion.tool_calls is None and completion.problem is not None:
                if told:
                    code = "BEM-091" if completion.problem == CUT_CALL else "BEM-094"
                    if not self.answer_in_text:
                        raise BeamError(code, completion.problem)
                    said.append(without_calls(completion.text or "", self._tools))
                    why = f"{code}: {completion.problem}"
                    run = (input, messages, records)
                    await self._end_in_text(why, said, run, usage, model, started, log, headers)
                    return
                told = True
                messages.append({"role": "assistant", "content": completion.text or ""})
                messages.append({"role": "user", "content": self._correction(completion.problem)})
                continue
            if completion.tool_calls is None:
                text = completion.text or ""
                await log.push(message_frame(StreamChunkType.CHUNK, text, headers))
                result = self._result(input, text, records, usage, model, started)
                await log.push(done_frame(result, headers))
                return
            waiting: list[PendingToolCall] = []
            for call in completion.tool_calls:
                tool = self._tools.get(call.name)
                if tool is not None and not skip_approval and tool.spec().confirm_required:
                    waiting.append(call)
                    continue
                if await stopped():
                    return
                records.append(await self._call_tool(call, tool, input, messages, log, headers, seen))
            told = False
            if completion.problem is not None:  # some calls of the batch ran; say why the others did not
                messages.append({"role": "user", "content": self._correction(completion.problem)})
            if waiting:
                required: list[dict[str, Any]] = [
                    {"action_id": str(uuid.uuid4()), "kind": "confirmation", "tool": c.name, "args": c.args}
                    for c in waiting
                ]
                result = self._result(
                    input, CONFIRMATION_TEXT, records, usage, model, started, action_required=required
                )
                await log.push(done_frame(result, headers))
                return
            if self.checkpoint is not None:
                await self.checkpoint.save(round_number + 1, messages)
        if not self.answer_in_text:
            raise BeamError("BEM-088")
        why = "BEM-088: the rounds were used up"
        await self._end_in_text(why, said, (input, messages, records), usage, model, started, log, headers)

    async def _end_in_text(
        self,
        why: str,
        said: list[str],
        run: tuple[AgentInput, list[dict[str, Any]], list[ToolCallRecord]],
        usage: TokenUsage,
        model: str | None,
        started: float,
        log: FrameLog,
        headers: FrameHeaders,
    ) -> None:
        """One last call for a plain-text answer (`answer_in_text`). Usable calls in it still run (a
        `review_change` is the review), those needing approval do not; the answer is its prose, else
        the prose said before; a call cut again by `max_tokens` leaves only that."""
        input, messages, records = run
        messages.append({"role": "user", "content": ANSWER_IN_TEXT})
        try:
            completion = await self._complete(input, messages, self._specs)
        except BeamError as error:
            if error.code != "BEM-091":
                raise
            completion = Completion(text="")
        if completion.usage is not None:
            usage += completion.usage
        for call in completion.tool_calls or ():
            tool = self._tools.get(call.name)
            if tool is not None and not tool.spec().confirm_required:
                records.append(await self._call_tool(call, tool, input, [], log, headers))
        text = without_calls(completion.text or "", self._tools) or "\n\n".join(p for p in said if p.strip())
        await log.push(message_frame(StreamChunkType.CHUNK, text, headers))
        result = self._result(input, text, records, usage, completion.model or model, started)
        result.metadata = {"answered_in_text": why}
        await log.push(done_frame(result, headers))

    def _correction(self, problem: str) -> str:
        """What the model is told, once, about a call that could not be used; the same words every run."""
        names = ", ".join(spec.name for spec in self._specs) or "none"
        return (
            f"Your last tool call could not be used: {problem}. The tools you can call are: {names}. "
            "Call one by its exact name with arguments that are a JSON object, or answer in plain text."
        )

    async def _call_tool(
        self,
        call: PendingToolCall,
        tool: Tool | None,
        input: AgentInput,
        messages: list[dict[str, Any]],
        log: FrameLog,
        headers: FrameHeaders,
        seen: dict[tuple[str, str], Any] | None = None,
    ) -> ToolCallRecord:
        """Run one call and add its exchange to `messages`; the frame comes first, as in the original.
        With `seen`, a repeated read-only call is answered from its first result (module docstring)."""
        frame = message_frame(
            StreamChunkType.TOOL, f"{call.name}\u2026", headers, tool_name=call.name, tool_args=call.args
        )
        await log.push(frame)
        if tool is None:
            raise BeamError("BEM-089", call.name)
        key = (call.name, compact_json(call.args))
        if seen is not None and key in seen:
            value = {"repeated_call": REPEATED_CALL, "result": seen[key]}
        else:
            try:
                value = await tool.invoke(call.args, input)
            except BeamError as error:
                if error.code not in self.recoverable_errors:
                    raise
                value = {"error": error.to_json()}  # the model is told, with the code, and carries on
            if seen is not None:
                if call.name in READ_ONLY_TOOLS:
                    seen[key] = value
                else:
                    seen.clear()
        result_text = compact_json(value)
        function = {"name": call.name, "arguments": compact_json(call.args)}
        messages.append(
            {"role": "assistant", "tool_calls": [{"id": call.id, "type": "function", "function": function}]}
        )
        messages.append({"role": "tool", "tool_call_id": call.id, "content": result_text})
        return ToolCallRecord(tool_name=call.name, args=call.args, tool_call_id=call.id, result=result_text)

    async def _resume(self, input: AgentInput, log: FrameLog, headers: FrameHeaders, started: float) -> None:
        """Run the approved actions (`approved_actions`): one done frame listing each tool's result."""
        lines, records = await run_approved(self._tools, input)
        result = self._result(input, "\n".join(lines), records, TokenUsage(), None, started)
        await log.push(done_frame(result, headers))

    def _result(
        self,
        input: AgentInput,
        text: str,
        records: list[ToolCallRecord],
        usage: TokenUsage,
        model: str | None,
        started: float,
        *,
        action_required: list[dict[str, Any]] | None = None,
        stopped: str | None = None,
    ) -> AgentResult:
        """A done result; it is interrupted exactly when actions wait for approval."""
        return AgentResult(
            content=[ContentPart.text_part(text)],
            agent_name=self.name,
            model_used=model,
            session_id=input.session_id,
            request_id=input.request_id,
            interaction_id=input.interaction_id,
            token_usage=usage,
            tool_calls=list(records),
            latency_ms=(time.perf_counter() - started) * 1000.0,
            interrupted=action_required is not None,
            action_required=action_required,
            metadata={"stopped": stopped} if stopped is not None else None,
        )
