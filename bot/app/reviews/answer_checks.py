"""Checks of a model's review answer before any of it reaches GitHub (issue 30).

Reading real 1.5B reviews showed text that is not a review posted as one: review JSON cut by
`max_tokens` (`<review_change>` with half an object, `<tools></tools>` as the whole body), a refusal
("I'm sorry, but I cannot help with that"), a thank-you that promises a review ("Thank you for the
pull request. I will review it…"), the instructions said back; and `"suggestion": ""` offered as a
committable suggestion, which deletes the line it is on. Each check is a pure function of the text,
kept apart from the review pass so that pass can move without them (issue 29), and called from one
line where the answer is turned into a review (`prose`, `ReviewChangeTool.post_args`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from bot.app.repo_config.review_rules import SEVERITIES
from bot.app.reviews.claims import names_a_problem
from bot.beam.runner import ANSWER_IN_TEXT

# A review tag or call: in a body, it is a call that did not parse.
_REVIEW_CALL = re.compile(
    r"</?(?:review_change|tools?|tool_call|function_call)\b[^>]*>|\breview_change\s*\(", re.IGNORECASE
)
_REVIEW_KEY = re.compile(r"\"(?:body|comments|suggestion|severity|line|path|claim)\"\s*:")
# An answer that starts as JSON, or a ```json block in it (closed or cut).
_JSON_START = re.compile(r"^\s*(?:```[ \t]*(?:json)?[ \t]*\n\s*)?[\[{]", re.IGNORECASE)
_JSON_FENCE = re.compile(r"```[ \t]*json[ \t]*\n(.*?)(?:```|\Z)", re.IGNORECASE | re.DOTALL)
_REFUSAL = re.compile(
    r"^\W*(?:i'?m sorry|i am sorry|sorry|i apologi[sz]e|unfortunately|as an ai)\b.{0,80}?"
    r"\b(?:can(?:no|')?t|unable to|not able to|won'?t|will not)\s+(?:help|assist|do that|review|comply|"
    r"provide|complete|fulfil)",
    re.IGNORECASE | re.DOTALL,
)
_THANKS = re.compile(r"^\W*(?:thank you|thanks|thank u)\b", re.IGNORECASE)
_PROMISE = re.compile(
    r"\b(?:i will|i'll|i am going to|i'm going to|let me|i shall)\s+(?:now\s+)?(?:review|take a look|look|"
    r"check|go through|start|begin|analy[sz]e|examine|get back)\b",
    re.IGNORECASE,
)
# A suggestion written as words: a capitalised word that no code follows, then mostly words.
_SENTENCE_START = re.compile(r"^(?!(?:True|False|None)\b)[A-Z][a-z']+\b(?!\s*[(=.\[:<{])")
_PLAIN_WORD = re.compile(r"^[A-Za-z][A-Za-z']*[,.;:!?]?$")
_CODE_SPAN = re.compile(r"`[^`\n]+`")
MAX_STRUCTURED_COMMENTS = 10  # comments one structured answer may hold (`review_schema`)
MAX_LINE_ENUM = 400  # lines of one file a comment's line is chosen from, at most (`review_schema`)
_SHORT = 400  # characters: a thank-you or a promise longer than this may hold a real review
_SHINGLE = 4  # words per shingle when comparing a body with the instructions
_SAID_BACK_WORDS = 4  # a body shorter than this is never taken for the instructions said back


Block = tuple[str | None, list[dict[str, Any]], int, int]  # (body or None, comments, start, end)


def every_finding(text: str, blocks: Sequence[Block], *, limit: int) -> dict[str, Any] | None:
    """`review_change`'s arguments from every block of findings found in an answer (text_review.py
    finds them, in its order of preference), not only the first: issue 30's gold finding stayed in
    the body as a second fenced block. A block that overlaps one already taken holds the same
    findings (the whole text, the widest span). The body is the first block's body, else the prose
    around the blocks; None when there is no block."""
    taken: list[Block] = []
    for block in blocks:
        if not any(block[2] < end and start < block[3] for _, _, start, end in taken):
            taken.append(block)
    if not taken:
        return None
    body = next((b for b, _, _, _ in taken if b is not None), None)
    if body is None:
        pieces, last = [], 0
        for start, end in sorted((s, e) for _, _, s, e in taken):
            pieces.append(text[last:start])
            last = end
        body = ("".join(pieces) + text[last:]).strip()
    return {"body": body, "comments": [c for _, comments, _, _ in taken for c in comments][:limit]}


def review_schema(lines: Mapping[str, Collection[int]] | None = None) -> dict[str, Any]:
    """The schema of a review's findings for structured output (`complete_structured`): a body,
    then comments with path, line, severity, claim and a suggestion that may be null. In the form
    OpenAI's `strict` mode takes (every property required, no others), which llama.cpp, vLLM and
    Ollama take too; the body comes first, as the model writes it first. At most
    `MAX_STRUCTURED_COMMENTS` comments, so a small model that repeats itself cannot run a list on
    until `max_tokens` cuts the answer: a cut answer is no answer, and the tool loop that then
    replaces it cost the 1.5B model twelve minutes on one case of issue 30's benchmark.

    With `lines` (the call's files and the lines GitHub takes comments on), a comment's path can
    only be one of those files and its line one of that file's lines: the 1.5B model wrote a
    tool's name as the path (`"path": "read_file"`) and numbers from the hunk header, and each such
    comment was lost. A file with more than `MAX_LINE_ENUM` such lines keeps a plain integer (the
    grammar of a long list costs more than the comment check that catches a stray line)."""
    shapes = [_comment_shape(path, sorted(set(nums))) for path, nums in (lines or {}).items()]
    comment: dict[str, Any] = _comment_shape(None, [])
    if len(shapes) == 1:
        comment = shapes[0]
    elif shapes:
        comment = {"anyOf": shapes}
    return {
        "type": "object",
        "properties": {
            "body": {"type": "string"},
            "comments": {"type": "array", "items": comment, "maxItems": MAX_STRUCTURED_COMMENTS},
        },
        "required": ["body", "comments"],
        "additionalProperties": False,
    }


def _comment_shape(path: str | None, lines: Sequence[int]) -> dict[str, Any]:
    """One comment's schema: any path and line, or `path` and one of `lines` (when there are
    some, and not too many to list). `start_line` is null, or the first of several lines the
    comment (and its suggestion) covers, as `review_change` takes it: without it a two-line fix was
    offered on one line, and committing it duplicated the other (issue 41)."""
    line: dict[str, Any] = {"type": "integer"}
    start: dict[str, Any] = {"type": ["integer", "null"]}
    if lines and len(lines) <= MAX_LINE_ENUM:
        line = {"type": "integer", "enum": list(lines)}
        start = {"type": ["integer", "null"], "enum": [*lines, None]}
    return {
        "type": "object",
        "properties": {
            "path": {"type": "string"} if path is None else {"type": "string", "enum": [path]},
            "start_line": start,
            "line": line,
            "severity": {"type": "string", "enum": list(SEVERITIES)},
            "claim": {"type": "string"},
            "suggestion": {"type": ["string", "null"]},
        },
        "required": ["path", "start_line", "line", "severity", "claim", "suggestion"],
        "additionalProperties": False,
    }


def structured_review_args(value: Any) -> dict[str, Any] | None:
    """`review_change`'s arguments from a structured answer (`review_schema`): `claim` becomes the
    comment's body, a null or empty suggestion is none, a `start_line` not before `line` is none;
    None when the value is not such an answer."""
    if not isinstance(value, dict) or not isinstance(value.get("body"), str):
        return None
    comments: list[dict[str, Any]] = []
    items = value.get("comments")
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict):
            continue
        path, line, claim = item.get("path"), item.get("line"), item.get("claim")
        if not (isinstance(path, str) and isinstance(line, int) and not isinstance(line, bool)):
            continue
        if not (isinstance(claim, str) and claim.strip()):
            continue
        comment: dict[str, Any] = {"path": path, "line": line, "body": claim}
        start = item.get("start_line")
        if isinstance(start, int) and not isinstance(start, bool) and 0 < start < line:
            comment["start_line"] = start  # `review_change` keeps it only within the diff (one hunk)
        if item.get("severity") in SEVERITIES:
            comment["severity"] = item["severity"]
        if (suggestion := usable_suggestion(item.get("suggestion"))) is not None:
            comment["suggestion"] = suggestion
        comments.append(comment)
    return {"body": value["body"], "comments": comments}


def usable_suggestion(value: Any) -> str | None:
    """The suggestion to offer, or None. An empty (or blank) one is none: as a committable
    suggestion it replaces the commented lines with nothing, and it passes every parse check when
    the lines were a whole statement (issue 30: one deleted a function's `return`)."""
    return value if isinstance(value, str) and value.strip() else None


def reads_as_prose(suggestion: str) -> bool:
    """Whether a suggestion is a sentence about the fix ("Check that `x` is not None before using
    it.") rather than code. Small models write one as often as code (issue 41); offered as a
    committable block it would replace the lines with the sentence, and shown as code that "would not
    parse" under a note that means nothing to the reader. A sentence starts with a capitalised word
    that no code follows (`Counter(...)`, `Name = ...`) and is mostly plain words, a `code` span
    counting as one."""
    text = _CODE_SPAN.sub("code", suggestion.strip())
    words = text.split()
    if len(words) < 4 or not _SENTENCE_START.match(text) or text.endswith((";", "{", "}")):
        return False
    return sum(bool(_PLAIN_WORD.match(word)) for word in words) / len(words) >= 0.6


def summary_line(files: int, changed: int) -> str:
    """The neutral body of a review whose model wrote none worth posting (`held_body`)."""
    return (
        f"Reviewed {files} file{'s' if files != 1 else ''}, "
        f"{changed} changed line{'s' if changed != 1 else ''}."
    )


def held_body(body: str, summary: str, instructions: Collection[str] = ()) -> str:
    """The review's body held to a comment's rules (claims.py): the model's own when it states a
    problem (and the line it names with it, as written), else `summary`. Issue 41's bodies said the
    instructions back, thanked, or praised the change ("simplifies the parsing, improving
    readability") above the very finding that said it was wrong. Empty stays empty, and without a
    summary (a caller that has none) the body is kept."""
    text = body.strip()
    if not text or not summary:
        return body
    if not_a_review(text) is not None or said_back(text, instructions) or not names_a_problem(text):
        return summary
    return body


def said_back(body: str, instructions: Collection[str]) -> bool:
    """Whether a review's body is the instructions said back (`restates`). A body of a few words
    ("One bug.", "Review.") is its own: it is found in any long prompt."""
    return len(_words(body)) >= _SAID_BACK_WORDS and restates(body, instructions)


def broken_review_json(text: str) -> bool:
    """Whether the text is review JSON that did not parse: a `review_change` tag or call, or review
    keys in JSON that is cut by `max_tokens` or malformed (the answer starts as JSON, or holds a
    ```` ```json ```` block). Whole JSON is read as findings elsewhere (text_review.py). Prose that
    quotes a key (`the "path": entry is wrong`) is prose."""
    if _REVIEW_CALL.search(text):
        return True
    blocks = [m.group(1) for m in _JSON_FENCE.finditer(text)]
    if _JSON_START.match(text) and not blocks:
        blocks = [text]
    return any(_REVIEW_KEY.search(block) is not None and not _parses(block) for block in blocks)


def _parses(block: str) -> bool:
    try:
        json.loads(block.strip().removeprefix("```json").removeprefix("```").removesuffix("```"))
    except ValueError:
        return False
    return True


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9_]+", text.lower())


def restates(text: str, instructions: Iterable[str], *, share: float = 0.6) -> bool:
    """Whether most of the text is the instructions said back: `share` of its word shingles (runs of
    four words) appear in one of them. A short text (under eight words) is judged by its words."""
    words = _words(text)
    if not words:
        return False
    for source in instructions:
        theirs = _words(source)
        if len(words) < 8:
            if " ".join(words) in " ".join(theirs):
                return True
            continue
        shingles = {tuple(theirs[i : i + _SHINGLE]) for i in range(len(theirs) - _SHINGLE + 1)}
        mine = [tuple(words[i : i + _SHINGLE]) for i in range(len(words) - _SHINGLE + 1)]
        if mine and sum(s in shingles for s in mine) / len(mine) >= share:
            return True
    return False


def not_a_review(text: str, instructions: Collection[str] = ()) -> str | None:
    """Why the text is no review body (a short phrase), or None when it may be one."""
    body = text.strip()
    if not body:
        return None
    if broken_review_json(body):
        return "review JSON that is cut or malformed"
    if len(body) <= _SHORT and _REFUSAL.search(body):
        return "a refusal"
    if len(body) <= _SHORT and (_THANKS.search(body) or _PROMISE.search(body)) and _only_courtesy(body):
        return "a thank-you or a promise of a review"
    if instructions and restates(body, instructions):
        return "the instructions said back"
    return None


def _only_courtesy(body: str) -> bool:
    """Every sentence thanks, promises a review, or asks to wait: no claim about the code."""
    sentences = [s for s in re.split(r"(?<=[.!?…])\s+", body) if s.strip()]
    courtesy = re.compile(
        r"^\W*(?:thank|thanks|i will|i'll|let me|i am going|i'm going|please wait|stay tuned|"
        r"one moment|give me|i shall|here is my review\W*$|sure\W*$|okay\W*$|ok\W*$)",
        re.IGNORECASE,
    )
    return all(courtesy.search(s) for s in sentences)


def change_path(path: str, changed: Collection[str]) -> str | None:
    """The file of the change a finding's path means, or None when it names none.

    Models put the prompt's repository line before the path (`cases/x.bundle/mux.go`, issue 30),
    a diff's `a/` or `b/`, a leading `/` or `./`, or leave the directory out (`validate.ts` for
    `src/validate.ts`). A path that fits exactly one file of the change, one of those ways, is that
    file; one that fits none or several is not mapped (the caller folds or drops it)."""
    cleaned = path.strip().strip("`").replace("\\", "/")
    if cleaned in changed:
        return cleaned
    for prefix in ("./", "/", "a/", "b/"):
        cleaned = cleaned.removeprefix(prefix)
    if cleaned in changed:
        return cleaned
    longer = [f for f in changed if cleaned.endswith("/" + f)]  # something before the path
    if len(longer) == 1:
        return longer[0]
    shorter = [f for f in changed if f.endswith("/" + cleaned)]  # the directory left out
    if len(shorter) == 1 and not longer:
        return shorter[0]
    return None


def review_instructions() -> list[str]:
    """What a review run is told, for `restates`: the review skill's prompt, the review task and
    the runner's request for plain text. (The automatic review's own task can be added by its pass.)"""
    from bot.app.context.prompt import skill_task  # here, not at the top: prompt imports much of runs
    from bot.beam.skills import skill_by_name

    skill = skill_by_name("review")
    tasks = [skill_task("review"), skill_task("review", local=True)]
    return [ANSWER_IN_TEXT, *tasks, *([skill.system_prompt] if skill else [])]


def prose(answer: str) -> str:
    """The answer as a review body; nothing when it is only JSON, or only words of what it was told:
    then the model gave no review, and none is posted (reviews/review_pass.py).
    The real 0.5B model ended runs by echoing its last tool result (`{"paths": ["stats.py"]}`) and
    by repeating the runner's request for prose ("no tool call, no JSON and no tags"): neither is a
    review to post."""
    text = answer.strip()
    if not_a_review(text, review_instructions()):  # cut JSON, a refusal, a thank-you, the instructions
        return ""
    said = " ".join(re.findall(r"[a-z0-9]+", text.lower()))
    if said and f" {said} " in " " + " ".join(re.findall(r"[a-z0-9]+", ANSWER_IN_TEXT.lower())) + " ":
        return ""
    try:
        value = json.loads(text)
    except ValueError:
        return text
    return "" if isinstance(value, dict | list) else text
