"""The examples of the documentation work as written: the framework's Python (sandbox path moved to a
temp folder) and the `.github/beam.yml` files, which the bot reads without a problem."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml

from bot.app.repo_config import parse_repo_config

DOCS = Path(__file__).resolve().parent.parent / "docs"
FRAMEWORK_DOC = DOCS / "framework.md"


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", FRAMEWORK_DOC.read_text(encoding="utf-8"), re.S)


def test_framework_examples_run(tmp_path: Path) -> None:
    blocks = python_blocks()
    assert len(blocks) >= 2
    source = "\n".join(blocks).replace("/srv/agent-work/docs", str(tmp_path / "docs"))
    body = textwrap.indent(source, "    ")
    namespace: dict[str, object] = {}
    code = compile(f"async def example():\n{body}\n    return locals()\n", "docs/framework.md", "exec")
    exec(code, namespace)  # noqa: S102
    result = anyio.run(namespace["example"])  # type: ignore[arg-type]
    assert result["outcome"].result.text == "Echo: hello"
    word_count = result["WordCount"]()
    assert anyio.run(word_count.invoke, {"text": "a b c"}, None) == {"words": 3}
    assert (tmp_path / "docs" / ".git").is_dir()


def beam_yml_blocks(page: Path) -> list[str]:
    blocks = re.findall(r"```yaml\n(.*?)```", page.read_text(encoding="utf-8"), re.S)
    return [block for block in blocks if block.startswith("# .github/beam.yml")]


@pytest.mark.parametrize("name", ["configuration.md", "costs-and-limits.md"])
def test_beam_yml_examples_parse_without_a_problem(name: str) -> None:
    (block,) = beam_yml_blocks(DOCS / name)
    result = parse_repo_config(block)
    assert result.found and result.errors == []
    if name == "configuration.md":  # the full example sets every section
        config = result.config
        assert config.skills == ["review", "summarize", "commit-notes", "ask", "author", "docs"]
        assert config.auto_review.enabled is True and config.auto_review.max_changed_lines == 3000
        assert config.limits.max_tokens_per_run == 200000 and config.docs.paths[-1] == "mkdocs.yml"
        assert config.approvals_required == 2 and config.expiry == "3d"
    else:
        assert result.config.limits.max_minutes_per_run == 10


ROOT = DOCS.parent


def workflow_example() -> dict[str, Any]:
    (block,) = re.findall(
        r"```yaml\n(name: beam\n.*?)```", (DOCS / "action.md").read_text(encoding="utf-8"), re.S
    )
    loaded: dict[str, Any] = yaml.safe_load(block)
    return loaded


def test_the_action_installs_this_repository_and_runs_beam_bot_action() -> None:
    action = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))
    assert action["runs"]["using"] == "composite"
    steps = action["runs"]["steps"]
    assert steps[0]["uses"].startswith("actions/setup-python@")
    install, answer, finish = steps[1], steps[2], steps[3]
    assert '"$ACTION_PATH"' in install["run"] and "requirements.lock" in install["run"]
    assert answer["run"].strip().strip("'").endswith('beam-bot" action')
    assert set(action["inputs"]) >= {"api-key", "provider", "api-base-url", "model", "github-token"}
    # A provider's own key in the step's `env:` is enough: `api-key` may be left out.
    assert action["inputs"]["api-key"]["required"] is False
    # No expression is spliced into a script: values reach the shell as environment variables.
    for step in steps[1:]:
        assert "${{" not in step["run"], step["run"]
    assert answer["env"]["BEAM_ACTION_API_KEY"] == "${{ inputs.api-key }}"
    assert answer["env"]["BEAM_ACTION_PROVIDER"] == "${{ inputs.provider }}"
    # The last step runs when the job was cancelled or timed out too, reading `job.status` from env.
    assert steps[-1] is finish and finish["if"] == "always()"
    assert finish["env"]["BEAM_JOB_STATUS"] == "${{ job.status }}"
    assert 'beam-bot" action --finish' in finish["run"]
    assert set(action["outputs"]) == {"outcome", "review-url", "findings"}
    for name, output in action["outputs"].items():
        assert "steps.answer.outputs." in output["value"], name


def test_the_documented_workflow_avoids_the_known_threats() -> None:
    workflow = workflow_example()
    events = workflow[True]  # YAML 1.1 reads the key `on` as true
    assert "pull_request_target" not in events and "workflow_run" not in events
    assert set(events) == {"issue_comment", "pull_request_review_comment", "pull_request"}
    assert events["pull_request"]["types"] == ["opened", "synchronize", "ready_for_review"]
    assert workflow["permissions"] == {}
    for name, job in workflow["jobs"].items():
        assert job["permissions"], name  # a minimum per job
        assert "contents" in job["permissions"], name
        steps = job["steps"]
        # One step: the Action. Nothing checks out or runs the pull request's code beside the key.
        assert [s.get("uses", "").split("@")[0] for s in steps] == ["OWNER/beam-bot"], name
        assert steps[0]["with"]["api-key"] == "${{ secrets.BEAM_API_KEY }}"
    assert workflow["jobs"]["review"]["permissions"]["contents"] == "read"  # reviews never push
    assert "head.repo.full_name == github.repository" in workflow["jobs"]["review"]["if"]
    text = (DOCS / "action.md").read_text(encoding="utf-8")
    for threat in ("pull_request_target", "permissions: {}", "secret", "Clinejection", "/beam approve"):
        assert threat in text, threat


def test_the_readme_quick_start_shows_three_ways_in() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    quick = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    # The Action: a workflow to copy that keeps the documented workflow's safeguards.
    (block,) = re.findall(r"```yaml\n(.*?)```", quick, re.S)
    workflow = yaml.safe_load(block)
    assert "pull_request_target" not in workflow[True] and workflow["permissions"] == {}
    [job] = workflow["jobs"].values()
    assert job["permissions"] and [s["uses"].split("@")[0] for s in job["steps"]] == ["OWNER/beam-bot"]
    assert job["steps"][0]["with"]["api-key"] == "${{ secrets.BEAM_API_KEY }}"
    assert "(docs/action.md)" in quick
    # The terminal, and the App with exactly its two set-up commands.
    assert ".venv/bin/beam-bot review https://github.com/OWNER/REPO/pull/123" in quick
    commands = [line for line in quick.splitlines() if line.startswith("python3 -m venv")]
    assert commands == [
        "python3 -m venv .venv && .venv/bin/pip install -e .",
        "python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/beam-bot serve",
        "python3 -m venv .venv && .venv/bin/pip install -c requirements-test.lock "
        '-e ".[test]" && .venv/bin/pytest',
    ]


def test_every_example_points_at_v1_or_a_commit_and_the_release_is_documented() -> None:
    texts = [
        (ROOT / "README.md").read_text(encoding="utf-8"),
        (DOCS / "action.md").read_text(encoding="utf-8"),
    ]
    refs = [ref for text in texts for ref in re.findall(r"uses: OWNER/beam-bot@([^\s`]+)", text)]
    assert refs and all(ref == "v1" or re.fullmatch(r"[0-9a-f]{40}", ref) for ref in refs), refs
    action = texts[1]
    assert "## Pinning a version" in action and "### Cutting a release" in action
    assert "git push -f origin v1" in action
