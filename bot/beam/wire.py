"""The base of the wire types: the omit rules every frame follows, and RFC 3339 timestamps.

Field order, defaults and the "omitted when" rules are part of the contract (riverbeam-reference.md
section 1): other Riverbeam clients read these frames. Each model lists which fields it drops when
they are None (`_omit_none`) and which it drops when they are None, `{}` or `[]` (`_omit_empty`);
everything else is always written.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, ClassVar

from pydantic import BaseModel, ConfigDict, PlainSerializer, SerializerFunctionWrapHandler, model_serializer


def _rfc3339(value: datetime) -> str:
    """RFC 3339 UTC with `Z`, with as many fractional digits as needed (as chrono writes them)."""
    value = value.astimezone(UTC) if value.tzinfo else value.replace(tzinfo=UTC)
    base = value.strftime("%Y-%m-%dT%H:%M:%S")
    micro = value.microsecond
    if micro == 0:
        return base + "Z"
    if micro % 1000 == 0:
        return f"{base}.{micro // 1000:03d}Z"
    return f"{base}.{micro:06d}Z"


Timestamp = Annotated[datetime, PlainSerializer(_rfc3339, return_type=str)]


def utc_now() -> datetime:
    return datetime.now(UTC)


class Wire(BaseModel):
    """Base of every wire type: applies the omit rules after pydantic's own serialization."""

    model_config = ConfigDict(populate_by_name=True, extra="ignore", use_enum_values=False)

    _omit_none: ClassVar[frozenset[str]] = frozenset()
    _omit_empty: ClassVar[frozenset[str]] = frozenset()
    _omit_blank: ClassVar[frozenset[str]] = frozenset()  # strings dropped when ""

    @model_serializer(mode="wrap")
    def _omit(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        for key in list(data):
            value = data[key]
            if (
                (key in self._omit_none and value is None)
                or (key in self._omit_empty and (value is None or value == {} or value == []))
                or (key in self._omit_blank and value == "")
            ):
                del data[key]
        return data

    def to_json(self) -> dict[str, Any]:
        """The JSON value the original would write."""
        return self.model_dump(mode="json")
