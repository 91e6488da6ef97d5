"""Wire types against the original's fixtures and section-1 rules of riverbeam-reference.md.

Round-trips compare JSON values (parse, serialize, compare), as the original's wire_compat test did.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import BaseModel

from bot.beam.types import (
    ActionResponseEnvelope,
    AgentContext,
    AgentInput,
    AgentMessage,
    AgentMetadata,
    AgentResult,
    ContentPart,
    ContentPartType,
    InvokeAuthContext,
    InvokeRequest,
    Modality,
    ModelConfig,
    StreamChunk,
    TokenUsage,
    ToolCallRecord,
    modalities_of,
)

SESSION = "5f8915eb-31eb-4f8a-9517-e2c15ce7bc41"
REQUEST = "16d12ddc-651a-431d-997c-a756d5793ebf"

INVOKE_REQUEST = {
    "agent_name": "kb-assistant",
    "content": [{"type": "text", "text": "what is river-beam?"}],
    "session_id": SESSION,
    "metadata": {"source": "web"},
    "request_id": REQUEST,
    "stream": True,
}
AGENT_RESULT = {
    "content": [{"type": "text", "text": "Echo: what is river-beam?"}],
    "agent_name": "kb-assistant",
    "model_used": "gpt-4o-mini",
    "session_id": SESSION,
    "request_id": REQUEST,
    "interaction_id": "40744652-2720-4b10-86ee-7333c1be8165",
    "token_usage": {"prompt_tokens": 4, "completion_tokens": 4, "total_tokens": 8},
    "latency_ms": 0.0,
    "interrupted": False,
}
STREAM_CHUNK_DONE = {
    "type": "done",
    "result": {
        "content": [{"type": "text", "text": "Echo: what is river-beam?"}],
        "agent_name": "kb-assistant",
        "interrupted": False,
    },
    "agent_name": "kb-assistant",
    "session_id": SESSION,
    "run_id": "c36c753f-b90d-4834-9112-e12a343f6a0d",
}
ACTION_RESPONSE = {
    "action_id": "9c1b2d3e-4f50-4a61-8273-849506172839",
    "kind": "confirmation",
    "request_id": "2b7c4d5e-6f70-4a81-9293-a4b5c6d7e8f9",
    "status": "submitted",
    "payload": {"approved": True},
    "responder_id": "u1",
    "responded_at": "2026-06-09T09:46:01.566411Z",
}


def round_trip(model: type[BaseModel], value: dict[str, Any]) -> Any:
    parsed = model.model_validate_json(json.dumps(value))
    return json.loads(json.dumps(parsed.model_dump(mode="json")))


@pytest.mark.parametrize(
    ("model", "fixture"),
    [
        (InvokeRequest, INVOKE_REQUEST),
        (AgentResult, AGENT_RESULT),
        (StreamChunk, STREAM_CHUNK_DONE),
        (ActionResponseEnvelope, ACTION_RESPONSE),
    ],
)
def test_fixtures_round_trip(model: type[BaseModel], fixture: dict[str, Any]) -> None:
    assert round_trip(model, fixture) == fixture
    # Key order is the original's too.
    assert list(round_trip(model, fixture)) == list(fixture)


def test_minimal_invoke_request_parses_but_drops_empty_metadata() -> None:
    minimal = {
        "agent_name": "kb-assistant",
        "content": [{"type": "text", "text": "What is 2+2?"}],
        "session_id": SESSION,
        "metadata": {},
        "stream": False,
    }
    request = InvokeRequest.model_validate(minimal)
    assert request.agent_name == "kb-assistant" and len(request.content) == 1
    assert request.content[0].text == "What is 2+2?"
    out = request.to_json()
    assert "metadata" not in out and out["stream"] is False
    smallest = {"agent_name": "a", "content": [], "session_id": SESSION, "stream": False}
    assert round_trip(InvokeRequest, smallest) == smallest


def test_content_part_rules() -> None:
    assert ContentPart.text_part("hi").to_json() == {"type": "text", "text": "hi"}
    part = ContentPart.model_validate({"type": "image_url", "url": "u", "metadata": None})
    assert part.to_json() == {"type": "image_url", "url": "u"}
    media = str(uuid.uuid4())
    full = {"type": "file", "data": "d", "mime_type": "text/plain", "metadata": {"k": 1}, "media_id": media}
    assert round_trip(ContentPart, full) == full
    assert ContentPart.model_validate({"type": "text"}).metadata == {}


@pytest.mark.parametrize(
    ("part", "modality"),
    [
        ({"type": "text"}, Modality.TEXT),
        ({"type": "reasoning"}, Modality.TEXT),
        ({"type": "image_url"}, Modality.IMAGE),
        ({"type": "image_base64"}, Modality.IMAGE),
        ({"type": "audio"}, Modality.AUDIO),
        ({"type": "video"}, Modality.VIDEO),
        ({"type": "file", "mime_type": "video/mp4"}, Modality.VIDEO),
        ({"type": "media_ref", "mime_type": "audio/ogg"}, Modality.AUDIO),
        ({"type": "file", "mime_type": "image/png"}, Modality.IMAGE),
        ({"type": "file", "mime_type": "application/pdf"}, Modality.TEXT),
        ({"type": "media_ref"}, Modality.TEXT),
    ],
)
def test_modality_detection(part: dict[str, Any], modality: Modality) -> None:
    assert ContentPart.model_validate(part).modality() is modality


def test_modalities_of_is_a_set() -> None:
    parts = [ContentPart.text_part("a"), ContentPart(type=ContentPartType.REASONING, text="b")]
    assert modalities_of(parts) == {Modality.TEXT}
    assert modalities_of([]) == set()


def test_agent_message_defaults_and_omissions() -> None:
    message = AgentMessage.model_validate({})
    out = message.to_json()
    assert list(out) == ["role", "type", "content", "id", "timestamp", "is_delta", "phase", "metadata"]
    assert (out["role"], out["type"], out["content"], out["is_delta"], out["phase"], out["metadata"]) == (
        "ai",
        "message",
        [],
        False,
        "final",
        {},
    )
    assert uuid.UUID(out["id"]).version == 4
    assert out["timestamp"].endswith("Z")
    full = AgentMessage(tool_name="t", tool_args={"a": 1}, tool_calls=[{"id": "x"}], run_id="r").to_json()
    assert full["tool_calls"] == [{"id": "x"}] and full["tool_args"] == {"a": 1} and full["run_id"] == "r"


def test_timestamps_are_rfc3339_utc_with_z() -> None:
    def stamp(dt: datetime) -> str:
        return str(AgentMessage(timestamp=dt).to_json()["timestamp"])

    assert stamp(datetime(2026, 6, 9, 9, 46, 1, 566411, tzinfo=UTC)) == "2026-06-09T09:46:01.566411Z"
    assert stamp(datetime(2026, 6, 9, 9, 46, 1, 566000, tzinfo=UTC)) == "2026-06-09T09:46:01.566Z"
    assert stamp(datetime(2026, 6, 9, 9, 46, 1, tzinfo=UTC)) == "2026-06-09T09:46:01Z"


def test_agent_metadata_defaults_and_empty_description() -> None:
    assert AgentMetadata(name="a").to_json() == {
        "name": "a",
        "supported_modalities": ["text"],
        "output_modalities": ["text"],
        "tags": [],
        "version": "1.0.0",
    }
    assert AgentMetadata(name="a", description="d").to_json()["description"] == "d"


def test_agent_input_and_context_rules() -> None:
    run = str(uuid.uuid4())
    raw = {"content": [], "session_id": SESSION, "run_id": run, "metadata": {}}
    inp = AgentInput.model_validate(raw)
    assert inp.to_json() == {"content": [], "session_id": SESSION, "run_id": run, "stream": False}
    with pytest.raises(ValueError, match="run_id"):
        AgentInput.model_validate({"content": [], "session_id": SESSION})
    with_auth = AgentInput.model_validate({**raw, "auth_context": {"user_id": "u1"}})
    assert with_auth.user_id == "u1" and inp.user_id is None
    context = AgentContext(session_id=SESSION)
    assert context.to_json() == {"session_id": SESSION, "conversation_history": [], "available_tools": []}


def test_auth_context_accepts_organization_id() -> None:
    auth = InvokeAuthContext.model_validate({"user_id": "u1", "organization_id": "org-9"})
    assert auth.org_id == "org-9"
    assert auth.to_json() == {"user_id": "u1", "org_id": "org-9"}


def test_action_envelope_defaults() -> None:
    envelope = ActionResponseEnvelope.model_validate(
        {"action_id": "x", "kind": "k", "request_id": "r", "payload": None, "errors": []}
    )
    out = envelope.to_json()
    assert list(out) == ["action_id", "kind", "request_id", "status", "responded_at"]
    assert out["status"] == "submitted" and out["responded_at"].endswith("Z")
    statuses = {"submitted", "cancelled", "expired", "invalid"}
    for status in statuses:
        assert ActionResponseEnvelope(action_id="x", kind="k", request_id="r", status=status).status == status  # type: ignore[arg-type]


def test_result_usage_and_records() -> None:
    assert TokenUsage().to_json() == {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
    assert ToolCallRecord(tool_name="t", args={}).to_json() == {"tool_name": "t"}
    assert ToolCallRecord(tool_name="t", args=None).to_json() == {"tool_name": "t"}
    record = {
        "tool_name": "t",
        "args": {"a": 1},
        "tool_call_id": "c",
        "result": '{"ok":true}',
        "latency_ms": 1.5,
    }
    assert round_trip(ToolCallRecord, record) == record
    result = AgentResult(content=[], agent_name="a", metadata={}, tool_calls=[])
    assert result.to_json() == {"content": [], "agent_name": "a", "interrupted": False}
    interrupted = {
        "content": [{"type": "text", "text": "confirmation required"}],
        "agent_name": "author",
        "token_usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
        "latency_ms": 0.0,
        "interrupted": True,
        "action_required": [
            {
                "action_id": str(uuid.uuid4()),
                "kind": "confirmation",
                "tool": "git_push",
                "args": {"ref": "change-1"},
            }
        ],
    }
    assert round_trip(AgentResult, interrupted) == interrupted


def test_model_config_null_quirk() -> None:
    parsed = ModelConfig.model_validate({"name": "m", "provider": "ollama"})
    assert parsed.to_json() == {
        "name": "m",
        "provider": "ollama",
        "provider_config": None,
        "modalities": ["text"],
        "capabilities": [],
        "cost_per_1k_tokens": 0.0,
        "max_tokens": 4096,
        "extra": None,
    }
    empty = ModelConfig.model_validate({"name": "m", "provider": "groq", "provider_config": {}, "extra": {}})
    assert "provider_config" not in empty.to_json() and "extra" not in empty.to_json()
    keyed = ModelConfig.model_validate({"name": "m", "provider": "nvidia", "api_key": "k"})
    assert keyed.to_json()["api_key"] == "k"


def test_stream_chunk_minimal_and_error() -> None:
    assert StreamChunk.model_validate({"type": "error", "error": "x"}).to_json() == {
        "type": "error",
        "error": "x",
    }
    done = StreamChunk.model_validate(STREAM_CHUNK_DONE)
    assert done.to_json()["type"] == "done" and done.result is not None
