"""`ModelRouter`: picks the `ModelConfig` an invoke runs with (riverbeam-reference.md section 8.4).

Strategies narrow the candidate list in order (modality, capability, cost) and routing stops as soon
as the list is empty; then the configured default model is the last resort, else BEM-041. An
override naming a known model bypasses every strategy; an unknown override is ignored, as before.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from bot.beam.errors import BeamError
from bot.beam.registry import modality_set_text
from bot.beam.types import AgentInput, AgentMetadata, Modality, ModelConfig, ModelProvider

DEV_MODEL_NAME = "gpt-4o-mini"


def dev_model() -> ModelConfig:
    """The one built-in model: text only, so any image, audio or video input fails routing."""
    return ModelConfig(
        name=DEV_MODEL_NAME,
        provider=ModelProvider.OPENAI,
        provider_config={},
        modalities=[Modality.TEXT],
        cost_per_1k_tokens=0.0,
        max_tokens=4096,
        extra={},
    )


@dataclass(frozen=True, slots=True)
class RouteQuery:
    """What the strategies may look at for one invoke."""

    modalities: frozenset[Modality]
    capabilities: tuple[str, ...]
    agent_tags: tuple[str, ...]

    @classmethod
    def of(cls, input: AgentInput, agent: AgentMetadata) -> RouteQuery:
        wanted = input.meta("capabilities")
        capabilities = tuple(c for c in wanted if isinstance(c, str)) if isinstance(wanted, list) else ()
        return cls(frozenset(input.modalities()), capabilities, tuple(agent.tags))


Strategy = Callable[[list[ModelConfig], RouteQuery], list[ModelConfig]]


def by_modality(models: list[ModelConfig], query: RouteQuery) -> list[ModelConfig]:
    return [m for m in models if query.modalities <= set(m.modalities)]


def by_capability(models: list[ModelConfig], query: RouteQuery) -> list[ModelConfig]:
    """Requested capabilities, or else the agent's tags that some candidate offers (tag routing)."""
    required = set(query.capabilities)
    if not required:
        offered = {c for m in models for c in m.capabilities}
        required = {tag for tag in query.agent_tags if tag in offered}
    return [m for m in models if required <= set(m.capabilities)]


def by_cost(models: list[ModelConfig], query: RouteQuery) -> list[ModelConfig]:
    return sorted(models, key=lambda m: m.cost_per_1k_tokens)


DEFAULT_STRATEGIES: tuple[Strategy, ...] = (by_modality, by_capability, by_cost)


class ModelRouter:
    """Routes over a fixed model list; names must be unique (BEM-042)."""

    def __init__(
        self,
        models: Sequence[ModelConfig] | None = None,
        *,
        default_model: str | None = None,
        strategies: Sequence[Strategy] = DEFAULT_STRATEGIES,
    ) -> None:
        self._models = list(models) if models is not None else [dev_model()]
        names: set[str] = set()
        for model in self._models:
            if model.name in names:
                raise BeamError("BEM-042", f"duplicate model name={model.name}")
            names.add(model.name)
        self.default_model = default_model
        self._strategies = tuple(strategies)

    @property
    def models(self) -> list[ModelConfig]:
        return list(self._models)

    def find(self, name: str | None) -> ModelConfig | None:
        if name is None:
            return None
        return next((m for m in self._models if m.name == name), None)

    def resolve(self, input: AgentInput, agent: AgentMetadata) -> ModelConfig:
        override = self.find(input.model_override)
        if override is not None:
            return override
        query = RouteQuery.of(input, agent)
        candidates = list(self._models)
        for strategy in self._strategies:
            if not candidates:
                break
            candidates = strategy(candidates, query)
        if candidates:
            return candidates[0]
        fallback = self.find(self.default_model)
        if fallback is not None:
            return fallback
        raise BeamError("BEM-041", f"modalities={modality_set_text(query.modalities)}")
