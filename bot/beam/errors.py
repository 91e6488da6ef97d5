"""`BeamError` and the BEM catalogue: one place that says what every code means and its HTTP status.

Codes and statuses are Riverbeam's (riverbeam-reference.md section 2), so a client that knows the
original reads ours the same way. Codes we added for conditions the original never checks take
unused numbers in the matching range and are marked "beam-bot" below.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

TYPE_BASE = "https://riverbase.io/~/rs/error/"


@dataclass(frozen=True, slots=True)
class CatalogEntry:
    code: str
    status: int
    title: str
    message: str
    hint: str | None = None


def _e(code: int, status: int, message: str, hint: str | None = None) -> CatalogEntry:
    return CatalogEntry(f"BEM-{code:03d}", status, _TITLES[status], message, hint)


_TITLES = {
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    409: "Conflict",
    413: "Content Too Large",
    422: "Unprocessable Entity",
    429: "Too Many Requests",
    500: "Internal Server Error",
    501: "Not Implemented",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}

_ENTRIES = [
    _e(1, 422, "Could not serialize the invoke request."),
    _e(3, 422, "Payload is not a valid InvokeRequest."),
    _e(20, 404, "Agent is not registered."),
    _e(21, 404, "Agent is not registered for stream dispatch."),
    _e(22, 404, "The pipeline could not resolve the agent."),
    _e(27, 404, "Agent action not found."),
    _e(28, 404, "Action could not be resolved."),
    _e(40, 400, "Agent does not support the input modalities."),
    _e(41, 422, "No model available for the input modalities."),
    _e(42, 500, "Invalid model configuration."),
    _e(46, 500, "Could not serialize the AgentResult."),
    _e(62, 400, "Resume needs the pending interaction id."),
    _e(63, 400, "Invalid action identifier."),
    _e(64, 400, "Resume references an unknown pending action."),
    _e(65, 400, "Action does not belong to the pending interaction."),
    _e(66, 400, "Resume action is not pending."),
    _e(80, 422, "ScriptedClient lock poisoned."),
    _e(81, 422, "ScriptedClient has no steps left."),
    _e(82, 422, "LLM request failed."),
    _e(83, 422, "LLM response is not decodable."),
    _e(84, 422, "LLM returned an error status."),
    _e(85, 422, "LLM response has no choices."),
    _e(86, 422, "Stream ended without a terminal done frame."),
    _e(87, 422, "Stream reported an error frame."),
    _e(
        88,
        422,
        "Tool loop exceeded the maximum number of rounds.",
        "The model kept calling tools and never answered: use a model that is better at tool calls, or "
        "ask about a smaller change.",
    ),
    _e(89, 422, "Unknown tool during the tool loop."),
    _e(90, 422, "Unknown tool while resuming."),
    # beam-bot: how a real model server's answer can end a run (docs/models.md says what to do).
    _e(
        91,
        422,
        "The model's answer was cut off (finish_reason length) in the middle of a tool call.",
        "Give the model more room to answer: raise max_tokens or the server's context size "
        "(llama-server -c, vLLM --max-model-len), or use a model that writes shorter calls.",
    ),
    _e(
        92,
        413,
        "The prompt is longer than the model's context window.",
        "Start the server with a larger context (llama-server -c 32768, vLLM --max-model-len, Ollama "
        "num_ctx), use a model with a longer context, or ask about a smaller change (on a pull request "
        "the first overflow was already retried once with half the diff).",
    ),
    _e(
        93,
        422,
        "The model server refused tool calls and BEAM_MODEL_TOOLS is native.",
        "Set BEAM_MODEL_TOOLS=auto or text to describe the tools in the prompt instead, or start the "
        "server with tool support (llama-server --jinja, vLLM --enable-auto-tool-choice "
        "--tool-call-parser ...).",
    ),
    _e(
        94,
        422,
        "The model kept answering with tool calls that could not be used, after being told what was wrong.",
        "Use a model that is better at tool calls (a larger one, or an instruction-tuned one with a tool "
        "template), or set BEAM_MODEL_TOOLS=text if its native tool calls are the ones that fail.",
    ),
    # beam-bot: a review that did not happen is said, never posted as "No comments." (issue 29).
    _e(
        95,
        422,
        "The model gave no review: its answers held no findings and no text, so nothing was posted.",
        "Try again; if it keeps happening, use a model that is better at tool calls or at following "
        "instructions (a larger one, or an instruction-tuned one), or check the model server's logs.",
    ),
    _e(
        96,
        429,
        "A per-run cap stopped the review before the model gave any finding, so nothing was posted.",
        "Raise the cap that stopped it (`limits:` in .github/beam.yml, or the server's "
        "BEAM_MAX_TOKENS_PER_RUN and BEAM_MAX_MINUTES_PER_RUN), or ask about a smaller change.",
    ),
    _e(107, 422, "Sandbox tools need metadata.sandbox_root."),
    _e(108, 422, "A required sandbox tool argument is missing."),
    _e(109, 501, "The remember tool must be bound by the host."),
    # Sandbox path jail (SandboxRoot).
    _e(300, 400, "Path is absolute or contains a NUL byte."),
    _e(301, 400, "Path has a parent (..) or root component."),
    _e(302, 400, "Path resolves outside the sandbox."),
    _e(303, 400, "Parent of the path resolves outside the sandbox."),
    _e(304, 400, "Path has no file name."),
    _e(305, 400, "Path is outside the sandbox."),
    _e(306, 400, "List target is not a directory."),
    _e(307, 500, "Could not read the file."),
    _e(308, 400, "Write target's parent is outside the sandbox."),
    _e(309, 400, "A listed path is not under the sandbox root."),
    _e(310, 500, "Could not create the sandbox root."),
    _e(311, 500, "Could not canonicalize the sandbox root."),
    _e(312, 500, "Could not canonicalize the path."),
    _e(313, 500, "Could not canonicalize the parent of the path."),
    _e(314, 500, "Could not create parent directories."),
    _e(315, 500, "Could not canonicalize the write parent."),
    _e(316, 500, "Could not write the file."),
    _e(317, 500, "Could not read a directory entry."),
    _e(318, 500, "Could not read a directory listing."),
    # beam-bot: conditions the original never checks.
    _e(319, 413, "File or listing is larger than the sandbox allows."),
    # Sandbox git (WorkingTree).
    _e(320, 500, "Could not initialise the repository."),
    _e(321, 500, "Could not open the repository."),
    _e(322, 500, "Could not read the repository status."),
    _e(323, 500, "Could not compute the diff."),
    _e(324, 500, "Could not read the log."),
    _e(325, 500, "Could not stage the path."),
    _e(326, 500, "Could not commit."),
    _e(327, 500, "HEAD has no branch to push."),
    _e(328, 403, "Push to a protected ref is denied."),
    _e(329, 500, "The repository has no origin remote."),
    _e(330, 500, "Push failed."),
    _e(331, 500, "Could not set the origin remote."),
    _e(332, 500, "Could not check out the branch."),
    # beam-bot: git conditions the original never checks.
    _e(333, 403, "Checking out a protected ref is denied."),
    _e(334, 403, "Path is blocked for writes in this repository."),
    _e(335, 403, "Push target is not this run's own branch."),
    _e(336, 500, "Could not fetch from the remote."),
    _e(337, 403, "The .git directory is out of reach of sandbox tools."),
    _e(338, 403, "Path is outside the paths this run may write."),
    # beam-bot: how a job that could not finish ends its tracking comment (never silent).
    _e(339, 503, "The job was given up: the process running it was lost on its last attempt."),
    _e(340, 500, "The job failed and will not be retried."),
    # beam-bot: a repository's settings file that does not validate (said on the pull request).
    _e(341, 422, "The repository configuration is invalid."),
    # beam-bot: a review reads the head commit from the object store and writes nothing (commit_tree.py).
    _e(342, 403, "This run reads the pull request's commit and cannot change files or git state."),
    # beam-bot: what a maintainer approves is everything that lands (issue 28, docs/held-pushes.md).
    _e(
        346,
        400,
        "The path contains a control character or a bidirectional-text character.",
        "Choose a file name without newlines, carriage returns, NUL, other control characters or "
        "Unicode direction marks (U+200E, U+200F, U+202A-U+202E, U+2066-U+2069).",
    ),
    _e(
        347,
        403,
        "The pull request comes from a fork: this repository does not let the bot push its commits.",
        "A maintainer can allow it with `fork_pushes: allow` in .github/beam.yml on the default branch; "
        "the approval comment then lists every commit that would land.",
    ),
    _e(
        348,
        409,
        "The commits that would land are not the ones the approval comment listed: nothing was pushed.",
        "A branch the listing relied on moved or was deleted; run the command again for a fresh listing.",
    ),
    _e(
        349,
        413,
        "More commits would land than an approval comment can list: nothing was held.",
        "Ask on a pull request with fewer commits, or merge the base branch into it first.",
    ),
    # beam-bot: the checks jail (bot/app/checks, docs/checks.md).
    _e(350, 503, "Checks are off: bubblewrap cannot build the jail on this host."),
    _e(351, 500, "The jail could not be built for this check."),
    _e(352, 503, "Too many checks are running at once in this process."),
    _e(353, 400, "The tree to check is not a directory."),
    _e(354, 403, "The checks proxy refused a host that BEAM_CHECKS_ALLOWED_HOSTS does not name."),
    _e(355, 500, "Could not start the checks proxy."),
    _e(356, 413, "What the checks setup installed is larger than the jail's tmpfs."),
    # beam-bot: what one run may fetch of a big repository (docs/configuration.md).
    _e(
        357,
        413,
        "The file could not be read: this run has fetched as many bytes as the server allows.",
        "The operator can raise BEAM_MAX_FETCH_BYTES; the review covers what it could read.",
    ),
    _e(
        358,
        413,
        "The repository is larger than this server's disk budget: it was not fetched.",
        "The operator can raise BEAM_MAX_REPO_BYTES, or review a smaller repository.",
    ),
    # beam-bot: the repository's checks (docs/checks.md).
    _e(360, 429, "This run has used all its check runs."),
    _e(361, 403, "A held push whose required checks did not pass cannot be approved."),
    # beam-bot: held commits kept in the database, so any worker on any host can push them (issue 23).
    _e(
        370,
        413,
        "The commit is too large to hold for approval: nothing was held.",
        "Ask for a smaller change (fewer or smaller files, no generated or binary files), or have the "
        "operator raise BEAM_MAX_HELD_PUSH_BYTES.",
    ),
    _e(
        371,
        500,
        "The held commit stored in the database does not match its digest: nothing was pushed.",
        "The stored copy is damaged; run the command again to hold a fresh commit.",
    ),
    _e(
        372,
        500,
        "The held commit stored in the database is not the approved commit: nothing was pushed.",
        "Run the command again to hold a fresh commit.",
    ),
    _e(
        373,
        409,
        "The commit the held push builds on is no longer on GitHub: nothing was pushed.",
        "The branch it started from was probably force-pushed; run the command again on the new tip.",
    ),
    _e(
        374,
        404,
        "The held commit is neither in this worker's mirror nor in the database: nothing was pushed.",
        "It was held before held commits were stored in the database, on a host whose copy is gone; "
        "run the command again.",
    ),
    # beam-bot: the App's credentials kept in the database, sealed with BEAM_SECRET_KEY (issue 23).
    _e(375, 500, "The stored App credentials cannot be opened with BEAM_SECRET_KEY (wrong key, or altered)."),
    _e(376, 503, "The database holds the App's sealed credentials, and BEAM_SECRET_KEY is not set."),
    _e(377, 500, "BEAM_SECRET_KEY is not a comma-separated list of Fernet keys."),
    _e(378, 503, "Setup mode cannot keep the App's credentials: PostgreSQL needs BEAM_SECRET_KEY."),
    _e(379, 409, "Another beam-bot process registered the App first."),
    # beam-bot: GitHub itself (bot/app/runs/outage.py).
    _e(
        380,
        503,
        "GitHub was down for longer than this run waits for it (BEAM_GITHUB_OUTAGE_WAIT).",
        "Try the command again once GitHub answers again; the server's log names each failed call.",
    ),
    # beam-bot: the ways in without a server, `beam-bot action` and `beam-bot review <URL>` (issue 31).
    _e(
        390,
        400,
        "The GitHub Actions environment is incomplete.",
        "`beam-bot action` runs as a step of a GitHub Actions job (docs/action.md): it reads "
        "GITHUB_EVENT_NAME, GITHUB_EVENT_PATH, GITHUB_TOKEN, GITHUB_REPOSITORY and GITHUB_RUN_ID.",
    ),
    _e(
        391,
        400,
        "This is not the URL of a pull request.",
        "Give it as https://github.com/OWNER/REPO/pull/NUMBER (or https://HOST/OWNER/REPO/pull/NUMBER "
        "on GitHub Enterprise Server).",
    ),
    _e(
        392,
        401,
        "No GitHub token.",
        "Set GITHUB_TOKEN, or log in with the GitHub CLI (`gh auth login`): its token is used then.",
    ),
    _e(
        393,
        500,
        "The Action's work did not finish.",
        "The job log names the failed step; the pull request's tracking comment says what happened there.",
    ),
    _e(
        394,
        503,
        "The pull request's state from the last run could not be read (refs/beam/state/pr-N).",
        "Check that the job has `contents: write` and that its token is valid; then run the workflow again.",
    ),
    _e(
        395,
        503,
        "The workflow job ended before the run finished (cancelled, timed out or stopped).",
        "The workflow run's log says why it ended; post the command again to run it again.",
    ),
    _e(
        396,
        503,
        "`beam-bot action` was stopped by a signal before its work was done.",
        "The job's `if: always()` step (`beam-bot action --finish`) makes the tracking comment final.",
    ),
]

CATALOG: dict[str, CatalogEntry] = {entry.code: entry for entry in _ENTRIES}


class BeamError(Exception):
    """An error with a catalogued code, so every layer can map it (HTTP status, PR comment) alike.

    `data` follows the original's `with_data`: a string becomes `{"detail": text}`, any other JSON
    value is kept as is, and `None` means no data.
    """

    def __init__(self, code: str, data: Any = None, *, message: str | None = None) -> None:
        entry = CATALOG.get(code)
        if entry is None:
            raise KeyError(f"{code} is not in the BEM catalogue")
        self.entry = entry
        self.code = code
        self.data: Any = {"detail": data} if isinstance(data, str) else data
        self.message = message or entry.message
        super().__init__(f"{self.message} ({code})")

    @property
    def http_status(self) -> int:
        return self.entry.status

    @property
    def detail(self) -> str | None:
        if isinstance(self.data, dict):
            detail = self.data.get("detail")
            return detail if isinstance(detail, str) else None
        return None

    def to_json(self) -> dict[str, Any]:
        """The serialized RiverbaseError, field order as the original writes it."""
        out: dict[str, Any] = {
            "http_status": self.entry.status,
            "http_title": self.entry.title,
            "errmesg": self.message,
            "errcode": self.code,
            "errdata": self.data,
        }
        if self.entry.hint:
            out["errhint"] = self.entry.hint
        return out

    def to_problem(self, instance: str = "") -> dict[str, Any]:
        """An RFC 7807 problem body, as the original's HTTP adapter builds it."""
        out: dict[str, Any] = {
            "type": TYPE_BASE + self.code,
            "title": self.entry.title,
            "status": self.entry.status,
            "detail": self.message,
            "instance": instance,
            "errcode": self.code,
            "errdata": self.data,
        }
        if self.entry.hint:
            out["errhint"] = self.entry.hint
        return out

    def __str__(self) -> str:
        detail = self.detail
        base = f"{self.message} ({self.code})"
        text = f"{base}: {detail}" if detail else base
        return f"{text}\nWhat to do: {self.entry.hint}" if self.entry.hint else text
