"""Cuts rest-subset.json out of GitHub's full REST description; kept so the subset can be remade.

Run by hand, never by the tests:
    python tests/data/github/cut_rest_subset.py ../shared/data/github/full/rest-api.github.com.json

It keeps only the operations the bot calls, every component they `$ref` (followed transitively),
removes Octokit's `x-octokit` markers and restores GitHub's own `info` block (SOURCES.md says why).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

OPERATIONS = [
    ("get", "/app"),
    ("post", "/app/installations/{installation_id}/access_tokens"),
    ("post", "/app-manifests/{code}/conversions"),
    ("get", "/repos/{owner}/{repo}"),
    ("get", "/repos/{owner}/{repo}/installation"),
    ("get", "/repos/{owner}/{repo}/collaborators/{username}/permission"),
    ("get", "/repos/{owner}/{repo}/contents/{path}"),
    ("get", "/repos/{owner}/{repo}/issues/{issue_number}"),
    ("get", "/repos/{owner}/{repo}/issues/{issue_number}/comments"),
    ("post", "/repos/{owner}/{repo}/issues/{issue_number}/comments"),
    ("get", "/repos/{owner}/{repo}/issues/comments/{comment_id}"),
    ("patch", "/repos/{owner}/{repo}/issues/comments/{comment_id}"),
    ("get", "/repos/{owner}/{repo}/issues/comments/{comment_id}/reactions"),
    ("post", "/repos/{owner}/{repo}/issues/comments/{comment_id}/reactions"),
    ("post", "/repos/{owner}/{repo}/pulls/comments/{comment_id}/reactions"),
    ("get", "/repos/{owner}/{repo}/pulls"),
    ("post", "/repos/{owner}/{repo}/pulls"),
    ("get", "/repos/{owner}/{repo}/pulls/{pull_number}"),
    ("get", "/repos/{owner}/{repo}/pulls/{pull_number}/files"),
    ("get", "/repos/{owner}/{repo}/pulls/{pull_number}/reviews"),
    ("post", "/repos/{owner}/{repo}/pulls/{pull_number}/reviews"),
    ("get", "/repos/{owner}/{repo}/pulls/{pull_number}/comments"),
    ("post", "/repos/{owner}/{repo}/pulls/{pull_number}/comments/{comment_id}/replies"),
    # Automatic reviews (issue 10): the check run, the bot's earlier review comments, the new range.
    ("post", "/repos/{owner}/{repo}/check-runs"),
    ("patch", "/repos/{owner}/{repo}/check-runs/{check_run_id}"),
    # Issue 8: a retried check run is found by its `external_id` among the head commit's check runs.
    ("get", "/repos/{owner}/{repo}/commits/{ref}/check-runs"),
    ("get", "/repos/{owner}/{repo}/pulls/comments/{comment_id}"),
    ("get", "/repos/{owner}/{repo}/compare/{basehead}"),
    # Issue 21: a 👎 on a finding dismisses it; read when the next review of the pull request starts.
    ("get", "/repos/{owner}/{repo}/pulls/comments/{comment_id}/reactions"),
    # Issue 32: deliveries missed while the bot was down are listed and redelivered.
    ("get", "/app/hook/deliveries"),
    ("post", "/app/hook/deliveries/{delivery_id}/attempts"),
    # Issue 44: the dashboard's "Sign in with GitHub": who the user is, the App's installations and
    # repositories they can read, and their role in the App's owner organisation (the operator view).
    ("get", "/user"),
    ("get", "/user/installations"),
    ("get", "/user/installations/{installation_id}/repositories"),
    ("get", "/user/memberships/orgs/{org}"),
]

GITHUB_INFO = {
    "version": "1.1.4",
    "title": "GitHub v3 REST API",
    "description": "GitHub's v3 REST API.",
    "license": {"name": "MIT", "url": "https://spdx.org/licenses/MIT"},
    "termsOfService": "https://docs.github.com/articles/github-terms-of-service",
    "contact": {"name": "Support", "url": "https://support.github.com/contact?tags=dotcom-rest-api"},
    "x-github-plan": "api.github.com",
}


def _refs(node: Any, found: set[str]) -> None:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str):
            found.add(ref)
        for value in node.values():
            _refs(value, found)
    elif isinstance(node, list):
        for value in node:
            _refs(value, found)


# Octokit replaces this operation with an older text (no `oneOf` on status, fewer statuses); the
# shared data's github-rest-subset.json holds GitHub's own text, which is used instead.
GITHUB_OWN = [("post", "/repos/{owner}/{repo}/check-runs")]


def cut(full: dict[str, Any], github_own: dict[str, Any] | None = None) -> dict[str, Any]:
    paths: dict[str, Any] = {}
    for method, path in OPERATIONS:
        source = full
        if github_own is not None and (method, path) in GITHUB_OWN:
            source = github_own
        operation = dict(source["paths"][path][method])
        operation.pop("x-octokit", None)
        paths.setdefault(path, {})[method] = operation
    components: dict[str, dict[str, Any]] = {}
    pending: set[str] = set()
    _refs(paths, pending)
    done: set[str] = set()
    while pending:
        ref = pending.pop()
        if ref in done:
            continue
        done.add(ref)
        _, _, kind, name = ref.split("/", 3)
        target = full["components"][kind][name]
        components.setdefault(kind, {})[name] = target
        _refs(target, pending)
    ordered = {kind: dict(sorted(items.items())) for kind, items in sorted(components.items())}
    return {
        "openapi": full["openapi"],
        "info": GITHUB_INFO,
        "servers": full["servers"],
        "paths": dict(sorted(paths.items())),
        "components": ordered,
    }


def main() -> None:
    source = Path(sys.argv[1])
    target = Path(__file__).with_name("rest-subset.json")
    own_path = source.parent.parent / "github-rest-subset.json"
    own = json.loads(own_path.read_text(encoding="utf-8")) if own_path.exists() else None
    subset = cut(json.loads(source.read_text(encoding="utf-8")), own)
    target.write_text(json.dumps(subset, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"{target}: {len(subset['paths'])} paths, {target.stat().st_size} bytes")


if __name__ == "__main__":
    main()
