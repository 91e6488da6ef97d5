"""The HTML of setup mode: the pages and their explanations (setup.py decides which, and words its errors).

Plain HTML forms without JavaScript, so that the flow works in any browser and the tests can read it.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping
from typing import Any

from starlette.responses import HTMLResponse

# Why the App asks for each permission and event (app.yml says the same in its comments).
PERMISSION_REASONS = {
    "contents": "read the code and .github/beam.yml; push the bot's own beam/… branch once a maintainer "
    "approves (protected branches are never written)",
    "pull_requests": "post reviews and open the pull request from the bot's branch",
    "issues": "post the tracking and approval comments, react to commands, read approval reactions",
    "checks": "show each automatic review as the `beam / review` check run (always neutral)",
    "metadata": "required of every App; also the commenter's permission checks",
}
EVENT_REASONS = {
    "issue_comment": "`/beam …` commands in pull request and issue comments",
    "pull_request_review_comment": "`/beam …` commands in review threads",
    "pull_request": "automatic reviews when a pull request opens or changes; closing it ends its held pushes",
    "pull_request_review_thread": "a resolved thread dismisses the bot's finding in it",
}
_STYLE = """body{font:16px system-ui,sans-serif;max-width:46em;margin:3em auto;padding:0 1em}
.warn{background:#fff3cd;padding:.5em 1em} .err{background:#f8d7da;padding:.5em 1em}
code{background:#eee;padding:0 .2em} td,th{text-align:left;padding:.2em .6em .2em 0;vertical-align:top}"""


def page(
    title: str, body: str, *, status: int = 200, headers: Mapping[str, str] | None = None
) -> HTMLResponse:
    return HTMLResponse(
        f"""<!doctype html>
<html><head><meta charset="utf-8"><title>{html.escape(title)}</title><style>{_STYLE}</style></head>
<body><h1>{html.escape(title)}</h1>{body}</body></html>
""",
        status_code=status,
        headers={
            "Cache-Control": "no-store",
            "X-Frame-Options": "DENY",
            "Referrer-Policy": "no-referrer",
            **(headers or {}),
        },
    )


def token_needed(*, wrong: bool, log_hint: str) -> HTMLResponse:
    first = (
        "<p class=err>That is not this server's setup token. The token changes at every start: use the "
        "one from the latest start.</p>"
        if wrong
        else ""
    )
    body = f"""{first}
<p>This page registers a GitHub App for this server, so it needs the <b>setup token</b> that beam-bot
printed in its log when it started, in a line like</p>
<pre>beam-bot is in setup mode: open {html.escape(log_hint)}/?token=… to register the GitHub App</pre>
<p>Find it in the output of <code>beam-bot serve</code> (in a container: <code>docker logs
&lt;container&gt;</code>), then open that address, or paste the token here.
To choose the token yourself, set <code>BEAM_SETUP_TOKEN</code> before starting.</p>
<form action="/" method="get"><p><label>Setup token <input name="token" autocomplete="off" size="36"></label>
<button type="submit">Continue</button></p></form>
"""
    return page("Set up beam-bot: setup token needed", body, status=403 if wrong else 401)


def requested_access(manifest: Mapping[str, Any]) -> str:
    """The permissions and events the App will request, from the manifest, each with its reason."""
    perms = manifest.get("default_permissions") or {}
    events = manifest.get("default_events") or []
    rows = "".join(
        f"<tr><td><code>{html.escape(str(name))}</code></td><td>{html.escape(str(level))}</td>"
        f"<td>{html.escape(PERMISSION_REASONS.get(str(name), ''))}</td></tr>"
        for name, level in (perms.items() if isinstance(perms, Mapping) else [])
    )
    items = "".join(
        f"<li><code>{html.escape(str(event))}</code> {html.escape(EVENT_REASONS.get(str(event), ''))}</li>"
        for event in (events if isinstance(events, list) else [])
    )
    return f"""<h2>What the App will ask for</h2>
<table id="permissions"><tr><th>permission</th><th>access</th><th>why</th></tr>{rows}</table>
<p>Events it subscribes to:</p><ul id="events">{items}</ul>"""


def owner_form(org: str, name: str) -> str:
    return f"""<form action="/" method="get"><p>
<label>App name <input name="name" value="{html.escape(name)}" maxlength="34" size="24"></label>
<label>Organization
<input name="org" placeholder="(your personal account)" value="{html.escape(org)}"></label>
<button type="submit">Use them</button></p>
<p><small>App names are unique across GitHub; the suggested name has a random ending so that it is
free. GitHub lets you change it again before it creates the App.</small></p></form>"""


def register(
    *,
    action: str,
    manifest: dict[str, Any],
    org: str,
    name: str,
    stored_in: str | None,
    webhook_url: str,
    via_proxy: bool,
    warning: str | None,
) -> HTMLResponse:
    owner = f"the organization <b>{html.escape(org)}</b>" if org else "your personal account"
    route = (
        f"the webhook proxy channel <code>{html.escape(webhook_url)}</code> (BEAM_WEBHOOK_PROXY_URL); "
        "this server reads the channel, so GitHub never needs to reach it"
        if via_proxy
        else f"<code>{html.escape(webhook_url)}</code>"
    )
    warn = f"<p class=warn>{warning}</p>" if warning else ""
    # `stored_in`: the credentials file; None: the database, sealed (credentials/stored.py).
    where = (
        "this server's database, sealed with <code>BEAM_SECRET_KEY</code>, where every process that has "
        "the key finds them"
        if stored_in is None
        else f"<code>{html.escape(stored_in)}</code> (readable by this user only)"
    )
    body = f"""
<p>beam-bot has no GitHub App yet. Register one for {owner}: GitHub shows the App, lets you change its
name, and sends you back here. The App's key and webhook secret are then stored in {where}.</p>
<p>GitHub will send webhooks to {route}.</p>
{warn}
{owner_form(org, name)}
<form action="{html.escape(action)}" method="post">
<input type="hidden" name="manifest" value="{html.escape(json.dumps(manifest))}">
<button type="submit" id="register">Register the GitHub App</button>
</form>
{requested_access(manifest)}
"""
    return page("Set up beam-bot", body)


def unreachable(
    *, public_url: str, reason: str, port_hint: str, manifest: dict[str, Any], explicit: bool
) -> HTMLResponse:
    origin = "BEAM_PUBLIC_URL is" if explicit else "This page was opened at"
    body = f"""
<p class=warn id="unreachable">{origin} <code>{html.escape(public_url)}</code>, which {html.escape(reason)}.
GitHub sends webhooks from the internet, so an App registered with
<code>{html.escape(public_url)}/webhooks</code> would never receive a delivery. Registration is not
offered until one of these is done:</p>
<ol>
<li><b>A webhook proxy channel</b> (the easy way on a laptop): open <a href="https://smee.io/new">
https://smee.io/new</a>, copy the channel address it gives you, and restart with
<pre>BEAM_WEBHOOK_PROXY_URL=https://smee.io/&lt;channel&gt; beam-bot serve{html.escape(port_hint)}</pre>
GitHub then sends webhooks to the channel and beam-bot reads them from it (no other program needed).
Every delivery is still checked against the App's webhook secret.</li>
<li><b>A public address</b>: if this server can be reached from the internet (a public host name, or a
tunnel or reverse proxy in front of it), restart with
<pre>BEAM_PUBLIC_URL=https://&lt;that address&gt; beam-bot serve{html.escape(port_hint)}</pre></li>
</ol>
{requested_access(manifest)}
"""
    return page("Set up beam-bot: GitHub cannot reach this address", body)


def secret_key_needed(advice: str) -> HTMLResponse:
    """PostgreSQL without BEAM_SECRET_KEY: nowhere to keep the credentials that every host can read."""
    body = f"""
<p class=warn id="secret-key-needed">This server keeps its data in PostgreSQL, so that workers on other
hosts share it. The App's private key and webhook secret must be kept there too, sealed with a key
that only beam-bot's processes have; a file in this server's work directory would never reach the
other hosts. Registration is not offered until that key is set (BEM-378):</p>
<p>{html.escape(advice)}.</p>
<pre>beam-bot secret-key
BEAM_SECRET_KEY=&lt;the key it printed&gt; beam-bot serve</pre>
<p>Keep the key as you keep the database password: without it the stored credentials cannot be read,
and with it and the database anyone can act as the App.</p>
"""
    return page("Set up beam-bot: BEAM_SECRET_KEY needed", body)


def bad_input(message: str) -> HTMLResponse:
    return page(
        "Set up beam-bot",
        f'<p class=err>{html.escape(message)}</p><p><a href="/">Back to the setup page</a></p>',
        status=400,
    )


def callback_error(status: int, message: str, *, retry_url: str | None, apps_url: str | None) -> HTMLResponse:
    parts = [f"<p class=err>{html.escape(message)}</p>"]
    if retry_url:
        parts.append(
            f'<p><a id="retry" href="{html.escape(retry_url)}">Try again</a> (GitHub accepts the same code '
            "for an hour; no second App is created).</p>"
        )
    if apps_url:
        parts.append(
            f'<p>If GitHub created the App already, it is listed at <a href="{html.escape(apps_url)}">'
            f"{html.escape(apps_url)}</a>: delete it there before you register again.</p>"
        )
    if status != 409:
        parts.append('<p><a href="/">Back to the setup page</a></p>')
    return page("Set up beam-bot", "".join(parts), status=status)


def registered(name: str, app_id: int, install_url: str | None) -> HTMLResponse:
    what = f"<b>{html.escape(name)}</b> (App id {app_id})"
    install = (
        f'<p>Next: <a id="install" href="{html.escape(install_url)}">install the App</a> on the repositories '
        "it should serve.</p>"
        if install_url
        else "<p>Next: install the App on the repositories it should serve.</p>"
    )
    return page("beam-bot is registered", f"<p>Registered {what}. Webhooks are now accepted.</p>{install}")
