"""`.github/beam.yml`: parsing, clear errors with the defaults, permissions, expiry, globs, the schema."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import jsonschema
import pytest
import yaml

from bot.app.commands import SKILL_COMMANDS
from bot.app.permissions import effective_permission, permission_at_least
from bot.app.repo_config import (
    CONFIG_PATH,
    SKILLS,
    ConfigResult,
    RepoConfig,
    config_json_schema,
    config_json_schema_text,
    config_version,
    expiry_seconds,
    load_repo_config,
    parse_repo_config,
)
from bot.app.repo_config.__main__ import main
from bot.app.runs.render import render_config_errors
from bot.beam.sandbox_policy import BlockedPaths

SCHEMA_FILE = Path(__file__).resolve().parents[3] / "schema" / "beam-config.schema.json"

# The example of docs/configuration.md (once the README's) as it began, before `docs` and `auto_review`.
README_EXAMPLE = """\
# .github/beam.yml: read from the default branch only, so a pull request cannot change its own rules.
version: 1

# Commands this repository accepts (default: all five).
skills: [review, summarize, commit-notes, ask, author]

# Lowest repository permission needed to run a command, and to approve or reject a held push.
# Order: read < triage < write < maintain < admin. Default: write for both.
trigger_permission: triage
approve_permission: maintain

# May the person who asked for a change approve its push? (default: true)
self_approval: false
# Distinct approvals needed before a held push is pushed, 1 to 10 (default: 1).
approvals_required: 2

# Paths the author skill may not change: globs from the repository root, `**` spans
# directories, a directory covers everything below it. Default: [".github/workflows/**"].
blocked_paths:
  - .github/workflows/**
  - .github/beam.yml
  - "**/*.pem"
  - deploy/

# How long a held push waits for an answer: 30m, 12h, 7d, 1d12h or seconds,
# from 10 minutes to 90 days (default: 7d).
expiry: 3d
"""


def defaults() -> RepoConfig:
    return RepoConfig()


# --- defaults and the full example ---------------------------------------------------------------


@pytest.mark.parametrize("text", [None, "", "\n", "# nothing configured yet\n", "---\n"])
def test_missing_or_empty_file_gives_defaults(text: str | None) -> None:
    result = parse_repo_config(text)
    assert result.ok and result.errors == []
    assert result.found is (text is not None)
    config = result.config
    assert config.version == 1
    assert config.skills == ["review", "summarize", "commit-notes", "ask", "author", "docs"]
    assert config.docs.paths == ["docs/**", "**/*.md", "**/*.rst", "**/*.txt", "mkdocs.yml", "docs/conf.py"]
    assert config.trigger_permission == "write" and config.approve_permission == "write"
    assert config.self_approval is True
    assert config.approvals_required == 1
    assert config.blocked_paths == [".github/workflows/**"]
    assert config.expiry == "7d" and config.expiry_delta == timedelta(days=7)


def test_readme_example_parses_to_its_values() -> None:
    result = parse_repo_config(README_EXAMPLE)
    assert result.errors == []
    assert result.config == RepoConfig(
        skills=["review", "summarize", "commit-notes", "ask", "author"],
        trigger_permission="triage",
        approve_permission="maintain",
        self_approval=False,
        approvals_required=2,
        blocked_paths=[".github/workflows/**", ".github/beam.yml", "**/*.pem", "deploy/"],
        expiry="3d",
    )
    assert result.config.expiry_delta == timedelta(days=3)


def test_partial_file_keeps_other_defaults_and_dedupes_skills() -> None:
    config = parse_repo_config("skills: [ask, review, ask]\nself_approval: no\n").config
    assert config.skills == ["ask", "review"]
    assert config.self_approval is False
    assert config.skill_enabled("ask") and not config.skill_enabled("author")
    assert config.trigger_permission == "write" and config.blocked_paths == [".github/workflows/**"]
    assert parse_repo_config("skills: []\n").config.skills == []


def test_fork_pushes_are_refused_unless_allowed() -> None:
    """Issue 28: a fork's commits reach the base repository only where the default branch says so."""
    assert parse_repo_config(None).config.fork_pushes_allowed is False
    assert parse_repo_config("fork_pushes: refuse\n").config.fork_pushes_allowed is False
    assert parse_repo_config("fork_pushes: allow\n").config.fork_pushes_allowed is True


def test_config_skills_are_the_command_names() -> None:
    assert tuple(SKILL_COMMANDS) == SKILLS


# --- invalid files: a clear message, and the defaults ----------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "skills: [review, ask, deploy]\n",
            "skills[2]: 'deploy' is not a skill; choose from review, summarize, commit-notes, ask, author",
        ),
        ("skills: review\n", "skills: expected a list"),
        ("skills: [1]\n", "skills[0]: 1 is not a skill; choose from"),
        (
            "trigger_permission: writer\n",
            "trigger_permission: 'writer' is not a permission; "
            "choose from read, triage, write, maintain, admin",
        ),
        ("approve_permission: none\n", "approve_permission: 'none' is not a permission"),
        ("self_approval: 'yes'\n", "self_approval: expected true or false, got 'yes'"),
        ("approvals_required: 0\n", "approvals_required: 0 is outside the allowed range; the minimum is 1"),
        (
            "approvals_required: 11\n",
            "approvals_required: 11 is outside the allowed range; the maximum is 10",
        ),
        ("approvals_required: '2'\n", "approvals_required: expected a whole number, got '2'"),
        ("approvals_required: true\n", "approvals_required: expected a whole number, got true"),
        ("blocked_paths: ['']\n", "blocked_paths: '' is not a path glob"),
        ("blocked_paths: [docs, 3]\n", "blocked_paths[1]: expected a string, got 3"),
        ("fork_pushes: yes\n", "fork_pushes: true is not a choice; use allow or refuse"),
        ("fork_pushes: always\n", "fork_pushes: 'always' is not a choice; use allow or refuse"),
        ("expiry: 5m\n", "expiry: '5m' is shorter than the minimum of 10 minutes"),
        ("expiry: 91d\n", "expiry: '91d' is longer than the maximum of 90 days"),
        ("expiry: soon\n", "expiry: 'soon' is not a duration"),
        ("expiry: 60\n", "expiry: 60 is shorter than the minimum of 10 minutes"),
        ("expiry: [7d]\n", "expiry: expected a duration"),
        ("version: 2\n", "version: unsupported version 2; this beam-bot reads version 1"),
        ("version: true\n", "version: unsupported version true"),
        ("version: '1'\n", "version: unsupported version '1'"),
        ("- review\n- ask\n", "the top level must be a mapping of settings (key: value), got a list"),
        (
            "just some text\n",
            "the top level must be a mapping of settings (key: value), got 'just some text'",
        ),
        ("1: review\n", "1 is not a setting name; valid settings are version, skills,"),
        ("!!python/object/apply:os.system [echo]\n", "YAML syntax error at line 1, column 1"),
    ],
)
def test_invalid_file_reports_the_problem_and_uses_defaults(text: str, expected: str) -> None:
    result = parse_repo_config(text)
    assert not result.ok and result.found
    assert len(result.errors) == 1
    assert result.errors[0].startswith(expected), result.errors
    assert result.config == defaults()


def test_each_problem_is_one_message() -> None:
    text = "skills: [deploy]\ntrigger_permission: everyone\nexpiry: 1m\n"
    errors = parse_repo_config(text).errors
    assert [e.split(":")[0] for e in errors] == ["skills[0]", "trigger_permission", "expiry"]


def test_unknown_key_is_reported_with_a_suggestion() -> None:
    result = parse_repo_config("skils: [review]\nself_approval: false\n")
    assert result.errors == [
        "skils: unknown setting; did you mean 'skills'? valid settings are version, skills, "
        "trigger_permission, approve_permission, self_approval, approvals_required, blocked_paths, "
        "fork_pushes, expiry, limits, docs, auto_review, checks, checks_timeout, checks_required, "
        "checks_setup, review"
    ]
    assert result.config == defaults()  # the valid key does not half-apply either
    assert parse_repo_config("colour: blue\n").errors[0].startswith("colour: unknown setting; valid settings")


def test_yaml_syntax_error_names_the_line() -> None:
    text = "skills:\n  - review\ntrigger_permission: write\n  approve_permission: admin\n"
    result = parse_repo_config(text)
    assert result.errors == ["YAML syntax error at line 4, column 21: mapping values are not allowed here"]
    assert result.config == defaults()
    tab = parse_repo_config("version: 1\n\tskills: []\n").errors[0]
    assert tab.startswith("YAML syntax error at line 2, column 1:")


def test_huge_file_is_refused_before_parsing() -> None:
    text = "# " + "x" * (64 * 1024) + "\n"
    result = parse_repo_config(text)
    assert result.errors == [f"{CONFIG_PATH} is 65,539 bytes; the limit is 65,536 bytes"]
    assert result.config == defaults()
    # Just under the cap is read normally (multi-byte characters count as bytes).
    assert parse_repo_config("# " + "é" * 30_000 + "\nself_approval: false\n").config.self_approval is False


def test_alias_bomb_and_deep_nesting_are_refused() -> None:
    levels = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    levels += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 7)]
    bomb = parse_repo_config("\n".join(levels) + "\n")
    assert bomb.errors == [f"{CONFIG_PATH} expands to more than 10,000 values (YAML aliases?)"]
    deep = parse_repo_config("skills: " + "[" * 20_000 + "]" * 20_000 + "\n")
    assert len(deep.errors) == 1 and deep.config == defaults()


def test_long_values_are_shortened_in_messages() -> None:
    error = parse_repo_config(f"expiry: {'z' * 5000}\n").errors[0]
    assert len(error) < 200 and error.startswith("expiry: 'zzz")


# --- permissions ----------------------------------------------------------------------------------


def test_permission_order() -> None:
    order = ["none", "read", "triage", "write", "maintain", "admin"]
    for i, actual in enumerate(order):
        for j, needed in enumerate(order[1:], start=1):
            assert permission_at_least(actual, needed) is (i >= j), (actual, needed)


def test_permission_unknown_or_missing_grants_nothing() -> None:
    assert permission_at_least("ADMIN", "admin")
    assert permission_at_least("push", "write") and not permission_at_least("pull", "triage")
    assert not permission_at_least(None, "read")
    assert not permission_at_least("owner", "read")
    assert not permission_at_least("", "read")
    with pytest.raises(ValueError, match="unknown permission 'root'"):
        permission_at_least("admin", "root")


def test_effective_permission_takes_role_name_into_account() -> None:
    # GitHub's permission endpoint says "write" for maintainers and "read" for triagers.
    assert effective_permission("write", "maintain") == "maintain"
    assert effective_permission("read", "triage") == "triage"
    assert effective_permission("admin", "admin") == "admin"
    assert effective_permission("write", "security-manager") == "write"  # custom role: base wins
    assert effective_permission("none", None) == "none"
    assert effective_permission(None, None) == "none"
    assert effective_permission("push", None) == "write"


# --- expiry ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("7d", 7 * 86400),
        ("12h", 12 * 3600),
        ("30m", 1800),
        ("10m", 600),
        ("600s", 600),
        ("1d12h", 36 * 3600),
        ("2w", 14 * 86400),
        ("90d", 90 * 86400),
        (3600, 3600),
        ("3600", 3600),
        (" 12h ", 12 * 3600),
    ],
)
def test_expiry_parsing(value: str | int, seconds: int) -> None:
    assert expiry_seconds(value) == seconds
    assert RepoConfig(expiry=value).expiry_delta == timedelta(seconds=seconds)


@pytest.mark.parametrize(
    "value", ["9m", 599, "91d", 90 * 86400 + 1, "7 d", "7D", "d", "", "1.5h", "٣d", True]
)
def test_expiry_rejects(value: str | int) -> None:
    with pytest.raises(ValueError):
        expiry_seconds(value)


# --- blocked paths --------------------------------------------------------------------------------


def test_blocked_paths_globs() -> None:
    config = parse_repo_config(README_EXAMPLE).config
    assert config.blocked(".github/workflows/ci.yml")
    assert config.blocked(".github/workflows/nested/deploy.yaml")
    assert config.blocked(".GitHub/Workflows/ci.yml")  # case-insensitive: blocking more is safe
    assert config.blocked("./.github/beam.yml") and config.blocked("/.github/beam.yml")
    assert config.blocked("docs/../.github/workflows/x.yml")
    assert config.blocked("key.pem") and config.blocked("certs/prod/key.pem")
    assert config.blocked("deploy/prod/values.yaml")
    assert not config.blocked(".github/CODEOWNERS")
    assert not config.blocked("src/deploy.py")
    assert not config.blocked("docs/workflows/ci.yml")
    star = RepoConfig(blocked_paths=["*.lock", "docs/?.md", "vendor"])
    assert star.blocked("poetry.lock") and not star.blocked("sub/poetry.lock")
    assert star.blocked("docs/a.md") and not star.blocked("docs/ab.md")
    assert star.blocked("vendor/lib/x.c") and not star.blocked("vendored/x.c")


def test_a_character_class_blocks_in_the_config_check_as_in_the_worktree() -> None:
    """Issue 28: `secret[12].txt` blocked `secret1.txt` in the worktree but not here, and `/beam update`
    relies on this check alone. Both now read the glob with one translator (bot/beam/globs.py)."""
    patterns = ["secret[12].txt", "keys/[!p]*.pem", "**/.env*"]
    config = RepoConfig(blocked_paths=patterns)
    sandbox = BlockedPaths(patterns)
    for path, blocked in [
        ("secret1.txt", True),
        ("secret2.txt", True),
        ("secret3.txt", False),
        ("keys/deploy.pem", True),
        ("keys/public.pem", False),
        ("app/.env.local", True),
    ]:
        assert config.blocked(path) is blocked, path
        assert sandbox.matches(path) is blocked, path


def test_a_glob_git_refuses_is_a_config_error() -> None:
    result = parse_repo_config("blocked_paths: ['secret[12.txt']\n")
    assert result.errors and "unclosed" in " ".join(str(e) for e in result.errors)


# --- loading from GitHub --------------------------------------------------------------------------


class FakeContents:
    """Stands in for the GitHub client's get_file; records the refs it was asked for."""

    def __init__(self, files: dict[tuple[str, str], str]) -> None:
        self.files = files
        self.calls: list[tuple[str, str, str, str]] = []

    async def get_file(self, owner: str, repo: str, path: str, ref: str) -> str | None:
        self.calls.append((owner, repo, path, ref))
        return self.files.get((path, ref))


@pytest.mark.anyio
async def test_load_reads_the_default_branch_never_the_head() -> None:
    github = FakeContents(
        {
            (CONFIG_PATH, "main"): "trigger_permission: admin\n",
            (CONFIG_PATH, "contributor-branch"): "trigger_permission: read\n",
        }
    )
    result = await load_repo_config(github.get_file, "octo", "hello", "main")
    assert github.calls == [("octo", "hello", ".github/beam.yml", "main")]
    assert result.found and result.config.trigger_permission == "admin"


@pytest.mark.anyio
async def test_load_missing_file_gives_defaults_and_invalid_gives_errors() -> None:
    missing = await load_repo_config(FakeContents({}).get_file, "octo", "hello", "trunk")
    assert missing == ConfigResult() and not missing.found
    assert missing.version == config_version(None) == "absent"
    bad = await load_repo_config(
        FakeContents({(CONFIG_PATH, "trunk"): "skills: [x]\n"}).get_file, "o", "r", "trunk"
    )
    assert bad.config == defaults() and bad.errors[0].startswith("skills[0]: 'x' is not a skill")
    assert bad.version == config_version("skills: [x]\n") != config_version("skills: [y]\n")


@pytest.mark.anyio
async def test_load_does_not_hide_a_github_failure_behind_defaults() -> None:
    async def broken(owner: str, repo: str, path: str, ref: str) -> str | None:
        raise ConnectionError("GitHub is down")

    with pytest.raises(ConnectionError):
        await load_repo_config(broken, "octo", "hello", "main")


# --- the comment ----------------------------------------------------------------------------------


def test_render_config_errors_lists_problems_and_says_defaults_apply() -> None:
    errors = parse_repo_config("skills: [deploy]\nexpiry: 1m\n").errors
    text = render_config_errors(errors, branch="main")
    assert "`.github/beam.yml` is invalid" in text
    assert "default settings apply" in text and "the `main` branch" in text
    assert "```text\n- skills[0]: 'deploy' is not a skill" in text
    assert "- expiry: '1m' is shorter than the minimum of 10 minutes\n```" in text
    assert "the default branch" in render_config_errors(errors)


def test_render_config_errors_neutralises_markdown_and_caps_length() -> None:
    hostile = 'colour: 1\n"````\\n@everyone [x](https://e.example)": 2\n'
    errors = parse_repo_config(hostile).errors
    assert len(errors) == 2
    text = render_config_errors(errors)
    fence_line = text.split("\n")[2]
    assert fence_line == "`````text"  # longer than any backtick run inside
    assert text.count("`````") == 2
    assert "- ```` @everyone [x](https://e.example): unknown setting" in text
    many = render_config_errors([f"skills[{i}]: bad" for i in range(30)])
    assert "skills[19]: bad" in many and "skills[20]" not in many and "... and 10 more" in many


# --- the JSON schema ------------------------------------------------------------------------------


def test_shipped_schema_is_current() -> None:
    shipped = SCHEMA_FILE.read_text(encoding="utf-8") if SCHEMA_FILE.exists() else ""
    assert shipped == config_json_schema_text(), (
        "schema/beam-config.schema.json is stale: run "
        "python -m bot.app.repo_config --schema > schema/beam-config.schema.json"
    )


def test_readme_example_validates_against_shipped_schema() -> None:
    schema = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    assert list(validator.iter_errors(yaml.safe_load(README_EXAMPLE))) == []
    assert list(validator.iter_errors({})) == []


@pytest.mark.parametrize(
    "text",
    [
        "skils: [review]\n",
        "skills: [deploy]\n",
        "trigger_permission: writer\n",
        "approvals_required: 11\n",
        "expiry: soon\n",
        "expiry: 60\n",
        "version: 2\n",
    ],
)
def test_schema_and_model_agree_on_invalid_files(text: str) -> None:
    validator = jsonschema.Draft202012Validator(config_json_schema())
    assert list(validator.iter_errors(yaml.safe_load(text)))
    assert parse_repo_config(text).errors


def test_cli_prints_schema_and_checks_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--schema"]) == 0
    assert capsys.readouterr().out == config_json_schema_text()
    good, bad = tmp_path / "good.yml", tmp_path / "bad.yml"
    good.write_text(README_EXAMPLE, encoding="utf-8")
    bad.write_text("skills: [deploy]\n", encoding="utf-8")
    assert main(["--check", str(good)]) == 0
    assert capsys.readouterr().out == f"{good}: valid\n"
    assert main(["--check", str(bad)]) == 1
    assert "skills[0]: 'deploy' is not a skill" in capsys.readouterr().out


def test_docs_paths_and_the_docs_skill() -> None:
    result = parse_repo_config("skills: [author]\ndocs:\n  paths: [guide/**, README.md]\n")
    assert result.ok, result.errors
    assert result.config.docs.paths == ["guide/**", "README.md"]
    assert not result.config.skill_enabled("docs") and result.config.skill_enabled("author")
    assert parse_repo_config(None).config.skill_enabled("docs")
    assert parse_repo_config("docs:\n  paths: []\n").errors == [
        "docs.paths: List should have at least 1 item after validation, not 0 (got a list)"
    ]
    assert parse_repo_config("docs:\n  paths: ['  ']\n").errors[0].startswith("docs.paths")
    assert parse_repo_config("docs:\n  path: [a]\n").errors[0].startswith("docs.path: unknown setting")
