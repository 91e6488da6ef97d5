"""GitHub's OpenAPI description (the subset in tests/data/github) as a request and response validator.

The fake GitHub asks this module whether a request is one GitHub would accept: a known route and
method, path and query parameters of the documented types, no unknown query parameters, and a JSON
body that satisfies the operation's request schema. Schemas are OpenAPI 3.0, so `nullable` is
rewritten into JSON Schema before validation; `$ref`s resolve inside the one document.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from jsonschema import Draft4Validator
from referencing import Registry
from referencing.jsonschema import DRAFT4

SPEC_FILE = Path(__file__).resolve().parents[1] / "data" / "github" / "rest-subset.json"
_BASE_URI = "urn:github-rest-subset"
_METHODS = ("get", "post", "patch", "put", "delete")


@dataclass(frozen=True)
class Param:
    name: str
    location: str
    required: bool
    schema: dict[str, Any]
    multi_segment: bool = False


@dataclass(frozen=True)
class Operation:
    method: str
    template: str
    operation_id: str
    pointer: str
    path_params: tuple[Param, ...]
    query_params: dict[str, Param]
    body_required: bool
    has_body: bool
    regex: re.Pattern[str] = field(compare=False)
    literal_segments: int = 0


@dataclass
class Checked:
    """The verdict on one request: the operation it maps to (if any) and every problem found."""

    operation: Operation | None
    path_params: dict[str, Any]
    problems: list[str]
    body: Any = None


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def _openapi_to_json_schema(node: Any) -> Any:
    """Rewrites OpenAPI 3.0 `nullable` into JSON Schema types, everywhere in the document."""
    if isinstance(node, list):
        return [_openapi_to_json_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    converted = {key: _openapi_to_json_schema(value) for key, value in node.items()}
    if converted.get("nullable") is True:
        del converted["nullable"]
        kind = converted.get("type")
        if isinstance(kind, str):
            converted["type"] = [kind, "null"]
            if "enum" in converted:
                converted["enum"] = [*converted["enum"], None]
        else:
            return {"anyOf": [{"type": "null"}, converted]}
    return converted


def _coerce(raw: str, schema: dict[str, Any]) -> Any:
    kind = schema.get("type")
    if kind == "integer":
        if not re.fullmatch(r"-?\d+", raw):
            raise ValueError(f"{raw!r} is not an integer")
        return int(raw)
    if kind == "boolean":
        if raw not in ("true", "false"):
            raise ValueError(f"{raw!r} is not a boolean")
        return raw == "true"
    return raw


class RestSpec:
    """Routes and schemas of the subset; one instance is shared (loading costs ~0.1 s)."""

    def __init__(self, document: dict[str, Any]) -> None:
        self.document = _openapi_to_json_schema(document)
        resource = DRAFT4.create_resource(self.document)
        self._registry: Registry[Any] = Registry().with_resource(_BASE_URI, resource)
        self.operations: list[Operation] = []
        for template, item in self.document["paths"].items():
            for method in _METHODS:
                if method in item:
                    self.operations.append(self._operation(template, method, item))
        self.operations.sort(key=lambda op: -op.literal_segments)

    @classmethod
    @functools.cache
    def load(cls) -> RestSpec:
        return cls(json.loads(SPEC_FILE.read_text(encoding="utf-8")))

    def _resolve(self, node: dict[str, Any]) -> dict[str, Any]:
        while "$ref" in node:
            pointer = node["$ref"].removeprefix("#/").split("/")
            target: Any = self.document
            for token in pointer:
                target = target[token.replace("~1", "/").replace("~0", "~")]
            node = target
        return node

    def _operation(self, template: str, method: str, item: dict[str, Any]) -> Operation:
        spec = item[method]
        params = [self._resolve(p) for p in [*item.get("parameters", []), *spec.get("parameters", [])]]
        built = [
            Param(
                p["name"],
                p["in"],
                bool(p.get("required")),
                p.get("schema", {}),
                bool(p.get("x-multi-segment")),
            )
            for p in params
        ]
        path_params = tuple(p for p in built if p.location == "path")
        multi = {p.name for p in path_params if p.multi_segment}
        pattern = ""
        literal = 0
        for segment in template.strip("/").split("/"):
            name = segment[1:-1] if segment.startswith("{") and segment.endswith("}") else None
            if name is None:
                pattern += "/" + re.escape(segment)
                literal += 1
            else:
                pattern += f"/(?P<{name}>.+)" if name in multi else f"/(?P<{name}>[^/]+)"
        body = spec.get("requestBody")
        return Operation(
            method=method.upper(),
            template=template,
            operation_id=spec["operationId"],
            pointer=f"/paths/{_escape(template)}/{method}",
            path_params=path_params,
            query_params={p.name: p for p in built if p.location == "query"},
            body_required=bool(body and body.get("required")),
            has_body=body is not None,
            regex=re.compile(pattern + "$"),
            literal_segments=literal,
        )

    def _schema_problems(self, pointer: str, value: Any, where: str) -> list[str]:
        validator = _cached_validator(self, pointer)
        errors = sorted(validator.iter_errors(value), key=lambda e: [str(p) for p in e.path])
        return [f"{where}{''.join(f'[{p!r}]' for p in e.path)}: {e.message}" for e in errors]

    def check_request(self, method: str, path: str, query: list[tuple[str, str]], body: bytes) -> Checked:
        """Matches `path` (already stripped of any API prefix) and validates everything GitHub would."""
        candidates = [op for op in self.operations if op.regex.match(path)]
        if not candidates:
            return Checked(None, {}, [f"unknown route {method} {path}"])
        chosen = next((op for op in candidates if op.method == method), None)
        if chosen is None:
            return Checked(None, {}, [f"method {method} not allowed on {candidates[0].template}"])
        problems: list[str] = []
        values: dict[str, Any] = {}
        match = chosen.regex.match(path)
        assert match is not None
        for param in chosen.path_params:
            raw = unquote(match.group(param.name))
            try:
                values[param.name] = _coerce(raw, param.schema)
            except ValueError as exc:
                problems.append(f"path parameter {param.name}: {exc}")
                continue
            problems += [
                f"path parameter {param.name}: {m}" for m in _plain_problems(param.schema, values[param.name])
            ]
        problems += self._query_problems(chosen, query)
        parsed: Any = None
        if body:
            if not chosen.has_body:
                problems.append(f"{chosen.operation_id} takes no request body")
            else:
                try:
                    parsed = json.loads(body)
                except ValueError:
                    problems.append("request body is not JSON")
                else:
                    pointer = f"{chosen.pointer}/requestBody/content/application~1json/schema"
                    problems += self._schema_problems(pointer, parsed, "body")
        elif chosen.body_required:
            problems.append(f"{chosen.operation_id} requires a request body")
        return Checked(chosen, values, problems, parsed)

    def _query_problems(self, op: Operation, query: list[tuple[str, str]]) -> list[str]:
        problems: list[str] = []
        seen: set[str] = set()
        for name, raw in query:
            param = op.query_params.get(name)
            if param is None:
                problems.append(f"unknown query parameter {name!r} for {op.operation_id}")
                continue
            if name in seen:
                problems.append(f"query parameter {name!r} repeated")
            seen.add(name)
            try:
                value = _coerce(raw, param.schema)
            except ValueError as exc:
                problems.append(f"query parameter {name}: {exc}")
                continue
            problems += [f"query parameter {name}: {m}" for m in _plain_problems(param.schema, value)]
        for name, param in op.query_params.items():
            if param.required and name not in seen:
                problems.append(f"missing required query parameter {name!r}")
        return problems

    def check_response(self, operation: Operation, status: int, body: Any) -> list[str]:
        """Validates a response body against the documented schema for its status, when one exists."""
        responses = self.document["paths"][operation.template][operation.method.lower()]["responses"]
        entry = responses.get(str(status))
        if entry is None:
            return [f"status {status} is not documented for {operation.operation_id}"]
        entry = self._resolve(entry)
        content = entry.get("content", {}).get("application/json")
        if content is None or "schema" not in content:
            return []
        if "$ref" in responses[str(status)]:
            pointer = responses[str(status)]["$ref"].removeprefix("#")
        else:
            pointer = f"{operation.pointer}/responses/{status}"
        return self._schema_problems(f"{pointer}/content/application~1json/schema", body, "response")


def _plain_problems(schema: dict[str, Any], value: Any) -> list[str]:
    return [e.message for e in Draft4Validator(schema).iter_errors(value)]


@functools.cache
def _cached_validator(spec: RestSpec, pointer: str) -> Draft4Validator:
    return Draft4Validator({"$ref": f"{_BASE_URI}#{pointer}"}, registry=spec._registry)
