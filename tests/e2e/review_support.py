"""Shared set-up for the automatic-review end-to-end tests: a pull request on real git whose pushes,
merges and force-pushes update the fake GitHub as GitHub would (files, compare, refs), deliveries
built from the fake's current state, and readers for what the bot left (reviews, summary, checks)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pygit2

from tests.support.bot_process import SECRET, BotProcess, bot_stack, wait_for
from tests.support.fake_github_state import CheckRun, Comment, Pull, PullFile, Review
from tests.support.webhooks import delivery, load_payload, review_comment_payload

REPO = "octo/demo"
NUMBER = 7
BOT = "beam-bot[bot]"
CONFIG = "version: 1\nauto_review:\n  enabled: true\n  debounce: 2s\n"
CALC = "".join(f"def f{n}(x):\n    return x + {n}\n\n" for n in range(1, 11))
BASE_FILES = {"README.md": "Demo\n", "src/calc.py": CALC, "docs/notes.md": "Notes\n"}


def _patch(patch: pygit2.Patch) -> str:
    out: list[str] = []
    for hunk in patch.hunks:
        out.append(hunk.header.rstrip("\n"))
        for line in hunk.lines:
            if line.origin in "+- ":
                out.append(line.origin + line.content.rstrip("\n"))
            else:
                out.append("\\ No newline at end of file")
    return "\n".join(out)


_STATUS = {"A": "added", "D": "removed", "R": "renamed", "M": "modified"}


def diff_files(repo: pygit2.Repository, old: str, new: str) -> list[PullFile]:
    """What GitHub lists for `old...new`: the diff from their merge base to `new`."""
    base = repo.merge_base(old, new)
    diff = repo.diff(repo[base].peel(pygit2.Tree), repo[new].peel(pygit2.Tree), context_lines=3)
    diff.find_similar()
    files: list[PullFile] = []
    for patch in diff:
        delta = patch.delta
        _, adds, dels = patch.line_stats
        status = _STATUS.get(delta.status_char(), "modified")
        text = None if delta.is_binary else _patch(patch)
        previous = delta.old_file.path if status == "renamed" else None
        files.append(PullFile(delta.new_file.path, status, adds, dels, text, previous))
    return files


class Story:
    """The pull request `octo/demo#7` from `feature` into `main`, and the bot that reviews it."""

    def __init__(self, bot: BotProcess) -> None:
        self.bot = bot
        self.main = ""

    @property
    def repo(self) -> pygit2.Repository:
        return self.bot.git.repository(REPO)

    @property
    def pull(self) -> Pull:
        return self.bot.fake.pull(REPO, NUMBER)

    def seed(self, config: str | None, *, draft: bool = False, files: dict[str, str] | None = None) -> None:
        git, fake = self.bot.git, self.bot.fake
        self.main = git.seed(REPO, BASE_FILES)
        head = git.commit(REPO, files or {"src/calc.py": CALC.replace("x + 2", "x - 2")}, branch="feature")
        git.create_pull_ref(REPO, NUMBER, head)
        fake.add_repo(REPO)
        fake.add_collaborator(REPO, "maintainer", "write")
        fake.add_collaborator(REPO, "reader", "read")
        fake.add_bot("ci-bot[bot]")
        if config is not None:
            fake.set_file(REPO, "main", ".github/beam.yml", config)
        fake.add_pull(
            REPO,
            number=NUMBER,
            title="Tweak calc",
            user="contributor",
            head_ref="feature",
            head_sha=head,
            base_sha=self.main,
            draft=draft,
            files=diff_files(self.repo, self.main, head),
        )
        fake.compare_resolver = self.compare

    def compare(self, repo_name: str, base: str, head: str) -> Any:
        repo = self.bot.git.repository(repo_name)
        if base not in repo or head not in repo:
            return None
        ahead, behind = repo.ahead_behind(head, base)
        status = (
            "identical"
            if base == head
            else "ahead"
            if behind == 0
            else "behind"
            if ahead == 0
            else "diverged"
        )
        return status, ahead, behind, diff_files(repo, base, head)

    # -- changes to the pull request, as GitHub records them ------------------------------------

    def _moved(self, head: str) -> str:
        self.bot.git.create_pull_ref(REPO, NUMBER, head)
        pull = self.pull
        pull.head_sha = head
        pull.commits.append(head)
        pull.files = diff_files(self.repo, self.pull.base_sha, head)
        return head

    def push(self, files: dict[str, str | None], message: str = "More", *, parent: str | None = None) -> str:
        """A commit on `feature` (from `parent`: a force-push that drops the old head)."""
        return self._moved(self.bot.git.commit(REPO, files, branch="feature", message=message, parent=parent))

    def merge_base(self, files: dict[str, str]) -> str:
        """A commit on main, merged into `feature` with a merge commit: the PR's own diff is unchanged."""
        self.main = self.bot.git.commit(REPO, files, branch="main", message="Base moves")
        self.pull.base_sha = self.main
        repo = self.repo
        tip = str(repo.references["refs/heads/feature"].target)
        index = repo.merge_commits(tip, self.main)
        assert not index.conflicts
        sig = pygit2.Signature("t", "t@example.com")
        oid = repo.create_commit(None, sig, sig, "Merge main", index.write_tree(repo), [tip, self.main])
        repo.references.create("refs/heads/feature", oid, force=True)
        return self._moved(str(oid))

    # -- deliveries ----------------------------------------------------------------------------

    def payload(self, action: str, **extra: Any) -> dict[str, Any]:
        pull = self.pull
        payload = load_payload("pull_request.synchronize.json")
        payload["action"] = action
        payload["number"] = NUMBER
        payload["installation"] = {"id": 1, "node_id": "MDIzOkludGVncmF0aW9uSW5zdGFsbGF0aW9uMQ=="}
        repo = payload["repository"]
        repo.update(name="demo", full_name=REPO, html_url=f"https://github.com/{REPO}", default_branch="main")
        repo["owner"].update(login="octo", type="Organization")
        repo["clone_url"] = self.bot.git.repo_url(REPO)
        body = payload["pull_request"]
        body.update(number=NUMBER, state=pull.state, draft=pull.draft, title=pull.title)
        body["html_url"] = f"https://github.com/{REPO}/pull/{NUMBER}"
        body["user"].update(login=pull.user, type="User")
        body["labels"] = [
            {"id": n, "name": name, "color": "ededed", "default": False} for n, name in enumerate(pull.labels)
        ]
        body["head"].update(ref=pull.head_ref, sha=pull.head_sha)
        body["base"].update(ref=pull.base_ref, sha=pull.base_sha)
        for side in ("head", "base"):
            body[side]["repo"].update(full_name=REPO, name="demo")
        payload.update(extra)
        return payload

    def send(self, action: str, *, delivery_id: str | None = None, **extra: Any) -> httpx.Response:
        response = self.bot.send(
            delivery("pull_request", self.payload(action, **extra), SECRET, delivery_id=delivery_id)
        )
        assert response.status_code == 202, response.text
        return response

    def reply_in_thread(self, parent: Comment, body: str, *, user: str = "maintainer") -> httpx.Response:
        comment = self.bot.fake.add_review_comment(
            REPO, NUMBER, body, user=user, path=parent.path or "", line=parent.line or 1
        )
        comment.in_reply_to = parent.id
        if user.endswith("[bot]"):
            self.bot.fake.add_bot(user)
        payload = review_comment_payload(
            body,
            repo=REPO,
            number=NUMBER,
            commenter=user,
            comment_id=comment.id,
            commenter_type="Bot" if user.endswith("[bot]") else "User",
            path=parent.path or "",
            line=parent.line or 1,
        )
        payload["comment"]["in_reply_to_id"] = parent.id
        payload["pull_request"]["head"]["sha"] = self.pull.head_sha
        payload["repository"]["clone_url"] = self.bot.git.repo_url(REPO)
        response = self.bot.send(delivery("pull_request_review_comment", payload, SECRET))
        assert response.status_code == 202, response.text
        return response

    # -- what the bot left -----------------------------------------------------------------------

    def reviews(self) -> list[Review]:
        return self.bot.fake.reviews_on(REPO, NUMBER)

    def review_comments(self, review: Review) -> list[Comment]:
        return [self.bot.fake.comments[i] for i in review.comment_ids]

    def bot_comments(self) -> list[Comment]:
        return [c for c in self.bot.fake.comments_on(REPO, NUMBER) if c.user == BOT]

    def summary(self) -> str:
        found = self.bot_comments()
        assert len(found) <= 1, [c.body for c in found]
        return found[0].body if found else ""

    def checks(self) -> list[CheckRun]:
        return sorted(self.bot.fake.check_runs.values(), key=lambda c: c.id)

    def wait_summary(self, text: str, *, timeout: float = 40) -> str:
        try:
            # The summary is edited before the check run completes and the job ends: wait for all.
            wait_for(lambda: text in self.summary() and self.review_jobs_done(), timeout=timeout, what="")
            return self.summary()
        except AssertionError:
            raise AssertionError(
                f"the summary never said {text!r}:\n{self.summary()}\n--- bot log:\n{self.bot.log()[-6000:]}"
            ) from None

    def review_jobs_done(self) -> bool:
        import sqlite3

        with sqlite3.connect(self.bot.work_dir / "beam.db") as db:
            states = [r[0] for r in db.execute("SELECT state FROM jobs")]
        return bool(states) and all(s in ("done", "failed", "dead") for s in states)

    def script_review(
        self, comments: list[dict[str, Any]], body: str = "Looks mostly fine.", *, delay: float = 0.0
    ) -> None:
        llm = self.bot.llm
        if delay:
            from tests.support.openai_server import chat_response, tool_call, tool_calls_message

            message = tool_calls_message([tool_call("review_change", {"body": body, "comments": comments})])
            llm.enqueue(chat_response(message), delay=delay)
        else:
            llm.reply_tool_calls(("review_change", {"body": body, "comments": comments}))
            llm.reply_text("Review posted.")  # a delayed review is the one that gets stopped


@contextmanager
def review_stack(
    tmp_path: Path,
    config: str | None = CONFIG,
    *,
    draft: bool = False,
    files: dict[str, str] | None = None,
    structured: bool = False,
    **env: str,
) -> Iterator[Story]:
    """The bot and its fake GitHub with a seeded pull request. `structured`: the model server takes
    schemas from the start, as the start's model check finds it (a refusal then is remembered)."""
    with bot_stack(tmp_path, **env) as bot:
        bot.llm.structured = structured
        story = Story(bot)
        story.seed(config, draft=draft, files=files)
        bot.start()
        yield story


def tool_results(bot: BotProcess) -> list[Any]:
    """Every tool result the model was sent, parsed."""
    out = []
    for request in bot.llm.requests:
        for message in request["messages"]:
            if message["role"] == "tool":
                try:
                    out.append(json.loads(message["content"]))
                except ValueError:
                    out.append(message["content"])
    return out
