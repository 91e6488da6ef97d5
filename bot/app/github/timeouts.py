"""How long a request to GitHub may live: our client's timeout, and GitHub's own limit.

The effects journal needs both to know when a write begun by a dead attempt can no longer land
(effects/writer.py's in-flight window), so they live here rather than inside the client's set-up.
"""

from __future__ import annotations

# Our httpx client's timeout for one GitHub call: the default of BEAM_GITHUB_TIMEOUT.
CLIENT_TIMEOUT = 30.0
CONNECT_TIMEOUT = 10.0
# GitHub ends an API request that takes longer than this:
# https://docs.github.com/en/rest/using-the-rest-api/troubleshooting-the-rest-api#timeouts
GITHUB_REQUEST_LIMIT = 10.0
# Clock difference between our hosts that the in-flight window allows for.
CLOCK_MARGIN = 2.0


def in_flight_seconds(client_timeout: float = CLIENT_TIMEOUT) -> float:
    """How long after a write's intent the write may still land at GitHub: the request lives at most
    until our client gives up or GitHub ends it, whichever is sooner."""
    return min(client_timeout, GITHUB_REQUEST_LIMIT) + CLOCK_MARGIN
