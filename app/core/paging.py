"""Keyset paging over newest-first listings: a position and its opaque cursor.

Contract: a listing ordered ``(created_at DESC, turn_id DESC)`` resumes strictly after the
``Position`` of the last row it returned; ``(created_at, turn_id)`` is unique per tenant, so
rows that share a timestamp are neither skipped nor repeated. ``encode`` turns a position
into the cursor clients pass back unread — base64url (no padding) of a versioned JSON object
``{"v": 1, "at": <ISO 8601, microseconds, UTC>, "id": <turn_id>}`` — and ``decode`` reads it
back or raises ``InvalidCursor``: a cursor is a token, not an interface, so any change to
its content bumps ``v`` and older cursors are refused, never misread.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from datetime import UTC, datetime

from app.core.errors import InvalidRequest

VERSION = 1
MAX_CURSOR_LEN = 1024  # a 256-character turn id in UTF-8 and its timestamp fit easily


class InvalidCursor(InvalidRequest):
    """A cursor this service did not issue (or one of an older format)."""

    type = "invalid-cursor"


@dataclass(frozen=True, slots=True, kw_only=True)
class Position:
    """The last row a page returned: the next page starts strictly after it."""

    created_at: datetime  # timezone-aware
    turn_id: str


def encode(position: Position) -> str:
    doc = {"v": VERSION, "at": position.created_at.astimezone(UTC).isoformat(),
           "id": position.turn_id}
    raw = json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def decode(cursor: str) -> Position:
    if not cursor or len(cursor) > MAX_CURSOR_LEN:
        raise InvalidCursor("cursor is not one this service issued")
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        doc = json.loads(raw)
        if not isinstance(doc, dict) or doc.get("v") != VERSION:
            raise ValueError("unknown cursor version")
        at, turn_id = doc["at"], doc["id"]
        if not isinstance(at, str) or not isinstance(turn_id, str) or not turn_id \
                or "\x00" in turn_id:  # (no text column can hold a NUL)
            raise ValueError("cursor fields have the wrong types")
        created_at = datetime.fromisoformat(at)
        if created_at.tzinfo is None:
            raise ValueError("cursor timestamp without a time zone")
        created_at = created_at.astimezone(UTC)  # year 1 at +14:00 has no UTC instant
    except (ValueError, KeyError, TypeError, OverflowError, binascii.Error,
            UnicodeDecodeError):
        raise InvalidCursor("cursor is not one this service issued; start from the first "
                            "page") from None
    return Position(created_at=created_at, turn_id=turn_id)
