"""The Action's model inputs as the model client reads them (`model_inputs`): an empty input is no
input, a provider's own key in the step's `env:` is found with no input at all, and `provider` sends
`api-key` to that provider's variable, with its URL and model."""

from __future__ import annotations

import pytest

from bot.app.action.environment import apply, model_inputs
from bot.beam.errors import BeamError
from bot.beam.model_env import DEFAULT_BASE_URL, read_model_env

# What action.yml's step sets when the workflow gives no input but `api-key`.
EMPTY = {"BEAM_ACTION_PROVIDER": "", "BEAM_ACTION_API_BASE_URL": "", "BEAM_ACTION_MODEL": ""}


def model_of(env: dict[str, str]) -> tuple[str, str, str, str]:
    changed = dict(env)
    apply(changed, model_inputs(env))
    said = read_model_env(changed)
    assert said is not None
    return said.key_var, said.api_key, said.base_url, said.model


def test_an_openai_key_in_the_steps_env_needs_no_input() -> None:
    # The step's env as action.yml sets it with no `with:`: every input empty.
    env = {**EMPTY, "BEAM_ACTION_API_KEY": "", "OPENAI_API_KEY": "sk-o"}
    assert model_of(env) == ("OPENAI_API_KEY", "sk-o", "https://api.openai.com/v1", "gpt-4.1-mini")


def test_an_empty_beam_api_key_no_longer_hides_a_providers_own() -> None:
    # Before issue 42's gap was closed, action.yml set BEAM_API_KEY="" and BEAM_API_BASE_URL="".
    env = {"BEAM_API_KEY": "", "BEAM_API_BASE_URL": "", "BEAM_MODEL": "", "ANTHROPIC_API_KEY": "sk-a"}
    key_var, _, base_url, _ = model_of(env)
    assert key_var == "ANTHROPIC_API_KEY" and base_url == "https://api.anthropic.com/v1"


def test_api_key_alone_is_beam_api_key_on_the_default_server() -> None:
    env = {**EMPTY, "BEAM_ACTION_API_KEY": "nvapi-1"}
    key_var, key, base_url, model = model_of(env)
    assert (key_var, key, base_url) == ("BEAM_API_KEY", "nvapi-1", DEFAULT_BASE_URL) and model


@pytest.mark.parametrize(
    ("provider", "variable", "base_url"),
    [
        ("openai", "OPENAI_API_KEY", "https://api.openai.com/v1"),
        ("Anthropic", "ANTHROPIC_API_KEY", "https://api.anthropic.com/v1"),
        ("gemini", "GEMINI_API_KEY", "https://generativelanguage.googleapis.com/v1beta/openai"),
        ("openrouter", "OPENROUTER_API_KEY", "https://openrouter.ai/api/v1"),
        ("groq", "GROQ_API_KEY", "https://api.groq.com/openai/v1"),
    ],
)
def test_provider_sends_api_key_to_the_providers_own_variable(
    provider: str, variable: str, base_url: str
) -> None:
    env = {**EMPTY, "BEAM_ACTION_API_KEY": "k", "BEAM_ACTION_PROVIDER": provider, "NVIDIA_API_KEY": "n"}
    key_var, key, url, _ = model_of(env)
    assert (key_var, key, url) == (variable, "k", base_url)


def test_the_url_and_model_inputs_win_over_the_providers() -> None:
    env = {
        "BEAM_ACTION_API_KEY": "k",
        "BEAM_ACTION_PROVIDER": "openai",
        "BEAM_ACTION_API_BASE_URL": "https://proxy.example/v1",
        "BEAM_ACTION_MODEL": "gpt-5",
    }
    assert model_of(env)[2:] == ("https://proxy.example/v1", "gpt-5")


def test_an_unknown_provider_or_one_without_a_key_is_bem_390() -> None:
    with pytest.raises(BeamError, match="openai, anthropic, gemini, openrouter, groq, azure") as wrong:
        model_inputs({"BEAM_ACTION_API_KEY": "k", "BEAM_ACTION_PROVIDER": "mistral"})
    assert wrong.value.code == "BEM-390"
    # Azure is known (issue 42): its key goes to AZURE_OPENAI_API_KEY, read with AZURE_OPENAI_ENDPOINT.
    changes = model_inputs({"BEAM_ACTION_API_KEY": "k", "BEAM_ACTION_PROVIDER": "Azure"})
    assert changes["AZURE_OPENAI_API_KEY"] == "k" and changes["BEAM_API_KEY"] is None
    with pytest.raises(BeamError, match="OPENAI_API_KEY"):
        model_inputs({"BEAM_ACTION_API_KEY": "", "BEAM_ACTION_PROVIDER": "openai"})
