"""The token form's throttle: a client's wrong tries, then everyone's, stop it for the window; the
window passing forgives."""

from __future__ import annotations

from bot.app.dashboard.throttle import Throttle


def test_a_client_is_stopped_after_its_wrong_tries_and_forgiven_after_the_window() -> None:
    throttle = Throttle(per_client=3, overall=100, window=600.0)
    for n in range(3):
        assert not throttle.blocked("10.0.0.1", 1000.0 + n)
        throttle.failed("10.0.0.1", 1000.0 + n)
    assert throttle.blocked("10.0.0.1", 1010.0)
    assert not throttle.blocked("10.0.0.2", 1010.0)  # another client is not
    assert not throttle.blocked("10.0.0.1", 1000.0 + 601)  # the first try left the window


def test_many_clients_together_meet_the_overall_bound() -> None:
    throttle = Throttle(per_client=3, overall=10, window=600.0)
    for n in range(10):
        throttle.failed(f"10.0.1.{n}", 1000.0)
    assert throttle.blocked("10.0.2.1", 1001.0)  # a new address too
    assert not throttle.blocked("10.0.2.1", 1601.0)
