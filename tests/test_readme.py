"""The README's framework examples run as written (with the sandbox path moved to a temp folder)."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import anyio

README = Path(__file__).resolve().parent.parent / "README.md"


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)


def test_readme_examples_run(tmp_path: Path) -> None:
    blocks = python_blocks()
    assert len(blocks) >= 2
    source = "\n".join(blocks).replace("/srv/agent-work/docs", str(tmp_path / "docs"))
    body = textwrap.indent(source, "    ")
    namespace: dict[str, object] = {}
    exec(compile(f"async def example():\n{body}\n    return locals()\n", "README.md", "exec"), namespace)  # noqa: S102
    result = anyio.run(namespace["example"])  # type: ignore[arg-type]
    assert result["outcome"].result.text == "Echo: hello"
    word_count = result["WordCount"]()
    assert anyio.run(word_count.invoke, {"text": "a b c"}, None) == {"words": 3}
    assert (tmp_path / "docs" / ".git").is_dir()
