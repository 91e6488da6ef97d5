"""What the environment says about the model server (bot/beam/model_env.py): every setting read in
one place, and a wrong value refused at start with the variable's name."""

from __future__ import annotations

import pytest

from bot.beam import providers
from bot.beam.errors import BeamError
from bot.beam.model_env import DEFAULT_BASE_URL, DEFAULT_MAX_TOKENS, DEFAULT_TIMEOUT, read_model_env
from bot.beam.openai_client import OpenAiCompatible


def test_every_setting_is_read_and_the_unset_ones_take_their_defaults() -> None:
    said = read_model_env(
        {
            "GFS_BEAM_API_KEY": "k",
            "BEAM_MODEL": "qwen",
            "BEAM_MODEL_TOOLS": "text",
            "BEAM_MODEL_TEMPERATURE": "0.3",
            "BEAM_MODEL_STRUCTURED": "off",
            "BEAM_MODEL_MAX_TOKENS": "512",
        }
    )
    assert said is not None
    assert (said.api_key, said.base_url, said.model, said.tools_mode) == (
        "k",
        DEFAULT_BASE_URL,
        "qwen",
        "text",
    )
    assert (said.temperature, said.structured, said.max_tokens) == (0.3, False, 512)
    assert said.timeout == DEFAULT_TIMEOUT
    said = read_model_env({"BEAM_API_KEY": "k"})
    assert said is not None and said.max_tokens == DEFAULT_MAX_TOKENS and said.structured
    assert said.temperature is None  # the server's own, except for reviews (openai_client.py)
    assert read_model_env({"BEAM_API_KEY": ""}) is None


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("BEAM_MODEL_TEMPERATURE", "3"),
        ("BEAM_MODEL_TIMEOUT", "-1"),
        ("BEAM_MODEL_MAX_TOKENS", "1.5"),
        ("BEAM_MODEL_STRUCTURED", "yes"),
        ("BEAM_MODEL_TOOLS", "sometimes"),
    ],
)
def test_a_wrong_value_is_bem_042_naming_the_variable(name: str, value: str) -> None:
    with pytest.raises(BeamError) as raised:
        read_model_env({"BEAM_API_KEY": "k", name: value})
    assert raised.value.code == "BEM-042" and name in (raised.value.detail or "")


# Issue 42: a provider's own key finds its provider.


@pytest.mark.parametrize(
    ("variable", "base_url", "model"),
    [
        ("OPENAI_API_KEY", "https://api.openai.com/v1", "gpt-4.1-mini"),
        ("ANTHROPIC_API_KEY", "https://api.anthropic.com/v1", "claude-sonnet-4-5"),
        ("GEMINI_API_KEY", "https://generativelanguage.googleapis.com/v1beta/openai", "gemini-2.5-flash"),
        ("OPENROUTER_API_KEY", "https://openrouter.ai/api/v1", "openai/gpt-4.1-mini"),
        ("GROQ_API_KEY", "https://api.groq.com/openai/v1", "llama-3.3-70b-versatile"),
    ],
)
def test_a_providers_own_key_brings_its_base_url_and_model(variable: str, base_url: str, model: str) -> None:
    said = read_model_env({variable: "k"})
    assert said is not None
    assert (said.api_key, said.base_url, said.model, said.key_var) == ("k", base_url, model, variable)
    assert said.provider is not None and said.provider.key_var == variable
    # BEAM_API_BASE_URL and BEAM_MODEL still win.
    said = read_model_env({variable: "k", "BEAM_API_BASE_URL": "http://proxy/v1", "BEAM_MODEL": "mine"})
    assert said is not None and (said.base_url, said.model) == ("http://proxy/v1", "mine")


def test_the_seeds_variables_come_before_a_providers_and_an_empty_one_still_means_none() -> None:
    said = read_model_env({"BEAM_API_KEY": "beam", "OPENAI_API_KEY": "openai"})
    assert said is not None and (said.api_key, said.base_url, said.provider) == (
        "beam",
        DEFAULT_BASE_URL,
        None,
    )
    said = read_model_env({"NVIDIA_API_KEY": "nv", "OPENAI_API_KEY": "openai"})
    assert said is not None and said.key_var == "NVIDIA_API_KEY"
    # The original's quirk: an empty BEAM_API_KEY stops the search (the echo model, on purpose).
    assert read_model_env({"BEAM_API_KEY": "", "OPENAI_API_KEY": "openai"}) is None
    # Several providers' keys: the first in the documented order; an empty one is skipped.
    said = read_model_env({"GROQ_API_KEY": "g", "ANTHROPIC_API_KEY": "a", "OPENAI_API_KEY": ""})
    assert said is not None and said.key_var == "ANTHROPIC_API_KEY"


def test_the_extra_body_is_json_and_a_wrong_one_is_bem_042() -> None:
    said = read_model_env({"BEAM_API_KEY": "k", "BEAM_MODEL_EXTRA_BODY": '{"reasoning_effort": "low"}'})
    assert said is not None and said.extra_body == {"reasoning_effort": "low"}
    said = read_model_env({"BEAM_API_KEY": "k", "BEAM_MODEL_EXTRA_BODY": " "})
    assert said is not None and said.extra_body is None
    for wrong in ("[1]", "{nope"):
        with pytest.raises(BeamError) as raised:
            read_model_env({"BEAM_API_KEY": "k", "BEAM_MODEL_EXTRA_BODY": wrong})
        assert raised.value.code == "BEM-042" and "BEAM_MODEL_EXTRA_BODY" in (raised.value.detail or "")


def test_the_extra_body_goes_where_it_is_taken_and_as_set() -> None:
    hosted = OpenAiCompatible.from_env({"OPENAI_API_KEY": "k"})
    assert hosted is not None and hosted.extra_body == {}
    assert "chat_template_kwargs" not in hosted.request_body([{"role": "user", "content": "x"}], [])
    azure = OpenAiCompatible.from_env(
        {"BEAM_API_KEY": "k", "BEAM_API_BASE_URL": "https://r.openai.azure.com/openai/v1"}
    )
    assert azure is not None and azure.extra_body == {}
    # A server that is no known provider (llama.cpp, vLLM) keeps the framework's default until it refuses it.
    local = OpenAiCompatible.from_env({"BEAM_API_KEY": "k", "BEAM_API_BASE_URL": "http://127.0.0.1:8080/v1"})
    assert local is not None and local.extra_body == {"chat_template_kwargs": {"thinking": False}}
    # The framework's own client keeps the seed's default, wherever it points.
    assert OpenAiCompatible("https://api.openai.com/v1", "k", "m").extra_body == local.extra_body
    chosen = OpenAiCompatible.from_env({"OPENAI_API_KEY": "k", "BEAM_MODEL_EXTRA_BODY": '{"seed": 7}'})
    assert chosen is not None and chosen.request_body([], [])["seed"] == 7


def test_azures_key_and_endpoint_name_a_deployment() -> None:
    """Issue 42: AZURE_OPENAI_API_KEY with AZURE_OPENAI_ENDPOINT (the variables Microsoft's SDKs
    read); BEAM_MODEL names the deployment; the key goes in `api-key`, with an API version."""
    env = {"AZURE_OPENAI_API_KEY": "az", "AZURE_OPENAI_ENDPOINT": "https://res.openai.azure.com/"}
    said = read_model_env(env)
    assert said is not None and said.key_var == "AZURE_OPENAI_API_KEY" and said.model == "gpt-4.1-mini"
    assert (
        said.base_url == "https://res.openai.azure.com/openai/deployments/gpt-4.1-mini?api-version=2024-10-21"
    )
    said = read_model_env({**env, "BEAM_MODEL": "prod-4o", "AZURE_OPENAI_API_VERSION": "2025-04-01-preview"})
    assert said is not None
    assert (
        said.base_url
        == "https://res.openai.azure.com/openai/deployments/prod-4o?api-version=2025-04-01-preview"
    )
    url, headers = providers.endpoint(said.base_url, "az", "chat/completions")
    assert (
        url
        == "https://res.openai.azure.com/openai/deployments/prod-4o/chat/completions?api-version=2025-04-01-preview"
    )
    assert headers == {"api-key": "az"}
    # A deployment URL given as the base URL gets a version; every other server a Bearer key.
    url, headers = providers.endpoint("https://proxy.example/openai/deployments/d/", "az", "models")
    assert url == "https://proxy.example/openai/deployments/d/models?api-version=2024-10-21"
    assert headers == {"api-key": "az"} and providers.provider_of(url) is providers.AZURE
    assert providers.endpoint("http://127.0.0.1:8080/v1/", "k", "chat/completions") == (
        "http://127.0.0.1:8080/v1/chat/completions",
        {"Authorization": "Bearer k"},
    )
    # Another provider's key beside Azure's is the one meant; Azure's key alone needs its endpoint.
    other = read_model_env({**env, "GROQ_API_KEY": "g"})
    assert other is not None and other.key_var == "GROQ_API_KEY"
    with pytest.raises(BeamError, match="AZURE_OPENAI_ENDPOINT must be the resource's endpoint"):
        read_model_env({"AZURE_OPENAI_API_KEY": "az"})
    assert providers.by_name("azure") is providers.AZURE


@pytest.mark.parametrize(
    ("host", "base_url"),
    [
        ("127.0.0.1:11434", "http://127.0.0.1:11434/v1"),
        ("http://gpu-box:11434", "http://gpu-box:11434/v1"),
        ("gpu-box", "http://gpu-box:11434/v1"),  # Ollama's own default port
        (":8080", "http://127.0.0.1:8080/v1"),
        ("https://ollama.example/proxy/", "https://ollama.example:443/proxy/v1"),
        ("::1", "http://[::1]:11434/v1"),
    ],
)
def test_ollama_host_alone_names_ollama_with_no_key(host: str, base_url: str) -> None:
    said = read_model_env({"OLLAMA_HOST": host, "BEAM_MODEL": "qwen2.5-coder:7b"})
    assert said is not None and said.provider is providers.OLLAMA
    assert (said.base_url, said.model, said.key_var) == (base_url, "qwen2.5-coder:7b", "OLLAMA_HOST")
    client = OpenAiCompatible.from_env({"OLLAMA_HOST": host, "BEAM_MODEL": "m"})
    assert client is not None and client.base_url == base_url


def test_ollama_needs_a_model_and_comes_after_every_key() -> None:
    with pytest.raises(BeamError) as raised:
        read_model_env({"OLLAMA_HOST": "127.0.0.1:11434"})
    assert raised.value.code == "BEM-042" and "BEAM_MODEL must name a model Ollama has pulled" in str(
        raised.value
    )
    with pytest.raises(BeamError):
        read_model_env({"OLLAMA_HOST": "127.0.0.1:11434", "BEAM_MODEL": ""})
    # A key set beside it is the one meant; an empty OLLAMA_HOST names nothing; the base URL still wins.
    said = read_model_env({"OLLAMA_HOST": "127.0.0.1:11434", "OPENAI_API_KEY": "sk"})
    assert said is not None and said.provider is providers.PROVIDERS[0] and said.key_var == "OPENAI_API_KEY"
    assert read_model_env({"OLLAMA_HOST": " ", "BEAM_MODEL": "m"}) is None
    assert read_model_env({"OLLAMA_HOST": "h", "BEAM_MODEL": "m", "BEAM_API_KEY": ""}) is None
    said = read_model_env({"OLLAMA_HOST": "h", "BEAM_MODEL": "m", "BEAM_API_BASE_URL": "http://proxy/v1"})
    assert said is not None and said.base_url == "http://proxy/v1"
