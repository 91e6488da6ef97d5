"""`GitHttpServer`: bare repositories served by the real `git http-backend` over HTTP, with token auth.

Tests clone, fetch and push through it exactly as the bot does against github.com: smart HTTP,
Basic auth where any user name works and the password must be the installation token
(GitHub takes `x-access-token:<token>`). The backend is git's own CGI program, so what the server
accepts is what git accepts; this module only does HTTP, auth and CGI plumbing.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import IO, Any
from urllib.parse import unquote, urlsplit

import pygit2

HTTP_BACKEND = "/usr/lib/git-core/git-http-backend"
_COPY = 64 * 1024
_SIG_NAME = "Seed Author"
_SIG_EMAIL = "seed@example.com"


TokenCheck = str | Callable[[str], bool] | None


@dataclass(frozen=True, slots=True)
class GitRequest:
    """One request the server saw; `user` is the Basic-auth user name (None without credentials).

    `content_encoding` and `chunked` say how the client sent the body, so tests can show that
    gzip and chunked uploads went through.
    """

    method: str
    path: str
    query: str
    authorized: bool
    user: str | None
    content_encoding: str | None = None
    chunked: bool = False


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    owner: GitHttpServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A git client that hung up mid-answer (it gave up on a 401, or a test ended) is expected;
        anything else is printed, as the base class does."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    # TCP_NODELAY: the handler writes the head and the body in separate sends; with Nagle on, the
    # second waits for the client's delayed ACK (about 40 ms on Linux) before it leaves.
    disable_nagle_algorithm = True
    protocol_version = "HTTP/1.1"
    server: _Server
    timeout = 60

    def setup(self) -> None:
        super().setup()
        self.server.owner._track(self.connection, add=True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.owner._track(self.connection, add=False)

    def log_message(self, format: str, *args: Any) -> None:
        return  # quiet: pytest output stays readable; `GitHttpServer.requests` is the log

    # Auth runs before "100 Continue", so a refused push never uploads its pack.
    def handle_expect_100(self) -> bool:
        if self._auth_ok(record=False) is None:
            self._auth_ok(record=True)
            self._refuse()
            return False
        return super().handle_expect_100()

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def _auth_ok(self, *, record: bool) -> str | None:
        """The user name when the request may pass (empty string without auth), else None."""
        owner = self.server.owner
        user: str | None = None
        password: str | None = None
        header = self.headers.get("Authorization", "")
        scheme, _, value = header.partition(" ")
        if scheme.lower() == "basic":
            try:
                decoded = base64.b64decode(value.strip(), validate=True).decode("utf-8")
            except (binascii.Error, UnicodeDecodeError):
                decoded = ""
            if ":" in decoded:
                user, _, password = decoded.partition(":")
        token = owner.token
        if callable(token):
            authorized = password is not None and bool(token(password))
        else:
            authorized = token is None or (password is not None and password == token)
        if record:
            parts = urlsplit(self.path)
            owner.requests.append(
                GitRequest(
                    self.command,
                    unquote(parts.path),
                    parts.query,
                    authorized,
                    user,
                    self.headers.get("Content-Encoding"),
                    self._chunked(),
                )
            )
        if not authorized:
            return None
        return user or ""

    def _forbid(self) -> None:
        """What GitHub answers a push with a token that may only read (`contents: read`)."""
        body = b"remote: Write access to repository not granted.\n"
        self.send_response(403)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)
        self.close_connection = True

    def _refuse(self) -> None:
        body = b"Authentication required\n"
        self.send_response(401)
        self.send_header("WWW-Authenticate", 'Basic realm="fake"')
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        # The body of the refused request is never read, so the connection cannot be reused.
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)
        self.close_connection = True

    def _serve(self) -> None:
        user = self._auth_ok(record=True)
        if user is None:
            self._refuse()
            return
        if self.server.owner.read_only and "git-receive-pack" in self.path:
            self._forbid()
            return
        parts = urlsplit(self.path)
        env = self._cgi_env(unquote(parts.path), parts.query, user)
        proc = subprocess.Popen(
            [HTTP_BACKEND],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            bufsize=0,
        )
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        feeder = threading.Thread(target=self._feed, args=(proc.stdin,), daemon=True)
        errors: list[bytes] = []
        stderr = proc.stderr
        drainer = threading.Thread(target=lambda: errors.append(stderr.read()), daemon=True)
        feeder.start()
        drainer.start()
        try:
            self._relay(proc.stdout)
        finally:
            proc.stdout.close()
            feeder.join()
            drainer.join()
            proc.stderr.close()
            proc.wait()
        if errors and errors[0]:
            self.server.owner.backend_errors.append(errors[0].decode("utf-8", "replace"))

    def _cgi_env(self, path: str, query: str, user: str) -> dict[str, str]:
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "GIT_PROJECT_ROOT": str(self.server.owner.root),
            "GIT_HTTP_EXPORT_ALL": "1",
            "GIT_HTTP_MAX_REQUEST_BUFFER": str(1 << 30),
            "GIT_CONFIG_NOSYSTEM": "1",
            # As GitHub: partial clones (`--filter=blob:none`) and a blob fetched by its id.
            "GIT_CONFIG_COUNT": "2",
            "GIT_CONFIG_KEY_0": "uploadpack.allowFilter",
            "GIT_CONFIG_VALUE_0": "true",
            "GIT_CONFIG_KEY_1": "uploadpack.allowAnySHA1InWant",
            "GIT_CONFIG_VALUE_1": "true",
            "HOME": str(self.server.owner.root),
            "GATEWAY_INTERFACE": "CGI/1.1",
            "SERVER_PROTOCOL": "HTTP/1.1",
            "REQUEST_METHOD": self.command,
            "PATH_INFO": path,
            "QUERY_STRING": query,
            "REMOTE_ADDR": self.client_address[0],
            "REMOTE_USER": user or "anonymous",
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
        }
        # A chunked body has no length: http-backend then reads its stdin to EOF.
        length = self.headers.get("Content-Length")
        if length is not None and not self._chunked():
            env["CONTENT_LENGTH"] = length
        for name, value in self.headers.items():
            key = "HTTP_" + name.upper().replace("-", "_")
            if key not in ("HTTP_AUTHORIZATION", "HTTP_CONTENT_LENGTH", "HTTP_CONTENT_TYPE"):
                env[key] = value
        if "HTTP_GIT_PROTOCOL" in env:
            env["GIT_PROTOCOL"] = env["HTTP_GIT_PROTOCOL"]
        return env

    def _chunked(self) -> bool:
        return "chunked" in self.headers.get("Transfer-Encoding", "").lower()

    def _feed(self, sink: IO[bytes]) -> None:
        """Copy the request body (de-chunked) to the CGI's stdin, then close it."""
        try:
            if self._chunked():
                for piece in self._dechunk():
                    sink.write(piece)
            else:
                remaining = int(self.headers.get("Content-Length") or 0)
                while remaining > 0:
                    piece = self.rfile.read(min(_COPY, remaining))
                    if not piece:
                        break
                    remaining -= len(piece)
                    sink.write(piece)
        except (BrokenPipeError, ConnectionError, ValueError):
            self.close_connection = True
        finally:
            with contextlib.suppress(BrokenPipeError, OSError):
                sink.close()

    def _dechunk(self) -> Iterator[bytes]:
        while True:
            line = self.rfile.readline(1024)
            if not line:
                raise ConnectionError("request body ended inside a chunk header")
            size = int(line.split(b";", 1)[0].strip(), 16)
            if size == 0:
                while self.rfile.readline(1024) not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return
            remaining = size
            while remaining > 0:
                piece = self.rfile.read(min(_COPY, remaining))
                if not piece:
                    raise ConnectionError("request body ended inside a chunk")
                remaining -= len(piece)
                yield piece
            self.rfile.readline(16)  # CRLF after the chunk

    def _relay(self, source: IO[bytes]) -> None:
        """Turn the CGI's output into an HTTP response, streaming the body chunked."""
        status = "200 OK"
        headers: list[tuple[str, str]] = []
        reader = source
        pending = b""
        while b"\r\n\r\n" not in pending and b"\n\n" not in pending:
            piece = reader.read(_COPY)
            if not piece:
                break
            pending += piece
        head, sep, rest = pending.partition(b"\r\n\r\n")
        if not sep:
            head, sep, rest = pending.partition(b"\n\n")
        for raw in head.decode("latin-1").splitlines():
            name, _, value = raw.partition(":")
            if name.lower() == "status":
                status = value.strip()
            elif name:
                headers.append((name.strip(), value.strip()))
        code, _, reason = status.partition(" ")
        self.send_response(int(code), reason or None)
        has_length = any(name.lower() == "content-length" for name, _ in headers)
        for name, value in headers:
            self.send_header(name, value)
        if not has_length:
            self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        out = self.wfile

        def emit(data: bytes) -> None:
            if not data:
                return
            if has_length:
                out.write(data)
            else:
                out.write(b"%x\r\n" % len(data) + data + b"\r\n")

        emit(rest)
        while True:
            piece = reader.read(_COPY)
            if not piece:
                break
            emit(piece)
        if not has_length:
            out.write(b"0\r\n\r\n")
        out.flush()


class GitHttpServer:
    """Serves every bare repository under `root` at `http://127.0.0.1:PORT/<name>.git`.

    With `token=None` no auth is asked; a callable decides per password; otherwise every request
    needs Basic auth whose password is the token (any user name). Use as a context manager;
    `requests` records what clients did.
    """

    def __init__(
        self,
        root: Path,
        token: TokenCheck = "test-token",  # noqa: S107 - a test fixture
        host: str = "127.0.0.1",
    ) -> None:
        self.host = host  # loopback, unless namespaced hosts must reach it (tests/support/netns.py)
        self.root = Path(root).resolve()
        self.root.mkdir(parents=True, exist_ok=True)
        self.token: TokenCheck = token
        self.read_only = False  # True: every push is refused with a 403, as for `contents: read`
        self.requests: list[GitRequest] = []
        self.backend_errors: list[str] = []
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._connections: set[socket.socket] = set()
        self._lock = threading.Lock()

    # -- lifecycle ---------------------------------------------------------------------------

    def __enter__(self) -> GitHttpServer:
        self.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def start(self) -> None:
        server = _Server((self.host, 0), _Handler)
        server.owner = self
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="git-http", daemon=True
        )
        self._thread.start()

    def close(self) -> None:
        if self._server is None:
            return
        self._server.shutdown()
        # Idle keep-alive connections would keep their handler threads (and server_close) waiting.
        with self._lock:
            for conn in list(self._connections):
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_RDWR)
        self._server.server_close()
        if self._thread is not None:
            self._thread.join()
        self._server = None

    def _track(self, conn: socket.socket, *, add: bool) -> None:
        with self._lock:
            if add:
                self._connections.add(conn)
            else:
                self._connections.discard(conn)

    # -- addresses and auth ------------------------------------------------------------------

    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError("GitHttpServer is not started")
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def repo_url(self, name: str) -> str:
        return f"{self.url}/{name}.git"

    def set_token(self, token: TokenCheck) -> None:
        """Rotate the accepted token, as an installation token expires and is replaced; a callable
        accepts every password it returns true for (GitHub takes any unexpired installation token)."""
        self.token = token

    # -- repositories ------------------------------------------------------------------------

    def bare_path(self, name: str) -> Path:
        return self.root / f"{name}.git"

    def create_bare(self, name: str) -> Path:
        path = self.bare_path(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["git", "init", "--quiet", "--bare", "--initial-branch=main", str(path)],
            check=True,
            env=isolated_git_env(),
        )
        subprocess.run(
            ["git", "config", "http.receivepack", "true"], cwd=path, check=True, env=isolated_git_env()
        )
        return path

    def repository(self, name: str) -> pygit2.Repository:
        return pygit2.Repository(str(self.bare_path(name)))

    def seed(self, name: str, files: Mapping[str, str | bytes], branch: str = "main") -> str:
        """Create the bare repository `name` with one commit holding `files`; return its sha."""
        self.create_bare(name)
        return self.commit(name, files, branch=branch, message="Initial commit")

    def commit(
        self,
        name: str,
        files: Mapping[str, str | bytes | None],
        branch: str = "main",
        message: str = "Update files",
        parent: str | None = None,
    ) -> str:
        """Add a commit on `branch` (from its tip, or `parent`) that writes `files`; None deletes.

        A branch that does not exist yet starts from the default branch (HEAD), like `git switch -c`.

        Returns the new sha and moves `refs/heads/<branch>` to it.
        """
        repo = self.repository(name)
        ref = f"refs/heads/{branch}"
        parents: list[str] = []
        if parent is not None:
            parents = [parent]
        elif ref in repo.references:
            parents = [str(repo.references[ref].target)]
        elif not repo.head_is_unborn:
            parents = [str(repo.head.target)]  # a new branch forks from the default branch
        index = pygit2.Index()
        if parents:
            index.read_tree(repo[parents[0]].peel(pygit2.Tree))
        for path, content in files.items():
            if content is None:
                index.remove(path)
                continue
            data = content.encode("utf-8") if isinstance(content, str) else content
            index.add(pygit2.IndexEntry(path, repo.create_blob(data), pygit2.enums.FileMode.BLOB))
        tree = index.write_tree(repo)
        sig = pygit2.Signature(_SIG_NAME, _SIG_EMAIL, int(time.time()), 0)
        oid = repo.create_commit(None, sig, sig, message, tree, parents)
        repo.references.create(ref, oid, force=True)
        return str(oid)

    def set_ref(self, name: str, ref: str, sha: str) -> None:
        self.repository(name).references.create(ref, sha, force=True)

    def create_pull_ref(self, name: str, number: int, sha: str) -> str:
        """Point `refs/pull/<number>/head` at `sha`, where GitHub exposes a pull request's head."""
        ref = f"refs/pull/{number}/head"
        self.set_ref(name, ref, sha)
        return ref

    def ref_sha(self, name: str, ref: str) -> str | None:
        repo = self.repository(name)
        if ref not in repo.references:
            return None
        return str(repo.references[ref].resolve().target)

    def refs(self, name: str) -> dict[str, str]:
        repo = self.repository(name)
        return {r: str(repo.references[r].resolve().target) for r in repo.references}

    def remove(self, name: str) -> None:
        shutil.rmtree(self.bare_path(name))


def isolated_git_env() -> dict[str, str]:
    """An environment for helper git commands that ignores the user's and system's git config."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env["GIT_CONFIG_NOSYSTEM"] = "1"
    env["GIT_CONFIG_GLOBAL"] = os.devnull
    return env


def basic_auth_header(token: str, user: str = "x-access-token") -> str:
    """The `Authorization` header value GitHub accepts for an installation token."""
    raw = base64.b64encode(f"{user}:{token}".encode()).decode("ascii")
    return f"Basic {raw}"
