"""Content parts and their modalities: what every message, input and result is made of."""

from __future__ import annotations

import uuid
from enum import StrEnum
from typing import Any

from pydantic import Field

from bot.beam.wire import Wire


class Modality(StrEnum):
    TEXT = "text"
    IMAGE = "image"
    AUDIO = "audio"
    VIDEO = "video"


class ContentPartType(StrEnum):
    TEXT = "text"
    IMAGE_URL = "image_url"
    IMAGE_BASE64 = "image_base64"
    AUDIO = "audio"
    FILE = "file"
    VIDEO = "video"
    MEDIA_REF = "media_ref"
    REASONING = "reasoning"


class ContentPart(Wire):
    _omit_none = frozenset({"text", "url", "data", "mime_type", "media_id"})
    _omit_empty = frozenset({"metadata"})

    type: ContentPartType
    text: str | None = None
    url: str | None = None
    data: str | None = None
    mime_type: str | None = None
    metadata: Any = Field(default_factory=dict)
    media_id: uuid.UUID | None = None

    @classmethod
    def text_part(cls, text: str) -> ContentPart:
        return cls(type=ContentPartType.TEXT, text=text)

    def modality(self) -> Modality:
        kind = self.type
        if kind in (ContentPartType.TEXT, ContentPartType.REASONING):
            return Modality.TEXT
        if kind in (ContentPartType.IMAGE_URL, ContentPartType.IMAGE_BASE64):
            return Modality.IMAGE
        if kind is ContentPartType.AUDIO:
            return Modality.AUDIO
        if kind is ContentPartType.VIDEO:
            return Modality.VIDEO
        mime = self.mime_type or ""
        for prefix, modality in (("video/", Modality.VIDEO), ("audio/", Modality.AUDIO)):
            if mime.startswith(prefix):
                return modality
        if mime.startswith("image/"):
            return Modality.IMAGE
        return Modality.TEXT


def modalities_of(parts: list[ContentPart]) -> set[Modality]:
    return {part.modality() for part in parts}


def text_of(parts: list[ContentPart], sep: str) -> str:
    """Join the text parts; the separator differs by call site in the original (see 9.3)."""
    return sep.join(
        part.text for part in parts if part.type is ContentPartType.TEXT and part.text is not None
    )
