"""The setup page's registration driven as a browser would, without one: the bot's form, GitHub's
"Create GitHub App" page (`fake_github_web.py`), and back to the bot's callback.

`register_app(bot, token)` works on any bot client: one in process (`web_app.running_app`) or a real
`beam-bot serve` over HTTP. The callback address GitHub redirects to is the bot's public URL, which
a test's bot may not be reachable at, so its path and query are sent to `bot` itself.
"""

from __future__ import annotations

import html
import json
import re
from urllib.parse import urlsplit

import httpx

_HIDDEN = re.compile(r'<input (?:type="hidden" )?name="([^"]+)" value="([^"]*)">')


def register_form(page: str) -> tuple[str, str]:
    """The bot's manifest form: the GitHub URL it posts to, and the manifest JSON it posts."""
    action = re.search(r'<form action="([^"]+)" method="post">', page)
    value = re.search(r'<input type="hidden" name="manifest" value="([^"]*)">', page)
    assert action and value, page
    return html.unescape(action.group(1)), html.unescape(value.group(1))


async def register_app(bot: httpx.AsyncClient, token: str) -> httpx.Response:
    """Opens the setup page with `token`, registers the App on the fake GitHub's web pages, and
    returns the bot's answer to GitHub's redirect (200 and "is registered" when all went well)."""
    unlocked = await bot.get("/", params={"token": token})
    assert unlocked.status_code == 303, unlocked.text
    action, manifest = register_form((await bot.get("/")).text)
    async with httpx.AsyncClient(timeout=30) as browser:
        shown = await browser.post(action, data={"manifest": manifest})
        assert shown.status_code == 200, shown.text
        fields = {name: html.unescape(value) for name, value in _HIDDEN.findall(shown.text)}
        assert {"name", "manifest", "state", "owner"} <= set(fields), shown.text
        origin = "{0.scheme}://{0.netloc}".format(urlsplit(action))
        created = await browser.post(f"{origin}/fake-web/create", data=fields)
    assert created.status_code == 302, created.text
    redirect = urlsplit(created.headers["location"])
    assert redirect.path == "/setup/callback", redirect
    assert json.loads(manifest)["redirect_url"].endswith("/setup/callback")
    return await bot.get(f"{redirect.path}?{redirect.query}")
