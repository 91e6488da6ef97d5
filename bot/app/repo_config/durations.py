"""Durations in `.github/beam.yml` ("7d", "10m", "1h30m" or whole seconds), read one way for every
setting that takes one (`expiry`, `checks_timeout`), with messages fit for the file's author."""

from __future__ import annotations

import re
from typing import Any

UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def duration_pattern(units: str, digits: int) -> re.Pattern[str]:
    """Whole seconds, or number-unit parts ("1d12h"); also the JSON schema's `pattern`."""
    return re.compile(rf"^(?:[0-9]{{1,{digits}}}|(?:[0-9]{{1,{digits}}}[{units}])+)$")


def short(value: Any) -> str:
    # Never repr a container: a YAML alias bomb would make that enormous.
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return "true" if value else "false"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def duration_seconds(
    value: Any,
    pattern: re.Pattern[str],
    *,
    examples: str,
    bounds: tuple[int, int],
    bound_words: tuple[str, str],
) -> int:
    """Seconds in `value`; raises ValueError naming the accepted forms (`examples`) or the bound."""
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise ValueError(f"expected a duration such as {examples} or a number of seconds")
    if isinstance(value, int):
        seconds = value
    else:
        text = value.strip()
        if not pattern.fullmatch(text):
            raise ValueError(
                f"{short(value)} is not a duration; write e.g. {examples} or a number of seconds"
            )
        parts = re.findall(r"([0-9]+)([smhdw])", text)
        seconds = sum(int(n) * UNIT_SECONDS[u] for n, u in parts) if parts else int(text)
    if seconds < bounds[0]:
        raise ValueError(f"{short(value)} is shorter than the minimum of {bound_words[0]}")
    if seconds > bounds[1]:
        raise ValueError(f"{short(value)} is longer than the maximum of {bound_words[1]}")
    return seconds
