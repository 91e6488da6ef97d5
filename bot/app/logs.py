"""Logging: one `beam` namespace, text or JSON lines, and the job context every line carries.

Context lives in contextvars, so it follows a job through every await of the task that runs it: the
worker sets the delivery id, job id, repository and pull request number when it claims a job, the run
adds its run id, and every line logged meanwhile (by any module) carries them without being passed
around. `configure_logging` installs one handler on the `beam` logger; uvicorn's and the libraries'
own loggers only say warnings and errors.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sys
import time
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any, TextIO

NAMESPACE = "beam"
# The fields a line written while a job runs carries (None outside a job).
CONTEXT_FIELDS = ("delivery_id", "job_id", "run_id", "repository", "pr_number", "installation_id")

_context: ContextVar[dict[str, Any] | None] = ContextVar("beam_log_context", default=None)


def current_context() -> dict[str, Any]:
    return dict(_context.get() or {})


def current(field: str) -> Any:
    return (_context.get() or {}).get(field)


@contextlib.contextmanager
def log_context(**values: Any) -> Iterator[None]:
    """Adds `values` (those not None) to the context for the duration of the block."""
    merged = {**(_context.get() or {}), **{k: v for k, v in values.items() if v is not None}}
    token = _context.set(merged)
    try:
        yield
    finally:
        _context.reset(token)


def bind(**values: Any) -> None:
    """Adds `values` to the context of the current task from now on (e.g. the run id, once known)."""
    _context.set({**(_context.get() or {}), **{k: v for k, v in values.items() if v is not None}})


def job_fields(job_id: int, delivery_id: str | None, key: str | None) -> dict[str, Any]:
    """The context of a job: its key is `owner/repo#N`, `owner/repo` or `global` (see intake)."""
    repository: str | None = None
    number: int | None = None
    if key and key != "global":
        repository, _, tail = key.partition("#")
        number = int(tail) if tail.isdigit() else None
    return {"job_id": job_id, "delivery_id": delivery_id, "repository": repository, "pr_number": number}


class ContextFilter(logging.Filter):
    """Copies the job context onto each record (`record.beam`), for the formatters."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.beam = current_context()
        return True


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        context: dict[str, Any] = getattr(record, "beam", None) or {}
        if context:
            line += " [" + " ".join(f"{k}={context[k]}" for k in CONTEXT_FIELDS if k in context) + "]"
        return line


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, the job context, and any exception."""

    def format(self, record: logging.LogRecord) -> str:
        body: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        body.update(getattr(record, "beam", None) or {})
        if record.exc_info:
            body["exception"] = self.formatException(record.exc_info)
        return json.dumps(body, ensure_ascii=False, default=str)


class _Levels(logging.Filter):
    """`beam.*` records from `level` up; everything else (uvicorn, httpx, ...) from WARNING up."""

    def __init__(self, level: int) -> None:
        super().__init__()
        self.level = level

    def filter(self, record: logging.LogRecord) -> bool:
        ours = record.name == NAMESPACE or record.name.startswith(NAMESPACE + ".")
        return record.levelno >= (self.level if ours else max(self.level, logging.WARNING))


def configure_logging(level: str = "INFO", fmt: str = "text", stream: TextIO | None = None) -> None:
    """One handler on the root logger (replacing any earlier one of ours): `beam.*` logs at `level`,
    uvicorn and the libraries only their warnings and errors."""
    numeric = logging.getLevelName(level.upper())
    numeric = numeric if isinstance(numeric, int) else logging.INFO
    root = logging.getLogger()
    for old in list(root.handlers):
        if getattr(old, "beam_handler", False):
            root.removeHandler(old)
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.beam_handler = True  # type: ignore[attr-defined]
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    handler.addFilter(_Levels(numeric))
    handler.addFilter(ContextFilter())
    root.addHandler(handler)
    root.setLevel(numeric)
