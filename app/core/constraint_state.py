"""How a committed constraint stands at a turn's ``now`` and how task state shows it.

Contract (pure; ``now`` is the turn's, passed in): ``status`` is ``active``, ``reconfirm``
(its date has passed: it must be re-confirmed before a conclusion relies on it) or
``date_unparsed`` (a deadline whose date could not be read: kept, flagged).
``constraint_line`` is the line task state renders: the kind, the id conclusions cite
(``[constraint:<id>]``), the due date and the status when it is not ``active``, then the
text verbatim and where it came from.

``held(constraints)`` splits them into what the never-compress task state holds (every
constraint given through the API, and the newest ``HELD_FOUND`` that compaction found in the
session's messages, tool results and evidence) and the older found ones, which task state
shows in its compressible detail. Found constraints accumulate over a long session and the
finder is a heuristic (a log line with "limit" and "refund" reads as a rule); unbounded, they
outgrew the budget and failed whole turns as budget-too-small (half the bench's turns).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from app.core.model import Constraint

HELD_FOUND = 8


def status(c: Constraint, now: datetime | None) -> str:
    if "date_unparsed" in c.flags:
        return "date_unparsed"
    if now is not None and c.expires_at and datetime.fromisoformat(c.expires_at) <= now:
        return "reconfirm"
    return "active"


_SHOWN = {"reconfirm": "EXPIRED, re-confirm before relying on it",
          "date_unparsed": "date not understood, confirm it"}


def constraint_line(c: Constraint, now: datetime | None) -> str:
    tags = [c.kind] + ([f"constraint:{c.id}"] if c.id else [])
    if c.due:
        tags.append(f"due {c.due}")
    state = status(c, now)
    if state != "active":
        tags.append(_SHOWN[state])
    origin = f" (from {c.origin}: {c.source_ref})" if c.origin and c.source_ref else ""
    return f"[{', '.join(tags)}] {c.text}{origin}"


def held(constraints: Sequence[Constraint]) -> tuple[tuple[Constraint, ...],
                                                    tuple[Constraint, ...]]:
    """(held, overflow), each in the checkpoint's order (oldest first)."""
    found = [i for i, c in enumerate(constraints) if c.origin]
    older = frozenset(found[:-HELD_FOUND] if len(found) > HELD_FOUND else ())
    return (tuple(c for i, c in enumerate(constraints) if i not in older),
            tuple(c for i, c in enumerate(constraints) if i in older))
