"""Real GitHub webhook payloads (tests/data/github/webhooks) and deliveries signed the way GitHub signs.

GitHub sends `X-Hub-Signature-256: sha256=<HMAC-SHA256 hex of the raw body, keyed by the secret>`
(https://docs.github.com/webhooks/using-webhooks/validating-webhook-deliveries), plus the event
name in `X-GitHub-Event` and a unique `X-GitHub-Delivery` id. The payload builders start from the
real examples and change only the fields a test names, so every other field keeps GitHub's shape.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import hmac
import json
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

WEBHOOKS_DIR = Path(__file__).resolve().parents[1] / "data" / "github" / "webhooks"


def payload_names() -> list[str]:
    return sorted(p.name for p in WEBHOOKS_DIR.glob("*.json"))


def raw_payload(name: str) -> bytes:
    """The file exactly as GitHub's example has it, e.g. `raw_payload("ping.json")`."""
    return (WEBHOOKS_DIR / name).read_bytes()


@functools.cache
def _parsed(name: str) -> Any:
    return json.loads(raw_payload(name))


def load_payload(name: str) -> dict[str, Any]:
    """A fresh, mutable copy of one example payload."""
    payload = copy.deepcopy(_parsed(name))
    assert isinstance(payload, dict)
    return payload


def event_of(name: str) -> str:
    """`issue_comment.created.issue.json` -> `issue_comment` (the file name starts with the event)."""
    return name.split(".", 1)[0]


def sign(body: bytes, secret: str) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class Delivery:
    event: str
    delivery_id: str
    body: bytes
    headers: dict[str, str]

    def json(self) -> Any:
        return json.loads(self.body)


def delivery(
    event: str,
    payload: dict[str, Any] | bytes,
    secret: str | None,
    *,
    delivery_id: str | None = None,
    signature: str | None = None,
) -> Delivery:
    """A delivery as GitHub would POST it. `secret=None` sends it unsigned; `signature` forces one."""
    body = payload if isinstance(payload, bytes) else json.dumps(payload, separators=(",", ":")).encode()
    delivery_id = delivery_id or str(uuid.uuid4())
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "GitHub-Hookshot/044aadd",
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery_id,
        "X-GitHub-Hook-ID": "292430182",
    }
    if isinstance(payload, dict) and isinstance(payload.get("installation"), dict):
        headers["X-GitHub-Hook-Installation-Target-Type"] = "integration"
    if signature is not None:
        headers["X-Hub-Signature-256"] = signature
    elif secret is not None:
        headers["X-Hub-Signature-256"] = sign(body, secret)
    return Delivery(event, delivery_id, body, headers)


def example_delivery(name: str, secret: str | None, *, delivery_id: str | None = None) -> Delivery:
    """One example file sent byte for byte as stored, signed over those exact bytes."""
    return delivery(event_of(name), raw_payload(name), secret, delivery_id=delivery_id)


def _user(payload_user: dict[str, Any], login: str, user_type: str, user_id: int) -> dict[str, Any]:
    user = dict(payload_user)
    user.update(login=login, type=user_type, id=user_id)
    user["html_url"] = f"https://github.com/{login}"
    user["url"] = f"https://api.github.com/users/{login}"
    return user


def _set_repo(payload: dict[str, Any], full_name: str, installation_id: int | None) -> None:
    owner, name = full_name.split("/")
    repo = payload["repository"]
    repo.update(name=name, full_name=full_name, html_url=f"https://github.com/{full_name}")
    repo["url"] = f"https://api.github.com/repos/{full_name}"
    repo["owner"] = _user(repo["owner"], owner, repo["owner"].get("type", "User"), repo["owner"]["id"])
    if installation_id is None:
        payload.pop("installation", None)
    else:
        payload["installation"] = {
            "id": installation_id,
            "node_id": "MDIzOkludGVncmF0aW9uSW5zdGFsbGF0aW9uMQ==",
        }


def issue_comment_payload(
    body: str,
    *,
    repo: str = "octo-org/hello-world",
    number: int = 7,
    commenter: str = "octocat",
    commenter_type: str = "User",
    comment_id: int = 1402562524,
    installation_id: int | None = 1,
    on_pull_request: bool = True,
    action: str = "created",
) -> dict[str, Any]:
    """An `issue_comment` payload from the real examples (a PR comment, or a plain-issue one)."""
    if on_pull_request:
        source = "issue_comment.created.pull_request.json"
    elif action == "edited":
        source = "issue_comment.edited.issue.json"
    else:
        source = "issue_comment.created.issue.with-installation.json"
    payload = load_payload(source)
    payload["action"] = action
    if action == "edited":
        payload["changes"] = {"body": {"from": "an earlier body"}}
    else:
        payload.pop("changes", None)
    _set_repo(payload, repo, installation_id)
    user = _user(payload["comment"]["user"], commenter, commenter_type, 90_000 + len(commenter))
    html = f"https://github.com/{repo}/{'pull' if on_pull_request else 'issues'}/{number}"
    payload["comment"].update(
        id=comment_id, body=body, user=user, html_url=f"{html}#issuecomment-{comment_id}"
    )
    payload["comment"]["url"] = f"https://api.github.com/repos/{repo}/issues/comments/{comment_id}"
    payload["comment"]["issue_url"] = f"https://api.github.com/repos/{repo}/issues/{number}"
    payload["issue"].update(
        number=number, html_url=html, url=f"https://api.github.com/repos/{repo}/issues/{number}"
    )
    if on_pull_request:
        api = f"https://api.github.com/repos/{repo}/pulls/{number}"
        payload["issue"]["pull_request"].update(
            url=api, html_url=html, diff_url=f"{html}.diff", patch_url=f"{html}.patch"
        )
    payload["sender"] = user
    return payload


def review_comment_payload(
    body: str,
    *,
    repo: str = "octo-org/hello-world",
    number: int = 2,
    commenter: str = "octocat",
    commenter_type: str = "User",
    comment_id: int = 284312630,
    installation_id: int | None = 1,
    path: str = "README.md",
    line: int = 1,
) -> dict[str, Any]:
    """A `pull_request_review_comment` created payload from the real example."""
    payload = load_payload("pull_request_review_comment.created.json")
    _set_repo(payload, repo, installation_id)
    user = _user(payload["comment"]["user"], commenter, commenter_type, 90_000 + len(commenter))
    payload["comment"].update(id=comment_id, body=body, user=user, path=path, line=line, original_line=line)
    payload["comment"]["html_url"] = f"https://github.com/{repo}/pull/{number}#discussion_r{comment_id}"
    payload["pull_request"]["number"] = number
    payload["pull_request"]["html_url"] = f"https://github.com/{repo}/pull/{number}"
    payload["sender"] = user
    return payload


def pull_request_payload(
    action: str = "opened",
    *,
    repo: str = "octo-org/hello-world",
    number: int = 2,
    installation_id: int | None = 1,
    head_sha: str | None = None,
) -> dict[str, Any]:
    """A `pull_request` payload (opened, synchronize or closed example) retargeted at `repo`."""
    payload = load_payload(f"pull_request.{action}.json")
    _set_repo(payload, repo, installation_id)
    payload["number"] = number
    payload["pull_request"]["number"] = number
    payload["pull_request"]["html_url"] = f"https://github.com/{repo}/pull/{number}"
    if head_sha is not None:
        payload["pull_request"]["head"]["sha"] = head_sha
    return payload
