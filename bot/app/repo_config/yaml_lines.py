"""A safe YAML loader that refuses duplicate keys, and the line of each key path, for config messages.

PyYAML keeps the last of two equal keys without a word, so `skills: [review]` followed later by
`skills: []` silently means the second; a config file that says two things is refused instead.
`key_lines` maps a path such as `("skills", 2)` to its 1-based line so messages can point at it.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import yaml
from yaml.constructor import ConstructorError
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

Path = tuple[int | str, ...]


class StrictLoader(yaml.SafeLoader):
    """`yaml.SafeLoader` that raises a `ConstructorError` (with both lines) on a duplicate key."""


def _mapping_without_duplicates(loader: StrictLoader, node: MappingNode) -> dict[Any, Any]:
    seen: dict[Hashable, int] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        if isinstance(key, Hashable) and not isinstance(key_node, MappingNode):
            if key in seen:
                raise ConstructorError(
                    None,
                    None,
                    f"duplicate key {key!r} (first at line {seen[key] + 1})",
                    key_node.start_mark,
                )
            seen[key] = key_node.start_mark.line
    return loader.construct_mapping(node, deep=True)


StrictLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
    _mapping_without_duplicates,
)


def key_lines(text: str, limit: int = 10_000) -> dict[Path, int]:
    """Path -> 1-based line of its key (or list item); empty when the text does not compose."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except (yaml.YAMLError, RecursionError):
        return {}
    lines: dict[Path, int] = {}
    seen: set[int] = set()
    stack: list[tuple[Node | None, Path]] = [(root, ())]
    while stack and len(lines) < limit:
        node, path = stack.pop()
        if node is None or id(node) in seen:  # an alias: its first path is enough
            continue
        seen.add(id(node))
        if isinstance(node, MappingNode):
            for key_node, value_node in node.value:
                if isinstance(key_node, ScalarNode):
                    child = (*path, key_node.value)
                    lines.setdefault(child, key_node.start_mark.line + 1)
                    stack.append((value_node, child))
        elif isinstance(node, SequenceNode):
            for index, item in enumerate(node.value):
                child = (*path, index)
                lines.setdefault(child, item.start_mark.line + 1)
                stack.append((item, child))
    return lines


def line_of(lines: dict[Path, int], loc: Path) -> int | None:
    """The line of the longest prefix of `loc` that has one."""
    for end in range(len(loc), 0, -1):
        found = lines.get(tuple(loc[:end]))
        if found is not None:
            return found
    return None
