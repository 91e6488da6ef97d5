"""The hosted providers a key can name, and what each one's OpenAI-compatible endpoint takes (issue 42).

A maintainer who already pays for a model has its provider's key in the environment under the
provider's own name (`OPENAI_API_KEY`, `ANTHROPIC_API_KEY`...). When none of the seed's variables
(`BEAM_API_KEY`, `GFS_BEAM_API_KEY`, `NVIDIA_API_KEY`) is set, that key is read, with the provider's
base URL and a default model; `BEAM_API_BASE_URL` and `BEAM_MODEL` still win (`model_env`).

`takes_extra_body` says whether the endpoint is known to take the seed's extra body
(`chat_template_kwargs`, a field of llama.cpp's and vLLM's chat templates). The hosted APIs here do
not: OpenAI, Azure OpenAI and Gemini refuse an unknown field with a 400, so the seed's default would
end every run in BEM-084. An endpoint that is not in this table gets the seed's default until it
refuses it (`request_fields`). The table in docs/models.md says, per provider, what is accepted,
refused and ignored, from each provider's documentation.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit


@dataclass(frozen=True)
class Provider:
    """One hosted provider: the variable its key lives in, where its endpoint is, a default model."""

    name: str
    key_var: str
    base_url: str
    default_model: str
    # Hosts (or host suffixes, starting with ".") whose endpoint this is.
    hosts: tuple[str, ...]
    takes_extra_body: bool = False


# In the order a key is looked for when several are set. Default models: one each provider lists as
# current for general use and takes tools with, at a moderate price (a review is many calls).
PROVIDERS: tuple[Provider, ...] = (
    Provider("OpenAI", "OPENAI_API_KEY", "https://api.openai.com/v1", "gpt-4.1-mini", ("api.openai.com",)),
    Provider(
        "Anthropic",
        "ANTHROPIC_API_KEY",
        "https://api.anthropic.com/v1",
        "claude-sonnet-4-5",
        ("api.anthropic.com",),
    ),
    Provider(
        "Gemini",
        "GEMINI_API_KEY",
        "https://generativelanguage.googleapis.com/v1beta/openai",
        "gemini-2.5-flash",
        ("generativelanguage.googleapis.com",),
    ),
    Provider(
        "OpenRouter",
        "OPENROUTER_API_KEY",
        "https://openrouter.ai/api/v1",
        "openai/gpt-4.1-mini",
        ("openrouter.ai",),
    ),
    Provider(
        "Groq", "GROQ_API_KEY", "https://api.groq.com/openai/v1", "llama-3.3-70b-versatile", ("api.groq.com",)
    ),
)
# Azure OpenAI has one base URL per resource and a deployment name for a model, so a key alone
# cannot say where to go: it is known by its host only (BEAM_API_KEY, BEAM_API_BASE_URL and
# BEAM_MODEL name it). Its endpoint refuses what OpenAI's refuses.
AZURE = Provider(
    "Azure OpenAI",
    "",
    "",
    "",
    (".openai.azure.com", ".cognitiveservices.azure.com", ".services.ai.azure.com"),
)
KEY_VARS: tuple[str, ...] = tuple(provider.key_var for provider in PROVIDERS)


def provider_of(base_url: str) -> Provider | None:
    """The known provider whose endpoint `base_url` is, by its host; None for any other server."""
    host = (urlsplit(base_url).hostname or "").lower()
    for provider in (*PROVIDERS, AZURE):
        for known in provider.hosts:
            if host == known or (known.startswith(".") and host.endswith(known)):
                return provider
    return None


def takes_extra_body(base_url: str) -> bool:
    """Whether to send the seed's extra body to this endpoint: yes unless it is a known provider
    that does not take it (an unknown server keeps it until it refuses it)."""
    provider = provider_of(base_url)
    return provider is None or provider.takes_extra_body


def by_name(name: str) -> Provider | None:
    """The provider a short name says (`openai`, `anthropic`, `gemini`, `openrouter`, `groq`: its name
    in lower case, as the GitHub Action's `provider` input takes it); None for any other word."""
    wanted = name.strip().lower()
    return next((p for p in PROVIDERS if p.name.lower() == wanted), None)


NAMES: tuple[str, ...] = tuple(provider.name.lower() for provider in PROVIDERS)
