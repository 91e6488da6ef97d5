"""`AgentRegistry`: agents by name, the modality check before dispatch, and `terminal_result`.

Behaviour of riverbeam-reference.md section 8.1, except that `list_agents` keeps registration order
(the original's order came from a hash map and changed between runs).
"""

from __future__ import annotations

from collections.abc import Iterable

from bot.beam.agent import Agent, FrameSink
from bot.beam.errors import BeamError
from bot.beam.types import (
    AgentContext,
    AgentInput,
    AgentMessage,
    AgentMessageRole,
    AgentMetadata,
    AgentResult,
    Modality,
    StreamChunk,
    StreamChunkType,
)

_MODALITY_ORDER = list(Modality)


def modality_set_text(modalities: Iterable[Modality], brackets: str = "{}") -> str:
    """Modalities as the original's Rust debug text (`{Image, Text}`), in a stable order."""
    wanted = set(modalities)
    names = ", ".join(m.value.capitalize() for m in _MODALITY_ORDER if m in wanted)
    return f"{brackets[0]}{names}{brackets[1]}"


class AgentRegistry:
    """Registered agents keyed by `metadata().name`; registering a name again replaces the agent.

    A replaced agent keeps the position of the first registration, so `list_agents` is stable.
    """

    def __init__(self) -> None:
        self._agents: dict[str, Agent] = {}

    def register(self, agent: Agent) -> None:
        self._agents[agent.metadata().name] = agent

    def get(self, name: str) -> Agent | None:
        return self._agents.get(name)

    def get_metadata(self, name: str) -> AgentMetadata:
        agent = self._agents.get(name)
        if agent is None:
            raise BeamError("BEM-020", name)
        return agent.metadata()

    def list_agents(self) -> list[AgentMetadata]:
        return [agent.metadata() for agent in self._agents.values()]

    @staticmethod
    def check_modalities(metadata: AgentMetadata, input: AgentInput) -> None:
        """BEM-040 unless every input modality is among the agent's supported ones."""
        supported = set(metadata.supported_modalities)
        unsupported = input.modalities() - supported
        if unsupported:
            detail = (
                f"Agent '{metadata.name}' does not support modalities: "
                f"{modality_set_text(unsupported, '[]')}. Supported: {modality_set_text(supported)}"
            )
            raise BeamError("BEM-040", {"detail": detail})

    async def dispatch(
        self, name: str, input: AgentInput, context: AgentContext, emit: FrameSink | None = None
    ) -> list[StreamChunk]:
        """Run the agent after the modality check; `emit` receives frames as the agent makes them."""
        agent = self._agents.get(name)
        if agent is None:
            raise BeamError("BEM-021", name)
        self.check_modalities(agent.metadata(), input)
        return await agent.stream(input, context, emit)

    async def dispatch_result(
        self, name: str, input: AgentInput, context: AgentContext, emit: FrameSink | None = None
    ) -> AgentResult:
        return terminal_result(await self.dispatch(name, input, context, emit))


def terminal_result(frames: Iterable[StreamChunk]) -> AgentResult:
    """The result of the first `done` frame; BEM-087 for an earlier `error`, BEM-086 for none."""
    for frame in frames:
        if frame.type is StreamChunkType.DONE:
            if frame.result is None:
                break
            return frame.result
        if frame.type is StreamChunkType.ERROR:
            raise BeamError("BEM-087", frame.error or "stream error")
    raise BeamError("BEM-086")


def human_message_from_input(input: AgentInput) -> AgentMessage:
    """The human turn as memory keeps it: every input part, not only the text."""
    return AgentMessage(role=AgentMessageRole.HUMAN, content=list(input.content))
