"""How many sessions' compaction breakers are open or half-open now, for a gauge.

A breaker lives in its session's latest compaction row (``app.service.compaction``), and no
query may count them across tenants (RLS keeps each transaction in one). So this worker keeps
the last state it saw of each session's breaker that was not closed — bounded, the least
recently seen forgotten first — and ``counts(now)`` says how many are open and half-open at
``now``: an open breaker turns half-open by the clock alone, with no row written. Which
sessions they are is never exported (no session ids as labels).
"""

from __future__ import annotations

from collections import OrderedDict
from datetime import datetime

from app.core.compaction.breaker import Breaker, BreakerPolicy, Phase, phase

SessionKey = tuple[str, str]  # (tenant_id, session_id)
TRACKED = (Phase.OPEN, Phase.HALF_OPEN)


class BreakerBoard:
    def __init__(self, policy: BreakerPolicy, max_sessions: int = 10_000) -> None:
        self._policy = policy
        self._max = max_sessions
        self._seen: OrderedDict[SessionKey, Breaker] = OrderedDict()

    def saw(self, key: SessionKey, state: Breaker, now: datetime) -> None:
        """The session's breaker is ``state`` (as its latest row says) at ``now``."""
        if phase(state, self._policy, now) is Phase.CLOSED:  # and stays so until a failure
            self._seen.pop(key, None)
            return
        self._seen[key] = state
        self._seen.move_to_end(key)
        if len(self._seen) > self._max:
            self._seen.popitem(last=False)

    def counts(self, now: datetime) -> dict[Phase, int]:
        out = dict.fromkeys(TRACKED, 0)
        for state in self._seen.values():
            out[phase(state, self._policy, now)] += 1
        return out
