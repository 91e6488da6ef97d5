"""`GitHubEffects`: the one path every GitHub write of a job takes, each exactly once.

Each write has a key (run id + step). The journal records the intent before the call and the answer
after it. A write already `done` returns its stored answer; a write left at `intent` (an attempt died
before, during or right after the call) first reads GitHub to find out whether it happened:

- comments, replies and reviews: every body we write ends with a hidden `beam-effect` marker holding
  the key, found by listing the issue's comments, the pull request's review comments or its reviews;
- pull requests: the open pull requests of the head branch;
- check runs: created with `external_id` = the key, found among the head commit's check runs;
- pushes: the branch tip on the remote;
- reactions: GitHub keeps one reaction per user and content, so making it again is harmless.

What is found is adopted (and a comment whose body differs from what this attempt wants is edited to
it), so a retry never posts a second object and never leaves the first one behind.

A marker proves nothing by itself: anyone who can get text into a comment under the bot's login (a
model's answer quoting a pull request, before `markdown.untrusted` existed; a text path we missed) can
copy one, and a retry would then adopt the look-alike and never write the real thing (issue 40). So
before a comment, reply or review is sent, its intent records the digest of the exact body
(`proof_of`, each attempt's body when retries differ), and a retry adopts only an object whose body
has one of those digests: a body only this bot, writing this key, can have sent. The digest is taken
of the body as written, line ends and trailing spaces aside (what a server might normalise), and the
marker is its last line, so a look-alike would have to be the whole intended body, word for word.

A write begun by an attempt that died may still be alive at GitHub: a POST that GitHub completes a few
seconds after the kill is not there yet when the retry looks (issue 23). So a retry reads back only
once the intent is older than the longest such a request can live (our client's timeout or GitHub's
10 s limit, whichever is shorter, plus a margin); before that it reschedules the job to that moment
(`Reschedule`, raised to the worker pool) instead of sleeping in the worker.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from bot.app.effects.crash import NO_CRASH, CrashPoints
from bot.app.effects.journal import Journal
from bot.app.fence import before_write
from bot.app.github.client import InlineComment, InstallationClient, ReactionContent
from bot.app.github.timeouts import in_flight_seconds
from bot.app.jobs.signals import Reschedule

log = logging.getLogger("beam.effects")

MARKER = "<!-- beam-effect:{key} -->"


def marker(key: str) -> str:
    return MARKER.format(key=key)


def with_marker(body: str, key: str) -> str:
    """The body as written to GitHub: the text, then the key's hidden marker (once)."""
    mark = marker(key)
    return body if body.endswith(mark) else f"{body}\n{mark}"


def proof_of(body: str) -> str:
    """The digest a retry knows a body of ours by: the body as written, with its line ends and each
    line's trailing spaces normalised (all a server may change without changing what it says)."""
    lines = body.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    normal = "\n".join(line.rstrip() for line in lines).strip()
    return hashlib.sha256(normal.encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class Written:
    """What a write left on GitHub: the object's id and address, and the body as written."""

    id: int
    html_url: str = ""
    body: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "html_url": self.html_url, "body": self.body}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Written:
        return cls(int(data.get("id") or 0), str(data.get("html_url") or ""), str(data.get("body") or ""))


# Looks on GitHub for a write begun at `since` (epoch seconds, when its intent was recorded).
Find = Callable[[float], Awaitable["Written | None"]]
SKEW = 300.0  # seconds of clock difference between us and GitHub that a search allows for
Make = Callable[[], Awaitable[Written]]
IN_FLIGHT_SECONDS = in_flight_seconds()


class GitHubEffects:
    """One job's writes on GitHub as one installation; every method is safe to call again."""

    def __init__(
        self,
        gh: InstallationClient,
        journal: Journal,
        crash: CrashPoints = NO_CRASH,
        *,
        in_flight: float = IN_FLIGHT_SECONDS,
    ) -> None:
        self.gh = gh
        self.journal = journal
        self.crash = crash
        self.in_flight = in_flight

    async def settle_run(self, run_id: str) -> None:
        """Before a retried run does anything: reschedule it while a write its dead attempt began may
        still land, so the work before that write (a model call) is not done twice for nothing."""
        since = await self.journal.newest_open_intent(f"{run_id}:")
        if since is not None:
            self._settled(since)

    def _settled(self, since: float) -> None:
        """Raise `Reschedule` while a write whose intent dates from `since` could still land."""
        settles_at = since + self.in_flight
        if self.journal.store.clock() < settles_at:
            log.info(
                "a write begun %.1f s ago may still land at GitHub: looking again then",
                self.journal.store.clock() - since,
            )
            raise Reschedule(settles_at)

    async def once(
        self, key: str, kind: str, find: Find | None, make: Make, *, body: str | None = None
    ) -> Written:
        """The write `key` made at most once: done -> its answer; begun -> what `find` sees; else make.

        `body`: what `make` sends, whose digest the intent records first (`proof_of`), so that `find`
        can tell the object this bot sent from a copy of its marker."""
        entry = await self.journal.lookup(key)
        if entry is not None and entry.state == "done":
            return Written.from_json(entry.result)
        if entry is not None and find is not None:
            self._settled(entry.created_at)
            found = await find(entry.created_at)
            if found is not None:
                log.info("effect %s (%s): an earlier attempt made it; adopting %s", key, kind, found.id)
                await self.journal.record(key, kind, found.to_json())
                return found
        if entry is None or body is not None:
            await self.journal.intend(key, kind, None if body is None else proof_of(body))
        self.crash.hit(kind, "before")
        # Before a write that is not an API call (a git push) too: only while the job is ours.
        await before_write()
        written = await make()
        self.crash.hit(kind, "after")
        await self.journal.record(key, kind, written.to_json())
        return written

    async def proofs(self, key: str) -> frozenset[str]:
        """The digests of the bodies attempts began to send under `key` (none once it is done)."""
        return Journal.proofs(await self.journal.lookup(key))

    async def done(self, key: str) -> Written | None:
        """The answer of write `key` if it is recorded as done (no GitHub call)."""
        entry = await self.journal.lookup(key)
        return Written.from_json(entry.result) if entry is not None and entry.state == "done" else None

    # -- issue comments -------------------------------------------------------------------------

    async def comment(
        self, key: str, owner: str, repo: str, number: int, body: str, *, kind: str = "comment"
    ) -> Written:
        text = with_marker(body, key)

        async def find(since: float) -> Written | None:
            # Only comments updated since the intent (less a margin for clocks): a busy thread's
            # older comments need not be read. Only a body an attempt of ours sent is adopted.
            proofs = await self.proofs(key)
            if not proofs:  # an intent from before proofs were kept: nothing can be shown ours
                return None
            for found in await self.gh.list_comments(owner, repo, number, since=since - SKEW):
                if found.body and proof_of(found.body) in proofs:
                    if found.body != text:  # adopt it, and make it say what this attempt says
                        await self.gh.update_comment(owner, repo, found.id, text)
                    return Written(found.id, found.html_url, text)
            return None

        async def make() -> Written:
            made = await self.gh.create_comment(owner, repo, number, text)
            return Written(made.id, made.html_url, text)

        return await self.once(key, kind, find, make, body=text)

    async def edit(
        self, key: str | None, owner: str, repo: str, comment_id: int, body: str, *, kind: str = "edit"
    ) -> None:
        """Edit a comment we wrote; `key` is the key it was created under (its marker is kept).

        An edit sets the whole body, so making it twice is harmless and it needs no journal row; a
        caller that must know an edit landed (the final state of a tracking comment) records the
        body it wants first, and makes the edit again on a retry.
        """
        text = body if key is None else with_marker(body, key)
        self.crash.hit(kind, "before")
        await self.gh.update_comment(owner, repo, comment_id, text)
        self.crash.hit(kind, "after")

    async def settle(self, key: str, kind: str, find: Find) -> Written | None:
        """Whether write `key` happened, without making it: done -> its answer; begun -> `find`."""
        entry = await self.journal.lookup(key)
        if entry is None:
            return None
        if entry.state == "done":
            return Written.from_json(entry.result)
        self._settled(entry.created_at)
        found = await find(entry.created_at)
        if found is not None:
            await self.journal.record(key, kind, found.to_json())
        return found

    async def find_review(self, key: str, owner: str, repo: str, number: int) -> Written | None:
        """The review an attempt of ours began under `key` and GitHub made: one whose body it sent."""
        proofs = await self.proofs(key)
        if not proofs:
            return None
        for found in await self.gh.list_reviews(owner, repo, number):
            if found.body and proof_of(found.body) in proofs:
                return Written(found.id, found.html_url, found.body)
        return None

    # -- reactions ------------------------------------------------------------------------------

    async def react(
        self,
        key: str,
        owner: str,
        repo: str,
        comment_id: int,
        content: ReactionContent,
        *,
        review_comment: bool = False,
    ) -> Written:
        async def make() -> Written:
            made = await self.gh.add_reaction(owner, repo, comment_id, content, review_comment=review_comment)
            return Written(made.id)

        # GitHub keeps one reaction per user and content: making it again answers the existing one.
        return await self.once(key, "reaction", None, make)

    # -- pull request reviews and review-comment replies -----------------------------------------

    async def review(
        self,
        key: str,
        owner: str,
        repo: str,
        number: int,
        *,
        commit_id: str,
        body: str,
        comments: Iterable[InlineComment] = (),
    ) -> Written:
        text = with_marker(body, key)
        inline = list(comments)

        async def find(since: float) -> Written | None:
            return await self.find_review(key, owner, repo, number)

        async def make() -> Written:
            made = await self.gh.create_review(
                owner, repo, number, commit_id=commit_id, body=text, comments=inline
            )
            return Written(made.id, made.html_url, text)

        return await self.once(key, "review", find, make, body=text)

    async def reply(
        self, key: str, owner: str, repo: str, pull_number: int, comment_id: int, body: str
    ) -> Written:
        text = with_marker(body, key)

        async def find(since: float) -> Written | None:
            proofs = await self.proofs(key)
            if not proofs:
                return None
            for found in await self.gh.list_review_comments(owner, repo, pull_number, limit=3000):
                if found.body and proof_of(found.body) in proofs:
                    return Written(found.id, found.html_url, found.body)
            return None

        async def make() -> Written:
            made = await self.gh.reply_to_review_comment(owner, repo, pull_number, comment_id, text)
            return Written(made.id, made.html_url, text)

        return await self.once(key, "reply", find, make, body=text)

    # -- check runs ---------------------------------------------------------------------------------

    async def check_run(self, key: str, owner: str, repo: str, head_sha: str, name: str) -> Written:
        """Create check run `name` on `head_sha` once (queued); its updates, by id, are idempotent."""

        async def find(since: float) -> Written | None:
            for found in await self.gh.list_check_runs(owner, repo, head_sha, name):
                if found.external_id == key:
                    return Written(found.id, found.html_url or "")
            return None

        async def make() -> Written:
            made = await self.gh.create_check_run(owner, repo, name, head_sha, external_id=key)
            return Written(made.id, made.html_url or "")

        return await self.once(key, "check_run", find, make)

    async def update_check_run(self, owner: str, repo: str, check_id: int, **fields: Any) -> None:
        """Update check run `check_id` (status, conclusion, output): it sets the fields it names, so
        making it twice is harmless and it needs no journal row, as `edit`."""
        self.crash.hit("check_update", "before")
        await self.gh.update_check_run(owner, repo, check_id, **fields)
        self.crash.hit("check_update", "after")

    # -- pull requests and pushes ---------------------------------------------------------------

    async def pull(
        self,
        key: str,
        owner: str,
        repo: str,
        *,
        title: str,
        head: str,
        base: str,
        body: str,
        draft: bool = False,
    ) -> Written:
        text = with_marker(body, key)

        async def find(since: float) -> Written | None:
            for found in await self.gh.list_open_pulls(owner, repo, f"{owner}:{head}"):
                if found.base.ref == base:
                    return Written(found.number, found.html_url, found.body or "")
            return None

        async def make() -> Written:
            made = await self.gh.create_pull(
                owner, repo, title=title, head=head, base=base, body=text, draft=draft
            )
            return Written(made.number, made.html_url, text)

        return await self.once(key, "pull", find, make)

    async def push(
        self,
        key: str,
        commit: str,
        tip: Callable[[], Awaitable[str | None]],
        push: Callable[[], Awaitable[None]],
    ) -> Written:
        """Push `commit` once: an earlier attempt's push is found by the branch tip on the remote."""

        async def find(since: float) -> Written | None:
            return Written(0, "", commit) if await tip() == commit else None

        async def make() -> Written:
            await push()
            return Written(0, "", commit)

        return await self.once(key, "push", find, make)
