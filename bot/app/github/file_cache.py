"""Files read through the contents API, kept with their ETag and blob sha: a revalidation is free.

The bot reads `.github/beam.yml` for every command. GitHub answers a conditional request
(`If-None-Match`) for an unchanged file with `304 Not Modified`, which costs no rate limit and no
body; the cached text is then used as is. An edit to the file changes its blob sha and its ETag, so
the next read gets the new text: nothing is ever served stale, only never downloaded twice.
One cache per process (it hangs off `GitHubApp`), bounded, oldest entries dropped first.

Each entry also says when GitHub last confirmed it, and `fresh` answers only for an entry confirmed
less than `max_age` seconds ago, without asking. A command's run job takes the config that way
when it is the very version its command was admitted with a moment before (webhooks/handlers.py):
one round trip sooner to the tracking comment. A missing file is remembered too (`absent`).

Not gidgethub's `cache`, which cannot keep these guarantees: it is keyed by URL alone (ours by
installation too), its entries have no time (no `fresh`), it keeps 2xx answers only (no `absent`),
and it would hold the body of every GET with an ETag, not config files only (docs/github-adapter.md).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, replace

FileKey = tuple[int, str, str, str, str]  # installation, owner, repo, path, ref


@dataclass(frozen=True, slots=True)
class CachedFile:
    etag: str  # "" for a path GitHub said does not exist (nothing to revalidate with)
    sha: str | None  # the blob sha GitHub reported for this text
    text: str | None  # None: the path is not a readable text file, or there is none
    checked_at: float = 0.0  # the cache's clock when GitHub last confirmed this entry


def absent(checked_at: float) -> CachedFile:
    """What a 404 leaves: no file at that path when GitHub was last asked."""
    return CachedFile("", None, None, checked_at)


class FileCache:
    def __init__(self, max_entries: int = 1024, clock: Callable[[], float] = time.monotonic) -> None:
        self.max_entries = max_entries
        self.clock = clock
        self._entries: OrderedDict[FileKey, CachedFile] = OrderedDict()
        self.hits = 0  # answers served from the cache after a 304
        self.fresh_hits = 0  # answers served without asking (`fresh`)

    def fresh(self, key: FileKey, max_age: float) -> CachedFile | None:
        """The entry if GitHub confirmed it less than `max_age` seconds ago, else None."""
        entry = self.get(key)
        if entry is None or self.clock() - entry.checked_at >= max_age:
            return None
        self.fresh_hits += 1
        return entry

    def confirm(self, key: FileKey, entry: CachedFile) -> CachedFile:
        """GitHub answered 304 for `entry`: keep it, confirmed now."""
        confirmed = replace(entry, checked_at=self.clock())
        self.put(key, confirmed)
        return confirmed

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
