"""Reviews by a real model server (opt-in: `BEAM_TEST_MODEL_URL`, never in CI): both ways the bot
reviews a change end in a review: as structured output where the server answers to a schema, through
`review_change` when the model calls it, else with the model's plain text as the body and the output
saying so. That holds for a model that keeps writing calls that cannot be used (small models often
do): it is asked for its review in plain text. No raw tool call or think block is posted. The same
checks as `bench/real_model.py`, on one change (`BEAM_TEST_MODEL_CHANGE`).

    BEAM_TEST_MODEL_URL=http://127.0.0.1:8089/v1 .venv/bin/pytest -m real_model tests/real_model
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.real_model import RecordingProxy, Review, changes, github_review, local_review

URL = os.environ.get("BEAM_TEST_MODEL_URL", "")
MODEL = os.environ.get("BEAM_TEST_MODEL_NAME", "qwen2.5-coder")
MAX_TOKENS = int(os.environ.get("BEAM_TEST_MODEL_MAX_TOKENS", "512"))
CHANGE = os.environ.get("BEAM_TEST_MODEL_CHANGE", "discount")

pytestmark = [
    pytest.mark.real_model,
    pytest.mark.skipif(not URL, reason="needs a model server: set BEAM_TEST_MODEL_URL"),
    pytest.mark.timeout(1500),  # a review takes minutes on two cores
]


@pytest.fixture(scope="module")
def proxy() -> Iterator[RecordingProxy]:
    with RecordingProxy(URL, MAX_TOKENS) as proxy:
        yield proxy


def check(review: Review) -> None:
    assert review.exchanges, "the model was never asked"
    assert review.posted_with is not None, f"{review.path} ended without a review: {review.detail}"
    for body in review.posted_bodies:
        assert "<think>" not in body and "<tool_call>" not in body and '"arguments"' not in body
    if review.posted_with == "review_change":
        assert "review_change" in review.tool_calls
        assert not review.said_plain_text
    elif review.posted_with in ("structured", "json"):  # no tool loop, or findings as JSON in its text
        assert not review.said_plain_text
    else:
        assert review.said_plain_text, "a plain-text review must say so"
        assert review.comments == []


def test_run_review_ends_in_a_review(proxy: RecordingProxy, tmp_path: Path) -> None:
    (change,) = changes([CHANGE])
    review = local_review(change, proxy, MODEL, tmp_path)
    check(review)


def test_beam_review_ends_in_a_review(proxy: RecordingProxy, tmp_path: Path) -> None:
    (change,) = changes([CHANGE])
    review = github_review(change, proxy, MODEL, tmp_path)
    check(review)
