"""Issue 32 on `beam-bot serve`: /metrics behind a bearer token, or on an address of its own."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.support.bot_process import bot_stack, free_port


def test_metrics_listen_serves_metrics_apart_and_the_public_port_does_not(tmp_path: Path) -> None:
    port = free_port()
    with bot_stack(tmp_path, BEAM_METRICS_TOKEN="", BEAM_METRICS_LISTEN=f"127.0.0.1:{port}") as bot:
        bot.start()
        assert httpx.get(f"{bot.url}/metrics", timeout=5).status_code == 404
        private = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5)
        assert private.status_code == 200 and "beam_mode" in private.text
        assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).status_code == 404
        assert "serving /metrics without a token on 127.0.0.1" in bot.log()
        bot.stop()
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5)  # stopped with the main server


def test_metrics_on_the_public_port_need_the_token(tmp_path: Path) -> None:
    with bot_stack(tmp_path) as bot:
        bot.start()
        assert httpx.get(f"{bot.url}/metrics", timeout=5).status_code == 401
        assert "beam_mode" in bot.scrape()
