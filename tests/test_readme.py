"""The examples of the documentation work as written: the framework's Python (sandbox path moved to a
temp folder) and the `.github/beam.yml` files, which the bot reads without a problem."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import anyio
import pytest

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
