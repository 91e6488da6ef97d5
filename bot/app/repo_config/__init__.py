"""Per-repository settings: `.github/beam.yml` on the default branch, its model, loader and JSON schema.

The file is read from the repository's default branch, never from a pull request's head: a contributor
must not be able to change the rules that govern their own pull request (who may trigger, who may
approve, which paths the author skill may touch) by editing the file in that pull request.

A broken file never stops the bot: `parse_repo_config` returns the defaults plus one readable message
per problem, which the app posts on the pull request (`runs.render.render_config_errors`). The
shipped JSON schema (`schema/beam-config.schema.json`) is generated from `RepoConfig`; regenerate it with
`python -m bot.app.repo_config --schema > schema/beam-config.schema.json`; `--check FILE` (in
`__main__.py`) validates a file with line numbers (`yaml_lines.py`).

May import permissions only: every layer of the app reads repository config.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import hashlib
import json
import posixpath
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Annotated, Any, Literal, get_args

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, WithJsonSchema, field_validator

from bot.app.permissions import PERMISSIONS, Permission
from bot.app.repo_config.yaml_lines import StrictLoader, key_lines, line_of
from bot.app.review_config import AutoReviewConfig

CONFIG_PATH = ".github/beam.yml"
MAX_CONFIG_BYTES = 64 * 1024
# Aliases let a small file expand into a huge structure; count nodes as if every alias were copied.
MAX_CONFIG_NODES = 10_000

Skill = Literal["review", "summarize", "commit-notes", "ask", "author", "docs"]
SKILLS: tuple[Skill, ...] = get_args(Skill)

MIN_EXPIRY = timedelta(minutes=10)
MAX_EXPIRY = timedelta(days=90)
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_EXPIRY_TEXT = re.compile(r"^(?:[0-9]{1,10}|(?:[0-9]{1,10}[smhdw])+)$")
_EXPIRY_PART = re.compile(r"([0-9]+)([smhdw])")

_EXPIRY_SCHEMA: dict[str, Any] = {
    "anyOf": [
        {"type": "string", "pattern": _EXPIRY_TEXT.pattern},
        {
            "type": "integer",
            "minimum": int(MIN_EXPIRY.total_seconds()),
            "maximum": int(MAX_EXPIRY.total_seconds()),
        },
    ],
    "default": "7d",
    "description": "How long a held push waits for approval: '7d', '12h', '30m', '1d12h' (units s, m, "
    "h, d, w) or whole seconds; between 10 minutes and 90 days.",
    "title": "Expiry",
}


def expiry_seconds(value: str | int) -> int:
    """Seconds in an expiry setting; raises ValueError with a message fit for the config's author."""
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise ValueError("expected a duration such as '7d', '12h', '30m' or a number of seconds")
    if isinstance(value, int):
        seconds = value
    else:
        text = value.strip()
        if not _EXPIRY_TEXT.fullmatch(text):
            raise ValueError(
                f"{_short(value)} is not a duration; write e.g. '7d', '12h', '30m', '1d12h' "
                "(units s, m, h, d, w) or a number of seconds"
            )
        parts = _EXPIRY_PART.findall(text)
        seconds = sum(int(n) * _UNIT_SECONDS[u] for n, u in parts) if parts else int(text)
    if seconds < MIN_EXPIRY.total_seconds():
        raise ValueError(f"{_short(value)} is shorter than the minimum of 10 minutes")
    if seconds > MAX_EXPIRY.total_seconds():
        raise ValueError(f"{_short(value)} is longer than the maximum of 90 days")
    return seconds


@functools.lru_cache(maxsize=256)
def _glob_regex(pattern: str) -> re.Pattern[str]:
    # Anchored at the repository root; `**` spans directories, `*` and `?` stay within one. A pattern
    # also covers everything below a path it matches, so `.github/workflows` blocks its files too.
    # Case-insensitive on purpose: blocking too much is safe, missing `.GitHub/...` on a
    # case-insensitive checkout is not.
    text = pattern.strip().removeprefix("./").lstrip("/")
    if text.endswith("/"):
        text += "**"
    out, i = [], 0
    while i < len(text):
        if text.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif text.startswith("**", i):
            out.append(".*")
            i += 2
        elif text[i] == "*":
            out.append("[^/]*")
            i += 1
        elif text[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(text[i]))
            i += 1
    return re.compile("".join(out) + "(?:/.*)?", re.IGNORECASE | re.DOTALL)


class RepoLimits(BaseModel):
    """The `limits:` section: each may only lower the server's limit of the same name."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, title="RepoLimits")

    max_tokens_per_run: int | None = Field(
        default=None, ge=1, description="Tokens (input + output) one run may use before it stops."
    )
    max_minutes_per_run: int | None = Field(
        default=None, ge=1, description="Minutes one run may take before it stops."
    )
    runs_per_user_per_day: int | None = Field(
        default=None, ge=1, description="Runs one person may start on this repository per UTC day."
    )
    runs_per_repo_per_day: int | None = Field(
        default=None, ge=1, description="Runs this repository may start per UTC day."
    )


DEFAULT_DOCS_PATHS = ("docs/**", "**/*.md", "**/*.rst", "**/*.txt", "mkdocs.yml", "docs/conf.py")


class DocsConfig(BaseModel):
    """`docs:`: what `/beam docs` may write."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, title="DocsConfig")

    paths: list[str] = Field(
        default=list(DEFAULT_DOCS_PATHS),
        min_length=1,
        description="Globs (from the repository root; `**` spans directories) `/beam docs` may write; "
        "every other path is refused.",
    )

    @field_validator("paths", mode="after")
    @classmethod
    def _check_globs(cls, value: list[str]) -> list[str]:
        for pattern in value:
            if not pattern.strip().strip("/") or "\x00" in pattern:
                raise ValueError(f"{_short(pattern)} is not a path glob")
        return value


class RepoConfig(BaseModel):
    """Version 1 of `.github/beam.yml`; every field has a default, so an absent file is valid."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, title="RepoConfig")

    version: Literal[1] = Field(default=1, description="Format version of this file; only 1 exists.")
    skills: list[Skill] = Field(
        default=list(SKILLS), description="Commands enabled on this repository (`/beam <skill>`)."
    )
    trigger_permission: Permission = Field(
        default="write", description="Lowest repository permission a commenter needs to run a command."
    )
    approve_permission: Permission = Field(
        default="write", description="Lowest repository permission needed to approve or reject a held push."
    )
    self_approval: bool = Field(default=True, description="May the requester approve their own held push?")
    approvals_required: int = Field(
        default=1, ge=1, le=10, description="Distinct approvals needed before a held push is pushed."
    )
    blocked_paths: list[str] = Field(
        default=[".github/workflows/**"],
        description="Globs (from the repository root; `**` spans directories) the author skill may "
        "not change.",
    )
    expiry: Annotated[str | int, WithJsonSchema(_EXPIRY_SCHEMA)] = "7d"
    limits: RepoLimits = Field(
        default_factory=RepoLimits,
        description="Lower the server's limits for this repository (a higher value is ignored).",
    )
    docs: DocsConfig = Field(default_factory=DocsConfig, description="Settings of `/beam docs`.")
    auto_review: AutoReviewConfig = Field(
        default_factory=AutoReviewConfig, description="Automatic reviews of pull requests (optional)."
    )

    @field_validator("skills", mode="after")
    @classmethod
    def _dedupe_skills(cls, value: list[Skill]) -> list[Skill]:
        return list(dict.fromkeys(value))

    @field_validator("blocked_paths", mode="after")
    @classmethod
    def _check_globs(cls, value: list[str]) -> list[str]:
        for pattern in value:
            if not pattern.strip() or "\x00" in pattern:
                raise ValueError(f"{_short(pattern)} is not a path glob")
        return value

    @field_validator("expiry", mode="before")
    @classmethod
    def _check_expiry(cls, value: Any) -> Any:
        expiry_seconds(value)
        return value

    @property
    def expiry_delta(self) -> timedelta:
        """How long a held push stays approvable."""
        return timedelta(seconds=expiry_seconds(self.expiry))

    def skill_enabled(self, skill: str) -> bool:
        return skill in self.skills

    def blocked(self, path: str) -> bool:
        """True when the author skill may not change `path` (repository-relative, `/`-separated)."""
        return matches_any(self.blocked_paths, path)


def matches_any(patterns: list[str], path: str) -> bool:
    """Whether a repository path matches one of the globs (the rules of `blocked_paths`)."""
    clean = posixpath.normpath(path.replace("\\", "/")).lstrip("/")
    return any(_glob_regex(pattern).fullmatch(clean) for pattern in patterns)


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
        return _invalid(*(_error_message(error) for error in errors), lines=where)


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


def _short(value: Any) -> str:
    # Never repr a container: a YAML alias bomb would make that enormous.
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return "true" if value else "false"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


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


_TYPE_WORDS = {
    "list_type": "expected a list, e.g. [a, b]",
    "bool_type": "expected true or false",
    "int_type": "expected a whole number",
    "string_type": "expected a string",
    "model_type": "expected a mapping of settings (key: value)",
}


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
        close = difflib.get_close_matches(key, names, n=1)
        hint = f"did you mean '{close[0]}'? " if close else ""
        return f"{path}: unknown setting; {hint}valid settings are {', '.join(names)}"
    if kind == "literal_error" and loc[0] == "skills":
        return f"{path}: {_short(value)} is not a skill; choose from {', '.join(SKILLS)}"
    if kind == "literal_error" and loc[0] in ("trigger_permission", "approve_permission"):
        return f"{path}: {_short(value)} is not a permission; choose from {', '.join(PERMISSIONS)}"
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
