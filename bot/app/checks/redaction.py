"""Secrets cut out of a check's output before anyone sees it (the model, a comment, a check run).

The jail gives a check no secret of the bot's, but the repository's own tests may print one of
theirs (a token in a fixture, a key in a failing assertion): the output is published on GitHub, so
anything shaped like a credential is replaced by `[redacted]`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

REDACTED = "[redacted]"

_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(?:-----END [A-Z ]*PRIVATE KEY-----|\Z)", re.S),
        REDACTED,
    ),
    (re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})"), REDACTED),
    (re.compile(r"\b(?:sk|rk)-[A-Za-z0-9_-]{20,}"), REDACTED),
    (re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}"), REDACTED),
    (re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"), REDACTED),
    (re.compile(r"\beyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}"), REDACTED),  # JWTs
    (
        re.compile(r"(?i)\b((?:proxy-)?authorization\s*[:=]\s*)(?:bearer\s+|basic\s+|token\s+)?\S+"),
        rf"\1{REDACTED}",
    ),
    (re.compile(r"(://)[^/\s:@]+:[^/\s@]+@"), rf"\1{REDACTED}@"),
    (
        re.compile(
            r"(?i)\b([A-Z0-9_.-]*(?:secret|token|passw(?:or)?d|api[_-]?key|private[_-]?key|credential)"
            r"[A-Z0-9_.-]*[\"']?\s*[:=]\s*)([\"']?)[^\s\"',;]{4,}\2"
        ),
        rf"\1\2{REDACTED}\2",
    ),
)


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """`text` with every credential-shaped string, and each of `secrets` (4+ chars), replaced."""
    for secret in sorted({s for s in secrets if len(s) >= 4}, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text
