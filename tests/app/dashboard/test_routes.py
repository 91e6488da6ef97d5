"""The dashboard's pages and exports over HTTP (in process): a table's CSV and JSON follow the page,
and a span the page does not offer is refused."""

from __future__ import annotations

import pytest

from tests.support.dashboard_env import REPO, Env

pytestmark = pytest.mark.anyio


async def test_exports_follow_the_page(env: Env) -> None:
    await env.sign_in()
    csv = await env.client.get(f"/dashboard/repos/{REPO}/export/failures.csv?days=7")
    assert csv.status_code == 200 and csv.headers["content-type"].startswith("text/csv")
    assert "attachment" in csv.headers["content-disposition"]
    header, line = csv.text.splitlines()
    assert header == "run,command,pull request,code,message,when,run url"
    assert ",review,2,BEM-380,GitHub did not answer," in line
    data = (await env.client.get(f"/dashboard/repos/{REPO}/export/findings.json?days=90")).json()
    assert {r["state"]: r["findings"] for r in data["rows"]} == {
        "open": 3,
        "fixed": 2,
        "dismissed": 1,
        "posted": 6,
    }
    assert (await env.client.get(f"/dashboard/repos/{REPO}/export/nothing.csv")).status_code == 404
    assert (await env.client.get(f"/dashboard/repos/{REPO}?days=8")).status_code == 400
