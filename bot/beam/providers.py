"""The hosted providers a key can name, and what each one's OpenAI-compatible endpoint takes (issue 42).

A maintainer who already pays for a model has its provider's key in the environment under the
provider's own name (`OPENAI_API_KEY`, `ANTHROPIC_API_KEY`...). When none of the seed's variables
(`BEAM_API_KEY`, `GFS_BEAM_API_KEY`, `NVIDIA_API_KEY`) is set, that key is read, with the provider's
base URL and a default model; `BEAM_API_BASE_URL` and `BEAM_MODEL` still win (`model_env`). With no
key at all, `OLLAMA_HOST` names a local Ollama, which reads none (`OLLAMA`). Azure
OpenAI's key comes with its resource's endpoint, and its deployment URLs want the key in another
header and an API version in the query: `endpoint` says, for any base URL, where a request goes and
which header carries the key, so the client and the model check cannot differ on it.

`takes_extra_body` says whether the endpoint is known to take the seed's extra body
(`chat_template_kwargs`, a field of llama.cpp's and vLLM's chat templates). The hosted APIs here do
not: OpenAI, Azure OpenAI and Gemini refuse an unknown field with a 400, so the seed's default would
end every run in BEM-084. An endpoint that is not in this table gets the seed's default until it
refuses it (`request_fields`). The table in docs/models.md says, per provider, what is accepted,
refused and ignored, from each provider's documentation.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit


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
    # The variable that says where the endpoint is, for a provider with one per customer (Azure).
    endpoint_var: str = ""

    @property
    def short(self) -> str:
        """The name the Action's `provider` input takes: the first word, in lower case."""
        return self.name.split()[0].lower()


# Azure OpenAI has one endpoint per resource and a deployment name for a model: its key
# (AZURE_OPENAI_API_KEY) is read with AZURE_OPENAI_ENDPOINT, the variables Microsoft's SDKs read, and
# BEAM_MODEL names the deployment (by default the one named as the default model, as the portal names
# a deployment). Its endpoint refuses what OpenAI's refuses. It is looked for last: it needs two
# variables, and a key of another provider set beside them is the one meant.
AZURE = Provider(
    "Azure OpenAI",
    "AZURE_OPENAI_API_KEY",
    "",
    "gpt-4.1-mini",
    (".openai.azure.com", ".cognitiveservices.azure.com", ".services.ai.azure.com"),
    endpoint_var="AZURE_OPENAI_ENDPOINT",
)

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
    AZURE,
)
# Azure's deployment URLs (`/openai/deployments/NAME/chat/completions`) take the key in an `api-key`
# header and need an `api-version` query; this is the newest generally available one when this was
# written. AZURE_OPENAI_API_VERSION (as Microsoft's SDKs name it) picks another.
AZURE_API_VERSION = "2024-10-21"
AZURE_VERSION_VAR = "AZURE_OPENAI_API_VERSION"
_DEPLOYMENTS = "/openai/deployments/"
KEY_VARS: tuple[str, ...] = tuple(provider.key_var for provider in PROVIDERS)

# Ollama, on the maintainer's machine or another of theirs: `OLLAMA_HOST`, which Ollama's own CLI
# reads, says where it listens. It reads no key and serves the models pulled into it, so it has no
# key variable and no default model (BEAM_MODEL names one). It is not in PROVIDERS: it is looked for
# after every key (OLLAMA_HOST stays set in the shell of someone who has Ollama, and a key set beside
# it is the one meant), and the Action's runner has no Ollama to name. Its endpoint ignores the seed's
# extra body, as every field it does not know.
OLLAMA_HOST_VAR = "OLLAMA_HOST"
OLLAMA = Provider("Ollama", "", "", "", (), takes_extra_body=True, endpoint_var=OLLAMA_HOST_VAR)
OLLAMA_PORT = "11434"
# Sent as the key, which Ollama does not read: an empty bearer would be a malformed header.
OLLAMA_KEY = "ollama"


def provider_of(base_url: str) -> Provider | None:
    """The known provider whose endpoint `base_url` is, by its host (or, for Azure, its deployment
    path, which a proxy in front of it keeps); None for any other server."""
    parts = urlsplit(base_url)
    if _DEPLOYMENTS in parts.path:
        return AZURE
    host = (parts.hostname or "").lower()
    for provider in PROVIDERS:
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
    """The provider a short name says (`openai`, `anthropic`, `gemini`, `openrouter`, `groq`,
    `azure`, as the GitHub Action's `provider` input takes it); None for any other word."""
    wanted = name.strip().lower()
    return next((p for p in PROVIDERS if p.short == wanted), None)


NAMES: tuple[str, ...] = tuple(provider.short for provider in PROVIDERS)


def azure_base_url(endpoint: str, deployment: str, api_version: str | None) -> str:
    """The base URL of one Azure deployment: `{endpoint}/openai/deployments/{deployment}`, with the
    API version as its query. An endpoint that already has a path under /openai (a deployment's URL,
    or the newer `/openai/v1`, which takes no version) is taken as it is."""
    endpoint = endpoint.strip().rstrip("/")
    if "/openai/" in f"{endpoint}/":
        return endpoint
    version = urlencode({"api-version": api_version or AZURE_API_VERSION})
    return f"{endpoint}{_DEPLOYMENTS}{deployment}?{version}"


def ollama_base_url(host: str) -> str:
    """The OpenAI-compatible base URL of the Ollama `host` names, read as Ollama reads OLLAMA_HOST:
    `127.0.0.1:11434`, `host` (port 11434), `:11434` (this machine), `http://host:11434` or
    `https://host/prefix` (ports 80 and 443 when a scheme is given without one); then `/v1`."""
    text = host.strip()
    scheme, found, rest = text.partition("://")
    port = OLLAMA_PORT
    if not found:
        scheme, rest = "http", text
    elif scheme in ("http", "https"):
        port = "80" if scheme == "http" else "443"
    hostport, _, path = rest.partition("/")
    if hostport.count(":") > 1 and not hostport.startswith("["):
        hostport = f"[{hostport}]"  # a bare IPv6 address (`::1`), which Ollama takes as a host
    parts = urlsplit(f"//{hostport}")
    try:
        named_port = parts.port
    except ValueError:  # not a port Ollama would take either: its default, as Ollama does
        named_port = None
    name = parts.hostname or "127.0.0.1"
    name = f"[{name}]" if ":" in name else name
    prefix = f"/{path.strip('/')}" if path.strip("/") else ""
    return f"{scheme}://{name}:{named_port or port}{prefix}/v1"


def endpoint(base_url: str, api_key: str, path: str) -> tuple[str, dict[str, str]]:
    """The URL of `path` (`chat/completions`, `models`) under `base_url`, and the header its key goes
    in. Everywhere `Authorization: Bearer`, except Azure's deployment URLs: an `api-key` header, and
    an `api-version` query that a base URL without one is given (a query of the base URL stays a query)."""
    parts = urlsplit(base_url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    headers = {"Authorization": f"Bearer {api_key}"}
    if _DEPLOYMENTS in parts.path:
        headers = {"api-key": api_key}
        if not any(name == "api-version" for name, _ in query):
            query.append(("api-version", AZURE_API_VERSION))
    url = urlunsplit((parts.scheme, parts.netloc, f"{parts.path.rstrip('/')}/{path}", urlencode(query), ""))
    return url, headers
