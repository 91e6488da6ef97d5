"""The fake GitHub's GraphQL endpoint, for just what the findings ledger asks: a pull request's
`reviewThreads` and the `resolveReviewThread` mutation.

The document is parsed (operation, variable definitions, selection sets, arguments) and every field
and argument is checked against a small copy of GitHub's schema for those types, with variables of
the declared types; anything else is answered as GitHub answers a bad query (200 with `errors`).
The answer holds exactly the fields asked for. A thread is a root review comment (node id
`PRRT_<comment id>`); a resolved one is in `fake.resolved_threads`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from tests.support.fake_github_state import Comment, FakeState

_TOKEN = re.compile(r'\s*(?:(\.\.\.)|([{}()\[\]:!$,=])|([_A-Za-z][_0-9A-Za-z]*)|(-?\d+)|("(?:[^"\\]|\\.)*"))')

# type -> field -> (arguments and their types, result type); a scalar result type is a plain name.
SCHEMA: dict[str, dict[str, tuple[dict[str, str], str]]] = {
    "Query": {"repository": ({"owner": "String!", "name": "String!"}, "Repository")},
    "Mutation": {
        "resolveReviewThread": ({"input": "ResolveReviewThreadInput!"}, "ResolveReviewThreadPayload")
    },
    "Repository": {"pullRequest": ({"number": "Int!"}, "PullRequest")},
    "PullRequest": {
        "reviewThreads": ({"first": "Int", "after": "String", "last": "Int", "before": "String"}, "Threads")
    },
    "Threads": {"pageInfo": ({}, "PageInfo"), "nodes": ({}, "Thread"), "totalCount": ({}, "Int")},
    "PageInfo": {"hasNextPage": ({}, "Boolean"), "endCursor": ({}, "String")},
    "Thread": {
        "id": ({}, "ID"),
        "isResolved": ({}, "Boolean"),
        "comments": ({"first": "Int", "after": "String"}, "ThreadComments"),
    },
    "ThreadComments": {"nodes": ({}, "ThreadComment")},
    "ThreadComment": {"databaseId": ({}, "Int"), "id": ({}, "ID")},
    "ResolveReviewThreadPayload": {"thread": ({}, "Thread")},
}
INPUTS = {"ResolveReviewThreadInput": {"threadId": "ID!", "clientMutationId": "String"}}
SCALARS = {"String": str, "ID": str, "Int": int, "Boolean": bool}


class GraphQLError(Exception):
    pass


@dataclass
class Field:
    name: str
    args: dict[str, Any] = field(default_factory=dict)
    selection: list[Field] = field(default_factory=list)


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens: list[str] = []
        pos, text = 0, text.strip()
        while pos < len(text):
            match = _TOKEN.match(text, pos)
            if match is None or match.end() == pos:
                raise GraphQLError(f"Parse error at offset {pos}")
            self.tokens.append(next(g for g in match.groups() if g is not None))
            pos = match.end()
        self.i = 0

    def peek(self) -> str | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self, expected: str | None = None) -> str:
        token = self.peek()
        if token is None or (expected is not None and token != expected):
            raise GraphQLError(f"Parse error: expected {expected or 'a token'}, got {token}")
        self.i += 1
        return token

    def document(self) -> tuple[str, dict[str, str], list[Field]]:
        kind = self.take()
        if kind not in ("query", "mutation"):
            raise GraphQLError(f"Parse error: unexpected {kind}")
        variables: dict[str, str] = {}
        if self.peek() not in ("(", "{"):
            self.take()  # the operation's name
        if self.peek() == "(":
            self.take("(")
            while self.peek() != ")":
                self.take("$")
                name = self.take()
                self.take(":")
                kind_name = self.take()
                variables[name] = kind_name + ("!" if self.peek() == "!" and self.take("!") else "")
                if self.peek() == ",":
                    self.take(",")
            self.take(")")
        selection = self.selection()
        if self.peek() is not None:
            raise GraphQLError("Parse error: text after the operation")
        return kind, variables, selection

    def selection(self) -> list[Field]:
        self.take("{")
        out: list[Field] = []
        while self.peek() != "}":
            item = Field(self.take())
            if self.peek() == "(":
                self.take("(")
                while self.peek() != ")":
                    name = self.take()
                    self.take(":")
                    item.args[name] = self.value()
                    if self.peek() == ",":
                        self.take(",")
                self.take(")")
            if self.peek() == "{":
                item.selection = self.selection()
            out.append(item)
        self.take("}")
        return out

    def value(self) -> Any:
        token = self.take()
        if token == "$":
            return ("$", self.take())
        if token == "{":
            obj: dict[str, Any] = {}
            while self.peek() != "}":
                name = self.take()
                self.take(":")
                obj[name] = self.value()
            self.take("}")
            return obj
        if token.startswith('"'):
            return token[1:-1]
        if re.fullmatch(r"-?\d+", token):
            return int(token)
        if token in ("true", "false"):
            return token == "true"
        raise GraphQLError(f"Parse error: unexpected {token}")


def _check_value(value: Any, kind: str, where: str) -> None:
    base = kind.rstrip("!")
    if value is None:
        if kind.endswith("!"):
            raise GraphQLError(f"{where}: expected a non-null {base}")
        return
    if base in INPUTS:
        if not isinstance(value, dict):
            raise GraphQLError(f"{where}: expected an object of type {base}")
        for key in value:
            if key not in INPUTS[base]:
                raise GraphQLError(f"{where}: {base} has no field {key}")
        for key, sub in INPUTS[base].items():
            _check_value(value.get(key), sub, f"{where}.{key}")
        return
    python = SCALARS[base]
    if not isinstance(value, python) or (python is int and isinstance(value, bool)):
        raise GraphQLError(f"{where}: expected {base}, got {value!r}")


class GraphQL:
    """Parses, checks and answers one request against the fake's state."""

    def __init__(self, fake: FakeState, resolved: set[int]) -> None:
        self.fake = fake
        self.resolved = resolved

    def answer(self, body: Any) -> dict[str, Any]:
        try:
            if not isinstance(body, dict) or not isinstance(body.get("query"), str):
                raise GraphQLError("A query attribute must be specified and must be a string.")
            variables = body.get("variables") or {}
            if not isinstance(variables, dict):
                raise GraphQLError("Variables are invalid JSON.")
            kind, declared, selection = _Parser(body["query"]).document()
            for name, value in variables.items():
                if name not in declared:
                    raise GraphQLError(f"Variable ${name} is not declared")
                _check_value(value, declared[name], f"Variable ${name}")
            for name, kind_name in declared.items():
                if kind_name.endswith("!") and variables.get(name) is None:
                    raise GraphQLError(f"Variable ${name} of type {kind_name} was provided invalid value")
            root = "Query" if kind == "query" else "Mutation"
            return {"data": self._select(root, None, selection, variables, declared)}
        except GraphQLError as error:
            return {"errors": [{"message": str(error)}]}

    def _args(self, item: Field, spec: dict[str, str], variables: dict[str, Any]) -> Any:
        out: dict[str, Any] = {}
        for name, value in item.args.items():
            if name not in spec:
                raise GraphQLError(f"Field '{item.name}' doesn't accept argument '{name}'")
            out[name] = self._resolve_value(value, variables)
            _check_value(out[name], spec[name], f"Argument '{name}' on Field '{item.name}'")
        for name, kind in spec.items():
            if kind.endswith("!") and name not in out:
                raise GraphQLError(f"Field '{item.name}' is missing required arguments: {name}")
        return out

    def _resolve_value(self, value: Any, variables: dict[str, Any]) -> Any:
        if isinstance(value, tuple):
            return variables.get(value[1])
        if isinstance(value, dict):
            return {k: self._resolve_value(v, variables) for k, v in value.items()}
        return value

    def _select(
        self, kind: str, obj: Any, selection: list[Field], variables: dict[str, Any], declared: dict[str, str]
    ) -> Any:
        out: dict[str, Any] = {}
        for item in selection:
            if item.name not in SCHEMA[kind]:
                raise GraphQLError(f"Field '{item.name}' doesn't exist on type '{kind}'")
            spec, result = SCHEMA[kind][item.name]
            args = self._args(item, spec, variables)
            if result in SCHEMA and not item.selection:
                raise GraphQLError(f"Field must have selections ({item.name} returns {result})")
            if result not in SCHEMA and item.selection:
                raise GraphQLError(f"Selections can't be made on scalars ({item.name})")
            value = self._field(kind, obj, item.name, args)
            if result in SCHEMA and value is not None:
                if isinstance(value, list):
                    value = [self._select(result, v, item.selection, variables, declared) for v in value]
                else:
                    value = self._select(result, value, item.selection, variables, declared)
            out[item.name] = value
        return out

    def _field(self, kind: str, obj: Any, name: str, args: dict[str, Any]) -> Any:
        fake = self.fake
        if kind == "Query":
            full = f"{args['owner']}/{args['name']}"
            return full if full.lower() in {r.lower() for r in fake.repos} else None
        if kind == "Repository":
            try:
                return (obj, fake.pull(obj, args["number"]))
            except KeyError:
                return None
        if kind == "PullRequest":
            full, pull = obj
            roots = [
                c
                for c in sorted(fake.comments.values(), key=lambda c: c.id)
                if c.review and c.repo.lower() == full.lower() and c.number == pull.number
                if c.in_reply_to is None
            ]
            start = int(args["after"]) if args.get("after") else 0
            first = args.get("first") or 100
            if first > 100:
                raise GraphQLError("first may not exceed 100")
            page = roots[start : start + first]
            info = {"hasNextPage": start + first < len(roots), "endCursor": str(start + first)}
            return {"nodes": page, "pageInfo": info, "total": len(roots)}
        if kind == "Threads":
            return {"pageInfo": obj["pageInfo"], "nodes": obj["nodes"], "totalCount": obj["total"]}[name]
        if kind == "PageInfo":
            return obj[name]
        if kind == "Thread":
            comment: Comment = obj
            if name == "id":
                return f"PRRT_{comment.id}"
            if name == "isResolved":
                return comment.id in self.resolved
            replies = [c for c in fake.comments.values() if c.in_reply_to == comment.id]
            return {"nodes": [comment, *sorted(replies, key=lambda c: c.id)][: args.get("first") or 100]}
        if kind == "ThreadComments":
            return obj[name]
        if kind == "ThreadComment":
            return obj.id if name == "databaseId" else f"PRRC_{obj.id}"
        if kind == "Mutation":
            thread_id = args["input"]["threadId"]
            match = re.fullmatch(r"PRRT_(\d+)", thread_id)
            target = fake.comments.get(int(match[1])) if match else None
            if target is None or not target.review or target.in_reply_to is not None:
                raise GraphQLError(f"Could not resolve to a node with the global id of '{thread_id}'")
            self.resolved.add(target.id)
            return target
        if kind == "ResolveReviewThreadPayload":
            return obj
        raise GraphQLError(f"no resolver for {kind}.{name}")
