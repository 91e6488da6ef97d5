"""Reading `.github/beam.yml`: YAML to `RepoConfig`, readable messages per problem, and the JSON schema.

A broken file never stops the bot: `parse_repo_config` returns the defaults plus one message per
problem, each with the line it is about where it has one.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, get_args

import yaml
from pydantic import BaseModel, ValidationError

from bot.app.permissions import PERMISSIONS
from bot.app.repo_config.checks import MAX_CHECKS, CheckEntry
from bot.app.repo_config.durations import short as _short
from bot.app.repo_config.model import (
    CONFIG_PATH,
    MAX_CONFIG_BYTES,
    MAX_CONFIG_NODES,
    SKILLS,
    RepoConfig,
)
from bot.app.repo_config.review_rules import SEVERITIES, Tone
from bot.app.repo_config.yaml_lines import StrictLoader, key_lines, line_of


@dataclass(frozen=True, slots=True)
class ConfigResult:
    """The config to use (the defaults when the file is missing or invalid) and what was wrong."""

    config: RepoConfig = field(default_factory=RepoConfig)
    errors: list[str] = field(default_factory=list)
    found: bool = False
    # The 1-based line each error is about, where it has one (for `--check`'s FILE:LINE: output).
    lines: list[int | None] = field(default_factory=list)
    # Which text it came from (`config_version`; "" when not read through `load_repo_config`): a
    # command's run job checks that it runs under the version its command was admitted with. Not
    # part of equality: two results that say the same are the same, whatever file they came from.
    version: str = field(default="", compare=False)

    @property
    def ok(self) -> bool:
        return not self.errors


def parse_repo_config(text: str | None) -> ConfigResult:
    """Parse the file's text (None: no file); never raises for anything the file can contain."""
    if text is None:
        return ConfigResult()
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_CONFIG_BYTES:
        return _invalid(f"{CONFIG_PATH} is {size:,} bytes; the limit is {MAX_CONFIG_BYTES:,} bytes")
    try:
        data = yaml.load(text, Loader=StrictLoader)  # noqa: S506 - a SafeLoader that refuses duplicate keys
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        return _invalid(_yaml_message(exc), lines=[mark.line + 1 if mark else None])
    except yaml.YAMLError as exc:
        return _invalid(f"YAML syntax error: {exc}")
    except RecursionError:
        return _invalid(f"{CONFIG_PATH} is nested too deeply to read")
    if data is None:  # empty, or only comments
        return ConfigResult(found=True)
    if not isinstance(data, dict):
        return _invalid(f"the top level must be a mapping of settings (key: value), got {_short(data)}")
    if _node_count(data, MAX_CONFIG_NODES) > MAX_CONFIG_NODES:
        return _invalid(f"{CONFIG_PATH} expands to more than {MAX_CONFIG_NODES:,} values (YAML aliases?)")
    lines = key_lines(text)
    version = data.get("version", 1)
    if type(version) is not int or version != 1:
        # Other messages would describe version 1's rules, which a newer file may not follow.
        message = f"version: unsupported version {_short(version)}; this beam-bot reads version 1"
        return _invalid(message, lines=[lines.get(("version",))])
    try:
        return ConfigResult(config=RepoConfig.model_validate(data), found=True)
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        where = [line_of(lines, tuple(error["loc"])) for error in errors]
        messages = [_error_message(error) for error in errors]
        # A union's branches each report the same value: say it once (`review.linters`).
        kept = [i for i, m in enumerate(messages) if m and m not in messages[:i]]
        return _invalid(*(messages[i] for i in kept), lines=[where[i] for i in kept])


async def load_repo_config(
    get_file: Callable[[str, str, str, str], Awaitable[str | None]],
    owner: str,
    repo: str,
    default_branch: str,
) -> ConfigResult:
    """Read `.github/beam.yml` at the default branch, never at the PR head.

    The rules that govern a pull request (who may trigger, who may approve, what the author skill may
    change) must not be editable by that pull request's author, so the ref is always `default_branch`.
    `get_file(owner, repo, path, ref)` returns None when the file does not exist. Its errors (GitHub
    down, rate limit) propagate on purpose: falling back to the defaults then could be more permissive
    than the repository's real settings, so the caller retries instead.
    """
    text = await get_file(owner, repo, CONFIG_PATH, default_branch)
    return dataclasses.replace(parse_repo_config(text), version=config_version(text))


def config_version(text: str | None) -> str:
    """A short digest of the file's text ("absent" when there is none)."""
    if text is None:
        return "absent"
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def config_json_schema() -> dict[str, Any]:
    """The JSON schema of `.github/beam.yml`, for editors and for the shipped schema file."""
    schema = RepoConfig.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "beam-bot repository config (.github/beam.yml)"
    return schema


def config_json_schema_text() -> str:
    """Exactly the bytes of `schema/beam-config.schema.json`."""
    return json.dumps(config_json_schema(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def _invalid(*errors: str, lines: list[int | None] | None = None) -> ConfigResult:
    return ConfigResult(errors=list(errors), found=True, lines=lines or [None] * len(errors))


def _node_count(value: Any, limit: int) -> int:
    count, stack = 0, [value]
    while stack and count <= limit:
        item = stack.pop()
        count += 1
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return count


def _yaml_message(exc: yaml.MarkedYAMLError) -> str:
    mark = exc.problem_mark or exc.context_mark
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
    what = "; ".join(part for part in (exc.context, exc.problem) if part) or "cannot parse"
    return f"YAML syntax error{where}: {what}"


def _path(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        name = str(part) if len(str(part)) <= 40 else str(part)[:37] + "..."
        out += f"[{name}]" if isinstance(part, int) else (f".{name}" if out else name)
    return out or "(top level)"


CHECK_EXAMPLE = "{name: tests, run: python -m pytest -q}"
_TYPE_WORDS = {
    "list_type": "expected a list, e.g. [a, b]",
    "bool_type": "expected true or false",
    "int_type": "expected a whole number",
    "string_type": "expected a string",
    "model_type": "expected a mapping of settings (key: value)",
    "dict_type": "expected a mapping (key: value)",
}
_REVIEW_CHOICES = {"severity": SEVERITIES, "tone": get_args(Tone)}


def _setting_names() -> str:
    return ", ".join(RepoConfig.model_fields)


def _error_message(error: Any) -> str:
    loc, kind, value = tuple(error["loc"]), error["type"], error.get("input")
    path = _path(loc)
    if kind == "extra_forbidden":
        key = str(loc[-1])
        section = RepoConfig.model_fields.get(str(loc[0])) if len(loc) == 2 else None
        model = section.annotation if section is not None else RepoConfig
        names = list(
            (model if isinstance(model, type) and issubclass(model, BaseModel) else RepoConfig).model_fields
        )
        if loc[0] == "checks" and len(loc) == 3:  # an entry of the `checks` list
            names = list(CheckEntry.model_fields)
        close = difflib.get_close_matches(key, names, n=1)
        hint = f"did you mean '{close[0]}'? " if close else ""
        return f"{path}: unknown setting; {hint}valid settings are {', '.join(names)}"
    if kind == "missing" and loc[0] == "checks":
        return f"{path}: missing; each check needs a name and a command to run, e.g. {CHECK_EXAMPLE}"
    if kind == "string_pattern_mismatch" and loc[0] == "checks":
        return (
            f"{path}: {_short(value)} is not a check name; use at most 64 letters, digits, spaces "
            "and _ . : / -, starting with a letter or digit"
        )
    if kind == "too_long" and loc == ("checks",):
        return f"checks: at most {MAX_CHECKS} checks, got {len(value) if isinstance(value, list) else '?'}"
    if kind == "literal_error" and loc[0] == "skills":
        return f"{path}: {_short(value)} is not a skill; choose from {', '.join(SKILLS)}"
    if kind == "literal_error" and loc[0] in ("trigger_permission", "approve_permission"):
        return f"{path}: {_short(value)} is not a permission; choose from {', '.join(PERMISSIONS)}"
    if kind == "literal_error" and loc == ("fork_pushes",):
        return f"fork_pushes: {_short(value)} is not a choice; use allow or refuse"
    if kind == "literal_error" and loc[0] == "review" and str(loc[-1]) in _REVIEW_CHOICES:
        choices = ", ".join(_REVIEW_CHOICES[str(loc[-1])])
        return f"{path}: {_short(value)} is not a {loc[-1]}; choose from {choices}"
    if loc[:2] == ("review", "linters") and len(loc) >= 3:
        if len(loc) > 3:  # a value in the mapping: name it without the union's branch
            words = _TYPE_WORDS.get(kind, error["msg"])
            return f"{_path((*loc[:2], *loc[3:]))}: {words}, got {_short(value)}"
        if isinstance(value, dict):
            return ""  # the mapping branch names what is wrong inside it
        return (
            f"review.linters: expected true, false or a mapping of linter names to true or false, "
            f"got {_short(value)}"
        )
    if kind == "invalid_key":
        return f"{_short(value)} is not a setting name; valid settings are {_setting_names()}"
    if kind in ("greater_than_equal", "less_than_equal"):
        limit = error["ctx"].get("ge", error["ctx"].get("le"))
        side = "minimum" if kind == "greater_than_equal" else "maximum"
        return f"{path}: {_short(value)} is outside the allowed range; the {side} is {limit}"
    if kind in _TYPE_WORDS:
        return f"{path}: {_TYPE_WORDS[kind]}, got {_short(value)}"
    if kind == "value_error":
        return f"{path}: {error['ctx']['error']}"
    return f"{path}: {error['msg']} (got {_short(value)})"
