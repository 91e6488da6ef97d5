"""`BlobBudget`: the blob bytes one run may fetch into a partial mirror (`BEAM_MAX_FETCH_BYTES`).

A review of a monorepo reads what it reads: each blob a tool asks for is fetched once, on demand,
into the mirror (mirrors.py `fetch_known`). Without a cap, a model that searches the whole tree would
fetch the whole repository, in time and disk. The budget counts the bytes of what it fetched; once
they pass the cap, a read that needs a fetch is refused with BEM-357, which goes back to the model as
the tool's result and into the review's notes (runs/render.py `fetch_cap_note`). A blob is counted
after its fetch (git cannot say its size before), so a run fetches at most the cap and one request.
"""

from __future__ import annotations

from collections.abc import Sequence

import anyio.from_thread
import pygit2

from bot.app.git.mirrors import Mirrors
from bot.app.git.plumbing import CheckoutError
from bot.beam.errors import BeamError


class BlobBudget:
    """The `fetch` of one run's `CommitTree`: called from a worker thread, it fetches on the event loop."""

    def __init__(self, mirrors: Mirrors, repo_full_name: str, limit: int) -> None:
        self.mirrors = mirrors
        self.repo_full_name = repo_full_name
        self.limit = limit
        self.fetched = 0  # blobs
        self.fetched_bytes = 0

    def __call__(self, oids: Sequence[str]) -> None:
        if self.fetched_bytes >= self.limit:
            raise self._refused()
        try:
            anyio.from_thread.run(self.mirrors.fetch_known, self.repo_full_name, list(oids))
        except CheckoutError as error:
            raise BeamError("BEM-336", error.message) from None
        repo = pygit2.Repository(str(self.mirrors.mirror_path(self.repo_full_name)))
        try:
            for oid in oids:
                blob = repo.get(oid)
                if isinstance(blob, pygit2.Blob):
                    self.fetched += 1
                    self.fetched_bytes += blob.size
        finally:
            repo.free()
        if self.fetched_bytes > self.limit:
            raise self._refused()

    def _refused(self) -> BeamError:
        return BeamError(
            "BEM-357",
            f"this run has fetched {self.fetched_bytes} bytes of files, the server's limit is {self.limit} "
            "(BEAM_MAX_FETCH_BYTES); review with what you have read",
        )
