"""The setup's archive, unpacked by our own writer (bot/app/checks/archive.py), under every interpreter
the bot supports and as each user the bot runs as: files and directories come out as they should, and
a link, a device or a path out is refused before anything is written outside.

Issue 40: on Debian 12's Python 3.11.2 (no `tarfile.data_filter`) the names were checked before any
was written, so `b -> .` then `a -> b/b/../../target` read as inside; `a/x` was then written through
them into the host's directory, as the bot's user."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.support.users import ROOT, USER_UID, give, why_not_as_user

DEBIAN_PYTHON = "/usr/bin/python3.11"  # Debian 12's 3.11.2: the oldest interpreter the image may run

# Unpacks argv[1] into argv[2] and prints what happened, as JSON: the writer needs nothing but the
# standard library and this checkout, so any interpreter can run it.
_UNPACK = """
import json, sys, tarfile
from pathlib import Path
from bot.app.checks.archive import unpack
try:
    unpack(Path(sys.argv[1]), Path(sys.argv[2]))
    print(json.dumps({"ok": True, "tarfile_has_data_filter": hasattr(tarfile, "data_filter")}))
except (tarfile.TarError, OSError) as exc:
    print(json.dumps({"ok": False, "error": f"{type(exc).__name__}: {exc}"}))
"""


def chain_archive(climb: int, target: str) -> bytes:
    """The attacker's archive: `b -> .`, `a -> b/.../../target` (`climb` of each), then `a/x`."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for name, link in (("b", "."), ("a", "/".join(["b"] * climb + [".."] * climb + [target]))):
            member = tarfile.TarInfo(name)
            member.type, member.linkname = tarfile.SYMTYPE, link
            tar.addfile(member)
        body = b"PLANTED\n"
        member = tarfile.TarInfo("a/x")
        member.size = len(body)
        tar.addfile(member, io.BytesIO(body))
    return out.getvalue()


def _archive(path: Path, members: list[tuple[tarfile.TarInfo, bytes | None]]) -> Path:
    with tarfile.open(path, "w", format=tarfile.GNU_FORMAT) as tar:
        for member, body in members:
            if body is not None:
                member.size = len(body)
            tar.addfile(member, io.BytesIO(body) if body is not None else None)
    return path


def _member(
    name: str, kind: bytes = tarfile.REGTYPE, *, mode: int = 0o644, link: str = ""
) -> tarfile.TarInfo:
    member = tarfile.TarInfo(name)
    member.type, member.mode, member.linkname = kind, mode, link
    return member


@pytest.fixture(params=["venv", "debian-3.11.2"])
def interpreter(request: pytest.FixtureRequest) -> str:
    if request.param == "venv":
        return sys.executable
    if not os.access(DEBIAN_PYTHON, os.X_OK):
        pytest.skip(f"{DEBIAN_PYTHON} (Debian 12's 3.11.2) is not installed here")
    return DEBIAN_PYTHON


@pytest.fixture(params=["root", "user"])
def as_uid(request: pytest.FixtureRequest) -> int | None:
    """None: this process's own uid (root in CI); else the Docker image's user, uid 10001."""
    if request.param == "root":
        if os.geteuid() != 0:
            pytest.skip("root mode needs the tests to run as root")
        return None
    if os.geteuid() == 0:
        if (why := why_not_as_user()) is not None:
            pytest.skip(why)
        return USER_UID
    return None  # an ordinary user already


def _unpack(interpreter: str, uid: int | None, archive: Path, dest: Path) -> dict[str, object]:
    """`unpack(archive, dest)` in a process of `interpreter` (as `uid`) with only this checkout on its
    path: the writer must need nothing the bot's virtualenv has and Debian's interpreter lacks."""
    prefix = [] if uid is None else ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]
    done = subprocess.run(
        [*prefix, interpreter, "-c", _UNPACK, str(archive), str(dest)],
        capture_output=True,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(ROOT)},
        cwd="/",
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode("utf-8", "replace")
    answer: dict[str, object] = json.loads(done.stdout)
    return answer


def _places(tmp_path: Path, uid: int | None) -> tuple[Path, Path]:
    """The deps directory, two levels below `tmp_path` as the jail's is below its scratch's parent,
    and the host directory the chain aims at, writable by the unpacking user."""
    deps, target = tmp_path / "scratch" / "deps", tmp_path / "target"
    target.mkdir()
    deps.parent.mkdir()
    if uid is not None:
        give(deps.parent, target)
    return deps, target


def test_a_chain_of_links_writes_nothing_outside(
    tmp_path: Path, interpreter: str, as_uid: int | None
) -> None:
    deps, target = _places(tmp_path, as_uid)
    archive = tmp_path / "deps.tar"
    archive.write_bytes(chain_archive(2, "target"))
    archive.chmod(0o644)
    answer = _unpack(interpreter, as_uid, archive, deps)
    assert answer["ok"] is False and "is a link" in str(answer["error"]), answer
    assert list(target.iterdir()) == []
    assert not (deps / "a").exists() and not (deps / "b").is_symlink()
    if interpreter == DEBIAN_PYTHON:  # the interpreter of the issue: no filter of tarfile's to lean on
        probe = subprocess.run(
            [DEBIAN_PYTHON, "-c", "import tarfile; print(hasattr(tarfile, 'data_filter'))"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        )
        assert probe.stdout.strip() == "False"


def test_proof_the_chain_escapes_a_check_of_names_alone(tmp_path: Path) -> None:
    """What the old check did on interpreters without the filter: each name and link target resolved
    against `dest` before anything exists, all inside; extracted, `a/x` lands in the target."""
    deps, target = _places(tmp_path, None)
    deps.mkdir()
    archive = tmp_path / "deps.tar"
    archive.write_bytes(chain_archive(2, "target"))
    root = deps.resolve()
    with tarfile.open(archive) as tar:
        members = tar.getmembers()
        for member in members:
            assert (root / member.name).resolve().is_relative_to(root)
            if member.issym():
                assert (root / member.name).parent.joinpath(member.linkname).resolve().is_relative_to(root)
        tar.extractall(deps, members=members, filter="fully_trusted")  # noqa: S202 - the proof
    assert (target / "x").read_text() == "PLANTED\n"


@pytest.mark.parametrize(
    ("member", "said"),
    [
        (_member("lib/hard", tarfile.LNKTYPE, link="lib/mod.py"), "is a link"),
        (_member("lib/soft", tarfile.SYMTYPE, link="mod.py"), "is a link"),
        (_member("lib/dev", tarfile.CHRTYPE), "not a file or a directory"),
        (_member("lib/fifo", tarfile.FIFOTYPE), "not a file or a directory"),
        (_member("../escaped"), "climbs out"),
        (_member("lib/../../escaped"), "climbs out"),
        (_member("/etc/escaped"), "not a relative path"),
        (_member("lib/mod.py"), "File exists"),  # a second body for a file already written
    ],
    ids=["hard-link", "symlink", "device", "fifo", "dotdot", "inner-dotdot", "absolute", "duplicate"],
)
def test_anything_but_files_and_directories_is_refused(
    tmp_path: Path, interpreter: str, member: tarfile.TarInfo, said: str
) -> None:
    deps, _ = _places(tmp_path, None)
    archive = _archive(
        tmp_path / "deps.tar",
        [(_member("lib/mod.py"), b"X = 1\n"), (member, b"" if member.isfile() else None)],
    )
    answer = _unpack(interpreter, None, archive, deps)
    assert answer["ok"] is False and said in str(answer["error"]), answer
    assert not (tmp_path / "escaped").exists()


def test_files_directories_and_modes_come_out_as_pip_left_them(
    tmp_path: Path, interpreter: str, as_uid: int | None
) -> None:
    deps, _ = _places(tmp_path, as_uid)
    archive = _archive(
        tmp_path / "deps.tar",
        [
            (_member("./", tarfile.DIRTYPE, mode=0o1777), None),
            (_member("./bin", tarfile.DIRTYPE, mode=0o700), None),
            (_member("./bin/tool", mode=0o4755), b"#!/bin/sh\necho tool\n"),
            (_member("./lib/python3.11/site-packages/pkg/__init__.py", mode=0o600), b"VALUE = 41\n"),
        ],
    )
    archive.chmod(0o644)
    answer = _unpack(interpreter, as_uid, archive, deps)
    assert answer["ok"] is True, answer
    assert (deps / "bin" / "tool").read_text() == "#!/bin/sh\necho tool\n"
    assert (deps / "bin" / "tool").stat().st_mode & 0o7777 == 0o755  # no setuid bit
    module = deps / "lib" / "python3.11" / "site-packages" / "pkg" / "__init__.py"
    assert module.stat().st_mode & 0o7777 == 0o644 and module.read_text() == "VALUE = 41\n"
    assert {(deps / d).stat().st_mode & 0o7777 for d in ("", "bin", "lib")} == {0o755}
