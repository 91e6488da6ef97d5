"""What the environment says about the model server (bot/beam/model_env.py): every setting read in
one place, and a wrong value refused at start with the variable's name."""

from __future__ import annotations

import pytest

from bot.beam.errors import BeamError
from bot.beam.model_env import DEFAULT_BASE_URL, DEFAULT_MAX_TOKENS, DEFAULT_TIMEOUT, read_model_env


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
