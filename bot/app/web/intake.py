"""`POST /webhooks`: check a GitHub delivery, store it with its job, answer 202 in milliseconds.

Order of the checks, cheapest first and nothing stored before all pass: size (a Content-Length over
the cap, before reading), setup mode (503), the GitHub headers (400), content type (415), the body read with
a cap (413), the signature over the raw bytes (401, constant-time), JSON (400). No GitHub call, no
git and no model call happen here (ARCHITECTURE section 2, step 1): the workers do the work.

Decisions:
- `ping` (sent when the hook is created) is answered 200 {"status": "pong"} and not stored: there
  is nothing to do for it.
- Every other signed event is stored (dedupe and audit), also events the bot ignores. A job is made
  only when `bot.app.webhooks.triage.can_lead_to_work` says the delivery might lead to work (a
  `/beam` line in a new comment by a person, a pull request action a feature handles, any event it
  does not know); the worker's router asks the same function, so both agree.
- A delivery that cannot lead to work is stored without its body (id, event, action and time),
  unless `keep_ignored_payloads`: nothing ever reads that body, most deliveries are such comments,
  and writing 14 KB of someone else's conversation was two thirds of intake's cost (issue 9). The
  bot keeps only what it acts on; GitHub keeps every delivery for redelivery.
- Per-delivery lines are logged at DEBUG (INFO formatting cost a tenth of the intake CPU); the
  counters in /metrics count every outcome. Refusals and store errors stay visible at INFO and above.
- Only `application/json` deliveries are accepted: a hook configured for form encoding gets 415 with
  a message that says how to fix it.
- Issue 8, abuse: bytes of bodies not yet verified are capped in total and per peer, as received
  (`limits.ByteBudget`, issue 32; the excess waits, then gets 503 with Retry-After); the body read
  times out (408); the fields stored as columns are made storable on PostgreSQL (U+0000 becomes
  U+FFFD there; the payload is kept exact).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import re
import time
from collections.abc import Callable
from typing import Any, Protocol

import anyio.to_thread
import orjson
from gidgethub import ValidationFailure
from gidgethub.sansio import validate_event
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from bot.app.web.limits import ByteBudget
from bot.app.web.metrics import Metrics
from bot.app.webhooks.triage import can_lead_to_work

log = logging.getLogger("beam.intake")

# GitHub caps webhook payloads at 25 MB and does not send larger ones.
MAX_BODY = 25 * 1024 * 1024
# Bodies above this are hashed and parsed in a worker thread so that the event loop stays free.
_OFF_LOOP = 1024 * 1024
_EVENT_RE = re.compile(r"^[a-z_]{1,64}$")
_DELIVERY_RE = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
_SIG_RE = re.compile(r"^sha256=[0-9a-fA-F]{64}$")
MAX_UNVERIFIED = 64 * 1024 * 1024  # bytes of unverified bodies held at once, all requests together
BUDGET_WAIT = 5.0  # seconds a body waits for room in that budget before 503
BODY_TIMEOUT = 30.0  # seconds to read one body


class DeliveryStore(Protocol):
    """What intake needs from `bot.app.jobs.store.Store`."""

    async def accept_delivery(
        self,
        delivery_id: str,
        event: str,
        action: str | None,
        payload: bytes,
        job_key: str | None,
        job_kind: str = ...,
        *,
        with_job: bool = ...,
        installation_id: int = ...,
    ) -> bool: ...


class _Rejected(Exception):
    def __init__(self, status: int, reason: str, message: str, *, retry_after: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.message = message
        self.retry_after = retry_after


def signature_for(secret: bytes, body: bytes) -> str:
    """The X-Hub-Signature-256 value GitHub sends for `body`."""
    return "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()


def signature_matches(secret: bytes, body: bytes, header: str | None) -> bool:
    """gidgethub's check (constant-time), given only a well-formed `sha256=` value: it would also take
    an HMAC-SHA1 in this header, and GitHub signs X-Hub-Signature-256 with SHA-256 alone.

    Measured against our own HMAC check before the switch (issue 24), bench/intake.py's throughput
    with both intakes in the same run, 9 interleaved rounds: serve/bare 1.397x against 1.518x,
    1.453x against 1.449x, 1.532x against 1.540x (0.92, 1.00, 1.00 of ours; median 0.995). Alone,
    the check of the 14 KB delivery took 11 to 32 us more (three runs; ours 18 to 35 us), a few
    percent of a delivery's cost: within the 0.95 the issue allowed, on a noisy shared machine.
    Go back to `hmac.new(secret, body, hashlib.sha256)` if intake has to get faster."""
    if header is None or not _SIG_RE.match(header):
        return False
    try:
        validate_event(body, signature=header.lower(), secret=secret.decode())
    except ValidationFailure:
        return False
    return True


def job_key_for(payload: dict[str, Any]) -> str:
    """`owner/repo#N` for an issue or pull request, `owner/repo` for other repository events, else `global`.

    The queue runs one job at a time per key, so two commands on one pull request never race.
    """
    repo = payload.get("repository")
    full_name = repo.get("full_name") if isinstance(repo, dict) else None
    if not isinstance(full_name, str) or not full_name:
        return "global"
    for field in ("issue", "pull_request"):
        item = payload.get(field)
        number = item.get("number") if isinstance(item, dict) else None
        if isinstance(number, int) and not isinstance(number, bool):
            return f"{full_name}#{number}"
    return full_name


def installation_of(payload: dict[str, Any]) -> int:
    """The App installation a delivery is for (0 when it names none): claims interleave by it."""
    installation = payload.get("installation")
    found = installation.get("id") if isinstance(installation, dict) else None
    return found if isinstance(found, int) and not isinstance(found, bool) and found > 0 else 0


class WebhookIntake:
    """The endpoint (an ASGI app) and what it needs; the app's lifespan fills `store`, setup `secret`.

    `secret is None` means setup mode: deliveries are refused with 503 until the App is registered.
    It is plain ASGI, not a Starlette route: Starlette's request, response and middleware objects
    cost 30 us a request, a third of what a bare endpoint spends (measured with bench/intake.py).
    """

    def __init__(
        self,
        metrics: Metrics,
        *,
        public_url: str | None = None,
        max_body: int = MAX_BODY,
        max_unverified: int = MAX_UNVERIFIED,
        peer_share: float = 1.0,
        budget_wait: float = BUDGET_WAIT,
        body_timeout: float = BODY_TIMEOUT,
        keep_ignored_payloads: bool = False,
    ) -> None:
        self.metrics = metrics
        self.keep_ignored_payloads = keep_ignored_payloads
        self.public_url = public_url
        self.max_body = max_body
        # A peer's share of the budget, never less than one body of the largest size GitHub sends
        # (GitHub delivers from a few addresses; its 25 MB payloads must still fit).
        per_peer = max(int(max_unverified * peer_share), min(max_body, max_unverified))
        self.budget = ByteBudget(max_unverified, per_peer)
        self.budget_wait = budget_wait
        self.body_timeout = body_timeout
        self.store: DeliveryStore | None = None
        self.secret: bytes | None = None
        self.notify: Callable[[], None] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        status, body, extra = await self.answer(scope, receive)
        headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body)), *extra]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    async def answer(self, scope: Scope, receive: Receive) -> tuple[int, bytes, list[tuple[bytes, bytes]]]:
        """Status, JSON body and extra headers for one delivery (also what the webhook proxy hands in)."""
        started = time.perf_counter()
        headers = _github_headers(scope)
        event, delivery = headers.get("x-github-event"), headers.get("x-github-delivery")
        action: str | None = None
        try:
            status, outcome, action = await self._handle(scope, receive, headers, event, delivery)
        except _Rejected as rej:
            self.metrics.rejection(rej.reason)
            self._log(event, action, delivery, rej.status, rej.reason, started)
            extra = [(b"retry-after", b"%d" % rej.retry_after)] if rej.retry_after is not None else []
            return rej.status, _json({"error": rej.reason, "message": rej.message}), extra
        except Exception:
            # What Starlette's error middleware did for a route: a 500, and the traceback in our log.
            log.exception("delivery %s: intake failed", _short(delivery))
            self.metrics.rejection("internal_error")
            return 500, _json({"error": "internal_error", "message": "intake failed"}), []
        self.metrics.delivery(outcome)
        self._log(event, action, delivery, status, outcome, started)
        # GitHub sees "accepted" whether or not a job was made: the delivery is stored either way.
        return status, _ANSWERS[outcome], []

    async def _handle(
        self, scope: Scope, receive: Receive, headers: dict[str, str], event: str | None, delivery: str | None
    ) -> tuple[int, str, str | None]:
        self._declared_length(headers)  # a length over the cap: 413 before anything is read
        secret, store = self.secret, self.store
        if secret is None or store is None:
            # Setup mode only: Starlette's request is cheap enough here and knows the proxy rules.
            base = self.public_url or str(Request(scope).base_url).rstrip("/")
            raise _Rejected(
                503, "setup_mode", f"beam-bot is in setup mode: open {base}/ to register the GitHub App"
            )
        if not event or not _EVENT_RE.match(event):
            raise _Rejected(400, "missing_header", "X-GitHub-Event is missing or not an event name")
        if not delivery or not _DELIVERY_RE.match(delivery):
            raise _Rejected(400, "missing_header", "X-GitHub-Delivery is missing or not a delivery id")
        media_type = headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if media_type != "application/json":
            raise _Rejected(
                415,
                "media_type",
                "beam-bot accepts webhook deliveries as application/json only: set the hook's "
                "content type to application/json in the GitHub App settings",
            )
        reserved = [0]
        peer = _peer(scope)
        try:
            body = await self._read_body(receive, reserved, peer)
            header = headers.get("x-hub-signature-256")
            if len(body) > _OFF_LOOP:
                ok = await anyio.to_thread.run_sync(signature_matches, secret, body, header)
            else:
                ok = signature_matches(secret, body, header)
        finally:
            self.budget.release(reserved[0], peer)  # verified (or refused): no longer unverified
        if not ok:
            raise _Rejected(401, "signature", "X-Hub-Signature-256 is missing or does not match the body")
        payload = await self._parse(body)
        action = payload.get("action")
        action = _storable(action) if isinstance(action, str) else None
        if event == "ping":
            return 200, "pong", action
        work = can_lead_to_work(event, payload)
        try:
            fresh = await store.accept_delivery(
                delivery,
                event,
                action,
                body if work or self.keep_ignored_payloads else b"",
                _storable(job_key_for(payload)),
                with_job=work,
                installation_id=installation_of(payload),
            )
        except Exception:
            # Not stored, so not acknowledged: GitHub records the failure, and the redelivery
            # sweep (web/redelivery.py) asks for the delivery again once the database is back.
            log.exception("delivery %s could not be stored", delivery)
            raise _Rejected(
                503, "store_error", "the delivery could not be stored; redeliver it later"
            ) from None
        if fresh and work and self.notify is not None:
            self.notify()
        if not fresh:
            return 202, "duplicate", action
        return 202, "accepted" if work else "no_work", action

    def _declared_length(self, headers: dict[str, str]) -> int | None:
        declared = headers.get("content-length")
        if declared is None:
            return None
        try:
            length = int(declared)
        except ValueError:
            raise _Rejected(400, "bad_length", "Content-Length is not a number") from None
        if length > self.max_body:
            raise _Rejected(413, "too_large", f"the body is over {self.max_body} bytes")
        return length

    async def _reserve(self, size: int, reserved: list[int], peer: str) -> None:
        if not await self.budget.reserve(size, self.budget_wait, peer):
            raise _Rejected(
                503, "busy", "too many webhook bodies are being received; try again", retry_after=5
            )
        reserved[0] += min(size, self.budget.per_peer)

    async def _read_body(self, receive: Receive, reserved: list[int], peer: str) -> bytes:
        # Read through the stream with a cap: a chunked upload without Content-Length cannot make
        # us buffer more than max_body. Each chunk is counted in the budget of unverified bodies as
        # it arrives (issue 32): a declared length costs the sender nothing, so it reserves nothing,
        # and uvicorn stops reading a connection whose chunks are not taken (flow control).
        chunks: list[bytes] = []
        size = 0
        try:
            async with asyncio.timeout(self.body_timeout):
                while True:
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        raise _Rejected(
                            400, "disconnected", "the client went away before sending the whole body"
                        )
                    chunk: bytes = message.get("body", b"")
                    size += len(chunk)
                    if size > self.max_body:
                        raise _Rejected(413, "too_large", f"the body is over {self.max_body} bytes")
                    if chunk:
                        await self._reserve(len(chunk), reserved, peer)
                    chunks.append(chunk)
                    if not message.get("more_body", False):
                        break
        except TimeoutError:
            raise _Rejected(
                408, "body_timeout", f"the body took longer than {self.body_timeout:g} s"
            ) from None
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    async def _parse(self, body: bytes) -> dict[str, Any]:
        try:
            # Strict UTF-8 (what GitHub sends): json.loads would also take UTF-16 bytes, which the
            # store could not keep as text.
            if len(body) > _OFF_LOOP:
                payload = await anyio.to_thread.run_sync(_loads, body)
            else:
                payload = _loads(body)
        except (ValueError, RecursionError):
            raise _Rejected(400, "bad_json", "the body is not valid UTF-8 JSON") from None
        if not isinstance(payload, dict):
            raise _Rejected(400, "bad_json", "the body is not a JSON object")
        return payload

    @staticmethod
    def _log(
        event: str | None, action: str | None, delivery: str | None, status: int, outcome: str, started: float
    ) -> None:
        # A stored delivery costs no log formatting unless DEBUG is on; a refusal is worth a line.
        level = logging.DEBUG if status < 300 else logging.INFO
        if not log.isEnabledFor(level):
            return
        # Header values are attacker-controlled until the signature passed: log them quoted and short.
        ms = (time.perf_counter() - started) * 1000
        log.log(
            level,
            "delivery event=%s action=%s id=%s status=%d outcome=%s ms=%.2f",
            _short(event),
            _short(action),
            _short(delivery),
            status,
            outcome,
            ms,
        )


def _storable(text: str) -> str:
    """A string PostgreSQL can keep in a text column (it refuses U+0000; SQLite does not)."""
    return text.replace("\x00", "\ufffd")


def _loads(body: bytes) -> Any:
    # orjson: strict UTF-8 by itself, and twice as fast as json on a 14 KB comment payload, the
    # largest single cost of intake; its JSONDecodeError is a ValueError.
    return orjson.loads(body)


def _json(content: dict[str, str]) -> bytes:
    # The bytes Starlette's JSONResponse wrote before intake became plain ASGI.
    return orjson.dumps(content)


_ANSWERS = {
    "accepted": _json({"status": "accepted"}),
    "no_work": _json({"status": "accepted"}),
    "duplicate": _json({"status": "duplicate"}),
    "pong": _json({"status": "pong"}),
}
_HEADERS = frozenset(
    {b"x-github-event", b"x-github-delivery", b"x-hub-signature-256", b"content-type", b"content-length"}
)


def _github_headers(scope: Scope) -> dict[str, str]:
    """The request headers intake reads; the first of repeated ones wins, as in Starlette."""
    found: dict[str, str] = {}
    for name, value in scope["headers"]:
        if name in _HEADERS:
            found.setdefault(name.decode("latin-1"), value.decode("latin-1"))
    return found


def _peer(scope: Scope) -> str:
    """The client's address (not its port): what one peer's share of the byte budget is counted by."""
    client = scope.get("client")
    return str(client[0]) if client else ""


def _short(value: str | None) -> str:
    if value is None:
        return "-"
    return repr(value[:80]) if not re.fullmatch(r"[\w.:-]{1,80}", value) else value
