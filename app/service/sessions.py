"""Session writes and reads: the archive in Postgres is the truth, the Redis tail a cache.

A write commits to the archive first, then appends to the tail; if Redis is down the write
still succeeds (it is durable) and the next read rebuilds the tail. A read takes the tail
only when it is exactly the last events the archive says exist, else rebuilds it. Events
enter the tail with their token counts and detector findings (of ``event_content``): a
session's history is counted and scanned once, not on every turn by every worker.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from datetime import datetime

from app.core.candidates import CountTokens, with_derived
from app.core.errors import NotFound
from app.core.guards.safety import Detector
from app.core.model import SessionEvent, SessionInfo, TranscriptHit, Visibility
from app.core.tail import is_complete
from app.ports import NewEvent, SessionArchive, SessionOwner, SessionTail, TranscriptQuery
from app.service import degraded

log = logging.getLogger(__name__)


# Told of every acknowledged append (tenant, session, owner, the stored events); returns at
# once and never fails the append (``app.service.recall.SessionRecall.appended``).
AppendListener = Callable[[str, str, SessionOwner, Sequence[SessionEvent]], None]


class SessionService:
    def __init__(self, archive: SessionArchive, tail: SessionTail, *, tail_len: int,
                 count_tokens: CountTokens, scan: Detector,
                 appended: AppendListener | None = None) -> None:
        self._archive = archive
        self._tail = tail
        self._tail_len = tail_len
        self._count = count_tokens
        self._scan = scan
        self._appended = appended

    def _derived(self, events: Sequence[SessionEvent]) -> list[SessionEvent]:
        """The last ``tail_len`` events with their tokens and findings, as the tail keeps them."""
        return [with_derived(e, self._count, self._scan) for e in events[-self._tail_len:]]

    async def append(
        self, *, tenant_id: str, session_id: str, owner: SessionOwner, events: Sequence[NewEvent]
    ) -> list[int]:
        _, stored = await self._archive.append(
            tenant_id=tenant_id, session_id=session_id, owner=owner, events=events)
        await self._cache(tenant_id, session_id, owner, stored)
        return [e.seq for e in stored]

    async def append_for_turn(
        self, *, tenant_id: str, session_id: str, owner: SessionOwner,
        events: Sequence[NewEvent], turn_id: str | None, request_sha256: str
    ) -> list[int]:
        """The events a turn carries, appended before it is assembled. With the client's
        ``turn_id`` at most once (``SessionArchive.append_once``: a retry gets the first
        attempt's seqs and the tail is left alone); a server-made ``turn_id`` (None here)
        is never retried, so it is a plain ``append``."""
        if turn_id is None:
            return await self.append(tenant_id=tenant_id, session_id=session_id, owner=owner,
                                     events=events)
        done = await self._archive.append_once(
            tenant_id=tenant_id, session_id=session_id, owner=owner, events=events,
            turn_id=turn_id, request_sha256=request_sha256)
        if done.fresh:
            await self._cache(tenant_id, session_id, owner, done.stored)
        return done.seqs

    async def _cache(self, tenant_id: str, session_id: str, owner: SessionOwner,
                     stored: Sequence[SessionEvent]) -> None:
        if self._appended is not None and stored:
            self._appended(tenant_id, session_id, owner, stored)
        try:
            await self._tail.append(tenant_id=tenant_id, session_id=session_id,
                                    events=self._derived(stored))
        except Exception as exc:  # Redis is a cache here: the archive holds the events.
            log.warning("session tail append failed; it will be rebuilt", exc_info=True)
            degraded.note("redis", exc)

    async def exists(self, *, tenant_id: str, session_id: str) -> bool:
        """Whether the tenant has this session, whoever owns it (an admin's question)."""
        return await self._archive.info(tenant_id=tenant_id, session_id=session_id) is not None

    async def _owned(self, tenant_id: str, session_id: str, user_id: str) -> SessionInfo:
        info = await self._archive.info(tenant_id=tenant_id, session_id=session_id)
        if info is None or info.user_id != user_id:
            # Another user's session is the same 404 as a missing one.
            raise NotFound(f"no session {session_id!r}")
        return info

    async def transcript(
        self, *, tenant_id: str, session_id: str, user_id: str, after_seq: int, limit: int
    ) -> list[SessionEvent]:
        await self._owned(tenant_id, session_id, user_id)
        return await self._archive.events(
            tenant_id=tenant_id, session_id=session_id, after_seq=after_seq, limit=limit)

    async def recent(self, *, tenant_id: str, session_id: str, user_id: str, limit: int
                     ) -> list[SessionEvent]:
        """The last ``limit`` archived events in order (what a compaction reads)."""
        info = await self._owned(tenant_id, session_id, user_id)
        return await self._archive.events(
            tenant_id=tenant_id, session_id=session_id,
            after_seq=max(0, info.last_seq - limit), limit=limit)

    async def search(self, *, tenant_id: str, session_id: str, user_id: str,
                     visibility: Visibility, query: str, limit: int,
                     exclude_current: bool = False) -> list[TranscriptHit]:
        """Transcript search over the sessions ``visibility`` opens to this user."""
        await self._owned(tenant_id, session_id, user_id)
        return await self.search_owned(tenant_id=tenant_id, session_id=session_id,
                                       user_id=user_id, visibility=visibility, query=query,
                                       limit=limit, exclude_current=exclude_current)

    async def search_owned(self, *, tenant_id: str, session_id: str | None, user_id: str,
                           visibility: Visibility, query: str, limit: int,
                           exclude_current: bool = False, agent_id: str | None = None,
                           embedding: Sequence[float] | None = None,
                           embedder: str | None = None) -> list[TranscriptHit]:
        """``search`` for a caller that has checked ``user_id`` owns the session, or for
        whom it does not exist yet (a turn's ``hot_tail`` raises otherwise): the archive is
        not asked the same question twice. With ``embedding`` (made by ``embedder``) it
        also searches by meaning."""
        return await self._archive.search(query=TranscriptQuery(
            tenant_id=tenant_id, user_id=user_id, session_id=session_id, agent_id=agent_id,
            visibility=visibility, text=query, embedding=embedding, embedder=embedder,
            limit=limit, exclude_current=exclude_current))

    async def hot_tail(
        self, *, tenant_id: str, session_id: str, user_id: str
    ) -> tuple[SessionInfo | None, list[SessionEvent]]:
        """The session's recent events for a turn; a new session is (None, [])."""
        # The Redis tail is read while the archive answers; the info is awaited here, not in
        # a task of its own, so inside a turn's shared reads it is first in the queue: the
        # transcript and compaction reads wait on it, the other layers' reads do not.
        tail = asyncio.ensure_future(self._read_tail(tenant_id, session_id))
        try:
            info = await self._archive.info(tenant_id=tenant_id, session_id=session_id)
        except BaseException:
            tail.cancel()
            raise
        cached = await tail
        if info is None:
            return None, []
        if info.user_id != user_id:
            raise NotFound(f"no session {session_id!r}")
        if cached is not None and is_complete(cached, last_seq=info.last_seq,
                                               max_len=self._tail_len):
            return info, cached
        rebuilt = self._derived(await self._archive.tail(
            tenant_id=tenant_id, session_id=session_id, n=self._tail_len))
        try:
            await self._tail.replace(tenant_id=tenant_id, session_id=session_id, events=rebuilt)
        except Exception as exc:
            log.warning("session tail rebuild could not be cached", exc_info=True)
            degraded.note("redis", exc)
        return info, rebuilt

    async def as_of(self, *, tenant_id: str, session_id: str, user_id: str, seq: int | None,
                    at: datetime) -> tuple[SessionInfo | None, list[SessionEvent]]:
        """``hot_tail`` as a past turn read it, from the archive (a replay; nothing is
        cached): the ``tail_len`` events up to ``seq`` (None, a turn recorded before it was
        kept: up to the session's last), less any made after ``at``."""
        info = await self._archive.info(tenant_id=tenant_id, session_id=session_id)
        if info is None:
            return None, []
        if info.user_id != user_id:
            raise NotFound(f"no session {session_id!r}")
        last = info.last_seq if seq is None else min(seq, info.last_seq)
        events = await self._archive.events(tenant_id=tenant_id, session_id=session_id,
                                            after_seq=max(0, last - self._tail_len),
                                            limit=self._tail_len)
        return info, self._derived([e for e in events if e.seq <= last and (
            e.created_at is None or e.created_at <= at)])

    async def _read_tail(self, tenant_id: str, session_id: str) -> list[SessionEvent] | None:
        try:
            return await self._tail.read(tenant_id=tenant_id, session_id=session_id)
        except Exception as exc:
            log.warning("session tail read failed; using the archive", exc_info=True)
            degraded.note("redis", exc)
            return None
