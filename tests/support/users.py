"""The Docker image's unprivileged user, for tests that run the bot's side as it (CI runs as root)."""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import site
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
USER_UID = 10001  # the Dockerfile's `USER 10001:10001`


@functools.cache
def user_python() -> str | None:
    """An interpreter uid 10001 may run, of the same minor version as the suite's (whose own may sit
    in a home directory only root can enter), with the suite's packages on its path (`user_env`)."""
    for candidate in (sys.executable, f"/usr/bin/python{sys.version_info[0]}.{sys.version_info[1]}"):
        done = subprocess.run(
            ["setpriv", f"--reuid={USER_UID}", f"--regid={USER_UID}", "--clear-groups", candidate, "-c", ""],
            capture_output=True,
            timeout=30,
            check=False,
        )
        if done.returncode == 0:
            return candidate
    return None


def why_not_as_user() -> str | None:
    """Why the bot's side cannot run as uid 10001 here (None: it can)."""
    if os.geteuid() != 0:
        return "starting a process as another user needs root"
    if user_python() is None:
        return f"no Python interpreter of this version that uid {USER_UID} may run"
    if (ROOT.stat().st_mode & 0o005) != 0o005:
        return f"the repository ({ROOT}) is not readable by other users"
    return None


def as_user(argv: list[str], *, memory_cgroup: bool = True) -> list[str]:
    """`argv` (a Python module's command line, without the interpreter) as uid 10001, started in a
    memory cgroup delegated to that uid (as an operator gives the image's user one: docs/checks.md,
    "Memory") unless `memory_cgroup` is False or root has none to give."""
    python = user_python()
    assert python is not None
    prefix = ["setpriv", f"--reuid={USER_UID}", f"--regid={USER_UID}", "--clear-groups", "--inh-caps=-all"]
    cgroup = delegated_cgroup() if memory_cgroup else None
    enter = (
        []
        if cgroup is None
        else ["/bin/sh", "-c", 'echo $$ >"$0" && exec "$@"', str(cgroup / "cgroup.procs")]
    )
    return [*enter, *prefix, python, *argv]


@functools.cache
def delegated_cgroup() -> Path | None:
    """A memory cgroup below the suite's own, owned by uid 10001 (made once, removed at exit), or None
    where the suite has none to delegate (then the user-mode jail tests find checks off, and skip)."""
    from bot.app.checks.cgroups import Cgroups

    found = Cgroups.find()
    if found.base is None or os.geteuid() != 0:
        return None
    path = found.base / f"beam-test-user-{os.getpid()}"
    path.mkdir(exist_ok=True)
    subprocess.run(["chown", "-R", f"{USER_UID}:{USER_UID}", str(path)], check=True, timeout=30)
    atexit.register(_remove_cgroup, path)
    return path


def _remove_cgroup(path: Path) -> None:
    for child in path.glob("beam-*"):  # the checks' own (each removed by its jail; a crash may leave one)
        with contextlib.suppress(OSError):
            child.rmdir()
    with contextlib.suppress(OSError):
        path.rmdir()


def user_env(env: dict[str, str]) -> dict[str, str]:
    """`env` with this checkout and the suite's packages on the path of `user_python()`."""
    out = dict(env)
    out["PYTHONPATH"] = os.pathsep.join([str(ROOT), *site.getsitepackages()])
    out.pop("PYTHONHOME", None)
    return out


def give(*paths: Path) -> None:
    """Make `paths` (made if missing) belong to uid 10001, as the image's work directory does."""
    for path in paths:
        path.mkdir(parents=True, exist_ok=True)
        subprocess.run(["chown", "-R", f"{USER_UID}:{USER_UID}", str(path)], check=True, timeout=60)
