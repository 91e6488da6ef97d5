"""Issue 42, end to end: each provider a maintainer may have reviews a change with only the variables
that provider needs (its key; Azure's key and endpoint; a local server's key, URL and model), through
`beam-bot run review`, `beam-bot review <URL>` and `beam-bot action`, against a stand-in that refuses
what the provider refuses and ignores what it ignores (tests/support/provider_servers.py)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.e2e.test_action import REPO as ACTION_REPO
from tests.e2e.test_action import actions_runner, seed_fix_pull
from tests.local.test_review import feature_fixture  # noqa: F401 - the fixture, by its name
from tests.local.test_run import checkout_fixture, run_cli  # noqa: F401 - the fixture, by its name
from tests.support.openai_server import FakeOpenAI, without_model_env
from tests.support.provider_servers import STAND_INS, StandIn, reviewer
from tests.support.pull_request_stack import URL, pull_request_stack

NAMES = sorted(STAND_INS)
# What becomes of the extra body (`chat_template_kwargs`): the stand-ins' URLs are not the providers'
# hosts, so it is sent once and refused where the provider refuses unknown fields, and never again;
# Azure's deployment path says what it is, so it is never sent; the rest take or ignore it.
REFUSED_ONCE = {"openai", "anthropic", "gemini", "groq"}
NEVER_SENT = {"azure"}


def model_of(stand: StandIn) -> str:
    """The model the run asks for: the provider's default, or the local server's."""
    from bot.beam.model_env import read_model_env

    with stand.server() as llm:
        said = read_model_env(stand.env(llm))
    assert said is not None
    return said.model


def assert_sent_as_the_provider_takes_it(stand: StandIn, llm: FakeOpenAI) -> None:
    """Every answered request carried the key in the provider's header, and the extra body was
    refused at most once: the next request was sent right the first time."""
    assert llm.received, "no request reached the stand-in"
    for request in llm.received:
        if stand.key_header == "api-key":
            assert request.headers.get("api-key") == "sk-stand-in" and "authorization" not in request.headers
            assert re.search(r"[?&]api-version=\d{4}-\d{2}-\d{2}", request.path), request.path
        else:
            assert request.headers.get("authorization") == "Bearer sk-stand-in"
    sent = ["chat_template_kwargs" in body for body in llm.requests]
    if stand.name in REFUSED_ONCE:
        assert len(llm.refused) == 1 and "chat_template_kwargs" in llm.refused[0] and not any(sent)
    elif stand.name in NEVER_SENT:
        assert llm.refused == [] and not any(sent)
    else:
        assert llm.refused == [] and all(sent)


@pytest.mark.parametrize("name", NAMES)
def test_run_review_with_only_the_providers_variables(feature: Path, name: str) -> None:
    stand = STAND_INS[name]
    with stand.server() as llm:
        llm.respond_with(reviewer("src/calc.py", 6))
        result = run_cli(["review", "--repo", str(feature)], None, env=stand.env(llm))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "One bug." in result.stdout and "src/calc.py:6" in result.stdout
    assert f"model {model_of(stand)} at {stand.env(llm).get('BEAM_API_BASE_URL', llm.url)}" in result.stdout
    assert_sent_as_the_provider_takes_it(stand, llm)
    if stand.structured:  # the review came as structured output: no tool loop
        assert all("response_format" in body for body in llm.requests)


@pytest.mark.parametrize("name", NAMES)
def test_review_of_a_url_with_only_the_providers_variables(tmp_path: Path, name: str) -> None:
    stand = STAND_INS[name]
    with pull_request_stack(tmp_path, model_server=stand.server()) as stack:
        stack.llm.respond_with(reviewer("src/calc.py", 2))
        env = {
            **{
                k: v for k, v in without_model_env(os.environ).items() if not k.startswith(("GITHUB_", "GH_"))
            },
            "GITHUB_TOKEN": stack.token,
            "GITHUB_API_URL": stack.api_url,
            **stand.env(stack.llm),
        }
        done = stack.cli("review", URL, env=env)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "One bug." in done.stdout and "src/calc.py:2" in done.stdout
        assert_sent_as_the_provider_takes_it(stand, stack.llm)


@pytest.mark.parametrize("name", NAMES)
def test_the_action_with_only_the_providers_variables(tmp_path: Path, name: str) -> None:
    stand = STAND_INS[name]
    with actions_runner(tmp_path, stand.server()) as runner:
        seed_fix_pull(runner)
        runner.llm.respond_with(reviewer("src/calc.py", 2))
        runner.model_env = stand.env(runner.llm)
        done = runner.action("issue_comment", runner.command("/beam review"))
        assert done.returncode == 0, done.stdout + done.stderr
        [review] = runner.fake.reviews_on(ACTION_REPO, 7)
        assert "One bug." in review.body
        # The model check, in one line at start; it met the provider's refusals first.
        structured = "yes" if stand.structured else "no"
        [line] = [line for line in done.stdout.splitlines() if line.startswith("model:")]
        assert line.startswith(f"model: {model_of(stand)} at 127.0.0.1:{runner.llm.port}: key ok"), line
        assert f"tools native, structured output {structured}" in line, line
        assert len(runner.llm.checks) == 1 + stand.structured
        assert_sent_as_the_provider_takes_it(stand, runner.llm)
        assert "sk-stand-in" not in done.stdout + done.stderr
