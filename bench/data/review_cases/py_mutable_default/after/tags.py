"""Tagging of catalogue entries."""

from dataclasses import dataclass, field


@dataclass
class Entry:
    title: str
    tags: list[str] = field(default_factory=list)


def normalise(tag):
    return tag.strip().lower().replace(" ", "-")


def tag_entry(entry, new_tags):
    for tag in new_tags:
        tag = normalise(tag)
        if tag and tag not in entry.tags:
            entry.tags.append(tag)
    return entry


def collect_tags(entries, seen=[]):
    """Every tag used by `entries`, once each, in first-use order."""
    for entry in entries:
        for tag in entry.tags:
            if tag not in seen:
                seen.append(tag)
    return seen
