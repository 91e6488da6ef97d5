"""Helpers of the jail tests (no tests of its own): a skip where bubblewrap cannot isolate, a tree,
one-check runs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.app.checks import bwrap
from bot.app.checks.jail import CheckOutcome, CheckSpec, JailLimits, _run_checks, jail_status

# Small limits: an attack that escapes one must still leave the test machine standing.
SMALL = JailLimits(
    timeout_s=20,
    memory_bytes=1 << 30,
    processes=64,
    cpu_seconds=30,
    file_bytes=64 << 20,
    open_files=256,
    tmpfs_bytes=128 << 20,
    output_bytes=64 << 10,
    kill_grace_s=1,
)


def need_jail() -> None:
    state = jail_status()
    if not state.available:
        pytest.skip(f"bubblewrap cannot make the jail's namespaces here: {state.reason}")


@pytest.fixture
def jail() -> Iterator[None]:
    """Use with `pytestmark = pytest.mark.usefixtures("jail")` after importing it."""
    need_jail()
    yield


def make_tree(root: Path) -> Path:
    tree = root / "tree"
    (tree / "pkg").mkdir(parents=True)
    (tree / "pkg" / "__init__.py").write_text("VALUE = 41\n")
    (tree / "test_value.py").write_text(
        "from pkg import VALUE\n\ndef test_value():\n    assert VALUE == 41\n"
    )
    (tree / ".git").mkdir()
    (tree / ".git" / "config").write_text("[http]\n\textraHeader = Authorization: token ghs_secret\n")
    return tree


async def run_one(
    tmp_path: Path,
    command: str,
    *,
    limits: JailLimits = SMALL,
    weaken: frozenset[str] = frozenset(),
    cache_dir: Path | None = None,
    tree: Path | None = None,
) -> CheckOutcome:
    (outcome,) = await _run_checks(
        tree or make_tree(tmp_path),
        [CheckSpec("attack", command)],
        limits=limits,
        cache_dir=cache_dir,
        scratch=tmp_path / "scratch",
        weaken=weaken,
    )
    return outcome


def jail_uid_processes() -> list[int]:
    """Pids of host processes running as one of the jail's uids."""
    uids = {str(uid) for uid in range(bwrap.JAIL_UID_BASE, bwrap.JAIL_UID_BASE + bwrap.JAIL_UID_COUNT)}
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            status = (proc / "status").read_text()
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("Uid:") and line.split()[1] in uids:
                found.append(int(proc.name))
    return found
