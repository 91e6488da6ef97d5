"""How many wrong operator tokens the dashboard's sign-in form takes before it stops listening.

Guessing BEAM_DASHBOARD_TOKEN through the form is bounded twice: a client gets `per_client` wrong
tries per window, and all clients together `overall` (a guesser with many addresses, or every client
behind one proxy, still meets a wall). A right token is never counted. The counts live in the
process: a restart forgives, which a guesser cannot cause from outside.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

MAX_CLIENTS = 10_000  # tracked at once; past that the oldest are forgotten (the overall bound holds)


@dataclass
class Throttle:
    per_client: int = 5
    overall: int = 50
    window: float = 600.0
    _clients: dict[str, deque[float]] = field(default_factory=dict, repr=False)
    _all: deque[float] = field(default_factory=deque, repr=False)

    def _prune(self, now: float) -> None:
        cutoff = now - self.window
        while self._all and self._all[0] <= cutoff:
            self._all.popleft()
        for client in [c for c, times in self._clients.items() if not times or times[-1] <= cutoff]:
            del self._clients[client]

    def blocked(self, client: str, now: float) -> bool:
        """Whether this client may not try now (too many wrong tokens of late, its own or everyone's)."""
        self._prune(now)
        mine = self._clients.get(client)
        recent = 0 if mine is None else sum(1 for t in mine if t > now - self.window)
        return recent >= self.per_client or len(self._all) >= self.overall

    def failed(self, client: str, now: float) -> None:
        times = self._clients.setdefault(client, deque(maxlen=self.per_client))
        times.append(now)
        self._all.append(now)
        while len(self._clients) > MAX_CLIENTS:
            del self._clients[next(iter(self._clients))]
