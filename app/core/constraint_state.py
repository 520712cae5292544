"""How a committed constraint stands at a turn's ``now`` and how task state shows it.

Contract (pure; ``now`` is the turn's, passed in): ``status`` is ``active``, ``reconfirm``
(its date has passed: it must be re-confirmed before a conclusion relies on it) or
``date_unparsed`` (a deadline whose date could not be read: kept, flagged).
``constraint_line`` is the line task state renders: the kind, the id conclusions cite
(``[constraint:<id>]``), the due date and the status when it is not ``active``, then the
text verbatim and where it came from.
"""

from __future__ import annotations

from datetime import datetime

from app.core.model import Constraint


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
