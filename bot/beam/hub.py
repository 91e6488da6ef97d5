"""`RiverBeam`: the hub that registers agents and runs the invoke pipeline (reference section 8).

One invoke: route (BEM-020, then BEM-041, then BEM-040), claim the answered actions of a resume,
load memory, dispatch with frames published as they happen, take the terminal result, then persist
the turn and any pending actions. Compared with the original: the latest user message reaches the
model once (history is loaded before the human turn is written), a resume runs only the stored
action, and frames reach `on_frame` while the agent runs instead of after it.
Security, quota, audit and knowledge layers of the original are not part of this port.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from bot.beam.actions import ActionStore, InMemoryActionStore, claim_actions, pending_actions_from
from bot.beam.agent import Agent, EchoAgent, FrameSink
from bot.beam.memory import (
    MESSAGE_KIND,
    BoundRememberTool,
    InMemoryMemoryStore,
    MemoryItem,
    MemoryScope,
    MemoryStore,
    memory_scopes,
    trim_history,
)
from bot.beam.registry import AgentRegistry, human_message_from_input, terminal_result
from bot.beam.router import ModelRouter
from bot.beam.tools import Tool
from bot.beam.types import (
    AgentContext,
    AgentInput,
    AgentMessage,
    AgentMetadata,
    AgentResult,
    InvokeRequest,
    ModelConfig,
    StreamChunk,
    text_of,
)


@dataclass(frozen=True, slots=True)
class InvokeOutcome:
    """Every frame the agent produced, and the result of its terminal `done` frame."""

    frames: list[StreamChunk]
    result: AgentResult


class RiverBeam:
    """The framework's entry point; stores are injectable so a host can make them durable."""

    def __init__(
        self,
        *,
        models: Sequence[ModelConfig] | None = None,
        default_model: str | None = None,
        router: ModelRouter | None = None,
        memory: MemoryStore | None = None,
        action_store: ActionStore | None = None,
    ) -> None:
        self._registry = AgentRegistry()
        self.router = router if router is not None else ModelRouter(models, default_model=default_model)
        self.memory: MemoryStore = memory if memory is not None else InMemoryMemoryStore()
        self.actions: ActionStore = action_store if action_store is not None else InMemoryActionStore()

    def register_agent(self, agent: Agent) -> None:
        self._registry.register(agent)

    def register_echo_agent(self, name: str) -> None:
        self._registry.register(EchoAgent(name))

    def list_agents(self) -> list[AgentMetadata]:
        return self._registry.list_agents()

    def registry(self) -> AgentRegistry:
        return self._registry

    @staticmethod
    def terminal_result(frames: Sequence[StreamChunk]) -> AgentResult:
        return terminal_result(frames)

    async def memory_remember(self, scope_name: str, scope_id: str, kind: str, text: str) -> str:
        """Store a fact; it reaches an agent only when an invoke lists its scope in `memory_scopes`."""
        item = MemoryItem(scope=MemoryScope(scope_name, scope_id).key, kind=kind, text=text)
        await self.memory.append(item)
        return item.id

    async def memory_forget(self, item_id: str) -> bool:
        return await self.memory.forget(item_id)

    def remember_tool(self, scope: MemoryScope) -> Tool:
        """A working `remember` tool that stores through this hub, always at `scope`.

        The host chooses the scope, never the model (issue 28): give each task its own, and list it
        in `memory_scopes` only for invokes of that task.
        """
        return BoundRememberTool(self.memory_remember, scope)

    @staticmethod
    def to_agent_input(request: InvokeRequest) -> AgentInput:
        """A fresh `run_id` on every invoke; a new `interaction_id` when the request has none."""
        return AgentInput(
            content=list(request.content),
            session_id=request.session_id,
            interaction_id=request.interaction_id or uuid.uuid4(),
            request_id=request.request_id,
            run_id=uuid.uuid4(),
            agent_name=request.agent_name,
            model_override=request.model_override,
            metadata=request.metadata,
            auth_context=request.auth_context,
            stream=request.stream,
            actions=request.actions,
        )

    async def invoke(self, request: InvokeRequest, *, on_frame: FrameSink | None = None) -> InvokeOutcome:
        input = self.to_agent_input(request)
        name = request.agent_name
        metadata = self._registry.get_metadata(name)
        model = self.router.resolve(input, metadata)
        self._registry.check_modalities(metadata, input)

        if input.actions is not None:
            # Checked and claimed before the agent runs; what it receives is built from the store.
            claimed = await claim_actions(
                self.actions, input.actions, session_id=str(input.session_id), agent_name=name
            )
            input = input.model_copy(update={"actions": claimed})

        history = await self._history(input, model)
        if input.actions is None:
            # Written after the history was loaded, so the model sees this message once.
            await self._append_message(input, human_message_from_input(input))
        context = AgentContext(
            session_id=str(input.session_id),
            user_id=input.user_id,
            conversation_history=history,
            model_config_resolved=model,
            metadata=copy.deepcopy(input.metadata),
        )

        frames = await self._dispatch(name, input, context, on_frame)
        result = terminal_result(frames)

        reply = AgentMessage(
            content=list(result.content),
            run_id=str(input.run_id),
            request_id=str(input.request_id) if input.request_id else None,
            interaction_id=str(input.interaction_id) if input.interaction_id else None,
        )
        await self._append_message(input, reply)
        for action in pending_actions_from(result, input, name):
            await self.actions.save(action)
        return InvokeOutcome(frames, result)

    async def _dispatch(
        self, name: str, input: AgentInput, context: AgentContext, on_frame: FrameSink | None
    ) -> list[StreamChunk]:
        """Dispatch, and publish afterwards any returned frame the agent did not emit itself."""
        if on_frame is None:
            return await self._registry.dispatch(name, input, context)
        emitted = 0

        async def sink(frame: StreamChunk) -> None:
            nonlocal emitted
            emitted += 1
            await on_frame(frame)

        frames = await self._registry.dispatch(name, input, context, sink)
        for frame in frames[emitted:]:
            await on_frame(frame)
        return frames

    async def _history(self, input: AgentInput, model: ModelConfig) -> list[AgentMessage]:
        items = await self.memory.load([scope.key for scope in memory_scopes(input)])
        return trim_history([item.as_message() for item in items], model.max_tokens)

    async def _append_message(self, input: AgentInput, message: AgentMessage) -> None:
        scope = MemoryScope.session(input.session_id).key
        text = text_of(message.content, " ")
        await self.memory.append(MemoryItem(scope=scope, kind=MESSAGE_KIND, text=text, message=message))
