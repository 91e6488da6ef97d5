"""The standard GitHub Actions environment `beam-bot action` reads, checked once, before anything runs.

https://docs.github.com/actions/writing-workflows/choosing-what-your-workflow-does/
store-information-in-variables#default-environment-variables
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import SecretStr

from bot.beam import providers
from bot.beam.errors import BeamError

# The events the Action serves: the commands' comments and automatic reviews (docs/action.md).
EVENTS = frozenset({"issue_comment", "pull_request_review_comment", "pull_request"})
REQUIRED = ("GITHUB_EVENT_NAME", "GITHUB_EVENT_PATH", "GITHUB_TOKEN", "GITHUB_REPOSITORY", "GITHUB_RUN_ID")
DEFAULT_API = "https://api.github.com"
MISSING_ENVIRONMENT = "BEM-390"
_REPOSITORY = re.compile(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")


@dataclass(frozen=True, slots=True)
class Place:
    """The repository the run was given (`GITHUB_REPOSITORY`, `GITHUB_SERVER_URL`): the only one
    whose rows are loaded, and where every carried push goes."""

    repo: str
    clone_url: str
    html_url: str


@dataclass(frozen=True, slots=True)
class ActionEnvironment:
    event: str
    payload: dict[str, Any]
    body: bytes  # the event file as GitHub wrote it: stored as a delivery's body is
    token: SecretStr = field(repr=False)
    api_url: str
    server_url: str
    repository: str
    run_id: str
    run_attempt: str
    temp_dir: Path | None  # RUNNER_TEMP: removed by the runner after the job

    @property
    def pull_request(self) -> tuple[str, int] | None:
        """`(owner/repo, number)` of the issue or pull request the event is about: the repository
        is the run's own (`GITHUB_REPOSITORY`), checked against the event file when it was read."""
        for key in ("issue", "pull_request"):
            item = self.payload.get(key)
            number = item.get("number") if isinstance(item, dict) else None
            if isinstance(number, int) and not isinstance(number, bool):
                return self.repository, number
        return None

    @property
    def place(self) -> Place:
        """Where the run's repository is, from the runner's variables: the only address the token
        is sent to for git, whatever a carried row says."""
        web = f"{self.server_url}/{self.repository}"
        return Place(self.repository, f"{web}.git", web)

    @property
    def delivery_id(self) -> str:
        """One delivery per workflow run attempt: a re-run is a new attempt, and does the work again."""
        return f"actions-{self.run_id}-{self.run_attempt}"


def read_environment(env: Mapping[str, str]) -> ActionEnvironment:
    """The environment, or BEM-390 naming what is missing or wrong (exit code 2)."""
    missing = [name for name in REQUIRED if not env.get(name)]
    if missing:
        raise BeamError(MISSING_ENVIRONMENT, f"not set: {', '.join(missing)}")
    event = env["GITHUB_EVENT_NAME"]
    if event not in EVENTS:
        raise BeamError(
            MISSING_ENVIRONMENT,
            f"GITHUB_EVENT_NAME is {event!r}; the Action serves {', '.join(sorted(EVENTS))}",
        )
    path = Path(env["GITHUB_EVENT_PATH"])
    try:
        body = path.read_bytes()
        payload = json.loads(body)
    except (OSError, ValueError) as error:
        raise BeamError(MISSING_ENVIRONMENT, f"GITHUB_EVENT_PATH cannot be read as JSON: {error}") from None
    if not isinstance(payload, dict):
        raise BeamError(MISSING_ENVIRONMENT, "GITHUB_EVENT_PATH does not hold a JSON object")
    repository = env["GITHUB_REPOSITORY"]
    if not _REPOSITORY.fullmatch(repository):
        raise BeamError(MISSING_ENVIRONMENT, f"GITHUB_REPOSITORY is not owner/name: {repository[:100]!r}")
    about = payload.get("repository")
    named = about.get("full_name") if isinstance(about, dict) else None
    if isinstance(named, str) and named.lower() != repository.lower():
        raise BeamError(MISSING_ENVIRONMENT, f"the event is about {named[:100]!r}, not GITHUB_REPOSITORY")
    temp = env.get("RUNNER_TEMP")
    return ActionEnvironment(
        event=event,
        payload=payload,
        body=body,
        token=SecretStr(env["GITHUB_TOKEN"]),
        api_url=(env.get("GITHUB_API_URL") or DEFAULT_API).rstrip("/"),
        server_url=(env.get("GITHUB_SERVER_URL") or "https://github.com").rstrip("/"),
        repository=repository,
        run_id=env["GITHUB_RUN_ID"],
        run_attempt=env.get("GITHUB_RUN_ATTEMPT") or "1",
        temp_dir=Path(temp) if temp else None,
    )


# The Action's model inputs, as action.yml passes them (an input GitHub leaves empty is "").
INPUT_KEY, INPUT_PROVIDER = "BEAM_ACTION_API_KEY", "BEAM_ACTION_PROVIDER"
INPUT_BASE_URL, INPUT_MODEL = "BEAM_ACTION_API_BASE_URL", "BEAM_ACTION_MODEL"
# The seed's key variables, and the variables that name the server and the model (model_env.py).
SEED_KEYS = ("BEAM_API_KEY", "GFS_BEAM_API_KEY", "NVIDIA_API_KEY")
SERVER_VARS = ("BEAM_API_BASE_URL", "GFS_BEAM_BASE_URL", "BEAM_MODEL", "GFS_BEAM_MODEL")


def model_inputs(env: Mapping[str, str]) -> dict[str, str | None]:
    """What the Action's inputs change in the environment the model client reads (None: unset).

    An empty value is no value: GitHub sets an input's variable to "" when the workflow leaves the
    input out, and to the framework an empty BEAM_API_KEY is a key that stops the search and an
    empty BEAM_API_BASE_URL a base URL. So the empty ones are unset, and a provider's own key in the
    step's `env:` (OPENAI_API_KEY...) is found with its URL and model, with no input at all. The
    `api-key` input goes to BEAM_API_KEY, or with `provider` to that provider's own variable (the
    seed's keys are unset then: they come first in the search). BEM-390 for a provider this does not
    know, or one named with no key anywhere.
    """
    changes: dict[str, str | None] = {
        name: None for name in (*SEED_KEYS, *SERVER_VARS, *providers.KEY_VARS) if env.get(name) == ""
    }
    key = (env.get(INPUT_KEY) or "").strip()
    named = (env.get(INPUT_PROVIDER) or "").strip()
    for variable, name in ((INPUT_BASE_URL, "BEAM_API_BASE_URL"), (INPUT_MODEL, "BEAM_MODEL")):
        value = (env.get(variable) or "").strip()
        if value:
            changes[name] = value
    if not named:
        if key:
            changes["BEAM_API_KEY"] = key
        return changes
    provider = providers.by_name(named)
    if provider is None:
        raise BeamError(
            MISSING_ENVIRONMENT,
            f"the `provider` input is {named[:40]!r}; it takes {', '.join(providers.NAMES)} "
            "(or leave it out for BEAM_API_KEY)",
        )
    if key:
        changes[provider.key_var] = key
    elif not env.get(provider.key_var):
        raise BeamError(
            MISSING_ENVIRONMENT,
            f"`provider: {provider.name.lower()}` needs the `api-key` input or {provider.key_var}",
        )
    changes.update({name: None for name in SEED_KEYS})
    return changes


def apply(env: MutableMapping[str, str], changes: Mapping[str, str | None]) -> None:
    """Sets and unsets `changes` in `env` (a copy of the environment, or `os.environ` itself)."""
    for name, value in changes.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
