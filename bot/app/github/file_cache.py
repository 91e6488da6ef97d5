"""Files read through the contents API, kept with their ETag and blob sha: a revalidation is free.

The bot reads `.github/beam.yml` for every command. GitHub answers a conditional request
(`If-None-Match`) for an unchanged file with `304 Not Modified`, which costs no rate limit and no
body; the cached text is then used as is. An edit to the file changes its blob sha and its ETag, so
the next read gets the new text: nothing is ever served stale, only never downloaded twice.
One cache per process (it hangs off `GitHubApp`), bounded, oldest entries dropped first.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

FileKey = tuple[int, str, str, str, str]  # installation, owner, repo, path, ref


@dataclass(frozen=True, slots=True)
class CachedFile:
    etag: str
    sha: str | None  # the blob sha GitHub reported for this text
    text: str | None  # None: the path is not a readable text file


class FileCache:
    def __init__(self, max_entries: int = 1024) -> None:
        self.max_entries = max_entries
        self._entries: OrderedDict[FileKey, CachedFile] = OrderedDict()
        self.hits = 0  # answers served from the cache after a 304

    def get(self, key: FileKey) -> CachedFile | None:
        entry = self._entries.get(key)
        if entry is not None:
            self._entries.move_to_end(key)
        return entry

    def put(self, key: FileKey, entry: CachedFile) -> None:
        self._entries[key] = entry
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)

    def drop(self, key: FileKey) -> None:
        self._entries.pop(key, None)
