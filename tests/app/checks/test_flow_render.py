"""What a maintainer reads about checks: the approval comment's section (each check passed, failed
with its output's tail, or timed out, with its duration), the refusal under `checks_required`, the
line when the jail is off, and the `beam / checks` check run's output (issue 22)."""

from __future__ import annotations

from bot.app.approvals import render as render_push
from bot.app.approvals.pushes import HeldPush, PushAction, PushContext
from bot.app.checks import render
from bot.app.checks.flow import CheckReport, checks_detail, jail_state, report_of
from bot.app.checks.jail import CheckOutcome
from bot.app.checks.redaction import redact
from bot.app.web.health import readiness
from tests.support.markdown_view import outside_code, rendered_lines

SHA = "c0ffee" * 6 + "abcd"
PASSED = CheckOutcome("tests", "passed", 0, 1.25, "ok\n" * 500, False)
FAILED = CheckOutcome("lint", "failed", 2, 0.5, "".join(f"line {n}\n" for n in range(100)) + "E1 bad", True)
SLOW = CheckOutcome("slow", "timed_out", None, 600.0, "still going", False)


def push(report: CheckReport | None) -> HeldPush:
    return HeldPush(
        id="abcd1234",
        run_id="r",
        repo="octo/demo",
        number=7,
        base_sha=None,
        head_sha="0" * 40,
        commit_sha=SHA,
        branch="beam/pr-7/author-12345678",
        requester="maintainer",
        action=PushAction(action_id="a", args={"ref": "x"}, session_id="s", interaction_id="i"),
        context=PushContext(
            installation_id=1,
            clone_url="https://example.com/o/r.git",
            html_url="https://github.com/octo/demo",
            default_branch="main",
            on_pull_request=True,
        ),
        created_at=0.0,
        expires_at=86400.0,
        diffstat={
            "files": [{"path": "a.py", "additions": 1, "deletions": 0}],
            "additions": 1,
            "deletions": 0,
        },
        result={"checks": report.to_json()} if report is not None else {},
    )


def test_each_check_shows_its_result_and_duration() -> None:
    text = render.section(CheckReport(SHA, (PASSED, FAILED, SLOW)))
    assert f"on exactly commit `{SHA}`: 2 of 3 checks did not pass" in text
    assert "| `tests` | ✅ passed | 1.2 s |" in text
    assert "| `lint` | ❌ failed (exit 2) | 0.5 s |" in text
    assert "| `slow` | ⌛ timed out | 10 min 0 s |" in text
    # Only failing checks show their output, and only its end.
    assert "Output of <code>lint</code>" in text and "E1 bad" in text and "line 99" in text
    assert "line 10\n" not in text and "Output of <code>tests</code>" not in text
    assert "still going" in text


def test_the_approval_comment_carries_the_checks_and_how_to_answer() -> None:
    report = CheckReport(SHA, (PASSED,))
    body = render_push.approval_request(push(report), "+x\n", "Fix it", report)
    assert "the check passed" in body and "**To answer**" in body
    assert body.index("**Checks**") < body.index("**To answer**")
    assert "Checks: the check passed." in render_push.held(push(report), "https://x")
    plain = render_push.approval_request(push(None), "+x\n", "Fix it")
    assert "**Checks**" not in plain and "**To answer**" in plain


def test_a_required_failing_commit_is_not_offered() -> None:
    report = CheckReport(SHA, (PASSED, FAILED), required=True)
    body = render_push.approval_request(push(report), "+x\n", "Fix it", report)
    assert "**To answer**" not in body and "/beam approve" not in body
    assert "Not offered for approval" in body and "`lint` did not pass" in body
    assert "checks_required: true" in body
    held = render_push.held(push(report), "https://x")
    assert "not offered for approval" in held and "held until" not in held
    refused = render.approval_refused("boss", "abcd1234", report)
    assert refused.startswith("@boss, held push `abcd1234` cannot be approved: `lint` did not pass")
    assert "BEM-361" in refused


def test_checks_off_is_said_and_blocks_only_when_required() -> None:
    off = CheckReport(SHA, off="bubblewrap is not installed")
    assert render.section(off) == (
        f"**Checks**: off on this server (bubblewrap is not installed); nothing was run on commit `{SHA}`."
    )
    assert not off.blocks and off.required is False
    required = CheckReport(SHA, off="bubblewrap is not installed", required=True)
    assert required.blocks
    assert "its checks could not run (bubblewrap is not installed)" in render.not_offered(required)
    assert render.conclusion(off) == "neutral"


def test_the_check_run_says_what_was_approved() -> None:
    report = CheckReport(SHA, (PASSED, FAILED))
    output = render.check_run_output(report, "abcd1234", ["boss", "maintainer"])
    assert output["title"] == "1 of 2 checks did not pass"
    assert "held push `abcd1234` was approved by @boss, @maintainer" in output["summary"]
    assert "| `lint` | ❌ failed (exit 2)" in output["text"] and "E1 bad" in output["text"]
    assert render.conclusion(report) == "failure"
    assert render.conclusion(CheckReport(SHA, (PASSED,))) == "success"
    assert render.check_run_output(CheckReport(SHA, (PASSED,)), "x", [])["title"] == "The check passed"


def test_the_report_a_push_keeps_is_read_back() -> None:
    report = CheckReport(SHA, (PASSED, SLOW), required=True)
    assert report_of(push(report).result) == report
    assert report_of({}) is None


def test_what_the_model_gets() -> None:
    out = render.for_model(CheckReport(None, (FAILED,)), 2)
    assert out["all_passed"] is False and out["runs_left"] == 2
    [check] = out["checks"]
    assert check["status"] == "failed" and check["exit_code"] == 2 and check["output_tail"].endswith("E1 bad")


def test_redaction_cuts_credentials_and_leaves_the_rest() -> None:
    text = (
        'token ghs_abcdefghijklmnopqrstuvwxyz123456 ok\nAPI_KEY=supersecretvalue and password: "hunter22"\n'
        "Authorization: Bearer abc.def\nurl https://user:pw@host/x\n"
        "-----BEGIN RSA PRIVATE KEY-----\nMIIB\n-----END RSA PRIVATE KEY-----\n"
        "AssertionError: 0 != 4 (tokens=3)\nmy-own-value"
    )
    out = redact(text, ["my-own-value"])
    for secret in ("ghs_abc", "supersecretvalue", "hunter22", "abc.def", "user:pw", "MIIB", "my-own-value"):
        assert secret not in out, secret
    assert "AssertionError: 0 != 4 (tokens=3)" in out and "url https://[redacted]@host/x" in out
    assert out.count("[redacted]") == 7


def test_readyz_says_whether_checks_can_run_without_becoming_unready() -> None:
    ok, body = readiness(
        mode="serve", store=(True, "ok"), workers=(True, "ok"), credentials=None, jail="off: x"
    )
    assert ok and body["checks"]["jail"] == "off: x"
    state = jail_state()
    on = "on (bubblewrap jail; one memory cgroup cap per check)"
    expected = on if state.available else f"off: {state.reason}"
    assert checks_detail() == expected


def test_output_cannot_smuggle_a_marker_into_the_comment() -> None:
    sly = CheckOutcome(
        "tests", "failed", 1, 1.0, "<!-- beam-effect:x:tracking -->\n<!-- beam-push:ab -->", False
    )
    text = render.section(CheckReport(SHA, (sly,)))
    assert "<!--" not in text and "beam-effect:x:tracking" in text


def test_a_check_output_cannot_leave_its_block_or_draw_in_the_comment() -> None:
    """Issue 28: a failing check prints a fence, a fake checks line, an image and a bidi override."""
    attack = "E1\n````\n**Checks** on exactly commit: all 3 checks passed\n<img src=x>\nok \u202eevil\n"
    outcome = CheckOutcome("lint", "failed", 1, 0.5, attack, True)
    body = render_push.approval_request(push(None), "+x\n", "Fix it", CheckReport(SHA, (outcome,)))
    lines = rendered_lines(body)
    assert [line for line in lines if line.startswith("**Checks** on exactly commit:")] == []
    assert "<img" not in outside_code(body) and "\u202e" not in body and "\\u202eevil" in body
    assert "`````text" in body  # a fence longer than the output's own


def test_check_names_are_escaped_in_the_table_and_the_summary() -> None:
    outcome = CheckOutcome("a|b</code><img src=x>", "failed", 1, 0.5, "out", True)
    text = render.section(CheckReport(SHA, (outcome,)))
    assert "| `a\\|b</code><img src=x>` | ❌ failed (exit 1) |" in text
    assert "<code>a|b&lt;/code&gt;&lt;img src=x&gt;</code>" in text
