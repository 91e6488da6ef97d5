"""Hostile checks against the real jail: each attack fails or finds nothing, and the bot's process is
unharmed. Each test also shows the attack working where the jail's corresponding limit is off (a
test-only weakening of `_run_checks`, or the same command run bare), so it cannot pass vacuously.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import os
import resource
import shutil
import socket
import sqlite3
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.app.checks import bwrap
from bot.app.checks.jail import CheckSpec, JailLimits
from tests.app.checks.test_archive import chain_archive
from tests.app.checks.test_jail_support import (
    SMALL,
    describe,
    jail_uid_processes,
    make_tree,
    run_checks_as,
    run_one,
)

pytestmark = [pytest.mark.anyio]


@pytest.fixture(autouse=True)
def jail(jail_mode: str) -> Iterator[None]:
    yield
    # Whatever the attack did, nothing of the jail outlives its check.
    deadline = time.monotonic() + 5
    while jail_uid_processes() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert jail_uid_processes() == []


def _bare(command: str, cwd: Path) -> str:
    """The same attack without the jail (as the bot's own uid)."""
    done = subprocess.run(  # noqa: S602 - the test's own command line
        command, shell=True, cwd=cwd, capture_output=True, timeout=30, check=False
    )
    return (done.stdout + done.stderr).decode("utf-8", "replace")


_CONNECT = (
    'python3 -c "import socket,sys\n'
    "try:\n socket.create_connection((sys.argv[1], int(sys.argv[2])), 3); print('CONNECTED')\n"
    "except OSError as e: print('BLOCKED', e.errno)\" {host} {port}"
)


async def test_no_connection_to_the_hosts_loopback_listener_or_the_database_port(tmp_path: Path) -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    try:
        for target in (port, 5432):
            outcome = await run_one(tmp_path / str(target), _CONNECT.format(host="127.0.0.1", port=target))
            assert "BLOCKED" in outcome.output_tail and "CONNECTED" not in outcome.output_tail
        # Proof: with the host's network namespace, the same check reaches the listener.
        shared = await run_one(
            tmp_path / "shared", _CONNECT.format(host="127.0.0.1", port=port), weaken=frozenset({"net"})
        )
        assert "CONNECTED" in shared.output_tail
    finally:
        listener.close()


async def test_no_route_to_any_other_address(tmp_path: Path) -> None:
    outcome = await run_one(tmp_path / "jailed", _CONNECT.format(host="192.0.2.1", port=80))
    # ENETUNREACH: the jail's namespace has only loopback, so no address but 127.0.0.1 has a route.
    assert "BLOCKED 101" in outcome.output_tail, outcome.output_tail
    shared = await run_one(
        tmp_path / "shared", _CONNECT.format(host="192.0.2.1", port=80), weaken=frozenset({"net"})
    )
    assert "BLOCKED 101" not in shared.output_tail  # the host has a route there (or any other error)


async def test_names_do_not_resolve(tmp_path: Path) -> None:
    # Resolution needs a resolver (no /etc/resolv.conf, no host /etc/hosts in the jail) and a
    # network to reach it (none). The loopback test above proves the network half with a weakening;
    # here the jail's own files: only `localhost` is known.
    command = (
        "test ! -e /etc/resolv.conf && echo NO-RESOLV; getent hosts localhost;"
        " getent hosts github.com || echo UNRESOLVED; getent hosts pypi.org || echo UNRESOLVED"
    )
    outcome = await run_one(tmp_path, command)
    assert "NO-RESOLV" in outcome.output_tail
    assert outcome.output_tail.count("UNRESOLVED") == 2
    assert "localhost" in outcome.output_tail


def _plant_work_dir(root: Path) -> dict[str, Path]:
    work = root / "work"
    (work / "mirrors" / "octo" / "repo.git").mkdir(parents=True)
    files = {
        "key": work / "app-private-key.pem",
        "db": work / "beam.db",
        "mirror": work / "mirrors" / "octo" / "repo.git" / "config",
    }
    files["key"].write_text("-----BEGIN RSA PRIVATE KEY-----\nPLANTED-KEY\n-----END RSA PRIVATE KEY-----\n")
    with sqlite3.connect(files["db"]) as db:
        db.execute("create table t (secret text)")
        db.execute("insert into t values ('PLANTED-DB')")
    files["mirror"].write_text("[remote]\n\turl = PLANTED-MIRROR\n")
    for path in files.values():
        path.chmod(0o644)
    return files


async def test_the_bots_files_are_not_there(tmp_path: Path) -> None:
    files = _plant_work_dir(tmp_path)
    command = " ; ".join(f"cat {path} 2>&1 | head -c 300" for path in files.values())
    command += f" ; grep -a -o PLANTED-DB {files['db']} ; ls {files['key'].parent}"
    outcome = await run_one(tmp_path / "jailed", command)
    assert "PLANTED" not in outcome.output_tail
    assert "No such file or directory" in outcome.output_tail
    # Proof: the same command outside the jail reads all three.
    bare = _bare(command, tmp_path)
    assert all(word in bare for word in ("PLANTED-KEY", "PLANTED-DB", "PLANTED-MIRROR"))


async def test_the_bots_proc_entry_is_not_there(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BEAM_WEBHOOK_SECRET", "planted-webhook-secret")
    pid = os.getpid()
    command = f"ls /proc | grep -c -x '[0-9]*'; cat /proc/{pid}/environ; cat /proc/{pid}/cmdline; echo"
    outcome = await run_one(tmp_path / "jailed", command)
    assert "planted-webhook-secret" not in outcome.output_tail
    assert "pytest" not in outcome.output_tail
    assert f"/proc/{pid}/environ: No such file or directory" in outcome.output_tail
    # Proof: with the host's pid namespace and /proc, the bot's process is there to see.
    shared = await run_one(tmp_path / "shared", command, weaken=frozenset({"pid"}))
    assert "pytest" in shared.output_tail


async def test_no_home_directory_and_no_ssh_keys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = Path(tempfile.mkdtemp(prefix="beam-home-", dir="/var/tmp"))  # not under /tmp: the jail has its own
    request_cleanup = shutil.rmtree
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("PLANTED-SSH-KEY\n")
    for path in (home, home / ".ssh"):
        path.chmod(0o755)
    (home / ".ssh" / "id_ed25519").chmod(0o644)
    monkeypatch.setenv("HOME", str(home))
    command = f"echo HOME=$HOME; cat ~/.ssh/id_ed25519 {home}/.ssh/id_ed25519 /root/.ssh/* 2>&1"
    outcome = await run_one(tmp_path / "jailed", command)
    assert "PLANTED-SSH-KEY" not in outcome.output_tail
    assert "HOME=/tmp" in outcome.output_tail
    # Proof: were the home directory bound in, the key would be read.
    try:
        shared = await run_one(tmp_path / "shared", command, weaken=frozenset({"home"}))
    finally:
        request_cleanup(home, ignore_errors=True)
    assert "PLANTED-SSH-KEY" in shared.output_tail


async def test_the_environment_holds_no_variable_of_the_bots(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BEAM_WEBHOOK_SECRET", "planted-webhook-secret")
    monkeypatch.setenv("GITHUB_TOKEN", "ghs_plantedtoken")
    monkeypatch.setenv("BEAM_LLM_API_KEY", "sk-planted")
    outcome = await run_one(tmp_path / "jailed", "env; cat /proc/self/environ /proc/1/environ 2>/dev/null")
    for secret in ("planted-webhook-secret", "ghs_plantedtoken", "sk-planted", "BEAM_"):
        assert secret not in outcome.output_tail
    names = sorted(line.split("=", 1)[0] for line in outcome.output_tail.splitlines() if "=" in line)
    assert set(names) <= {"HOME", "LANG", "LC_ALL", "PATH", "PWD", "SHLVL", "TMPDIR", "OLDPWD", "_"}
    # Proof: started with the bot's environment and without --clearenv, bwrap hands it down.
    shared = await run_one(tmp_path / "shared", "env", weaken=frozenset({"env", "bwrap-env"}))
    assert "planted-webhook-secret" in shared.output_tail


_EVERY_PROC = (
    "for p in /proc/[0-9]*; do cat $p/environ $p/cmdline; echo; done 2>/dev/null | base64 -w0;"
    " echo; echo DONE"
)


async def test_no_process_of_the_jail_ever_held_a_variable_or_path_of_the_bots(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, jail_mode: str
) -> None:
    """Issue 27: a check read /proc/1/environ (bubblewrap's own init, started with the bot's
    environment) and printed it base64-encoded, past the redaction, into the approval comment."""
    planted = {"BEAM_WEBHOOK_SECRET": "planted-webhook-secret", "BEAM_API_KEY": "sk-planted"}
    for name, value in planted.items():
        monkeypatch.setenv(name, value)
    outcome = await run_one(tmp_path / "jailed", _EVERY_PROC)
    assert outcome.output_tail.endswith("DONE\n"), outcome.output_tail
    seen = base64.b64decode(outcome.output_tail.split()[0]).decode("utf-8", "replace")
    assert "bwrap" in seen and "beam-jail" in seen  # pid 1 and the wrapper were read
    for secret in (*planted.values(), "BEAM_"):
        assert secret not in seen
    # No path of the host's in any command line (bwrap reads its options from a descriptor).
    assert str(tmp_path) not in seen and "--ro-bind" not in seen
    if jail_mode == "user":
        # Proof: in user-namespace mode pid 1 runs as the check's own uid; started with the bot's
        # environment, it hands every secret over, whatever --clearenv does for the check itself.
        # (In the copying jail: where the overlay is mounted, pid 1 also holds the capabilities the
        # mount needed, which the check lacks, and that alone keeps it out of pid 1's /proc entry.)
        weaker = frozenset({"bwrap-env", "overlay"})
        leaked = await run_one(tmp_path / "leaked", _EVERY_PROC, weaken=weaker)
        shown = base64.b64decode(leaked.output_tail.split()[0]).decode("utf-8", "replace")
        assert "planted-webhook-secret" in shown


async def test_nothing_outside_the_trees_copy_can_be_written(tmp_path: Path) -> None:
    tree = make_tree(tmp_path)
    outside = tmp_path / "outside.txt"
    targets = [
        str(outside),
        f"{tree}/pkg/written",
        "/usr/written",
        "/src/pkg/written",
        "/etc/written",
        "/written",
    ]
    command = "; ".join(f"(echo x > {t}) 2>/dev/null && echo WROTE {t}" for t in targets)
    outcome = await run_one(tmp_path, command, tree=tree)
    assert "WROTE" not in outcome.output_tail, outcome.output_tail
    assert not outside.exists() and not (tree / "pkg" / "written").exists()
    assert not Path("/usr/written").exists()
    # Proof: the host's own uid writes the first two.
    bare = _bare("; ".join(f"(echo x > {t}) 2>/dev/null && echo WROTE {t}" for t in targets[:2]), tmp_path)
    assert bare.count("WROTE") == 2


_SPAWN_200 = """python3 -c '
import subprocess
n = 0
for _ in range(200):
    try:
        subprocess.Popen(["sleep", "3"])
        n += 1
    except OSError:
        pass
print("STARTED", n)'"""


async def test_a_fork_bomb_is_bounded_and_the_bot_goes_on(tmp_path: Path) -> None:
    limits = _with(SMALL, timeout_s=5, processes=32)
    outcome = await run_one(tmp_path / "bomb", "bomb() { bomb | bomb & }; bomb; sleep 30", limits=limits)
    assert outcome.status in {"timed_out", "failed"}
    assert "fork" in outcome.output_tail.lower() or outcome.status == "timed_out"
    # The bot still forks, and the next check runs normally.
    assert subprocess.run(["true"], check=False).returncode == 0
    after = await run_one(tmp_path / "after", "echo fine")
    assert after.status == "passed"
    # Proof, bounded (a real bomb without the cap would hurt the machine): 200 sleeps are refused
    # under the cap of 32 processes and all started without it.
    capped = await run_one(tmp_path / "capped", _SPAWN_200, limits=_with(SMALL, processes=32))
    uncapped = await run_one(
        tmp_path / "uncapped", _SPAWN_200, limits=_with(SMALL, processes=32), weaken=frozenset({"nproc"})
    )
    assert int(capped.output_tail.split()[-1]) < 32, capped.output_tail
    assert int(uncapped.output_tail.split()[-1]) == 200, uncapped.output_tail


async def test_filling_the_disk_hits_the_caps_at_once(tmp_path: Path) -> None:
    # (On the tree's overlay the write past the cap fails with EFBIG, which dd reports before its
    # three lines of counts; on a copy, SIGXFSZ kills it and the shell says so.)
    ten_gb = "dd if=/dev/zero of={0} bs=1M count=10240 2>&1 | tail -4; ls -la {0}"
    in_tree = await run_one(tmp_path / "tree", ten_gb.format("big"))  # the file cap (64 MiB) first
    assert in_tree.status == "passed"  # dd's status is lost in the pipe; what it said is what counts
    assert "File size limit exceeded" in in_tree.output_tail or "File too large" in in_tree.output_tail
    assert " 67108864 " in in_tree.output_tail
    many = "for i in 1 2 3 4; do dd if=/dev/zero of=/tmp/f$i bs=1M count=60 2>&1; done"
    in_tmp = await run_one(tmp_path / "tmp", many)  # four files under the file cap: the tmpfs cap (128 MiB)
    assert "No space left on device" in in_tmp.output_tail
    # Proof: without the tmpfs cap the four files (240 MiB) fit; without the file cap one file of
    # 100 MiB does (bounded sizes, in RAM, rather than 10 GB).
    no_tmpfs_cap = await run_one(tmp_path / "nocap", many, weaken=frozenset({"tmpfs"}))
    assert "No space left" not in no_tmpfs_cap.output_tail
    one = "dd if=/dev/zero of=big bs=1M count=100 2>&1 | tail -1"
    no_file_cap = await run_one(tmp_path / "nofcap", one, weaken=frozenset({"fsize", "tmpfs"}))
    assert (
        "File size limit exceeded" not in no_file_cap.output_tail
        and "104857600 bytes" in no_file_cap.output_tail
    )


async def test_a_gigabyte_of_output_keeps_only_the_tail_and_the_bot_stays_small(tmp_path: Path) -> None:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    command = "head -c 1073741824 /dev/zero | tr '\\0' x; echo; echo THE-END"
    outcome = await run_one(tmp_path, command, limits=_with(SMALL, timeout_s=120))
    assert outcome.status == "passed"
    assert outcome.output_truncated
    assert len(outcome.output_tail.encode()) <= SMALL.output_bytes
    assert outcome.output_tail.endswith("x\nTHE-END\n")
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown_kib < 64 * 1024  # read in chunks: never the gigabyte, nor a large part of it


async def test_ignoring_sigterm_does_not_keep_the_check_alive(tmp_path: Path) -> None:
    command = "trap '' TERM; (trap '' TERM; while :; do sleep 1; done) & while :; do sleep 1; done"
    outcome = await run_one(tmp_path, command, limits=_with(SMALL, timeout_s=2, kill_grace_s=1))
    assert outcome.status == "timed_out"
    assert outcome.duration_s < 15
    # No weakening is needed to prove it: the fixture checks that no process of the jail's uid
    # remains, and these processes would run forever were they not killed with the jail.


async def test_a_daemon_does_not_outlive_its_check(tmp_path: Path) -> None:
    marker = "beam-daemon-test-sleeper"
    # A process that names itself (dash, the jail's sh, has no `exec -a`), in a session of its own.
    daemon = f"python3 -c 'import time; time.sleep(300)' {marker}"
    command = f"setsid {daemon} </dev/null >/dev/null 2>&1 & sleep 0.3; echo started"

    def daemons() -> list[int]:
        return [pid for pid in jail_uid_processes() if marker in describe([pid])]

    outcome = await run_one(tmp_path / "jailed", command)
    assert outcome.status == "passed"
    await asyncio.sleep(0.5)
    assert daemons() == [], describe(daemons())
    # Proof: without the jail's pid namespace the daemon stays behind (killed here by the test).
    shared = await run_one(tmp_path / "shared", command, weaken=frozenset({"pid"}))
    assert shared.status == "passed"
    survivors = daemons()
    try:
        assert survivors, "the daemon should survive without the pid namespace"
    finally:
        for pid in survivors:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, 9)


async def test_a_setuid_binary_grants_nothing(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("planting a setuid-root binary needs root")
    cache = Path(tempfile.mkdtemp(prefix="beam-setuid-"))
    try:
        cache.chmod(0o755)
        (cache / "bin").mkdir(mode=0o755)
        rootid = cache / "bin" / "rootid"
        shutil.copy2("/usr/bin/id", rootid)
        os.chown(rootid, 0, 0)
        rootid.chmod(0o4755)
        outcome = await run_one(
            tmp_path / "jailed", "rootid -u; id -u; grep NoNewPrivs /proc/self/status", cache_dir=cache
        )
        lines = outcome.output_tail.split()
        assert lines[0] == lines[1] != "0", outcome.output_tail
        assert "NoNewPrivs:\t1" in outcome.output_tail
        # Proof that the binary does grant root without the jail: run it as the jail's uid, bare.
        uid = str(bwrap.JAIL_UID_BASE)
        bare = subprocess.run(
            ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", str(rootid), "-u"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
        assert bare.stdout.strip() == "0"
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def _with(limits: JailLimits, **changes: float) -> JailLimits:
    return dataclasses.replace(limits, **changes)  # type: ignore[arg-type]


async def test_a_symlink_in_the_tree_does_not_reach_the_hosts_file(tmp_path: Path) -> None:
    files = _plant_work_dir(tmp_path)
    tree = make_tree(tmp_path)
    (tree / "key").symlink_to(files["key"])  # top level: the jail binds each top-level entry
    (tree / "pkg" / "key").symlink_to(files["key"])
    command = "ls -l key pkg/key; cat key pkg/key 2>&1"
    outcome = await run_one(tmp_path, command, tree=tree)
    assert "PLANTED" not in outcome.output_tail
    assert f"key -> {files['key']}" in outcome.output_tail  # still a symlink, to nothing in the jail
    assert "PLANTED-KEY" in _bare(command, tree)


async def test_closing_its_output_does_not_escape_the_timeout(tmp_path: Path) -> None:
    outcome = await run_one(tmp_path, "echo bye; exec >&- 2>&-; sleep 300", limits=_with(SMALL, timeout_s=2))
    assert outcome.status == "timed_out"
    assert outcome.output_tail == "bye\n"


# The setup of issue 40: it installs a tool the checks use, then writes an archive of its own, with a
# chain of links out of the deps, into every pipe of another process of the jail it can open, and
# leaves a `tar` on the PATH that prints the same archive.
_OWN_ARCHIVE = """
import base64, os, stat, sys
os.makedirs("/deps/bin", exist_ok=True)
with open("/deps/bin/legit-tool", "w") as tool:
    tool.write("#!/bin/sh\\necho LEGIT\\n")
os.chmod("/deps/bin/legit-tool", 0o755)
evil, mine = base64.b64decode(sys.argv[1]), {os.fstat(fd).st_ino for fd in (1, 2)}
# A `tar` first on PATH (/deps/bin), for whatever packs the deps after the setup is gone.
with open("/deps/evil.tar", "wb") as out:
    out.write(evil)
with open("/deps/bin/tar", "w") as tool:
    tool.write("#!/bin/sh\\ncat /deps/evil.tar\\n")
os.chmod("/deps/bin/tar", 0o755)
for pid in (p for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()):
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError as exc:
        print("NOT-READABLE", pid, exc.errno)
        continue
    for fd in fds:
        path = f"/proc/{pid}/fd/{fd}"
        try:
            if not os.readlink(path).startswith("pipe:") or os.stat(path).st_ino in mine:
                continue
            out = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
            os.write(out, evil)
            os.close(out)
            print("WROTE", path)
        except OSError:
            pass
print("ATTACK-DONE")
"""


async def test_the_setup_cannot_hand_the_bot_an_archive_of_its_own(tmp_path: Path, jail_mode: str) -> None:
    """Issue 40: the wrapper held the archive pipe while the setup ran; as uid 10001 the setup opened
    `/proc/<wrapper>/fd/<n>` and wrote a tar whose links led `a/x` into the host's directory; in both
    modes the wrapper's `tar` was the first on PATH, /deps/bin, which the setup fills. Now the pipe is
    made only once every setup process is gone, for /usr/bin/tar, and links in the archive are refused."""
    tree = make_tree(tmp_path)
    (tree / "attack.py").write_text(_OWN_ARCHIVE)
    target = tmp_path / "target"  # scratch/deps, two levels up: what the chain aims at
    target.mkdir(mode=0o777)
    target.chmod(0o777)
    evil = base64.b64encode(chain_archive(2, "target")).decode()
    outcomes = await run_checks_as(
        tree,
        [CheckSpec("uses-it", "legit-tool")],
        limits=SMALL,
        setup=f"python3 attack.py {evil}",
        scratch=tmp_path / "scratch",
    )
    assert [(o.name, o.status) for o in outcomes] == [("setup", "passed"), ("uses-it", "passed")], outcomes
    # No pipe of another process of the jail was open to it: the supervisor (pid 2) is not dumpable,
    # and the archive pipe did not exist yet.
    assert "ATTACK-DONE" in outcomes[0].output_tail, outcomes[0].output_tail
    assert "WROTE" not in outcomes[0].output_tail and "NOT-READABLE 2 " in outcomes[0].output_tail
    assert "LEGIT" in outcomes[1].output_tail  # the bot unpacked what the setup installed, not its tar
    assert list(target.iterdir()) == []


_PLANT_TOOLS = (
    "mkdir -p /deps/bin && for tool in setpriv prlimit; do"
    ' printf \'#!/bin/sh\\necho PLANTED-%s; while [ "$1" != -- ]; do shift; done; shift; exec "$@"\\n\''
    ' "$tool" > /deps/bin/$tool && chmod 755 /deps/bin/$tool; done; ls /deps/bin'
)


_SHOW_LIMITS = "id -u; awk '/Max processes/ {print $3}' /proc/self/limits; command -v prlimit"


async def test_what_the_setup_puts_first_on_path_never_starts_a_check(tmp_path: Path, jail_mode: str) -> None:
    """/deps/bin is first on the checks' PATH, and bwrap (or the overlay step) used to start the
    next check's `setpriv` and `prlimit` by name: a setup's own, which drops no uid and sets no limit,
    would have run in their place. They are started by their full path now."""
    outcomes = await run_checks_as(
        make_tree(tmp_path),
        [CheckSpec("limits", _SHOW_LIMITS)],
        limits=SMALL,
        setup=_PLANT_TOOLS,
        scratch=tmp_path / "scratch",
    )
    assert [(o.name, o.status) for o in outcomes] == [("setup", "passed"), ("limits", "passed")], outcomes
    assert "prlimit" in outcomes[0].output_tail and "setpriv" in outcomes[0].output_tail
    said = outcomes[1].output_tail.split()
    assert "PLANTED-setpriv" not in said and "PLANTED-prlimit" not in said, said
    assert said[0] != "0" and said[1] == str(SMALL.processes)
    assert said[2] == "/deps/bin/prlimit"  # the planted one is there, first on PATH, and was not run
