"""What a run writes and where, decided before its checkout: its branch, its start, its writable paths.

Most runs need nothing here: a new `beam/<pr|issue>-<N>/<skill>-<run8>` branch at the PR head (or the
default branch), with the repository's blocked paths. `/beam docs` names its branch `docs-<run8>`,
may write only `docs.paths`, and gets a documentation prompt. A follow-up `/beam author` on the bot's
own pull request continues that pull request's branch from its tip, with the review comments as
context; which branches count as the bot's own is decided by the approvals layer (`FindFollowUp`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from bot.app.context.prompt import ReviewNote
from bot.app.github.models import PullRequest


@dataclass(frozen=True, slots=True)
class FollowUp:
    """The run continues `branch` (the bot's own, in this repository) from its tip."""

    branch: str
    notes: tuple[ReviewNote, ...] = ()


FindFollowUp = Callable[[PullRequest], Awaitable["FollowUp | None"]]


@dataclass(frozen=True, slots=True)
class RunPlan:
    label: str | None = None  # the branch's last part is `<label>-<run8>`; the skill when None
    allowed_paths: tuple[str, ...] | None = None  # None: everything not blocked
    guidance: str = ""  # said to the model before the request (e.g. the documentation rules)
    default_task: str | None = None  # the request when the comment has no text
    follow_up: FindFollowUp | None = None
    refusals_for_model: frozenset[str] = field(default_factory=frozenset)  # BEM codes the model sees
