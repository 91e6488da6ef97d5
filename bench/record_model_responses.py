"""Records a real model server's replies for the dialect table (tests/data/model_responses/).

Starts nothing: point it at a running server (`../shared/tools/local-model start 0.5b`). It sends
the requests beam-bot sends (the client's own request body, native tools and the text protocol) for
a small fixed review, and writes each reply with the tools offered: the first round, and a second
one after the model read the file (where it writes its review, or echoes the tool's result).
`expect` is left for a person to fill in after reading the reply: a recording states what the
server did, not what our parser says.

    .venv/bin/python bench/record_model_responses.py --base-url http://127.0.0.1:8089/v1 --out /tmp/rec
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from bot.beam import text_protocol
from bot.beam.openai_client import OpenAiCompatible
from bot.beam.tools import ToolSpec, json_params

READ_FILE = ToolSpec(
    "read_file", "Read a file of the repository.", False, json_params({"path": {"type": "string"}}, ["path"])
)
REVIEW_CHANGE = ToolSpec(
    "review_change",
    "Post the review: a summary body and inline comments on changed lines.",
    False,
    json_params(
        {
            "body": {"type": "string"},
            "comments": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "path": {"type": "string"},
                        "line": {"type": "integer"},
                        "body": {"type": "string"},
                    },
                },
            },
        },
        ["body"],
    ),
)
TOOLS = [READ_FILE, REVIEW_CHANGE]
SYSTEM = "You are a code reviewer. Use the tools to read files and to post your review."
DIFF = (
    "--- src/calc.py (modified, +2 -1)\n@@ -1,2 +1,3 @@\n def add(a, b):\n-    return a - b\n"
    "+    return a + b\n+# fixed\n"
)
USER = f"Review this change. First read src/calc.py with read_file.\n\n{DIFF}"
MESSAGES = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": USER}]
READ_CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "read_file", "arguments": '{"path": "src/calc.py"}'},
}
READ = {"role": "tool", "tool_call_id": "call_1", "content": "def add(a, b):\n    return a + b\n# fixed\n"}
ROUND_2 = [*MESSAGES, {"role": "assistant", "content": None, "tool_calls": [READ_CALL]}, READ]


def post(base_url: str, body: dict[str, Any]) -> dict[str, Any]:
    response = httpx.post(f"{base_url}/chat/completions", json=body, timeout=300)
    reply: dict[str, Any] = response.json()
    reply["model"] = Path(str(reply.get("model", ""))).name  # a path of the machine, not kept
    return {"status": response.status_code, "body": reply}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--max-tokens", type=int, default=160)
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()
    client = OpenAiCompatible(args.base_url, "local", "local").with_max_tokens(args.max_tokens)
    bodies = {
        "native_tools": client.request_body(MESSAGES, TOOLS),
        "text_protocol": client.request_body(text_protocol.as_text_messages(MESSAGES, TOOLS), []),
        "native_tools_round2": client.request_body(ROUND_2, TOOLS),
        "text_protocol_round2": client.request_body(text_protocol.as_text_messages(ROUND_2, TOOLS), []),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    for name, body in bodies.items():
        body["seed"] = args.seed
        reply = post(args.base_url, body)
        record = {
            "provenance": {
                "server": "llama.cpp llama-server --jinja",
                "date": datetime.now(UTC).date().isoformat(),
                "request": name,
                "seed": args.seed,
            },
            "offered": [spec.name for spec in TOOLS],
            "response": reply["body"],
            "expect": None,
        }
        path = args.out / f"{name}.json"
        path.write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        message = reply["body"].get("choices", [{}])[0].get("message")
        print(f"{name}: http {reply['status']}, timings {reply['body'].get('timings')}\n  {message}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
