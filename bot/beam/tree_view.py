"""`FileView` and `ToolTree`: what the tools need of a tree, so one tool serves every kind of tree.

A review reads the pull request's head commit straight from the object store (`CommitTree`), an
author run its own checkout (`WorkingTree`); the tools (sandbox_tools.py, the host's `search` and
`get_page`) take either, and the jail's rules live in the tree, never in the tool.
"""

from __future__ import annotations

from typing import Any, Protocol


class FileView(Protocol):
    """Reading a tree: every path goes through the jail's rules (jail.py `lexical_names`)."""

    def list_files(self, rel: str = "") -> list[str]: ...

    def read_file(self, rel: str) -> str: ...

    def read_bytes(self, rel: str, max_bytes: int | None) -> bytes: ...

    def search(self, rel: str, needle: str) -> dict[str, Any]: ...


class ToolTree(FileView, Protocol):
    """Everything the nine sandbox tools call; a read-only tree refuses the writes (BEM-342)."""

    def write_file(self, rel: str, body: str) -> None: ...

    def status(self) -> list[str]: ...

    def diff(self) -> str: ...

    def log(self, limit: int = 20) -> list[str]: ...

    def add(self, path: str) -> str: ...

    def commit(self, message: str) -> str: ...

    def push(self, ref: str | None = None) -> str: ...
