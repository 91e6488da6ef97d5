"""The request-head counter of `web/limits.py`: only the bytes up to the end of a head count."""

from __future__ import annotations

from bot.app.web.limits import head_bytes


def test_bytes_before_the_end_of_the_head_count() -> None:
    assert head_bytes(0, b"", b"GET / HTTP/1.1\r\nHost: x\r\n") == (25, False)
    assert head_bytes(25, b"x\r\n", b"\r\n" + b"b" * 10_000) == (27, True)


def test_a_body_after_the_head_does_not_count() -> None:
    head = b"POST / HTTP/1.1\r\nContent-Length: 100000\r\n\r\n"
    seen, complete = head_bytes(0, b"", head + b"{" * 100_000)
    assert (seen, complete) == (len(head), True)


def test_the_end_of_a_head_split_across_reads_is_found() -> None:
    seen, complete = head_bytes(10, b"\r\n\r", b"\nbody")
    assert complete and seen == 11
