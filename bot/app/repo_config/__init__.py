"""Per-repository settings: `.github/beam.yml` on the default branch, its model, loader and JSON schema.

The file is read from the repository's default branch, never from a pull request's head: a contributor
must not be able to change the rules that govern their own pull request (who may trigger, who may
approve, which paths the author skill may touch) by editing the file in that pull request.

A broken file never stops the bot: `parse_repo_config` returns the defaults plus one readable message
per problem, which the app posts on the pull request (`runs.render.render_config_errors`). The
shipped JSON schema (`schema/beam-config.schema.json`) is generated from `RepoConfig`; regenerate it with
`python -m bot.app.repo_config --schema > schema/beam-config.schema.json`; `--check FILE` (in
`__main__.py`) validates a file with line numbers (`yaml_lines.py`).

The package owns the file: `model.py` says what each setting is, `parse.py` reads the text into it and
words its errors. May import permissions only: every layer of the app reads repository config.
"""

from bot.app.repo_config.model import (
    CONFIG_PATH,
    DEFAULT_DOCS_PATHS,
    MAX_CONFIG_BYTES,
    MAX_CONFIG_NODES,
    MAX_EXPIRY,
    MIN_EXPIRY,
    SKILLS,
    DocsConfig,
    RepoConfig,
    RepoLimits,
    Skill,
    expiry_seconds,
    matches_any,
)
from bot.app.repo_config.parse import (
    ConfigResult,
    config_json_schema,
    config_json_schema_text,
    config_version,
    load_repo_config,
    parse_repo_config,
)

__all__ = [
    "CONFIG_PATH",
    "DEFAULT_DOCS_PATHS",
    "MAX_CONFIG_BYTES",
    "MAX_CONFIG_NODES",
    "MAX_EXPIRY",
    "MIN_EXPIRY",
    "SKILLS",
    "ConfigResult",
    "DocsConfig",
    "RepoConfig",
    "RepoLimits",
    "Skill",
    "config_json_schema",
    "config_json_schema_text",
    "config_version",
    "expiry_seconds",
    "load_repo_config",
    "matches_any",
    "parse_repo_config",
]
