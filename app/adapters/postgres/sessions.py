"""The durable session archive (``SessionArchive``): sessions and their ordered events.

- ``append`` is one transaction: an upsert of the session row that also allocates the new
  sequence numbers (``last_seq = last_seq + n`` under the row lock taken by ON CONFLICT, so
  concurrent appends get disjoint, contiguous ranges), then one INSERT of all events.
  The first write fixes the owner; a write by another user raises ``NotFound`` (the same
  answer as a missing session: no existence oracle).
- ``append_once`` is ``append`` plus a ``turn_appends`` row (PK tenant, turn_id) in the same
  transaction: a turn found recorded appends nothing; two attempts racing past that check
  meet on the primary key (``ON CONFLICT DO NOTHING`` waits for the other to commit), and the
  loser rolls back its events and reads the winner's row.
- ``tail(n)`` is the last ``n`` events in ascending order; ``events(after_seq, limit)`` pages.
Every statement filters on ``tenant_id`` and runs in ``tenant_tx`` (RLS), twice bounded.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from app.adapters.postgres.codec import dumps, vector_literal
from app.adapters.postgres.db import Database, Row, Sql, Tx
from app.core import fts
from app.core.errors import Conflict, NotFound
from app.core.model import SessionEvent, SessionInfo, TranscriptHit, Visibility
from app.ports import NewEvent, SessionOwner, TranscriptQuery, TurnAppend

_SESSION_COLS = "tenant_id, session_id, user_id, agent_id, parent_session_id, last_seq"
_EVENT_COLS = "seq, type, role, content, call_id, name, arguments, is_error, created_at"

INFO_SQL = f"""
SELECT {_SESSION_COLS} FROM sessions WHERE tenant_id = :tenant_id AND session_id = :session_id
"""  # noqa: S608 - constant fragments, values are bound
# The WHERE on DO UPDATE makes a foreign owner's session return no row (-> NotFound).
ALLOCATE_SQL = f"""
INSERT INTO sessions AS s (tenant_id, session_id, user_id, agent_id, parent_session_id, last_seq)
VALUES (:tenant_id, :session_id, :user_id, :agent_id, :parent_session_id, :n)
ON CONFLICT (tenant_id, session_id) DO UPDATE
    SET last_seq = s.last_seq + EXCLUDED.last_seq, updated_at = now()
    WHERE s.user_id = EXCLUDED.user_id
RETURNING {", ".join("s." + c for c in _SESSION_COLS.split(", "))}
"""  # noqa: S608 - constant fragments, values are bound
INSERT_EVENTS_SQL = """
INSERT INTO session_events
    (tenant_id, session_id, seq, type, role, content, call_id, name, arguments, is_error,
     search_text)
SELECT :tenant_id, :session_id, e.seq, e.type, e.role, e.content, e.call_id, e.name,
       CAST(e.arguments AS jsonb), e.is_error, e.search_text
FROM unnest(CAST(:seqs AS integer[]), CAST(:types AS text[]), CAST(:roles AS text[]),
            CAST(:contents AS text[]), CAST(:call_ids AS text[]), CAST(:names AS text[]),
            CAST(:arguments AS text[]), CAST(:is_errors AS boolean[]),
            CAST(:search_texts AS text[]))
     AS e(seq, type, role, content, call_id, name, arguments, is_error, search_text)
RETURNING seq, created_at
"""
EVENTS_SQL = f"""
SELECT {_EVENT_COLS} FROM session_events
WHERE tenant_id = :tenant_id AND session_id = :session_id AND seq > :after_seq
ORDER BY seq LIMIT :limit
"""  # noqa: S608 - constant fragments, values are bound
TAIL_SQL = f"""
SELECT {_EVENT_COLS} FROM (
    SELECT {_EVENT_COLS} FROM session_events
    WHERE tenant_id = :tenant_id AND session_id = :session_id
    ORDER BY seq DESC LIMIT :n
) AS last_n ORDER BY seq
"""  # noqa: S608 - constant fragments, values are bound
# Which sessions a turn may read, by visibility; always only the caller's own sessions. A
# session that does not exist yet (the first turn of a new one) opens what its request would:
# no tree, the request's agent, or all of the user's sessions.
VISIBLE_SQL = {
    Visibility.SELF: """
SELECT session_id FROM sessions
WHERE tenant_id = :tenant_id AND session_id = :session_id AND user_id = :user_id
""",
    Visibility.TREE: """
WITH RECURSIVE tree AS (
    SELECT session_id FROM sessions
    WHERE tenant_id = :tenant_id AND session_id = :session_id AND user_id = :user_id
    UNION
    SELECT s.session_id FROM sessions s JOIN tree t ON s.parent_session_id = t.session_id
    WHERE s.tenant_id = :tenant_id AND s.user_id = :user_id
)
SELECT session_id FROM tree LIMIT 1000
""",
    Visibility.AGENT: """
SELECT session_id FROM sessions
WHERE tenant_id = :tenant_id AND user_id = :user_id
  -- the existing session's agent (NULL included: hence the one-element array), else the
  -- request's
  AND agent_id IS NOT DISTINCT FROM (coalesce(
      (SELECT ARRAY[agent_id] FROM sessions
       WHERE tenant_id = :tenant_id AND session_id = :session_id AND user_id = :user_id),
      ARRAY[CAST(:agent_id AS text)]))[1]
ORDER BY updated_at DESC LIMIT 1000
""",
    Visibility.ALL: """
SELECT session_id FROM sessions WHERE tenant_id = :tenant_id AND user_id = :user_id
ORDER BY updated_at DESC LIMIT 1000
""",
}
_OTHER_THAN_CURRENT = """
  AND NOT (CAST(:exclude_current AS boolean)
           AND e.session_id IS NOT DISTINCT FROM CAST(:session_id AS text))"""
# The visible sessions and the search in one statement: one round trip per ranker. Words
# match exactly (``tsv``: CJK bigrams, identifiers) or stemmed (``tsv_en``); an event scores
# the better of the two, as knowledge chunks do.
SEARCH_SQL = {v: f"""
SELECT e.session_id, {", ".join("e." + c for c in _EVENT_COLS.split(", "))},
       greatest(ts_rank_cd(e.tsv, q), ts_rank_cd(e.tsv_en, en)) AS rank
FROM session_events e, to_tsquery('simple', :tsquery) AS q,
     to_tsquery('english', :tsquery) AS en
WHERE e.tenant_id = :tenant_id AND e.session_id IN ({visible}){_OTHER_THAN_CURRENT}
  AND (e.tsv @@ q OR e.tsv_en @@ en)
ORDER BY rank DESC, e.session_id, e.seq LIMIT :limit
""" for v, visible in VISIBLE_SQL.items()}  # noqa: S608 - constant fragments, values are bound
# By meaning: an exact scan of the visible sessions' events that this embedder embedded (no
# ANN index: one user's sessions are few enough, and an index filtered this narrowly returns
# too few rows; migration 0017).
NEAREST_SQL = {v: f"""
SELECT e.session_id, {", ".join("e." + c for c in _EVENT_COLS.split(", "))},
       e.embedding <=> CAST(:embedding AS vector) AS distance
FROM session_events e
WHERE e.tenant_id = :tenant_id AND e.session_id IN ({visible}){_OTHER_THAN_CURRENT}
  AND e.embedding IS NOT NULL AND e.embedder = :embedder
ORDER BY distance, e.session_id, e.seq LIMIT :limit
""" for v, visible in VISIBLE_SQL.items()}  # noqa: S608 - constant fragments, values are bound
UNEMBEDDED_SQL = """
SELECT seq, content FROM session_events
WHERE tenant_id = :tenant_id AND session_id = :session_id
  AND embedding IS NULL AND search_text <> ''
ORDER BY seq LIMIT :limit
"""
SET_EMBEDDINGS_SQL = """
UPDATE session_events e SET embedding = CAST(v.embedding AS vector), embedder = :embedder
FROM unnest(CAST(:seqs AS integer[]), CAST(:embeddings AS text[])) AS v(seq, embedding)
WHERE e.tenant_id = :tenant_id AND e.session_id = :session_id AND e.seq = v.seq
"""
TURN_APPEND_SQL = """
SELECT session_id, request_sha256, first_seq, n FROM turn_appends
WHERE tenant_id = :tenant_id AND turn_id = :turn_id
"""
RECORD_TURN_SQL = """
INSERT INTO turn_appends (tenant_id, turn_id, session_id, request_sha256, first_seq, n)
VALUES (:tenant_id, :turn_id, :session_id, :request_sha256, :first_seq, :n)
ON CONFLICT (tenant_id, turn_id) DO NOTHING
RETURNING true
"""
_INFO, _ALLOCATE, _INSERT = Sql(INFO_SQL), Sql(ALLOCATE_SQL), Sql(INSERT_EVENTS_SQL)
_TURN, _RECORD_TURN = Sql(TURN_APPEND_SQL), Sql(RECORD_TURN_SQL)
_SEARCH = {v: Sql(q) for v, q in SEARCH_SQL.items()}
_NEAREST = {v: Sql(q) for v, q in NEAREST_SQL.items()}
_UNEMBEDDED, _SET_EMBEDDINGS = Sql(UNEMBEDDED_SQL), Sql(SET_EMBEDDINGS_SQL)
_EVENTS, _TAIL = Sql(EVENTS_SQL), Sql(TAIL_SQL)


def _info(row: Row) -> SessionInfo:
    return SessionInfo(
        tenant_id=row.tenant_id,
        session_id=row.session_id,
        user_id=row.user_id,
        agent_id=row.agent_id,
        parent_session_id=row.parent_session_id,
        last_seq=row.last_seq,
    )


def _event(row: Row) -> SessionEvent:
    return SessionEvent(
        seq=row.seq,
        type=row.type,
        role=row.role,
        content=row.content,
        call_id=row.call_id,
        name=row.name,
        arguments=row.arguments,
        is_error=row.is_error,
        created_at=row.created_at,
    )


def _columns(events: Sequence[NewEvent], first_seq: int) -> dict[str, list[Any]]:
    return {
        "seqs": list(range(first_seq, first_seq + len(events))),
        "types": [e.type for e in events],
        "roles": [e.role for e in events],
        "contents": [e.content for e in events],
        "call_ids": [e.call_id for e in events],
        "names": [e.name for e in events],
        "arguments": [None if e.arguments is None else dumps(e.arguments) for e in events],
        "is_errors": [e.is_error for e in events],
        "search_texts": [fts.normalize(e.content) for e in events],
    }


async def _append(conn: Tx, tenant_id: str, session_id: str, owner: SessionOwner,
                  events: Sequence[NewEvent]) -> tuple[SessionInfo, list[SessionEvent]]:
    key = {"tenant_id": tenant_id, "session_id": session_id}
    row = await conn.fetchrow(_ALLOCATE, {
        **key,
        "user_id": owner.user_id,
        "agent_id": owner.agent_id,
        "parent_session_id": owner.parent_session_id,
        "n": len(events),
    })
    if row is None:
        raise NotFound(f"session {session_id!r} not found")
    info = _info(row)
    first_seq = info.last_seq - len(events) + 1
    if not events:
        return info, []
    result = await conn.fetch(_INSERT, {**key, **_columns(events, first_seq)})
    created = {r.seq: r.created_at for r in result}
    return info, [
        SessionEvent(
            seq=first_seq + i, type=e.type, role=e.role, content=e.content,
            call_id=e.call_id, name=e.name, arguments=e.arguments,
            is_error=e.is_error, created_at=created[first_seq + i],
        )
        for i, e in enumerate(events)
    ]


class _Raced(Exception):
    """Another attempt of the same turn recorded its append first."""


def _recorded(row: Row, turn_id: str, request_sha256: str) -> TurnAppend:
    if row.request_sha256 != request_sha256:
        raise Conflict(f"turn_id {turn_id!r} was already used by a different request")
    return TurnAppend(seqs=list(range(row.first_seq, row.first_seq + row.n)), stored=[],
                      fresh=False)


class PgSessionArchive:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def info(self, *, tenant_id: str, session_id: str) -> SessionInfo | None:
        params = {"tenant_id": tenant_id, "session_id": session_id}
        async with self._db.read_tx(tenant_id) as conn:
            row = await conn.fetchrow(_INFO, params)
        return _info(row) if row is not None else None

    async def append(
        self, *, tenant_id: str, session_id: str, owner: SessionOwner, events: Sequence[NewEvent]
    ) -> tuple[SessionInfo, list[SessionEvent]]:
        async with self._db.tenant_tx(tenant_id) as conn:
            return await _append(conn, tenant_id, session_id, owner, events)

    async def append_once(
        self, *, tenant_id: str, session_id: str, owner: SessionOwner,
        events: Sequence[NewEvent], turn_id: str, request_sha256: str
    ) -> TurnAppend:
        turn = {"tenant_id": tenant_id, "turn_id": turn_id}
        try:
            async with self._db.tenant_tx(tenant_id) as conn:
                prior = await conn.fetchrow(_TURN, turn)
                if prior is not None:
                    return _recorded(prior, turn_id, request_sha256)
                _, stored = await _append(conn, tenant_id, session_id, owner, events)
                if stored and not await conn.fetchval(_RECORD_TURN, {
                        **turn, "session_id": session_id, "request_sha256": request_sha256,
                        "first_seq": stored[0].seq, "n": len(stored)}):
                    raise _Raced  # rolls this transaction back, its events with it
                return TurnAppend(seqs=[e.seq for e in stored], stored=stored, fresh=True)
        except _Raced:
            async with self._db.read_tx(tenant_id) as conn:
                return _recorded(await conn.one(_TURN, turn), turn_id, request_sha256)

    async def events(
        self, *, tenant_id: str, session_id: str, after_seq: int, limit: int
    ) -> list[SessionEvent]:
        params = {"tenant_id": tenant_id, "session_id": session_id,
                  "after_seq": after_seq, "limit": limit}
        async with self._db.read_tx(tenant_id) as conn:
            return [_event(r) for r in await conn.fetch(_EVENTS, params)]

    async def search(self, *, query: TranscriptQuery) -> list[TranscriptHit]:
        if query.limit <= 0:
            return []
        tsquery = fts.tsquery(query.text)
        params = {"tenant_id": query.tenant_id, "session_id": query.session_id,
                  "user_id": query.user_id, "agent_id": query.agent_id,
                  "limit": query.limit, "exclude_current": query.exclude_current}
        async with self._db.read_tx(query.tenant_id) as conn:
            words = [] if tsquery is None else await conn.fetch(
                _SEARCH[query.visibility], {**params, "tsquery": tsquery})
            near = [] if query.embedding is None or query.embedder is None else \
                await conn.fetch(_NEAREST[query.visibility], {
                    **params, "embedding": list(query.embedding), "embedder": query.embedder})
        return [*(TranscriptHit(session_id=r.session_id, event=_event(r), rank=i,
                                ranker="fts") for i, r in enumerate(words, start=1)),
                *(TranscriptHit(session_id=r.session_id, event=_event(r), rank=i,
                                ranker="vector", similarity=1.0 - float(r.distance))
                  for i, r in enumerate(near, start=1))]

    async def unembedded(self, *, tenant_id: str, session_id: str, limit: int
                         ) -> list[tuple[int, str]]:
        params = {"tenant_id": tenant_id, "session_id": session_id, "limit": limit}
        async with self._db.read_tx(tenant_id) as conn:
            return [(r.seq, r.content) for r in await conn.fetch(_UNEMBEDDED, params)]

    async def set_embeddings(self, *, tenant_id: str, session_id: str,
                             embeddings: Sequence[tuple[int, Sequence[float]]], embedder: str
                             ) -> None:
        params = {"tenant_id": tenant_id, "session_id": session_id, "embedder": embedder,
                  "seqs": [seq for seq, _ in embeddings],
                  "embeddings": [vector_literal(v) for _, v in embeddings]}
        async with self._db.tenant_tx(tenant_id) as conn:
            await conn.execute(_SET_EMBEDDINGS, params)

    async def tail(self, *, tenant_id: str, session_id: str, n: int) -> list[SessionEvent]:
        params = {"tenant_id": tenant_id, "session_id": session_id, "n": n}
        async with self._db.read_tx(tenant_id) as conn:
            return [_event(r) for r in await conn.fetch(_TAIL, params)]
