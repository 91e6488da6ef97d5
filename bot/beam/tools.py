"""`Tool`, `ToolSpec` and `json_params`: what a tool looks like to the runner and to the model."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from bot.beam.types import AgentInput


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """What the model sees of a tool, plus `confirm_required`, which it never sees.

    `confirm_required` makes the runner stop and ask a person before the tool runs.
    """

    name: str
    description: str
    confirm_required: bool = False
    parameters: Any = field(default=None)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "confirm_required": self.confirm_required,
            "parameters": self.parameters,
        }


def json_params(
    properties: dict[str, Any] | None = None, required: list[str] | None = None
) -> dict[str, Any]:
    """A JSON Schema object for a tool's arguments, keys in the original's order."""
    return {"type": "object", "properties": dict(properties or {}), "required": list(required or [])}


class Tool(ABC):
    """A capability the runner can call on the model's behalf.

    `invoke` gets the arguments the model sent (any JSON value) and the request; it returns a JSON
    value or raises `BeamError`. An error ends the run: it is never shown to the model.
    """

    @abstractmethod
    def spec(self) -> ToolSpec: ...

    @abstractmethod
    async def invoke(self, args: Any, input: AgentInput) -> Any: ...


ToolFunction = Callable[[Any, AgentInput], Awaitable[Any]]


class FunctionTool(Tool):
    """A tool made from a spec and an async function, for hosts that need no class of their own."""

    def __init__(self, spec: ToolSpec, function: ToolFunction) -> None:
        self._spec = spec
        self._function = function

    def spec(self) -> ToolSpec:
        return self._spec

    async def invoke(self, args: Any, input: AgentInput) -> Any:
        return await self._function(args, input)


def string_arg(args: Any, name: str) -> str:
    """A required string argument, or BEM-108 naming it (the original's check)."""
    from bot.beam.errors import BeamError

    value = args.get(name) if isinstance(args, dict) else None
    if not isinstance(value, str):
        raise BeamError("BEM-108", {"detail": name})
    return value
