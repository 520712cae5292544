"""The hot tail of a session in Redis: a bounded, expiring list, rebuildable from the archive.

Contract (implements ``app.ports.SessionTail``):
- One Redis list per (tenant, session) at ``{prefix}:t:{tenant_id}:s:{session_id}:tail``; each
  entry is one ``SessionEvent`` as compact orjson (fields at their default value are omitted).
  An event's token count is stored with the name of the ``tokenizer`` it was counted with, its
  detector findings with the ``detectors`` fingerprint of the code that found them; each is
  read back only by a tail of the same tokenizer or fingerprint (after a change, the service
  counts or scans again).
- ``append`` and ``replace`` are single MULTI/EXEC transactions, so a reader sees the list either
  before or after a write, never half of one. Both keep only the last ``max_len`` entries and
  (re)set the TTL, so an idle session's tail expires ``ttl_s`` after its last write.
- ``read`` returns the list oldest-first; a missing key is ``[]``. An entry that does not decode
  is skipped (and logged): the gap it leaves makes ``is_complete`` false, so the service rebuilds
  the tail from Postgres instead of failing the turn.
- The tail is a cache. Writes are not ordered across concurrent writers (two appends may land
  out of seq order) and may be lost (Redis restart, eviction, expiry); ``is_complete`` is how the
  service notices and rebuilds.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson

from app.adapters.redis.client import RedisClient
from app.adapters.redis.keys import check_prefix, tail_key
from app.core.model import SessionEvent, tagged_findings, untag_count, untag_findings

log = logging.getLogger(__name__)


class RedisSessionTail:
    def __init__(self, client: RedisClient, *, prefix: str, max_len: int, ttl_s: int,
                 tokenizer: str, detectors: str) -> None:
        if max_len < 1 or ttl_s < 1:
            raise ValueError("max_len and ttl_s must be positive")
        self._r = client
        self._derived = Derived(tokenizer=tokenizer, detectors=detectors)
        self._prefix = check_prefix(prefix)
        self._max_len = max_len
        self._ttl_s = ttl_s

    def key(self, *, tenant_id: str, session_id: str) -> str:
        return tail_key(self._prefix, tenant_id, session_id)

    async def read(self, *, tenant_id: str, session_id: str) -> list[SessionEvent]:
        key = self.key(tenant_id=tenant_id, session_id=session_id)
        raw = await self._r.lrange(key, 0, -1)
        out: list[SessionEvent] = []
        for item in raw:
            try:
                if not isinstance(item, bytes):  # decode_responses=False: always bytes
                    raise TypeError("session tail entry is not bytes")
                out.append(decode_event(item, self._derived))
            except (orjson.JSONDecodeError, TypeError, ValueError, KeyError):
                # No content in the log line: entries hold user text.
                log.warning("skipping undecodable session tail entry (%d bytes)", len(item))
        return out

    async def append(
        self, *, tenant_id: str, session_id: str, events: Sequence[SessionEvent]
    ) -> None:
        if not events:
            return
        await self._write(self.key(tenant_id=tenant_id, session_id=session_id), events,
                          replace=False)

    async def replace(
        self, *, tenant_id: str, session_id: str, events: Sequence[SessionEvent]
    ) -> None:
        key = self.key(tenant_id=tenant_id, session_id=session_id)
        if not events:
            await self._r.delete(key)
            return
        await self._write(key, events, replace=True)

    async def drop(self, *, tenant_id: str, session_id: str) -> None:
        """Forget the tail (e.g. the session was deleted); the next read rebuilds or is empty."""
        await self._r.delete(self.key(tenant_id=tenant_id, session_id=session_id))

    async def _write(self, key: str, events: Sequence[SessionEvent], *, replace: bool) -> None:
        # Only the last max_len events can survive the LTRIM, so do not ship the rest.
        payload = [encode_event(e, self._derived) for e in events[-self._max_len:]]
        async with self._r.pipeline(transaction=True) as pipe:
            if replace:
                pipe.delete(key)
            pipe.rpush(key, *payload)
            pipe.ltrim(key, -self._max_len, -1)
            pipe.expire(key, self._ttl_s)
            await pipe.execute()


_DEFAULTS: dict[str, Any] = {
    "role": None, "content": "", "call_id": None, "name": None, "arguments": None,
    "is_error": False, "created_at": None,
}


@dataclass(frozen=True, slots=True)
class Derived:
    """What an entry's derived fields were made with: a tokenizer's name, a fingerprint of the
    detector code (``app.service.detector_cache.fingerprint``)."""

    tokenizer: str
    detectors: str


def encode_event(e: SessionEvent, derived: Derived) -> bytes:
    """Compact JSON; ``created_at`` as ISO 8601 (orjson keeps the UTC offset if aware); the
    token count, if known, as ``[tokenizer, n]``, the findings as ``[fingerprint, [[type,
    action, start, end], ...]]``."""
    doc: dict[str, Any] = {"seq": e.seq, "type": e.type}
    for name, default in _DEFAULTS.items():
        value = getattr(e, name)
        if value != default:
            doc[name] = value
    if e.tokens is not None:
        doc["tokens"] = [derived.tokenizer, e.tokens]
    if e.findings is not None:
        doc["findings"] = tagged_findings(e.findings, derived.detectors)
    return orjson.dumps(doc)


def decode_event(raw: bytes, derived: Derived) -> SessionEvent:
    doc = orjson.loads(raw)
    if not isinstance(doc, dict):
        raise TypeError("session tail entry is not an object")
    seq, typ = doc["seq"], doc["type"]
    if not isinstance(seq, int) or isinstance(seq, bool) or not isinstance(typ, str):
        raise TypeError("session tail entry has a bad seq or type")
    created = doc.get("created_at")
    return SessionEvent(
        seq=seq,
        type=typ,
        role=doc.get("role"),
        content=doc.get("content", ""),
        call_id=doc.get("call_id"),
        name=doc.get("name"),
        arguments=doc.get("arguments"),
        is_error=bool(doc.get("is_error", False)),
        created_at=datetime.fromisoformat(created) if isinstance(created, str) else None,
        tokens=untag_count(doc.get("tokens"), derived.tokenizer),
        findings=untag_findings(doc.get("findings"), derived.detectors),
    )
