"""The repository config and the permission are one GitHub round trip; the config is revalidated
with its ETag (a 304 serves the cached text), and a changed file is read again."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import anyio
import httpx
import pytest

from bot.app.github.client import GitHubError, InstallationClient
from bot.app.webhooks.config_fetch import load_config_and_permission
from tests.support.fake_github import FakeGitHub, checked_fake_github, installation_client

REPO = "octo-org/hello-world"
OWNER, NAME = REPO.split("/")
INSTALLATION = 31
CONFIG = ".github/beam.yml"

pytestmark = pytest.mark.anyio


class Barrier(httpx.AsyncBaseTransport):
    """Holds every request to the two paths until both have been sent: sequential calls never finish."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner
        self.waiting: set[str] = set()
        self.both = anyio.Event()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        kind = "config" if "/contents/" in path else "permission" if "/permission" in path else None
        if kind is not None:
            self.waiting.add(kind)
            if self.waiting == {"config", "permission"}:
                self.both.set()
            await self.both.wait()
        return await self.inner.handle_async_request(request)


@pytest.fixture
def fake() -> Iterator[FakeGitHub]:
    with checked_fake_github(token_lifetime=3600) as fake:
        fake.add_repo(REPO, installation_id=INSTALLATION)
        fake.add_collaborator(REPO, "maintainer", "maintain")
        fake.set_file(REPO, "main", CONFIG, "trigger_permission: write\n")
        yield fake


@pytest.fixture
async def barrier(fake: FakeGitHub) -> AsyncIterator[tuple[Barrier, InstallationClient]]:
    transport = Barrier(fake.transport())
    async with installation_client(fake, INSTALLATION, transport) as client:
        yield transport, client


async def test_config_and_permission_are_asked_at_once(
    fake: FakeGitHub, barrier: tuple[Barrier, InstallationClient]
) -> None:
    transport, gh = barrier
    with anyio.fail_after(10):  # asked one after the other, the barrier would never open
        config, permission = await load_config_and_permission(gh, OWNER, NAME, "main", "maintainer")
    assert transport.both.is_set()
    assert (config.found, config.config.trigger_permission, permission) == (True, "write", "write")


async def test_an_unchanged_config_is_revalidated_for_free_and_a_changed_one_read_again(
    fake: FakeGitHub, barrier: tuple[Barrier, InstallationClient]
) -> None:
    _, gh = barrier
    first, _ = await load_config_and_permission(gh, OWNER, NAME, "main", "maintainer")
    again, _ = await load_config_and_permission(gh, OWNER, NAME, "main", "maintainer")
    assert first.config == again.config
    reads = fake.calls_to("repos/get-content")
    assert len(reads) == 2 and "if-none-match" not in reads[0].headers
    assert reads[1].headers["if-none-match"]
    assert fake.not_modified == 1 and gh.app.files.hits == 1  # the 304 served the cached text
    fake.set_file(REPO, "main", CONFIG, "trigger_permission: admin\n")
    changed, permission = await load_config_and_permission(gh, OWNER, NAME, "main", "maintainer")
    assert changed.config.trigger_permission == "admin" and permission == "write"
    assert fake.not_modified == 1  # the edit changed the ETag: read in full


async def test_a_failure_is_raised_as_itself_not_as_a_group(
    fake: FakeGitHub, barrier: tuple[Barrier, InstallationClient]
) -> None:
    _, gh = barrier
    fake.inject("GET", "/permission$", status=403, times=None)
    with pytest.raises(GitHubError) as raised:
        await load_config_and_permission(gh, OWNER, NAME, "main", "maintainer")
    assert raised.value.status == 403


async def test_a_deleted_config_is_forgotten(
    fake: FakeGitHub, barrier: tuple[Barrier, InstallationClient]
) -> None:
    transport, gh = barrier
    transport.both.set()  # single reads here: nothing to wait for
    assert await gh.get_file(OWNER, NAME, CONFIG, "main") == "trigger_permission: write\n"
    fake.repo(REPO).files.pop(("main", CONFIG), None)
    assert await gh.get_file(OWNER, NAME, CONFIG, "main") is None
    entry = gh.app.files.get((INSTALLATION, OWNER, NAME, CONFIG, "main"))
    assert entry is not None and (entry.text, entry.etag) == (None, "")  # remembered as absent
    fake.set_file(REPO, "main", CONFIG, "trigger_permission: admin\n")
    assert await gh.get_file(OWNER, NAME, CONFIG, "main") == "trigger_permission: admin\n"
    assert "if-none-match" not in fake.calls_to("repos/get-content")[-1].headers  # nothing to match


async def test_a_recent_answer_is_served_without_asking_and_only_while_recent(
    fake: FakeGitHub, barrier: tuple[Barrier, InstallationClient]
) -> None:
    """`recent_file` asks nothing: it has the last answer GitHub confirmed less than `max_age` ago
    (a 200 or a 304; a 404 is an answer too), else None."""
    transport, gh = barrier
    transport.both.set()
    now = [1000.0]
    gh.app.files.clock = lambda: now[0]
    assert gh.recent_file(OWNER, NAME, CONFIG, "main", 5) is None  # never read
    assert await gh.get_file(OWNER, NAME, CONFIG, "main") == "trigger_permission: write\n"
    now[0] += 4.9
    fake.set_file(REPO, "main", CONFIG, "trigger_permission: admin\n")
    recent = gh.recent_file(OWNER, NAME, CONFIG, "main", 5)
    assert recent is not None and recent.text == "trigger_permission: write\n"
    assert len(fake.calls_to("repos/get-content")) == 1 and gh.app.files.fresh_hits == 1
    now[0] += 0.2
    assert gh.recent_file(OWNER, NAME, CONFIG, "main", 5) is None  # too old now
    fake.set_file(REPO, "main", CONFIG, "trigger_permission: write\n")
    assert await gh.get_file(OWNER, NAME, CONFIG, "main") == "trigger_permission: write\n"
    assert fake.not_modified == 1  # the same text again: a 304, which confirms the entry anew
    now[0] += 4.9
    recent = gh.recent_file(OWNER, NAME, CONFIG, "main", 5)
    assert recent is not None and recent.text == "trigger_permission: write\n"
    missing = ".github/other.yml"
    assert await gh.get_file(OWNER, NAME, missing, "main") is None
    recent = gh.recent_file(OWNER, NAME, missing, "main", 5)
    assert recent is not None and recent.text is None
    assert len(fake.calls_to("repos/get-content")) == 3
