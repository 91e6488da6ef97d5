"""What the environment says about the model server: `BEAM_API_KEY`, `BEAM_API_BASE_URL`,
`BEAM_MODEL` and their `GFS_` spellings (riverbeam-reference.md section 4.1), and the settings issues
20 and 30 added (`BEAM_MODEL_TOOLS`, `_TIMEOUT`, `_MAX_TOKENS`, `_TEMPERATURE`, `_STRUCTURED`). A
value that is wrong is BEM-042 at start, naming the variable, rather than a surprise at the first call.

Issue 42: when none of the seed's key variables is set, a provider's own (`OPENAI_API_KEY`,
`ANTHROPIC_API_KEY`...) is read, with that provider's base URL and default model unless
`BEAM_API_BASE_URL` or `BEAM_MODEL` say otherwise (`providers`); `BEAM_MODEL_EXTRA_BODY` replaces the
extra body, as the seed's `with_extra_body` does. Azure's key (`AZURE_OPENAI_API_KEY`) is read with
`AZURE_OPENAI_ENDPOINT`, and `BEAM_MODEL` names the deployment. With no key at all, `OLLAMA_HOST`
names a local Ollama (no key; `BEAM_MODEL` is required, as Ollama serves only what was pulled).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bot.beam import providers, text_protocol
from bot.beam.errors import BeamError
from bot.beam.text_protocol import ToolsMode

DEFAULT_BASE_URL = "https://integrate.api.nvidia.com/v1"
DEFAULT_MODEL = "deepseek-ai/deepseek-v4-pro-0813"
DEFAULT_MAX_TOKENS = 4096
_KEY_VARS = ("BEAM_API_KEY", "GFS_BEAM_API_KEY", "NVIDIA_API_KEY")
# The asymmetry (`BEAM_API_BASE_URL` against `GFS_BEAM_BASE_URL`) is the original's.
_BASE_URL_VARS = ("BEAM_API_BASE_URL", "GFS_BEAM_BASE_URL")
_MODEL_VARS = ("BEAM_MODEL", "GFS_BEAM_MODEL")
_TOOLS_VAR = "BEAM_MODEL_TOOLS"
_STRUCTURED_VAR = "BEAM_MODEL_STRUCTURED"
# Issue 20: a small model on a small machine needs more than a minute a call, and fewer tokens.
_TIMEOUT_VAR = "BEAM_MODEL_TIMEOUT"
_MAX_TOKENS_VAR = "BEAM_MODEL_MAX_TOKENS"
DEFAULT_TIMEOUT = 60.0
_TEMPERATURE_VAR = "BEAM_MODEL_TEMPERATURE"
MAX_TEMPERATURE = 2.0  # OpenAI's bound; llama.cpp and vLLM take the same range
_EXTRA_BODY_VAR = "BEAM_MODEL_EXTRA_BODY"


@dataclass(frozen=True)
class ModelEnv:
    """A model server as the environment names it."""

    api_key: str
    base_url: str
    model: str
    tools_mode: ToolsMode
    timeout: float
    temperature: float | None
    structured: bool
    max_tokens: int
    # The variable the key was read from, and the provider that variable names (None: the seed's);
    # OLLAMA_HOST for Ollama, which reads no key.
    key_var: str = "BEAM_API_KEY"
    provider: providers.Provider | None = None
    # BEAM_MODEL_EXTRA_BODY as JSON; None when unset (the client's default, adapted per provider).
    extra_body: dict[str, Any] | None = None


def read_model_env(env: Mapping[str, str]) -> ModelEnv | None:
    """The server `env` names, or None without a key (an empty BEAM_API_KEY included) or OLLAMA_HOST."""
    found = _key(env)
    if found is None:
        return None
    key_var, api_key, provider = found
    base_url = _first_set(env, _BASE_URL_VARS)
    model = _first_set(env, _MODEL_VARS)
    if provider is providers.OLLAMA and not model:
        raise BeamError(
            "BEM-042",
            f"{providers.OLLAMA_HOST_VAR} is set, so BEAM_MODEL must name a model Ollama has pulled "
            "(`ollama list` shows them), such as qwen2.5-coder:7b",
        )
    if provider is not None:
        model = provider.default_model if model is None else model
        base_url = _provider_base_url(env, provider, model) if base_url is None else base_url
    tools_mode = text_protocol.parse_mode(env.get(_TOOLS_VAR))
    if tools_mode is None:
        wrong = env.get(_TOOLS_VAR)
        raise BeamError("BEM-042", f"{_TOOLS_VAR} must be auto, native or text, not {wrong!r}")
    return ModelEnv(
        api_key=api_key,
        base_url=DEFAULT_BASE_URL if base_url is None else base_url,
        model=DEFAULT_MODEL if model is None else model,
        tools_mode=tools_mode,
        timeout=_positive(env, _TIMEOUT_VAR, DEFAULT_TIMEOUT),
        temperature=_temperature(env),
        structured=_structured(env),
        max_tokens=int(_positive(env, _MAX_TOKENS_VAR, DEFAULT_MAX_TOKENS, whole=True)),
        key_var=key_var,
        provider=provider,
        extra_body=_extra_body(env),
    )


def _key(env: Mapping[str, str]) -> tuple[str, str, providers.Provider | None] | None:
    """The key, its variable and the provider it names: the seed's chain first (where an empty
    BEAM_API_KEY stops the search, as in the original), then each provider's own variable."""
    for name in _KEY_VARS:
        seed = _first_set(env, (name,))
        if seed is not None:
            return (name, seed, None) if seed else None
    for provider in providers.PROVIDERS:
        own = _first_set(env, (provider.key_var,))
        if own:
            return provider.key_var, own, provider
    host = _first_set(env, (providers.OLLAMA_HOST_VAR,))
    if host and host.strip():  # no key anywhere: a local Ollama, which reads none
        return providers.OLLAMA_HOST_VAR, providers.OLLAMA_KEY, providers.OLLAMA
    return None


def _provider_base_url(env: Mapping[str, str], provider: providers.Provider, model: str) -> str:
    """The provider's base URL; for one whose endpoint is the customer's own (Azure), the URL of
    the deployment `model` names at the endpoint its variable holds."""
    if not provider.endpoint_var:
        return provider.base_url
    if provider is providers.OLLAMA:
        return providers.ollama_base_url(env.get(provider.endpoint_var) or "")
    endpoint = (env.get(provider.endpoint_var) or "").strip()
    if not endpoint.startswith(("https://", "http://")):
        raise BeamError(
            "BEM-042",
            f"{provider.key_var} is set, so {provider.endpoint_var} must be the resource's endpoint "
            f"(https://RESOURCE.openai.azure.com), not {endpoint[:80]!r}",
        )
    return providers.azure_base_url(endpoint, model, env.get(providers.AZURE_VERSION_VAR))


def _extra_body(env: Mapping[str, str]) -> dict[str, Any] | None:
    """BEAM_MODEL_EXTRA_BODY: a JSON object merged into every request (`{}`: nothing extra)."""
    text = (env.get(_EXTRA_BODY_VAR) or "").strip()
    if not text:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raise BeamError("BEM-042", f"{_EXTRA_BODY_VAR} must be a JSON object, such as {{}}, not {text!r}")
    return value


def _first_set(env: Mapping[str, str], names: tuple[str, ...]) -> str | None:
    """The first variable that is set, even to "": the original falls back only when one is unset.

    A value that is not valid UTF-8 (Python keeps such bytes as lone surrogates) counts as unset,
    as Rust's `std::env::var` reports it as an error.
    """
    for name in names:
        value = env.get(name)
        if value is None:
            continue
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            continue
        return value
    return None


def _positive(env: Mapping[str, str], name: str, default: float, *, whole: bool = False) -> float:
    """A positive number from `name` (seconds, tokens), the default when unset or empty."""
    text = (env.get(name) or "").strip()
    if not text:
        return default
    try:
        value = int(text) if whole else float(text)
    except ValueError:
        value = 0
    if not (value > 0 and math.isfinite(value)):
        kind = "a whole number" if whole else "a number"
        raise BeamError("BEM-042", f"{name} must be {kind} above 0, not {text!r}")
    return value


def _temperature(env: Mapping[str, str]) -> float | None:
    """BEAM_MODEL_TEMPERATURE: None when unset or empty, else a number from 0 to 2."""
    text = (env.get(_TEMPERATURE_VAR) or "").strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (0.0 <= value <= MAX_TEMPERATURE):
        raise BeamError("BEM-042", f"{_TEMPERATURE_VAR} must be a number from 0 to 2, not {text!r}")
    return value


def _structured(env: Mapping[str, str]) -> bool:
    """`BEAM_MODEL_STRUCTURED`: `auto` (the default: asked, and not again once the server refuses)
    or `off` (never asked: for a server that accepts the field but answers badly under it)."""
    value = (env.get(_STRUCTURED_VAR) or "auto").strip().lower()
    if value not in ("auto", "off"):
        raise BeamError("BEM-042", f"{_STRUCTURED_VAR} must be auto or off, not {value!r}")
    return value == "auto"
